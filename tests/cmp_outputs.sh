#!/usr/bin/env bash
# cmp_outputs.sh: every output of two nvlprof binaries byte-compared (stdout, stderr, status, files
# written) on the shipped traces, the bench shapes, a few an_gen jobs, the fuzz regression inputs
# and corrupted copies; for a change meant to keep behaviour (a speedup). A database written
# (*.sqlite) is compared by its `sqlite3 .dump` (the rows and schema), not its bytes: the page
# layout is libsqlite3's to choose.
# usage: tests/cmp_outputs.sh OLD_NVLPROF NEW_NVLPROF [AN_GEN]   (prints "N compared, N differ")
set -u
OLD=$(realpath "$1") NEW=$(realpath "$2")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GEN=${3:-$ROOT/build/tests/progs/an_gen}
T=$(mktemp -d /tmp/nvlp-cmp.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0 bad=0
# run NAME CMD...: one command with each binary in its own output folder, everything compared
run() {
	local name=$1 b out
	shift
	for b in old new; do
		out=$T/out.$b
		rm -rf "$out" && mkdir -p "$out"
		local bin=$OLD
		[ $b = new ] && bin=$NEW
		# @OUT@ in an argument: a file written in the output folder (same name both times)
		local args=("${@//@OUT@/$out}")
		(cd "$out" && timeout 300 "$bin" "${args[@]}" >"$out/stdout" 2>"$out/stderr"
			echo "status $?" >"$out/status")
		# export's summary line has its own timings: the one thing allowed to differ
		sed -i -e "s#$out#@OUT@#g" -e 's/ in [0-9.]* s (load and analysis [0-9.]* s)/ in T s (load and analysis T s)/' \
			"$out/stdout" "$out/stderr"
		local db
		for db in "$out"/*.sqlite; do
			[ -f "$db" ] || continue
			sqlite3 "$db" .dump >"$db.dump" 2>&1 || echo "sqlite3 .dump failed" >>"$db.dump"
			rm -f "$db"
			# a large one (the bench shapes: ~1 GB of text) kept as its hash and line count
			[ "$(stat -c %s "$db.dump")" -le 10000000 ] ||
				echo "$(sha256sum <"$db.dump" | cut -d' ' -f1) $(wc -l <"$db.dump") lines" >"$db.dump"
		done
	done
	n=$((n + 1))
	if ! diff -r -q "$T/out.old" "$T/out.new" >/dev/null; then
		bad=$((bad + 1))
		echo "DIFFERS: $name: $*"
		diff -r "$T/out.old" "$T/out.new" | head -5
	fi
}
# all NAME DIR [DIR2]: the commands of one job (DIR2: the other side of a diff)
all() {
	local name=$1 d=$2 d2=${3:-$2}
	run "$name" info "$d"
	run "$name" dump "$d"
	run "$name" dump --json "$d"
	run "$name" report "$d"
	run "$name" report -j 1 "$d"
	run "$name" report --json "$d"
	run "$name" report --html @OUT@/r.html "$d"
	run "$name" diff "$d" "$d2"
	run "$name" diff "$d2" "$d"
	run "$name" diff --json "$d" "$d2"
	run "$name" export --format chrome -o @OUT@/t.json "$d"
	run "$name" export --format perfetto -o @OUT@/t.pftrace "$d"
	run "$name" export --format sqlite -o @OUT@/t.sqlite "$d"
}
J=$T/jobs
mkdir -p "$J"
gen() { # gen NAME ARGS...
	local name=$1
	shift
	"$GEN" -o "$J/$name" "$@" >/dev/null 2>&1 || echo "an_gen $name failed"
}
gen r8 --ranks 8 --records 1000000
gen small --ranks 2 --small-allreduce 2000000
gen base --ranks 4
gen fallback --ranks 4 --fallback
gen late --ranks 4 --late-rank 2 --late-ms 5
gen thrash --ranks 2 --thrash --sym-records
gen fsdp --ranks 8 --fsdp --nvswitch
gen hosts --ranks 4 --hosts 2 --clock-err-ms 3
gen kill --ranks 4 --kill-rank 1
gen staged --ranks 2 --staged --interleave
gen sweep --ranks 2 --sweep
gen graph --ranks 2 --graph-loop
gen failat --ranks 2 --fail-at 5
gen drop --ranks 4 --drop-rank 3 --no-links
# the bench shapes: the commands that read every record
for j in r8 small; do
	run "$j" info "$J/$j"
	run "$j" report -j 1 "$J/$j"
	run "$j" report "$J/$j"
	run "$j" report --json "$J/$j"
	run "$j" diff "$J/small" "$J/$j"
	run "$j" dump --json "$J/$j"
	run "$j" export --format sqlite -o @OUT@/t.sqlite "$J/$j"
done
for j in base fallback late thrash fsdp hosts kill staged sweep graph failat drop; do
	all "$j" "$J/$j" "$J/base"
done
for d in "$ROOT"/examples/traces/*/; do
	all "$(basename "$d")" "$d" "$ROOT/examples/traces/ddp_healthy"
done
# fuzz regression inputs, each as one file of a job
for f in "$ROOT"/tests/fuzz/regress/*; do
	case "$f" in *README*) continue ;; esac
	d=$J/fz-$(basename "$f")
	mkdir -p "$d" && cp "$f" "$d/r0.nvlp"
	all "fz-$(basename "$f")" "$d" "$J/base"
done
# corrupted copies of a shipped trace: cut, a flipped byte in the middle, a zeroed block
src=$(ls "$ROOT"/examples/traces/ddp_healthy/*.nvlp | head -1)
sz=$(stat -c %s "$src")
for cut in 100 1000 $((sz / 3)) $((sz / 2)) $((sz - 7)); do
	d=$J/cut-$cut && mkdir -p "$d" && head -c "$cut" "$src" >"$d/r0.nvlp"
	all "cut-$cut" "$d" "$J/base"
done
for at in 64 $((sz / 4)) $((sz / 2)) $((3 * sz / 4)); do
	d=$J/flip-$at && mkdir -p "$d" && cp "$src" "$d/r0.nvlp"
	printf '\xa5' | dd of="$d/r0.nvlp" bs=1 seek="$at" conv=notrunc status=none
	all "flip-$at" "$d" "$J/base"
	d=$J/zero-$at && mkdir -p "$d" && cp "$src" "$d/r0.nvlp"
	dd if=/dev/zero of="$d/r0.nvlp" bs=1 count=200 seek="$at" conv=notrunc status=none
	all "zero-$at" "$d" "$J/base"
done
echo "$n compared, $bad differ"
exit $((bad > 0))

#!/usr/bin/env bash
# test_regress.sh: replays the fuzzer's regression inputs (tests/fuzz/regress/) through the normal
# CLI: info, dump, report, diff, export (perfetto, chrome, sqlite) and the HTML pages neither crash (status < 128) nor hang, and a complaint's first
# line names the file. An input holds one or two traces, one after the other (as the fuzzer writes
# them: each starts with its preamble); they are written as the two files of one job.
# FUZZ_REGRESS_DIR=tests/fuzz/pending replays the inputs not fixed yet.
. "$(dirname "$0")/../lib.sh"
# a sanitizer's report is a crash too
export ASAN_OPTIONS="${ASAN_OPTIONS}:abort_on_error=1" UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:abort_on_error=1"
LIMIT=${FUZZ_REGRESS_TIMEOUT:-60}
# split IN DIR: the traces of IN as DIR/job/r0.nvlp [r1.nvlp], the last one again as DIR/solo/r0.nvlp
split() {
	local in=$1 d=$2
	mkdir -p "$d/job" "$d/solo"
	local offs
	offs=$(LC_ALL=C grep -obUaP 'NVLPROF\x00' "$in" | cut -d: -f1 | awk '$1 > 0' | head -1)
	if [ -n "$offs" ]; then
		head -c "$offs" "$in" >"$d/job/r0.nvlp"
		tail -c +$((offs + 1)) "$in" >"$d/job/r1.nvlp"
		cp "$d/job/r1.nvlp" "$d/solo/r0.nvlp"
	else
		cp "$in" "$d/job/r0.nvlp"
		cp "$in" "$d/solo/r0.nvlp"
	fi
}
# one check over every input and command: each failing run is named, the passing ones counted
n=0 runs=0 bad=0 named=0
for in in "${FUZZ_REGRESS_DIR:-$ROOT/tests/fuzz/regress}"/*; do
	[ -f "$in" ] || continue
	case "$in" in *README*) continue ;; esac
	name=$(basename "$in")
	d="$T/$name"
	split "$in" "$d"
	n=$((n + 1))
	mkdir -p "$d/out"
	for cmd in "info $d/job" "dump $d/job" "dump --json $d/job" "report $d/job" "report --json $d/job" \
		"diff $d/solo $d/job" "export --format perfetto -o $d/out/t.pftrace $d/job" \
		"export --format chrome -o $d/out/t.json $d/job" "export --format chrome -o $d/out/ch/ $d/job" \
		"export --format sqlite -o $d/out/t.sqlite $d/job" "report --html $d/out/t.html $d/job" \
		"diff --html $d/out/d.html $d/solo $d/job"; do
		timeout -s KILL "$LIMIT" "$CLI" $cmd >/dev/null 2>"$d/err"
		rc=$?
		runs=$((runs + 1))
		if [ "$rc" -ge 128 ]; then
			bad=$((bad + 1))
			echo "    $name: nvlprof $cmd: crashed or hung (status $rc)"
			sed 's/^/    /' "$d/err" | head -20
			continue
		fi
		# export's summary line ("FILE written: N records ...") is not a complaint
		first=$(grep -v -m1 ' written: [0-9]* records' "$d/err")
		if [ -n "$first" ]; then
			case "$first" in
			*"$d/job/r0.nvlp"* | *"$d/job/r1.nvlp"* | *"$d/solo/r0.nvlp"*) named=$((named + 1)) ;;
			*) bad=$((bad + 1)); echo "    $name: nvlprof $cmd: first line of stderr does not name the file: $first" ;;
			esac
		fi
	done
done
check "fuzz regression inputs present" test "$n" -gt 0
if [ "$bad" -eq 0 ]; then
	pass "$n inputs x 12 commands ($runs runs): none crashed or hung, each complaint's first line names the file ($named complained)"
else fail "$bad of $runs runs over $n inputs crashed, hung or complained without naming the file (named above)"; fi
exit $((FAILED > 0))

#!/usr/bin/env bash
# test_partial.sh: report --partial per node, then merge: the report is the one `report` makes over
# all the traces, byte for byte (text, JSON and what goes to stderr), on a 4,096-rank job in 16
# nodes, on every shipped and recorded trace directory split per file and on an_gen's scenarios;
# bad partials get one line each.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
# same NAME PARTS_DIR TRACE_ARGS...: merge of PARTS_DIR/*.part (in reverse order: the order given
# does not matter) equals report over TRACE_ARGS, text and JSON, stdout, stderr and status
same() {
	local name=$1 pd=$2 fmt a b
	shift 2
	for fmt in text json; do
		local o=()
		[ $fmt = json ] && o=(--json)
		"$CLI" report "${o[@]}" "$@" >"$T/r.out" 2>"$T/r.err"
		a=$?
		# shellcheck disable=SC2046
		"$CLI" merge "${o[@]}" $(ls "$pd"/*.part | sort -r) >"$T/m.out" 2>"$T/m.err"
		b=$?
		if [ $a = $b ] && [ -s "$T/r.out" ] && cmp -s "$T/r.out" "$T/m.out" && cmp -s "$T/r.err" "$T/m.err"; then
			pass "$name: merge = report ($fmt)"
		else
			fail "$name: merge differs from report ($fmt; status $a $b)"
			diff "$T/r.out" "$T/m.out" | head -5 | sed 's/^/    /'
			diff "$T/r.err" "$T/m.err" | head -5 | sed 's/^/    /'
		fi
	done
}
# per_file NAME DIR [KEY]: one partial per trace file of DIR, into $T/p_KEY (KEY: DIR's name)
per_file() {
	local pd="$T/p_${3:-$(basename "$2")}" i=0 f
	rm -rf "$pd" && mkdir -p "$pd"
	for f in "$2"/*.nvlp; do
		"$CLI" report --partial "$pd/$i.part" "$f" >/dev/null 2>"$T/pf.err" || { fail "$1: report --partial $f: $(head -1 "$T/pf.err")"; return; }
		i=$((i + 1))
	done
	same "$1" "$pd" "$2"
}

# ---- a 4,096-rank job (8 ranks per host, rank 5 late by 5 ms) in 16 nodes of 32 hosts ----
J="$T/job4k"
"$GEN" -o "$J/all" --ranks 4096 --hosts 512 --steps 6 --late-rank 5 --late-ms 5 >/dev/null 2>&1 || fail "an_gen 4096 ranks"
for h in $(seq 0 511); do
	mkdir -p "$J/n$((h / 32))"
	mv "$J/all/node$h-"*.nvlp "$J/n$((h / 32))/"
done
check_eq "4096: 16 nodes of 256 traces" "16 256" "$(ls -d "$J"/n* | wc -l) $(ls "$J/n7" | wc -l)"
mkdir -p "$J/parts"
ok=1
for n in $(seq 0 15); do
	"$CLI" report --partial "$J/parts/n$n.part" "$J/n$n" >>"$T/sizes" 2>"$T/p.err" || { ok=0; fail "4096: report --partial n$n: $(head -1 "$T/p.err")"; }
done
[ $ok = 1 ] && pass "4096: a partial per node"
same 4096 "$J/parts" $(for n in $(seq 0 15); do echo "$J/n$n"; done)
grep -q "straggler: Rank 5 arrives last" "$T/m.out" 2>/dev/null || grep -q '"straggler"' "$T/m.out" &&
	pass "4096: the merged report names the straggler" || fail "4096: the merged report names the straggler"
# the partials are a fraction of the traces they hold (19.6% measured; fails above a third)
tb=$(cat "$J"/n*/*.nvlp | wc -c) pb=$(cat "$J"/parts/*.part | wc -c)
check "4096: partials ($pb bytes) under a third of the traces ($tb bytes)" test $((pb * 3)) -lt "$tb"
check "4096: report --partial says the size and share" grep -q "^partial .*n0.part: 256 process(es), [0-9]* bytes of traces in [0-9]* bytes ([0-9.]*%)$" "$T/sizes"

# ---- every shipped and recorded trace directory (real GPU traces), one partial per file ----
for d in "$ROOT"/examples/traces/*/ "$ROOT"/tests/analyzer/traces/*/; do
	d=${d%/}
	per_file "$(basename "$d")" "$d"
done

# ---- an_gen's scenarios, one partial per file: hangs, Python stacks, managed memory and symbols,
# a launcher that is no rank, dropped records, mismatched calls, graph replays, copies ----
g=0
for args in "--ranks 8 --hosts 2 --kill-rank 3" "--ranks 4 --python" "--ranks 2 --thrash --sym-records" \
	"--ranks 4 --launcher" "--ranks 4 --drop-rank 1" "--ranks 4 --mismatch dtype:7" "--graph-loop" \
	"--ranks 2 --staged" "--ranks 8 --hosts 4 --fsdp --clock-err-ms 2" "--fail-at 9" "--ranks 4 --no-gpu"; do
	g=$((g + 1))
	# shellcheck disable=SC2086
	"$GEN" -o "$T/gen$g" $args >/dev/null 2>&1 || { fail "an_gen $args"; continue; }
	per_file "an_gen $args" "$T/gen$g" "gen$g"
done
# one trace unreadable among a node's: skipped in both, with the same warning
mkdir -p "$T/bad/a" "$T/bad/b" "$T/badp"
cp "$T"/gen1/node0-*.nvlp "$T/bad/a/" && cp "$T"/gen1/node1-*.nvlp "$T/bad/b/"
head -c 300 "$T/gen1/node1-4004.nvlp" >"$T/bad/b/node1-4004.nvlp"
printf 'not a trace at all' >"$T/bad/a/junk.nvlp"
"$CLI" report --partial "$T/badp/a.part" "$T/bad/a" >/dev/null 2>&1 && "$CLI" report --partial "$T/badp/b.part" "$T/bad/b" >/dev/null 2>&1 ||
	fail "report --partial of a node with a damaged trace"
same "damaged traces" "$T/badp" "$T/bad/a" "$T/bad/b"

# ---- bad partials: one line naming the file and what is wrong, status 2 ----
P="$J/parts/n3.part"
# bad NAME PATTERN MERGE_ARGS...: merge fails with status 2 and one stderr line matching PATTERN
bad() {
	local name=$1 pat=$2 rc
	shift 2
	"$CLI" merge "$@" >"$T/b.out" 2>"$T/b.err"
	rc=$?
	if [ $rc = 2 ] && [ "$(wc -l <"$T/b.err")" = 1 ] && grep -qE "$pat" "$T/b.err" && [ ! -s "$T/b.out" ]; then
		pass "bad input: $name"
	else
		fail "bad input: $name (status $rc): $(head -3 "$T/b.err")"
	fi
}
head -c 20000 "$P" >"$T/cut.part"
bad "partial cut short" "^nvlprof: merge: .*cut.part is cut short or corrupt" "$T/cut.part"
head -c 10 "$P" >"$T/tiny.part"
bad "partial cut inside its header" "tiny.part is cut short \\(no whole header\\)" "$T/tiny.part"
cp "$P" "$T/flip.part"
printf '\x55\xaa' | dd of="$T/flip.part" bs=1 seek=5000 conv=notrunc status=none
bad "partial corrupt" "flip.part is cut short or corrupt \(zstd: " "$T/flip.part"
cp "$P" "$T/v2.part"
printf '\x02' | dd of="$T/v2.part" bs=1 seek=8 conv=notrunc status=none
bad "other version" "v2.part is a version 2 partial; this nvlprof reads version 1" "$T/v2.part"
cp "$P" "$T/lay.part"
printf '\x00\x00' | dd of="$T/lay.part" bs=1 seek=12 conv=notrunc status=none
bad "other build" "lay.part was written by another nvlprof build \(layout " "$T/lay.part"
bad "a trace given to merge" "is a trace, not a partial" "$J/n0/node0-4000.nvlp"
bad "not a partial" "is not an nvlprof partial" "$ROOT/README.md"
bad "missing partial" "cannot read $T/none.part: No such file" "$T/none.part"
bad "a partial twice" "rank [0-9]+ is in both .*n3.part and .*n3.part" "$P" "$P"
cp "$J/parts/n3.part" "$T/copy.part"
bad "ranks in two partials" "rank 768 is in both .*copy.part and .*n3.part|rank 768 is in both .*n3.part and .*copy.part" "$T/copy.part" "$J/parts/n4.part" "$P"
bad "partials of jobs of other sizes" "are from different jobs \(world size 4096 and 8\)" "$P" "$T/p_gen1/0.part"
bad "partials of jobs with no communicator in common" "are from different jobs \(no communicator in common\)" \
	"$T/p_ddp_healthy/0.part" "$T/p_ddp_straggler/1.part"
"$CLI" report --partial "$T/x.part" --json "$J/n0" >/dev/null 2>"$T/pj.err"
check_eq "report --partial refuses --json (status, one line)" "2 1" "$? $(wc -l <"$T/pj.err")"
[ ! -e "$T/x.part" ] && pass "report --partial --json writes no partial" || fail "report --partial --json wrote a partial"
"$CLI" report --partial /nonexistent/dir/x.part "$J/n0" >/dev/null 2>"$T/pw.err"
check_eq "report --partial to an unwritable place: status 2, one line" "2 1" "$? $(wc -l <"$T/pw.err")"
"$CLI" merge >/dev/null 2>&1
check_eq "merge without partials: usage error" "2" "$?"
check "merge -o writes the report" "$CLI" merge -o "$T/mo.txt" "$J"/parts/n*.part
check "merge -o: the text report" grep -q "^nvlprof report: 4096 processes on 512 hosts" "$T/mo.txt"
[ "$FAILED" = 0 ]

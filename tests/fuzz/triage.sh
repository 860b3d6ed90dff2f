#!/usr/bin/env bash
# triage.sh: replays fuzz crashers with the fuzz build and prints each one's site, one line per
# input: "FILE<TAB>KIND<TAB>SITE" (KIND: the sanitizer's error, SITE: its top frame in our code).
#   tests/fuzz/triage.sh FUZZ_BIN CRASHER...
bin=$1; shift
for f in "$@"; do
	# every command, as the harness ran them before it picked one per input
	out=$(NVLP_FUZZ_EVERY=1 ASAN_OPTIONS=detect_leaks=1:malloc_context_size=2 timeout -s KILL 120 "$bin" -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=64 -runs=1 "$f" 2>&1)
	rc=$?
	kind=$(echo "$out" | grep -m1 -oE "runtime error: .*|ERROR: [A-Za-z]+(Sanitizer)?: [A-Za-z -]+" |
		sed -E 's/^ERROR: //; s/-?[0-9][0-9.e+]*/N/g; s/0xN[0-9a-f]*/N/g; s/ (on|at|for|trying) .*//' | cut -c1-90)
	site=$(echo "$out" | grep -m1 -oE '(analyzer|trace)/[a-z_]+\.c:[0-9]+(:[0-9]+)?' )
	fn=$(echo "$out" | grep -m1 -E '#[0-9]+ .* in [a-z_]+ .*(analyzer|trace)/' | sed -E 's/.* in ([a-zA-Z_0-9]+) .*/\1/')
	[ -n "$kind" ] || kind="no report (status $rc)"
	printf '%s\t%s\t%s %s\n' "$(basename "$f")" "$kind" "${fn:-?}" "${site:-?}"
done

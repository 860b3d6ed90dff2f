#!/usr/bin/env bash
# run.sh: runs every CPU test (unit binaries and shell tests) and prints "N passed, N failed, N skipped".
# A check prints "PASS: ", "FAIL: " or "SKIP: " at the start of a line; a skip is neither passed nor
# failed. A suite with no check at all (not even a skip) fails. NVLP_TEST_TIMES=FILE: every suite's
# seconds into FILE, slowest first.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
log=$(mktemp)
passed=0 failed=0 skipped=0
times=""
run_one() {
	local name=$1; shift
	echo "== $name"
	local t0=$SECONDS
	timeout 600 "$@" >"$log" 2>&1
	local rc=$?
	times="$times$((SECONDS - t0)) $name
"
	cat "$log"
	local p f s
	p=$(grep -c '^PASS: ' "$log")
	f=$(grep -c '^FAIL: ' "$log")
	s=$(grep -c '^SKIP: ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL: $name exited with status $rc"
		f=1
	fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
		echo "FAIL: $name ran no check"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
}
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_one "$(basename "$t")" "$t"
done
for t in tests/*/test_*.sh; do
	[ -f "$t" ] || continue
	run_one "$t" env BUILD="$BUILD" bash "$t"
done
rm -f "$log"
echo
echo "slowest suites (s): $(printf '%s' "$times" | sort -rn | head -5 | tr '\n' ' ')"
[ -n "${NVLP_TEST_TIMES:-}" ] && printf '%s' "$times" | sort -rn >"$NVLP_TEST_TIMES"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]

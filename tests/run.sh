#!/usr/bin/env bash
# run.sh: runs every CPU test (unit binaries and shell tests) and prints "N passed, N failed".
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
log=$(mktemp)
passed=0 failed=0
run_one() {
	local name=$1; shift
	echo "== $name"
	timeout 600 "$@" >"$log" 2>&1
	local rc=$?
	cat "$log"
	local p f
	p=$(grep -c '^PASS: ' "$log")
	f=$(grep -c '^FAIL: ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL: $name exited with status $rc"
		f=1
	fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL: $name ran no check"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
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
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

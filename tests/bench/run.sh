#!/usr/bin/env bash
# run.sh: runs every $BUILD/bench/bench_* program and tests/bench/bench_*.sh script and prints their output (make bench).
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."/.. || exit 1
status=0
found=0
for b in "$BUILD"/bench/bench_*; do
	[ -x "$b" ] || continue
	found=1
	echo "== $(basename "$b")"
	"$b" || { echo "$(basename "$b") failed with status $?"; status=1; }
done
for b in tests/bench/bench_*.sh; do
	[ -f "$b" ] || continue
	echo "== $(basename "$b")"
	BUILD="$BUILD" bash "$b" || { echo "$(basename "$b") failed with status $?"; status=1; }
done
[ "$found" = 1 ] || { echo "no benchmarks in $BUILD/bench (run make bench)"; exit 1; }
exit $status

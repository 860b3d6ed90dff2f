#!/usr/bin/env bash
# test_run_many.sh: run_many.sh sums the processes' executions, counts a crasher (exit 1) and a clean run (exit 0), on toy libFuzzer targets.
. "$(dirname "$0")/../lib.sh"
RM="$ROOT/tests/fuzz/run_many.sh"
# without a binary it says so and exits 2 (checked with or without clang)
(cd "$T" && "$RM" -b "$T/none" -s "$T" -t 1 -o "$T/o0") >"$T/o0.txt" 2>&1
check_eq "no binary: exit 2" 2 $?
check "no binary: names the problem" grep -q "no fuzz_trace binary" "$T/o0.txt"
CC_FUZZ=${FUZZ_CC:-clang}
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$T/probe.c"
if ! "$CC_FUZZ" -fsanitize=fuzzer "$T/probe.c" -o "$T/probe" >/dev/null 2>&1; then
	skip "toy campaigns: no clang with libFuzzer here"
	exit $((FAILED > 0))
fi
# a target that crashes on one input only, recognised by its hash (so the fuzzer cannot make it:
# only the seed holding it crashes), and finds new coverage on some others
cat >"$T/toy.c" <<'EOF'
#include <stdint.h>
#include <stdlib.h>
static volatile int sink;
int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the input */
	for (unsigned long i = 0; i < n; i++)
		h = (h ^ d[i]) * 0x100000001b3ull;
	if (h == 0x68d0e42f708c1904ull) /* "CRASH-ME-NOW" */
		abort();
	if (n > 2 && d[0] == 'x' && d[1] == 'y')
		sink++;
	return 0;
}
EOF
check "toy target builds" "$CC_FUZZ" -fsanitize=fuzzer,address "$T/toy.c" -o "$T/toy"
mkdir -p "$T/ok" "$T/bad"
printf 'hello' >"$T/ok/a"
printf 'xyz' >"$T/ok/b"
cp "$T/ok/"* "$T/bad/"
printf 'CRASH-ME-NOW' >"$T/bad/c"
"$RM" -b "$T/toy" -s "$T/ok" -j 2 -t 3 -o "$T/o1" >"$T/o1.txt" 2>&1
check_eq "clean campaign: exit 0" 0 $?
line=$(tail -1 "$T/o1.txt")
n=$(echo "$line" | sed -nE 's/.*: ([0-9]+) executions.*/\1/p')
check "clean campaign: executions summed ($line)" test "${n:-0}" -gt 100
check "clean campaign: 0 crashes" grep -q " 0 crashes, 0 timeouts/hangs, 0 OOMs, 0 leaks" "$T/o1.txt"
check "clean campaign: merged coverage printed" grep -qE "merged corpus: cov [0-9]+ ft [0-9]+ \([0-9]+ inputs\)" "$T/o1.txt"
check "clean campaign: summary.txt holds the line" grep -q "merged corpus: cov" "$T/o1/summary.txt"
check "clean campaign: one log per process" test -f "$T/o1/logs/1.0.log" -a -f "$T/o1/logs/2.0.log"
"$RM" -b "$T/toy" -s "$T/bad" -j 2 -t 3 -m 0 -o "$T/o2" >"$T/o2.txt" 2>&1
check_eq "crashing campaign: exit 1" 1 $?
check "crashing campaign: crash counted" grep -qE " [1-9][0-9]* crashes" "$T/o2.txt"
check "crashing campaign: crasher kept" sh -c "cat '$T'/o2/crashes/crash-* | grep -q CRASH-ME-NOW"
exit $((FAILED > 0))

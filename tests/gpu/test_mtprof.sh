#!/usr/bin/env bash
# test_mtprof.sh: tests/gpu/mtprof.c (the per-object CPU sampler the cost runs use where the GPU
# machine has no perf) on a CPU program of known shape: 3/4 of its sampled CPU in a shared
# library's loop, 1/4 in the executable's own; MTPROF_FOCUS's call chains into that library; a bad
# MTPROF_HZ, a focus naming nothing loaded and an unwritable output each get one line and no crash.
set -u
cd "$(dirname "$0")/../.."
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
pass() { echo "PASS: mtprof: $*"; }
fail() { echo "FAIL: mtprof: $*"; fails=$((fails + 1)); }
CC=${CC:-cc}
if ! $CC -O2 -Wall -Wextra -Werror -shared -fPIC -o "$t/mtprof.so" tests/gpu/mtprof.c -lrt 2>"$t/cc.log" ||
	! $CC -O1 -shared -fPIC -o "$t/libspin.so" tests/gpu/mtprof_test/spin_lib.c ||
	! $CC -O1 -o "$t/spin" tests/gpu/mtprof_test/spin_main.c -L"$t" -lspin -Wl,-rpath,"$t" -ldl; then
	fail "does not build: $(head -3 "$t/cc.log")"
	exit 1
fi
LD_PRELOAD=$t/mtprof.so "$t/spin" "$t/out.txt" 20000000 2>"$t/err" && pass "the sampled program ran (exit 0)" ||
	fail "the sampled program exited $?: $(head -2 "$t/err")"
n=$(awk '$1 == "samples" {print $2}' "$t/out.txt" 2>/dev/null)
lib=$(awk '$1 == "dso" && $3 == "libspin.so" {print $2}' "$t/out.txt" 2>/dev/null)
exe=$(awk '$1 == "dso" && $3 == "[main]" {print $2}' "$t/out.txt" 2>/dev/null)
if [ "${n:-0}" -ge 150 ] 2>/dev/null; then
	pass "$n samples over ~1.5 s of CPU"
	# 3/4 and 1/4 of the loop's work, +-10 points (5.6 binomial SE at 400 samples, 2.8 at 150)
	awk -v n="$n" -v l="${lib:-0}" -v e="${exe:-0}" 'BEGIN { exit !(l / n > 0.65 && l / n < 0.85 && e / n > 0.15 && e / n < 0.35) }' &&
		pass "shares: libspin.so $lib, the executable $exe of $n (3/4 and 1/4 expected)" ||
		fail "shares: libspin.so ${lib:-none}, the executable ${exe:-none} of $n (3/4 and 1/4 expected)"
	grep -q '^sym [0-9]* spin_lib$' "$t/out.txt" && pass "the library's exported function is named" ||
		fail "no 'sym ... spin_lib' line: $(grep -c '^sym' "$t/out.txt") sym lines"
else
	fail "too few samples: '${n:-none}' ($(head -2 "$t/out.txt" 2>/dev/null))"
fi
# MTPROF_FOCUS: the call chains into one object (here libspin.so's loop, called from main)
MTPROF_FOCUS=libspin LD_PRELOAD=$t/mtprof.so "$t/spin" "$t/outf.txt" 20000000 2>"$t/errf"
lib=$(awk '$1 == "dso" && $3 == "libspin.so" {print $2}' "$t/outf.txt" 2>/dev/null)
chained=$(awk '$1 == "chain" {s += $2} END {print s + 0}' "$t/outf.txt" 2>/dev/null)
top=$(awk '$1 == "chain" {print; exit}' "$t/outf.txt" 2>/dev/null)
[ "${lib:-0}" -gt 0 ] && [ "$chained" = "$lib" ] && case "$top" in *"libspin.so:spin_lib < spin+0x"*) true ;; *) false ;; esac &&
	pass "MTPROF_FOCUS: all $lib samples in libspin.so chained, top chain '$top'" ||
	fail "MTPROF_FOCUS: libspin.so ${lib:-none} samples, chained $chained, top chain '$top' ($(head -1 "$t/errf"))"
MTPROF_FOCUS=nosuchlib LD_PRELOAD=$t/mtprof.so "$t/spin" "$t/outn.txt" 2000000 2>"$t/errn"
rc=$?
[ $rc -eq 0 ] && [ "$(wc -l <"$t/errn")" -eq 1 ] && grep -q 'MTPROF_FOCUS=nosuchlib' "$t/errn" && ! grep -q '^chain' "$t/outn.txt" &&
	pass "an MTPROF_FOCUS naming no loaded object: one line, no chains" ||
	fail "an MTPROF_FOCUS naming no loaded object: rc $rc, stderr '$(head -2 "$t/errn")'"
MTPROF_HZ=banana LD_PRELOAD=$t/mtprof.so "$t/spin" "$t/out2.txt" 2000000 2>"$t/err2"
rc=$?
[ $rc -eq 0 ] && [ "$(wc -l <"$t/err2")" -eq 1 ] && grep -q 'MTPROF_HZ=banana' "$t/err2" && [ -s "$t/out2.txt" ] &&
	pass "a bad MTPROF_HZ: one line, sampled at the default" ||
	fail "a bad MTPROF_HZ: rc $rc, stderr '$(head -2 "$t/err2")'"
LD_PRELOAD=$t/mtprof.so "$t/spin" "$t/no/such/dir/out.txt" 2000000 2>"$t/err3"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$t/err3")" -eq 1 ] && grep -q 'no/such/dir' "$t/err3" &&
	pass "an unwritable output: one line naming it, no crash (rc 1)" ||
	fail "an unwritable output: rc $rc, stderr '$(head -2 "$t/err3")'"
exit $((fails > 0))

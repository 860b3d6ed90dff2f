#!/usr/bin/env bash
# test_cupti_presence.sh: tests/gpu/cupti_presence.c (CUPTI's parts alone, for the cost runs'
# NAME=cupti:PARTS workers) against the fake libcupti: each part's calls succeed and it says so,
# inj points CUDA_INJECTION64_PATH at itself instead of acting in its constructor, and a missing
# libcupti gets one line while the program runs on.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
pass() { echo "PASS: cupti_presence: $*"; }
fail() { echo "FAIL: cupti_presence: $*"; fails=$((fails + 1)); }
FAKE=$BUILD/fakes/cupti/libcupti.so.13
if ! [ -f "$FAKE" ] || ! [ -f "$BUILD/gpu/cupti_presence.so" ]; then
	fail "no $FAKE or $BUILD/gpu/cupti_presence.so (make test builds both)"
	exit 1
fi
cp "$BUILD/gpu/cupti_presence.so" "$t/p.so"
P=ts.reg.kinds.kern.sub.drv.fin
CUPTI_PRESENCE=$P CUPTI_PRESENCE_LIB=$FAKE LD_PRELOAD=$t/p.so sh -c 'echo ran' >"$t/o" 2>"$t/e"
[ "$(cat "$t/o")" = ran ] && [ "$(cat "$t/e")" = "cupti_presence: $P done" ] &&
	pass "every part against the fake libcupti: no CUPTI error, one line" ||
	fail "every part: stdout '$(cat "$t/o")', stderr '$(head -3 "$t/e")'"
CUPTI_PRESENCE=inj.reg CUPTI_PRESENCE_LIB=$FAKE LD_PRELOAD=$t/p.so sh -c 'echo "$CUDA_INJECTION64_PATH"' >"$t/o" 2>"$t/e"
[ "$(cat "$t/o")" = "$t/p.so" ] && ! [ -s "$t/e" ] &&
	pass "inj: CUDA_INJECTION64_PATH names the library, nothing done before cuInit" ||
	fail "inj: CUDA_INJECTION64_PATH '$(cat "$t/o")', stderr '$(head -2 "$t/e")'"
CUPTI_PRESENCE=reg CUPTI_PRESENCE_LIB=$t/none.so LD_PRELOAD=$t/p.so sh -c 'echo ran' >"$t/o" 2>"$t/e"
rc=$?
[ $rc -eq 0 ] && [ "$(cat "$t/o")" = ran ] && [ "$(wc -l <"$t/e")" -eq 1 ] && grep -q 'no libcupti.*none.so' "$t/e" &&
	pass "no libcupti: one line naming it, the program runs on" ||
	fail "no libcupti: rc $rc, stdout '$(cat "$t/o")', stderr '$(head -2 "$t/e")'"
DRV=$BUILD/tests/progs/drv_only
if [ -x "$DRV" ]; then
	CUPTI_PRESENCE=inj.ts.reg.kinds.drv.late CUPTI_PRESENCE_LATE_MS=200 CUPTI_PRESENCE_LIB=$FAKE \
		LD_PRELOAD=$t/p.so "$DRV" x 600 >"$t/o" 2>"$t/e"
	grep -q 'cuptiFinalize called 1 times' "$t/o" && [ "$(grep -c 'late: cuptiFinalize at the exit of cuMemcpyDtoD_v2: 0$' "$t/e")" = 1 ] &&
		! grep -q 'after cuptiFinalize\|CUPTI error' "$t/e" &&
		pass "late: cuptiFinalize once, 200 ms in, at the exit of an API call, no CUPTI call after it" ||
		fail "late: stdout '$(cat "$t/o")', stderr '$(head -4 "$t/e")'"
	CUPTI_PRESENCE=inj.ts.reg.kinds.drv CUPTI_PRESENCE_LIB=$FAKE LD_PRELOAD=$t/p.so "$DRV" x 400 >"$t/o" 2>"$t/e"
	grep -q 'cuptiFinalize called 0 times' "$t/o" && ! grep -q late "$t/e" &&
		pass "without late: no cuptiFinalize" || fail "without late: stdout '$(cat "$t/o")', stderr '$(head -3 "$t/e")'"
else
	fail "no $DRV (make test builds it)"
fi
LD_PRELOAD=$t/p.so sh -c 'echo ran' >"$t/o" 2>"$t/e"
[ "$(cat "$t/o")" = ran ] && ! [ -s "$t/e" ] && pass "CUPTI_PRESENCE unset: does nothing" ||
	fail "CUPTI_PRESENCE unset: stderr '$(head -2 "$t/e")'"
exit $((fails > 0))

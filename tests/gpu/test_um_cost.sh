#!/usr/bin/env bash
# test_um_cost.sh: tests/gpu/um_cost.sh (a managed-memory job's ping-pong time per configuration) without a GPU: each run's ping-pong seconds are read from the job's line; "-" runs the job without nvlprof, other ENV words reach the job under nvlprof; the order rotates each rep; a failed run is listed and left out of the summary; a warm-up run comes first and is not counted; the summary gives each configuration's median, mean and its ratio to the first.
source "$(dirname "$0")/../lib.sh"
M="$ROOT/tests/gpu/um_cost.sh"
cat >"$T/job.sh" <<'JOB'
[ "${FAILME:-0}" = 1 ] && exit 3
t=0.5
[ -n "${LD_PRELOAD:-}" ] && t=0.75
[ "${SLOWER:-0}" = 1 ] && t=1.0
echo "drv_cupy: mode=pingpong rounds=12 MiB=128 time=${t}s checksum=8.4e+08"
JOB
REPS=2 OUT="$T/o" JOB="sh $T/job.sh" NVLPROF="$ROOT/build/nvlprof" \
	bash "$M" none=-: shim=: slow=SLOWER=1: bad=FAILME=1: >"$T/out.txt" 2>&1
rc=$?
check_eq "status 0" 0 "$rc"
check_eq "one warm-up run first, not counted" "warmup 0 rc=0 (not counted)" "$(head -1 "$T/out.txt")"
check_eq "a run without nvlprof: its time" "none rep=0 rc=0 time=0.5" "$(grep '^none rep=0' "$T/out.txt")"
check_eq "a run under nvlprof (LD_PRELOAD set)" "shim rep=1 rc=0 time=0.75" "$(grep '^shim rep=1' "$T/out.txt")"
check_eq "ENV reaches the job" "slow rep=0 rc=0 time=1.0" "$(grep '^slow rep=0' "$T/out.txt")"
check_eq "a failed run: its status, no time" "bad rep=0 rc=3 time=none" "$(grep '^bad rep=0' "$T/out.txt")"
check_eq "order rotated: rep 0 none first, rep 1 shim first" "none shim" "$(grep -m1 ' rep=0 ' "$T/out.txt" | cut -d' ' -f1) $(grep -m1 ' rep=1 ' "$T/out.txt" | cut -d' ' -f1)"
check_eq "summary: the first configuration" "none: 2 runs, median 0.500 s, mean 0.500 +- 0.000 s (2 SE), x1.00 of none" "$(grep '^none:' "$T/out.txt")"
check_eq "summary: ratio to the first" "shim: 2 runs, median 0.750 s, mean 0.750 +- 0.000 s (2 SE), x1.50 of none" "$(grep '^shim:' "$T/out.txt")"
check_eq "summary: a configuration without a finished run" "bad: no finished run" "$(grep '^bad:' "$T/out.txt")"
check "each run under nvlprof has its trace directory" test -d "$T/o/shim.1"
exit $((FAILED > 0))

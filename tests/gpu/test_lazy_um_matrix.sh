#!/usr/bin/env bash
# test_lazy_um_matrix.sh: tests/gpu/lazy_um_matrix.sh (runs of a job per configuration, interleaved, how many hung) without a GPU: a configuration whose job ends is counted finished with its result line; one whose job hangs is killed at HANG_S, counted, and leaves no process behind; the configurations' order rotates each rep; each run's ENV reaches the job.
source "$(dirname "$0")/../lib.sh"
M="$ROOT/tests/gpu/lazy_um_matrix.sh"
cat >"$T/job.sh" <<'JOB'
echo "drv_cupy: mode=$1 hang=${HANGME:-0} checksum=42"
[ "${HANGME:-0}" = 1 ] && sleep 61
exit 0
JOB
start=$(date +%s)
REPS=2 HANG_S=2 OUT="$T/o" JOB="sh $T/job.sh" NVLPROF="$ROOT/build/nvlprof" \
	bash "$M" ok=HANGME=0:fine hangs=HANGME=1+NVLPROF_CUPTI=lazy:stuck >"$T/out.txt" 2>&1
rc=$?
took=$(($(date +%s) - start))
check_eq "status 0" 0 "$rc"
check_eq "tally: the job that ends" "tally ok: 2 finished, 0 did not (of 2)" "$(grep '^tally ok:' "$T/out.txt")"
check_eq "tally: the job that hangs" "tally hangs: 0 finished, 2 did not (of 2)" "$(grep '^tally hangs:' "$T/out.txt")"
check "a finished run's line: its status and result line" grep -q "^ok rep=0 rc=0 s=[0-9.]* drv_cupy: mode=fine hang=0 checksum=42$" "$T/out.txt"
check "a hung run's line: killed (137)" grep -q "^hangs rep=0 rc=137 " "$T/out.txt"
check_eq "order rotated: rep 0 ok first, rep 1 hangs first" "ok hangs" "$(grep -m1 ' rep=0 ' "$T/out.txt" | cut -d' ' -f1) $(grep -m1 ' rep=1 ' "$T/out.txt" | cut -d' ' -f1)"
check "each run's trace directory" test -d "$T/o/ok.1"
check "over in time (two kills of 2 s)" test "$took" -le 20
check "no job left running (the shell, its sleep)" sh -c "! pgrep -f '^sh $T/job.sh|^sleep 61\$'"
exit $((FAILED > 0))

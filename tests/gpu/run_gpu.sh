#!/usr/bin/env bash
# run_gpu.sh: the real-GPU proof (2+ GPUs with NVLink): runs every scenario under nvlprof, checks the traces,
# measures overhead side by side, and leaves traces, reports and logs in $OUT (default /tmp/nvlp-gpu).
# Needs build/ made on the build machine (carried) and nvcc for the CUDA examples.
#   bash tests/gpu/run_gpu.sh [scenario ...]     scenarios: ddp fallback straggler kill p2p uma profiler overhead
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-gpu} DONE_MSG="gpu run done"
scen=${*:-ddp fallback p2p uma straggler profiler overhead kill}
. tests/gpu/common.sh
DDP="examples/ddp_train.py"
STEPS=${STEPS:-40}
EX=$PWD/build/examples  # made by `make examples` (nvcc, shared cudart so the shim sees its calls)
mkdir -p $EX
for f in p2p_copy uma_thrash; do
	[ -x $EX/$f ] || nvcc -O2 -arch=sm_90 -cudart shared -o $EX/$f examples/$f.cu >>$L/nvcc.log 2>&1 || echo "FAIL: nvcc $f"
done

if want ddp; then
	log "healthy DDP: baseline, then under nvlprof run"
	$PY $DDP --steps $STEPS --json $L/ddp_base.json >$L/ddp_base.log 2>&1
	$NV run -o $T/ddp_healthy -- $PY $DDP --steps $STEPS --json $L/ddp_prof.json >$L/ddp_prof.log 2>&1
	$PY tests/gpu/check.py ddp $T/ddp_healthy $L/ddp_base.json $L/ddp_prof.json
	$PY tests/gpu/check.py findings $T/ddp_healthy -
fi
if want fallback; then
	log "DDP with NCCL_P2P_DISABLE=1"
	NCCL_P2P_DISABLE=1 $NV run -o $T/ddp_p2p_disable -- $PY $DDP --steps $STEPS >$L/ddp_p2p_disable.log 2>&1
	$PY tests/gpu/check.py findings $T/ddp_p2p_disable pcie_fallback
	$PY tests/gpu/check.py flip $T/ddp_healthy $T/ddp_p2p_disable
	$NV diff $T/ddp_healthy $T/ddp_p2p_disable >$L/diff_fallback.txt 2>&1
	$NV diff --json $T/ddp_healthy $T/ddp_p2p_disable >$L/diff_fallback.json 2>&1
	$PY tests/gpu/check.py diff $L/diff_fallback.json
fi
if want straggler; then
	log "DDP with rank 1 sleeping 20 ms before each step"
	$NV run -o $T/ddp_straggler -- $PY $DDP --steps $STEPS --sleep-rank 1 --sleep-ms 20 >$L/ddp_straggler.log 2>&1
	$PY tests/gpu/check.py findings $T/ddp_straggler straggler,exposed_communication straggler@rank=1
fi
if want kill; then
	log "DDP with rank 1 killed at step 20"
	timeout 120 $NV run -o $T/ddp_killed -- $PY $DDP --steps $STEPS --kill-rank 1 --kill-step 20 --timeout-s 10 >$L/ddp_killed.log 2>&1
	$PY tests/gpu/check.py findings $T/ddp_killed hang_suspect hang_suspect@rank=1
fi
if want p2p; then
	log "peer copies with and without peer access"
	$NV run -o $T/p2p_enabled -- $EX/p2p_copy peer >$L/p2p_enabled.log 2>&1
	$NV run -o $T/p2p_staged -- $EX/p2p_copy staged >$L/p2p_staged.log 2>&1
	$PY tests/gpu/check.py p2p $T/p2p_enabled $L/p2p_enabled.log $T/p2p_staged $L/p2p_staged.log
	$PY tests/gpu/check.py findings $T/p2p_enabled -
	$PY tests/gpu/check.py findings $T/p2p_staged peer_access_disabled
fi
if want uma; then
	log "managed-memory ping-pong, without and with advice"
	$NV run -o $T/uma_thrash -- $EX/uma_thrash >$L/uma_thrash.log 2>&1
	$NV run -o $T/uma_advised -- $EX/uma_thrash --advise >$L/uma_advised.log 2>&1
	$PY tests/gpu/check.py uma $T/uma_thrash $T/uma_advised
	$PY tests/gpu/check.py findings $T/uma_thrash uma_thrashing
fi
if want profiler; then
	log "DDP with torch.profiler inside the job"
	$NV run -o $T/ddp_torchprof -- $PY $DDP --steps $STEPS --torch-profiler $L/torchprof >$L/ddp_torchprof.log 2>&1
	$PY tests/gpu/check.py torchprof $T/ddp_torchprof $L/torchprof
fi
if want overhead; then
	log "overhead: alternating runs without / with nvlprof"
	for i in 1 2; do
		$PY $DDP --steps 100 --json $L/ovh_base_$i.json >$L/ovh_base_$i.log 2>&1
		$NV run -o /tmp/nvlp-ovh-$i -- $PY $DDP --steps 100 --json $L/ovh_prof_$i.json >$L/ovh_prof_$i.log 2>&1
		NVLPROF_CUPTI=0 $NV run -o /tmp/nvlp-ovh-api-$i -- $PY $DDP --steps 100 --json $L/ovh_api_$i.json >$L/ovh_api_$i.log 2>&1
	done
	$PY tests/gpu/check.py overhead $L
fi

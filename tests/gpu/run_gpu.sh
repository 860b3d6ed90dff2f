#!/usr/bin/env bash
# run_gpu.sh: the real-GPU proof (2+ GPUs with NVLink): runs every scenario under nvlprof, checks the traces,
# measures overhead side by side, and leaves traces, reports and logs in $OUT (default /tmp/nvlp-gpu).
# Needs build/ made on the build machine (carried) and nvcc for the CUDA examples.
#   bash tests/gpu/run_gpu.sh [scenario ...]     scenarios: ddp fallback straggler kill p2p nvml lazy uma profiler overhead launch
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-gpu} DONE_MSG="gpu run done"
scen=${*:-ddp fallback p2p nvml lazy uma straggler profiler launch overhead kill}
. tests/gpu/common.sh
DDP="examples/ddp_train.py"
STEPS=${STEPS:-40}
EX=$PWD/build/examples  # made by `make examples` (nvcc, shared cudart so the shim sees its calls)
mkdir -p $EX
for f in examples/p2p_copy examples/uma_thrash tests/gpu/launch_cost; do
	b=$(basename $f)
	[ -x $EX/$b ] || nvcc -O2 -arch=sm_90 -cudart shared -o $EX/$b $f.cu >>$L/nvcc.log 2>&1 || echo "FAIL: nvcc $b"
done

if want ddp; then
	log "healthy DDP: baseline, then under nvlprof run"
	$PY $DDP --steps $STEPS --json $L/ddp_base.json >$L/ddp_base.log 2>&1
	$NV run -o $T/ddp_healthy -- $PY $DDP --steps $STEPS --json $L/ddp_prof.json >$L/ddp_prof.log 2>&1
	$PY tests/gpu/check.py ddp $T/ddp_healthy $L/ddp_base.json $L/ddp_prof.json
	$PY tests/gpu/check.py findings $T/ddp_healthy -
	$PY tests/gpu/check.py ncclprof $T/ddp_healthy
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
	$PY tests/gpu/check.py findings $T/ddp_straggler straggler straggler@rank=1
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
if want nvml; then
	log "peer copies with link counters from NVML (NVLPROF_LINKS=nvml)"
	NVLPROF_LINKS=nvml $NV run -o $T/p2p_nvml -- $EX/p2p_copy peer >$L/p2p_nvml.log 2>&1
	$PY tests/gpu/check.py nvml $T/p2p_nvml $L/p2p_nvml.log
fi
if want lazy; then
	# NVLPROF_CUPTI=lazy (CUPTI never attached): its topology from the driver and NVML against
	# CUPTI's on the same job, and the findings that rest on it (peer_access_disabled, pcie_fallback)
	log "NVLPROF_CUPTI=lazy: NVML's routes, the topology against CUPTI's, the findings on it"
	$PY tests/gpu/nvml_links.py >$L/nvml_links.txt 2>&1
	command -v nvidia-smi >/dev/null && { nvidia-smi topo -m; nvidia-smi nvlink -s; } >$L/nvidia_smi_topo.txt 2>&1
	[ -d $T/p2p_enabled ] || $NV run -o $T/p2p_enabled -- $EX/p2p_copy peer >$L/p2p_enabled.log 2>&1
	NVLPROF_CUPTI=lazy $NV run -o $T/p2p_lazy -- $EX/p2p_copy peer >$L/p2p_lazy.log 2>&1
	$PY tests/gpu/check.py topo $T/p2p_enabled $T/p2p_lazy
	NVLPROF_CUPTI=lazy $NV run -o $T/p2p_staged_lazy -- $EX/p2p_copy staged >$L/p2p_staged_lazy.log 2>&1
	$PY tests/gpu/check.py findings $T/p2p_staged_lazy peer_access_disabled
	NCCL_P2P_DISABLE=1 NVLPROF_CUPTI=lazy $NV run -o $T/ddp_p2p_disable_lazy -- $PY $DDP --steps $STEPS >$L/ddp_p2p_disable_lazy.log 2>&1
	$PY tests/gpu/check.py findings $T/ddp_p2p_disable_lazy pcie_fallback
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
	$PY $DDP --steps $STEPS --torch-profiler $L/torchprof_base >$L/ddp_torchprof_base.log 2>&1
	$NV run -o $T/ddp_torchprof -- $PY $DDP --steps $STEPS --torch-profiler $L/torchprof >$L/ddp_torchprof.log 2>&1
	# the same without the NCCL profiler plugin: which extra runtime calls it accounts for
	NVLPROF_NCCL_PLUGIN=0 $NV run -o /tmp/nvlp-torchprof-noplugin -- $PY $DDP --steps $STEPS \
		--torch-profiler $L/torchprof_noplugin >$L/ddp_torchprof_noplugin.log 2>&1
	$PY tests/gpu/check.py torchprof $T/ddp_torchprof $L/torchprof $L/torchprof_base $L/torchprof_noplugin
fi
if want launch; then
	R=${LAUNCH_ROUNDS:-3}
	log "per-launch host cost: $R rounds without nvlprof, everything on, without link counters, API capture only"
	for i in $(seq 1 $R); do
		$EX/launch_cost >$L/launch_base_$i.log 2>&1
		$NV run -o /tmp/nvlp-launch -- $EX/launch_cost >$L/launch_prof_$i.log 2>&1
		NVLPROF_SAMPLE_US=0 $NV run -o /tmp/nvlp-launch -- $EX/launch_cost >$L/launch_nopm_$i.log 2>&1
		NVLPROF_CUPTI=0 $NV run -o /tmp/nvlp-launch -- $EX/launch_cost >$L/launch_api_$i.log 2>&1
	done
	$PY tests/gpu/check.py launch $L
fi
if want overhead; then
	R=${OVH_ROUNDS:-4} S=${OVH_STEPS:-200}
	log "overhead: $R rounds of $S-step runs without nvlprof, with everything on, with API capture only (order rotated)"
	ovh() { # ovh KIND ROUND: one run of the DDP example, without nvlprof (base) or under it
		local k=$1 i=$2 nv=$NV env=""
		case $k in
		prof) env="NVLPROF_VERBOSE=1" ;;
		api) env="NVLPROF_VERBOSE=1 NVLPROF_CUPTI=0" ;;
		nopm) env="NVLPROF_VERBOSE=1 NVLPROF_SAMPLE_US=0" ;;
		alt) env="NVLPROF_VERBOSE=1 ${OVH_ALT_ENV:-}" nv=${OVH_ALT_NV:-$NV} ;;
		esac
		# --pin: each rank on the CPUs near its GPU (half the CPUs each here): less spread between runs
		local job="$PY $DDP --steps $S --pin ${OVH_ARGS:-} --json $L/ovh_${k}_$i.json"
		if [ $k = base ]; then $job; else env $env $nv run -o /tmp/nvlp-ovh-$k-$i -- $job; fi \
			>$L/ovh_${k}_$i.log 2>&1
	}
	for i in $(seq 1 $R); do
		case $((i % 3)) in
		1) order="base prof api" ;; 2) order="prof api base" ;; 0) order="api base prof" ;;
		esac
		# OVH_PAIRS=1: only without / everything on, order swapped every round (more pairs per minute)
		if [ -n "${OVH_PAIRS:-}" ]; then [ $((i % 2)) = 1 ] && order="base prof" || order="prof base"; fi
		[ -n "${OVH_NOPM:-}" ] && order="$order nopm" # everything but the link counters
		# A/B of a change: OVH_ALT_ENV="VAR=value ..." and/or OVH_ALT_NV=another build's nvlprof
		[ -n "${OVH_ALT_ENV:-}${OVH_ALT_NV:-}" ] && order="$order alt"
		for k in $order; do ovh $k $i; done
	done
	$PY tests/gpu/check.py overhead $L
fi

#!/usr/bin/env bash
# run_overhead.sh: issue 15's GPU measurements: host-side probes (per launch, per collective, what a closed
# CUPTI window leaves), KernelCh at this machine's world size, and step-time cost of nvlprof's modes and of
# torch.profiler in rotated paired rounds. Logs and JSON in $OUT. Written for N GPUs (NGPU, default: all).
#   bash tests/gpu/run_overhead.sh [probes] [gpt2] [ddp]     (run from the repo root or a copy of build/ + tests/gpu)
# Needs build/ (libnvlprof.so, nvlprof) and build/gpu/{launch_cost,coll_cost,cupti_phases} (make gpu-probes).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-overhead}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NV=$PWD/build/nvlprof
export NVLPROF=$NV
G=$PWD/build/gpu
scen=${*:-probes gpt2 ddp}
want() { case " $scen " in *" $1 "*) return 0 ;; esac; return 1; }
log() { echo "== $(date +%T) $*"; }
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
[ "$NGPU" -ge 1 ] 2>/dev/null || NGPU=1
# the pip wheels' NCCL / CUPTI / cudart, for the probes (torch finds its own)
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
PL=$(find "$SP/nvidia" \( -name 'libnccl.so.2' -o -name 'libcupti.so.13' -o -name 'libcudart.so.13' \) 2>/dev/null |
	xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH=${PL}${LD_LIBRARY_PATH:-}
kinds() { "$NV" info "$1" 2>&1 | grep -iE "kch|kwindow|kernel|gpucopy|ncclprof|clock|nccl " | tr -s ' ' | head -12; }

if want probes; then
	log "cupti_phases (no nvlprof): per-launch cost before/during/after CUPTI kernel activity"
	taskset -c 2 $G/cupti_phases 100000 5 2>&1
	for m in none off default all; do
		log "launch_cost, nvlprof $m"
		if [ $m = none ]; then taskset -c 2 $G/launch_cost 100000 5 2>&1
		else NVLPROF_KERNELS=$([ $m = default ] && echo "" || echo $m) taskset -c 2 $NV run -o $OUT/lc_$m -- $G/launch_cost 100000 5 2>&1; fi
	done
	for m in none default kch0 plugin0; do
		log "coll_cost on $NGPU GPU(s), nvlprof $m"
		case $m in
		none) taskset -c 2 $G/coll_cost 20000 7 $NGPU 2>&1 ;;
		default) taskset -c 2 $NV run -o $OUT/cc_$m -- $G/coll_cost 20000 7 $NGPU 2>&1 ;;
		kch0) NVLPROF_KCH=0 taskset -c 2 $NV run -o $OUT/cc_$m -- $G/coll_cost 20000 7 $NGPU 2>&1 ;;
		plugin0) NVLPROF_NCCL_PLUGIN=0 taskset -c 2 $NV run -o $OUT/cc_$m -- $G/coll_cost 20000 7 $NGPU 2>&1 ;;
		esac
		[ $m != none ] && kinds $OUT/cc_$m
	done
	log "KernelCh records at world size $NGPU (coll_cost, default):"
	"$NV" dump $OUT/cc_default 2>/dev/null | grep -c "^kch" || true
	"$NV" dump $OUT/cc_default 2>/dev/null | grep -m3 "^kch" || true
	"$NV" dump $OUT/cc_default 2>/dev/null | grep -m3 "^ncclprof" || true
	"$NV" dump $OUT/cc_default 2>/dev/null | grep -m5 "^note" || true
fi
if want gpt2; then
	log "GPT-2-style HF model (6 x 768, bf16 autocast, batch 8 x 512)"
	python3 tests/gpu/overhead.py --workload gpt2 --gpus $NGPU --out $OUT --block ${GPT2_BLOCK:-40} --warmup 30 \
		--rounds ${GPT2_ROUNDS:-60} --budget-s ${GPT2_BUDGET:-200} --configs ${GPT2_CONFIGS:-none,off,default,closed,all,torchprof} 2>&1
	kinds $OUT/gpt2_default
	"$NV" dump $OUT/gpt2_default 2>/dev/null | grep -m3 "^kwindow" || true
fi
if want ddp; then
	log "examples/ddp_train.py's model and step at world size 1"
	python3 tests/gpu/overhead.py --workload ddp --gpus $NGPU --out $OUT --block ${DDP_BLOCK:-100} --warmup 30 \
		--rounds ${DDP_ROUNDS:-60} --budget-s ${DDP_BUDGET:-120} --configs ${DDP_CONFIGS:-none,off,default,all,torchprof} 2>&1
	kinds $OUT/ddp_default
	"$NV" dump $OUT/ddp_default 2>/dev/null | grep -c "^kch" || true
fi
log done

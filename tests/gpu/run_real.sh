#!/usr/bin/env bash
# run_real.sh: issue 16's proof on third-party workloads (written for N GPUs, NGPU default: all): HF transformers
# under torchrun, PyTorch Lightning strategy="ddp", torch.profiler inside the job, nccl-tests, CuPy managed memory,
# a CUDA graph replay loop, a rank killed mid-step. Each job runs with and without nvlprof (results compared);
# tests/gpu/real/check.py asserts on the reports. Logs, reports and traces in $OUT.
#   bash tests/gpu/run_real.sh [hf] [hfprof] [hfcompile] [lightning] [nccltests] [cupy] [cupyrt] [cupylate] [graph] [killed]
# Needs build/ (libnvlprof.so, nvlprof); nccl-tests binaries in $NCCL_TESTS (default build/nccl-tests).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-real}
DONE_MSG="run_real: done"
scen=${*:-hf hfprof hfcompile lightning nccltests cupy graph killed}
. tests/gpu/common.sh
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
[ "$NGPU" -ge 1 ] 2>/dev/null || NGPU=1
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
NCCL_LIB=$(dirname "$(find "$SP/nvidia" -name 'libnccl.so.2' | head -1)")
NT=${NCCL_TESTS:-$PWD/build/nccl-tests}
R=tests/gpu/real
TR="torchrun --standalone --nproc-per-node $NGPU"
if want hf; then
	log "HF GPT-2 under torchrun ($NGPU ranks)"
	base hf_base $TR $R/hf_train.py --steps 30 --json $L/hf_base.json
	run hf $TR $R/hf_train.py --steps 30 --json $L/hf.json
fi
if want hfprof; then
	log "HF GPT-2 with torch.profiler inside the job"
	base hfprof_base $TR $R/hf_train.py --steps 30 --profiler $L/kineto_base.json --json $L/hfprof_base.json
	run hfprof $TR $R/hf_train.py --steps 30 --profiler $L/kineto.json --json $L/hfprof.json
	rm -f $L/kineto_base.json
	gzip -f $L/kineto.json 2>/dev/null
fi
if want hfcompile; then
	log "HF GPT-2 under torch.compile (Inductor, Triton kernels through the driver API)"
	base hfc_base $TR $R/hf_train.py --steps 30 --compile --json $L/hfc_base.json
	run hfc $TR $R/hf_train.py --steps 30 --compile --json $L/hfc.json
fi
if want lightning; then
	log "Lightning strategy=ddp on $NGPU device(s)"
	base lt_base $PY $R/lightning_ddp.py $NGPU $L/lt_base.json
	run lt $PY $R/lightning_ddp.py $NGPU $L/lt.json
fi
if want nccltests; then
	for b in all_reduce_perf all_gather_perf reduce_scatter_perf sendrecv_perf; do
		[ -x "$NT/$b" ] || { log "no $NT/$b"; continue; }
		log "nccl-tests $b -g $NGPU"
		LD_LIBRARY_PATH=$NCCL_LIB:${LD_LIBRARY_PATH:-} run nt_$b "$NT/$b" -b 1M -e 64M -f 4 -g $NGPU -n 20 -w 5
	done
fi
if want cupy; then
	log "CuPy managed memory ping-pong (GPU <-> CPU)"
	base cupy_base $PY tests/gpu/drv_cupy.py
	run cupy $PY tests/gpu/drv_cupy.py
fi
if want cupyrt; then
	log "CuPy kernels on managed memory from torch's CUDA runtime (cudaMallocManaged through the hooks)"
	base cupyrt_base $PY tests/gpu/drv_cupy.py --rt
	run cupyrt $PY tests/gpu/drv_cupy.py --rt
fi
if want cupylate; then
	log "the same, CuPy's runtime first used after the managed allocation (its cuInit after lazy's attach)"
	base cupylate_base $PY tests/gpu/drv_cupy.py --late-cupy
	run cupylate $PY tests/gpu/drv_cupy.py --late-cupy
fi
if want graph; then
	log "one-rank all_reduce in a CUDA graph, replayed"
	base graph_base $PY tests/gpu/graph_allreduce.py
	run graph $PY tests/gpu/graph_allreduce.py
fi
if want killed; then
	log "HF GPT-2 rank killed (SIGKILL) in step 12"
	run killed $TR $R/hf_train.py --steps 30 --kill-step 12
fi
$PY $R/check.py "$T" "$L" $NGPU $scen 2>&1 | tee "$L/check.txt"

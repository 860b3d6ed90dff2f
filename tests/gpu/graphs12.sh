#!/usr/bin/env bash
# graphs12.sh: GPU proof for CUDA graphs and CUDA 12 (one GPU): a torch CUDA graph replaying a captured all_reduce N times, and a CUDA 12.4 runtime program; each run with and without nvlprof.
# Run from a folder holding build/ (libnvlprof.so, nvlprof), cuda12_app and lib12/ (Debian's
# libcudart.so.12 and libcupti.so.12 12.4.127).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
N=${N:-100}
PY=${PY:-python3}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT/graph" "$OUT/c12"
echo "== torch graph: plain"
timeout 120 $PY tests/gpu/graph_allreduce.py "$N" 2>&1 | tail -2
echo "== torch graph: nvlprof"
NVLPROF_DIR="$OUT/graph" NVLPROF_KERNELS=all LD_PRELOAD=$PWD/build/libnvlprof.so \
	timeout 120 $PY tests/gpu/graph_allreduce.py "$N" 2>&1 | tail -2
build/nvlprof report "$OUT/graph" >"$OUT/graph.txt" 2>&1
grep -E -A3 '^CUDA graphs|^communication|ncclAllReduce ' "$OUT/graph.txt" | head -12
for f in "$OUT/graph"/*.nvlp; do
	build/nvlprof dump "$f" | awk '$1=="graph"{n[$3]++} $1=="captured"{c[$NF]++} $1=="nccl" && $3=="fn=ncclAllReduce"{a++}
		END{for(k in n) printf "%s ", k "x" n[k]; for(k in c) printf "captured_%s x%d ", k, c[k]; print "allreduce_records=" a}'
done
echo "== CUDA 12 program: plain"
timeout 60 ./cuda12_app 4
echo "== CUDA 12 program: nvlprof"
NVLPROF_DIR="$OUT/c12" NVLPROF_KERNELS=all NVLPROF_UM=1 LD_LIBRARY_PATH=$PWD/lib12 \
	LD_PRELOAD=$PWD/build/libnvlprof.so timeout 60 ./cuda12_app 4
build/nvlprof info "$OUT/c12"/*.nvlp 2>&1 | head -30
build/nvlprof report "$OUT/c12" >"$OUT/c12.txt" 2>&1
head -40 "$OUT/c12.txt"

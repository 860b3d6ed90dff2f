#!/usr/bin/env bash
# run_drv_torch.sh: torch.profiler's CUDA events with and without nvlprof (driver capture on, off, and the
# previous build libnvlprof_main.so if present), to tell what the shared CUPTI subscription changes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT/t"
{
echo "== plain"; timeout 60 python3 drv_torch.py 2>&1 | grep drv_torch
for v in "drv1 libnvlprof.so NVLPROF_DRIVER=1" "drv0 libnvlprof.so NVLPROF_DRIVER=0" "main libnvlprof_main.so X=1" "cupti0 libnvlprof.so NVLPROF_CUPTI=0"; do
	set -- $v
	[ -f "$2" ] || continue
	echo "== $1 ($2 $3)"
	timeout 60 env LD_PRELOAD=$PWD/$2 NVLPROF_DIR=$OUT/t/$1 $3 python3 drv_torch.py 2>&1 | grep drv_torch
done
} 2>&1 | tee "$OUT/log_torch.txt"

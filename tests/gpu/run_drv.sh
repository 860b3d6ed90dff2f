#!/usr/bin/env bash
# run_drv.sh: driver-level capture on the GPU machine (issue 14 items 1 and 5): CuPy managed ping-pong with and
# without advice, torch.profiler under the shim, driver-call cost. Run from a folder holding libnvlprof.so,
# nvlprof, drv_bench and these scripts; logs and traces go to $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
H=$PWD LIB=$PWD/libnvlprof.so NV=$PWD/nvlprof
mkdir -p "$OUT/t"
cp_dir=$(python3 -c 'import nvidia,os,glob;r=[os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d+"/**/libcupti.so.13*",recursive=True)];print(r[0] if r else "")' 2>/dev/null)
[ -n "$cp_dir" ] && export LD_LIBRARY_PATH=$cp_dir:${LD_LIBRARY_PATH:-}
echo "cupti dir: $cp_dir"; nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
shim() { local name=$1 t=$2; shift 2; timeout "$t" env LD_PRELOAD=$LIB NVLPROF_DIR=$OUT/t/$name "$@"; }
step() { echo "== $*"; }
post() { # report of one trace right away (the run may be cut short)
	local d=$OUT/t/$1
	[ -d "$d" ] || return
	$NV report "$d" >"$OUT/report_$1.txt" 2>&1
	$NV info "$d" >"$OUT/info_$1.txt" 2>&1
	$NV dump "$d" 2>/dev/null | awk '{print $1}' | sort | uniq -c | sort -rn | head -20 >"$OUT/kinds_$1.txt"
	$NV dump "$d" 2>/dev/null | grep -E "^(managed|copy|peer|note)" | head -60 >"$OUT/api_$1.txt"
	echo "-- $1:"; head -14 "$OUT/kinds_$1.txt"
	grep -iE "thrash|uma_|migrat" "$OUT/report_$1.txt" | head -8
}
{
step cupy pingpong plain;  timeout 40 python3 drv_cupy.py 2>&1 | tail -3
step cupy pingpong shim;   shim cupy 40 python3 drv_cupy.py 2>&1 | tail -5; post cupy
step cupy advise plain;    timeout 40 python3 drv_cupy.py --advise 2>&1 | tail -3
step cupy advise shim;     shim cupy_adv 40 python3 drv_cupy.py --advise 2>&1 | tail -5; post cupy_adv
step torch plain;          timeout 60 python3 drv_torch.py 2>&1 | tail -3
step torch shim;           shim torch 60 python3 drv_torch.py 2>&1 | tail -5; post torch
step bench plain;          timeout 30 ./drv_bench
step bench shim driver=0;  shim bench0 30 NVLPROF_DRIVER=0 ./drv_bench
step bench shim driver=1;  shim bench1 30 ./drv_bench; post bench1
} 2>&1 | tee "$OUT/log.txt"
(cd "$OUT" && tar czf t.tgz t && rm -rf t)
echo DONE

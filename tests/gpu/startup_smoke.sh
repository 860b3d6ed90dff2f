#!/usr/bin/env bash
# startup_smoke.sh: NVLPROF_CUPTI=startup on real CUPTI, first look (one GPU, ~1.5 min). Each mode of
# startup_smoke.py runs alone and under the shim with the detach due at 1 s; the job's exit and
# checksum are compared, and the trace's NOTEs,
# `nvlprof info` and the report's first lines kept. Logs in $OUT/smoke.
# SMOKE_CUPTI=lazy: the same modes under NVLPROF_CUPTI=lazy (CUPTI never attached unless managed
# memory or a profiler needs it), and the DEVICE records it takes from the driver compared with
# those CUPTI gives the default (NVLPROF_CUPTI=1) in the same job.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-smoke}
S=$OUT/smoke
mkdir -p "$S"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NV=$PWD/build/nvlprof
for m in ${SMOKE_MODES:-plain um prof_late prof_early}; do
	timeout 120 python3 tests/gpu/startup_smoke.py $m --steps 400 --at 200 >"$S/$m.base.log" 2>&1
	echo "base rc=$?" >>"$S/$m.base.log"
	rm -rf "$S/tr_$m"
	NVLPROF_CUPTI=${SMOKE_CUPTI:-startup:1000} NVLPROF_CUPTI_FINALIZE=1 timeout 120 "$NV" run -o "$S/tr_$m" -- python3 tests/gpu/startup_smoke.py $m --steps 400 --at 200 \
		>"$S/$m.shim.log" 2>&1
	echo "shim rc=$?" >>"$S/$m.shim.log"
	echo "== $m"
	grep -h "startup_smoke:\|rc=" "$S/$m.base.log" "$S/$m.shim.log"
	grep -h -i "nvlprof\|error\|Traceback" "$S/$m.shim.log" | head -8
	for f in "$S/tr_$m"/*.nvlp; do "$NV" dump "$f" 2>&1 | grep -i "^note" | head -12; done
	"$NV" report "$S/tr_$m" 2>&1 | sed -n '1,4p;/^nvlprof cost/p'
done
if [ "${SMOKE_CUPTI:-}" = lazy ] && ! [ -d "$S/tr_plain" ]; then
	echo "== DEVICE records: not compared (SMOKE_MODES ran no plain mode)"
	exit 0
fi
if [ "${SMOKE_CUPTI:-}" = lazy ]; then
	echo "== DEVICE records: NVLPROF_CUPTI=lazy (driver) against NVLPROF_CUPTI=1 (CUPTI), plain mode"
	NVLPROF_CUPTI=1 timeout 120 "$NV" run -o "$S/tr_plain_default" -- python3 tests/gpu/startup_smoke.py plain --steps 100 \
		>"$S/plain_default.log" 2>&1
	"$NV" dump "$S/tr_plain_default" 2>&1 | grep '^device ' | sort -u >"$S/device_default.txt"
	"$NV" dump "$S/tr_plain" 2>&1 | grep '^device ' | sort -u >"$S/device_lazy.txt"
	cat "$S/device_default.txt"
	if [ -s "$S/device_default.txt" ] && cmp -s "$S/device_default.txt" "$S/device_lazy.txt"; then
		echo "device records: identical ($(wc -l <"$S/device_lazy.txt") device(s))"
	else
		echo "device records: DIFFER"; diff "$S/device_default.txt" "$S/device_lazy.txt"
	fi
	for m in default lazy; do
		d=$S/tr_plain; [ $m = default ] && d=$S/tr_plain_default
		echo "nvlink records ($m): $("$NV" dump "$d" 2>&1 | grep -c '^nvlink ')"
	done
	exit 0
fi
# How CUPTI finds libnvperf_host (the default mode's PM sampling loads it): by name through the
# dynamic linker, or by path next to libcupti. Decides how the shim may load it first itself.
echo "== libnvperf_host lookup (LD_DEBUG=libs)"
LD_DEBUG=libs timeout 60 "$NV" run -o "$S/tr_pmload" -- python3 -c \
	"import torch,time; x=torch.ones(8,device='cuda'); time.sleep(4); print('pmload', float(x.sum()))" \
	>"$S/pmload.log" 2>&1
echo "rc=$?"
grep -i "nvperf" "$S/pmload.log" | sed 's/^ *[0-9]*: *//' | sort | uniq -c | head -20
grep -h "pmload" "$S/pmload.log" | grep -v "calling\|find\|trying\|search" | head -3
for f in "$S/tr_pmload"/*.nvlp; do "$NV" dump "$f" 2>&1 | grep -i "^note pm_sampling" | head -2; done

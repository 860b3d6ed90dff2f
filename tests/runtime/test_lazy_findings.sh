#!/usr/bin/env bash
# test_lazy_findings.sh: under NVLPROF_CUPTI=lazy (CUPTI loaded, never attached) the report's topology and the findings that rest on it come from the driver and NVML (cupti/topo.c), end to end: a Python job on the fake libraries copies GPU0->GPU1 without peer access. Two GPUs joined by 4 NVLinks (fake NVML): "topology yes", one NVLINK record, peer_access_disabled "although the GPUs share NVLink"; the same with the links' state answered only through NVML's field (nvmlDeviceGetNvLinkState "Not Supported", as a one-GPU H100 VM answered); no active link: "topology no" and the finding's wording without NVLink; every trace's NOTE tallies the links' states; where no link's state was answered, or NVML could not start, the report's collection gaps say the topology is unknown and why (not where every link answered inactive). CUPTI never attached in any of them.
source "$(dirname "$0")/../lib.sh"
for f in "$LIB" "$CLI" "$FAKES/libnccl.so.2" "$FAKES/libcudart.so.13" "$FAKES/libhk_workload.so" \
	"$FAKES/cupti/libcupti.so.13" "$FAKES/cupti/libcuda.so.1" "$FAKES/nvml/libnvidia-ml.so.1"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
command -v python3 >/dev/null || { skip "lazy findings: no python3"; exit 0; }
if [ -n "${SAN:-}" ]; then
	skip "lazy findings: SAN=$SAN (python3 under a sanitizer's runtime: test_topo_nvml covers the topology there)"
	exit 0
fi
# the job: the runtime and CUPTI (fakes) loaded before cuInit, as torch loads them; a cross-device
# copy without peer access; alive long enough for the link sampler's thread to record the topology
cat >"$T/job.py" <<PYEOF
import ctypes, time
G = ctypes.RTLD_GLOBAL
ctypes.CDLL("$FAKES/libcudart.so.13", mode=G)
ctypes.CDLL("$FAKES/cupti/libcupti.so.13", mode=G)
assert ctypes.CDLL("$FAKES/cupti/libcuda.so.1", mode=G).cuInit(0) == 0
ctypes.CDLL("$FAKES/libnccl.so.2", mode=ctypes.RTLD_LOCAL)
work = ctypes.CDLL("$FAKES/libhk_workload.so")
time.sleep(0.4)
assert work.workload_run(2) == 0
time.sleep(0.2)
print("done")
PYEOF
run() { # NAME ENV...: the job under the shim, lazy, into $T/NAME; its report, JSON report and dump
	local n=$1; shift
	mkdir -p "$T/$n"
	env FAKE_CUDA_DEVICES=2 NVLPROF_CUPTI=lazy LD_LIBRARY_PATH="$FAKES/nvml" NVLPROF_DIR="$T/$n" \
		LD_PRELOAD="$PRELOAD" "$@" python3 "$T/job.py" >"$T/$n.out" 2>"$T/$n.err"
	echo $? >"$T/$n.rc"
	"$CLI" report --threshold staged_min_mib=0 "$T/$n" >"$T/$n.txt" 2>&1
	"$CLI" report --json --threshold staged_min_mib=0 "$T/$n" >"$T/$n.json" 2>&1
	"$CLI" dump "$T/$n" >"$T/$n.dump" 2>&1
}
run pair FAKE_NVML_TOPO=pair:4
run field FAKE_NVML_TOPO=pair:4 FAKE_NVML_STATE=field
run none FAKE_NVML_TOPO=none
run silent FAKE_NVML_TOPO=pair:4 FAKE_NVML_STATE=none
run noinit FAKE_NVML_TOPO=pair:4 FAKE_NVML_INIT=9
for n in pair field none silent noinit; do
	check_eq "$n: the job ran" "0 done" "$(cat "$T/$n.rc") $(cat "$T/$n.out")"
	check "$n: CUPTI not attached" grep -q "^data: CUPTI not attached in 1 of 1 process (NVLPROF_CUPTI=lazy)" "$T/$n.txt"
done
for n in pair field; do
	check "$n: the report has the topology (NVLink 4 x 25 GB/s)" grep -q "^data: .*topology yes (NVLink 100 GB/s per GPU each way)" "$T/$n.txt"
	check_eq "$n: one NVLINK record, 4 links, peer access and atomics" "1 links=4 ports0=0xf ports1=0xf flags=10" \
		"$(grep -c '^nvlink ' "$T/$n.dump") $(grep -o 'links=4 ports0=0xf ports1=0xf flags=[0-9]*' "$T/$n.dump" | head -1)"
	check "$n: peer_access_disabled says the GPUs share NVLink" grep -q "peer_access_disabled: Copies GPU0->GPU1 staged through host memory although the GPUs share NVLink" "$T/$n.txt"
	check "$n: the NOTE tallies the links" grep -q 'NVLink pair(s); NVML link state: 8 active, 28 inactive, 0 unanswered"' "$T/$n.dump"
done
check "none: no topology" grep -q "^data: .*topology no" "$T/none.txt"
check_eq "none: no NVLINK record" 0 "$(grep -c '^nvlink ' "$T/none.dump")"
check "none: peer_access_disabled without NVLink to go on" grep -q "peer_access_disabled: Copies GPU0->GPU1 staged through host memory although the GPUs can likely reach each other" "$T/none.txt"
check "none: the NOTE says every link is inactive" grep -q '0 NVLink pair(s); NVML link state: 0 active, 36 inactive, 0 unanswered"' "$T/none.dump"
# a topology gap only where NVML's silence, not the hardware, left the pairs out
gap() { python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
g = [e for f in d["findings"] if f["id"] == "collection_gaps" for k, e in f["evidence"].items() if k == "topology"]
print(g[0] if g else "none")' "$T/$1.json"; }
for n in pair field none; do
	check_eq "$n: no topology gap (NVML answered every link)" none "$(gap $n)"
done
check_eq "no link state answered: the topology gap says so, and what measures it" \
	"no NVLink topology under NVLPROF_CUPTI=lazy (NVML answered the state of 0 of 36 links): NVLink between the GPUs unknown, so staged copies and fallbacks are judged without it; NVLPROF_CUPTI=1 takes the topology from CUPTI" \
	"$(gap silent)"
check "no link state answered: the report shows the gap" grep -q "topology: no NVLink topology under NVLPROF_CUPTI=lazy (NVML answered the state of 0 of 36 links)" "$T/silent.txt"
check_eq "NVML's init failing: the gap names why" \
	"no NVLink topology under NVLPROF_CUPTI=lazy (NVML gave none: nvmlInit_v2: Driver Not Loaded): NVLink between the GPUs unknown, so staged copies and fallbacks are judged without it; NVLPROF_CUPTI=1 takes the topology from CUPTI" \
	"$(gap noinit)"
check "JSON: the finding and the lazy counts" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [f["id"] for f in d["findings"] if f["severity"] != "info"] == ["peer_access_disabled"], d["findings"]
assert d["job"]["cupti_lazy"]["not_attached"] == 1, d["job"]["cupti_lazy"]
' "$T/pair.json"
exit $((FAILED > 0))

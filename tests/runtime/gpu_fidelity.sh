#!/usr/bin/env bash
# gpu_fidelity.sh: issue 16's shim records under a real torch job on one GPU (build carried): wall time with torch.profiler (Kineto's clock), COMMNAME from torch's process group, Python chains (does torch hold the GIL at its NCCL/CUDA calls?), NVTX marks under emit_nvtx, EXITINFO.
#   bash tests/runtime/gpu_fidelity.sh   (PASS/FAIL/INFO lines)
set -u
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
B=${BUILD:-build}
LIB=$PWD/$B/libnvlprof.so
NV=$PWD/$B/nvlprof
READ=$PWD/$B/tests/progs/hk_read
W=${OUT:-/tmp}/nvlp-fid-gpu
rm -rf "$W"
mkdir -p "$W"
FAILED=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
check_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi; }
cat >"$W/job.py" <<'EOF'
import os, sys, time, torch, torch.distributed as dist
mode = sys.argv[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29581", RANK="0", WORLD_SIZE="1")
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
g = dist.new_group([0], pg_options=None, group_desc="my_tp_group")
x = torch.randn(2048, 2048, device="cuda")
t0 = time.monotonic()
def step(i):
    y = x @ x
    dist.all_reduce(y)
    dist.all_reduce(y, group=g)
    torch.cuda.synchronize()
if mode == "kineto":
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for i in range(40):
            step(i)
elif mode == "nvtx":
    with torch.autograd.profiler.emit_nvtx():
        for i in range(10):
            with torch.autograd.profiler.record_function(f"mystep{i}"):
                step(i)
else:
    for i in range(40):
        step(i)
print("wall_ms=%.1f" % ((time.monotonic() - t0) * 1000))
dist.destroy_process_group()
sys.exit(3 if mode == "exit" else 0)
EOF
for m in kineto nvtx exit; do
	mkdir -p "$W/$m"
	NVLPROF_DIR="$W/$m" LD_PRELOAD="$LIB" timeout 300 python3 "$W/job.py" $m >"$W/$m.out" 2>"$W/$m.err"
	echo "INFO: $m rc=$? $(grep wall_ms "$W/$m.out")"
	for f in "$W/$m"/*.nvlp; do [ -f "$f" ] && "$READ" "$f"; done | sed 's/$/ /' >"$W/$m.txt"
	"$NV" report "$W/$m" >"$W/$m.report" 2>&1
	echo "INFO: $m report: $(grep -m3 -iE 'wall' "$W/$m.report" | paste -sd'|')"
	echo "INFO: $m kinds: $(awk '{print $1}' "$W/$m.txt" | sort | uniq -c | paste -sd' ')"
	echo "INFO: $m commnames: $(grep '^commname' "$W/$m.txt" | head -4 | paste -sd'|')"
	echo "INFO: $m strings: $(grep '^string' "$W/$m.txt" | grep -iE 'pg|group|default|tp' | head -6 | paste -sd'|')"
	echo "INFO: $m clock foreign: $(grep -c '^clock source=4 ' "$W/$m.txt")  pyrefs: $(grep -c '^pyref' "$W/$m.txt")"
	echo "INFO: $m pystacks: $(grep '^pystack' "$W/$m.txt" | head -3 | cut -c1-300 | paste -sd'#')"
	echo "INFO: $m marks: $(grep -c '^mark' "$W/$m.txt") exitinfo: $(grep '^exitinfo' "$W/$m.txt" | head -2 | paste -sd'|')"
	# kernel span vs API span
	python3 - "$W/$m.txt" <<'EOF'
import sys, re
ks=[];api=[]
for l in open(sys.argv[1]):
    if l.startswith('kernel '):
        m=re.search(r' start=(\d+)',l); ks.append(int(m.group(1)))
    elif l.startswith('nccl '):
        m=re.search(r' t_enter=(\d+)',l); api.append(int(m.group(1)))
if ks and api:
    print("INFO: kernels %d span %.1f ms; nccl span %.1f ms; kernel-min minus api-min %.1f ms" % (len(ks),(max(ks)-min(ks))/1e6,(max(api)-min(api))/1e6,(min(ks)-min(api))/1e6))
else:
    print("INFO: kernels %d nccl %d" % (len(ks), len(api)))
EOF
done
check_eq "exit: EXITINFO status 3" 1 "$(grep -c '^exitinfo .* status=3 ' "$W/exit.txt")"
check_eq "nvtx: marks recorded under emit_nvtx" yes "$([ "$(grep -c '^mark' "$W/nvtx.txt")" -gt 10 ] && echo yes || echo no)"
check_eq "kineto: foreign clock pairs" yes "$([ "$(grep -c '^clock source=4 ' "$W/kineto.txt")" -ge 2 ] && echo yes || echo no)"
tail -5 "$W/kineto.err"
exit $((FAILED > 0))

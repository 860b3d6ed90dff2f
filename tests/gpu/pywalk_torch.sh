#!/usr/bin/env bash
# pywalk_torch.sh: on the GPU machine, a torch job (NCCL, one rank) under the shim: torch releases the GIL around its collectives, the Python 3.12 frame layout's self-check must pass and each all_reduce carry the file:line of its call.
set -u
cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
T=$(mktemp -d /tmp/nvlp-pywalk.XXXXXX)
trap 'rm -rf "$T"' EXIT
FAILED=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
cat >"$T/job.py" <<'EOF'
import os, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29531")
dist.init_process_group("nccl", rank=0, world_size=1)
x = torch.ones(1 << 20, device="cuda")

def step(t):
    dist.all_reduce(t)  # STEP_LINE

def other(t):
    dist.all_reduce(t)  # OTHER_LINE

for i in range(20):
    step(x)  # LOOP_LINE
other(x)  # LAST_LINE
torch.cuda.synchronize()
dist.destroy_process_group()
print("done", flush=True)
EOF
line_of() { grep -n "# $1\$" "$T/job.py" | cut -d: -f1; }
for walk in 1 0; do
	mkdir -p "$T/w$walk"
	NVLPROF_PYWALK=$walk NVLPROF_PYWALK_LOG=1 NVLPROF_DIR="$T/w$walk" LD_PRELOAD="$PWD/build/libnvlprof.so" \
		"$PY" "$T/job.py" >"$T/w$walk.out" 2>"$T/w$walk.err"
	echo "walk=$walk: rc=$? $(cat "$T/w$walk.out")"
	grep nvlprof "$T/w$walk.err" | head -5
	build/nvlprof dump "$T/w$walk" >"$T/w$walk.txt" 2>/dev/null
	echo "walk=$walk: $(grep -c '^nccl ' "$T/w$walk.txt") NCCL records, $(grep -c '^pyref ' "$T/w$walk.txt") PYREF, $(grep -c '^pystack ' "$T/w$walk.txt") PYSTACK"
	grep '^pystack ' "$T/w$walk.txt" | cut -c1-400
done
grep -q "Python 3.12 frame layout: self-check passed" "$T/w1.err" && pass "3.12: self-check passed" || fail "3.12: self-check passed"
grep -q "^pystack .*job.py:$(line_of STEP_LINE):step\\\\n[^\"]*job.py:$(line_of LOOP_LINE):<module>" "$T/w1.txt" &&
	pass "3.12, GIL released by torch: all_reduce's chain step <- <module>" || fail "3.12: all_reduce's chain"
grep -q "^pystack .*job.py:$(line_of OTHER_LINE):other\\\\n[^\"]*job.py:$(line_of LAST_LINE):<module>" "$T/w1.txt" &&
	pass "3.12: the last all_reduce's chain" || fail "3.12: the last all_reduce's chain"
[ "$(grep -c '^pyref ' "$T/w0.txt")" = 0 ] && pass "walk off: no PYREF (torch released the GIL)" || fail "walk off: no PYREF"
build/nvlprof report "$T/w1" 2>&1 | sed -n '/FINDINGS/,/^$/p' | head -12
exit $((FAILED > 0))

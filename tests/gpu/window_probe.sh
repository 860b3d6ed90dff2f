#!/usr/bin/env bash
# window_probe.sh: how many kernels a default-mode kernel window keeps on a real job: the HF GPT-2 loop
# (tests/gpu/real/hf_train.py, ~600 kernels a step) under NVLPROF_KERNELS=window:20/500+500 and `all`;
# per window: kernels that started inside it, and the first/last kernel start relative to its edges.
set -u
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/nvlp-window}
NV=$PWD/build/nvlprof
mkdir -p "$OUT"
for m in ${WINDOW_MODES:-window:20/500+500 all}; do
	d=$OUT/win_$(echo $m | tr ':/+' '___')
	NVLPROF_KERNELS=$m timeout 120 $NV run -o "$d" -- torchrun --standalone --nproc-per-node 1 \
		tests/gpu/real/hf_train.py --steps 250 >"$d.log" 2>&1
	echo "== $m: rc=$?"
	$NV dump --json "$d" 2>/dev/null | python3 -c '
import json, sys
w, k = [], []
for l in sys.stdin:
    r = json.loads(l)
    if r["kind"] == "kwindow": w.append((r["start"], r["start"] + r["dur"]))
    elif r["kind"] == "kernel": k.append(r["start"])
k.sort()
print(f"kernels {len(k)}, windows {len(w)}")
if not w and len(k) > 1:
    span = (k[-1] - k[0]) / 1e6
    print(f"  all: {len(k)/span:.1f} kernels per ms over {span:.0f} ms")
cnt = [sum(1 for t in k if a <= t < b) for a, b in w]
print("  kernels per window:", " ".join(map(str, cnt)))
for a, b in [x for x, c in zip(w, cnt) if c][:6]:
    inside = [t for t in k if a <= t < b]
    f = (inside[0] - a) / 1e6 if inside else float("nan")
    e = (b - inside[-1]) / 1e6 if inside else float("nan")
    print(f"  window {(b-a)/1e6:6.2f} ms: {len(inside):5d} kernels, first {f:6.2f} ms after open, last {e:6.2f} ms before close")
outside = sum(1 for t in k if not any(a <= t < b for a, b in w)) if w else 0
print(f"  kernels outside every window: {outside}")
'
done

#!/usr/bin/env bash
# hta_check.sh: loads the Chrome/Kineto export of every shipped trace with Holistic Trace Analysis
# and runs its analyses; needs HTA's source (not vendored) and its Python dependencies.
#   HTA_SRC=/path/to/HolisticTraceAnalysis bash tests/export/hta_check.sh
# Debian: apt-get install python3-pandas python3-numpy python3-plotly python3-networkx
#         python3-pydot python3-yaml python3-psutil python3-ijson
# Not part of `make test` (CI has no HTA); prints PASS/FAIL lines and "N passed, N failed".
source "$(dirname "$0")/../lib.sh"
PY=${PYTHON:-python3}
if [ -z "${HTA_SRC:-}" ] || [ ! -f "$HTA_SRC/hta/trace_analysis.py" ]; then
	echo "hta_check: set HTA_SRC to a checkout of facebookresearch/HolisticTraceAnalysis" >&2
	exit 2
fi
$PY -c 'import pandas, numpy, plotly, networkx, yaml, psutil' 2>/dev/null ||
	{ echo "hta_check: $PY lacks HTA's dependencies (see the header)" >&2; exit 2; }

cat >"$T/hta.py" <<'EOF'
import logging, math, os, sys
sys.path.insert(0, os.environ["HTA_SRC"])
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis

d, name = sys.argv[1], sys.argv[2]
nfiles = len([f for f in os.listdir(d) if f.endswith(".json")])
def check(ok, what):
    print(("PASS: " if ok else "FAIL: ") + name + " " + what)

# what the export holds, read straight from the files: HTA must find the same
import json
comm = comp = mem = 0
for f in os.listdir(d):
    for e in json.load(open(os.path.join(d, f)))["traceEvents"]:
        if e.get("cat") == "kernel":
            comm += e["name"].startswith("nccl")
            comp += not e["name"].startswith("nccl")
        mem += e.get("cat") == "gpu_memcpy"

a = TraceAnalysis(trace_dir=d)
ranks = sorted(a.t.traces)
check(len(ranks) == nfiles, "HTA loads every rank file (%s of %d)" % (ranks, nfiles))
kb, km = a.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)[:2]
names = set(km["name"]) if "name" in km else set()
check(names and not any(n.startswith("_Z") for n in names)
      and (not comm or any(n.startswith("ncclDevKernel_") for n in names)),
      "kernel names as people search them (demangled, NCCL's by name): %s" % sorted(names)[:3])
types = dict(zip(kb["kernel_type"], kb["sum"]))
check((types.get("COMMUNICATION", 0) > 0) == (comm > 0)
      and (types.get("COMPUTATION", 0) > 0) == (comp > 0)
      and (types.get("MEMORY", 0) > 0) == (mem > 0),
      "kernel breakdown: %d NCCL kernels, %d others, %d copies exported; HTA: %s"
      % (comm, comp, mem, types))
if comm and comp:
    ov = a.get_comm_comp_overlap(visualize=False)
    col = [c for c in ov.columns if c != "rank"][0]
    check(len(ov) == nfiles and all(0 <= v <= 100 for v in ov[col]),
          "comm/comp overlap per rank %s" % list(ov[col]))
tb = a.get_temporal_breakdown(visualize=False)
check(len(tb) == nfiles and (tb["kernel_time(us)"] > 0).all()
      and ((tb["compute_time(us)"] > 0).all() or not comp), "temporal breakdown per rank")
ib = a.get_idle_time_breakdown(ranks=ranks, visualize=False)[0]
check(len(ib) > 0 and set(ib["rank"]) == set(ranks), "idle time breakdown per rank and stream")
EOF

for d in "$ROOT"/examples/traces/*/; do
	n=$(basename "$d")
	rm -rf "$T/$n"
	if ! $CLI export -q -f chrome -o "$T/$n/" "$d" 2>"$T/err"; then
		fail "$n export: $(head -1 "$T/err")"
		continue
	fi
	HTA_SRC="$HTA_SRC" timeout 600 $PY "$T/hta.py" "$T/$n" "$n" 2>"$T/err" || fail "$n HTA: $(tail -1 "$T/err")"
done | tee "$T/out"
echo "$(grep -c '^PASS: ' "$T/out") passed, $(grep -c '^FAIL: ' "$T/out") failed"
! grep -q '^FAIL: ' "$T/out"

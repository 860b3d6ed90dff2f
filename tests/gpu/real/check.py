#!/usr/bin/env python3
"""check.py: assertions on run_real.sh's third-party jobs (issue 16 item 9); prints PASS:/FAIL: lines.

  check.py TRACES LOGS NGPU SCENARIO...   reads the reports through `nvlprof report --json` / text only.
"""
import glob, gzip, json, os, re, subprocess, sys

NV = os.environ.get("NVLPROF", "build/nvlprof")
failed = 0


def check(cond, name, detail=""):
    global failed
    print(("PASS: " if cond else "FAIL: ") + name + (f" ({detail})" if detail else ""), flush=True)
    failed += 0 if cond else 1


def report(d):
    p = subprocess.run([NV, "report", "--json", d], capture_output=True, text=True)
    try:
        return json.loads(p.stdout), p.stderr
    except ValueError:
        return None, p.stderr + p.stdout[:400]


def text(d):
    return subprocess.run([NV, "report", d], capture_output=True, text=True).stdout


def wall(logs, n):
    try:
        s = open(f"{logs}/{n}.wall").read()
        return int(re.search(r"rc=(\d+)", s).group(1)), float(re.search(r"wall_s=([\d.e-]+)", s).group(1))
    except (OSError, AttributeError, ValueError):
        return -1, 0.0


def result_line(path, key):
    """The job's own result line (nvlprof run adds its summary line after it)."""
    try:
        lines = [l for l in open(path).read().splitlines() if key in l and not l.startswith("nvlprof")]
    except OSError:
        return ""
    return lines[-1].split(key, 1)[1].strip() if lines else ""


def jload(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None


def warnings(rep):
    return [f["id"] for f in rep.get("findings", []) if f.get("severity") in ("warning", "critical")]


def rundir(traces, n):
    """nvlprof run -o DIR writes the traces into DIR itself."""
    return f"{traces}/{n}"


def common(traces, logs, n, ngpu, healthy=True, launcher=False):
    rc, w = wall(logs, n)
    check(rc == 0, f"{n}: job exit 0 under nvlprof", f"rc={rc}")
    rep, err = report(rundir(traces, n))
    check(rep is not None, f"{n}: report --json parses", err.strip()[:200])
    if rep is None:
        return None
    ranks = rep.get("ranks", [])
    check(len(ranks) == ngpu and sorted(r["rank"] for r in ranks) == list(range(ngpu)),
          f"{n}: exactly one row per rank", f"{[r['rank'] for r in ranks]}")
    others = rep.get("other_processes", [])
    if launcher:
        check(len(others) >= 1, f"{n}: launcher listed apart, not as a rank",
              f"{[(o.get('pid'), o.get('role')) for o in others]}")
    jw = rep["job"]["wall_ms"] / 1000.0
    # the trace spans the first intercepted call to the end (imports before it are not traced)
    check(0.2 <= jw <= 1.05 * w + 0.5, f"{n}: wall time correct (not inflated)", f"report {jw:.2f} s traced, job {w:.2f} s")
    if healthy:
        check(not warnings(rep), f"{n}: no warning on a healthy run", f"{warnings(rep)}")
    return rep


STARTUP = os.environ.get("NVLPROF_CUPTI", "").startswith("startup")
LAZY = os.environ.get("NVLPROF_CUPTI", "") == "lazy"
UM_ATTACH = os.environ.get("NVLPROF_UM", "") == "attach"  # lazy attaches CUPTI mid-run for managed memory


def detached(rep, n, want):
    """NVLPROF_CUPTI=startup: the report says CUPTI was detached in every rank (want) or in none.
    NVLPROF_CUPTI=lazy: CUPTI left out in every rank (want), or attached from the start (CuPy)."""
    if LAZY and rep is not None:
        z = rep["job"].get("cupti_lazy") or {}
        ranks = len(rep.get("ranks", []))
        if want:
            check(z.get("not_attached", 0) >= ranks >= 1, f"{n}: CUPTI not attached in any rank (lazy)", json.dumps(z))
        else:
            check(z.get("attached_from_start", 0) >= 1 and not z.get("not_attached"),
                  f"{n}: CUPTI attached from the start (lazy: needed there)", json.dumps(z))
        return
    if not STARTUP or rep is None:
        return
    d = rep["job"].get("cupti_detached") or {}
    ranks = len(rep.get("ranks", []))
    kept = rep["job"].get("cupti_kept_attached_unsafe_finalize", 0)
    if want and kept and os.environ.get("NVLPROF_CUPTI_FINALIZE") != "1":
        # CUPTI 13.0: cuptiFinalize corrupts the heap, so startup keeps CUPTI attached (cupti/detach.c)
        check(kept >= ranks >= 1 and not d, f"{n}: CUPTI 13.0: kept attached in every rank, said in the report",
              f"kept {kept}, detached {json.dumps(d)}")
        return
    if want:
        check(d.get("processes", 0) >= ranks >= 1, f"{n}: CUPTI detached after start-up in every rank", json.dumps(d))
    else:
        check(not d, f"{n}: CUPTI kept attached (no detach in the report)", json.dumps(d))


def losses_equal(logs, a, b, key="losses"):
    x, y = jload(f"{logs}/{a}.json"), jload(f"{logs}/{b}.json")
    if not x or not y:
        check(False, f"{b}: results written", f"{a}.json/{b}.json missing")
        return
    lx, ly = x[key], y[key]
    if not isinstance(lx, list):
        lx, ly = [lx], [ly]
    d = max((abs(p - q) / max(abs(p), 1e-9) for p, q in zip(lx, ly)), default=0)
    # the first loss precedes any (nondeterministic, atomics) backward pass: bit-identical
    check(len(lx) == len(ly) and lx[0] == ly[0] and d < 2e-2, f"{b}: results unchanged by nvlprof",
          f"{len(lx)} values, first {lx[0]:.6f} vs {ly[0]:.6f}, max rel diff {d:.2e}")


def main():
    traces, logs, ngpu, scen = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    if "hf" in scen:
        rep = common(traces, logs, "hf", ngpu, launcher=True)
        losses_equal(logs, "hf_base", "hf")
        detached(rep, "hf", True)
        if rep:
            j = rep["job"]
            check(j["steps"] == 0 or 29 <= j["steps"] <= 31, "hf: steps only where recognised, and then the job's 30",
                  f"{j['steps']} steps, source {j['step_source']}: {j.get('steps_why')}")
    if "hfprof" in scen:
        rep = common(traces, logs, "hfprof", ngpu, launcher=True)
        losses_equal(logs, "hfprof_base", "hfprof")
        if rep:
            j = rep["job"]
            # torch.profiler's ProfilerStep#N reach the shim as CUPTI external-correlation ranges (59362b1):
            # the steps are the profiler's active ones (schedule wait 2, warmup 2, active 26: 25-26 marked,
            # 'ProfilerStep via CUPTI'); without them the regular pattern gives the job's 30
            marks = j["step_source"] == "marks" and 24 <= j["steps"] <= 26
            check(marks or (j["step_source"] == "pattern" and 29 <= j["steps"] <= 31),
                  "hfprof: steps right with torch.profiler active",
                  f"{j['steps']} steps, source {j['step_source']}: {j.get('steps_why')}")
        try:
            ev = json.load(gzip.open(f"{logs}/kineto.json.gz"))["traceEvents"]
            k = sum(1 for e in ev if e.get("cat") == "kernel")
            check(k > 1000, "hfprof: torch.profiler still records kernels under nvlprof", f"{k} kernel events")
        except (OSError, ValueError, KeyError) as e:
            check(False, "hfprof: kineto trace readable", str(e))
    if "hfcompile" in scen:
        rep = common(traces, logs, "hfc", ngpu, launcher=True)
        losses_equal(logs, "hfc_base", "hfc")
        detached(rep, "hfc", True)  # torch's runtime is loaded: Triton's driver-API launches need no CUPTI
        if rep:
            j = rep["job"]
            check(j["steps"] == 0 or 29 <= j["steps"] <= 31, "hfc: steps only where recognised, and then the job's 30",
                  f"{j['steps']} steps, source {j['step_source']}: {j.get('steps_why')}")
    if "lightning" in scen:
        detached(common(traces, logs, "lt", ngpu, launcher=ngpu > 1), "lt", True)
        losses_equal(logs, "lt_base", "lt", key="loss")
    for b in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "sendrecv_perf"):
        if "nccltests" not in scen or not os.path.isdir(rundir(traces, "nt_" + b)):
            continue
        n = "nt_" + b
        rep = common(traces, logs, n, 1)  # one process drives all GPUs: one trace, ngpu ranks inside
        if rep:
            j = rep["job"]
            check(j["step_source"] != "pattern" or j["steps"] < 50, f"{n}: a size sweep is not steps",
                  f"{j['steps']} steps, source {j['step_source']}: {j.get('steps_why')}")
            names = sorted({c["collective"] for c in rep.get("collectives", [])})
            want = {"all_reduce_perf": "ncclAllReduce", "all_gather_perf": "ncclAllGather",
                    "reduce_scatter_perf": "ncclReduceScatter", "sendrecv_perf": "ncclSend"}[b]
            check(want in names, f"{n}: {want} as NCCL spells it", f"{names}")
    if "cupy" in scen:
        rep = common(traces, logs, "cupy", 1, healthy=False)
        detached(rep, "cupy", False)  # no CUDA runtime library: the driver callbacks are its only way in
        a, c = result_line(f"{logs}/cupy_base.log", "checksum="), result_line(f"{logs}/cupy.log", "checksum=")
        check(a == c and a != "", "cupy: result unchanged", f"{a} vs {c}")
        if rep:
            u = [f for f in rep["findings"] if f["id"] == "uma_thrashing"]
            check(bool(u), "cupy: uma_thrashing reported", f"{[f['id'] for f in rep['findings']]}")
            loc = json.dumps(u[0]["evidence"]) if u else ""
            check("drv_cupy.py:" in loc, "cupy: allocation site is the Python line", loc[:300])
    for name in ("cupyrt", "cupylate"):  # torch's runtime in the process, managed memory through it
        if name not in scen:
            continue
        rep = common(traces, logs, name, 1, healthy=False)
        if LAZY and UM_ATTACH and rep is not None:
            z = rep["job"].get("cupti_lazy") or {}
            # CUPTI attached before the first managed allocation (run 15): migrations measured
            check(z.get("not_attached") == 1 and z.get("attached_for_managed") == 1 and
                  z.get("managed_not_measured") == 0,
                  f"{name}: lazy: CUPTI left out at start, attached for the managed memory", json.dumps(z))
            gaps = json.dumps([f for f in rep["findings"] if f["id"] == "collection_gaps"])
            check("managed memory allocated under NVLPROF_CUPTI=lazy" not in gaps,
                  f"{name}: lazy: no gap for the migrations", gaps[:300])
        elif LAZY and rep is not None:
            z = rep["job"].get("cupti_lazy") or {}
            # no mid-run attach (runs 16-17: a later cuInit hung): the migrations go unmeasured, and it says so
            check(z.get("not_attached") == 1 and z.get("attached_for_managed") == 0 and
                  z.get("managed_not_measured") == 1,
                  f"{name}: lazy: CUPTI left out, the managed memory's migrations not measured", json.dumps(z))
            gaps = json.dumps([f for f in rep["findings"] if f["id"] == "collection_gaps"])
            check("no mid-run attach unless NVLPROF_UM=attach" in gaps,
                  f"{name}: lazy: the gap says why and what measures them", gaps[:300])
        a, c = result_line(f"{logs}/{name}_base.log", "checksum="), result_line(f"{logs}/{name}.log", "checksum=")
        check(a == c and a != "", f"{name}: result unchanged", f"{a} vs {c}")
        if rep and (not LAZY or UM_ATTACH):
            u = [f for f in rep["findings"] if f["id"] == "uma_thrashing"]
            check(bool(u), f"{name}: uma_thrashing reported", f"{[f['id'] for f in rep['findings']]}")
    if "graph" in scen:
        rep = common(traces, logs, "graph", 1)  # a short job: it may end before the detach is due
        a, c = result_line(f"{logs}/graph_base.log", "result"), result_line(f"{logs}/graph.log", "result")
        check(a == c and a != "", "graph: result unchanged", f"{a} vs {c}")
        if rep:
            j = rep["job"]
            check(j["step_source"] != "pattern" or (j["step_ms"] or 0) > 0.5, "graph: a replay loop is not steps",
                  f"{j['steps']} steps of {j['step_ms']} ms, source {j['step_source']}")
            check(bool(rep.get("graphs")), "graph: graph replays reported", json.dumps(rep.get("graphs"))[:200])
    if "killed" in scen:
        rep, err = report(rundir(traces, "killed"))
        t = text(rundir(traces, "killed"))
        check(rep is not None and len(rep.get("ranks", [])) == ngpu, "killed: one row per rank")
        check(re.search(r"no END record|SIGKILL|signal 9|killed", t) is not None, "killed: says how the rank ended",
              (re.search(r".*(no END record|SIGKILL|signal 9|killed).*", t) or [""])[0][:200])
        check(re.search(r"in step \d+|after \d+ NCCL calls", t) is not None, "killed: says the step (or the collective) it was in",
              (re.search(r".*(in step \d+|after \d+ NCCL calls).*", t) or [""])[0][:200])
    print(f"check: {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


main()

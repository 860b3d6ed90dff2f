#!/usr/bin/env python3
"""check.py: assertions on real-GPU traces (run by tests/gpu/run_gpu.sh and run_8gpu.sh); prints PASS:/FAIL: lines.

  ranks DIR N [MIN]        N-rank job: traces complete, collectives matched on all N, link counters from all N
  links DIR N nvlink|pcie  that link carries the collectives on every GPU (pcie: pcie_fallback spans N ranks)
  losses BASE.json PROF.json   identical losses;  busbw DIR [NCCL_TESTS.json]   busbw notes vs nccl-tests
  speed DIR [MIN_MRECS] [MAX_S]   report speed;  overhead LOGDIR [PREFIX];  findings DIR IDS [id@rank=N]...
  kcoll DIR_DEFAULT DIR_CHANNELS   kernel channels folded per collective vs one record per channel
  topo DIR_CUPTI DIR_LAZY   NVLPROF_CUPTI=lazy's DEVICE/NVLINK records (driver + NVML) equal CUPTI's

Reads traces only through the stable interfaces: `nvlprof dump --json` and `nvlprof report --json`.
"""
import collections
import json
import os
import subprocess
import sys

NV = os.environ.get("NVLPROF", "build/nvlprof")
failed = 0


def check(cond, name, detail=""):
    global failed
    if cond:
        print(f"PASS: {name}" + (f" ({detail})" if detail else ""), flush=True)
    else:
        failed += 1
        print(f"FAIL: {name}" + (f": {detail}" if detail else ""), flush=True)


def dump(d):
    out = subprocess.run([NV, "dump", "--json", d], capture_output=True, text=True)
    recs = []
    for line in out.stdout.splitlines():
        if line.strip():
            recs.append(json.loads(line))
    return recs


def report(d):
    out = subprocess.run([NV, "report", "--json", d], capture_output=True, text=True)
    try:
        return json.loads(out.stdout)
    except Exception as e:  # noqa
        print(out.stdout[-2000:], out.stderr[-2000:])
        return {}


def finding_ids(rep, severities=("warning", "critical")):
    return sorted({f["id"] for f in rep.get("findings", []) if f.get("severity") in severities})


def losses(path):
    with open(path) as f:
        return json.load(f)["losses"]


def cmd_ddp(d, base_json, prof_json):
    recs = dump(d)
    check(losses(base_json) == losses(prof_json), "ddp: losses identical with and without nvlprof",
          f"{len(losses(base_json))} losses")
    ar = [r for r in recs if r.get("kind") == "nccl" and r.get("name") == "ncclAllReduce"]
    by_rank = collections.defaultdict(list)
    for r in ar:
        by_rank[r["rank"]].append(r)
    check(sorted(by_rank) == [0, 1], "ddp: AllReduce records from both ranks", str({k: len(v) for k, v in by_rank.items()}))
    if sorted(by_rank) == [0, 1]:
        c0 = {r["comm"] for r in by_rank[0]}
        c1 = {r["comm"] for r in by_rank[1]}
        check(c0 == c1 and len(c0) >= 1, "ddp: AllReduce comm hashes equal on both ranks", f"{sorted(c0)} vs {sorted(c1)}")
        s0 = sorted((r["comm"], r["seq"]) for r in by_rank[0])
        s1 = sorted((r["comm"], r["seq"]) for r in by_rank[1])
        check(s0 == s1 and len(s0) >= 30, "ddp: AllReduce (comm, seq) sets match across ranks", f"{len(s0)} vs {len(s1)}")
        b0 = {(r["comm"], r["seq"]): r["bytes"] for r in by_rank[0]}
        b1 = {(r["comm"], r["seq"]): r["bytes"] for r in by_rank[1]}
        check(b0 == b1, "ddp: matched AllReduces have equal bytes on both ranks")
        check(all(r["nranks"] == 2 for r in ar), "ddp: nranks == 2 on every AllReduce")
    cp = [r for r in recs if r.get("kind") == "copy" and r.get("src_device") == 0 and r.get("dst_device") == 1]
    check(len(cp) >= 1, "ddp: tensor.to('cuda:1') recorded as a copy 0 -> 1",
          f"{len(cp)} copies, first {cp[0]['name'] if cp else '-'} {cp[0]['bytes'] if cp else 0} bytes")
    kern = [r for r in recs if r.get("kind") == "kernel"]
    nccl_k = [r for r in kern if "nccl" in str(r.get("name", "")).lower()]
    check(len(nccl_k) >= len(ar) * 0.9 and len(nccl_k) > 0, "ddp: NCCL kernels recorded by CUPTI", f"{len(nccl_k)} nccl kernels, {len(kern)} kernels, {len(ar)} allreduce calls")
    rep = report(d)
    return recs, rep


def num(v):
    if isinstance(v, str):
        return int(v, 16) if v.startswith("0x") else int(v)
    return int(v or 0)


def link_totals(recs):
    """bytes per (device, counter) summed over LINKSAMPLE records."""
    tot = collections.defaultdict(int)
    for r in recs:
        if r.get("kind") == "linksample":
            for k in ("nvl_tx", "nvl_rx", "nvl_tx_user", "nvl_rx_user", "pcie_rd", "pcie_wr"):
                tot[(r["device"], k)] += num(r.get(k, 0))
    return tot


def payload(logf):
    """bytes that crossed: the printed payload plus the one warm-up copy of each phase."""
    import re
    tot = 0
    for line in open(logf):
        m = re.search(r"payload (\d+) bytes \((\d+) x (\d+)\)", line)
        if m:
            tot += int(m.group(1)) + int(m.group(3))
    return tot


def cmd_p2p(d_on, log_on, d_off, log_off):
    for d, logf, peer in ((d_on, log_on, True), (d_off, log_off, False)):
        recs = dump(d)
        pay = payload(logf)
        tot = link_totals(recs)
        tag = "peer enabled" if peer else "peer not enabled"
        check(pay > 0, f"p2p {tag}: program reported its payload", f"{pay} bytes")
        nvl = tot[(0, "nvl_tx_user")]
        pcie = tot[(0, "pcie_rd")] + tot[(0, "pcie_wr")]
        gc = [r for r in recs if r.get("kind") == "gpucopy"]
        kinds = collections.Counter(num(r["copy_kind"]) for r in gc)
        if peer:
            check(pay and abs(nvl - pay) <= 0.02 * pay, f"p2p {tag}: GPU0 NVLink tx user bytes within 2% of payload",
                  f"nvl_tx_user {nvl:.4g} vs payload {pay:.4g} ({(nvl / pay - 1) * 100 if pay else 0:+.2f}%)")
            check(pcie < 0.02 * pay, f"p2p {tag}: GPU0 PCIe bytes near zero", f"{pcie:.4g}")
            check(kinds.get(10, 0) > 0, f"p2p {tag}: CUPTI shows peer-to-peer copies (PTOP)", str(dict(kinds)))
        else:
            check(pay and pcie >= pay, f"p2p {tag}: GPU0 PCIe bytes at least the payload", f"pcie {pcie:.4g} vs payload {pay:.4g}")
            check(nvl < 0.02 * pay, f"p2p {tag}: GPU0 NVLink bytes near zero", f"{nvl:.4g}")
            check(kinds.get(1, 0) > 0 and kinds.get(2, 0) > 0,
                  f"p2p {tag}: copy records show staging through host (HTOD + DTOH)", str(dict(kinds)))


def cmd_ncclprof(d):
    """NCCL's profiler plugin served by the shim: one NCCLPROF record per collective, on the
    shim's communicator, with NCCL's algorithm/protocol names; the report shows the choices."""
    recs = dump(d)
    by_file = collections.defaultdict(lambda: {"ar": 0, "prof": 0, "comms": set(), "pcomms": set(), "algos": collections.Counter()})
    for r in recs:
        f = by_file[r.get("file")]
        if r.get("kind") == "nccl" and r.get("name") == "ncclAllReduce":
            f["ar"] += 1
            f["comms"].add(r.get("comm"))
        elif r.get("kind") == "ncclprof" and r.get("name") == "ncclAllReduce":
            f["prof"] += 1
            f["pcomms"].add(r.get("comm"))
            f["algos"][f'{r.get("algo")}/{r.get("proto")}/{r.get("channels")}ch'] += 1
    ranks = {k: v for k, v in by_file.items() if v["ar"]}
    for k, v in ranks.items():
        print(f"ncclprof {k}: {v['ar']} AllReduce calls, {v['prof']} plugin records, choices {dict(v['algos'])}")
    check(len(ranks) >= 2 and all(v["prof"] == v["ar"] for v in ranks.values()),
          "ncclprof: one plugin record per AllReduce on every rank", str({k: (v["ar"], v["prof"]) for k, v in ranks.items()}))
    check(ranks and all(v["pcomms"] <= v["comms"] | {0, "0x0"} and v["pcomms"] & v["comms"] for v in ranks.values()),
          "ncclprof: records carry the shim's communicator hash", str({k: (sorted(map(str, v["pcomms"])), sorted(map(str, v["comms"]))) for k, v in ranks.items()}))
    known = {"RING", "TREE", "NVLS", "NVLS_TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "PAT"}
    names = {a.split("/")[0] for v in ranks.values() for a in v["algos"]}
    check(names and names <= known, "ncclprof: NCCL's algorithm names", str(sorted(names)))
    rep = report(d)
    ch = rep.get("nccl_choices", [])
    check(any(c.get("collective") == "ncclAllReduce" and c.get("comm") for c in ch), "ncclprof: report lists NCCL's choices", json.dumps(ch)[:300])


def cmd_kcoll(d_fold, d_chan):
    """NCCL's kernel channels folded per collective (KCOLL, the default) against one KCH record
    per channel (NVLPROF_KCH=channels), the same job run twice: one folded record per collective
    execution standing for all its channels, every collective GPU-timed either way, GPU times per
    collective alike (the runs differ only by timing), and what each way costs in trace bytes."""
    out = {}
    for name, d in (("kcoll", d_fold), ("kch", d_chan)):
        recs = dump(d)
        colls = sum(1 for r in recs if r.get("kind") == "nccl" and r.get("name", "").startswith("ncclAll"))
        kcoll = [r for r in recs if r.get("kind") == "kcoll"]
        kch = [r for r in recs if r.get("kind") == "kch"]
        kc = report(d).get("kernel_channels") or {}
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".nvlp"))
        out[name] = dict(colls=colls, kcoll=len(kcoll), chans=sum(int(r.get("chans", 0)) for r in kcoll),
                         kch=len(kch), kc=kc, size=size)
        print(f"kcoll {name}: {colls} AllReduce/AllGather calls, {len(kcoll)} KCOLL records for "
              f"{out[name]['chans']} channels, {len(kch)} KCH records, {size} trace bytes "
              f"({size / max(colls, 1):.1f} a call); report: {json.dumps(kc)[:400]}")
    f, c = out["kcoll"], out["kch"]
    check(f["kch"] == 0 and f["colls"] > 0 and f["colls"] <= f["kcoll"] <= 2 * f["colls"],
          "kcoll: one KCOLL record per collective (two at most), no KCH", f"{f['kcoll']} for {f['colls']} calls")
    check(c["kcoll"] == 0 and c["kch"] >= c["colls"], "kcoll: NVLPROF_KCH=channels writes KCH records only", f"{c['kch']}")
    for name, x in out.items():
        kc = x["kc"]
        check(kc.get("collective_calls", 0) > 0 and kc.get("calls_without_gpu_time", 1) == 0,
              f"kcoll {name}: every collective call GPU-timed from its channels",
              f"{kc.get('calls_without_gpu_time')} of {kc.get('collective_calls')} without")
    per = {n: x["kc"].get("calls_timed_ms", 0) / max(x["kc"].get("calls_timed", 0), 1) for n, x in out.items()}
    check(per["kch"] > 0 and abs(per["kcoll"] / per["kch"] - 1) < 0.25,
          "kcoll: mean GPU time per collective alike in the two runs (within 25%)",
          f"{per['kcoll'] * 1e3:.1f} us folded, {per['kch'] * 1e3:.1f} us per channel")
    ch = f["chans"] / max(f["kcoll"], 1)
    print(f"kcoll: {ch:.1f} channels a record; trace bytes a call {f['size'] / max(f['colls'], 1):.1f} folded, "
          f"{c['size'] / max(c['colls'], 1):.1f} per channel")


def cmd_nvml(d, logf):
    """NVLPROF_LINKS=nvml: link counters from NVML (source 2) only, and they still see the payload."""
    recs = dump(d)
    ls = [r for r in recs if r.get("kind") == "linksample"]
    src = collections.Counter(num(r.get("source", 0)) for r in ls)
    check(src.get(2, 0) >= 10 and src.get(1, 0) == 0, "nvml: link samples come from NVML only", str(dict(src)))
    notes = [r for r in recs if r.get("kind") == "note" and r.get("name") == "nvml_on"]
    check(len(notes) >= 1, "nvml: a NOTE says NVML is the source", str([n.get("message") for n in notes])[:200])
    pay = payload(logf)
    nvl = link_totals(recs)[(0, "nvl_tx_user")]
    check(pay and abs(nvl - pay) <= 0.05 * pay, "nvml: GPU0 NVLink tx bytes within 5% of payload",
          f"nvl_tx_user {nvl:.4g} vs payload {pay:.4g} ({(nvl / pay - 1) * 100 if pay else 0:+.2f}%)")


def cmd_flip(d_ok, d_fb):
    shares = []
    for d in (d_ok, d_fb):
        tot = link_totals(dump(d))
        nvl = sum(v for (dev, k), v in tot.items() if k in ("nvl_tx", "nvl_rx"))
        pcie = sum(v for (dev, k), v in tot.items() if k in ("pcie_rd", "pcie_wr"))
        shares.append((nvl / (nvl + pcie) if nvl + pcie else -1, nvl, pcie))
    check(shares[0][0] > 0.5 and 0 <= shares[1][0] < 0.5, "ddp: NVLink share of link bytes flips with NCCL_P2P_DISABLE=1",
          f"default {shares[0][0]:.2f} (nvl {shares[0][1]:.3g} pcie {shares[0][2]:.3g}), P2P off {shares[1][0]:.2f} "
          f"(nvl {shares[1][1]:.3g} pcie {shares[1][2]:.3g})")
    rep = report(d_ok)
    colls = rep.get("collectives", [])
    ar = [c for c in colls if "AllReduce" in str(c.get("collective", ""))]
    check(ar and all(c.get("time_source") == "gpu" for c in ar), "ddp: every AllReduce has a GPU time",
          json.dumps(ar)[:300])


def cmd_diff(path):
    try:
        d = json.load(open(path))
    except Exception as e:  # noqa
        check(False, "diff: --json output parses", str(e))
        return
    text = json.dumps(d)
    check("pcie_fallback" in text, "diff: names pcie_fallback", text[:300])
    check("NCCL_P2P_DISABLE" in text, "diff: names NCCL_P2P_DISABLE among the env differences")


def cmd_uma(d_thrash, d_adv):
    res = []
    for d in (d_thrash, d_adv):
        recs = dump(d)
        allocs = [(num(r["ptr"]), num(r["bytes"])) for r in recs if r.get("kind") == "managed" and r.get("name") == "cudaMallocManaged"]
        um = [r for r in recs if r.get("kind") == "um"]
        inside = [r for r in um if any(p <= num(r["address"]) < p + n for p, n in allocs)]
        migr = [r for r in um if str(r.get("name", "")).lower().startswith("bytes") or num(r.get("counter", 0)) in (1, 2, 8)]
        res.append((len(allocs), len(um), len(inside), len(migr), recs))
    n_alloc, n_um, n_in, n_migr, recs = res[0]
    check(n_alloc >= 1, "uma: managed allocation recorded", f"{n_alloc}")
    stk = [r for r in recs if r.get("kind") == "managed" and r.get("name") == "cudaMallocManaged" and num(r.get("stack", 0))]
    check(len(stk) >= 1, "uma: managed allocation has a call stack")
    check(n_um > 0 and n_in >= 0.95 * n_um, "uma: unified-memory records fall inside the managed allocation", f"{n_in}/{n_um}")
    check(res[1][3] * 4 <= n_migr, "uma: advise/prefetch shows far fewer migrations", f"thrash {n_migr}, advised {res[1][3]}")


def kineto_events(prefix):
    """The events of each rank's torch.profiler chrome trace, by file suffix (".rank0.json")."""
    import glob
    out = {}
    for f in sorted(glob.glob(prefix + ".rank*.json")):
        try:
            out[f[len(prefix):]] = json.load(open(f)).get("traceEvents", [])
        except Exception:  # noqa
            out[f[len(prefix):]] = []
    return out


POLLS = ("cudaEventQuery", "cudaStreamQuery")  # how often these run depends on timing


def kineto_calls(ev):
    """Runtime calls of one torch.profiler trace by name: (on threads that run torch ops, on other
    threads). The others are background threads, such as ProcessGroupNCCL's watchdog, whose periodic
    pass over its work list (cudaEventQuery under a capture-mode guard) lands in the 5 profiled steps
    or not, by timing (seen: 255 such calls in one run, none in the next, with the same build)."""
    op_tids = {e.get("tid") for e in ev if e.get("cat") == "cpu_op"}
    job, other = collections.Counter(), collections.Counter()
    for e in ev:
        if e.get("cat") == "cuda_runtime":
            (job if e.get("tid") in op_tids else other)[e.get("name")] += 1
    return job, other


def kineto_counts(events):
    """Per rank file of a torch.profiler chrome trace (kineto_events): kernels, NCCL kernels,
    runtime calls on the job's threads, runtime calls on background threads."""
    out = {}
    for rank, ev in events.items():
        k = [e for e in ev if e.get("cat") == "kernel"]
        job, other = kineto_calls(ev)
        out[rank] = (len(k), sum(1 for e in k if "nccl" in e.get("name", "").lower()),
                     sum(job.values()), sum(other.values()))
    return out


def calls_diff(a, b):
    return {n: a[n] - b[n] for n in set(a) | set(b) if a[n] != b[n]}


def cmd_torchprof(d, prefix, base_prefix=None, noplugin_prefix=None):
    # each trace is read once: under nvlprof, without it, and under nvlprof without the plugin
    ev_got = kineto_events(prefix)
    ev_base = kineto_events(base_prefix) if base_prefix else {}
    ev_noplugin = kineto_events(noplugin_prefix) if noplugin_prefix else {}
    got = kineto_counts(ev_got)
    print(f"torch.profiler under nvlprof (kernels, nccl kernels, runtime calls on job threads, on background threads) per rank: {got}")
    ok = len(got) == 2 and all(k >= 50 and n >= 5 and rt >= 50 for k, n, rt, _ in got.values())
    check(ok, "torch.profiler: its trace is complete with GPU kernels, NCCL kernels and runtime calls on every rank", str(got))
    if base_prefix:
        base = kineto_counts(ev_base)
        print(f"torch.profiler without nvlprof: {base}")
        same = len(base) == len(got) and all(
            r in got and abs(got[r][0] - base[r][0]) <= 0.1 * base[r][0] for r in base)
        check(same and base and all(v[0] > 0 for v in base.values()), "torch.profiler: as many kernels as without nvlprof (within 10%)",
              f"with {got} without {base}")
        runs = [("nvlprof", ev_got)] + ([("nvlprof, NVLPROF_NCCL_PLUGIN=0", ev_noplugin)] if noplugin_prefix else [])
        for what, ev in runs:
            diffs = {}
            for r in sorted(ev_base):
                job_b, other_b = kineto_calls(ev_base[r])
                job, other = kineto_calls(ev.get(r, []))
                diffs[r] = calls_diff(job, job_b)
                print(f"torch.profiler runtime calls, {r}, {what} minus without nvlprof: job threads {diffs[r]}; "
                      f"background threads {calls_diff(other, other_b)}")
            if ev is ev_got:
                bad = {r: {n: v for n, v in dd.items() if n not in POLLS} for r, dd in diffs.items()}
                check(ev and all(not v for v in bad.values()),
                      "torch.profiler: the job's threads make the same runtime calls, by name and count, as without nvlprof "
                      f"(polls {', '.join(POLLS)} apart)", str(bad))
    if noplugin_prefix:
        print(f"torch.profiler under nvlprof with NVLPROF_NCCL_PLUGIN=0: {kineto_counts(ev_noplugin)}")
    recs = dump(d)
    kern = [r for r in recs if r.get("kind") == "kernel"]
    ar = [r for r in recs if r.get("kind") == "nccl" and r.get("name") == "ncclAllReduce"]
    nccl_k = [r for r in kern if "nccl" in str(r.get("name", "")).lower()]
    check(len(nccl_k) >= 0.9 * len(ar) and ar, "torch.profiler: nvlprof still received every NCCL kernel",
          f"{len(nccl_k)} nccl kernels for {len(ar)} AllReduce calls")
    ends = [r for r in recs if r.get("kind") == "end"]
    check(len(ends) == 2, "torch.profiler: both nvlprof traces complete", f"{len(ends)} END records")


def cmd_topo(d_cupti, d_lazy):
    """NVLPROF_CUPTI=lazy's topology (driver + NVML, cupti/topo.c) against CUPTI's, same job: the
    DEVICE records equal field for field; per GPU pair (direct or through an NVSwitch) the same
    link count, NVLink version and capability flags; the lazy trace's NOTE with its link tally."""
    def topo(d):
        recs = dump(d)
        devs = {json.dumps({k: v for k, v in r.items() if k not in ("file", "pid", "t")}, sort_keys=True)
                for r in recs if r.get("kind") == "device"}
        links = {}
        for r in recs:
            if r.get("kind") == "nvlink":
                sw = bool(r["flags"] & (1 << 16))
                a, b = sorted((r["dev0"], r["dev1"]))  # CUPTI may give a pair either way round
                links[(a, b, sw)] = (r["links"], r["version"], r["flags"], r["ports0"])
        notes = [r["message"] for r in recs if r.get("kind") == "note" and "topology from the driver and NVML" in r.get("message", "")]
        return devs, links, notes
    dc, lc, _ = topo(d_cupti)
    dl, ll, notes = topo(d_lazy)
    check(dc and dc == dl, f"topo: DEVICE records identical ({len(dc)} from CUPTI, {len(dl)} from the driver)",
          "" if dc == dl else f"only CUPTI {sorted(dc - dl)[:2]} only lazy {sorted(dl - dc)[:2]}")
    check(notes, "topo: lazy's topology NOTE", notes[0] if notes else "none")
    check(set(lc) == set(ll), f"topo: the same GPU pairs ({sorted(lc)} from CUPTI, {sorted(ll)} from NVML)")
    for k in sorted(set(lc) & set(ll)):
        (n0, v0, f0, p0), (n1, v1, f1, p1) = lc[k], ll[k]
        check((n0, v0) == (n1, v1), f"topo: pair {k}: links and version", f"CUPTI {n0} v{v0}, NVML {n1} v{v1}")
        check(f0 == f1, f"topo: pair {k}: flags (capabilities, NVSwitch bit)", f"CUPTI {f0:#x}, NVML {f1:#x}")
        print(f"INFO: pair {k}: ports CUPTI {p0}, NVML {p1}", flush=True)


def cmd_launch(logdir):
    """launch_cost side by side: per-kernel cost by configuration (host enqueue, GPU-bound, and
    step-like latency with a sync every 54 kernels), and what each part of nvlprof adds."""
    import glob
    import re
    import statistics as st
    pats = (("host", r"launch_cost: median ([0-9.]+) ns/launch", "ns per launch (host enqueue)"),
            ("gpu", r"gpu_bound: median ([0-9.]+) ns/kernel", "ns per kernel (GPU-bound)"),
            ("step", r"sync_steps: median ([0-9.]+) us/step", "us per 54-kernel synced step"))
    kinds = ("base", "prof", "nopm", "api")
    med = {m: {k: [] for k in kinds} for m, _, _ in pats}
    for kind in kinds:
        for f in sorted(glob.glob(f"{logdir}/launch_{kind}_*.log")):
            text = open(f).read()
            for m, rx, _ in pats:
                x = re.search(rx, text)
                if x:
                    med[m][kind].append(float(x.group(1)))
    for m, _, unit in pats:
        print(f"launch {m}: " + "; ".join(f"{k} {med[m][k]}" for k in kinds))
    check(all(med["host"][k] for k in kinds), "launch: every configuration ran",
          str({k: len(med["host"][k]) for k in kinds}))
    for m, _, unit in pats:
        if not all(med[m][k] for k in kinds):
            continue
        b = st.median(med[m]["base"])
        for k, what in (("prof", "everything on"), ("nopm", "CUPTI activity, no link counters"),
                        ("api", "API capture only")):
            d = st.median(med[m][k]) - b
            print(f"launch {m}: {what}: {d:+.2f} {unit} over {b:.2f} ({d / b * 100:+.1f}%)")


def cmd_overhead(logdir, prefix="ovh"):
    """Step time side by side, paired by round. The mean step time (after 5 warm-up steps) is what
    a job pays, stalls included; the median is shown too, because it hides stalls."""
    import glob
    import re
    import statistics as st
    kinds = (("base", "without nvlprof"), ("prof", "everything on"), ("api", "API capture only"),
             ("nopm", "no link counters"), ("alt", "A/B variant (OVH_ALT_ENV / OVH_ALT_NV)"))
    # by round, so that a round cut short (time limit) leaves the complete ones paired
    files = {kind: {int(re.search(r"_(\d+)\.json$", f).group(1)): json.load(open(f))
                    for f in glob.glob(f"{logdir}/{prefix}_{kind}_*.json")} for kind, _ in kinds}
    rounds = sorted(set(files["base"]) & set(files["prof"]))

    def steps(kind, i):  # after 5 warm-up steps
        t = files[kind][i]["step_ms"]
        return t[5:] if len(t) > 5 else t
    runs = {kind: [steps(kind, i) for i in rounds if i in files[kind]] for kind, _ in kinds}
    if not rounds:
        check(False, "overhead: runs produced timings")
        return {}
    # the process's CPU time per step (rank 0; nvlprof's threads included), where the runs have it
    cpu = {kind: [files[kind][i].get("cpu_ms_per_step") for i in rounds if i in files[kind]] for kind, _ in kinds}
    if all(v is not None for v in cpu["base"] + cpu["prof"]):
        print("overhead CPU ms per step (rank 0 process, its spin in synchronize included): " + "; ".join(
            f"{k} " + " ".join(f"{v:.2f}" for v in cpu[k]) for k, _ in kinds if cpu[k] and None not in cpu[k]))

    def paired(kind, what, stat):
        xs = [stat(steps("base", i)) for i in rounds if i in files[kind]]
        ys = [stat(steps(kind, i)) for i in rounds if i in files[kind]]
        if not xs:
            return float("nan")
        r = [y / x for x, y in zip(xs, ys)]
        m = st.mean(r)
        half = 2 * st.stdev(r) / len(r) ** 0.5 if len(r) > 1 else float("nan")
        print(f"overhead {stat.__name__} step ({what} / base): " + " ".join(f"{v:.3f}" for v in r) +
              f"; mean {(m - 1) * 100:+.2f}% (+-{half * 100:.2f}%, 2 standard errors)")
        return m
    res = {}
    for stat in (st.mean, st.median):
        print(f"overhead {stat.__name__} step ms: " + "; ".join(
            f"{k} " + " ".join(f"{stat(t):.3f}" for t in runs[k]) for k, _ in kinds if runs[k]))
        for kind, what in kinds[1:]:
            if runs[kind]:
                res[(kind, stat.__name__)] = paired(kind, what, stat)
    def slow_steps(t):  # stalls: steps well above their run's median
        lim = 1.25 * st.median(t)
        return sum(1 for x in t if x > lim)
    for kind, _ in kinds:
        if runs[kind]:
            slow = sum(slow_steps(t) for t in runs[kind])
            n = sum(len(t) for t in runs[kind])
            print(f"overhead stalls {kind}: {slow} of {n} steps above 1.25x their run's median")
    mp, ma = res[("prof", "mean")], res.get(("api", "mean"), float("nan"))
    check(mp <= 1.02, "overhead: everything on within 2% of mean step time (paired rounds)",
          f"{(mp - 1) * 100:+.2f}%")
    if runs["api"]:
        check(ma <= 1.01, "overhead: API capture within 1% of mean step time (paired rounds)",
              f"{(ma - 1) * 100:+.2f}%")
    return res


COLLS = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclBcast", "ncclReduce"}


def world_recs(recs, n):
    """collective calls on communicators of n ranks, and each trace file's rank on them."""
    calls = [r for r in recs if r.get("kind") == "nccl" and r.get("name") in COLLS and r.get("nranks") == n]
    file_rank = {}
    for r in calls:
        file_rank.setdefault(r.get("file"), r["rank"])
    return calls, file_rank


def cmd_ranks(d, n, min_colls="30"):
    """an N-rank job: every rank's trace complete, every collective matched across all N ranks (same
    comm and seq, function and bytes), link counters from all N processes, one GPU each."""
    n, min_colls, base = int(n), int(min_colls), os.path.basename(d.rstrip("/"))
    recs = dump(d)
    rep = report(d)
    rk = [r for r in rep.get("ranks", []) if 0 <= (r.get("rank") if isinstance(r.get("rank"), int) else -1) < n]
    done = sorted(r["rank"] for r in rk if r.get("complete"))
    check(done == list(range(n)) and len(rk) == n, f"ranks {base}: all {n} traces present and complete",
          f"{len(rk)} traces, complete ranks {done}")
    calls, file_rank = world_recs(recs, n)
    per = collections.defaultdict(dict)
    for r in calls:
        per[r["rank"]][(r["comm"], r["seq"])] = (r["name"], num(r["bytes"]))
    check(sorted(per) == list(range(n)), f"ranks {base}: collective calls from all {n} ranks",
          str({k: len(v) for k, v in sorted(per.items())}))
    keys = [set(per[k]) for k in range(n) if k in per]
    common = set.intersection(*keys) if keys else set()
    union = set.union(*keys) if keys else set()
    by_fn = collections.Counter(per[0][k][0] for k in common) if 0 in per else {}
    check(keys and common == union and len(common) >= min_colls,
          f"ranks {base}: every (comm, seq) seen on all {n} ranks", f"{len(common)} matched of {len(union)}: {dict(by_fn)}")
    same = all(per[k][key] == per[0][key] for key in common for k in range(n) if k in per)
    check(bool(common) and same, f"ranks {base}: matched collectives have the same function and bytes on all ranks")
    m = rep.get("job", {}).get("matched_collectives", 0)
    check(m >= len(common), f"ranks {base}: report matched them too", f"report {m}, traces {len(common)}")
    dev_by_file = collections.defaultdict(lambda: collections.defaultdict(int))
    for r in recs:
        if r.get("kind") == "linksample":
            dev_by_file[r.get("file")][r["device"]] += num(r.get("nvl_tx", 0)) + num(r.get("nvl_rx", 0))
    sampled = {file_rank[f]: dict(v) for f, v in dev_by_file.items() if f in file_rank}
    devs = set()
    for v in sampled.values():
        devs |= set(v)
    busy = sorted(dv for v in sampled.values() for dv, b in v.items() if b > 0)
    check(sorted(sampled) == list(range(n)) and len(devs) == n,
          f"ranks {base}: link counters from all {n} processes, {n} distinct GPUs",
          f"rank: {{device: NVLink bytes}} {dict(sorted(sampled.items()))}")
    return rep


def cmd_links(d, n, want):
    """on every rank's GPU(s), which link carried the bytes during collectives (report's links table)."""
    n, base = int(n), os.path.basename(d.rstrip("/"))
    rep = report(d)
    tot = collections.defaultdict(lambda: [0, 0])
    for l in rep.get("links", []):
        tot[l["rank"]][0] += l.get("nvlink_bytes_in_collectives") or 0
        tot[l["rank"]][1] += l.get("pcie_bytes_in_collectives") or 0
    if want == "pcie":
        ok = [r for r, (nvl, pcie) in tot.items() if pcie > 10 * nvl and pcie > 0]
    else:
        ok = [r for r, (nvl, pcie) in tot.items() if nvl > 10 * pcie and nvl > 0]
    check(sorted(ok) == list(range(n)), f"links {base}: {want} carries the collectives on every one of {n} GPUs",
          " ".join(f"r{r}:nvl={v[0]:.3g}/pcie={v[1]:.3g}" for r, v in sorted(tot.items())))
    fb = [f for f in rep.get("findings", []) if f["id"] == "pcie_fallback"]
    if want == "pcie":
        check(fb and fb[0]["evidence"].get("nranks") == n, f"links {base}: pcie_fallback covers the {n}-rank communicator",
              json.dumps(fb[0]["evidence"])[:300] if fb else "no pcie_fallback")


def cmd_losses(base_json, prof_json):
    a, b = losses(base_json), losses(prof_json)
    diff = max((abs(x - y) for x, y in zip(a, b)), default=float("nan"))
    check(a == b and len(a) > 0, "losses identical with and without nvlprof", f"{len(a)} vs {len(b)} losses, max diff {diff:.3g}")


NCCL_FACTOR = {"ncclAllReduce": lambda n: 2.0 * (n - 1) / n, "ncclAllGather": lambda n: (n - 1) / n,
               "ncclReduceScatter": lambda n: (n - 1) / n, "ncclBroadcast": lambda n: 1.0, "ncclReduce": lambda n: 1.0}


def cmd_busbw(d, nt_json=""):
    """note: the report's busbw per collective against the nccl-tests formulas (busbw = algbw x factor) and,
    when given, the nccl-tests-style measurement of the same collective at the nearest size on this machine."""
    import math
    rep = report(d)
    base = os.path.basename(d.rstrip("/"))
    pred = []
    if nt_json and os.path.exists(nt_json):
        pred = json.load(open(nt_json)).get("results", [])
    for c in rep.get("collectives", []):
        name, n = c.get("collective"), c.get("nranks", 0)
        alg, bus, s = c.get("algbw_gbps"), c.get("busbw_gbps"), c.get("bytes_per_call") or 0
        if name not in NCCL_FACTOR or alg is None or bus is None or n < 2:
            continue
        f = NCCL_FACTOR[name](n)
        check(abs(bus - alg * f) <= 0.01 * max(bus, 1e-9), f"busbw {base}: {name} busbw = algbw x {f:.3f} (nccl-tests, n={n})",
              f"algbw {alg:.1f}, busbw {bus:.1f} GB/s")
        near = [p for p in pred if "nccl" + p["collective"] == name]
        line = f"NOTE: busbw {base}: {name} on {n} ranks, {s / 2**20:.2f} MiB/call: measured {bus:.1f} GB/s"
        if c.get("peak_share") is not None:
            line += f" ({c['peak_share'] * 100:.0f}% of NVLink peak)"
        if near and s > 0:
            p = min(near, key=lambda p: abs(math.log(p["bytes"] / s)))
            line += (f"; nccl-tests-style at {p['bytes'] / 2**20:.0f} MiB: {p['busbw_gbps']:.1f} GB/s"
                     f" -> {bus / p['busbw_gbps'] * 100:.0f}% of it")
        print(line, flush=True)


def cmd_speed(d, min_mrecs="5", max_s="2"):
    """`nvlprof report` on these traces: PASS when it reads >= MIN_MRECS M records/s or finishes within MAX_S."""
    import time
    base = os.path.basename(d.rstrip("/"))
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        out = subprocess.run([NV, "report", d], capture_output=True, text=True)
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    rep = report(d)
    recs = sum(f.get("records", 0) for f in rep.get("files", []))
    rate = recs / best / 1e6 if best else 0
    check(out.returncode == 0 and (rate >= float(min_mrecs) or best <= float(max_s)),
          f"speed {base}: nvlprof report {recs} records in {best:.3f} s (best of 3)",
          f"{rate:.1f} M records/s; target >= {min_mrecs} M records/s or <= {max_s} s")


def main():
    cmd = sys.argv[1]
    if cmd == "ddp":
        cmd_ddp(*sys.argv[2:5])
    elif cmd == "findings":
        # findings DIR EXPECTED_WARNING_IDS(comma list or -; ID? = allowed, not required) [ID@rank=N]...
        d, want = sys.argv[2], sys.argv[3]
        rep = report(d)
        got = finding_ids(rep)
        ids = [] if want == "-" else want.split(",")
        want_l = [i for i in ids if not i.endswith("?")]
        maybe = {i[:-1] for i in ids if i.endswith("?")}
        check(set(want_l) <= set(got), f"report {os.path.basename(d)}: flags {want_l or 'nothing'}", f"got {got}")
        extra = set(got) - set(want_l) - maybe - {"collection_gaps"}
        check(not extra, f"report {os.path.basename(d)}: no other warning findings", f"extra {sorted(extra)}")
        for kv in sys.argv[4:]:
            fid, _, rank = kv.partition("@rank=")
            fs = [f for f in rep.get("findings", []) if f["id"] == fid]
            ranks = {str(f.get("evidence", {}).get("rank")) for f in fs}
            check(ranks == {rank}, f"report {os.path.basename(d)}: {fid} names exactly rank {rank}", f"got {sorted(ranks)}")
    elif cmd in ("p2p", "nvml", "ncclprof", "kcoll", "launch", "flip", "diff", "uma", "torchprof", "overhead", "ranks", "links", "losses", "busbw", "speed", "topo"):
        globals()["cmd_" + cmd](*sys.argv[2:])
    else:
        sys.exit(f"unknown check {cmd}")
    print(f"gpu checks: {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

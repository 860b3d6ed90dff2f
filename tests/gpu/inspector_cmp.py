# inspector_cmp.py LOGS ROUNDS: compares the run_inspector.sh set-ups (a Inspector alone, b nvlprof + Inspector, c nvlprof alone, d neither); prints PASS/FAIL lines and the step-time table.
import glob
import json
import os
import statistics
import sys

L, ROUNDS = sys.argv[1], int(sys.argv[2])
failed = 0


def check(name, ok, detail=""):
    global failed
    failed += not ok
    print(("PASS: " if ok else "FAIL: ") + name + (": " + detail if detail else ""))


def inspector(run):
    """Inspector's coll_perf records of one run: {(rank, coll, bytes): [records]} and the max sequence number."""
    recs = {}
    dec = json.JSONDecoder()
    for f in glob.glob(os.path.join(L, "insp_" + run, "**", "*.log"), recursive=True):
        text, i = open(f).read(), 0
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                break
            try:
                o, i = dec.raw_decode(text, i)
            except ValueError:
                break
            p = o.get("coll_perf")
            if p:
                key = (o["header"]["rank"], p["coll"], p["coll_msg_size_bytes"])
                recs.setdefault(key, []).append(p)
    return recs


def summary(recs):
    """(rank, coll, bytes) -> (highest coll_sn, timing sources)"""
    return {k: (max(p["coll_sn"] for p in v), sorted({p.get("coll_timing_source", "?") for p in v}))
            for k, v in recs.items()}


def losses(run):
    try:
        return json.load(open(os.path.join(L, run + ".json")))
    except (OSError, ValueError):
        return None


runs = {s: ["%s_r%d" % (s, r) for r in range(1, ROUNDS + 1)] for s in "abcd"}
for r in range(ROUNDS):
    a, b = runs["a"][r], runs["b"][r]
    ra, rb = inspector(a), inspector(b)
    check("%s: Inspector wrote collective records alone" % a, len(ra) > 0, "%d (rank, coll, size) keys" % len(ra))
    check("%s: Inspector wrote collective records behind nvlprof" % b, len(rb) > 0, "%d keys" % len(rb))
    # Inspector's dump thread writes a communicator's latest completed collective once per interval:
    # the number of records varies from run to run, and a collective that completes right behind
    # another on its communicator may be missed. What must agree: every often-seen kind (5 records
    # or more in either run) is in both, with the same timing source, its highest sequence number
    # within 2, and its median execution time within noise (x1.5 or 50 us).
    sa, sb = summary(ra), summary(rb)
    often = sorted(k for k in set(ra) | set(rb) if max(len(ra.get(k, [])), len(rb.get(k, []))) >= 5)
    check("%s vs %s: often-seen collectives (rank, kind, size) in both" % (a, b),
          len(often) > 0 and all(k in ra and k in rb for k in often),
          "alone %s; chained %s" % (sorted((k, len(v)) for k, v in ra.items()),
                                    sorted((k, len(v)) for k, v in rb.items())))
    for k in often:
        if k not in ra or k not in rb:
            continue
        check("%s vs %s rank %d %s %d B: same timing source, last sequence number within 2" % (a, b, *k),
              sa[k][1] == sb[k][1] and abs(sa[k][0] - sb[k][0]) <= 2,
              "alone %s, chained %s" % (sa[k], sb[k]))
        ta = [p["coll_exec_time_us"] for p in ra[k]]
        tb = [p["coll_exec_time_us"] for p in rb[k]]
        ma, mb = statistics.median(ta), statistics.median(tb)
        check("%s vs %s rank %d %s %d B: execution time within noise" % (a, b, *k),
              abs(ma - mb) <= max(50, 0.5 * max(ma, mb)),
              "median %.0f us (%d records) alone, %.0f us (%d) chained" % (ma, len(ta), mb, len(tb)))
    d = os.path.join(L, "dump_%s.txt" % b)
    text = open(d).read() if os.path.exists(d) else ""
    kch = [int(l.split()[2]) for l in text.splitlines() if l.startswith("count kch ")]
    check("%s: nvlprof's trace has KernelCh records" % b, bool(kch) and kch[0] > 0, "kch %s" % kch)
    check("%s: nvlprof's NOTE names Inspector chained" % b, "Inspector" in text and "chained" in text,
          " | ".join(l for l in text.splitlines() if "chained" in l or "not chained" in l)[:300])
    c = os.path.join(L, "dump_%s.txt" % runs["c"][r])
    ctext = open(c).read() if os.path.exists(c) else ""
    check("%s: nvlprof alone: KernelCh records, nothing chained" % runs["c"][r],
          "count kch " in ctext and "chained" not in ctext)

ref = losses(runs["d"][0])
check("losses of the plain job recorded", bool(ref and ref.get("losses")))
for s in "abc":
    for run in runs[s]:
        lo = losses(run)
        check("%s: losses identical to %s" % (run, runs["d"][0]), bool(lo) and ref and lo["losses"] == ref["losses"])

print("\nstep time (rank 0, median ms of the measured steps; one value per round; cost against d)")
med = {s: [losses(r)["median_ms"] for r in runs[s] if losses(r)] for s in "abcd"}
names = {"a": "Inspector alone", "b": "nvlprof + Inspector", "c": "nvlprof alone", "d": "neither"}
for s in "abcd":
    v = med[s]
    if not v:
        print("  %s %-20s no data" % (s, names[s]))
        continue
    cost = ["%+.1f%%" % (100 * (x / y - 1)) for x, y in zip(v, med["d"])] if med["d"] else []
    print("  %s %-20s %s   vs d: %s" % (s, names[s], " ".join("%.2f" % x for x in v), " ".join(cost)))
if med["a"] and med["b"]:
    print("  b against a (nvlprof's cost on top of Inspector): %s" %
          " ".join("%+.1f%%" % (100 * (x / y - 1)) for x, y in zip(med["b"], med["a"])))
print("\ninspector_cmp: %d failed" % failed)

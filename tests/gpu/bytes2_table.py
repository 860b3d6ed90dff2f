# bytes2_table.py: the table of bytes2.sh: each configuration's steady trace bytes per hour per rank.
"""usage: python3 bytes2_table.py LOGDIR SHORT LONG NAME=SPEC...

Reads LOGDIR/info_NAME_tS.txt (`nvlprof info`), report_NAME_tS.json (`nvlprof report --json`) and
NAME_tS[_base].json (bytes2.py's result) for S in SHORT, LONG. A rank's steady rate is the growth of
its trace between the two runs over the growth of its duration; its collectives a second the growth of
its NCCLPROF records the same way. Prints one `bytes2:` line per configuration and rank, then one per
configuration, and whether the job's result was the same without nvlprof.
"""
import json
import os
import re
import sys

TARGET_MB_H = 50.0


def parse_info(path):
    """Per trace file: path, rank, duration (s), record counts, size (bytes, from the file)."""
    files, cur = [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.endswith(".nvlp") and not line.startswith(" "):
                cur = {"path": line, "counts": {}, "rank": None, "dur": None}
                files.append(cur)
                continue
            if cur is None:
                continue
            m = re.match(r"\s+rank\s+(\d+) of (\d+)", line)
            if m:
                cur["rank"] = int(m.group(1))
            m = re.match(r"\s+duration\s+([\d.]+) s", line)
            if m:
                cur["dur"] = float(m.group(1))
            m = re.match(r"    (\w+)\s+(\d+)$", line)
            if m:
                cur["counts"][m.group(1)] = int(m.group(2))
    for x in files:
        x["size"] = os.path.getsize(x["path"]) if os.path.exists(x["path"]) else None
    for i, x in enumerate(sorted((x for x in files if x["rank"] is None), key=lambda x: x["path"])):
        x["rank"] = "p%d" % i  # no communicator: the traces in the order of their names
    return files


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def timed_share(rep):
    """Share of the job's collective calls with a GPU time (rows of `collectives` not timed on the host)."""
    if not rep:
        return None, 0
    calls = timed = 0
    for c in rep.get("collectives", []):
        calls += c.get("calls", 0)
        if c.get("time_source") != "host":
            timed += c.get("calls", 0)
    return (timed / calls if calls else None), calls


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    ldir, short, long_ = argv[1], argv[2], argv[3]
    worst = 0.0
    ok = True
    for spec in argv[4:]:
        name = spec.split("=", 1)[0]
        info = {s: parse_info(os.path.join(ldir, "info_%s_t%s.txt" % (name, s)))
                if os.path.exists(os.path.join(ldir, "info_%s_t%s.txt" % (name, s))) else []
                for s in (short, long_)}
        rates = []
        for r0 in sorted({x["rank"] for x in info[long_]}, key=str):
            a = [x for x in info[short] if x["rank"] == r0]
            b = [x for x in info[long_] if x["rank"] == r0]
            if len(a) != 1 or len(b) != 1 or None in (a[0]["size"], b[0]["size"], a[0]["dur"], b[0]["dur"]):
                print("bytes2: %s rank %s: no pair of traces to compare" % (name, r0))
                ok = False
                continue
            a, b = a[0], b[0]
            dt = b["dur"] - a["dur"]
            if dt <= 1:
                print("bytes2: %s rank %s: the long run is not longer (%.1f s)" % (name, r0, dt))
                ok = False
                continue
            bps = (b["size"] - a["size"]) / dt
            cps = (b["counts"].get("ncclprof", 0) - a["counts"].get("ncclprof", 0)) / dt
            mbh = bps * 3600 / 1e6
            rates.append(mbh)
            kinds = ", ".join("%s %+.1f/s" % (k, (b["counts"].get(k, 0) - a["counts"].get(k, 0)) / dt)
                              for k in ("nccl", "ncclprof", "kcoll", "linksample", "pystack", "cost")
                              if b["counts"].get(k, 0) or a["counts"].get(k, 0))
            print("bytes2: %s rank %s: %.0f collectives/s, %.1f bytes/collective, steady %.1f MB/h "
                  "(whole %.0f s trace %.1f MB/h); records %s"
                  % (name, r0, cps, bps / cps if cps else float("nan"), mbh, b["dur"],
                     b["size"] / b["dur"] * 3600 / 1e6, kinds))
        if not info[long_]:
            print("bytes2: %s: no rank's trace in the long run" % name)
            ok = False
            continue
        rep = load_json(os.path.join(ldir, "report_%s_t%s.json" % (name, long_)))
        share, calls = timed_share(rep)
        cost = ((rep or {}).get("job") or {}).get("cost") or {}
        job = load_json(os.path.join(ldir, "%s_t%s.json" % (name, long_))) or {}
        if rates:
            worst = max(worst, max(rates))
            print("bytes2: %s: steady %.1f MB/h per rank (max over ranks), the report's cost line %s MB/h; "
                  "%s of %d collective calls GPU-timed; the job's rate %s/s (target %s)"
                  % (name, max(rates), "%.1f" % cost["trace_mb_per_hour_per_rank"]
                     if "trace_mb_per_hour_per_rank" in cost else "?",
                     "%.4f" % share if share is not None else "none", calls, job.get("rate", "?"),
                     job.get("target_rate", "?")))
    base = sorted(f for f in os.listdir(ldir) if f.endswith("_base.json"))
    for f in base:
        b = load_json(os.path.join(ldir, f))
        p = load_json(os.path.join(ldir, f.replace("_base.json", ".json")))
        same = bool(b and p and b["loss"] == p["loss"] and b["checksum"] == p["checksum"])
        ok = ok and same
        print("bytes2: result without nvlprof %s, with %s: %s"
              % (b and (b["loss"], b["checksum"]), p and (p["loss"], p["checksum"]),
                 "same" if same else "DIFFERENT"))
    if worst > 0:
        print("bytes2: worst steady rate %.1f MB/h per rank: %s the %.0f MB/h target"
              % (worst, "within" if worst <= TARGET_MB_H else "OVER", TARGET_MB_H))
    else:
        print("bytes2: no steady rate measured")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

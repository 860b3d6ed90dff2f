#!/usr/bin/env python3
"""check.py: checks nvlprof's exports and prints a normalised summary for the goldens.
  check.py perfetto DECODED.txt     (protoc --decode=perfetto.protos.Trace text)
  check.py chrome FILE.json [RANK]  (RANK: the distributedInfo.rank the file must carry)
  check.py html PAGE.html           (the written file, or chromium --dump-dom output)
  check.py netlog NETLOG.json       (chromium --log-net-log): requests made by the page
Exits 1 with "check: ..." lines when an invariant does not hold."""
import collections, json, re, sys

bad = []
def need(cond, msg):
    if not cond:
        bad.append(msg)

def parse_text(lines):
    """protoc text format -> list of (key, value-or-list) trees"""
    root, stack = [], []
    cur = root
    for ln in lines:
        ln = ln.strip()
        if not ln:
            continue
        if ln.endswith("{"):
            node = []
            cur.append((ln[:-1].strip(), node))
            stack.append(cur)
            cur = node
        elif ln == "}":
            cur = stack.pop()
        else:
            k, _, v = ln.partition(":")
            v = v.strip()
            if v.startswith('"'):
                v = json.loads(v) if '\\' not in v else v.strip('"')
            cur.append((k.strip(), v))
    return root

def get(node, key, default=None):
    for k, v in node:
        if k == key:
            return v
    return default

def getall(node, key):
    return [v for k, v in node if k == key]

def perfetto(path):
    pk = [v for k, v in parse_text(open(path)) if k == "packet"]
    tracks, kinds = {}, collections.Counter()
    interned = {}  # per packet sequence: its interning tables
    for p in pk:
        seq = get(p, "trusted_packet_sequence_id")
        need(seq is not None, "every packet on a sequence")
        if seq not in interned:
            need(get(p, "sequence_flags") == "1", "a sequence starts by clearing its state")
            interned[seq] = {"event_categories": {}, "event_names": {}, "debug_annotation_names": {}}
        idata = get(p, "interned_data")
        for kind, table in interned[seq].items():
            for ent in getall(idata or [], kind):
                iid = get(ent, "iid")
                need(iid not in table, "iid %s of %s interned once" % (iid, kind))
                table[iid] = get(ent, "name")
        need(idata is None or get(p, "sequence_flags") == "2",
             "packets with interned data need incremental state")
        td = get(p, "track_descriptor")
        if td is not None:
            u = get(td, "uuid")
            need(u not in tracks, "track %s described once" % u)
            if get(td, "process") is not None:
                kind = "process"
            elif get(td, "thread") is not None:
                kind = "thread"
            elif get(td, "counter") is not None:
                kind = "counter:" + re.sub(r"\d+", "N", get(td, "name", ""))
            elif re.match(r"GPU \d+ stream \d+", get(td, "name", "")):
                kind = "gpu_stream"
            else:
                kind = "track:" + get(td, "name", "")
            tracks[u] = kind
            kinds[kind] += 1
    out_seqs = len(interned)
    ev = collections.Counter()
    depth = collections.Counter()
    flows, tflows, findings, names_used = set(), set(), [], set()
    for p in pk:
        te = get(p, "track_event")
        if te is None:
            continue
        need(get(p, "timestamp") is not None, "track events have a timestamp")
        t = get(te, "track_uuid")
        need(t in tracks, "event on a described track")
        ty = get(te, "type")
        tab = interned[get(p, "trusted_packet_sequence_id")]
        cats = [tab["event_categories"].get(i) for i in getall(te, "category_iids")]
        need(None not in cats, "category iids interned before use")
        if get(te, "name_iid") is not None:
            need(get(te, "name_iid") in tab["event_names"], "name iid interned before use")
            names_used.add(tab["event_names"].get(get(te, "name_iid")))
        for da in getall(te, "debug_annotations"):
            if get(da, "name_iid") is not None:
                need(get(da, "name_iid") in tab["debug_annotation_names"],
                     "arg name iid interned before use")
        if ty == "TYPE_SLICE_BEGIN":
            ev["begin:%s:%s" % (cats[0] if cats else "", tracks.get(t))] += 1
            depth[t] += 1
        elif ty == "TYPE_SLICE_END":
            ev["end"] += 1
            depth[t] -= 1
        elif ty == "TYPE_COUNTER":
            need(tracks.get(t, "").startswith("counter:"), "counter values on counter tracks")
            ev["counter:" + tracks.get(t)] += 1
        elif ty == "TYPE_INSTANT":
            findings.append(get(te, "name", "").split(":")[0] + "@" + tracks.get(t, "?").split(":")[0])
        flows.update(getall(te, "flow_ids"))
        tflows.update(getall(te, "terminating_flow_ids"))
    need(all(v == 0 for v in depth.values()), "every slice begun is ended on its track")
    need(tflows <= flows, "every terminating flow was started by an NCCL call")
    begins = sum(v for k, v in ev.items() if k.startswith("begin:"))
    need(begins == ev["end"], "as many slice ends as begins")
    out = ["sequences %d" % out_seqs]
    out += ["tracks %s %d" % kv for kv in sorted(kinds.items())]
    out += ["events %s %d" % kv for kv in sorted(ev.items())]
    out.append("flows started %d, terminated at kernels %d" % (len(flows), len(tflows)))
    out += ["name %s" % n for n in sorted(names_used) if n.startswith("nccl") and "Kernel" not in n]
    out += ["finding %s" % f for f in findings]
    return out

ALLOWED_CATS = {"kernel", "gpu_memcpy", "cuda_runtime", "cpu_op", "user_annotation", "ac2g",
                "link", "um_migration", "finding"}
COMM_ARGS = ["Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype",
             "Process Group Name", "Rank", "Seq"]

def chrome(path, rank=None):
    d = json.load(open(path))
    need(isinstance(d.get("baseTimeNanoseconds"), int), "baseTimeNanoseconds")
    if rank is not None:
        need(d.get("distributedInfo", {}).get("rank") == int(rank), "distributedInfo.rank")
        # HTA maps files to ranks by this regex on the text, not by parsing the JSON
        m = re.search(r'"rank":\s+(\d+)', open(path).readline())
        need(m is not None and int(m.group(1)) == int(rank), "rank as HTA's regex reads it")
    evs = d["traceEvents"]
    cats, colls, steps = collections.Counter(), collections.Counter(), 0
    starts, ends = set(), set()
    for e in evs:
        ph = e.get("ph")
        need(ph in ("X", "M", "i", "s", "f", "C"), "known ph %s" % ph)
        if ph == "M":
            continue
        for k in ("name", "pid", "tid", "ts", "cat"):
            need(k in e, "%s in every event" % k)
        need(e.get("cat") in ALLOWED_CATS, "cat %s" % e.get("cat"))
        cats[e["cat"] + ":" + ph] += 1
        if ph == "X":
            need(isinstance(e.get("dur"), (int, float)), "dur on complete events")
        a = e.get("args", {})
        if e["cat"] in ("kernel", "gpu_memcpy"):
            need("stream" in a and "correlation" in a, "GPU events carry stream and correlation")
        if e["cat"] == "kernel" and a.get("External id"):
            need(e["name"].startswith("nccl"), "NCCL kernels named nccl*: %s" % e["name"])
        if e["cat"] == "cpu_op" and "Collective name" in a:
            for k in COMM_ARGS:
                need(k in a, "communication arg %s" % k)
            colls[a["Collective name"] + ":" + a["dtype"]] += 1
        # HTA filters kernels by launch events once it sees ProfilerStep#: the export has none
        need(not e["name"].startswith("ProfilerStep"), "no ProfilerStep (HTA would drop kernels)")
        if e["name"].startswith("Step#"):
            need(e["cat"] == "user_annotation", "Step#N is a user_annotation")
            steps += 1
        if ph == "s":
            starts.add(e["id"])
        if ph == "f":
            ends.add(e["id"])
    need(ends <= starts, "every flow end has its start")
    out = ["cat %s %d" % kv for kv in sorted(cats.items())]
    out += ["collective %s %d" % kv for kv in sorted(colls.items())]
    out.append("Step %d" % steps)
    return out

def html(path):
    t = open(path, encoding="utf-8").read()
    need("<script" not in t.lower(), "no script element")
    for url in re.findall(r"""(?:src|href)=["']([^"'#][^"']*)""", t):
        bad.append("external reference %s" % url)
    need("@import" not in t and "url(" not in t, "no stylesheet import or url()")
    out = []
    for m in re.finditer(r'<article class="finding sev-(\w+)" id="(\w+)-f-(\w+)"', t):
        out.append("finding %s %s %s" % (m.group(2), m.group(3), m.group(1)))
    for m in re.finditer(r'<figure class="plot plot-(\w+)" id="(\w+)-\w+">', t):
        out.append("plot %s %s" % (m.group(2), m.group(1)))
    n_svg = len(re.findall(r"<svg ", t))
    need(n_svg == len(re.findall(r"</svg>", t)), "every svg closed")
    need(n_svg > 0, "at least one plot")
    out.append("svg %d" % n_svg)
    out.append("text report %s" % ("yes" if 'class="text"' in t else "no"))
    return out

def netlog(path):
    """network requests the page made: URL_REQUEST_START_JOB in the page's (file://) network
    isolation key; chromium's own background requests carry another key"""
    d = json.load(open(path))
    types = {v: k for k, v in d["constants"]["logEventTypes"].items()}
    out = []
    for e in d["events"]:
        p = e.get("params", {})
        if types.get(e["type"]) == "URL_REQUEST_START_JOB" and \
                p.get("network_isolation_key", "").startswith("file://") and \
                not p.get("url", "").startswith(("file:", "data:")):
            bad.append("the page requested " + p["url"])
            out.append("request " + p["url"])
    return out

kind = sys.argv[1]
res = {"perfetto": lambda: perfetto(sys.argv[2]),
       "chrome": lambda: chrome(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None),
       "html": lambda: html(sys.argv[2]),
       "netlog": lambda: netlog(sys.argv[2])}[kind]()
print("\n".join(res))
for b in sorted(set(bad)):
    print("check: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)

#!/usr/bin/env python3
# summary_cmp.py: the summary figures of one job as text, JSON, HTML and diff show them must be the
# same numbers (they come from one computation, model/summary.c's an_tables_build):
#   summary_cmp.py REPORT.txt REPORT.json REPORT.html DIFF.json NAME [DIFF.html]
# (DIFF.json, DIFF.html: the job diffed with itself)
# prints one "PASS: "/"FAIL: " line per figure compared; JSON's 6 significant digits are allowed
# the last printed digit of the text's rounding.
import html, json, re, sys

txt, js, page, dj = (open(p).read() for p in sys.argv[1:5])
name = sys.argv[5] if len(sys.argv) > 5 else ""
j, d = json.loads(js), json.loads(dj)
dm = {m["name"]: m["before"] for m in d["metrics"]}
job = j["job"]
fails = 0


def check(what, ok, detail):
    global fails
    print(("PASS: " if ok else "FAIL: ") + f"{name}: {what}" + ("" if ok else f": {detail}"))
    fails += not ok


def close(a, b, tol):
    if a is None or b is None:
        return a is None and b is None
    # JSON prints 6 significant digits: half a unit of the 6th is allowed too
    return abs(float(a) - float(b)) <= max(tol, abs(float(b)) * 6e-6)


def head(text):  # the summary lines: steps, communication
    steps = re.search(r", (\d+) steps of ([\d.]+) ms", text)
    comm = re.search(r"^communication: ([\d.]+) ms per rank", text, re.M)
    expo = re.search(r"^communication: .*; exposed ([\d.]+) ms", text, re.M)
    return (int(steps.group(1)) if steps else 0, float(steps.group(2)) if steps else None,
            float(comm.group(1)) if comm else None, float(expo.group(1)) if expo else None)


def page_head(page, pfx):  # the text of a page's <div class="head"> lines
    m = re.search(r'<div class="head" id="%s-head">(.*?)</div>' % pfx, page, re.S)
    return "\n".join(html.unescape(x) for x in re.findall(r"<p[^>]*>(.*?)</p>", m.group(1))) if m else ""


steps, step_ms, comm, expo = head(txt)
tlines = "\n".join(l for l in txt.splitlines()
                   if l.startswith(("nvlprof report:", "data:", "communication:", "steps:", "nvlprof cost:")))
hlines = page_head(page, "r")
check("HTML header = text's first lines", hlines == tlines, f"{hlines!r} vs {tlines!r}")
if len(sys.argv) > 6:
    dpage = open(sys.argv[6]).read()
    for pfx in "ba":
        h = page_head(dpage, pfx)
        check(f"diff HTML {pfx} header = text's first lines", h == tlines, f"{h!r} vs {tlines!r}")
    st = re.search(r'<td><code>steps</code></td><td>([^<]*)</td>', dpage)
    check("diff HTML's steps = text's", st is not None and int(float(st.group(1))) == steps,
          st.group(1) if st else "no steps row")
check("steps: text = JSON = diff", steps == job["steps"] == (dm["steps"] or 0) or
      (steps == 0 and job["step_ms"] is None), f"{steps} {job['steps']} {dm['steps']}")
check("step ms: text = JSON = diff", close(step_ms, job["step_ms"], 0.006) and
      close(step_ms, dm["step_ms"], 0.006), f"{step_ms} {job['step_ms']} {dm['step_ms']}")
if comm is not None:
    check("comm ms per rank: text = JSON = diff", close(comm, job["comm_ms_per_rank"], 0.006) and
          close(comm, dm["comm_ms_per_rank"], 0.006), f"{comm} {job['comm_ms_per_rank']} {dm['comm_ms_per_rank']}")
if expo is not None:
    check("exposed ms per rank: text = JSON = diff", close(expo, job["exposed_ms_per_rank"], 0.006) and
          close(expo, dm["exposed_ms_per_rank"], 0.006), f"{expo} {job['exposed_ms_per_rank']} {dm['exposed_ms_per_rank']}")
# RANKS: text rows, JSON ranks, the HTML table
trows = []
if "\nRANKS\n" in txt:
    for l in txt.split("\nRANKS\n", 1)[1].splitlines()[1:]:
        f = l.split()
        if not f or not f[0].lstrip("-").isdigit():
            break
        trows.append((int(f[0]), f[3], f[4].rstrip("h")))
jrows = [(r["rank"], r["wall_ms"], r["comm_ms"]) for r in j.get("ranks", [])]
t = re.search(r'<table class="t" id="r-t-ranks">(.*?)</table>', page, re.S)
hrows = []
for tr in re.findall(r"<tr>(.*?)</tr>", t.group(1), re.S) if t else []:
    c = [re.sub(r"<[^>]*>", "", x) for x in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
    if c:
        hrows.append((int(c[0]), c[3].split()[0], c[4].split()[0]))
check("RANKS rows: text = HTML", trows == hrows, f"{trows} vs {hrows}")
check("RANKS rows: text = JSON", len(trows) == len(jrows) and all(
    a[0] == b[0] and close(a[1], b[1], 0.06) and close(a[2], b[2], 0.006) for a, b in zip(trows, jrows)),
    f"{trows} vs {jrows}")
sys.exit(1 if fails else 0)

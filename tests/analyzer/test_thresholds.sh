#!/usr/bin/env bash
# test_thresholds.sh: every AN_THRESHOLDS entry (analyzer/model/model.h) and every severity rule of
# analyzer/findings/det_*.c pinned on both sides: the value a generated job has (read from its report)
# with the threshold moved just above and just below it (--threshold NAME=VALUE), the finding and
# its severity asserted each time; a few defaults pinned on inputs made just above and below them
# (an_gen); costs (lost_ms, wait_caused_ms, time_lost_ms) asserted against what an_gen wrote; and
# the texts diff prints (verdict, cause) asserted. A check here fails when a comparison flips, a
# unit changes (MiB read as bytes, ms as s) or a rule's operator changes.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
if [ ! -x "$GEN" ] || [ ! -x "$CLI" ]; then
	fail "analyzer test programs built ($GEN, $CLI; run make BUILD=$BUILD $GEN)"
	exit 1
fi
gen() { local name=$1; shift; "$GEN" -o "$T/$name" "$@" >/dev/null || fail "an_gen $name $*"; }
gen healthy
gen fallback --fallback
gen envonly --env-only
gen late --late-rank 1
gen late3 --late-rank 1 --late-ms 3
gen kill --ranks 4 --kill-rank 1
# the others wait hang_ms - 8.051 ms (the killed rank's last step before it): 100.449 and 99.449
gen hang_above --ranks 4 --kill-rank 1 --hang-ms 108.5
gen hang_below --ranks 4 --kill-rank 1 --hang-ms 107.5
gen thrash --thrash
gen staged --staged
gen staged_notopo --staged --no-topo
gen exposed --exposed
# two ranks of one machine with different NCCL_HOSTID (a shipped trace: an_gen writes no NCCLCOMM)
ln -s "$ROOT/tests/analyzer/traces/share_hf" "$T/share_hf"

CLI="$CLI" T="$T" python3 - >"$T/py.out" 2>&1 <<'PYEOF'
import json, os, subprocess
CLI, T = os.environ["CLI"], os.environ["T"]
cache = {}


def report(run, *th):
    """report --json of $T/run with --threshold NAME=VALUE for each of th; None when it failed"""
    key = (run,) + th
    if key not in cache:
        args = [CLI, "report", "--json"]
        for t in th:
            args += ["--threshold", t]
        p = subprocess.run(args + [os.path.join(T, run)], capture_output=True, text=True)
        try:
            cache[key] = json.loads(p.stdout)
        except ValueError:
            cache[key] = None
            print("    report %s %s: exit %d, no JSON: %s" % (run, " ".join(th), p.returncode, p.stderr[:300]))
    return cache[key]


def finding(d, fid):
    return next((f for f in d["findings"] if f["id"] == fid), None) if d else None


def sev(run, fid, *th):
    """the severity of fid in the report ("absent" when not found, "no report" when it did not run)"""
    d = report(run, *th)
    if d is None:
        return "no report"
    f = finding(d, fid)
    return f["severity"] if f else "absent"


def ev(run, fid, key, *th):
    f = finding(report(run, *th), fid)
    if f is None:
        raise KeyError("%s not in the report of %s" % (fid, run))
    return f["evidence"][key]


def check(name, ok, detail=""):
    print(("PASS: " if ok else "FAIL: ") + name + ("" if ok else ": " + detail))


def check_eq(name, want, got):
    check(name, want == got, "expected %r, got %r" % (want, got))


def close(a, b, rel=1e-4):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def pin(name, run, fid, thname, value, above, below, extra=(), eps=0.01):
    """thname moved to value * (1 + eps) and value * (1 - eps): fid's severity there is above /
    below ("absent" for not found); extra thresholds are set in both runs"""
    hi, lo = value * (1 + eps), value * (1 - eps)
    got_hi = sev(run, fid, "%s=%.9g" % (thname, hi), *extra)
    got_lo = sev(run, fid, "%s=%.9g" % (thname, lo), *extra)
    check_eq("%s: %s=%.6g (just above %s's %.6g): %s %s" % (thname, thname, hi, run, value, fid, above), above, got_hi)
    check_eq("%s: %s=%.6g (just below): %s %s" % (thname, thname, lo, fid, below), below, got_lo)


def guarded(name, f):
    try:
        f()
    except Exception as e:  # a finding or key missing: the check fails, named
        check(name, False, "%s: %s" % (type(e).__name__, e))


# ---- hang_suspect: hang_min_ms (default 100 ms, pinned on inputs at 100.449 and 99.449 ms)
def hang():
    check_eq("hang_min_ms default: others waited 100.449 ms -> hang_suspect critical", "critical", sev("hang_above", "hang_suspect"))
    check_eq("hang_min_ms default: waited 100.449 ms (an_gen --hang-ms 108.5)", 100.449, ev("hang_above", "hang_suspect", "wait_ms"))
    check_eq("hang_min_ms default: others waited 99.449 ms -> no hang_suspect (a job stopped as a whole)", "absent", sev("hang_below", "hang_suspect"))
    w = ev("kill", "hang_suspect", "wait_ms")
    pin("hang", "kill", "hang_suspect", "hang_min_ms", w, "absent", "critical")
guarded("hang_min_ms", hang)


# ---- pcie_fallback: found, and its severity (counters || low bus bandwidth) -> critical
def fallback():
    check_eq("pcie_fallback: counters and low busbw -> critical", "critical", sev("fallback", "pcie_fallback"))
    check_eq("pcie_fallback: counters alone (low_busbw_share=0) -> critical", "critical",
             sev("fallback", "pcie_fallback", "low_busbw_share=0"))
    check_eq("pcie_fallback: low busbw alone (fallback_pcie_ratio=1e9) -> critical", "critical",
             sev("fallback", "pcie_fallback", "fallback_pcie_ratio=1e9"))
    check_eq("pcie_fallback: neither (env var only) -> warning", "warning",
             sev("fallback", "pcie_fallback", "fallback_pcie_ratio=1e9", "low_busbw_share=0"))
    check_eq("pcie_fallback: env only, NVLink busy -> warning", "warning", sev("envonly", "pcie_fallback"))
    check_eq("pcie_fallback: not in a healthy run", "absent", sev("healthy", "pcie_fallback"))
    nvl = ev("fallback", "pcie_fallback", "nvlink_bytes_during_collectives")
    pcie = ev("fallback", "pcie_fallback", "pcie_bytes_during_collectives")
    # counters: PCIe bytes > ratio x NVLink bytes (low busbw switched off: severity shows counters)
    pin("ratio", "fallback", "pcie_fallback", "fallback_pcie_ratio", pcie / nvl, "warning", "critical",
        extra=("low_busbw_share=0",))
    # counters also need >= fallback_min_mib MiB of PCIe bytes; the finding needs that much NCCL
    # payload per rank (the communicator's bytes / its ranks)
    per_rank = sum(c["bytes"] for c in report("fallback")["collectives"]) / 2 / 2 ** 20
    pin("min_mib", "envonly", "pcie_fallback", "fallback_min_mib", per_rank, "absent", "warning")
    check_eq("fallback_min_mib: payload per rank %.1f MiB (64 MiB and 4 MiB AllReduces, a 16 MiB broadcast)" % per_rank,
             True, 5000 < per_rank < 6000)
guarded("pcie_fallback", fallback)


# ---- low_bus_bandwidth: share of peak, message size, calls per rank
def lowbw():
    share = ev("fallback", "low_bus_bandwidth", "busbw_gbps") / ev("fallback", "low_bus_bandwidth", "nvlink_peak_gbps")
    pin("share", "fallback", "low_bus_bandwidth", "low_busbw_share", share, "info", "absent")
    # only calls of >= low_busbw_min_mib MiB count: 4 MiB calls counted at 4, not at 4.01
    check_eq("low_busbw_min_mib=4: the 4 MiB AllReduces count (2 ranks x 40 steps x 4 calls)", 320,
             ev("fallback", "low_bus_bandwidth", "calls", "low_busbw_min_mib=4"))
    check_eq("low_busbw_min_mib=4.01: only the 64 MiB ones (2 x 40 x 2)", 160,
             ev("fallback", "low_bus_bandwidth", "calls", "low_busbw_min_mib=4.01"))
    check_eq("low_busbw_min_mib default 8: the 64 MiB ones", 160, ev("fallback", "low_bus_bandwidth", "calls"))
    check_eq("low_busbw_min_mib=64: 64 MiB calls still count", "info", sev("fallback", "low_bus_bandwidth", "low_busbw_min_mib=64"))
    check_eq("low_busbw_min_mib=64.01: no call counts -> absent", "absent", sev("fallback", "low_bus_bandwidth", "low_busbw_min_mib=64.01"))
    # 80 calls per rank of the 64 MiB AllReduce
    check_eq("low_busbw_min_calls=80 (80 per rank): found", "info", sev("fallback", "low_bus_bandwidth", "low_busbw_min_calls=80"))
    check_eq("low_busbw_min_calls=80.5: absent", "absent", sev("fallback", "low_bus_bandwidth", "low_busbw_min_calls=80.5"))
    # alone (the fallback not claimed: its payload threshold above the job's), it warns
    check_eq("low_bus_bandwidth without a root cause: warning", "warning",
             sev("fallback", "low_bus_bandwidth", "fallback_min_mib=1e9"))
guarded("low_bus_bandwidth", lowbw)


# ---- peer_access_disabled: staged MiB; without topology, the GB/s below which it is judged
def staged():
    mib = ev("staged", "peer_access_disabled", "bytes") / 2 ** 20
    pin("staged", "staged", "peer_access_disabled", "staged_min_mib", mib, "absent", "warning")
    gbps = ev("staged_notopo", "peer_access_disabled", "achieved_gbps")
    pin("gbps", "staged_notopo", "peer_access_disabled", "staged_max_gbps", gbps, "warning", "absent")
    # cost: the staged copies' time minus the same bytes at the NVLink peak
    b, peak = ev("staged", "peer_access_disabled", "bytes"), ev("staged", "peer_access_disabled", "nvlink_peak_gbps")
    st, pc, lost = (ev("staged", "peer_access_disabled", k) for k in ("staged_ms", "peer_copy_ms", "lost_ms"))
    check("peer_access_disabled cost: staged_ms = 256 MiB at the achieved 34 GB/s (%.6g ms)" % st,
          b == 256 * 2 ** 20 and close(st, b / 34e9 * 1e3), "bytes %r staged_ms %r" % (b, st))
    check("peer_access_disabled cost: peer_copy_ms = the bytes at the NVLink peak (%.6g ms)" % pc, close(pc, b / (peak * 1e9) * 1e3), "%r" % pc)
    check("peer_access_disabled cost: lost_ms = staged_ms - peer_copy_ms (%.6g ms)" % lost, close(lost, st - pc), "%r" % lost)
guarded("peer_access_disabled", staged)


# ---- uma_thrashing: MiB migrated and direction changes per allocation; its cost
def uma():
    moved = ev("thrash", "uma_thrashing", "bytes_migrated")
    check_eq("uma_thrashing: 80 MiB migrated (an_gen --thrash)", 80 * 2 ** 20, moved)
    pin("mib", "thrash", "uma_thrashing", "thrash_min_mib", moved / 2 ** 20, "absent", "warning")
    flips = ev("thrash", "uma_thrashing", "direction_changes")
    pin("flips", "thrash", "uma_thrashing", "thrash_min_flips", flips, "absent", "warning")
    check_eq("uma_thrashing cost: time_lost_ms of the 40 migrations an_gen wrote", 6.8, ev("thrash", "uma_thrashing", "time_lost_ms"))
guarded("uma_thrashing", uma)


# ---- straggler: share of last arrivals, lead in ms, lead as a share of the step, the long rule
def straggler():
    f = finding(report("late"), "straggler")
    ev_ = f["evidence"]
    share = ev_["last_arrivals"] / ev_["collectives"]
    lead, stepshare = ev_["median_lead_ms"], ev_["lead_step_share"]
    check_eq("straggler: rank 1 last at every collective (200 of 200)", (1, 200, 200), (ev_["rank"], ev_["last_arrivals"], ev_["collectives"]))
    check_eq("straggler_share=%.6g (its share): found" % share, "warning", sev("late", "straggler", "straggler_share=%.9g" % share))
    check_eq("straggler_share just above its share: absent", "absent", sev("late", "straggler", "straggler_share=%.9g" % (share * 1.01)))
    pin("lead", "late", "straggler", "straggler_min_ms", lead, "absent", "warning")
    # a 2 ms lead of 11.6 ms steps: the step-share rule decides (the long rule needs 5 ms)
    pin("step share", "late", "straggler", "straggler_step_share", stepshare, "absent", "warning")
    # the long rule alone (the step-share rule out of reach): lead >= long_ms and share >= long_share
    pin("long ms", "late", "straggler", "straggler_long_ms", lead, "absent", "warning",
        extra=("straggler_step_share=1",))
    pin("long share", "late", "straggler", "straggler_long_share", stepshare, "absent", "warning",
        extra=("straggler_step_share=1", "straggler_long_ms=1"))
    # cost: every step the others wait the lead; a rank 2 ms late in 40 steps (an_gen --late-rank)
    for run, ms in (("late", 2), ("late3", 3)):
        e = finding(report(run), "straggler")["evidence"]
        check("straggler cost %s: lead %.4g ms of the %d ms an_gen slept, lost per step = the lead" % (run, e["median_lead_ms"], ms),
              ms - 0.01 < e["median_lead_ms"] <= ms and e["lost_per_step_ms"] == e["median_lead_ms"], repr(e))
        check("straggler cost %s: wait_caused_ms = 40 steps x %.4g ms (%.6g)" % (run, e["lost_per_step_ms"], e["wait_caused_ms"]),
              close(e["wait_caused_ms"], 40 * e["lost_per_step_ms"]), repr(e))
    check_eq("straggler cost: wait_caused_ms of the 2 ms late rank", 79.92, ev("late", "straggler", "wait_caused_ms"))
guarded("straggler", straggler)


# ---- exposed_communication: warning share, critical share; its cost
def exposed():
    share = report("exposed")["job"]["exposed_share"]
    pin("share", "exposed", "exposed_communication", "exposed_share", share, "absent", "warning")
    pin("critical", "exposed", "exposed_communication", "exposed_critical", share, "warning", "critical",
        extra=("exposed_share=0.01",))
    d = report("exposed", "exposed_share=0.01")
    e = finding(d, "exposed_communication")["evidence"]
    check("exposed cost: lost_ms = exposed ms per rank (%.6g)" % e["lost_ms"], e["lost_ms"] == d["job"]["exposed_ms_per_rank"] == e["exposed_ms_per_rank"], repr(e))
    check("exposed cost: lost_per_step_ms = lost_ms / 40 steps (%.6g)" % e["lost_per_step_ms"], close(e["lost_per_step_ms"], e["lost_ms"] / 40), repr(e))
    # an_gen --exposed: every collective after compute, none hidden: exposed = comm in steps
    check("exposed cost: all of the communication in steps is exposed", close(e["exposed_ms_per_rank"], e["comm_in_steps_ms_per_rank"]), repr(e))
guarded("exposed_communication", exposed)


# ---- explained_share: a root cause explains exposed_communication when it holds that share
def explained():
    th = ("exposed_share=0.05",)
    s = ev("late", "exposed_communication", "explained_share", *th)
    check_eq("explained_share: late rank's wait explains exposed_communication (info)", "info", sev("late", "exposed_communication", *th))
    pin("explained", "late", "exposed_communication", "explained_share", s, "warning", "info", extra=th)
guarded("explained_share", explained)


# ---- nccl_split_host: critical when a member spends split_host_critical of its wall time in them
def split_host():
    share = ev("share_hf", "nccl_split_host", "collective_share_of_wall")
    check("nccl_split_host: share_hf's collective share of wall time %.6g" % share, 0.25 < share < 0.4, repr(share))
    pin("split", "share_hf", "nccl_split_host", "split_host_critical", share, "warning", "critical")
guarded("nccl_split_host", split_host)


# ---- steps: a repeating pattern is taken for steps (count, median length, regular share)
def steps():
    import re
    j = report("healthy")["job"]
    check_eq("steps: 40 recognised in the healthy job", 40, j["steps"])
    # the pattern's repetitions and their median length, as the analyzer says when it refuses them
    why = report("healthy", "step_min_count=1e9")["job"]["steps_why"]
    k = int(re.search(r"repeats only (\d+) times", why).group(1))
    why = report("healthy", "step_min_ms=1e9")["job"]["steps_why"]
    med = float(re.search(r"last ([0-9.]+) ms each \(median\)", why).group(1))
    check("steps: %d repetitions of %.3f ms (median) in the healthy job" % (k, med), 30 <= k <= 40 and 9 < med < 10.5, why)
    for name, value in (("step_min_count", k), ("step_min_ms", med), ("step_regular_share", 1.0)):
        hi = report("healthy", "%s=%.9g" % (name, value * 1.01))["job"]["steps"]
        lo = report("healthy", "%s=%.9g" % (name, value * (0.99 if name == "step_min_ms" else 1)))["job"]["steps"]
        check_eq("%s=%.6g (the job's value): 40 steps" % (name, value), 40, lo)
        check_eq("%s just above the job's %.6g: no steps" % (name, value), 0, hi)
guarded("steps", steps)
PYEOF
echo "python exit $?" >>"$T/py.out"
cat "$T/py.out"
grep -q '^python exit 0$' "$T/py.out" || fail "the threshold checks (python) did not finish"
FAILED=$((FAILED + $(grep -c '^FAIL: ' "$T/py.out")))

# ---- diff: the verdict and the cause, in both directions, text and JSON
"$CLI" diff "$T/healthy" "$T/late" >"$T/d1.txt" 2>&1
check "diff verdict: slower, step times, straggler appears" grep -qx \
	"VERDICT: AFTER is 20.8% slower (step_ms 9.600 -> 11.600); straggler appears in AFTER" "$T/d1.txt"
"$CLI" diff "$T/late" "$T/healthy" >"$T/d2.txt" 2>&1
check "diff verdict: faster, straggler is gone" grep -qx \
	"VERDICT: AFTER is 17.2% faster (step_ms 11.600 -> 9.600); straggler is gone in AFTER" "$T/d2.txt"
"$CLI" diff --json "$T/healthy" "$T/late" >"$T/d1.json" 2>&1
check_eq "diff --json: cause and slower_pct" "straggler appears in AFTER 20.8333" \
	"$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verdict"]; print(v["cause"], v["slower_pct"])' "$T/d1.json" 2>&1)"
"$CLI" diff "$T/healthy" "$T/kill" >"$T/d3.txt" 2>&1
check "diff cause: hang_suspect appears" grep -q "; hang_suspect appears in AFTER$" "$T/d3.txt"
"$CLI" diff "$T/thrash" "$T/healthy" >"$T/d4.txt" 2>&1
check "diff cause: uma_thrashing is gone" grep -q "; uma_thrashing is gone in AFTER$" "$T/d4.txt"
"$CLI" diff "$T/healthy" "$T/staged" >"$T/d5.txt" 2>&1
check "diff cause: peer_access_disabled appears" grep -q "; peer_access_disabled appears in AFTER$" "$T/d5.txt"
"$CLI" diff "$T/healthy" "$T/fallback" >"$T/d6.txt" 2>&1
check "diff cause: AFTER falls back (env var, ratio per step)" grep -q \
	"; AFTER falls back from NVLink to PCIe/host memory (NCCL_P2P_DISABLE=1): 1.31x slower per step$" "$T/d6.txt"
"$CLI" diff "$T/healthy" "$T/healthy" >"$T/d7.txt" 2>&1
check "diff verdict: the same job, no change and no cause" grep -Eqx "VERDICT: AFTER is (0.0% slower|unchanged|0.0% faster)[^;]*" "$T/d7.txt"
exit $((FAILED > 0))

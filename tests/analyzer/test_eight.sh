#!/usr/bin/env bash
# test_eight.sh: the 8-GPU scenario matrix without a GPU: synthetic 8-rank jobs from an_gen on an HGX-like
# topology (every GPU on the NVSwitches), DDP-like (AllReduce) and FSDP-like (AllGather/ReduceScatter):
# healthy (no warnings), NCCL_P2P_DISABLE=1 with PCIe counters on every GPU (pcie_fallback over all 8),
# one rank of eight late before every step (straggler names exactly it), one rank killed before the last
# collective (hang_suspect names exactly it, the seven others wait); the board as CUPTI records two of its
# GPUs (a record per pair) and as lazy records one GPU per process (links beyond it), healthy and P2P off. The same checks as tests/gpu/check.py
# `ranks` / `findings` make on the real 8-GPU traces (tests/gpu/run_8gpu.sh).
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
if [ ! -x "$GEN" ] || [ ! -x "$CLI" ]; then
	fail "analyzer test programs built ($GEN, $CLI; run make BUILD=$BUILD $GEN)"
	exit 1
fi
gen() { local name=$1; shift; "$GEN" -o "$T/$name" --ranks 8 --nvswitch "$@" || fail "an_gen $name $*"; }
# scenario sets: dp (AllReduce steps; late rank 5, rank 3 killed), fsdp (late rank 7, rank 0 killed)
gen dp_healthy
gen dp_fallback --fallback
gen dp_late --late-rank 5
gen dp_kill --kill-rank 3
gen fsdp_healthy --fsdp
gen fsdp_fallback --fsdp --fallback
gen fsdp_late --fsdp --late-rank 7
gen fsdp_kill --fsdp --kill-rank 0
# without the NVSwitch topology (NVLink known only between GPUs 0 and 1) the fallback is not claimed
# for GPUs that may not have NVLink: checks that the fallback above rests on the topology of all 8
"$GEN" -o "$T/partial_fallback" --ranks 8 --fallback || fail "an_gen partial_fallback"

# the same board as CUPTI gives two of its GPUs (a record per GPU pair, 18 links through the
# NVSwitch each: a GPU's peak is 18 links, not 7 x 18), and each rank seeing one GPU
# (CUDA_VISIBLE_DEVICES) with its links beyond the process as NVLPROF_CUPTI=lazy records them
for t in pairs:--switch-pairs one:--one-gpu; do
	gen "dp_${t%%:*}_healthy" ${t#*:}
	gen "dp_${t%%:*}_fallback" ${t#*:} --fallback
done

S="dp_healthy dp_fallback dp_late dp_kill fsdp_healthy fsdp_fallback fsdp_late fsdp_kill partial_fallback"
S="$S dp_pairs_healthy dp_pairs_fallback dp_one_healthy dp_one_fallback"
for s in $S; do "$CLI" report --json "$T/$s" >"$T/$s.json" 2>"$T/$s.err"; done

# every question answered by one python3 run (as test_report.sh): NAME<TAB>VALUE lines
python3 - "$T" >"$T/answers" 2>&1 <<'PYEOF'
import json, sys
T = sys.argv[1]
def load(s):
    return json.load(open(f"{T}/{s}.json"))
def bad(d):
    return sorted(f["id"] for f in d["findings"] if f["severity"] != "info")
def fnd(d, i):
    return [f for f in d["findings"] if f["id"] == i]
out = {}
for kind, late, dead, colls in (("dp", 5, 3, "ncclAllReduce ncclBroadcast"),
                                ("fsdp", 7, 0, "ncclAllGather ncclBroadcast ncclReduceScatter")):
    h = load(f"{kind}_healthy")
    out[f"{kind}_h_bad"] = " ".join(bad(h)) or "none"
    out[f"{kind}_h_procs"] = f"{h['job']['processes']} {h['job']['hosts']} {h['job']['steps']}"
    out[f"{kind}_h_ranks"] = " ".join(f"{r['rank']}:{r['complete']}" for r in sorted(h["ranks"], key=lambda r: r["rank"]))
    out[f"{kind}_h_colls"] = " ".join(sorted({c["collective"] for c in h["collectives"]}))
    out[f"{kind}_h_nranks"] = " ".join(sorted({str(c["nranks"]) for c in h["collectives"]}))
    # matched across all 8: every collective of the comm (per rank calls, all seqs) matched
    calls = sum(c["calls_per_rank"] for c in h["collectives"])
    out[f"{kind}_h_matched"] = str(h["job"]["matched_collectives"] == calls and calls > 100)
    out[f"{kind}_h_links"] = " ".join(f"{l['rank']}/{l['device']}" for l in sorted(h["links"], key=lambda l: l["rank"]) if l["nvlink_bytes"] > 100 * l["pcie_bytes"])
    out[f"{kind}_h_peak"] = str(all(c["peak_share"] is not None and 0.5 < c["peak_share"] <= 1 for c in h["collectives"]))
    # nccl-tests-style bus bandwidth: algbw x 2(n-1)/n for AllReduce, x (n-1)/n for AllGather/ReduceScatter
    fac = {"ncclAllReduce": 2 * 7 / 8, "ncclAllGather": 7 / 8, "ncclReduceScatter": 7 / 8, "ncclBroadcast": 1}
    out[f"{kind}_h_busbw"] = str(all(abs(c["busbw_gbps"] - c["algbw_gbps"] * fac[c["collective"]]) < 0.01 * c["busbw_gbps"] for c in h["collectives"]))
    f = load(f"{kind}_fallback")
    out[f"{kind}_f_bad"] = " ".join(bad(f))
    pf = fnd(f, "pcie_fallback")
    ev = pf[0]["evidence"] if pf else {}
    out[f"{kind}_f_ev"] = f"{pf[0]['severity'] if pf else '-'} {ev.get('env')} {ev.get('nranks')}"
    ok = [l for l in f["links"] if l["pcie_bytes_in_collectives"] > 100 * max(1, l["nvlink_bytes_in_collectives"])]
    out[f"{kind}_f_links"] = " ".join(f"{l['rank']}/{l['device']}" for l in sorted(ok, key=lambda l: l["rank"]))
    out[f"{kind}_f_busbw"] = str(all(c["peak_share"] is not None and c["peak_share"] < 0.1 for c in f["collectives"]))
    l = load(f"{kind}_late")
    out[f"{kind}_l_bad"] = " ".join(bad(l))
    st = fnd(l, "straggler")
    out[f"{kind}_l_rank"] = " ".join(str(x["evidence"]["rank"]) for x in st)
    out[f"{kind}_l_last"] = " ".join(str(r["rank"]) for r in l["ranks"] if r["arrived_last"] > 0.9 * r["collectives"])
    lead = [x["evidence"]["median_lead_ms"] for x in st]
    out[f"{kind}_l_lead"] = str(bool(lead) and 1.8 < lead[0] < 2.2)
    out[f"{kind}_l_comp"] = str(all(r["complete"] for r in l["ranks"]) and len(l["ranks"]) == 8)
    k = load(f"{kind}_kill")
    out[f"{kind}_k_bad"] = " ".join(bad(k))
    hs = fnd(k, "hang_suspect")
    e = hs[0]["evidence"] if hs else {}
    out[f"{kind}_k_ev"] = f"{len(hs)} {e.get('rank')} {e.get('missing_ranks')} {e.get('waiting_ranks')} {e.get('wait_ms', 0) > 1000}"
    out[f"{kind}_k_comp"] = " ".join(str(r["rank"]) for r in sorted(k["ranks"], key=lambda r: r["rank"]) if not r["complete"])
    out[f"{kind}_k_procs"] = str(k["job"]["processes"])
    out[f"{kind}_expect"] = f"{late} {dead} {' '.join(str(r) for r in range(8) if r != dead)} {colls}"
for t in ("pairs", "one"):
    h, f = load(f"dp_{t}_healthy"), load(f"dp_{t}_fallback")
    pf = fnd(f, "pcie_fallback")
    out[f"{t}_h"] = " ".join(bad(h)) or "none"
    out[f"{t}_peak"] = str(all(c["peak_share"] is not None and 0.5 < c["peak_share"] <= 1 for c in h["collectives"]))
    out[f"{t}_f"] = f"{' '.join(bad(f))} {pf[0]['severity'] if pf else '-'} {pf[0]['evidence'].get('nvlink_peak_gbps') if pf else '-'}"
p = load("partial_fallback")
out["partial_bad"] = str("pcie_fallback" in bad(p)) + " " + str([x["severity"] for x in fnd(p, "exposed_communication")])
for k, v in out.items():
    print(f"{k}\t{v}")
PYEOF
declare -A V
while IFS=$'\t' read -r n val; do V[$n]=$val; done <"$T/answers"
v() { echo "${V[$1]-}"; }
if [ -z "$(v dp_expect)" ]; then fail "8-rank queries answered"; cat "$T/answers"; exit 1; fi

ALL8="0/0 1/1 2/2 3/3 4/4 5/5 6/6 7/7"
for k in dp fsdp; do
	exp=($(v ${k}_expect))
	late=${exp[0]} dead=${exp[1]} waiting=$(IFS=,; echo "${exp[*]:2:7}") colls="${exp[*]:9}"
	# healthy
	check_eq "8 ranks $k healthy: no warning or critical findings" "none" "$(v ${k}_h_bad)"
	check_eq "8 ranks $k healthy: 8 processes, 1 host, 40 steps" "8 1 40" "$(v ${k}_h_procs)"
	check_eq "8 ranks $k healthy: every rank's trace complete" "0:True 1:True 2:True 3:True 4:True 5:True 6:True 7:True" "$(v ${k}_h_ranks)"
	check_eq "8 ranks $k healthy: collectives seen" "$colls" "$(v ${k}_h_colls)"
	check_eq "8 ranks $k healthy: every collective on 8 ranks" "8" "$(v ${k}_h_nranks)"
	check_eq "8 ranks $k healthy: every call matched across all 8 ranks" "True" "$(v ${k}_h_matched)"
	check_eq "8 ranks $k healthy: NVLink counters from all 8 processes, one GPU each" "$ALL8" "$(v ${k}_h_links)"
	check_eq "8 ranks $k healthy: peak share known (NVSwitch topology) and plausible" "True" "$(v ${k}_h_peak)"
	check_eq "8 ranks $k healthy: busbw = algbw x nccl-tests factor for n=8" "True" "$(v ${k}_h_busbw)"
	# NCCL_P2P_DISABLE=1
	check_eq "8 ranks $k P2P off: pcie_fallback is the only warning" "pcie_fallback" "$(v ${k}_f_bad)"
	check_eq "8 ranks $k P2P off: critical, names the variable, comm spans 8 ranks" "critical NCCL_P2P_DISABLE=1 8" "$(v ${k}_f_ev)"
	check_eq "8 ranks $k P2P off: PCIe, not NVLink, during collectives on every GPU" "$ALL8" "$(v ${k}_f_links)"
	check_eq "8 ranks $k P2P off: bus bandwidth below 10% of the NVLink peak" "True" "$(v ${k}_f_busbw)"
	# one rank of eight late
	check_eq "8 ranks $k rank $late late: straggler is the only warning" "straggler" "$(v ${k}_l_bad)"
	check_eq "8 ranks $k rank $late late: straggler names exactly rank $late" "$late" "$(v ${k}_l_rank)"
	check_eq "8 ranks $k rank $late late: only rank $late arrives last at >90% of collectives" "$late" "$(v ${k}_l_last)"
	check_eq "8 ranks $k rank $late late: lead about the 2 ms it slept" "True" "$(v ${k}_l_lead)"
	check_eq "8 ranks $k rank $late late: all 8 traces complete" "True" "$(v ${k}_l_comp)"
	# one rank of eight killed
	check_eq "8 ranks $k rank $dead killed: hang_suspect is the only warning" "hang_suspect" "$(v ${k}_k_bad)"
	check_eq "8 ranks $k rank $dead killed: hang_suspect names exactly rank $dead, the 7 others wait" \
		"1 $dead $dead $waiting True" "$(v ${k}_k_ev)"
	check_eq "8 ranks $k rank $dead killed: only its trace cut short" "$dead" "$(v ${k}_k_comp)"
	check_eq "8 ranks $k rank $dead killed: still 8 processes read" "8" "$(v ${k}_k_procs)"
	check "8 ranks $k rank $dead killed: cut-short trace warned" grep -q "cut short" "$T/${k}_kill.err"
done
for t in pairs one; do
	[ $t = pairs ] && how="a record per GPU pair through the NVSwitch (CUPTI)" || how="one GPU per process (lazy)"
	check_eq "8 ranks, $how, healthy: no warning" none "$(v ${t}_h)"
	check_eq "8 ranks, $how, healthy: peak share plausible (a GPU's 18 links, once)" True "$(v ${t}_peak)"
	check_eq "8 ranks, $how, P2P off: pcie_fallback, critical, against 18 x 25 GB/s" "pcie_fallback critical 450" "$(v ${t}_f)"
done
check_eq "8 ranks P2P off, NVLink known only between GPUs 0-1: no fallback claimed, exposed time stands alone" \
	"False ['critical']" "$(v partial_bad)"

# harness NAME < CHECKS: checks of the GPU harness (tests/gpu/), not of nvlprof, printed as ONE
# labelled line (they do not count as nvlprof checks); a failing one is printed and fails the suite
harness() {
	local out p
	out=$(cat)
	p=$(grep -c '^PASS: ' <<<"$out")
	grep -v '^PASS: ' <<<"$out"
	if grep -q '^FAIL: ' <<<"$out"; then FAILED=$((FAILED + 1)); else pass "GPU harness, not nvlprof: $1 ($p self-checks)"; fi
}
# the 8-GPU proof's own checks (tests/gpu/check.py, run by tests/gpu/run_8gpu.sh) on these traces:
# they pass where the real run should, and fail where it must not pass
harness "tests/gpu/check.py passes and fails where it should on the 8-rank jobs" < <(
ck() { NVLPROF="$CLI" python3 "$ROOT/tests/gpu/check.py" "$@" >"$T/ck.out" 2>&1; echo "$? $(grep -c '^PASS: ' "$T/ck.out") $(grep -c '^FAIL: ' "$T/ck.out")"; }
check_eq "check.py ranks: 8-rank FSDP healthy: complete, matched, counters from all 8" "0 6 0" "$(ck ranks "$T/fsdp_healthy" 8)"
check_eq "check.py ranks: 8-rank DDP healthy" "0 6 0" "$(ck ranks "$T/dp_healthy" 8)"
check_eq "check.py ranks: rank 3 killed -> incomplete, unmatched, counters missing (3 FAIL)" "1 3 3" "$(ck ranks "$T/dp_kill" 8)"
check "check.py ranks: names the incomplete trace set" grep -q "FAIL: ranks dp_kill: all 8 traces present and complete: 8 traces, complete ranks \[0, 1, 2, 4, 5, 6, 7\]" "$T/ck.out"
check_eq "check.py ranks: a 4-rank expectation fails on 8 ranks" "1" "$(ck ranks "$T/dp_healthy" 4 | cut -d' ' -f1)"
check_eq "check.py links: P2P off -> PCIe on all 8 GPUs, pcie_fallback over 8 ranks" "0 2 0" "$(ck links "$T/fsdp_fallback" 8 pcie)"
check_eq "check.py links: healthy -> NVLink on all 8 GPUs" "0 1 0" "$(ck links "$T/dp_healthy" 8 nvlink)"
check_eq "check.py links: healthy is not a fallback" "1 0 2" "$(ck links "$T/dp_healthy" 8 pcie)"
check_eq "check.py findings: healthy flags nothing" "0 2 0" "$(ck findings "$T/fsdp_healthy" -)"
check_eq "check.py findings: straggler@rank=7" "0 3 0" "$(ck findings "$T/fsdp_late" straggler straggler@rank=7)"
check_eq "check.py findings: straggler@rank=6 fails on rank 7's trace" "1 2 1" "$(ck findings "$T/fsdp_late" straggler straggler@rank=6)"
check_eq "check.py findings: ID? allows, does not require" "0 3 0" "$(ck findings "$T/fsdp_late" straggler,exposed_communication?,pcie_fallback? straggler@rank=7)"
check_eq "check.py findings: ID? does not satisfy a required one" "1 1 1" "$(ck findings "$T/dp_kill" hang_suspect?,straggler)"
check_eq "check.py findings: hang_suspect@rank=3" "0 3 0" "$(ck findings "$T/dp_kill" hang_suspect hang_suspect@rank=3)"
check_eq "check.py findings: pcie_fallback" "0 2 0" "$(ck findings "$T/dp_fallback" pcie_fallback)"
check_eq "check.py busbw: formula checks on AllGather, ReduceScatter, Broadcast" "0 3 0" "$(ck busbw "$T/fsdp_healthy")"
check "check.py busbw: one note per collective" test "$(grep -c '^NOTE: busbw fsdp_healthy: nccl' "$T/ck.out")" -eq 3
)

# tests/gpu/run_8gpu.sh end to end on stand-ins (no GPU, no torch): every scenario runs, its checks pass,
# the outputs are packed and the small trace to ship is there
# stand-ins for nvidia-smi, torchrun and python3 running examples/*_train.py: an_gen writes the traces.
# Not under SAN=thread: the profiled stand-ins are bash and python, and the TSan runtime, which the
# instrumented shim needs first in LD_PRELOAD, crashes bash (exit 139). The normal build runs it.
if [ "${SAN:-}" = thread ]; then
	skip "run_8gpu.sh stand-in run: not under SAN=thread (TSan runtime cannot be preloaded into bash)"
else
# its step_ms and overhead figures are the stand-in's own: what is checked is the harness
harness "tests/gpu/run_8gpu.sh end to end on stand-ins (an_gen for the GPU jobs)" < <(
M=$T/mock
mkdir -p "$M"
REALPY=$(command -v python3)
printf '#!/bin/sh\n[ "$1" = -L ] && for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H200 (UUID: GPU-$i)"; done\nexit 0\n' >"$M/nvidia-smi"
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do case "$1" in --nproc-per-node) shift 2 ;; --*) shift ;; *) break ;; esac; done\nexec python3 "$@"\n' >"$M/torchrun"
cat >"$M/python3" <<MOCK
#!/usr/bin/env bash
case "\${1:-}" in *_train.py) ;; *) exec "$REALPY" "\$@" ;; esac
script=\$1; shift
a=(--ranks 8 --nvswitch) steps=40 json= nt=
case "\$script" in *fsdp*) a+=(--fsdp) ;; esac
while [ \$# -gt 0 ]; do
	case "\$1" in
	--steps) steps=\$2; shift ;; --json) json=\$2; shift ;; --nccl-tests) nt=\$2; shift ;;
	--sleep-rank) a+=(--late-rank "\$2"); shift ;; --sleep-ms) a+=(--late-ms "\$2"); shift ;;
	--kill-rank) a+=(--kill-rank "\$2"); shift ;;
	--*) case "\${2:-}" in --*|'') ;; *) shift ;; esac ;;
	esac
	shift
done
[ "\${NCCL_P2P_DISABLE:-0}" = 1 ] && a+=(--fallback)
[ -n "\$nt" ] && echo '{"world": 8, "results": [{"collective": "AllGather", "bytes": 33554432, "busbw_gbps": 340.0},
  {"collective": "ReduceScatter", "bytes": 33554432, "busbw_gbps": 330.0}, {"collective": "AllReduce", "bytes": 67108864, "busbw_gbps": 350.0}]}' >"\$nt"
[ "\$steps" -gt 0 ] || exit 0
[ -n "\$json" ] && echo '{"losses": [1.5, 1.25, 1.0], "step_ms": [10.0, 10.0, 10.0], "median_ms": 10.0}' >"\$json"
if [ -n "\${NVLPROF_DIR:-}" ] && [ "\${NVLPROF_CUPTI:-1}" != 0 ]; then
	env -u LD_PRELOAD "$GEN" -o "\$NVLPROF_DIR" --steps "\$steps" "\${a[@]}"
fi
MOCK
chmod +x "$M"/*
# (a sanitizer build of the shim needs its runtime first in LD_PRELOAD, as `nvlprof run` keeps it)
(cd "$ROOT" && OUT=$T/gpu8 NVLPROF=$CLI STEPS=16 OVH_PAIRS=1 OVH_STEPS=20 PATH="$M:$PATH" \
	LD_PRELOAD="$SANLIB" bash tests/gpu/run_8gpu.sh) >"$T/gpu8.out" 2>&1
rc=$?
check_eq "run_8gpu.sh on stand-ins: exit status 0, no FAIL line" "0 0" "$rc $(grep -c '^FAIL' "$T/gpu8.out")"
npass=$(grep -c '^PASS: ' "$T/gpu8.out")
check "run_8gpu.sh on stand-ins: every scenario checked ($npass PASS lines)" test "$npass" -ge 90
for sc in healthy.FSDP healthy.DDP torchrun NCCL_P2P_DISABLE sleeping killed nccl-tests speed overhead ship; do
	check "run_8gpu.sh on stand-ins: scenario ${sc//./ } ran" grep -q "^== .*${sc//./ }" "$T/gpu8.out"
done
for k in fsdp_healthy ddp_healthy fsdp_torchrun fsdp_p2p_disable fsdp_straggler; do
	check "run_8gpu.sh on stand-ins: $k has 8 complete ranks" grep -q "^PASS: ranks $k: all 8 traces present and complete" "$T/gpu8.out"
done
check "run_8gpu.sh on stand-ins: straggler and hang named rank 5 (FSDP and DDP)" test "$(grep -cE '^PASS: report (fsdp|ddp)_(straggler|killed): (straggler|hang_suspect) names exactly rank 5' "$T/gpu8.out")" -eq 4
check "run_8gpu.sh on stand-ins: busbw against the nccl-tests-style table" grep -q "^NOTE: busbw fsdp_healthy: ncclAllGather on 8 ranks.*nccl-tests-style at 32 MiB: 340.0 GB/s" "$T/gpu8.out"
check "run_8gpu.sh on stand-ins: overhead side by side for FSDP and DDP" test "$(grep -c '^PASS: overhead: everything on within 2%' "$T/gpu8.out")" -eq 2
check "run_8gpu.sh on stand-ins: traces and logs packed" bash -c "tar tzf '$T/gpu8/traces.tgz' | grep -q 'traces/fsdp_killed/' && tar tzf '$T/gpu8/logs.tgz' | grep -q 'logs/report_fsdp_straggler.txt'"
check_eq "run_8gpu.sh on stand-ins: 8-rank trace to ship, with its expect file" "8 1" "$(ls "$T/gpu8/ship/fsdp8_healthy/"*.nvlp | wc -l) $(grep -c '^-pcie_fallback' "$T/gpu8/ship/fsdp8_healthy/expect")"
)
fi

# report speed on 8 ranks: 8 x 200k records well under the 10 M records/s/core target's budget
"$GEN" -o "$T/big" --ranks 8 --nvswitch --fsdp --records 200000 || fail "an_gen big"
# CPU time (user + system, every thread), not wall time: other work on the machine does not count
TIMEFORMAT='%3U %3S'
{ time "$CLI" report "$T/big" >"$T/big.txt" 2>&1; } 2>"$T/big.time"
rc=$?
unset TIMEFORMAT
ms=$(awk '{printf "%d", ($1 + $2) * 1000}' "$T/big.time")
recs=$("$CLI" info "$T/big" | awk '$1 == "records" {s += $2} END {print s + 0}')
check_eq "8 ranks speed: report of $recs records exits 0" "0" "$rc"
check "8 ranks speed: $recs records in $ms ms of CPU (limit 10 s, about 0.2 M records/s)" test "$recs" -gt 1000000 -a "$ms" -lt 10000
[ "$FAILED" -eq 0 ]

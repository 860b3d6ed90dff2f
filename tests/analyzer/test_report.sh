#!/usr/bin/env bash
# test_report.sh: nvlprof report/diff on synthetic jobs from an_gen: every finding positive and negative, bad inputs, JSON, goldens, diff.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
GOLD="$ROOT/tests/analyzer/golden"
if [ ! -x "$GEN" ] || [ ! -x "$CLI" ]; then
	fail "analyzer test programs built ($GEN, $CLI; run make BUILD=$BUILD $GEN)"
	exit 1
fi

gen() { local name=$1; shift; "$GEN" -o "$T/$name" "$@" || fail "an_gen $name $*"; }
gen healthy
gen fallback --fallback
gen envonly --env-only
gen late --late-rank 1
gen slightlate --late-rank 1 --late-ms 0.6
gen kill --ranks 4 --kill-rank 1
gen stopped --ranks 4 --kill-rank 1 --hang-ms 5
gen staged --staged
gen peer --peer
gen thrash --thrash
gen umonce --um-once
gen nogpu --no-gpu
gen hosts --ranks 4 --hosts 2 --clock-err-ms 3
gen exposed --exposed
gen drops --drop-rank 1
# issue 16: an nccl-tests sweep and a tight loop (no steps), a failed collective, a launcher
gen sweep --ranks 2 --sweep
gen loop --ranks 2 --graph-loop
gen failed --ranks 2 --fail-at 30 --comm-name dp_group
gen launcher --launcher

# json NAME [report args...]: report --json into $T/NAME.json (stderr to $T/NAME.err)
json() { local n=$1; shift; "$CLI" report --json "$@" >"$T/$n.json" 2>"$T/$n.err"; }
# Python starts slowly on a busy machine: every JSON query is answered by ONE python3 run.
# q NAME FILE EXPR registers a query (d = the parsed JSON); run_queries answers them all; v NAME reads.
declare -A Q_FILE Q_EXPR V
Q_NAMES=()
q() { Q_NAMES+=("$1"); Q_FILE[$1]=$2; Q_EXPR[$1]=$3; }
run_queries() {
	local args=() n
	for n in "${Q_NAMES[@]}"; do args+=("$n" "${Q_FILE[$n]}" "${Q_EXPR[$n]}"); done
	python3 - "${args[@]}" >"$T/answers" 2>&1 <<'PYEOF'
import json, sys
a = sys.argv[1:]
cache = {}
for i in range(0, len(a), 3):
    name, path, expr = a[i:i + 3]
    try:
        if path not in cache:
            cache[path] = json.load(open(path))
        d = cache[path]
        ids = ' '.join(f['id'] for f in d.get('findings', []) if isinstance(d.get('findings'), list))
        v = eval(expr, {'d': d, 'ids': ids})
    except Exception as e:
        v = 'ERROR:%s' % e
    print('%s\t%s' % (name, str(v).replace('\n', ' ')))
PYEOF
	while IFS=$'\t' read -r n val; do V[$n]=$val; done <"$T/answers"
}
v() { echo "${V[$1]-}"; }
# has / hasnt RUN ID: RUN's report lists / does not list the finding ID; both fail when RUN's JSON
# is missing or unparsable (a report that did not run proves no absence)
loaded() {
	[ -n "${V[ids_$1]+set}" ] && case "${V[ids_$1]}" in ERROR:*) false ;; esac && return 0
	echo "report of $1: no JSON read ($(v "ids_$1"); $(head -c 300 "$T/$1.err" 2>/dev/null))"
	return 1
}
has() { loaded "$1" && case " $(v "ids_$1") " in *" $2 "*) return 0 ;; esac && return 1; }
hasnt() { loaded "$1" && case " $(v "ids_$1") " in *" $2 "*) return 1 ;; esac; }
fsev() { echo "[f['severity'] for f in d['findings'] if f['id']=='$1'][0]"; }
fev() { echo "[f['evidence']['$2'] for f in d['findings'] if f['id']=='$1'][0]"; }

for s in healthy fallback envonly late slightlate kill stopped staged peer thrash umonce nogpu hosts exposed; do
	json "$s" "$T/$s"
done
json exposed_t "$T/exposed" --threshold exposed_share=0.03
json healthy_t "$T/healthy" --threshold exposed_share=0.03
json late_t "$T/late" --threshold exposed_share=0.05
json fallback_t "$T/fallback" --threshold explained_share=1.01
"$CLI" diff --json "$T/healthy" "$T/late" >"$T/diff.json"

for s in healthy fallback envonly late slightlate kill stopped staged peer thrash umonce nogpu hosts exposed exposed_t healthy_t late_t fallback_t; do
	q "ids_$s" "$T/$s.json" "ids"
done
# explained_by: a consequence demoted to info, its own severity and the share explained in evidence
fexp() { echo "' '.join(str(f['evidence'].get(k)) for f in d['findings'] if f['id']=='$1' for k in ('explained_by','severity_alone','explained_share')) + ' ' + [f['severity'] for f in d['findings'] if f['id']=='$1'][0]"; }
q fb_lowbw_exp "$T/fallback.json" "$(fexp low_bus_bandwidth)"
q fb_exposed_exp "$T/fallback.json" "$(fexp exposed_communication)"
q fb_order "$T/fallback.json" "ids"
q fbt_exposed_exp "$T/fallback_t.json" "$(fexp exposed_communication)"
q fbt_lowbw_sev "$T/fallback_t.json" "$(fsev low_bus_bandwidth)"
q late_t_exp "$T/late_t.json" "' '.join(str(f['evidence'].get(k)) for f in d['findings'] if f['id']=='exposed_communication' for k in ('explained_by','severity_alone')) + ' ' + str([f['evidence']['explained_share'] > 0.9 for f in d['findings'] if f['id']=='exposed_communication'][0]) + ' ' + $(fsev exposed_communication)"
q late_t_strag "$T/late_t.json" "$(fsev straggler)"
q healthy_bad "$T/healthy.json" "sum(f['severity'] != 'info' for f in d['findings'])"
q healthy_steps "$T/healthy.json" "d['job']['steps']"
q fb_sev "$T/fallback.json" "$(fsev pcie_fallback)"
q fb_env "$T/fallback.json" "$(fev pcie_fallback env)"
q envonly_sev "$T/envonly.json" "$(fsev pcie_fallback)"
q staged_rd "$T/staged.json" "' '.join(str(f['evidence'][k]) for f in d['findings'] if f['id']=='peer_access_disabled' for k in ('rank','device'))"
q staged_path "$T/staged.json" "d['copies'][0]['path']"
q peer_path "$T/peer.json" "d['copies'][0]['path']"
q late_rank "$T/late.json" "$(fev straggler rank)"
q hosts_corr "$T/hosts.json" "'%.3f' % d['job']['clock_correction_ms']"
q hosts_skew "$T/hosts.json" "d['job']['skew_max_ms'] < 0.1"
q hang "$T/kill.json" "' '.join(str(x) for f in d['findings'] if f['id']=='hang_suspect' for x in (f['evidence']['rank'], f['evidence']['seq'], f['evidence']['wait_ms'] > 1000))"
q nogpu_src "$T/nogpu.json" "d['job']['comm_time_source'] + ' ' + d['collectives'][0]['time_source']"
for s in healthy fallback late kill staged thrash nogpu hosts; do
	q "schema_$s" "$T/$s.json" "'ok' if all(set(f) == {'id','severity','title','evidence','units','advice'} and set(f['units']) <= set(f['evidence']) and f['severity'] in ('info','warning','critical') for f in d['findings']) and all(k in d for k in ('job','collectives','ranks','copies','links','managed','files')) else 'bad'"
done
q diff_new "$T/diff.json" "' '.join(x for x in d['findings']['new'] if x == 'straggler') + ' ' + str(d['verdict']['slower_pct'] > 10)"
q diff_bw "$T/diff.json" "any(b['collective']=='AllReduce' and b['size_class']=='16M-256M' for b in d['busbw'])"
run_queries

# healthy: nothing above info
check_eq "healthy: no warning or critical findings" "0" "$(v healthy_bad)"
check_eq "healthy: 40 steps recognised" "40" "$(v healthy_steps)"
# pcie_fallback
check "pcie_fallback: found with NCCL_P2P_DISABLE=1 + PCIe counters" has fallback pcie_fallback
check_eq "pcie_fallback: critical (counters confirm)" "critical" "$(v fb_sev)"
check_eq "pcie_fallback: evidence names the env var" "NCCL_P2P_DISABLE=1" "$(v fb_env)"
check "pcie_fallback: not in healthy run" hasnt healthy pcie_fallback
check_eq "pcie_fallback: env only, NVLink counters busy -> warning, not critical" "warning" "$(v envonly_sev)"
# low_bus_bandwidth
check "low_bus_bandwidth: found in fallback run" has fallback low_bus_bandwidth
check "low_bus_bandwidth: not in healthy run" hasnt healthy low_bus_bandwidth
check "low_bus_bandwidth: not in late-rank run (waiting is not transfer time)" hasnt late low_bus_bandwidth
# explained findings: the root cause explains its consequences (demoted to info, listed after it)
check_eq "explained: fallback explains low_bus_bandwidth on its comm (info, was warning)" "pcie_fallback warning None info" "$(v fb_lowbw_exp)"
check_eq "explained: fallback comm holds all exposed time -> explains exposed_communication" "pcie_fallback warning 1 info" "$(v fb_exposed_exp)"
check_eq "explained: consequences follow their root" "pcie_fallback exposed_communication low_bus_bandwidth" "$(v fb_order)"
check_eq "explained: explained_share=1.01 -> exposed_communication stands alone" "None None None warning" "$(v fbt_exposed_exp)"
check_eq "explained: same-comm low_bus_bandwidth needs no share" "info" "$(v fbt_lowbw_sev)"
check_eq "explained: others' wait for the straggler explains exposed_communication" "straggler warning True info" "$(v late_t_exp)"
check_eq "explained: straggler keeps warning (the exposed time it explains was a warning)" "warning" "$(v late_t_strag)"
"$CLI" report "$T/fallback" >"$T/fallback_plain.txt" 2>&1
check "explained: text names the root" grep -q "^\[info\] low_bus_bandwidth (explained by pcie_fallback; warning on its own): " "$T/fallback_plain.txt"
# peer_access_disabled
check "peer_access_disabled: staged copies on an NVLink pair" has staged peer_access_disabled
check_eq "peer_access_disabled: evidence has rank and device" "0 0" "$(v staged_rd)"
check "peer_access_disabled: not with peer access" hasnt peer peer_access_disabled
check_eq "copies table: path staged-host / nvlink-p2p" "staged-host nvlink-p2p" "$(v staged_path) $(v peer_path)"
# dropped_records: a process that lost records is named, with its rank and count
"$CLI" report "$T/drops" >"$T/drops_plain.txt" 2>&1
check "dropped_records: a warning naming the process, rank and count" grep -Eq \
	"^\[warning\] dropped_records: Rank 1 \(pid [0-9]+ on [^)]+\) lost 1234 records" "$T/drops_plain.txt"
check "dropped_records: not in a run without drops" bash -c "! '$CLI' report '$T/healthy' | grep -q dropped_records"
# uma_thrashing
check "uma_thrashing: ping-pong migrations" has thrash uma_thrashing
check "uma_thrashing: allocation site symbolized from the ELF symtab" grep -q "an_gen_alloc_site+0x" "$T/thrash.json"
check "uma_thrashing: not for one clean migration" hasnt umonce uma_thrashing
# straggler
check "straggler: late rank found" has late straggler
check_eq "straggler: names rank 1" "1" "$(v late_rank)"
check "straggler: not in healthy run" hasnt healthy straggler
# 0.6 ms late in 10 ms steps: above straggler_min_ms, below straggler_step_share (DDP's usual asymmetry)
check "straggler: not for a rank late by 6% of a step" hasnt slightlate straggler
# two hosts, realtime clocks 3 ms apart: aligned by collective completions, no straggler
check "two hosts with clock offset: no straggler" hasnt hosts straggler
check_eq "two hosts: clock correction found (3.000 ms)" "3.000" "$(v hosts_corr)"
check_eq "two hosts: skew small after alignment" "True" "$(v hosts_skew)"
# hang_suspect
check "hang_suspect: rank killed before the last collective" has kill hang_suspect
check_eq "hang_suspect: missing rank, seq, waited" "1 199 True" "$(v hang)"
check "hang_suspect: killed file read with a warning" grep -q "cut short" "$T/kill.err"
check "hang_suspect: not in healthy run" hasnt healthy hang_suspect
check "hang_suspect: not when the whole job stopped together (others waited 5 ms)" hasnt stopped hang_suspect
# exposed_communication (threshold lowered: also checks --threshold)
check "exposed_communication: collectives after compute, threshold 3%" has exposed_t exposed_communication
check "exposed_communication: healthy overlap stays below 3%" hasnt healthy_t exposed_communication
check "exposed_communication: default threshold 20% not crossed by 4%" hasnt exposed exposed_communication
check "exposed_communication: fallback run (26% exposed) crosses 20%" has fallback exposed_communication
# collection_gaps
check "collection_gaps: no CUPTI -> info finding" has nogpu collection_gaps
check_eq "no GPU data: times marked host" "host host" "$(v nogpu_src)"
check "collection_gaps: none in a complete healthy run" hasnt healthy collection_gaps
# JSON schema: findings with exactly the five keys, and the tables
for s in healthy fallback late kill staged thrash nogpu hosts; do
	check_eq "json schema: $s" "ok" "$(v "schema_$s")"
done

# truncated and corrupt inputs
mkdir -p "$T/bad"
cp "$T/healthy"/*.nvlp "$T/bad/"
f1=$(ls "$T/bad"/*.nvlp | tail -1)
head -c $(($(stat -c %s "$f1") * 2 / 3)) "$f1" >"$T/cut" && mv "$T/cut" "$f1"
printf 'this is not a trace at all' >"$T/bad/zz-corrupt.nvlp"
"$CLI" report "$T/bad" >"$T/bad.out" 2>"$T/bad.err"
check_eq "bad inputs: report still succeeds" "0" "$?"
check "truncated file: warned and used" grep -q "cut short, used up to its end" "$T/bad.err"
check "corrupt file: named and skipped" grep -q "skipping unreadable trace: .*zz-corrupt.nvlp" "$T/bad.err"
check "bad inputs: remaining processes reported" grep -q "2 processes" "$T/bad.out"
mkdir -p "$T/half"
cp "$(ls "$T/healthy"/*.nvlp | head -1)" "$T/half/"
"$CLI" report "$T/half" >"$T/half.out" 2>&1
check "one rank's trace missing: named in collection_gaps" grep -q "missing_traces: comm .* has 2 ranks, traces hold 1 of them" "$T/half.out"
mkdir -p "$T/empty"
"$CLI" report "$T/empty" >/dev/null 2>"$T/empty.err"
check_eq "no input: exit status 2" "2" "$?"
check "no input: clear error" grep -q "nvlp" "$T/empty.err"
"$CLI" report >/dev/null 2>&1
check_eq "no arguments: exit status 2" "2" "$?"
"$CLI" report --help >"$T/help.txt"
check "report --help lists every threshold" bash -c "grep -q exposed_share '$T/help.txt' && grep -q straggler_min_ms '$T/help.txt' && grep -q low_busbw_share '$T/help.txt' && grep -q explained_share '$T/help.txt'"

# goldens: text reports of deterministic jobs (temp paths and the generator's code offset normalised)
# (frame/offset/record counts in the reader's cut-short message depend on zstd, not on the analysis)
norm() { sed -E -e "s#$T#DIR#g" -e "s#$ROOT/##g" -e 's/an_gen\+0x[0-9a-f]+/an_gen+OFF/' -e 's/frame [0-9]+/frame N/g' \
	-e 's/offset [0-9]+/offset N/g' -e 's/read [0-9]+ records/read N records/g' \
	-e 's/^(    truncated: rank [0-9]+: [^:]*): .*/\1: REASON/' -e 's/^(nvlprof: warning: trace cut short, used up to its end: [^:]*): .*/\1: REASON/'; }
for s in healthy fallback late kill thrash drops sweep loop failed launcher; do
	"$CLI" report "$T/$s" 2>&1 | norm >"$T/$s.txt"
	golden_cmp "golden: $s" "$GOLD/$s.txt" "$T/$s.txt"
done

# diff
"$CLI" diff "$T/healthy" "$T/fallback" >"$T/diff.txt"
check "diff: names the fallback as the cause" grep -q "AFTER falls back from NVLink to PCIe/host memory (NCCL_P2P_DISABLE=1): 1.31x slower per step" "$T/diff.txt"
check "diff: env var change listed" grep -Eq "NCCL_P2P_DISABLE +\(unset\) -> 1" "$T/diff.txt"
check "diff: new findings listed" grep -q "new:      pcie_fallback \[critical\]" "$T/diff.txt"
check "diff: consequences listed as info, with their root" grep -q "low_bus_bandwidth \[info, explained by pcie_fallback\]" "$T/diff.txt"
check "diff: only the root is detailed" bash -c "grep -q '    AFTER pcie_fallback' '$T/diff.txt' && ! grep -q '    AFTER low_bus_bandwidth' '$T/diff.txt'"
"$CLI" diff "$T/fallback" "$T/healthy" >"$T/rdiff.txt"
check "diff reversed: speed-up stated, fallback resolved" bash -c "grep -q 'BEFORE fell back to PCIe/host memory (NCCL_P2P_DISABLE=1), AFTER uses NVLink: 1.31x faster' '$T/rdiff.txt' && grep -q 'resolved: pcie_fallback' '$T/rdiff.txt'"
"$CLI" diff --fail-if-slower 10 "$T/healthy" "$T/fallback" >/dev/null
check_eq "diff --fail-if-slower 10: 31% slower -> exit 1" "1" "$?"
"$CLI" diff --fail-if-slower 50 "$T/healthy" "$T/fallback" >/dev/null
check_eq "diff --fail-if-slower 50: within limit -> exit 0" "0" "$?"
"$CLI" diff --fail-if-slower 5 "$T/fallback" "$T/healthy" >/dev/null
check_eq "diff --fail-if-slower: faster AFTER passes" "0" "$?"
check_eq "diff --json: straggler is new, slower" "straggler True" "$(v diff_new)"
check_eq "diff --json: busbw per collective and size class" "True" "$(v diff_bw)"
"$CLI" diff "$T/healthy" >/dev/null 2>&1
check_eq "diff with one input: usage error 2" "2" "$?"

# Real traces are data: every directory of *.nvlp files with an `expect` file (lines "+id": the
# report must have that finding at warning or critical, "-id": must not have it at warning or
# critical (as info, e.g. explained by a root cause, it may); "#" comments) under examples/traces/
# (real 2 x H200 traces) is checked. A report.txt next to it is compared as a golden.
for d in "$ROOT"/examples/traces/*/; do
	[ -f "$d/expect" ] || continue
	name=$(basename "$d")
	"$CLI" report "$d" >"$T/real-$name.txt" 2>"$T/real-$name.err"
	check_eq "real $name: report exit status" "0" "$?"
	found=$(sed -En 's/^\[(warning|critical)\] ([a-z_]+)[: ].*/\2/p' "$T/real-$name.txt" | tr '\n' ' ')
	while read -r line; do
		case "$line" in
		+*) case " $found" in *" ${line#+} "*) pass "real $name: has ${line#+}" ;; *) fail "real $name: lacks ${line#+} (found: $found)" ;; esac ;;
		-*) case " $found" in *" ${line#-} "*) fail "real $name: has ${line#-} (found: $found)" ;; *) pass "real $name: no ${line#-}" ;; esac ;;
		esac
	done <"$d/expect"
	if [ -f "$d/report.txt" ]; then
		norm <"$T/real-$name.txt" >"$T/real-$name.norm"
		golden_cmp "real $name: golden" "$d/report.txt" "$T/real-$name.norm"
	fi
done
if [ -d "$ROOT/examples/traces/ddp_healthy" ] && [ -d "$ROOT/examples/traces/ddp_p2p_disable" ]; then
	"$CLI" diff "$ROOT/examples/traces/ddp_healthy" "$ROOT/examples/traces/ddp_p2p_disable" >"$T/real-diff.txt" 2>/dev/null
	check "real diff: healthy -> NCCL_P2P_DISABLE=1 names the fallback and the slow-down" grep -Eq \
		"AFTER falls back from NVLink to PCIe/host memory \(NCCL_P2P_DISABLE=1\): [0-9.]+x slower per step" "$T/real-diff.txt"
	check "real diff: NCCL's channel count for AllReduce drops (NCCL profiler plugin)" grep -Eq \
		"^  ncclAllReduce +RING/SIMPLE 24ch +-> RING/SIMPLE 4ch$" "$T/real-diff.txt"
	check "real report: NCCL CHOICES of the healthy run" grep -Eq \
		"^  [0-9a-f]{16} ncclAllReduce +RING/SIMPLE +314 +24$" "$T/real-ddp_healthy.txt"
fi
[ "$FAILED" -eq 0 ]

#!/usr/bin/env bash
# test_units.sh: values for people: the text report and the HTML cards print each evidence value in its unit with one formatter (the same string in both), rank lists as ranks, no internal keys on cards; JSON keeps raw numbers with a units map; the NVLink peak says which it is; a single GPU has no topology gap.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
EX="$ROOT/examples/traces"
TR="$ROOT/tests/analyzer/traces"
for f in "$GEN" "$CLI"; do
	[ -x "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
pyq() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# ---- the same value, rendered once, in text and on cards ----
"$CLI" report "$EX/ddp_p2p_disable" >"$T/fb.txt" 2>/dev/null
"$CLI" report --json "$EX/ddp_p2p_disable" >"$T/fb.json" 2>/dev/null
"$CLI" report --html "$T/fb.html" "$EX/ddp_p2p_disable" >/dev/null 2>&1
check "text: PCIe bytes in GiB" grep -q "pcie_bytes_during_collectives=47.5 GiB" "$T/fb.txt"
check "card: the same 47.5 GiB" grep -q "<li>pcie_bytes_during_collectives: 47.5 GiB</li>" "$T/fb.html"
check_eq "JSON: the raw bytes, its unit beside" "True" \
	"$(pyq "$T/fb.json" "[f['evidence']['pcie_bytes_during_collectives'] > 5e10 and f['units']['pcie_bytes_during_collectives'] == 'B' and f['units']['busbw_gbps'] == 'GB/s' for f in d['findings'] if f['id'] == 'pcie_fallback'][0]")"
check_eq "JSON: units only for numbers of the evidence" "True" \
	"$(pyq "$T/fb.json" "all(set(f['units']) <= set(k for k, v in f['evidence'].items() if not isinstance(v, str)) for f in d['findings'])")"
check "cards: no number in exponent form" bash -c "! grep -oE '<li[^>]*>[a-z_0-9]+: [0-9.]+e[+-][0-9]+' '$T/fb.html'"
check "cards: no severity_alone, no explained_by item" bash -c "! grep -qE '<li[^>]*>(severity_alone|explained_by):' '$T/fb.html'"
check "text: severity on its own in the heading" \
	grep -q "^\[info\] low_bus_bandwidth (explained by pcie_fallback; warning on its own): " "$T/fb.txt"
check "text: no severity_alone= item" bash -c "! grep -q 'severity_alone=' '$T/fb.txt'"
# every numeric card value is the text's value (cards and text share an_ev_value)
check_eq "cards and text: the same rendering of every evidence value" "" \
	"$(python3 - "$T/fb.txt" "$T/fb.html" <<'PY'
import html, re, sys
txt = open(sys.argv[1]).read()
cards = re.findall(r'<li[^>]*>([a-z_0-9]+): ([^<]*)</li>', open(sys.argv[2]).read())
for k, v in cards:
    v = html.unescape(v)
    if ('%s=%s' % (k, v)) not in txt and ('%s: %s' % (k, v)) not in txt:
        print('%s: %s' % (k, v))
PY
)"

# ---- rank lists ----
"$CLI" report "$TR/fail_stuck" >"$T/st.txt" 2>/dev/null
check "text: missing_ranks reads as a rank" grep -q "missing_ranks=rank 1  waiting_ranks=rank 0" "$T/st.txt"
check "text: a long wait in seconds, in the title too" \
	bash -c "grep -q 'others waited 69.2 s' '$T/st.txt' && grep -q 'wait_ms=69.2 s' '$T/st.txt'"
"$CLI" report --json "$TR/fail_stuck" >"$T/st.json" 2>/dev/null
check_eq "JSON: missing_ranks stays the comma list, wait_ms the raw ms" "1 ms" \
	"$(pyq "$T/st.json" "[f['evidence']['missing_ranks'] + ' ' + f['units']['wait_ms'] for f in d['findings'] if f['id'] == 'hang_suspect'][0]")"

# ---- the NVLink peak and its basis ----
check "text: COLLECTIVES says which peak %peak uses" \
	grep -q "^  (%peak: busbw of the NVLink peak, 450 GB/s per GPU each way: NVIDIA's spec, 25 GB/s per link each way" "$T/fb.txt"
check_eq "JSON: peak 450 GB/s, its basis beside it (job and findings)" "450 True True" \
	"$(pyq "$T/fb.json" "'%g %s %s' % (d['job']['nvlink_peak_gbps'], d['job']['peak_basis'].startswith(\"NVIDIA's spec\"), all('peak_basis' in f['evidence'] for f in d['findings'] if 'nvlink_peak_gbps' in f['evidence']))")"
check "text: the h mark spelled out" grep -q "a time ending in h, as 1.26h, is host call time (no GPU data), not hours" "$T/fb.txt"

# ---- one GPU: no NVLink peer, no topology gap ----
for t in ddp_ws1_all hf_profiler fail_stuck fail2_healthy; do
	"$CLI" report "$TR/$t" >"$T/$t.txt" 2>/dev/null
	check "one GPU per host ($t): no topology gap" bash -c "! grep -q 'no NVLINK topology records' '$T/$t.txt'"
done
"$GEN" -o "$T/nt1" --ranks 1 --no-topo >/dev/null || fail "an_gen 1 rank"
"$GEN" -o "$T/nt2" --ranks 2 --no-topo >/dev/null || fail "an_gen 2 ranks"
check "generated, one GPU without topology: no gap" bash -c "! '$CLI' report '$T/nt1' 2>/dev/null | grep -q 'no NVLINK topology records'"
check "generated, two GPUs without topology: the gap is told" bash -c "'$CLI' report '$T/nt2' 2>/dev/null | grep -q '^    topology: no NVLINK topology records'"

# ---- diff --html's table of what changed: diff's own rows and numbers (62906.1, not 6.29e+04) ----
"$CLI" diff --html "$T/d.html" "$EX/ddp_healthy" "$EX/ddp_p2p_disable" >/dev/null 2>&1
check "diff --html: nvlink_mib 62906.1 -> 62.1, no exponent form in any cell" \
	bash -c "grep -q '<tr><td><code>nvlink_mib</code></td><td>62906.1</td><td>62.1</td>' '$T/d.html' && ! grep -qE '<td>[0-9.]+e[+-][0-9]' '$T/d.html'"
exit $((FAILED > 0))

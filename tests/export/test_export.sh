#!/usr/bin/env bash
# test_export.sh: nvlprof export (perfetto decoded by protoc, chrome JSON field list, sqlite
# queried) and report/diff --html (headless chromium: no console message, no request), with
# normalised goldens of the shipped traces (make regen-goldens rewrites them).
source "$(dirname "$0")/../lib.sh"
G="$ROOT/tests/export/golden"
CHECK="python3 $ROOT/tests/export/check.py"
PROTO="$ROOT/analyzer/out/perfetto_trace.proto"
TRACES="$ROOT/examples/traces"
mkdir -p "$G"

for tool in protoc sqlite3 chromium python3; do
	command -v $tool >/dev/null || fail "$tool not installed (Debian: protobuf-compiler, sqlite3, chromium, python3; .ci/run installs them)"
done

golden() { golden_cmp "golden $1" "$G/$1" "$2"; } # NAME FILE: FILE equals the golden NAME

# chromium on a page: DOM to $T/dom.html, console messages and page requests counted
chromium_run() {
	rm -rf "$T/ud"; mkdir -p "$T/ud"
	timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$T/ud" --host-resolver-rules='MAP * ~NOTFOUND' \
		--enable-logging=stderr --v=0 --log-net-log="$T/net.json" \
		--dump-dom "file://$1" >"$T/dom.html" 2>"$T/chromium.err"
}

for d in "$TRACES"/*/; do
	n=$(basename "$d")
	# ---- perfetto: decodes against our .proto, tracks and events as expected
	if $CLI export -q -f perfetto -o "$T/$n.pftrace" "$d" 2>"$T/err" &&
		protoc --proto_path="$ROOT/analyzer" --decode=perfetto.protos.Trace "$PROTO" \
			<"$T/$n.pftrace" >"$T/$n.ptxt" 2>"$T/err"; then
		pass "$n perfetto decodes with protoc"
		if $CHECK perfetto "$T/$n.ptxt" >"$T/$n.perfetto" 2>"$T/err"; then
			pass "$n perfetto invariants"
		else fail "$n perfetto invariants: $(head -3 "$T/err")"; fi
		golden "$n.perfetto" "$T/$n.perfetto"
	else fail "$n perfetto export/decode: $(head -3 "$T/err")"; fi
	# ---- chrome: one file per rank (HTA's layout), the Kineto field list
	rm -rf "$T/$n.chrome"
	if $CLI export -q -f chrome -o "$T/$n.chrome/" "$d" 2>"$T/err"; then
		: >"$T/$n.chrome.sum"
		ok=1
		for f in "$T/$n.chrome"/*.json; do
			r=$(basename "$f" .json); r=${r#rank}
			case "$r" in *[!0-9]*) r="" ;; esac
			echo "== $(basename "$f")" >>"$T/$n.chrome.sum"
			$CHECK chrome "$f" $r >>"$T/$n.chrome.sum" 2>"$T/err" || { ok=0; fail "$n chrome $(basename "$f"): $(head -3 "$T/err")"; }
		done
		[ $ok = 1 ] && pass "$n chrome JSON: Kineto/HTA fields"
		golden "$n.chrome" "$T/$n.chrome.sum"
	else fail "$n chrome export: $(head -3 "$T/err")"; fi
	# ---- sqlite: opened with sqlite3, tables, row counts, the documented queries
	if $CLI export -q -f sqlite -o "$T/$n.sqlite" "$d" 2>"$T/err"; then
		{
			for t in RANKS StringIds CUPTI_ACTIVITY_KIND_KERNEL CUPTI_ACTIVITY_KIND_MEMCPY \
				CUPTI_ACTIVITY_KIND_RUNTIME NCCL_CALLS UNIFIED_MEMORY_EVENTS ALLOCATIONS \
				LINK_SAMPLES FINDINGS STEPS; do
				echo "$t $(sqlite3 "$T/$n.sqlite" "SELECT count(*) FROM $t")"
			done
			echo "findings: $(sqlite3 "$T/$n.sqlite" "SELECT group_concat(finding || '/' || severity, ' ') FROM FINDINGS")"
			echo "indexes $(sqlite3 "$T/$n.sqlite" "SELECT count(*) FROM sqlite_master WHERE type='index' AND name NOT LIKE 'sqlite_%'")"
		} >"$T/$n.sql.sum" 2>"$T/err"
		if [ -s "$T/err" ]; then fail "$n sqlite queries: $(head -3 "$T/err")"; else pass "$n sqlite opens and answers"; fi
		golden "$n.sqlite" "$T/$n.sql.sum"
		# the same kernels in every format
		k_sql=$(sqlite3 "$T/$n.sqlite" "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
		k_pf=$(grep -c '^events begin:\(nccl_\)\?kernel:' "$T/$n.perfetto" 2>/dev/null)
		k_pf=$(awk '/^events begin:(nccl_)?kernel:/{s+=$3} END{print s+0}' "$T/$n.perfetto")
		k_js=$(awk '/^cat kernel:X/{s+=$3} END{print s+0}' "$T/$n.chrome.sum")
		check_eq "$n kernels: sqlite = perfetto" "$k_sql" "$k_pf"
		check_eq "$n kernels: sqlite = chrome" "$k_sql" "$k_js"
		# NCCL calls the analyzer matched to a kernel: flows in perfetto = kernels pointing at a call
		m_sql=$(sqlite3 "$T/$n.sqlite" "SELECT count(DISTINCT ncclCallId) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE ncclCallId IS NOT NULL")
		m_cpu=$(sqlite3 "$T/$n.sqlite" "SELECT count(*) FROM NCCL_CALLS WHERE gpuStart IS NOT NULL")
		[ "$m_sql" -le "$m_cpu" ] && pass "$n sqlite: kernel->call links ($m_sql) within matched calls ($m_cpu)" || fail "$n sqlite kernel->call links $m_sql > $m_cpu"
	else fail "$n sqlite export: $(head -3 "$T/err")"; fi
	# ---- html: self-contained, < 2 MB, renders in chromium with no console message or request
	if $CLI report --html "$T/$n.html" "$d" 2>"$T/err"; then
		sz=$(stat -c %s "$T/$n.html")
		[ "$sz" -lt 2000000 ] && pass "$n html size $sz < 2 MB" || fail "$n html size $sz >= 2 MB"
		$CHECK html "$T/$n.html" >"$T/$n.html.sum" 2>"$T/err" && pass "$n html self-contained" || fail "$n html: $(head -3 "$T/err")"
		golden "$n.html" "$T/$n.html.sum"
		if chromium_run "$T/$n.html"; then
			grep -q 'CONSOLE' "$T/chromium.err" && fail "$n html: console message: $(grep CONSOLE "$T/chromium.err" | head -2)" || pass "$n html: no console message"
			$CHECK netlog "$T/net.json" >/dev/null 2>"$T/err" && pass "$n html: no network request" || fail "$n html: $(head -2 "$T/err")"
			# the rendered DOM has the findings and plots of the file
			$CHECK html "$T/dom.html" >"$T/dom.sum" 2>/dev/null
			check_eq "$n html: chromium DOM has the findings and plots" "$(grep -v '^svg' "$T/$n.html.sum")" "$(grep -v '^svg' "$T/dom.sum")"
		else fail "$n html: chromium failed: $(tail -2 "$T/chromium.err")"; fi
	else fail "$n html report: $(head -3 "$T/err")"; fi
done

# ---- the example queries of docs/EXPORTS.md run and answer
python3 - "$ROOT/docs/EXPORTS.md" "$T" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
for i, q in enumerate(re.findall(r"```sql\n(.*?)```", t, re.S)):
    open("%s/q%d.sql" % (sys.argv[2], i), "w").write(q)
PY
nq=0
for q in "$T"/q*.sql; do
	nq=$((nq + 1))
	for n in ddp_p2p_disable uma_thrash ddp_straggler; do
		rows=$(sqlite3 "$T/$n.sqlite" <"$q" 2>"$T/err" | wc -l)
		[ -s "$T/err" ] && fail "EXPORTS.md query $(basename "$q") on $n: $(head -2 "$T/err")"
		echo "$n $(basename "$q") $rows" >>"$T/qrows"
	done
done
[ "$nq" -ge 4 ] && pass "EXPORTS.md has $nq example queries" || fail "EXPORTS.md: $nq queries"
grep -q '^ddp_p2p_disable q0.sql [1-9]' "$T/qrows" && pass "query: top exposed collectives answers" || fail "query q0 no rows"
grep -q '^ddp_p2p_disable q1.sql [1-9]' "$T/qrows" && pass "query: bytes per link answers" || fail "query q1 no rows"
grep -q '^uma_thrash q2.sql [1-9]' "$T/qrows" && pass "query: migrations of one allocation answers" || fail "query q2 no rows"
grep -q '^ddp_straggler q3.sql 2' "$T/qrows" && pass "query: skew of one collective, both ranks" || fail "query q3: $(grep q3 "$T/qrows")"
[ "$(sqlite3 "$T/ddp_p2p_disable.sqlite" <"$T/q1.sql" | awk -F'|' '$4 > 10 && $3 < 1' | wc -l)" = 2 ] &&
	pass "query: the P2P-disabled run moved its bytes over PCIe, not NVLink" || fail "bytes per link: $(sqlite3 "$T/ddp_p2p_disable.sqlite" <"$T/q1.sql")"

# ---- names people query (issue 28): nsys' shortName/demangledName/mangledName, Kineto's M events
for n in ddp_healthy ddp_straggler ddp_p2p_disable ddp_killed; do
	got=$(sqlite3 "$T/$n.sqlite" "SELECT s.value || '|' || count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'nccl%' GROUP BY s.value ORDER BY count(*) DESC LIMIT 1")
	case "$got" in ncclDevKernel_AllReduce_Sum_f32_RING_LL\|[1-9]*) pass "$n: shortName LIKE 'nccl%': $got" ;; *) fail "$n: shortName LIKE 'nccl%': '$got'" ;; esac
done
check_eq "ddp_healthy: an NCCL kernel's demangledName and mangledName" \
	"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)|_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE" \
	"$(sqlite3 "$T/ddp_healthy.sqlite" "SELECT DISTINCT d.value || '|' || m.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON d.id = k.demangledName JOIN StringIds m ON m.id = k.mangledName JOIN StringIds s ON s.id = k.shortName WHERE s.value = 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'")"
check_eq "ddp_healthy: a templated kernel's shortName is its function's name" vectorized_elementwise_kernel \
	"$(sqlite3 "$T/ddp_healthy.sqlite" "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName JOIN StringIds m ON m.id = k.mangledName WHERE m.value LIKE '_ZN2at6native29vectorized_elementwise_kernel%' LIMIT 1")"
check_eq "ddp_healthy: a name that is not mangled kept in all three" 1 \
	"$(sqlite3 "$T/ddp_healthy.sqlite" "SELECT count(DISTINCT k.shortName) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.mangledName WHERE s.value LIKE 'sm80_xmma_gemm%' AND k.shortName = k.demangledName AND k.shortName = k.mangledName")"
check_eq "no kernel left with a mangled shortName or demangledName" 0 \
	"$(for n in ddp_healthy uma_thrash; do sqlite3 "$T/$n.sqlite" "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id IN (k.shortName, k.demangledName) WHERE s.value LIKE '\_Z%' ESCAPE '\\'"; done | awk '{t += $1} END {print t}')"
check_eq "uma_thrash: _Z3addPimi is add(int*, unsigned long, int) / add" "add(int*, unsigned long, int)|add" \
	"$(sqlite3 "$T/uma_thrash.sqlite" "SELECT DISTINCT d.value || '|' || s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName")"
if python3 - "$T/ddp_healthy.chrome" >"$T/meta.out" 2>&1 <<'PYEOF'
import json, os, sys
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    j = json.load(open(os.path.join(d, f)))
    ev = j["traceEvents"]
    meta = {(e["name"], e["pid"], e.get("tid")) for e in ev if e["ph"] == "M"}
    pids = {e["pid"] for e in ev if e["ph"] != "M"}
    threads = {(e["pid"], e["tid"]) for e in ev if e["ph"] in ("X", "C", "i", "s", "f")}
    for p in pids:
        for w in ("process_name", "process_sort_index"):
            assert (w, p, 0) in meta, (f, w, p)
    for p, t in threads:
        for w in ("thread_name", "thread_sort_index"):
            assert (w, p, t) in meta, (f, w, p, t)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    k = [e for e in ev if e.get("cat") == "kernel"]
    assert all(names[(e["pid"], e["tid"])] == "stream %d" % e["args"]["stream"] for e in k), f
    nccl = {e["name"] for e in k if "nccl" in e["name"]}
    assert "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)" in nccl, (f, nccl)
    assert not [e["name"] for e in k if e["name"].startswith("_Z")], f
    dp = j["deviceProperties"]
    assert dp and all(x["name"] == "NVIDIA H200" and x["computeMajor"] == 9 and x["numSms"] == 132
                      and x["totalGlobalMem"] > 0 for x in dp), dp
    print("%s: %d M events, %d threads and streams, %d devices, %d NCCL kernel names" % (f, len(meta), len(threads), len(dp), len(nccl)))
PYEOF
then pass "ddp_healthy chrome: M events for every process/thread/stream, deviceProperties, demangled kernels: $(tr '\n' ' ' <"$T/meta.out")"
else fail "ddp_healthy chrome metadata: $(tail -3 "$T/meta.out")"; fi

# ---- expected content, beyond the goldens: read in what this run produced (a missing file fails)
grep -q '^finding r straggler' "$T/ddp_straggler.html.sum" && grep -q '^plot r skew' "$T/ddp_straggler.html.sum" &&
	pass "straggler report: finding with its heatmap" || fail "straggler report lacks its heatmap"
grep -q '^plot r hang' "$T/ddp_killed.html.sum" && pass "killed report: hang plot" || fail "killed report: no hang plot"
grep -q '^plot r um' "$T/uma_thrash.html.sum" && pass "uma report: migrations plot" || fail "uma report: no UM plot"
grep -q 'class="al strag"[^>]*>rank 1: MISSING' "$T/ddp_killed.html" && pass "killed report names rank 1 missing" || fail "killed report: rank 1 not shown missing"
grep -q 'finding pcie_fallback@' "$T/ddp_p2p_disable.perfetto" && pass "perfetto: findings as instants" || fail "perfetto: no finding instant"
grep -q '^tracks counter:GPU N NVLink GB/s' "$T/ddp_p2p_disable.perfetto" && grep -q '^tracks counter:UM migration' "$T/uma_thrash.perfetto" &&
	pass "perfetto: link and UM counter tracks" || fail "perfetto: counter tracks missing"
grep -q '^Step [1-9]' "$T/ddp_healthy.chrome.sum" && pass "chrome: Step#N" || fail "chrome: no Step#N"

# ---- the checks can fail: a page with a script error and a remote image is caught
printf '<!DOCTYPE html><html><body><img src="http://nvlprof-test.invalid/x.png"><script>console.error("x")</script></body></html>\n' >"$T/bad.html"
chromium_run "$T/bad.html"
grep -q CONSOLE "$T/chromium.err" && pass "control: a console error is seen" || fail "control: console error not seen"
$CHECK netlog "$T/net.json" >/dev/null 2>&1 && fail "control: request not seen" || pass "control: a page request is seen"
$CHECK html "$T/bad.html" >/dev/null 2>&1 && fail "control: script not flagged" || pass "control: script and external src flagged"

# ---- diff --html: both runs side by side
if $CLI diff --html "$T/diff.html" "$TRACES/ddp_healthy" "$TRACES/ddp_p2p_disable" 2>"$T/err"; then
	$CHECK html "$T/diff.html" >"$T/diff.sum" 2>"$T/err" && pass "diff html self-contained" || fail "diff html: $(head -3 "$T/err")"
	grep -q 'id="before"' "$T/diff.html" && grep -q 'id="after"' "$T/diff.html" && grep -q 'id="summary"' "$T/diff.html" &&
		pass "diff html: both runs and the summary" || fail "diff html: sides missing"
	grep -q '^finding a pcie_fallback' "$T/diff.sum" && ! grep -q '^finding b pcie_fallback' "$T/diff.sum" &&
		pass "diff html: the fallback only on the after side" || fail "diff html: fallback side wrong"
	golden "diff_healthy_p2p.html" "$T/diff.sum"
	chromium_run "$T/diff.html" && ! grep -q CONSOLE "$T/chromium.err" && $CHECK netlog "$T/net.json" >/dev/null 2>&1 &&
		pass "diff html renders with no console message or request" || fail "diff html in chromium"
else fail "diff --html: $(head -3 "$T/err")"; fi

# ---- bad input: one-line errors
$CLI export -f nope "$TRACES/ddp_healthy" >/dev/null 2>"$T/err"; check_eq "unknown format: exit 2" 2 $?
grep -q 'format' "$T/err" && pass "unknown format named" || fail "unknown format: $(cat "$T/err")"
$CLI export -f perfetto -o /nonexistent/dir/x.pftrace "$TRACES/ddp_healthy" 2>"$T/err"; check_eq "unwritable output: exit 2" 2 $?
grep -q '/nonexistent/dir/x.pftrace' "$T/err" && pass "unwritable output named" || fail "unwritable: $(cat "$T/err")"
head -c 30000 "$TRACES/ddp_healthy/vm-754.nvlp" >"$T/cut.nvlp"
$CLI export -q -f perfetto -o "$T/cut.pftrace" "$T/cut.nvlp" 2>"$T/err" &&
	protoc --proto_path="$ROOT/analyzer" --decode=perfetto.protos.Trace "$PROTO" <"$T/cut.pftrace" >/dev/null &&
	pass "truncated trace: exported up to its end" || fail "truncated trace: $(head -2 "$T/err")"
$CLI report --html "$T/x.html" --json "$TRACES/ddp_healthy" 2>"$T/err"; check_eq "--html with --json: exit 2" 2 $?
$CLI export -f sqlite -o - "$TRACES/ddp_healthy" >/dev/null 2>"$T/err"; check_eq "sqlite to stdout: exit 2" 2 $?
grep -q 'sqlite needs a file' "$T/err" && pass "sqlite to stdout: said why" || fail "sqlite to stdout: $(cat "$T/err")"
$CLI report --html "$T/x.html" --help >"$T/out" 2>&1; check_eq "report --html --help: exit 0" 0 $?
$CLI export -f perfetto -o - "$TRACES/p2p_staged" 2>/dev/null | protoc --proto_path="$ROOT/analyzer" --decode=perfetto.protos.Trace "$PROTO" >/dev/null 2>&1 &&
	pass "perfetto to stdout decodes" || fail "perfetto to stdout"
# two traces that claim one rank (a run copied next to itself): two files, the same bytes every time
mkdir -p "$T/dup" && cp "$TRACES/ddp_healthy/vm-754.nvlp" "$T/dup/a.nvlp" && cp "$TRACES/ddp_healthy/vm-754.nvlp" "$T/dup/b.nvlp"
for k in 1 2 3; do
	rm -rf "$T/dup$k" && $CLI export -q -f chrome -o "$T/dup$k/" "$T/dup" 2>"$T/dup$k.err"
done
check_eq "one rank claimed twice: a file per trace" 2 "$(ls "$T/dup1" | wc -l)"
grep -q 'both rank 0: the second is written as .*rank0\.1\.json' "$T/dup1.err" && pass "one rank claimed twice: said once" ||
	fail "one rank claimed twice: $(cat "$T/dup1.err")"
diff -r "$T/dup1" "$T/dup2" >/dev/null && diff -r "$T/dup1" "$T/dup3" >/dev/null && pass "one rank claimed twice: same files in 3 runs" ||
	fail "one rank claimed twice: output differs between runs"
# a device or FIFO given as the sqlite output is refused, not unlinked and replaced (as root,
# -o /dev/null removed /dev/null); a FIFO stands in for the device here
mkfifo "$T/fifo"
$CLI export -f sqlite -o "$T/fifo" "$TRACES/ddp_healthy" 2>"$T/err"; check_eq "sqlite into a FIFO: exit 2" 2 $?
test -p "$T/fifo" && grep -q "$T/fifo: not a regular file" "$T/err" && pass "sqlite into a FIFO: refused, the FIFO kept" ||
	fail "sqlite into a FIFO: $(cat "$T/err"; ls -l "$T/fifo")"
exit 0

#!/usr/bin/env bash
# test_pages.sh: every HTML page (report --html of each shipped trace and of four test traces,
# diff --html) rendered by headless Chromium: a screenshot is written and shows a page, and nothing
# overflows the page's column (script-free: the screenshot's side margins are all background,
# png_edges.py); a page wider than the page is caught (control). Without chromium: SKIP.
# Screenshots are kept under $NVLP_SHOTS when set (to look at them).
source "$(dirname "$0")/../lib.sh"
TRACES="$ROOT/examples/traces"
EDGES="python3 $ROOT/tests/export/png_edges.py"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
	skip "html pages: no chromium here (apt-get install chromium)"
	exit 0
fi
# shot PAGE PNG: a 1400 x 2000 screenshot of PAGE
shot() {
	local prof
	prof=$(mktemp -d "$T/prof.XXXXXX")
	timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
		--disable-component-update --disable-sync --no-first-run --user-data-dir="$prof" \
		--screenshot="$2" --window-size=1400,2000 "file://$1" >"$T/chromium.out" 2>&1
}
# page NAME HTML: rendered, shows something, nothing wider than the page
page() {
	local n=$1 png="$T/$1.png"
	rm -f "$png"
	if ! shot "$2" "$png" || [ ! -s "$png" ]; then
		fail "$n: chromium wrote no screenshot: $(tail -2 "$T/chromium.out")"
		return
	fi
	if $EDGES "$png" >"$T/edges" 2>&1; then
		pass "$n: nothing overflows the page"
	else
		fail "$n: $(tail -1 "$T/edges")"
	fi
	read -r w h ink <"$T/edges"
	[ "$w" = 1400 ] && [ "$h" = 2000 ] && [ "${ink:-0}" -gt 2000 ] &&
		pass "$n: rendered ($w x $h, a page shown)" || fail "$n: rendered as '$(head -1 "$T/edges")'"
	[ -n "${NVLP_SHOTS:-}" ] && mkdir -p "$NVLP_SHOTS" && cp "$png" "$NVLP_SHOTS/"
}
for d in "$TRACES"/*/; do
	n=$(basename "$d")
	if $CLI report --html "$T/$n.html" "$d" 2>"$T/err"; then
		page "$n" "$T/$n.html"
		grep -Pzq '</h2>\s*(</section>|<h2[ >])|</h3>\s*(</section>|<h[23][ >])' "$T/$n.html" && fail "$n: a heading with nothing under it" ||
			pass "$n: no empty heading"
	else fail "$n: report --html: $(head -2 "$T/err")"; fi
done
# a few test traces: a hang with no steps, a real HF job, one GPU, a job of shared traces
for n in fail2_stuck hf_profiler ddp_ws1_all share_hf; do
	d="$ROOT/tests/analyzer/traces/$n"
	[ -d "$d" ] || { skip "$n: no such test trace"; continue; }
	if $CLI report --html "$T/$n.html" "$d" 2>"$T/err"; then page "$n" "$T/$n.html"
	else fail "$n: report --html: $(head -2 "$T/err")"; fi
done
# a job of 2,048 ranks: the heatmap's rows merged into bands past heatmap_rows (an SVG of its own
# size, not one row per rank), rendered as any page
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if "$PROGS/an_gen" -o "$T/large" --ranks 2048 --hosts 256 --comms host --late-rank 1234 --late-ms 5 \
	--no-links >/dev/null 2>&1 && $CLI report --html "$T/large.html" "$T/large" 2>"$T/err"; then
	page large_2048 "$T/large.html"
	grep -q 'p90-p100: 2[0-9][0-9] ranks' "$T/large.html" && pass "large_2048: the heatmap has band rows" ||
		fail "large_2048: no band row in the heatmap"
else fail "large_2048: an_gen or report --html: $(head -2 "$T/err")"; fi
if $CLI diff --html "$T/diff.html" "$TRACES/ddp_healthy" "$TRACES/ddp_p2p_disable" 2>"$T/err"; then
	page diff_healthy_p2p "$T/diff.html"
	v=$($CLI diff "$TRACES/ddp_healthy" "$TRACES/ddp_p2p_disable" | grep '^VERDICT')
	first=$(grep -o '<p class="verdict"[^>]*>[^<]*' "$T/diff.html" | sed 's/<[^>]*>//' |
		python3 -c 'import html, sys; print(html.unescape(sys.stdin.read()), end="")')
	check_eq "diff html: the verdict first, diff's own line" "$v" "$first"
	[ "$(grep -n 'class="verdict"' "$T/diff.html" | cut -d: -f1)" -lt "$(grep -n 'id="before"' "$T/diff.html" | cut -d: -f1)" ] &&
		pass "diff html: the verdict above both sides" || fail "diff html: the verdict not first"
else fail "diff --html: $(head -2 "$T/err")"; fi
# control: a page with a line wider than the page (no wrap, no scroll box) must fail the check
{
	printf '<!DOCTYPE html><html><head><style>body{max-width:1100px;margin:0 auto;padding:16px 20px}</style></head><body><p style="white-space:nowrap">'
	for i in $(seq 200); do printf 'low_bus_bandwidth '; done
	printf '</p></body></html>\n'
} >"$T/wide.html"
if shot "$T/wide.html" "$T/wide.png" && [ -s "$T/wide.png" ]; then
	$EDGES "$T/wide.png" >/dev/null 2>&1 && fail "control: a too-wide page passes the overflow check" ||
		pass "control: a too-wide page is caught"
else fail "control: chromium wrote no screenshot"; fi
exit 0

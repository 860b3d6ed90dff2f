#!/usr/bin/env bash
# test_summary.sh: one summary model: on every shipped trace (examples/traces/*) and test trace
# (tests/analyzer/traces/*), the steps, step length, communication and exposure per rank and the
# RANKS rows are the same numbers in the text report, its JSON, its HTML page, diff's figures and
# diff's HTML page (summary_cmp.py).
source "$(dirname "$0")/../lib.sh"
for d in "$ROOT"/examples/traces/*/ "$ROOT"/tests/analyzer/traces/*/; do
	n=$(basename "$(dirname "$d")")/$(basename "$d")
	if ! $CLI report "$d" >"$T/r.txt" 2>/dev/null; then
		skip "$n: not a job the report reads (its own suite checks it)"
		continue
	fi
	$CLI report --json "$d" >"$T/r.json" 2>/dev/null &&
		$CLI report --html "$T/r.html" "$d" 2>/dev/null &&
		$CLI diff --json "$d" "$d" >"$T/d.json" 2>/dev/null &&
		$CLI diff --html "$T/d.html" "$d" "$d" 2>/dev/null
	rc=$?
	# diff exits 1 only for --fail-if-slower: any status but 0 here is an error
	[ $rc = 0 ] || { fail "$n: json/html/diff failed ($rc)"; continue; }
	python3 "$ROOT/tests/analyzer/summary_cmp.py" "$T/r.txt" "$T/r.json" "$T/r.html" "$T/d.json" "$n" "$T/d.html"
done
exit 0

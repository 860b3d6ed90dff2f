#!/usr/bin/env bash
# test_link_coarse.sh: the findings of real jobs do not change when their link counters were read
# every 100 ms instead of every 1-10 ms (the NVML fallback's period since run 7 of MEASUREMENTS.md;
# a sample that overlaps a collective counts whole, model/gpu.c, so coarser samples count more
# bytes "during collectives"). Every job in examples/traces and tests/analyzer/traces with link
# samples (healthy runs, the PCIe fallback, staged peer copies, thrashing, and every failure of the
# post-mortem work) is copied with its samples merged into 100 ms windows (tests/progs/link_coarse);
# each finding's name and severity must be the same, in the same order.
source "$(dirname "$0")/../lib.sh"
COARSE="$PROGS/link_coarse"
for f in "$CLI" "$COARSE"; do
	[ -x "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
findings() { "$CLI" report "$1" 2>/dev/null | grep -E '^\[(critical|warning|info)\] [a-z_]+' -o; }
jobs=0 same=0 copied=0 longest=0 shortest=0 differ="" fallback=0
for d in "$ROOT"/examples/traces/*/ "$ROOT"/tests/analyzer/traces/*/; do
	d=${d%/}
	n=$(basename "$d")
	"$CLI" dump "$d" 2>/dev/null | grep -q '^linksample ' || continue
	jobs=$((jobs + 1))
	copied=$((copied + $(copy_traces "$d" "$COARSE" 100)))
	a=$(findings "$d") b=$(findings "$T/$n")
	[ "$a" = "$b" ] && same=$((same + 1)) || differ="$differ $n"
	case "$a" in *pcie_fallback*) fallback=$((fallback + 1)) ;; esac
done
# the copies' samples: most 100 ms long (a GPU's last one, and those around a pause, shorter)
read -r n100 nall < <(for d in "$T"/*/; do "$CLI" dump "$d" 2>/dev/null; done | awk '$1 == "linksample" {
	for (i = 2; i <= NF; i++) if ($i ~ /^dur=/) { d = substr($i, 5) + 0; a++; if (d >= 90e6 && d <= 110e6) c++ } }
	END { print c + 0, a + 0 }')
check "real jobs with link samples ($jobs), each file copied ($copied)" test "$jobs" -ge 30 -a "$copied" -ge "$jobs"
check "a job with the PCIe fallback finding among them ($fallback)" test "$fallback" -ge 1
check "the copies' samples are ~100 ms ($n100 of $nall within 90-110 ms)" test "$nall" -gt 0 -a $((2 * n100)) -ge "$nall"
check_eq "every job's findings equal its 100-ms copy's${differ:+ (differ:$differ)}" "$jobs" "$same"
for x in $differ; do
	for base in "$ROOT/examples/traces" "$ROOT/tests/analyzer/traces"; do
		[ -d "$base/$x" ] && diff <(findings "$base/$x") <(findings "$T/$x") | head -6 | sed 's/^/    /'
	done
done
exit $((FAILED > 0))

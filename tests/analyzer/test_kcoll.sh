#!/usr/bin/env bash
# test_kcoll.sh: real traces read the same with their kernel channels folded per collective. Every
# job in tests/analyzer/traces whose traces hold per-channel KCH records (real NCCL 2.28 on one
# H200: healthy runs and every failure of the post-mortem work) is copied with each collective's
# channels folded into one KCOLL record as the shim writes them since format 2.1
# (tests/progs/kcoll_fold); `report` and `report --json` of the copy must equal the original's but
# for what the copy changes (its record counts, and where a cut-short file ends): GPU times, waits,
# findings, the post-mortem's story, dropped channels (share_failed has two), all alike.
source "$(dirname "$0")/../lib.sh"
FOLD="$PROGS/kcoll_fold"
for f in "$CLI" "$FOLD"; do
	[ -x "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
# norm FILE DIR: the report with DIR, record counts and a cut file's end offset made neutral
norm() {
	sed -E -e "s#$2#DIR#g" -e 's/offset [0-9]+\)/offset N)/g' -e 's/read [0-9]+ records/read N records/g' \
		-e 's/"records": [0-9]+/"records": N/g' "$1"
}
jobs=0 same=0 folded=0 kcoll=0 kch_left=0 differ=""
for d in "$ROOT"/tests/analyzer/traces/*/; do
	d=${d%/}
	n=$(basename "$d")
	"$CLI" dump "$d" 2>/dev/null | grep -q '^kch ' || continue
	jobs=$((jobs + 1))
	folded=$((folded + $(copy_traces "$d" "$FOLD")))
	k=$("$CLI" dump "$T/$n" 2>/dev/null | awk '$1 == "kcoll" {c++} $1 == "kch" {k++} END {print c + 0, k + 0}')
	kcoll=$((kcoll + ${k% *}))
	kch_left=$((kch_left + ${k#* }))
	ok=1
	for fmt in text --json; do
		a=() && [ $fmt = --json ] && a=(--json)
		"$CLI" report "${a[@]}" "$d" >"$T/$n.a" 2>&1
		"$CLI" report "${a[@]}" "$T/$n" >"$T/$n.b" 2>&1
		cmp -s <(norm "$T/$n.a" "$d") <(norm "$T/$n.b" "$T/$n") || { ok=0; differ="$differ $n($fmt)"; }
	done
	[ $ok = 1 ] && same=$((same + 1))
done
check "real jobs with per-channel records ($jobs), each file folded ($folded)" test "$jobs" -ge 20 -a "$folded" -ge $((2 * jobs))
check "the copies hold KCOLL records ($kcoll) and no KCH ($kch_left)" test "$kcoll" -gt 0 -a "$kch_left" -eq 0
check_eq "report and report --json of every job equal its folded copy's${differ:+ (differ:$differ)}" "$jobs" "$same"
for x in $differ; do
	x=${x%(*}
	diff <(norm "$T/$x.a" "$ROOT/tests/analyzer/traces/$x") <(norm "$T/$x.b" "$T/$x") | head -8 | sed 's/^/    /'
done
exit $((FAILED > 0))

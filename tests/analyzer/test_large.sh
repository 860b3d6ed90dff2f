#!/usr/bin/env bash
# test_large.sh: reports of generated jobs of many ranks (2,048 on 256 hosts): RANKS keeps the ranks
# that matter (the straggler, a dead rank) and gives the others' distribution, --all-ranks and the
# ranks_shown threshold print every rank, jobs at the threshold print as before; the page stays
# small (merged heatmap rows, the rank table as RANKS) and JSON keeps every rank; the arrival skew
# is given per communicator kind, the world one equal to the injected 5 ms lateness.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
if [ ! -x "$GEN" ] || [ ! -x "$CLI" ]; then
	fail "analyzer test programs built ($GEN, $CLI)"
	exit 1
fi
# one trace file per rank, all open while an_gen writes them
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)"
gen() { local n=$1; shift; "$GEN" -o "$T/$n" "$@" >/dev/null 2>&1 || fail "an_gen $n $*"; }
gen big --ranks 2048 --hosts 256 --comms host --late-rank 1234 --late-ms 5 --no-links
gen dead --ranks 2048 --hosts 256 --kill-rank 700
gen hosts16 --ranks 512 --hosts 16 --comms host --late-rank 77 --late-ms 5 --no-links
gen r32 --ranks 32 --hosts 4 --late-rank 5 --late-ms 5
gen r33 --ranks 33 --hosts 5 --late-rank 5 --late-ms 5
gen small2 --ranks 16 --hosts 2 --comms host --late-rank 3 --late-ms 5
rep() { local n=$1; shift; "$CLI" report "$@" >"$T/$n.txt" 2>"$T/$n.err" || fail "report $n: $(head -2 "$T/$n.err")"; }
rep big "$T/big"
rep big_all "$T/big" --all-ranks
rep big_th "$T/big" -t ranks_shown=4096
rep dead "$T/dead"
rep r32 "$T/r32"
rep r32_all "$T/r32" --all-ranks
rep r33 "$T/r33"
rep small2 "$T/small2"
"$CLI" report --json "$T/big" >"$T/big.json" 2>/dev/null || fail "report --json big"
"$CLI" report --json "$T/small2" >"$T/small2.json" 2>/dev/null || fail "report --json small2"

# RANKS rows: the lines between the column header and the first line that is not a rank row
rows() { sed -n '/^RANKS/,/^  (comm ms/p' "$1" | grep -cE '^ +[0-9]+ [^ ]+ +[0-9]+ '; }
row_of() { sed -n '/^RANKS/,/^  (comm ms/p' "$1" | grep -E "^ +$2 "; }
head_big=$(grep '^RANKS' "$T/big.txt")
n=$(echo "$head_big" | sed -n 's/^RANKS (2048 ranks: the \([0-9]*\) that matter.*/\1/p')
[ -n "$n" ] && [ "$n" -le 64 ] && pass "big: RANKS keeps $n of 2048 ranks ($head_big)" ||
	fail "big: RANKS heading '$head_big'"
check_eq "big: as many rows as it says" "$n" "$(rows "$T/big.txt")"
row_of "$T/big.txt" 1234 | grep -q 'straggler' && pass "big: the straggler's row, named" ||
	fail "big: no straggler row: $(row_of "$T/big.txt" 1234)"
rest=$(sed -n 's/^  the other \([0-9]*\) ranks (min, p50, p90, max of each column):$/\1/p' "$T/big.txt")
check_eq "big: the distribution counts the others" "$((2048 - ${n:-0}))" "$rest"
check_eq "big: min, p50, p90, max lines" "min p50 p90 max" \
	"$(sed -n '/^  the other/,/^  (comm ms/p' "$T/big.txt" | awk '$1 ~ /^(min|p50|p90|max)$/ {printf "%s%s", s, $1; s=" "}')"
# the distribution's p50 of last% is small, the straggler's own is 100: it is not in the rest
max_last=$(sed -n '/^  the other/,/^  (comm ms/p' "$T/big.txt" | awk '$1 == "max" {print $6}')
[ -n "$max_last" ] && [ "$max_last" -lt 50 ] && pass "big: the others' max last% ($max_last) excludes the straggler" ||
	fail "big: the others' max last% '$max_last'"
check_eq "big --all-ranks: every rank" 2048 "$(rows "$T/big_all.txt")"
check_eq "big --all-ranks: RANKS as a small job's" "RANKS" "$(grep '^RANKS' "$T/big_all.txt")"
check_eq "big -t ranks_shown=4096: every rank" 2048 "$(rows "$T/big_th.txt")"
row_of "$T/dead.txt" 700 | grep -q 'cut short.*hang_suspect' && pass "dead: the dead rank's row, cut short, named by the hang" ||
	fail "dead: rank 700's row: $(row_of "$T/dead.txt" 700)"
# LINKS: the GPUs of RANKS' rows (a rank killed early has no link samples, no LINKS row)
sed -n '/^RANKS/,/^  (comm ms/p' "$T/dead.txt" | awk '$1 ~ /^[0-9]+$/ && NF > 8 {print $1}' | sort >"$T/dead.ranks"
sed -n '/^LINKS/,/^$/p' "$T/dead.txt" | awk '$1 ~ /^[0-9]+$/ {print $1}' | sort >"$T/dead.links"
[ -s "$T/dead.links" ] && [ -z "$(comm -13 "$T/dead.ranks" "$T/dead.links")" ] &&
	pass "dead: LINKS shows $(wc -l <"$T/dead.links") GPUs, all of RANKS' rows" ||
	fail "dead: LINKS rows not RANKS': $(comm -13 "$T/dead.ranks" "$T/dead.links" | head -3 | tr '\n' ' ')"
# at the threshold nothing changes: the same report with or without --all-ranks
check_eq "r32: every rank" 32 "$(rows "$T/r32.txt")"
cmp -s "$T/r32.txt" "$T/r32_all.txt" && pass "r32: at ranks_shown the report is --all-ranks'" ||
	fail "r32: differs from --all-ranks"
grep -q '^RANKS (33 ranks: the [0-9]* that matter' "$T/r33.txt" && pass "r33: one past the threshold, the ranks that matter" ||
	fail "r33: $(grep '^RANKS' "$T/r33.txt")"

# the headline skew per communicator kind: the world one is the injected 5 ms, never averaged with
# the per-host ones (about 0.03 ms each on the 255 hosts without the late rank)
skew_line=$(grep 'collectives matched across ranks' "$T/big.txt")
w=$(echo "$skew_line" | sed -n 's/.* world (1 communicator of 2048 ranks) mean \([0-9.]*\) ms.*/\1/p')
h=$(echo "$skew_line" | sed -n 's/.* per host (256 communicators of 8 ranks) mean \([0-9.]*\) ms.*/\1/p')
awk -v w="${w:-0}" 'BEGIN { exit !(w > 4.9 && w < 5.1) }' && pass "big: world skew $w ms (5 ms injected)" ||
	fail "big: world skew in '$skew_line'"
awk -v h="${h:-9}" 'BEGIN { exit !(h < 0.5) }' && pass "big: per-host skew $h ms, apart" ||
	fail "big: per-host skew in '$skew_line'"
w16=$(grep 'collectives matched' "$T/small2.txt" | sed -n 's/.* world (1 communicator of 16 ranks) mean \([0-9.]*\) ms.*/\1/p')
awk -v w="${w16:-0}" 'BEGIN { exit !(w > 4.9 && w < 5.1) }' && pass "small2: world skew $w16 ms at 16 ranks too" ||
	fail "small2: $(grep 'collectives matched' "$T/small2.txt")"
python3 - "$T/big.json" "$T/small2.json" >"$T/json.out" 2>&1 <<'EOF'
import json, sys
for path, n in ((sys.argv[1], 2048), (sys.argv[2], 16)):
    d = json.load(open(path))
    j = d['job']
    k = {x['kind']: x for x in j['skew_by_kind']}
    assert set(k) == {'world', 'per_host'}, k
    assert 4.9 < k['world']['skew_mean_ms'] < 5.1, k
    assert k['per_host']['skew_mean_ms'] < 2.6, k
    assert j['skew_kind'] == 'world' and j['skew_mean_ms'] == k['world']['skew_mean_ms'], j
    assert len(d['ranks']) == n, len(d['ranks'])
print('ok')
EOF
[ "$(tail -1 "$T/json.out")" = ok ] && pass "json: skew_by_kind, the world's headline, every rank kept" ||
	fail "json: $(tail -3 "$T/json.out")"

# the page: small, the heatmap's rows the ranks that matter and merged ones
for j in big dead hosts16; do
	"$CLI" report --html "$T/$j.html" "$T/$j" 2>/dev/null || fail "report --html $j"
	sz=$(stat -c %s "$T/$j.html")
	[ "$sz" -le 5000000 ] && pass "$j: page $sz bytes (<= 5 MB)" || fail "$j: page $sz bytes"
done
grep -q 'p90-p100: 2[0-9][0-9] ranks' "$T/big.html" && pass "big: heatmap band rows (tenths)" ||
	fail "big: no band row in the heatmap"
grep -q 'rank 1234: last 100%' "$T/big.html" && pass "big: the straggler keeps its heatmap row" ||
	fail "big: no straggler row in the heatmap"
hr=$(sed -n '/<svg[^>]*class="skew"/,/<\/svg>/p' "$T/big.html" | grep -o 'text-anchor="end">\(rank [0-9]*: last\|p[0-9]*-p[0-9]*: \)' | wc -l)
[ "$hr" -ge 11 ] && [ "$hr" -le 34 ] && pass "big: $hr heatmap rows" || fail "big: $hr heatmap rows"
# one merged row per host, holding every rank that is not a row of its own (the straggler and at
# most 24 ranks that matter are)
hrows=$(grep -o 'node[0-9]*: [0-9]* ranks' "$T/hosts16.html" | sort -u | awk '{n++; s += $2} END {print n + 0, s + 0}')
[ "${hrows% *}" = 16 ] && [ "${hrows#* }" -ge 487 ] && [ "${hrows#* }" -le 511 ] &&
	pass "hosts16: merged by host on 16 hosts ($hrows)" ||
	fail "hosts16: host rows (hosts, ranks in them): $hrows"
# full colour at the collectives' skew (the straggler's 5 ms), not at the host rows' jitter
sat=$(grep -o "95th percentile of the collectives&#39; skew, [0-9.]* ms" "$T/hosts16.html" | grep -o '[0-9.]* ms$' | head -1)
awk -v s="${sat% ms}" 'BEGIN { exit !(s + 0 > 4.5) }' && pass "hosts16: colour full at $sat" ||
	fail "hosts16: saturation '$sat'"
grep -q 'the other 20[0-9][0-9] ranks' "$T/dead.html" && pass "dead: the hang plot's merged row" ||
	fail "dead: no merged hang row"
check_eq "big: the page's rank table keeps RANKS' rows" "$n" \
	"$(sed -n '/id="r-t-ranks"/,/<\/table>/p' "$T/big.html" | grep -c '<tr><td>[0-9]')"
# COLLECTIVES past collective_rows (32) rows: one row per kind of communicator, call and size
coll() { sed -n '/^COLLECTIVES/,/^$/p' "$T/$1.txt"; }
check "big: COLLECTIVES merges the 256 per-host communicators into one row" grep -qE \
	'^  256 per host +ncclAllReduce +8 ' <(coll big)
check "big: with the range of its communicators under it" grep -qE \
	'^    \(their mean; over the 256 communicators ms/rank [0-9.]+-[0-9.]+, busbw [0-9.]+-[0-9.]+\)$' <(coll big)
check "big: the world communicator keeps its own row" grep -qE '^  [0-9a-f]{16} ncclAllReduce +2048 ' <(coll big)
check "big: it says how many rows it merged" grep -q '^  (258 rows of communicators and calls in 3: ' <(coll big)
check_eq "big --all-ranks: every communicator a row" 256 "$(coll big_all | grep -cE '^  [0-9a-f]{16} ncclAllReduce +8 ')"
check_eq "big -t collective_rows=1000: every communicator a row" 256 \
	"$("$CLI" report -t collective_rows=1000 "$T/big" 2>/dev/null | sed -n '/^COLLECTIVES/,/^$/p' | grep -cE '^  [0-9a-f]{16} ncclAllReduce +8 ')"
check "small2 (8 rows): one row per communicator, as always" sh -c '! grep -q "per host  " "$1"' _ "$T/small2.txt"
exit $((FAILED > 0))

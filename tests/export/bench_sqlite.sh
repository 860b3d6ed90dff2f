#!/usr/bin/env bash
# bench_sqlite.sh: two nvlprof binaries' SQLite exports of one generated job, side by side: runs
# alternate (old, new, old, new, ...) so that a loaded machine slows both alike; per binary the
# median, min and max of the wall time, the export's records/s (records / wall of the whole
# command: loading, analysis and the database) and its CPU time (user + sys); the ratio new/old
# of the medians. The two databases' .dump must agree (else it says so and exits 1).
# usage: tests/export/bench_sqlite.sh OLD_NVLPROF NEW_NVLPROF [RANKS RECORDS_PER_RANK RUNS [-j N]]
# (defaults 8 ranks x 250000 records, 5 runs each, the default -j)
set -u
OLD=$(realpath "$1") NEW=$(realpath "$2")
RANKS=${3:-8} RECS=${4:-250000} RUNS=${5:-5}
shift $(($# < 5 ? $# : 5))
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GEN=${AN_GEN:-$ROOT/build/tests/progs/an_gen}
T=$(mktemp -d /tmp/nvlp-bench-sqlite.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$GEN" -o "$T/job" --ranks "$RANKS" --records "$RECS" >/dev/null || { echo "an_gen failed" >&2; exit 2; }
one() { # BIN NAME [OPTIONS]: one export; appends "wall cpu records" to $T/NAME.runs
	local bin=$1 name=$2 t0 t1 recs
	shift 2
	t0=$(date +%s.%N)
	/usr/bin/time -f "%U %S" -o "$T/time" "$bin" export "$@" -f sqlite -o "$T/$name.sqlite" "$T/job" 2>"$T/err" >/dev/null ||
		{ echo "$name: export failed: $(head -3 "$T/err")" >&2; exit 2; }
	t1=$(date +%s.%N)
	recs=$(sed -n 's/.* written: \([0-9]*\) records.*/\1/p' "$T/err")
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}') $(awk '{print $1 + $2}' "$T/time") $recs" >>"$T/$name.runs"
}
for ((i = 0; i < RUNS; i++)); do
	one "$OLD" old "$@"
	one "$NEW" new "$@"
done
# median / min / max of column C of a runs file
stat_of() { sort -g -k"$2" "$1" | awk -v c="$2" '{v[NR] = $c} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f %.3f", m, v[1], v[NR]}'; }
recs=$(awk 'NR == 1 {print $3}' "$T/old.runs")
echo "job: $RANKS ranks x $RECS records ($recs records exported), $RUNS runs each, alternating; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for b in old new; do
	read -r wm wl wh <<<"$(stat_of "$T/$b.runs" 1)"
	read -r cm cl ch <<<"$(stat_of "$T/$b.runs" 2)"
	awk -v b=$b -v r="$recs" -v wm="$wm" -v wl="$wl" -v wh="$wh" -v cm="$cm" -v cl="$cl" -v ch="$ch" 'BEGIN {
		printf "%s: wall %.3f s (%.3f-%.3f), %.2f M records/s (%.2f-%.2f), CPU %.3f s (%.3f-%.3f), %.0f CPU ns/record\n",
			b, wm, wl, wh, r / wm / 1e6, r / wh / 1e6, r / wl / 1e6, cm, cl, ch, cm * 1e9 / r }'
	eval "w_$b=$wm c_$b=$cm"
done
awk -v wo="$w_old" -v wn="$w_new" -v co="$c_old" -v cn="$c_new" 'BEGIN {printf "new/old: wall %.2fx, CPU %.2fx (medians)\n", wn / wo, cn / co}'
a=$(sqlite3 "$T/old.sqlite" .dump | sha256sum) b=$(sqlite3 "$T/new.sqlite" .dump | sha256sum)
[ "$a" = "$b" ] && echo "the two databases' .dump: the same" || { echo "the two databases' .dump DIFFER"; exit 1; }

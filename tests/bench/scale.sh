#!/usr/bin/env bash
# scale.sh: `nvlprof report` on synthetic jobs of growing rank counts (make bench-scale): ranks,
# records, report wall time (min and max of REPS runs), time per record, peak RSS, and whether
# the late rank was named a straggler.
# Each job: RPH ranks per host, STEPS steps of 4 world AllReduces + 1 per-host AllReduce with
# their kernels (~2,000 NCCL calls a rank at 333 steps), one rank 5 ms late, host clocks off by
# up to 3 ms. Settings (environment): SIZES="1024 4096 16384" REPS=2 RPH=8 STEPS=333
# NCCL_ONLY=1 (no GPU records: calls that block, see an_gen --blocking) KEEP=DIR (keep the jobs).
set -u
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NV=${NVLPROF:-$ROOT/$BUILD/nvlprof}
GEN=${AN_GEN:-$ROOT/$BUILD/tests/progs/an_gen}
SIZES=${SIZES:-1024 4096 16384}
REPS=${REPS:-2}
RPH=${RPH:-8}
STEPS=${STEPS:-333}
for x in "$NV" "$GEN"; do
	[ -x "$x" ] || { echo "scale.sh: $x missing (make analyzer $BUILD/tests/progs/an_gen)"; exit 1; }
done
TIMEB=/usr/bin/time # GNU time: the peak RSS
[ -x $TIMEB ] || { echo "scale.sh: $TIMEB missing (apt-get install time)"; exit 1; }
if [ -n "${KEEP:-}" ]; then T=$KEEP; mkdir -p "$T"; else
	T=$(mktemp -d /tmp/nvlp-scale.XXXXXX)
	trap 'rm -rf "$T"' EXIT
fi
extra=()
[ "${NCCL_ONLY:-0}" = 1 ] && extra=(--no-gpu --blocking)
start=$(date +%s)
echo "nvlprof report at scale: $("$NV" --version 2>/dev/null | head -1), $(nproc) cores, RPH=$RPH STEPS=$STEPS REPS=$REPS${NCCL_ONLY:+ NCCL_ONLY=$NCCL_ONLY}"
printf '%8s %12s %22s %12s %12s %10s\n' ranks records "report wall s (min-max)" "us/record" "peak RSS MB" straggler
for n in $SIZES; do
	d=$T/j$n late=$((n * 2 / 3 + 1))
	if [ ! -f "$d/.records" ]; then
		rm -rf "$d"
		"$GEN" -o "$d" --ranks "$n" --ranks-per-host "$RPH" --comms host --steps "$STEPS" \
			--late-rank "$late" --late-ms 5 --clock-spread-ms 3 --no-links --print-records \
			"${extra[@]}" >"$T/gen.out" 2>&1 || { echo "an_gen $n failed: $(tail -1 "$T/gen.out")"; exit 1; }
		awk '/^records/ {print $2}' "$T/gen.out" >"$d/.records"
	fi
	rec=$(cat "$d/.records")
	lo= hi= rss=0 found=no
	for _ in $(seq "$REPS"); do
		"$TIMEB" -f '%e %M' -o "$T/time" "$NV" report "$d" >"$T/report" 2>/dev/null ||
			{ echo "report of $n ranks failed"; exit 1; }
		read -r w m <"$T/time"
		lo=$(awk -v a="${lo:-$w}" -v b="$w" 'BEGIN {print (b < a ? b : a)}')
		hi=$(awk -v a="${hi:-$w}" -v b="$w" 'BEGIN {print (b > a ? b : a)}')
		[ "$m" -gt "$rss" ] && rss=$m
	done
	grep -q "straggler: Rank $late arrives last" "$T/report" && found=yes
	awk -v n="$n" -v r="$rec" -v lo="$lo" -v hi="$hi" -v m="$rss" -v f="$found" 'BEGIN {
		printf "%8d %11.1fM %12.2f - %-7.2f %12.3f %12.0f %10s\n", n, r / 1e6, lo, hi,
		       lo / r * 1e6, m / 1024, f }'
done
echo "($(($(date +%s) - start)) s in all, generating the jobs included)"

#!/usr/bin/env bash
# scale.sh: `nvlprof report` on synthetic jobs of growing rank counts (make bench-scale): ranks,
# records, report wall time (min and max of REPS runs), time per record, peak RSS, and whether
# the late rank was named a straggler.
# Each job: RPH ranks per host, STEPS steps of 4 world AllReduces + 1 per-host AllReduce with
# their kernels (~2,000 NCCL calls a rank at 333 steps), one rank 5 ms late, host clocks off by
# up to 3 ms. Settings (environment): SIZES="1024 4096 16384" REPS=2 RPH=8 STEPS=333
# NCCL_ONLY=1 (no GPU records: calls that block, see an_gen --blocking) KEEP=DIR (keep the jobs)
# OLD=path/to/another/nvlprof (each size run by it too, alternately, and the ratio of the CPU times).
# CPU is user + system time: on a shared machine wall time also counts waiting for a core.
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
printf '%8s %10s %20s %12s %10s %10s %10s%s\n' ranks records "report wall s (min-max)" "CPU s (min)" \
	"us/record" "RSS MB" straggler "${OLD:+  old CPU s  old/new}"
# one_run BIN DIR: wall, CPU and peak RSS (KB) of BIN report DIR into $T/time; its text in $T/report
one_run() {
	"$TIMEB" -f '%e %U %S %M' -o "$T/time" "$1" report "$2" >"$T/report" 2>/dev/null ||
		{ echo "report of $2 by $1 failed"; exit 1; }
}
minof() { awk -v a="$1" -v b="$2" 'BEGIN {print (a == "" || b < a ? b : a)}'; }
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
	lo= hi= cpu= ocpu= rss=0 found=no
	for _ in $(seq "$REPS"); do
		one_run "$NV" "$d"
		read -r w u sy m <"$T/time"
		grep -q "straggler: Rank $late arrives last" "$T/report" && found=yes
		lo=$(minof "$lo" "$w")
		hi=$(awk -v a="${hi:-0}" -v b="$w" 'BEGIN {print (b > a ? b : a)}')
		cpu=$(minof "$cpu" "$(awk -v u="$u" -v s="$sy" 'BEGIN {print u + s}')")
		[ "$m" -gt "$rss" ] && rss=$m
		if [ -n "${OLD:-}" ]; then
			one_run "$OLD" "$d"
			read -r w u sy m <"$T/time"
			ocpu=$(minof "$ocpu" "$(awk -v u="$u" -v s="$sy" 'BEGIN {print u + s}')")
		fi
	done
	awk -v n="$n" -v r="$rec" -v lo="$lo" -v hi="$hi" -v c="$cpu" -v m="$rss" -v f="$found" \
		-v o="$ocpu" 'BEGIN {
		printf "%8d %9.1fM %9.2f - %-9.2f %12.2f %10.3f %10.0f %10s", n, r / 1e6, lo, hi, c,
		       lo / r * 1e6, m / 1024, f
		if (o != "") printf " %11.2f %8.1f", o, o / c
		printf "\n" }'
done
echo "($(($(date +%s) - start)) s in all, generating the jobs included)"

#!/usr/bin/env bash
# launch_pairs.sh: what nvlprof adds to each kernel launch, in ns, and which part of it does:
# ROUNDS rounds of launch_cost (an empty kernel enqueued LAUNCHES times; median of 5 repeats) run
# without nvlprof and under each mode, in an order rotated every round, all runs of a round on one
# core (rotated between rounds). Prints each run, then per mode the mean difference from the
# no-profiler run of the same round with its 2-SE interval, and that figure at 100k launches/s
# (the tiny loop's rate: 100 ns = 1% of its step).
#   bash tests/gpu/launch_pairs.sh [ROUNDS=8] [LAUNCHES=100000] [MODE...]
#   MODE: default, or NAME=ENV1+ENV2 (nvlprof with these variables), e.g. nosample=NVLPROF_SAMPLE_US=0
set -u
cd "$(dirname "$0")/../.."
R=${1:-8} N=${2:-100000}
shift 2 2>/dev/null || shift $#
MODES=${*:-default}
G=${LAUNCH_COST_DIR:-$PWD/build/gpu} NV=$PWD/build/nvlprof
T=$(mktemp -d /tmp/nvlp-lp.XXXXXX)
trap 'rm -rf "$T"' EXIT
ncpu=$(nproc)
# the CUDA runtime and CUPTI of the pip wheels (as torch finds them), for every mode alike
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
PL=$(find "$SP/nvidia" \( -name 'libcupti.so.13' -o -name 'libcudart.so.13' \) 2>/dev/null |
	xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH=${PL}${LD_LIBRARY_PATH:-}
one() { # MODE CPU RUN: the median ns/launch of one run (empty when it failed: its log is kept)
	local name=${1%%=*} envs=() e
	[ "$1" != "${1#*=}" ] && IFS=+ read -ra envs <<<"${1#*=}"
	if [ "$name" = none ]; then taskset -c "$2" "$G/launch_cost" "$N" 5
	else env "${envs[@]}" taskset -c "$2" "$NV" run -o "$T/tr.$3" -- "$G/launch_cost" "$N" 5; fi \
		>"$T/log.$3" 2>&1
	sed -n 's/^launch_cost: median \([0-9.]*\) ns.*/\1/p' "$T/log.$3"
}
all=(none $MODES)
k=0
for i in $(seq 1 "$R"); do
	c=$(((2 + 3 * i) % ncpu))
	s=$((i % ${#all[@]}))
	order=("${all[@]:$s}" "${all[@]:0:$s}")
	for m in "${order[@]}"; do
		k=$((k + 1))
		v=$(one "$m" $c $k)
		[ -n "$v" ] || { echo "round $i: $m failed:"; tail -3 "$T/log.$k"; }
		echo "round $i cpu $c: ${m%%=*} $v ns/launch"
	done
done | tee "$T/runs"
python3 - "$T/runs" <<'PY'
import collections, math, re, statistics, sys
by = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    m = re.match(r"round (\d+) cpu \d+: (\S+) ([0-9.]+) ns/launch", l)
    if m:
        by[int(m.group(1))][m.group(2)] = float(m.group(3))
modes = sorted({k for r in by.values() for k in r if k != "none"})
base = [r["none"] for r in by.values() if "none" in r]
print("launch_pairs: no nvlprof %.1f ns/launch (median of %d rounds)" % (statistics.median(base), len(base)))
for mo in modes:
    d = [r[mo] - r["none"] for r in by.values() if mo in r and "none" in r]
    if len(d) < 2:
        print("launch_pairs: %-10s fewer than 2 rounds measured" % mo)
        continue
    m, se2 = statistics.mean(d), 2 * statistics.stdev(d) / math.sqrt(len(d))
    print("launch_pairs: %-10s %+7.1f ns/launch +- %5.1f (2 SE, %d rounds); at 100k launches/s "
          "%+.2f%% +- %.2f%%" % (mo, m, se2, len(d), m / 100, se2 / 100))
PY

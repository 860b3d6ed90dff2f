#!/usr/bin/env bash
# run_many.sh: a fuzz campaign of J independent fuzz_trace processes (one per core) for T seconds; prints one summary line, exits 1 on any crash, hang, OOM or leak.
#   tests/fuzz/run_many.sh [-j J] [-t T] [-o OUT] [-b FUZZ_BIN] [-s SEEDS_DIR]... [-m 0|1]
# FUZZ_SEED_BASE=N offsets every -seed (two campaigns on one corpus must not repeat each other).
# Defaults: J = number of CPUs, T = 60, OUT = ./fuzz-out, the binary and seeds next to this script
# (a folder made by `make fuzz-pack`) or in build/fuzz. Each process fuzzes its own copy of the
# seeds (OUT/corpus/N) with its own -seed; one that stops on a crash is started again on its corpus
# for the time left. Crashers (crash-, timeout-, oom-, leak-*) land in OUT/crashes, logs in OUT/logs.
# -m 1 (default): at the end all corpora are merged (-merge=1) into OUT/merged and its coverage is
# printed too (pairwise merges in parallel: leave it ~10% of T). The line is also in OUT/summary.txt.
here=$(cd "$(dirname "$0")" && pwd)
J=$(nproc 2>/dev/null || echo 1)
T=60
OUT=$PWD/fuzz-out
BIN=
SEEDS=()
MERGE=1
while getopts "j:t:o:b:s:m:" o; do
	case $o in
	j) J=$OPTARG ;;
	t) T=$OPTARG ;;
	o) OUT=$OPTARG ;;
	b) BIN=$OPTARG ;;
	s) SEEDS+=("$OPTARG") ;;
	m) MERGE=$OPTARG ;;
	*) echo "usage: $0 [-j J] [-t SECONDS] [-o OUT] [-b FUZZ_BIN] [-s SEEDS_DIR]... [-m 0|1]" >&2; exit 2 ;;
	esac
done
if [ -z "$BIN" ]; then
	for b in "$here/fuzz_trace" "$here/../../build/fuzz/fuzz_trace"; do
		[ -x "$b" ] && { BIN=$b; break; }
	done
fi
[ -n "$BIN" ] && [ -x "$BIN" ] && [ -f "$BIN" ] && BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "run_many: no fuzz_trace binary (make fuzz-build, or -b PATH)" >&2; exit 2; }
if [ ${#SEEDS[@]} -eq 0 ]; then
	for d in "$here/seeds" "$here/regress" "$here/../../build/fuzz/seeds"; do
		[ -d "$d" ] && SEEDS+=("$d")
	done
fi
[ ${#SEEDS[@]} -gt 0 ] || { echo "run_many: no seeds (make fuzz-seeds, or -s DIR)" >&2; exit 2; }
case "$J$T" in *[!0-9]*) echo "run_many: -j and -t take whole numbers" >&2; exit 2 ;; esac
# a library folder shipped with the binary (fuzz-pack copies what ldd names there, if anything)
[ -d "$(dirname "$BIN")/lib" ] && export LD_LIBRARY_PATH="$(dirname "$BIN")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:malloc_context_size=4}
mkdir -p "$OUT/crashes" "$OUT/logs" "$OUT/corpus" || exit 2
rm -rf "$OUT/corpus/"* "$OUT/logs/"* "$OUT/merged" "$OUT/merge"
# libFuzzer's flags as `make fuzz` uses them; -reload=0: no process reads another's corpus
FLAGS=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64 -max_len=65536 -reload=0 -print_final_stats=1)
end=$(($(date +%s) + T))
worker() {
	local i=$1 round=0 left
	mkdir -p "$OUT/corpus/$i"
	for s in "${SEEDS[@]}"; do find "$s" -maxdepth 1 -type f ! -name 'README*' -exec cp {} "$OUT/corpus/$i/" \; ; done
	while left=$((end - $(date +%s))); [ "$left" -ge 2 ]; do
		"$BIN" "${FLAGS[@]}" -seed=$((${FUZZ_SEED_BASE:-0} + 1000 * i + round + 1)) -max_total_time="$left" \
			-artifact_prefix="$OUT/crashes/" "$OUT/corpus/$i" >"$OUT/logs/$i.$round.log" 2>&1
		round=$((round + 1))
	done
}
for i in $(seq 1 "$J"); do worker "$i" & done
wait
# executions: each run's final stats (printed on a crash too), else its last status line
execs=0 cov=0 ft=0 runs=0
for log in "$OUT"/logs/*.log; do
	[ -f "$log" ] || continue
	runs=$((runs + 1))
	n=$(grep -a -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
	[ -n "$n" ] || n=$(grep -a -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
	execs=$((execs + ${n:-0}))
	c=$(grep -a -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
	set -- $c
	[ "${2:-0}" -gt "$cov" ] && cov=$2
	[ "${4:-0}" -gt "$ft" ] && ft=$4
done
count() { find "$OUT/crashes" -maxdepth 1 -name "$1-*" | wc -l; }
crashes=$(count crash) timeouts=$(count timeout) ooms=$(count oom) leaks=$(count leak)
# sanitizer reports that left no artifact (e.g. one during startup)
reports=$(grep -a -l -E 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:|ERROR: libFuzzer' "$OUT"/logs/*.log 2>/dev/null | wc -l)
line="fuzz: $J processes x ${T}s ($runs runs): $execs executions, $crashes crashes, $timeouts timeouts/hangs, $ooms OOMs, $leaks leaks, $reports logs with a sanitizer/libFuzzer error; best process cov $cov ft $ft"
echo "$line (merge not done)" >"$OUT/summary.txt" # kept if the merge below is cut short
merged=
if [ "$MERGE" = 1 ]; then
	# a tree of pairwise merges, each level's merges in parallel: every input is replayed about
	# log2(J) times in J processes, not once in one (16 corpora: ~4x faster at the end)
	mkdir -p "$OUT/merge"
	dirs=("$OUT"/corpus/*) level=0
	while [ ${#dirs[@]} -gt 1 ] || [ $level -eq 0 ]; do
		next=()
		for ((k = 0; k < ${#dirs[@]}; k += 2)); do
			d="$OUT/merge/$level.$k"
			mkdir -p "$d"
			"$BIN" -merge=1 "${FLAGS[@]}" "$d" "${dirs[@]:k:2}" >"$OUT/logs/merge.$level.$k.txt" 2>&1 &
			next+=("$d")
		done
		wait
		dirs=("${next[@]}") level=$((level + 1))
	done
	mv "${dirs[0]}" "$OUT/merged" && rm -rf "$OUT/merge"
	"$BIN" "${FLAGS[@]}" -runs=0 "$OUT/merged" >"$OUT/logs/merged-cov.txt" 2>&1
	m=$(grep -a -o 'INITED cov: [0-9]* ft: [0-9]*' "$OUT/logs/merged-cov.txt" | tail -1)
	set -- $m
	merged="; merged corpus: cov ${3:-?} ft ${5:-?} ($(find "$OUT/merged" -type f | wc -l) inputs)"
fi
echo "$line$merged" | tee "$OUT/summary.txt"
[ $((crashes + timeouts + ooms + leaks + reports)) -eq 0 ]

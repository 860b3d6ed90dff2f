#!/usr/bin/env bash
# lazy_um_matrix.sh: how often a job hangs after NVLPROF_CUPTI=lazy attaches CUPTI mid-run for managed memory (run 17:
# drv_cupy.py --rt hung in libnvrtc's cuInit 0.1 s after the attach), per configuration, the configurations interleaved.
#   REPS=4 HANG_S=25 OUT=dir bash tests/gpu/lazy_um_matrix.sh NAME=ENV[+ENV...]:ARGS ...
#   e.g. rt=NVLPROF_CUPTI=lazy:--rt nosamp=NVLPROF_CUPTI=lazy+NVLPROF_SAMPLE_US=0:--rt
# Prints one line per run (name, rep, rc, seconds, the job's result line) and a tally; traces in $OUT/NAME.REP.
# JOB: the command each run's ARGS follow (default python3 tests/gpu/drv_cupy.py; tests/gpu/test_lazy_um_matrix.sh
# gives its own); a run past HANG_S is killed (SIGKILL, status 137) with all it started. NVLPROF: the nvlprof binary (build/nvlprof).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-umx}
REPS=${REPS:-4}
HANG_S=${HANG_S:-25}
JOB=${JOB:-python3 tests/gpu/drv_cupy.py}
NVLPROF=${NVLPROF:-build/nvlprof}
mkdir -p "$OUT"
. tests/gpu/rotate.sh
declare -A hung ok
# one_run REP NAME ENVS ARGS: the job once under nvlprof, its line, counted finished or not
one_run() {
	local r=$1 name=$2 envs=$3 args=$4 d=$OUT/$2.$1 t0 pid w rc s
	rm -rf "$d"
	t0=$(date +%s.%N)
	# its own process group (setsid), all of it killed at HANG_S: the job outlives a killed nvlprof run
	# shellcheck disable=SC2086 # the ENV words, JOB and ARGS split on purpose
	setsid env ${envs//+/ } "$NVLPROF" run -o "$d" -- $JOB $args >"$d.log" 2>&1 &
	pid=$!
	(
		sleep "$HANG_S" &
		s=$!
		trap 'kill $s; exit 0' TERM
		wait $s
		kill -9 -- -"$pid" 2>/dev/null
	) &
	w=$!
	wait "$pid"
	rc=$?
	kill "$w" 2>/dev/null
	wait "$w" 2>/dev/null
	s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	echo "$name rep=$r rc=$rc s=$s $(grep -h 'drv_cupy: mode' "$d.log" | tail -1)"
	if [ "$rc" = 0 ]; then ok[$name]=$((${ok[$name]:-0} + 1)); else hung[$name]=$((${hung[$name]:-0} + 1)); fi
}
rotate_specs one_run "$REPS" "$@"
for spec in "$@"; do
	name=${spec%%=*}
	echo "tally $name: ${ok[$name]:-0} finished, ${hung[$name]:-0} did not (of $REPS)"
done

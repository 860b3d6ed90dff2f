#!/usr/bin/env bash
# um_cost.sh: what CUPTI's unified-memory counters cost a job that migrates managed memory back and forth
# (drv_cupy.py's 12-round GPU/CPU ping-pong of 128 MiB), per configuration, the configurations rotated each rep.
#   REPS=8 OUT=dir bash tests/gpu/um_cost.sh NAME=ENV[+ENV...]:ARGS ...   (ENV "-": without nvlprof)
#   e.g. none=-: default=NVLPROF_UM=auto: um0=NVLPROF_UM=0: rt=NVLPROF_UM=auto:--rt
# Prints one line per run (name, rep, rc, the job's ping-pong seconds) and, per configuration, the median and
# mean +- 2 SE of the ping-pong seconds and the ratio of means to the first configuration's.
# JOB: the command each run's ARGS follow (default python3 tests/gpu/drv_cupy.py); NVLPROF: build/nvlprof.
# WARMUP (1): runs of the job without nvlprof first, not counted (run 18: a fresh machine's first ping-pong took
# 1.01-1.02 s, the next ones 0.59-0.79 s).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-umcost}
REPS=${REPS:-8}
JOB=${JOB:-python3 tests/gpu/drv_cupy.py}
NVLPROF=${NVLPROF:-build/nvlprof}
mkdir -p "$OUT"
. tests/gpu/rotate.sh
: >"$OUT/um_cost.tsv"
for ((w = 0; w < ${WARMUP:-1}; w++)); do
	# shellcheck disable=SC2086 # JOB splits on purpose
	timeout 120 $JOB >"$OUT/warmup.$w.log" 2>&1
	echo "warmup $w rc=$? (not counted)"
done
# one_run REP NAME ENVS ARGS: the job once ("-": without nvlprof), its ping-pong seconds
one_run() {
	local r=$1 name=$2 envs=$3 args=$4 d=$OUT/$2.$1 rc t
	rm -rf "$d"
	# shellcheck disable=SC2086 # the ENV words, JOB and ARGS split on purpose
	if [ "$envs" = - ]; then
		timeout 120 $JOB $args >"$d.log" 2>&1
	else
		timeout 120 env ${envs//+/ } "$NVLPROF" run -o "$d" -- $JOB $args >"$d.log" 2>&1
	fi
	rc=$?
	t=$(sed -n 's/.*drv_cupy: mode=.* time=\([0-9.]*\)s.*/\1/p' "$d.log" | tail -1)
	echo "$name rep=$r rc=$rc time=${t:-none}"
	[ "$rc" = 0 ] && [ -n "$t" ] && printf '%s\t%s\n' "$name" "$t" >>"$OUT/um_cost.tsv"
}
rotate_specs one_run "$REPS" "$@"
python3 - "$OUT/um_cost.tsv" "${@%%=*}" <<'PY'
import statistics as st, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines() if l]
names = sys.argv[2:]
base = None
for n in names:
    v = [float(t) for k, t in rows if k == n]
    if not v:
        print(f"{n}: no finished run")
        continue
    m = st.mean(v)
    se = st.stdev(v) / len(v) ** 0.5 if len(v) > 1 else float("nan")
    base = base or m
    print(f"{n}: {len(v)} runs, median {st.median(v):.3f} s, mean {m:.3f} +- {2 * se:.3f} s (2 SE), x{m / base:.2f} of {names[0]}")
PY

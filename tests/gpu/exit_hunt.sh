#!/usr/bin/env bash
# exit_hunt.sh: how often a short process dies at exit, per configuration, and where (the FATAL
# record's stack). Lanes run tests/gpu/real/exit_worker.py (the tiny launch-bound loop for
# HUNT_LOOP_S s, then a normal exit) back to back until HUNT_S s are up; each lane keeps one
# configuration. Run 10 saw one NVLPROF_CUPTI=startup worker of 10 die at exit with glibc's
# "corrupted double-linked list" (it held the GPU's NVML link sampler).
#   HUNT_S=400 LANES="startup:7 anyexit:7" bash tests/gpu/exit_hunt.sh   (run 13; run 11 had
#   LANES="none:2 attached:3 startup:3 startup_own:4 startup_nolinks:2", run 12 freebufs/startup/nofinalize)
# Configurations: none (no shim), attached (NVLPROF_CUPTI=1, the default), startup
# (NVLPROF_CUPTI=startup), startup_own (the same, each process in a mount namespace of its own
# with a private /dev/shm, so each holds its GPU's link sampler; plain startup where unshare is
# refused), startup_nolinks (startup with NVLPROF_SAMPLE_US=0: no link sampling); and the
# investigation's arms (NVLPROF_DETACH_TEST, DEVELOPMENT.md): anyexit (startup finalizing at the
# exit of any API call, nested driver calls included, as before run 13), nofinalize (startup
# without cuptiFinalize); startup_fin (startup with NVLPROF_CUPTI_FINALIZE=1: the detach that
# CUPTI 13.0 now refuses, forced), cfin (no nvlprof: build/gpu/cupti_presence.so attaches CUPTI at
# cuInit as nvlprof does and detaches it 2 s later as startup does, part `late`: is the heap
# corruption CUPTI's own?).
#   HUNT_S=420 LANES="cfin:8 startup_fin:5 startup:2" bash tests/gpu/exit_hunt.sh   (run 14)
# Out: $OUT/summary.txt (processes and exit statuses per configuration, the stacks of those that
# died), $OUT/hunt.tgz (logs and traces of every process that did not exit 0, and one that did per
# configuration).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-hunt}
HUNT_S=${HUNT_S:-380}
LANES=${LANES:-startup:7 anyexit:7}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NV=$PWD/build/nvlprof LIB=$PWD/build/libnvlprof.so PRESENCE=$PWD/build/gpu/cupti_presence.so W=${HUNT_WORKER:-$PWD/tests/gpu/real/exit_worker.py}
H=$OUT/hunt
# cfin's cupti_presence.so opens the libcupti nvlprof finds (the wheel's), as run_cost.sh
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
export CUPTI_PRESENCE_LIB=${CUPTI_PRESENCE_LIB:-$(find "$SP/nvidia" -name 'libcupti.so.13' 2>/dev/null | head -1)}
mkdir -p "$H"
END=$(($(date +%s) + HUNT_S))
own_ok=0
unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null && own_ok=1

one() { # CFG DIR: one process of configuration CFG, its trace in DIR
	local cfg=$1 d=$2
	case $cfg in
	none) python3 "$W" ;;
	attached) NVLPROF_DIR=$d NVLPROF_CUPTI=1 LD_PRELOAD=$LIB python3 "$W" ;;
	startup) NVLPROF_DIR=$d NVLPROF_CUPTI=startup LD_PRELOAD=$LIB python3 "$W" ;;
	startup_fin) NVLPROF_DIR=$d NVLPROF_CUPTI=startup NVLPROF_CUPTI_FINALIZE=1 LD_PRELOAD=$LIB python3 "$W" ;;
	cfin) CUPTI_PRESENCE=inj.ts.reg.kinds.drv.late LD_PRELOAD=$PRESENCE python3 "$W" ;;
	startup_nolinks) NVLPROF_DIR=$d NVLPROF_CUPTI=startup NVLPROF_SAMPLE_US=0 LD_PRELOAD=$LIB python3 "$W" ;;
	anyexit) NVLPROF_DIR=$d NVLPROF_CUPTI=startup NVLPROF_DETACH_TEST=anyexit LD_PRELOAD=$LIB python3 "$W" ;;
	nofinalize) NVLPROF_DIR=$d NVLPROF_CUPTI=startup NVLPROF_DETACH_TEST=nofinalize LD_PRELOAD=$LIB python3 "$W" ;;
	startup_own)
		if [ $own_ok = 1 ]; then
			NVLPROF_DIR=$d NVLPROF_CUPTI=startup LD_PRELOAD=$LIB W=$W \
				unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm && exec python3 "$W"'
		else
			NVLPROF_DIR=$d NVLPROF_CUPTI=startup LD_PRELOAD=$LIB python3 "$W"
		fi ;;
	esac
}
lane() { # CFG INDEX
	local cfg=$1 i=$2 n=0 kept=0
	while [ "$(date +%s)" -lt $END ]; do
		local d=$H/$cfg.$i.$n
		mkdir -p "$d"
		timeout 90 bash -c "$(declare -f one); LIB=$LIB PRESENCE=$PRESENCE W=$W own_ok=$own_ok one $cfg $d" >"$d/log" 2>&1
		local rc=$?
		echo "$cfg $i $n $rc" >>"$H/rc.txt"
		# did it detach (the NOTE)?
		case $cfg in
		none) ;;
		cfin) echo "$cfg rc=$rc $(grep -o 'late: cuptiFinalize at the exit of [^:]*' "$d/log" | head -1)" >>"$H/notes.txt" ;;
		*) echo "$cfg rc=$rc $($NV dump "$d" 2>/dev/null | grep -oE 'at the exit of [^)]*|CUPTI not detached[^:]*: cuptiFinalize of CUPTI [0-9]+' | head -1)" >>"$H/notes.txt" ;;
		esac
		if [ $rc -ne 0 ]; then
			$NV report "$d" >"$d/report.txt" 2>&1
			$NV dump "$d" 2>/dev/null | grep -E '^fatal ' >>"$d/report.txt"
		elif [ $kept = 0 ] && [ $i = 0 ]; then
			kept=1
			$NV info "$d" >"$d/info.txt" 2>&1
		else
			rm -rf "$d"
		fi
		n=$((n + 1))
	done
}
for l in $LANES; do
	for i in $(seq 0 $((${l#*:} - 1))); do lane "${l%%:*}" "$i" & done
done
wait
{
	echo "exit_hunt: HUNT_S=$HUNT_S HUNT_LOOP_S=${HUNT_LOOP_S:-4} lanes: $LANES; private /dev/shm: $own_ok"
	echo "glibc: $(ldd --version 2>&1 | head -1)"
	for l in $LANES; do
		c=${l%%:*}
		awk -v c="$c" '$1 == c { n++; s[$4]++ } END { printf "%-16s %4d processes; exit statuses:", c, n;
			for (k in s) printf " %s x%d", k, s[k]; printf "\n" }' "$H/rc.txt"
	done
	echo "processes by configuration, exit status and where CUPTI was detached (the NOTE):"
	sort "$H/notes.txt" 2>/dev/null | uniq -c
	for d in "$H"/*/; do
		[ -f "$d/report.txt" ] || continue
		echo "--- $(basename "$d"): $(tail -2 "$d/log" | tr '\n' ' ')"
		grep -E 'rank_ended|^    (rank=|stack:)|ended by|^fatal ' "$d/report.txt" | head -8
	done
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"
(cd "$OUT" && tar czf hunt.tgz hunt && rm -rf hunt)
echo "exit_hunt: done"

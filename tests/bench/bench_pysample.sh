#!/usr/bin/env bash
# bench_pysample.sh: what the Python sampler costs: a python3 job whose main thread sleeps (chain DEPTH+3 frames) while another thread is inside a blocking fake ncclAllReduce, sampled at HZ; the sampler's own CPU time per round (its reads of both chains, from CLOCK_THREAD_CPUTIME_ID) and its thread's total, per round and as CPU % at 10 Hz (make bench).
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 1
LIB=$PWD/$BUILD/libnvlprof.so FAKES=$PWD/$BUILD/fakes
command -v python3 >/dev/null || { echo "bench_pysample: no python3, not measured"; exit 0; }
for f in "$LIB" "$FAKES/libcudart.so.13" "$FAKES/libnccl.so.2"; do
	[ -e "$f" ] || { echo "bench_pysample: missing $f (make test builds the fakes)"; exit 1; }
done
T=$(mktemp -d /tmp/nvlp-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
ROUNDS=${ROUNDS:-5} HZ=${HZ:-1000} SECS=${SECS:-2} DEPTH=${DEPTH:-10}
cat >"$T/py.py" <<EOF
import ctypes, sys, threading, time
ctypes.CDLL("$FAKES/libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL("$FAKES/libnccl.so.2", mode=ctypes.RTLD_LOCAL)
shim = ctypes.CDLL("$LIB", mode=ctypes.RTLD_LOCAL)
secs, depth = float(sys.argv[1]), int(sys.argv[2])
class Uid(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]
comm = ctypes.c_void_p()
assert shim.ncclCommInitRank(ctypes.byref(comm), 1, Uid(), 0) == 0
def nest(d, f):
    return nest(d - 1, f) if d > 1 else f()
t = threading.Thread(target=nest, args=(depth, lambda: shim.ncclAllReduce(None, None, 256, 7, 0, comm, None)))
t.start()
for i in range(200000):
    pass
nest(depth, lambda: time.sleep(secs))
t.join()
EOF
declare -a PER TOT
for ((i = 0; i < ROUNDS; i++)); do
	rm -rf "$T/d" && mkdir -p "$T/d"
	err=$(env -u NCCL_PROFILER_PLUGIN FAKE_CUDA_DEVICES=2 FAKE_NCCL_ALLREDUCE_MS=$((SECS * 1000)) NVLPROF_CUPTI=0 \
		NVLPROF_NCCL_PLUGIN=0 NVLPROF_VERBOSE=1 NVLPROF_PYSAMPLE_HZ="$HZ" NVLPROF_DIR="$T/d" \
		LD_PRELOAD="$LIB" python3 "$T/py.py" "$SECS" "$DEPTH" 2>&1 >/dev/null)
	rounds=$(sed -n 's/.*Python sampler: \([0-9]*\) rounds.*/\1/p' <<<"$err")
	per=$(sed -n 's/.*, \([0-9]*\) ns CPU per round.*/\1/p' <<<"$err")
	tot=$(sed -n 's/.*pysample \([0-9.]*\) ms.*/\1/p' <<<"$err")
	[ -n "$rounds" ] && [ -n "$per" ] && [ -n "$tot" ] || { echo "bench_pysample: a run said nothing: $err"; exit 1; }
	PER+=("$per")
	TOT+=("$(python3 -c "print($tot * 1e6 / $rounds)")")
done
python3 - "$ROUNDS" "$HZ" "$DEPTH" "${PER[*]}" "${TOT[*]}" <<'EOF'
import sys, statistics as st
rounds, hz, depth = sys.argv[1:4]
per = [float(x) for x in sys.argv[4].split()]
tot = [float(x) for x in sys.argv[5].split()]
def s(v):
    return "%.0f (%.0f..%.0f)" % (st.median(v), min(v), max(v))
print("bench_pysample: 2 chains of %d frames (main thread asleep, a thread inside ncclAllReduce), %s Hz, "
      "%s runs, median (min..max):" % (int(depth) + 3, hz, rounds))
print("bench_pysample: reads per round (both chains, unchanged): %s ns CPU; the sampler thread's whole "
      "CPU (wake-ups included) per round: %s ns" % (s(per), s(tot)))
print("bench_pysample: at 10 Hz: %.4f%% of one core (%.4f..%.4f)" % (
    st.median(tot) * 10 / 1e7, min(tot) * 10 / 1e7, max(tot) * 10 / 1e7))
EOF

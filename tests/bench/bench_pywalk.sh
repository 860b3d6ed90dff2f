#!/usr/bin/env bash
# bench_pywalk.sh: what reading a GIL-released thread's Python chain from its own frames costs: a python3 job calling the fakes through ctypes.CDLL with the layout walk off and on, rounds alternated, CPU ns per call (make bench).
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 1
LIB=$PWD/$BUILD/libnvlprof.so FAKES=$PWD/$BUILD/fakes
command -v python3 >/dev/null || { echo "bench_pywalk: no python3, not measured"; exit 0; }
for f in "$LIB" "$FAKES/libcudart.so.13" "$FAKES/libnccl.so.2"; do
	[ -e "$f" ] || { echo "bench_pywalk: missing $f (make test builds the fakes)"; exit 1; }
done
T=$(mktemp -d /tmp/nvlp-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
ROUNDS=${ROUNDS:-7} N=${N:-100000} DEPTH=${DEPTH:-10}
# py.py WHAT: WHAT=copy (a cross-device cudaMemcpyPeer from one line: its chain's key is read at
# every call, the chain itself once), copynew (from 16 lines in turn: every chain is built and
# hashed) or nccl (ncclAllReduce from one line: the signature of 4 frames is checked)
cat >"$T/py.py" <<EOF
import ctypes, sys, time
ctypes.CDLL("$FAKES/libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL("$FAKES/libnccl.so.2", mode=ctypes.RTLD_LOCAL)
what, n, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
shim = ctypes.CDLL("$LIB", mode=ctypes.RTLD_LOCAL)
class Uid(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]
comm = ctypes.c_void_p()
assert shim.ncclCommInitRank(ctypes.byref(comm), 1, Uid(), 0) == 0
a, b = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
cp, ar = shim.cudaMemcpyPeer, shim.ncclAllReduce
cp.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
ar.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
               ctypes.c_void_p, ctypes.c_void_p]
sites = [  # 16 call sites, one a line: more chains than the walk remembers (8)
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
    lambda: cp(b, 1, a, 0, 64),
]
def loop(k):
    if what == "copy":
        for i in range(k):
            cp(b, 1, a, 0, 64)
    elif what == "copynew":
        for i in range(k):
            sites[i % 16]()
    else:
        for i in range(k):
            ar(None, None, 1024, 7, 0, comm, None)
def nest(d, k):  # the calls DEPTH frames below the module
    return nest(d - 1, k) if d > 1 else loop(k)
nest(depth, 2000)
t0 = time.process_time_ns(); nest(depth, n); t1 = time.process_time_ns()
print((t1 - t0) / n)
EOF
# run WHAT WALK: CPU ns per call
run() {
	rm -rf "$T/d" && mkdir -p "$T/d"
	env -u NCCL_PROFILER_PLUGIN FAKE_CUDA_DEVICES=2 NVLPROF_CUPTI=0 NVLPROF_NCCL_PLUGIN=0 NVLPROF_DIR="$T/d" \
		NVLPROF_PYWALK="$2" LD_PRELOAD="$LIB" python3 "$T/py.py" "$1" "$N" "$DEPTH"
}
declare -A R
for ((i = 0; i < ROUNDS; i++)); do
	for k in copy:0 copy:1 copynew:0 copynew:1 nccl:0 nccl:1; do
		v=$(run "${k%:*}" "${k#*:}") || { echo "bench_pywalk: a run failed"; exit 1; }
		R[$k]="${R[$k]:-} $v"
	done
done
# median, min, max of a list; paired differences (walk on - off, same round) likewise
python3 - "$ROUNDS" "$N" "$DEPTH" "${R[copy:0]}" "${R[copy:1]}" "${R[nccl:0]}" "${R[nccl:1]}" "${R[copynew:0]}" "${R[copynew:1]}" <<'EOF'
import sys, statistics as st
rounds, n, depth = sys.argv[1:4]
c0, c1, n0, n1, m0, m1 = ([float(x) for x in a.split()] for a in sys.argv[4:10])
def s(v):
    return "%.0f (%.0f..%.0f)" % (st.median(v), min(v), max(v))
dc = [b - a for a, b in zip(c0, c1)]
dn = [b - a for a, b in zip(n0, n1)]
dm = [b - a for a, b in zip(m0, m1)]
print("bench_pywalk: python ctypes.CDLL (GIL released), %s calls x %s rounds, chains of %d-%d frames, "
      "CPU ns per call, median (min..max):" % (n, rounds, int(depth) + 2, int(depth) + 3))
print("bench_pywalk: cross-device copy from one line (key of the chain read, chain known): walk off "
      "%s, on %s: added %s ns per captured chain (key + PYREF)" % (s(c0), s(c1), s(dc)))
print("bench_pywalk: cross-device copy from 16 lines in turn (every chain built and hashed): walk "
      "off %s, on %s: added %s ns per captured chain" % (s(m0), s(m1), s(dm)))
print("bench_pywalk: ncclAllReduce from one line (signature of 4 frames checked): walk off %s, "
      "on %s: added %s ns per call" % (s(n0), s(n1), s(dn)))
EOF

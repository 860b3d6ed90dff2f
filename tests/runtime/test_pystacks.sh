#!/usr/bin/env bash
# test_pystacks.sh: Python file:line chains beside copies, managed allocations and collectives, from a real python3 driving the fakes through the shim.
source "$(dirname "$0")/../lib.sh"
export NVLPROF_CUPTI=0
READ="$PROGS/hk_read"
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }
for f in "$READ" "$LIB" "$FAKES/libnccl.so.2" "$FAKES/libcudart.so.13"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done

# job.py MODE: PyDLL keeps the GIL during the call (our reader may look); CDLL releases it (as
# torch does around its CUDA and NCCL calls: the shim must then read nothing).
cat >"$T/job.py" <<EOF
import ctypes, sys
ctypes.CDLL("$FAKES/libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL("$FAKES/libnccl.so.2", mode=ctypes.RTLD_LOCAL)
mode = sys.argv[1]
shim = (ctypes.PyDLL if mode in ("gil", "gilcap") else ctypes.CDLL)("$LIB", mode=ctypes.RTLD_LOCAL)

class Uid(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]

def build_cache(n):
    p = ctypes.c_void_p()
    assert shim.cudaMallocManaged(ctypes.byref(p), ctypes.c_size_t(n), 1) == 0  # ALLOC_LINE
    return p

def move(dst, src):
    assert shim.cudaMemcpyPeer(dst, 1, src, 0, ctypes.c_size_t(64)) == 0  # PEER_LINE

def step(comm, i):
    assert shim.ncclAllReduce(None, None, ctypes.c_size_t(256), 7, 0, comm, None) == 0  # STEP_LINE

def train():
    uid = Uid()
    assert shim.ncclGetUniqueId(ctypes.byref(uid)) == 0
    comm = ctypes.c_void_p()
    assert shim.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
    a = build_cache(4096)
    b = build_cache(4096)
    move(b, a)
    for i in range(50):
        step(comm, i)  # LOOP_LINE
    if mode == "gilcap":
        assert shim.cudaProfilerStart() == 0
    # the same innermost frame (address and position), called from another line:
    step(comm, 99)  # AGAIN_LINE
    assert shim.ncclBroadcast(None, None, ctypes.c_size_t(8), 7, 0, comm, None) == 0  # LAST_LINE
    print("done", flush=True)

try:
    raise KeyError("pending")
except KeyError:
    train()  # an exception being handled must stay the one the program sees
    assert sys.exc_info()[0] is KeyError
EOF
line_of() { grep -n "# $1\$" "$T/job.py" | cut -d: -f1; }

run_py() {
	mkdir -p "$T/$1"
	FAKE_CUDA_DEVICES=2 NVLPROF_DIR="$T/$1" LD_PRELOAD="$PRELOAD" python3 "$T/job.py" "$1" >"$T/$1.out" 2>"$T/$1.err"
	echo $? >"$T/$1.rc"
	"$READ" "$T/$1"/*.nvlp | sed 's/$/ /' >"$T/$1.txt"
}
run_py gil
check_eq "gil: job ran" "0 done" "$(cat "$T/gil.rc") $(cat "$T/gil.out")"
check_eq "gil: quiet" "" "$(cat "$T/gil.err")"
# chain ID: the PYSTACK text of an id (frames joined by '|', as hk_read prints them)
chain() { sed -n "s/^pystack id=$1 blob=//p" "$T/$2.txt" | head -1 | sed 's/ $//'; }
# ref KIND TID T: the pystack id of the PYREF attached to that record
ref() { sed -n "s/^pyref kind=$1 tid=$2 t=$3 .*pystack=\([0-9]*\) \$/\1/p" "$T/gil.txt" | head -1; }
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
J="$T/job.py"
K_NCCL=3 K_COPY=4 K_MANAGED=5
alloc=$(grep '^managed fn=cudaMallocManaged ' "$T/gil.txt" | head -1)
copy=$(grep '^copy fn=cudaMemcpyPeer ' "$T/gil.txt" | head -1)
check "gil: records present" test -n "$alloc" -a -n "$copy"
a_id=$(ref $K_MANAGED "$(field "$alloc" tid)" "$(field "$alloc" t_enter)")
check_eq "gil: allocation has its Python chain" \
	"$J:$(line_of ALLOC_LINE):build_cache|$J:$(grep -n '^    a = build_cache' "$J" | cut -d: -f1):train|$J:$(grep -n '^    train()' "$J" | cut -d: -f1):<module>|" \
	"$(chain "$a_id" gil)"
c_id=$(ref $K_COPY "$(field "$copy" tid)" "$(field "$copy" t_enter)")
check_eq "gil: cross-device copy has its Python chain" "$J:$(line_of PEER_LINE):move" "$(chain "$c_id" gil | cut -d'|' -f1)"
check_eq "gil: copy PYREF carries the call id" 1 "$(grep -c "^pyref kind=$K_COPY .* call_id=$(field "$copy" call_id) " "$T/gil.txt")"
# 50 collectives from one line: one PYREF (written when the chain changed), then the last call's
steps=$(grep -c '^nccl fn=ncclAllReduce ' "$T/gil.txt")
check_eq "gil: collectives recorded" 51 "$steps"
check_eq "gil: collective PYREFs only on change" 3 "$(grep -c "^pyref kind=$K_NCCL " "$T/gil.txt")"
again=$(grep '^nccl fn=ncclAllReduce ' "$T/gil.txt" | tail -1)
a2=$(ref $K_NCCL "$(field "$again" tid)" "$(field "$again" t_enter)")
check_eq "gil: same innermost frame from another line: the new chain" "$J:$(line_of STEP_LINE):step|$J:$(line_of AGAIN_LINE):train" "$(chain "$a2" gil | cut -d'|' -f1,2)"
last=$(grep '^nccl fn=ncclBroadcast ' "$T/gil.txt" | tail -1)
l_id=$(ref $K_NCCL "$(field "$last" tid)" "$(field "$last" t_enter)")
check_eq "gil: last collective's location" "$J:$(line_of LAST_LINE):train" "$(chain "$l_id" gil | cut -d'|' -f1)"
first=$(grep '^nccl fn=ncclAllReduce ' "$T/gil.txt" | head -1)
s_id=$(ref $K_NCCL "$(field "$first" tid)" "$(field "$first" t_enter)")
check_eq "gil: step location" "$J:$(line_of STEP_LINE):step|$J:$(line_of LOOP_LINE):train" "$(chain "$s_id" gil | cut -d'|' -f1,2)"
check_eq "gil: each chain written once" "$(grep -c '^pystack ' "$T/gil.txt")" "$(grep '^pystack ' "$T/gil.txt" | awk '{print $2}' | sort -u | wc -l)"

# NVLPROF_CAPTURE: the first collective inside the range has its location, whatever came before
mkdir -p "$T/gilcap"
FAKE_CUDA_DEVICES=2 NVLPROF_CAPTURE=cudaProfilerApi NVLPROF_DIR="$T/gilcap" LD_PRELOAD="$PRELOAD" python3 "$T/job.py" gilcap >/dev/null 2>&1
"$READ" "$T/gilcap"/*.nvlp | sed 's/$/ /' >"$T/gilcap.txt"
cap=$(grep '^nccl fn=ncclBroadcast ' "$T/gilcap.txt" | tail -1)
check_eq "capture: only the collectives inside the range" "1 1" "$(grep -c '^nccl fn=ncclAllReduce ' "$T/gilcap.txt") $(grep -c '^nccl fn=ncclBroadcast ' "$T/gilcap.txt")"
c_ref=$(sed -n "s/^pyref kind=$K_NCCL tid=$(field "$cap" tid) t=$(field "$cap" t_enter) .*pystack=\([0-9]*\) \$/\1/p" "$T/gilcap.txt" | head -1)
check_eq "capture: its Python location" "$J:$(line_of LAST_LINE):train" "$(chain "$c_ref" gilcap | cut -d'|' -f1)"

# CDLL releases the GIL around the call: nothing is asked of the interpreter (with the layout walk
# off: tests/runtime/test_pywalk.sh reads such a thread's own frames)
NVLPROF_PYWALK=0 run_py nogil
check_eq "nogil: job ran" "0 done" "$(cat "$T/nogil.rc") $(cat "$T/nogil.out")"
check_eq "nogil: records present" 51 "$(grep -c '^nccl fn=ncclAllReduce ' "$T/nogil.txt")"
check_eq "nogil: no Python chain" "0 0" "$(grep -c '^pystack ' "$T/nogil.txt") $(grep -c '^pyref ' "$T/nogil.txt")"

# NVLPROF_STACKS=0 turns Python chains off too
mkdir -p "$T/off"
FAKE_CUDA_DEVICES=2 NVLPROF_STACKS=0 NVLPROF_DIR="$T/off" LD_PRELOAD="$PRELOAD" python3 "$T/job.py" gil >/dev/null 2>&1
check_eq "stacks off: no Python chain" 0 "$("$READ" "$T/off"/*.nvlp | grep -c '^pystack ')"

exit $((FAILED > 0))

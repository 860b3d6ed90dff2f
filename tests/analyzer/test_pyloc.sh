#!/usr/bin/env bash
# test_pyloc.sh: Python code locations in the findings (uma_thrashing, peer_access_disabled, hang_suspect) in text, JSON and HTML: an_gen jobs against a golden, and a python3 job driving the fakes through the shim.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
GOLD="$ROOT/tests/analyzer/golden"
for f in "$GEN" "$CLI"; do
	[ -x "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
pyq() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# 1. synthetic jobs whose records carry Python chains (torch frames inside the user's)
"$GEN" -o "$T/thrash" --thrash --python || fail "an_gen thrash"
"$GEN" -o "$T/staged" --staged --python || fail "an_gen staged"
"$GEN" -o "$T/kill" --ranks 4 --kill-rank 1 --python || fail "an_gen kill"
"$GEN" -o "$T/plain" --thrash || fail "an_gen plain"
: >"$T/pyloc.txt"
for s in thrash staged kill; do
	"$CLI" report "$T/$s" >"$T/$s.txt" 2>/dev/null
	"$CLI" report --json "$T/$s" >"$T/$s.json" 2>/dev/null
	"$CLI" report --html "$T/$s.html" "$T/$s" >/dev/null 2>&1
	{
		echo "== $s text"
		grep -E '^\[|^    (python|allocated_at|copied_at)' "$T/$s.txt" |
			sed -E 's/an_gen\+0x[0-9a-f]+/an_gen+OFF/; s/alloc_site\+0x[0-9a-f]+/alloc_site+OFF/'
		echo "== $s json"
		pyq "$T/$s.json" "'\n'.join('%s %s: %s' % (f['id'], k, v) for f in d['findings'] for k, v in f['evidence'].items() if k.startswith('python'))"
		echo "== $s html"
		grep -o '<li class="loc">[^<]*</li>' "$T/$s.html"
	} >>"$T/pyloc.txt"
done
golden_cmp "golden: pyloc" "$GOLD/pyloc.txt" "$T/pyloc.txt"
check "thrash: the Python line reads as the issue asks" \
	grep -qx '    python: allocated at train.py:41 in build_cache <- train.py:87 in main' "$T/thrash.txt"
check "thrash: the native stack stays beside it" grep -q '^    allocated_at: an_gen_alloc_site' "$T/thrash.txt"
check "kill: torch's frames are left out, the user's innermost frame first" \
	grep -qx '    python_rank1: last NCCL call at train.py:57 in train_step <- train.py:90 in main <- train.py:95 in <module>' "$T/kill.txt"
check_eq "kill: the missing rank first, then two waiting ranks" "python_rank1 python_rank0 python_rank2" \
	"$(pyq "$T/kill.json" "' '.join(k for f in d['findings'] if f['id'] == 'hang_suspect' for k in f['evidence'] if k.startswith('python'))")"
"$CLI" report "$T/plain" >"$T/plain.txt" 2>/dev/null
check "no Python records: no Python line, the native one stays" \
	bash -c "! grep -q python '$T/plain.txt' && grep -q '^    allocated_at: ' '$T/plain.txt'"

# 2. a python3 job driving the fakes through the shim: PyDLL keeps the GIL during the calls
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit $((FAILED > 0)); }
for f in "$LIB" "$FAKES/libnccl.so.2" "$FAKES/libcudart.so.13"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
cat >"$T/job.py" <<EOF
import ctypes, sys
ctypes.CDLL("$FAKES/libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL("$FAKES/libnccl.so.2", mode=ctypes.RTLD_LOCAL)
rank, how = int(sys.argv[1]), sys.argv[2]
shim = (ctypes.PyDLL if how == "gil" else ctypes.CDLL)("$LIB", mode=ctypes.RTLD_LOCAL)

class Uid(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]

def move(dst, src):
    assert shim.cudaMemcpyPeer(dst, 1, src, 0, ctypes.c_size_t(1 << 20)) == 0  # COPY_LINE

def train_step(comm):
    assert shim.ncclAllReduce(None, None, ctypes.c_size_t(256), 7, 0, comm, None) == 0  # STEP_LINE

def main():
    comm = ctypes.c_void_p()
    assert shim.ncclCommInitRank(ctypes.byref(comm), 2, Uid(), rank) == 0
    if rank == 0:
        a, b = ctypes.create_string_buffer(1 << 20), ctypes.create_string_buffer(1 << 20)
        for i in range(4):
            move(b, a)  # MOVE_LINE
    for i in range(10 if rank else 11):  # rank 1 never enters the 11th
        train_step(comm)  # LOOP_LINE

main()  # MAIN_LINE
EOF
line_of() { grep -n "# $1\$" "$T/job.py" | cut -d: -f1; }
# job HOW: both ranks into $T/HOW; the report (thresholds lowered: the fakes' copies are small)
job() {
	mkdir -p "$T/$1"
	for r in 0 1; do
		FAKE_CUDA_DEVICES=2 NVLPROF_CUPTI=0 RANK=$r WORLD_SIZE=2 NVLPROF_DIR="$T/$1" \
			LD_PRELOAD="$PRELOAD" python3 "$T/job.py" $r "$1" >>"$T/$1.out" 2>&1 || fail "$1: rank $r failed"
	done
	"$CLI" report --threshold staged_min_mib=0 --threshold hang_min_ms=0 "$T/$1" >"$T/$1.txt" 2>/dev/null
}
job gil
check_eq "fakes, GIL held: copied at the call's line" \
	"    python: copied at job.py:$(line_of COPY_LINE) in move <- job.py:$(line_of MOVE_LINE) in main <- job.py:$(line_of MAIN_LINE) in <module>" \
	"$(grep '^    python: copied at' "$T/gil.txt")"
check_eq "fakes, GIL held: the dead rank's last NCCL call" \
	"    python_rank1: last NCCL call at job.py:$(line_of STEP_LINE) in train_step <- job.py:$(line_of LOOP_LINE) in main <- job.py:$(line_of MAIN_LINE) in <module>" \
	"$(grep '^    python_rank1:' "$T/gil.txt")"
check_eq "fakes, GIL held: the waiting rank's call" \
	"    python_rank0: waits in NCCL at job.py:$(line_of STEP_LINE) in train_step <- job.py:$(line_of LOOP_LINE) in main <- job.py:$(line_of MAIN_LINE) in <module>" \
	"$(grep '^    python_rank0:' "$T/gil.txt")"
# the same job through ctypes.CDLL (the GIL released around every call, as torch and CuPy do): the
# shim reads the calling thread's own frames (tests/runtime/test_pywalk.sh); the same lines
job nogil
for k in "python: copied at" "python_rank1:" "python_rank0:"; do
	check_eq "fakes, GIL released: '$k' as with the GIL held" "$(grep "^    $k" "$T/gil.txt")" "$(grep "^    $k" "$T/nogil.txt")"
done
exit $((FAILED > 0))

#!/usr/bin/env bash
# test_pywalk.sh: Python chains of threads that released the GIL (ctypes.CDLL, as torch and CuPy release it) read from their own frames: the same chains as with the GIL held, on every python3.11+ found; none for a thread without Python or a non-Python process; a wrong layout refused by the self-check.
source "$(dirname "$0")/../lib.sh"
export NVLPROF_CUPTI=0
READ="$PROGS/hk_read"
for f in "$READ" "$LIB" "$FAKES/libnccl.so.2" "$FAKES/libcudart.so.13" "$FAKES/libhk_workload.so"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
# The interpreters: python3, and 3.11-3.13 beside it where present (pyenv on the build machine).
PYS=()
for p in python3 python3.11 python3.12 python3.13 /root/.pyenv/versions/3.1[123].*/bin/python3; do
	command -v "$p" >/dev/null 2>&1 || continue
	v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2]) if sys.version_info >= (3, 11) else None' 2>/dev/null)
	[ -n "$v" ] && [ "$v" != None ] || continue
	case " ${SEEN:-} " in *" $v "*) continue ;; esac
	# a sanitizer's runtime preloaded: some interpreters crash with it alone (3.11.7 under TSan,
	# at a thread's exit, without the shim): those are not ours to test here
	if [ -n "$SANLIB" ] && ! LD_PRELOAD="$SANLIB" "$p" -c 'import threading; t = threading.Thread(target=int); t.start(); t.join()' >/dev/null 2>&1; then
		echo "SKIP: $p $v crashes with $SANLIB preloaded, without the shim"
		continue
	fi
	SEEN="${SEEN:-} $v"
	PYS+=("$p")
done
[ ${#PYS[@]} -gt 0 ] || { echo "SKIP: no python3.11+"; exit 0; }
# Under TSan a Python thread's first capture crashes in the native stack capture already at
# 1e9b546 (NVLPROF_STACKS=0 does not): the threads' checks are left out there.
THREADS=1
if [ "${SAN:-}" = thread ]; then
	THREADS=0
	echo "SKIP: SAN=thread: the checks on other threads (a Python thread's native stack crashes under TSan)"
fi
export JOB_THREADS=$THREADS

# job.py HOW: HOW=gil calls through PyDLL (the GIL held), nogil through CDLL (released)
cat >"$T/job.py" <<EOF
import ctypes, os, sys, threading
ctypes.CDLL("$FAKES/libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL("$FAKES/libnccl.so.2", mode=ctypes.RTLD_LOCAL)
how = sys.argv[1]
shim = (ctypes.PyDLL if how == "gil" else ctypes.CDLL)("$LIB", mode=ctypes.RTLD_LOCAL)
work = ctypes.CDLL("$FAKES/libhk_workload.so")

class Uid(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]

def größe(dst, src):  # a non-ASCII name: UTF-8 from the str's own kind
    assert shim.cudaMemcpyPeer(dst, 1, src, 0, ctypes.c_size_t(64)) == 0  # COPY_LINE

def deep(n, dst, src):
    if n:
        return deep(n - 1, dst, src)  # DEEP_LINE
    größe(dst, src)

def gen(comm):
    for i in range(3):
        assert shim.ncclAllReduce(None, None, ctypes.c_size_t(256), 7, 0, comm, None) == 0  # GEN_LINE
        yield i

def on_thread(dst, src):
    größe(dst, src)  # THREAD_LINE

def main():
    comm = ctypes.c_void_p()
    assert shim.ncclCommInitRank(ctypes.byref(comm), 1, Uid(), 0) == 0
    a, b = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
    for i in range(3):
        größe(b, a)  # MAIN_LINE
    deep(60, b, a)  # deeper than the 48 frames kept
    assert list(gen(comm)) == [0, 1, 2]  # LIST_LINE
    if os.environ["JOB_THREADS"] == "1":
        t = threading.Thread(target=on_thread, args=(b, a))
        t.start(); t.join()
        assert work.workload_thread(2) == 0  # a thread without Python: no location
    print("done", flush=True)

main()
EOF
line_of() { grep -n "# $1\$" "$T/job.py" | cut -d: -f1; }
J="$T/job.py"
# run NAME PY HOW [env...]: the job into $T/NAME, records as text in $T/NAME.txt
run() {
	local n=$1 py=$2 how=$3
	shift 3
	mkdir -p "$T/$n"
	env FAKE_CUDA_DEVICES=2 NVLPROF_DIR="$T/$n" NVLPROF_PYWALK_LOG=1 "$@" LD_PRELOAD="$PRELOAD" \
		"$py" "$J" "$how" >"$T/$n.out" 2>"$T/$n.err"
	echo $? >"$T/$n.rc"
	"$READ" "$T/$n"/*.nvlp | sed 's/$/ /' >"$T/$n.txt"
}
# chains NAME: every PYSTACK text, one per line, sorted
chains() { sed -n 's/^pystack id=[0-9]* blob=//p' "$T/$1.txt" | sed 's/ $//' | sort; }
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# chain_of NAME TID T: the PYSTACK text attached to that record ("" none)
chain_of() {
	local id
	id=$(sed -n "s/^pyref kind=[0-9]* tid=$2 t=$3 .*pystack=\([0-9]*\) \$/\1/p" "$T/$1.txt" | head -1)
	[ -n "$id" ] && sed -n "s/^pystack id=$id blob=//p" "$T/$1.txt" | head -1 | sed 's/ $//'
}

for py in "${PYS[@]}"; do
	v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	run "gil$v" "$py" gil
	run "nogil$v" "$py" nogil
	check_eq "$v: both jobs ran" "0 done 0 done" "$(cat "$T/gil$v.rc") $(cat "$T/gil$v.out") $(cat "$T/nogil$v.rc") $(cat "$T/nogil$v.out")"
	check "$v: the self-check passed" grep -q "frame layout: self-check passed" "$T/nogil$v.err"
	check_eq "$v: GIL released: the same chains as with the GIL held" "$(chains "gil$v")" "$(chains "nogil$v")"
	check_eq "$v: GIL released: the chains were read" $((3 + THREADS)) "$(chains "nogil$v" | wc -l)"
	check "$v: the non-ASCII function at the call's line" \
		grep -q "^pystack id=[0-9]* blob=$J:$(line_of COPY_LINE):größe|$J:$(line_of MAIN_LINE):main|" "$T/nogil$v.txt"
	check "$v: a generator's frame and its consumer" \
		grep -q "^pystack id=[0-9]* blob=$J:$(line_of GEN_LINE):gen|$J:$(line_of LIST_LINE):main|" "$T/nogil$v.txt"
	[ "$THREADS" = 1 ] && check "$v: another Python thread: its own chain" \
		grep -q "^pystack id=[0-9]* blob=$J:$(line_of COPY_LINE):größe|$J:$(line_of THREAD_LINE):on_thread|" "$T/nogil$v.txt"
	deep=$(sed -n "s#^pystack id=[0-9]* blob=\($J:$(line_of COPY_LINE):größe|$J:[0-9]*:deep|.*\)#\1#p" "$T/nogil$v.txt" | head -1)
	check_eq "$v: a deep chain: 48 frames kept" 48 "$(printf '%s' "$deep" | tr -cd '|' | wc -c)"
	# the workload's own thread (no Python ever ran on it): its copy has no location
	if [ "$THREADS" = 1 ]; then
		wt=$(grep '^copy fn=cudaMemcpy ' "$T/nogil$v.txt" | tail -1)
		main_tid=$(field "$(grep '^copy fn=cudaMemcpyPeer ' "$T/nogil$v.txt" | head -1)" tid)
		check "$v: the workload thread's copy is recorded, on a thread of its own" \
			test -n "$wt" -a "$(field "$wt" tid)" != "$main_tid"
		check_eq "$v: a thread without Python: no location" "" "$(chain_of "nogil$v" "$(field "$wt" tid)" "$(field "$wt" t_enter)")"
	fi
	# a wrong layout (one offset moved): refused, nothing read, the job unchanged
	run "skew$v" "$py" nogil NVLPROF_PYWALK_TEST=skew
	check_eq "$v: wrong layout: the job ran" "0 done" "$(cat "$T/skew$v.rc") $(cat "$T/skew$v.out")"
	check "$v: wrong layout: the self-check refused it" grep -q "frame layout: self-check failed" "$T/skew$v.err"
	check_eq "$v: wrong layout: no chain read without the GIL" "0 0" "$(grep -c '^pystack ' "$T/skew$v.txt") $(grep -c '^pyref ' "$T/skew$v.txt")"
	run "skewgil$v" "$py" gil NVLPROF_PYWALK_TEST=skew
	check_eq "$v: wrong layout, GIL held: the API's chains still" "$(chains "gil$v")" "$(chains "skewgil$v")"
	run "pipe$v" "$py" nogil NVLPROF_PYWALK_TEST=pipe
	check "$v: self-check through the pipe fallback: passed" grep -q "frame layout: self-check passed" "$T/pipe$v.err"
	check_eq "$v: self-check through the pipe fallback: the same chains" "$(chains "gil$v")" "$(chains "pipe$v")"
	run "off$v" "$py" nogil NVLPROF_PYWALK=0
	check_eq "$v: NVLPROF_PYWALK=0: no chain without the GIL" "0" "$(grep -c '^pyref ' "$T/off$v.txt")"
done

# a process without Python resolves nothing: the same workload from a C program
if [ -x "$PROGS/hk_dlopen" ]; then
	mkdir -p "$T/c"
	FAKE_CUDA_DEVICES=2 NVLPROF_DIR="$T/c" LD_PRELOAD="$PRELOAD" "$PROGS/hk_dlopen" "$FAKES/libhk_workload.so" 2 >/dev/null 2>&1
	"$READ" "$T/c"/*.nvlp >"$T/c.txt"
	check "not Python: records written" grep -q '^nccl ' "$T/c.txt"
	check_eq "not Python: no chain" "0" "$(grep -c '^py' "$T/c.txt")"
fi
exit $((FAILED > 0))

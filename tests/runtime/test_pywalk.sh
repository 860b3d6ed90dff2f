#!/usr/bin/env bash
# test_pywalk.sh: Python chains of threads that released the GIL (ctypes.CDLL, as torch and CuPy release it) read from their own frames: the same chains as with the GIL held, on every python3.11+ found, the process's first capture (a copy, a collective, a driver-level managed allocation) included; none for a thread without Python or a non-Python process; a wrong layout refused by the self-check, and chains walked before it dropped.
source "$(dirname "$0")/../lib.sh"
export NVLPROF_CUPTI=0
READ="$PROGS/hk_read"
for f in "$READ" "$LIB" "$FAKES/libnccl.so.2" "$FAKES/libcudart.so.13" "$FAKES/libhk_workload.so"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
pythons_311
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
    if os.environ.get("NCCL_FIRST") == "1":  # the process's first capture: a collective
        assert shim.ncclAllReduce(None, None, ctypes.c_size_t(256), 7, 0, comm, None) == 0  # FIRST_LINE
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
# drv.py: a managed allocation seen only at driver level (CuPy's statically linked runtime calls
# cuMemAllocManaged, through CDLL: GIL released), the process's first capture (fake libcuda/libcupti)
cat >"$T/drv.py" <<EOF
import ctypes
ctypes.CDLL("$FAKES/cupti/libcupti.so.13", mode=ctypes.RTLD_GLOBAL)
cuda = ctypes.CDLL("$FAKES/cupti/libcuda.so.1", mode=ctypes.RTLD_GLOBAL)

def alloc():
    p = ctypes.c_uint64()
    assert cuda.cuMemAllocManaged(ctypes.byref(p), ctypes.c_size_t(1 << 16), 1) == 0  # DRV_LINE

def main():
    assert cuda.cuInit(0) == 0
    alloc()  # DRVMAIN_LINE
    print("done", flush=True)

main()
EOF
# run NAME PY HOW [env...]: the job into $T/NAME, records as text in $T/NAME.txt
run() {
	local n=$1 py=$2 how=$3
	shift 3
	mkdir -p "$T/$n"
	# the sampler off: its hooks ask for the self-check at the first call's entry, so the first
	# capture would no longer come before the check (tests/runtime/test_pysample.sh tests it)
	env FAKE_CUDA_DEVICES=2 NVLPROF_DIR="$T/$n" NVLPROF_PYWALK_LOG=1 NVLPROF_PYSAMPLE_HZ=0 "$@" LD_PRELOAD="$PRELOAD" \
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
	# the process's first capture is made without the GIL, before any self-check could run: its
	# chain is walked then (fault-safe reads) and written once the check passed
	first=$(grep '^copy fn=cudaMemcpyPeer ' "$T/nogil$v.txt" | sed 's/.* t_enter=\([0-9]*\) .*/\1 &/' | sort -n | head -1)
	check "$v: GIL released, the first capture: its own chain" \
		bash -c '[[ "$1" == "$2"* ]]' _ "$(chain_of "nogil$v" "$(field "$first" tid)" "$(field "$first" t_enter)")" \
		"$J:$(line_of COPY_LINE):größe|$J:$(line_of MAIN_LINE):main|"
	check "$v: calls walked before the self-check: written" grep -q "1 calls walked before the self-check, 1 chains kept: written" "$T/nogil$v.err"
	if [ -e "$FAKES/cupti/libcuda.so.1" ]; then
		J="$T/drv.py" run "drv$v" "$py" nogil NVLPROF_CUPTI=1
		m=$(grep -m1 '^managed fn=cuMemAllocManaged ' "$T/drv$v.txt")
		check_eq "$v: driver-level managed allocation: the job ran, recorded" "0 done 1" \
			"$(cat "$T/drv$v.rc") $(cat "$T/drv$v.out") $(printf '%s' "$m" | grep -c .)"
		check_eq "$v: driver-level managed allocation (the first capture): its chain" \
			"$T/drv.py:$(grep -n '# DRV_LINE$' "$T/drv.py" | cut -d: -f1):alloc|$T/drv.py:$(grep -n '# DRVMAIN_LINE$' "$T/drv.py" | cut -d: -f1):main|" \
			"$(chain_of "drv$v" "$(field "$m" tid)" "$(field "$m" t_enter)" | cut -d'|' -f1-2)|"
	fi
	run "ncclfirst$v" "$py" nogil NCCL_FIRST=1
	c=$(grep '^nccl fn=ncclAllReduce ' "$T/ncclfirst$v.txt" | sed 's/.* t_enter=\([0-9]*\) .*/\1 &/' | sort -n | head -1)
	check_eq "$v: a collective, the first capture: its chain" "0 done $J:$(line_of FIRST_LINE):main|" \
		"$(cat "$T/ncclfirst$v.rc") $(cat "$T/ncclfirst$v.out") $(chain_of "ncclfirst$v" "$(field "$c" tid)" "$(field "$c" t_enter)" | cut -d'|' -f1)|"
	check_eq "$v: a collective, the first capture: the later ones' chains as before" "$(chains "nogil$v")" \
		"$(chains "ncclfirst$v" | grep -v ":$(line_of FIRST_LINE):main|")"
	# a wrong layout (one offset moved): refused, nothing read, the job unchanged
	run "skew$v" "$py" nogil NVLPROF_PYWALK_TEST=skew
	check_eq "$v: wrong layout: the job ran" "0 done" "$(cat "$T/skew$v.rc") $(cat "$T/skew$v.out")"
	check "$v: wrong layout: the self-check refused it" grep -q "frame layout: self-check failed" "$T/skew$v.err"
	check "$v: wrong layout: the calls walked before the check: dropped" grep -Eq "1 calls walked before the self-check, [01] chains kept: dropped" "$T/skew$v.err"
	check_eq "$v: wrong layout: no chain read without the GIL" "0 0" "$(grep -c '^pystack ' "$T/skew$v.txt") $(grep -c '^pyref ' "$T/skew$v.txt")"
	# as the analyzer shows them: a location with the layout checked, none without
	PYLOC='python[a-z_0-9]*: |größe|job\.py:[0-9]'
	for n in "nogil$v" "skew$v"; do
		"$CLI" report --threshold staged_min_mib=0 "$T/$n" >"$T/$n.report" 2>&1
		"$CLI" dump "$T/$n" >"$T/$n.dump" 2>&1
	done
	check "$v: GIL released: the report's copy has its Python location" \
		grep -q "^    python: copied at job.py:$(line_of COPY_LINE) in größe <- job.py:" "$T/nogil$v.report"
	check "$v: GIL released: the dump shows the chains" grep -Eq "$PYLOC" "$T/nogil$v.dump"
	check "$v: wrong layout: the report (peer_access_disabled) shows no Python location" \
		bash -c 'grep -q peer_access_disabled "$1" && ! grep -Eq "$2" "$1"' _ "$T/skew$v.report" "$PYLOC"
	check "$v: wrong layout: the dump shows none" bash -c '! grep -Eq "$2" "$1"' _ "$T/skew$v.dump" "$PYLOC"
	# a right layout the check refuses (forced): the chains kept until then, right ones, dropped
	run "refuse$v" "$py" nogil NVLPROF_PYWALK_TEST=refuse
	check_eq "$v: check refused: the job ran" "0 done" "$(cat "$T/refuse$v.rc") $(cat "$T/refuse$v.out")"
	check "$v: check refused: the chain walked before it was kept, then dropped" \
		grep -q "1 calls walked before the self-check, 1 chains kept: dropped" "$T/refuse$v.err"
	check_eq "$v: check refused: no chain written without the GIL" "0 0" "$(grep -c '^pystack ' "$T/refuse$v.txt") $(grep -c '^pyref ' "$T/refuse$v.txt")"
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

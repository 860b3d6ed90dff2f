#!/usr/bin/env bash
# test_pysample.sh: the Python sampler (NVLPROF_PYSAMPLE_HZ): a main thread sleeping 2 s in a known function and another thread blocked 2.5 s inside a (fake) NCCL call and a third blocked 1.2 s in each of two synchronous cudaMemcpy calls (one unrecorded, one recorded) are sampled by the shim's own thread as PYREF kind 0 naming their file:line chains, which the analyzer's places answer with; neither thread's blocking call is interrupted; a fork child samples again; none with the sampler off, NVLPROF_STACKS=0, or without Python; on every python3.11+ found.
source "$(dirname "$0")/../lib.sh"
export NVLPROF_CUPTI=0
READ="$PROGS/hk_read" PLACES="$B/tests/test_analyzer_places"
for f in "$READ" "$PLACES" "$LIB" "$FAKES/libnccl.so.2" "$FAKES/libcudart.so.13"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
pythons_311
[ ${#PYS[@]} -gt 0 ] || { echo "SKIP: no python3.11+"; exit 0; }

# job.py [fork]: the main thread sleeps 2 s in load_next_batch (libc's nanosleep, not resumed on
# EINTR: an interruption is reported) while another thread is inside ncclAllReduce
# (FAKE_NCCL_ALLREDUCE_MS); "fork": a child does the same with its own names
cat >"$T/job.py" <<EOF
import ctypes, os, sys, threading
ctypes.CDLL("$FAKES/libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL("$FAKES/libnccl.so.2", mode=ctypes.RTLD_LOCAL)
shim = ctypes.CDLL("$LIB", mode=ctypes.RTLD_LOCAL)
libc = ctypes.CDLL(None, use_errno=True)

class Uid(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]
class Ts(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]

comm = ctypes.c_void_p()
assert shim.ncclCommInitRank(ctypes.byref(comm), 1, Uid(), 0) == 0

def reduce_grads():
    assert shim.ncclAllReduce(None, None, ctypes.c_size_t(256), 7, 0, comm, None) == 0  # AR_LINE

def comm_thread():
    reduce_grads()  # THREAD_LINE

src, dst = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
managed = ctypes.c_void_p()
assert shim.cudaMallocManaged(ctypes.byref(managed), ctypes.c_size_t(64), 1) == 0

def fetch_plain():
    assert shim.cudaMemcpy(dst, src, ctypes.c_size_t(64), 1) == 0  # PLAIN_LINE

def fetch_managed():
    assert shim.cudaMemcpy(dst, managed, ctypes.c_size_t(64), 1) == 0  # MANAGED_LINE

def copy_thread():
    fetch_plain()  # COPY_PLAIN_LINE
    fetch_managed()  # COPY_MANAGED_LINE

def nap(s, ns):
    rem = Ts()
    rc = libc.nanosleep(ctypes.byref(Ts(s, ns)), ctypes.byref(rem))  # NAP_LINE
    return "rc %d errno %d" % (rc, ctypes.get_errno() if rc else 0)

def load_next_batch():
    r = nap(2, 0)  # SLEEP_LINE
    print("sleep", r, flush=True)

def child_wait():
    print("child sleep", nap(1, 0), flush=True)  # CHILD_LINE

def main():
    t = threading.Thread(target=comm_thread)
    t.start()
    c = threading.Thread(target=copy_thread)
    c.start()
    x = 0
    for i in range(300000):  # Python runs while the other thread enters its call
        x += i
    load_next_batch()  # MAIN_LINE
    t.join()
    c.join()
    if sys.argv[1:] == ["fork"]:
        pid = os.fork()
        if pid == 0:
            reduce_grads()  # the child's first capture: its sampler starts
            child_wait()  # CHILD_MAIN_LINE
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
    print("done", flush=True)

main()
EOF
J="$T/job.py"
line_of() { grep -n "# $1\$" "$J" | cut -d: -f1; }
# run NAME PY [env...] -- [args]: the job into $T/NAME, records as text in $T/NAME.txt
run() {
	local n=$1 py=$2
	shift 2
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	mkdir -p "$T/$n"
	env FAKE_CUDA_DEVICES=2 FAKE_NCCL_ALLREDUCE_MS=2500 FAKE_CUDART_COPY_MS=1200 NVLPROF_DIR="$T/$n" NVLPROF_VERBOSE=1 "${envs[@]}" \
		LD_PRELOAD="$PRELOAD" "$py" "$J" "$@" >"$T/$n.out" 2>"$T/$n.err"
	echo $? >"$T/$n.rc"
	for f in "$T/$n"/*.nvlp; do "$READ" "$f" | sed 's/$/ /' >"${f%.nvlp}.txt"; done
	cat "$T/$n"/*.txt >"$T/$n.txt"
}
# samples NAME TID: the PYSTACK texts of thread TID's kind-0 PYREFs, in order
samples() {
	local id
	for id in $(sed -n "s/^pyref kind=0 tid=$2 .*pystack=\([0-9]*\) \$/\1/p" "$T/$1.txt"); do
		[ "$id" = 0 ] && { echo none; continue; }
		sed -n "s/^pystack id=$id blob=//p" "$T/$1.txt" | head -1
	done
}
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

for py in "${PYS[@]}"; do
	v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	run "on$v" "$py"
	check_eq "$v: the job ran" "0 done" "$(cat "$T/on$v.rc") $(tail -1 "$T/on$v.out")"
	check_eq "$v: the main thread's sleep was not interrupted" "sleep rc 0 errno 0" "$(head -1 "$T/on$v.out")"
	check "$v: the thread inside ncclAllReduce: its sleep was not interrupted" \
		bash -c '! grep -q "interrupted" "$1"' _ "$T/on$v.err"
	main_tid=$(field "$(grep -m1 '^nccl fn=ncclCommInitRank ' "$T/on$v.txt")" tid)
	ar=$(grep -m1 '^nccl fn=ncclAllReduce ' "$T/on$v.txt")
	ar_tid=$(field "$ar" tid)
	check "$v: a sample of the main thread names nap <- load_next_batch <- main at their lines" \
		bash -c 'grep -q "^$2|$3|$4|" <<<"$1"' _ "$(samples "on$v" "$main_tid")" "$J:$(line_of NAP_LINE):nap" \
		"$J:$(line_of SLEEP_LINE):load_next_batch" "$J:$(line_of MAIN_LINE):main"
	check "$v: a sample of the thread inside ncclAllReduce names its chain" \
		bash -c 'grep -q "^$2|$3|" <<<"$1"' _ "$(samples "on$v" "$ar_tid")" \
		"$J:$(line_of AR_LINE):reduce_grads" "$J:$(line_of THREAD_LINE):comm_thread"
	# a thread blocked in a synchronous copy: the plain host-to-device one (no record) and one from
	# managed memory (a COPY record, its thread's id)
	cp_tid=$(field "$(grep -m1 '^copy fn=cudaMemcpy ' "$T/on$v.txt")" tid)
	check "$v: a sample of the thread inside a plain cudaMemcpy names its chain" \
		bash -c 'grep -q "^$2|$3|" <<<"$1"' _ "$(samples "on$v" "$cp_tid")" \
		"$J:$(line_of PLAIN_LINE):fetch_plain" "$J:$(line_of COPY_PLAIN_LINE):copy_thread"
	check "$v: a sample of the thread inside a recorded cudaMemcpy (managed memory) names its chain" \
		bash -c 'grep -q "^$2|$3|" <<<"$1"' _ "$(samples "on$v" "$cp_tid")" \
		"$J:$(line_of MANAGED_LINE):fetch_managed" "$J:$(line_of COPY_MANAGED_LINE):copy_thread"
	check "$v: samples are written on change only (at most a few for a 2 s sleep)" \
		test "$(samples "on$v" "$main_tid" | wc -l)" -le 12
	check "$v: the collective's own PYREF is kept (kind NCCL) beside the samples" \
		grep -q "^pyref kind=[1-9][0-9]* tid=$ar_tid .*call_id=$(field "$ar" call_id) " "$T/on$v.txt"
	check "$v: the sampler said what it cost" grep -q "Python sampler: [0-9]* rounds.* ns CPU per round" "$T/on$v.err"
	PLACE_AT_S=1.2 "$PLACES" "$T/on$v" >"$T/on$v.places" 2>&1
	check "$v: the analyzer: the main thread at 1.2 s was in load_next_batch (job.py:$(line_of SLEEP_LINE))" \
		grep -q "^place pid=$main_tid main at 1.2 s: [0-9.]* s in nap (job.py:$(line_of NAP_LINE)) <- load_next_batch (job.py:$(line_of SLEEP_LINE)) <- main (job.py:$(line_of MAIN_LINE))" "$T/on$v.places"
	top=$(grep -m1 "^top pid=$main_tid main: " "$T/on$v.places")
	check "$v: the analyzer: the main thread's top location: load_next_batch for ~2 s ($top)" \
		bash -c '[[ "$1" =~ main:\ (1\.[89]|2\.[0-9])\ s\ in\ nap\ \(job.py:$2\)\ \<-\ load_next_batch\ \(job.py:$3\) ]]' _ "$top" "$(line_of NAP_LINE)" "$(line_of SLEEP_LINE)"
	check "$v: the analyzer: the other thread's sample" \
		grep -q "^sample pid=$main_tid tid=$ar_tid: reduce_grads (job.py:$(line_of AR_LINE)) <- comm_thread" "$T/on$v.places"

	run "off$v" "$py" NVLPROF_PYSAMPLE_HZ=0
	check_eq "$v: NVLPROF_PYSAMPLE_HZ=0: no sample, no sampler thread" "0 done 0 0" \
		"$(cat "$T/off$v.rc") $(tail -1 "$T/off$v.out") $(grep -c '^pyref kind=0 ' "$T/off$v.txt") $(grep -c 'pysample' "$T/off$v.err")"
	check "$v: NVLPROF_PYSAMPLE_HZ=0: the collective's chain still" grep -q "^pyref kind=[1-9]" "$T/off$v.txt"
	run "nostacks$v" "$py" NVLPROF_STACKS=0
	check_eq "$v: NVLPROF_STACKS=0: no sample, no sampler thread" "0 done 0 0" \
		"$(cat "$T/nostacks$v.rc") $(tail -1 "$T/nostacks$v.out") $(grep -c '^pyref' "$T/nostacks$v.txt") $(grep -c 'pysample' "$T/nostacks$v.err")"
	run "pipe$v" "$py" NVLPROF_PYWALK_TEST=pipe
	check "$v: reads through the pipe fallback: the main thread's sample" \
		bash -c 'grep -q "|$2|" <<<"$1"' _ "$(samples "pipe$v" "$(field "$(grep -m1 '^nccl fn=ncclCommInitRank ' "$T/pipe$v.txt")" tid)")" \
		"$J:$(line_of SLEEP_LINE):load_next_batch"
	run "skew$v" "$py" NVLPROF_PYWALK_TEST=skew
	check_eq "$v: a layout the self-check refused: no sample, no sampler" "0 done 0 0" \
		"$(cat "$T/skew$v.rc") $(tail -1 "$T/skew$v.out") $(grep -c '^pyref kind=0 ' "$T/skew$v.txt") $(grep -c 'pysample' "$T/skew$v.err")"
	# a fork child: no sampler thread of its own until its first capture starts one (TSan
	# cannot start threads after a multi-threaded fork: the writer's already dies there)
	if [ "${SAN:-}" = thread ]; then
		echo "SKIP: $v: fork: SAN=thread starts no thread after a multi-threaded fork"
		continue
	fi
	run "fork$v" "$py" FAKE_NCCL_ALLREDUCE_MS=600 -- fork
	check_eq "$v: fork: parent and child ran" "0 done 2" "$(cat "$T/fork$v.rc") $(tail -1 "$T/fork$v.out") $(ls "$T/fork$v"/*.nvlp | wc -l)"
	child=$(grep -l '^note code=fork_child ' "$T/fork$v"/*.txt | head -1)
	ctid=$(sed -n 's/^header .*|pid=\([0-9]*\)|.*/\1/p' "$child" | head -1)
	check "$v: fork: the child's main thread sampled in child_wait" \
		grep -q "^pystack id=[0-9]* blob=.*|$J:$(line_of CHILD_LINE):child_wait|$J:$(line_of CHILD_MAIN_LINE):main|" "$child"
	check "$v: fork: the child's sample is kind 0 of its main thread" grep -q "^pyref kind=0 tid=$ctid " "$child"
	check_eq "$v: fork: the child's sleep was not interrupted" "child sleep rc 0 errno 0" "$(grep '^child sleep' "$T/fork$v.out")"
done

# no Python: no sampler thread at all
if [ -x "$PROGS/hk_dlopen" ]; then
	mkdir -p "$T/c"
	FAKE_CUDA_DEVICES=2 NVLPROF_VERBOSE=1 NVLPROF_DIR="$T/c" LD_PRELOAD="$PRELOAD" "$PROGS/hk_dlopen" "$FAKES/libhk_workload.so" 2 >/dev/null 2>"$T/c.err"
	"$READ" "$T/c"/*.nvlp >"$T/c.txt"
	check "not Python: records written" grep -q '^nccl ' "$T/c.txt"
	check_eq "not Python: no sample, no sampler thread" "0 0" "$(grep -c '^pyref' "$T/c.txt") $(grep -c pysample "$T/c.err")"
fi
exit $((FAILED > 0))

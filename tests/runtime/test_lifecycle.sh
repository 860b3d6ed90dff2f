#!/usr/bin/env bash
# test_lifecycle.sh: the shim's runtime ends every trace whole (exit, threads, signals, _exit, fork,
# exec, kill -9) and never changes the job (bad config, unwritable directory, disabled).
source "$(dirname "$0")/../lib.sh"
# ThreadSanitizer cannot follow a multi-threaded process into a fork child that starts threads
# (it dies, or reports "dup thread"): the fork scenarios are skipped under SAN=thread.
export TSAN_OPTIONS=${TSAN_OPTIONS:-die_after_fork=0}
# GCC 12's AddressSanitizer allocator takes no lock around fork: a child of a process whose other
# threads allocate can deadlock in malloc (the shim's own child must malloc to open its trace).
FORK_OK=1 FORK_STRESS_OK=1
[ "${SAN:-}" = thread ] && FORK_OK=0
[ "${SAN:-}" = address ] && FORK_STRESS_OK=0
APP="$PROGS/rt_app"
READ="$PROGS/rt_read"
for f in "$APP" "$READ" "$LIB" "$FAKES/libnccl.so.2"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done

# wait_ready DIR: until the app printed ready (60 s at most: a loaded machine starts it late)
wait_ready() { for _ in $(seq 1200); do grep -q ready "$1/.out" 2>/dev/null && return 0; sleep 0.05; done; return 1; }
# rd FILE KEY: one value from rt_read's summary
rd() { "$READ" "$1" | sed -n "s/^$2=//p"; }
# fresh DIR: an empty trace directory for one scenario
fresh() { rm -rf "$T/$1"; mkdir -p "$T/$1"; echo "$T/$1"; }
# run DIR CMD...: run with the shim preloaded, traces into DIR; stdout/stderr/status in DIR/.out .err .rc
run() {
	local d=$1; shift
	(cd "$d" && NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" timeout 60 "$@" >"$d/.out" 2>"$d/.err")
	echo $? >"$d/.rc"
}
ntraces() { ls "$1"/tr/*.nvlp 2>/dev/null | wc -l; }
one() { ls "$1"/tr/*.nvlp 2>/dev/null | head -1; }

# --- normal exit: complete file, END(reason 0), every call recorded, quiet on stderr ---
d=$(fresh normal)
run "$d" env RANK=3 LOCAL_RANK=1 WORLD_SIZE=8 NVLPROF_TEST_MARK=x1 "$APP" calls 1000
f=$(one "$d")
check_eq "normal: exit status" 0 "$(cat "$d/.rc")"
check_eq "normal: one trace" 1 "$(ntraces "$d")"
check_eq "normal: complete" 1 "$(rd "$f" complete)"
check "normal: no rank_ended finding for a normal exit" sh -c '! "$1" report "$2" 2>&1 | grep -q rank_ended' _ "$CLI" "$d/tr"
check_eq "normal: END reason exit" 0 "$(rd "$f" end_reason)"
check_eq "normal: EXITINFO, status unknown (main returned)" "1 -1 0" "$(rd "$f" exitinfo) $(rd "$f" exit_status) $(rd "$f" exit_signal)"
check_eq "normal: all calls recorded" 1000 "$(rd "$f" allreduce)"
check_eq "normal: nothing after END" 0 "$(rd "$f" after_end)"
check_eq "normal: END counts the records before it" "$(($(rd "$f" records) - 1))" "$(rd "$f" end_records)"
check_eq "normal: no stderr" "" "$(cat "$d/.err")"
check_eq "normal: header rank" 3 "$(rd "$f" h.rank)"
check_eq "normal: header local_rank" 1 "$(rd "$f" h.local_rank)"
check_eq "normal: header world_size" 8 "$(rd "$f" h.world_size)"
check_eq "normal: header env.NVLPROF_*" x1 "$(rd "$f" h.env.NVLPROF_TEST_MARK)"
check_eq "normal: header cmdline" "$APP calls 1000" "$(rd "$f" h.cmdline)"
pid=$(rd "$f" h.pid)
check_eq "normal: file named host-pid.nvlp" "$(rd "$f" h.host)-$pid.nvlp" "$(basename "$f")"
d=$(fresh slurm)
run "$d" env -u RANK SLURM_PROCID=5 SLURM_NTASKS=6 "$APP" calls 1
check_eq "header: rank from SLURM_PROCID" 5 "$(rd "$(one "$d")" h.rank)"
check_eq "header: world_size from SLURM_NTASKS" 6 "$(rd "$(one "$d")" h.world_size)"

# --- a process that records nothing: no writer thread, no file, no directory ---
d=$(fresh idle)
run "$d" ls /proc/self/task
check_eq "idle: no extra thread" 1 "$(wc -l <"$d/.out")"
check "idle: no trace directory created" test ! -e "$d/tr"

# --- NVLPROF_VERBOSE=1: at exit, the file with records and drops, then the CPU time nvlprof took ---
d=$(fresh verbose)
run "$d" env NVLPROF_VERBOSE=1 "$APP" calls 10
check_eq "verbose: two stderr lines" 2 "$(wc -l <"$d/.err")"
check "verbose: names the file and counts" grep -q "^nvlprof: wrote $(one "$d"): [0-9]* records, 0 dropped" "$d/.err"
check "verbose: CPU time of the process and of the writer" \
	grep -qE "^nvlprof: CPU time: process [0-9]+\.[0-9] ms; nvlprof's threads: writer [0-9]+\.[0-9] ms" "$d/.err"

# --- exit handlers of libraries loaded after recording began (CUPTI, libnvperf_host) run after
# the trace is ended, so the final CUPTI flush still finds them alive ---
d=$(fresh late)
cat >"$d/late.c" <<'EOF'
#include <stdlib.h>
#include <unistd.h>
static void bye(void) { (void)!write(2, "late exit handler\n", 18); }
__attribute__((constructor)) static void init(void) { atexit(bye); }
EOF
if ${CC:-gcc} -shared -fPIC -o "$d/late.so" "$d/late.c" 2>"$d/.cc"; then
	run "$d" env NVLPROF_VERBOSE=1 NVLPROF_FLUSH_MS=20 "$APP" late "$d/late.so" 200
	check_eq "late library: status" 0 "$(cat "$d/.rc")"
	check_eq "late library: trace ended before its exit handler ran" \
		"nvlprof: wrote|late exit handler" "$(grep -v "^nvlprof: CPU time: " "$d/.err" | sed 's/^\(nvlprof: wrote\).*/\1/' | paste -sd'|')"
else
	fail "late library: cannot compile a test library: $(head -1 "$d/.cc")"
fi

# --- exit() from a non-main thread while four others emit ---
d=$(fresh exit_thread)
run "$d" "$APP" exit-thread
f=$(one "$d")
check_eq "exit-thread: status from exit()" 7 "$(cat "$d/.rc")"
check_eq "exit-thread: complete" 1 "$(rd "$f" complete)"
check "exit-thread: records present" test "$(rd "$f" allreduce)" -gt 100
check_eq "exit-thread: EXITINFO status from exit()" "1 7 0" "$(rd "$f" exitinfo) $(rd "$f" exit_status) $(rd "$f" exit_signal)"
check "exit-thread: report says the rank exited with status 7" \
	grep -q "rank_ended: Rank 0 (pid [0-9]* on .*) exited with status 7 after [0-9]* NCCL calls (the last ncclAllReduce #[0-9]*)$" <("$CLI" report "$d/tr" 2>&1)

# --- SIGTERM / SIGHUP with the default disposition: file complete, status = the signal ---
# (SIGINT and SIGQUIT are ignored in a script's background jobs, so our handler is not installed
# for them here: the same rule that leaves them alone is what the test would see.)
for sig in TERM HUP; do
	d=$(fresh sig$sig)
	mkdir -p "$d/tr"
	(cd "$d" && NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" exec "$APP" loop >"$d/.out" 2>"$d/.err") &
	p=$!
	check "SIG$sig: app ready" wait_ready "$d"
	sleep 0.2
	kill -$sig $p
	{ wait $p; } 2>/dev/null
	rc=$?
	check_eq "SIG$sig: status 128+signal" $((128 + $(kill -l $sig))) "$rc"
	f=$(one "$d")
	check_eq "SIG$sig: complete" 1 "$(rd "$f" complete)"
	check_eq "SIG$sig: END reason signal" 1 "$(rd "$f" end_reason)"
	check_eq "SIG$sig: EXITINFO names the signal" "$(kill -l $sig) -1" "$(rd "$f" exit_signal) $(rd "$f" exit_status)"
	check "SIG$sig: records present" test "$(rd "$f" allreduce)" -gt 0
	check_eq "SIG$sig: quiet" "" "$(cat "$d/.err")"
	check "SIG$sig: report says which signal ended the rank" \
		grep -q "rank_ended: Rank 0 .* ended by signal $(kill -l $sig) (" <("$CLI" report "$d/tr" 2>&1)
done

# --- the application's own SIGTERM handler still runs (ours never replaces it) ---
d=$(fresh handler)
mkdir -p "$d/tr"
(cd "$d" && NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" exec "$APP" handler >"$d/.out" 2>"$d/.err") &
p=$!
check "handler: app ready" wait_ready "$d"
kill -TERM $p
wait $p
check_eq "handler: app exits normally" 0 "$?"
check "handler: app handler ran" grep -q "app handler ran" "$d/.out"
check_eq "handler: complete" 1 "$(rd "$(one "$d")" complete)"

# --- _exit(): trace ended first, status kept ---
d=$(fresh uexit)
run "$d" "$APP" uexit 100 4
f=$(one "$d")
check_eq "_exit: status" 4 "$(cat "$d/.rc")"
check_eq "_exit: complete" 1 "$(rd "$f" complete)"
check_eq "_exit: END reason _exit" 2 "$(rd "$f" end_reason)"
check_eq "_exit: EXITINFO status" 4 "$(rd "$f" exit_status)"
check_eq "_exit: all calls recorded" 100 "$(rd "$f" allreduce)"
check "_exit: report says exited with status 4 (_exit)" \
	grep -q "rank_ended: .* exited with status 4 (_exit) after 100 NCCL calls (the last ncclAllReduce #100)$" <("$CLI" report "$d/tr" 2>&1)

# --- Python's os._exit with NCCL loaded RTLD_LOCAL (as torch does) ---
if command -v python3 >/dev/null; then
	d=$(fresh python)
	cat >"$d/job.py" <<EOF
import ctypes, os
ctypes.CDLL("$FAKES/libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL("$FAKES/libnccl.so.2", mode=ctypes.RTLD_LOCAL)
# Call through the preloaded shim, as torch's PLT would (a ctypes handle to the fake itself
# would bypass symbol interposition); the shim must find the RTLD_LOCAL library on its own.
nccl = ctypes.CDLL("$LIB", mode=ctypes.RTLD_LOCAL)
class Uid(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]
uid = Uid()
assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
comm = ctypes.c_void_p()
assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
for _ in range(5):
    assert nccl.ncclAllReduce(None, None, ctypes.c_size_t(1024), 7, 0, comm, None) == 0
print("done", flush=True)
os._exit(3)
EOF
	run "$d" python3 "$d/job.py"
	f=$(one "$d")
	check_eq "python os._exit: status" 3 "$(cat "$d/.rc")"
	check_eq "python os._exit: output" done "$(cat "$d/.out")"
	check_eq "python os._exit: complete" 1 "$(rd "$f" complete)"
	check_eq "python os._exit: calls recorded" 5 "$(rd "$f" allreduce)"

	# subprocess runs its child through vfork: that child's exec must leave our trace alone.
	d=$(fresh vfork)
	sed -e 's/^os._exit(3)$//' "$T/python/job.py" >"$d/job.py"
	cat >>"$d/job.py" <<EOF
import subprocess
subprocess.run(["true"], check=True)
try:
    subprocess.run(["/nonexistent/cmd"])  # the vfork child's exec fails: it _exit()s
except FileNotFoundError:
    pass
for _ in range(5):
    assert nccl.ncclAllReduce(None, None, ctypes.c_size_t(1024), 7, 0, comm, None) == 0
EOF
	run "$d" python3 "$d/job.py"
	f=$(one "$d")
	check_eq "vfork+exec child: status" 0 "$(cat "$d/.rc")"
	check_eq "vfork+exec child: one trace (the child recorded nothing)" 1 "$(ntraces "$d")"
	check_eq "vfork+exec child: parent trace complete" 1 "$(rd "$f" complete)"
	check_eq "vfork+exec child: parent ended at exit, not at the child's exec" 0 "$(rd "$f" end_reason)"
	check_eq "vfork+exec child: parent kept recording" 10 "$(rd "$f" allreduce)"
	check_eq "vfork child's _exit: not the parent's status (main returned: -1)" -1 "$(rd "$f" exit_status)"
fi

# --- kill -9 after > 1.5 s: readable, cut short, holding records from the last second ---
d=$(fresh kill9)
mkdir -p "$d/tr"
(cd "$d" && NVLPROF_FLUSH_MS=200 NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" exec "$APP" loop >"$d/.out" 2>"$d/.err") &
p=$!
# The writer's periodic flushes (every 200 ms here) are what is tested: killed 2 s after it said
# ready, the trace (which starts before ready) must reach to within a second of the kill. No wait
# on the trace itself: the time of the kill is fixed, what the file holds then is the result.
check "kill -9: app ready" wait_ready "$d"
t_ready=$(date +%s%3N)
sleep 2
t_kill=$(date +%s%3N)
kill -KILL $p
{ wait $p; } 2>/dev/null
f=$(one "$d")
check_eq "kill -9: readable" 0 "$(rd "$f" read_rc)"
check_eq "kill -9: not complete" 0 "$(rd "$f" complete)"
check_eq "kill -9: truncated" 1 "$(rd "$f" truncated)"
check "kill -9: report says the rank ended without an END record" \
	grep -q "rank_ended: Rank 0 .* ended without an END record (killed by SIGKILL" <("$CLI" report "$d/tr" 2>&1)
span=$(rd "$f" span_ms)
check "kill -9: records up to the last second before the kill (span ${span} ms, killed $((t_kill - t_ready)) ms after ready)" \
	test "$span" -ge $((t_kill - t_ready - 1000))

# --- the same with a slow app (a call every 10 ms): what reaches the file is the periodic flush's,
# killed after 1.5 s
d=$(fresh kill9slow)
mkdir -p "$d/tr"
(cd "$d" && NVLPROF_FLUSH_MS=200 NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" exec "$APP" slow-loop >"$d/.out" 2>"$d/.err") &
p=$!
check "kill -9 slow app: ready" wait_ready "$d"
t_ready=$(date +%s%3N)
sleep 1.5 # before a flush period of 2 s would have written anything
t_kill=$(date +%s%3N)
kill -KILL $p
{ wait $p; } 2>/dev/null
span=$(rd "$(one "$d")" span_ms)
check "kill -9 slow app: flushed every 200 ms, records up to the last second (span ${span:-none} ms, killed $((t_kill - t_ready)) ms after ready)" \
	test "${span:-0}" -ge $((t_kill - t_ready - 1000))

if [ $FORK_OK = 1 ]; then
# --- fork: the child records into its own file, the parent's file has none of its records ---
d=$(fresh fork)
run "$d" "$APP" fork 10 7
check_eq "fork: status" 0 "$(cat "$d/.rc")"
check_eq "fork: two traces" 2 "$(ntraces "$d")"
child=$(sed -n 's/^child=\([0-9]*\).*/\1/p' "$d/.out")
cf=$(ls "$d"/tr/*-"$child".nvlp 2>/dev/null)
pf=$(ls "$d"/tr/*.nvlp | grep -v -- "-$child.nvlp")
check_eq "fork: parent complete" 1 "$(rd "$pf" complete)"
check_eq "fork: parent holds only its own calls" 20 "$(rd "$pf" allreduce)"
check_eq "fork: child complete" 1 "$(rd "$cf" complete)"
check_eq "fork: child holds its calls" 7 "$(rd "$cf" allreduce)"
check_eq "fork: child's ppid is the parent" "$(rd "$pf" h.pid)" "$(rd "$cf" h.ppid)"
check_eq "fork: child notes its parent" 1 "$(rd "$cf" fork_notes)"

d=$(fresh fork_silent)
run "$d" "$APP" fork 5 0
check_eq "fork: a child that records nothing leaves no file" 1 "$(ntraces "$d")"

# --- fork while 8 threads emit, 50 times: no deadlock ---
if [ $FORK_STRESS_OK = 1 ]; then
d=$(fresh fork_stress)
run "$d" env NVLPROF_STACKS=0 "$APP" fork-stress 50
check_eq "fork-stress: finished in time" 0 "$(cat "$d/.rc")"
check_eq "fork-stress: every child ok" "forks=50 bad=0" "$(cat "$d/.out")"
check_eq "fork-stress: 51 traces" 51 "$(ntraces "$d")"
incomplete=0
for f in "$d"/tr/*.nvlp; do [ "$(rd "$f" complete)" = 1 ] || incomplete=$((incomplete + 1)); done
check_eq "fork-stress: all traces complete" 0 "$incomplete"
else
	echo "SKIP: fork-stress (AddressSanitizer's allocator is not fork-safe with other threads)"
fi
else
	echo "SKIP: fork scenarios (ThreadSanitizer does not support threads in fork children)"
fi

# --- exec: a recording program execs another: two complete files ---
d=$(fresh exec)
run "$d" "$APP" exec 10 "$APP" calls 5
check_eq "exec: status" 0 "$(cat "$d/.rc")"
check_eq "exec: two traces" 2 "$(ntraces "$d")"
f0=$(ls "$d"/tr/*.nvlp | grep -v '\.1\.nvlp$')
f1=$(ls "$d"/tr/*.1.nvlp 2>/dev/null)
check_eq "exec: first complete" 1 "$(rd "$f0" complete)"
check_eq "exec: first ends with reason exec" 3 "$(rd "$f0" end_reason)"
check_eq "exec: first holds its calls" 10 "$(rd "$f0" allreduce)"
check_eq "exec: second (same pid, .1) complete" 1 "$(rd "$f1" complete)"
check_eq "exec: second holds its calls" 5 "$(rd "$f1" allreduce)"
check_eq "exec: same pid" "$(rd "$f0" h.pid)" "$(rd "$f1" h.pid)"

d=$(fresh exec_fail)
run "$d" "$APP" exec 10 /nonexistent/prog
check_eq "failed exec: status" 1 "$(cat "$d/.rc")"
check_eq "failed exec: recording resumes in a second file" 2 "$(ntraces "$d")"
f0=$(ls "$d"/tr/*.nvlp | grep -v '\.1\.nvlp$')
f1=$(ls "$d"/tr/*.1.nvlp 2>/dev/null)
check_eq "failed exec: first ends with reason exec" 3 "$(rd "$f0" end_reason)"
check_eq "failed exec: second complete" 1 "$(rd "$f1" complete)"
check_eq "failed exec: second holds the later calls" 10 "$(rd "$f1" allreduce)"

# --- unwritable directory: one warning, job unchanged ---
d=$(fresh unwritable)
(cd "$d" && NVLPROF_DIR=/etc/passwd/x LD_PRELOAD="$PRELOAD" "$APP" calls 100 >"$d/.out" 2>"$d/.err")
check_eq "unwritable: status" 0 "$?"
check_eq "unwritable: output unchanged" "calls=100" "$(cat "$d/.out")"
check_eq "unwritable: one warning line" 1 "$(wc -l <"$d/.err")"
check "unwritable: the warning says why" grep -q "^nvlprof: cannot write traces to /etc/passwd/x: Not a directory; recording disabled$" "$d/.err"

# --- a write error later (file size limit, like a full disk): one warning, job unchanged ---
d=$(fresh diskfull)
(cd "$d" && ulimit -f 64 && trap '' XFSZ && NVLPROF_STACKS=0 NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" \
	"$APP" calls 2000000 >"$d/.out" 2>"$d/.err")
check_eq "write error: status" 0 "$?"
check_eq "write error: output unchanged" "calls=2000000" "$(cat "$d/.out")"
check_eq "write error: one warning line" 1 "$(wc -l <"$d/.err")"
# the writer thread (a periodic flush: "; recording stopped") or the final flush at exit (no more
# recording to stop) meets the limit first, depending on the machine's load: either says why
check "write error: the warning says why" grep -Eq "^nvlprof: cannot write trace .*: File too large(; recording stopped)?$" "$d/.err"
check_eq "write error: what was written stays readable" 0 "$(rd "$(one "$d")" read_rc)"

# --- bad values: one warning each, defaults used, noted in the trace ---
d=$(fresh badenv)
run "$d" env NVLPROF_FLUSH_MS=abc NVLPROF_BUFFER_KB=-5 NVLPROF_UM=maybe NVLPROF_STACKS=2 NVLPROF_LINKS=pcie "$APP" calls 20
check_eq "bad env: status" 0 "$(cat "$d/.rc")"
check_eq "bad env: output unchanged" "calls=20" "$(cat "$d/.out")"
check_eq "bad env: five warnings" 5 "$(grep -c "^nvlprof: NVLPROF_[A-Z_]*='.*': expected .*; using default " "$d/.err")"
check "bad env: names value and default" grep -q "^nvlprof: NVLPROF_FLUSH_MS='abc': expected an integer 1..1000; using default 500$" "$d/.err"
check "bad env: NVLPROF_LINKS named" grep -q "^nvlprof: NVLPROF_LINKS='pcie': expected auto or nvml; using default auto$" "$d/.err"
check "bad env: NVLPROF_UM named, with its words" grep -q "^nvlprof: NVLPROF_UM='maybe': expected auto, 0, 1 or attach; using default auto$" "$d/.err"
check_eq "bad env: noted in the trace" 5 "$(rd "$(one "$d")" config_notes)"
check_eq "bad env: still records" 20 "$(rd "$(one "$d")" allreduce)"

# --- NVLPROF_CUPTI: 1 (the default), 0, lazy or startup[:MS]; bad values named; the header says which
# was used, with where link counters come from ---
for v in startup:abc startup:-1 startupx 2 lazyx; do
	d=$(fresh "badcupti_$v")
	run "$d" env NVLPROF_CUPTI="$v" "$APP" calls 20
	check "bad NVLPROF_CUPTI=$v: one warning naming it, CUPTI on as by default" grep -qx \
		"nvlprof: NVLPROF_CUPTI='$v': expected 0, 1, lazy, startup or startup:MS (MS 0..3600000); using default 1" "$d/.err"
	check "bad NVLPROF_CUPTI=$v: capture key cupti=1" sh -c \
		'"$1" dump "$2" | grep -m1 "^header " | grep -q "cupti=1 "' _ "$CLI" "$(one "$d")"
done
# VAR=VALUE ... -> the header's cupti and links keys
for c in "-u NVLPROF_CUPTI|1|auto" "NVLPROF_CUPTI=startup|startup:2000|nvml" \
	"NVLPROF_CUPTI=startup:500|startup:500|nvml" "NVLPROF_CUPTI=1|1|auto" "NVLPROF_CUPTI=0|0|auto" \
	"NVLPROF_CUPTI=lazy|lazy|nvml" \
	"-u NVLPROF_CUPTI NVLPROF_KERNELS=all|1|auto" "NVLPROF_CUPTI=startup NVLPROF_KERNELS=all|startup:2000|nvml"; do
	IFS='|' read -r set want links <<<"$c"
	d=$(fresh "cupti_$(echo "$set" | tr ' =:' '___')")
	# shellcheck disable=SC2086 # $set: env's arguments
	run "$d" env $set "$APP" calls 20
	check "$set: no warning, capture key cupti=$want links=$links" sh -c \
		'[ ! -s "$1/.err" ] && "$2" dump "$3" | grep -m1 "^header " | grep -q "cupti=$4 .*links=$5 "' \
		_ "$d" "$CLI" "$(one "$d")" "$want" "$links"
done

# NVLPROF_UM's words -> the header's um key
for c in "-u NVLPROF_UM|auto" "NVLPROF_UM=0|0" "NVLPROF_UM=1|1" "NVLPROF_UM=attach|attach"; do
	IFS='|' read -r set want <<<"$c"
	d=$(fresh "um_$(echo "$set" | tr ' =:' '___')")
	# shellcheck disable=SC2086 # $set: env's arguments
	run "$d" env $set "$APP" calls 20
	check "$set: no warning, capture key um=$want" sh -c \
		'[ ! -s "$1/.err" ] && "$2" dump "$3" | grep -m1 "^header " | grep -q " um=$4 "' \
		_ "$d" "$CLI" "$(one "$d")" "$want"
done

# --- NVLPROF_DISABLE=1: pure pass-through ---
d=$(fresh disabled)
run "$d" env NVLPROF_DISABLE=1 "$APP" calls 100
check_eq "disabled: status" 0 "$(cat "$d/.rc")"
check_eq "disabled: output unchanged" "calls=100" "$(cat "$d/.out")"
check_eq "disabled: no trace" 0 "$(ntraces "$d")"
check_eq "disabled: no stderr" "" "$(cat "$d/.err")"

# --- CUDA_INJECTION64_PATH points at the shim itself, unless set or CUPTI is off ---
got=$(LD_PRELOAD="$PRELOAD" env -u CUDA_INJECTION64_PATH env | sed -n 's/^CUDA_INJECTION64_PATH=//p')
check_eq "injection: set to the shim's absolute path" "$(readlink -f "$LIB")" "$got"
got=$(CUDA_INJECTION64_PATH=/x.so LD_PRELOAD="$PRELOAD" env | sed -n 's/^CUDA_INJECTION64_PATH=//p')
check_eq "injection: an existing value is kept" /x.so "$got"
got=$(NVLPROF_CUPTI=0 LD_PRELOAD="$PRELOAD" env -u CUDA_INJECTION64_PATH env | grep -c '^CUDA_INJECTION64_PATH=')
check_eq "injection: not set with NVLPROF_CUPTI=0" 0 "$got"

exit $((FAILED > 0))

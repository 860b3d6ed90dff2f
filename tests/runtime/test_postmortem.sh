#!/usr/bin/env bash
# test_postmortem.sh: what a trace says about a process that died (issue 26): heartbeats (last
# alive), calls in progress (INFLIGHT), fatal signals (FATAL, status unchanged), OOM-kill counts.
source "$(dirname "$0")/../lib.sh"
APP="$PROGS/rt_app"
READ="$PROGS/rt_read"
for f in "$APP" "$READ" "$LIB" "$FAKES/libnccl.so.2"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
# The sanitizers take SIGSEGV/SIGBUS/SIGFPE (and print reports on SIGABRT) unless told not to.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:disable_coredump=0"
export TSAN_OPTIONS="${TSAN_OPTIONS:-}:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:die_after_fork=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0"

wait_ready() { for _ in $(seq 1200); do grep -q ready "$1/.out" 2>/dev/null && return 0; sleep 0.05; done; return 1; }
rd() { "$READ" "$1" | sed -n "s/^$2=//p"; }
fresh() { rm -rf "$T/$1"; mkdir -p "$T/$1/tr"; echo "$T/$1"; }
run() {
	local d=$1; shift
	{ (cd "$d" && NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" timeout 60 "$@" >"$d/.out" 2>"$d/.err"); } 2>/dev/null
	echo $? >"$d/.rc"
}
# bg DIR CMD...: the same in the background; its pid in $p
bg() {
	local d=$1; shift
	(cd "$d" && NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" exec "$@" >"$d/.out" 2>"$d/.err") &
	p=$!
}
one() { ls "$1"/tr/*.nvlp 2>/dev/null | head -1; }
ms_now() { echo $(($(date +%s%N) / 1000000)); }
NCCL_ALL_REDUCE=11 NCCL_COMM_INIT_RANK=1 K_NCCL=3 K_COPY=4 CUDA_MALLOC_MANAGED=8

# --- heartbeats: at least one a second while idle, CLOCK_REALTIME beside the monotonic time ---
d=$(fresh idle)
run "$d" "$APP" idle 3000
f=$(one "$d")
check_eq "idle: status" 0 "$(cat "$d/.rc")"
check_eq "idle: complete" 1 "$(rd "$f" complete)"
hb=$(rd "$f" heartbeats)
check "idle: >= 1 heartbeat a second over 3 s (got $hb)" test "${hb:-0}" -ge 3
gap=$(rd "$f" heartbeat_gap_ms)
check "idle: no gap over 1 s between heartbeats (largest ${gap} ms)" test "${gap:-9999}" -le 1000
span=$(rd "$f" heartbeat_span_ms)
check "idle: heartbeats span the idle time (${span} ms)" test "${span:-0}" -ge 2400
# other = CLOCK_REALTIME: its distance from the header's t_real is the monotonic distance
dm=$((($(rd "$f" heartbeat_last_mono) - $(rd "$f" h.t_mono)) / 1000000))
dr=$((($(rd "$f" heartbeat_last_real) - $(rd "$f" h.t_real)) / 1000000))
check "idle: heartbeat other is CLOCK_REALTIME (mono +${dm} ms, real +${dr} ms)" test $((dm - dr)) -le 20 -a $((dr - dm)) -le 20
check_eq "idle: a short call is never in progress for long" 0 "$(rd "$f" inflight)"
check_eq "idle: no fatal" 0 "$(rd "$f" fatals)"

# --- kill -9: the last heartbeat on disk is within ~1.2 s of the kill ---
d=$(fresh kill9)
bg "$d" "$APP" idle 60000
check "kill -9: app ready" wait_ready "$d"
sleep 2.7
t_kill=$(ms_now)
kill -KILL $p
{ wait $p; } 2>/dev/null
f=$(one "$d")
check_eq "kill -9: readable" 0 "$(rd "$f" read_rc)"
check_eq "kill -9: not complete" 0 "$(rd "$f" complete)"
last=$(($(rd "$f" heartbeat_last_real) / 1000000))
check "kill -9: last heartbeat $((t_kill - last)) ms before the kill (<= 1200)" test $((t_kill - last)) -le 1200 -a $((t_kill - last)) -ge 0

# --- a call blocked for > 1 s: one INFLIGHT while it waits, the call's own fields ---
d=$(fresh blocked)
run "$d" env FAKE_NCCL_BLOCK_MS=2500 FAKE_NCCL_BLOCK_AT=2 "$APP" calls 5
f=$(one "$d")
check_eq "blocked: status" 0 "$(cat "$d/.rc")"
check_eq "blocked: complete, all calls" "1 5" "$(rd "$f" complete) $(rd "$f" allreduce)"
check_eq "blocked: written once while in progress" 1 "$(rd "$f" inflight)"
check_eq "blocked: the 2nd ncclAllReduce of the main thread" \
	"kind=$K_NCCL fn=$NCCL_ALL_REDUCE tid=$(rd "$f" h.pid) seq=2 count=1024 dtype=7 op=0 peer=-1 rank=0 nranks=1 bytes=4096" \
	"$(rd "$f" inflight_first | sed 's/ call_id=.*//')"
age=$(rd "$f" inflight_first_age_ms)
check "blocked: noted after 1 s in progress, before it returned (${age} ms)" test "${age:-0}" -ge 1000 -a "${age:-0}" -lt 2500
check "blocked: names the communicator" test "$(rd "$f" inflight_first_comm)" != 0

# --- SIGTERM while a call is in progress: noted after 1 s and again at the end ---
d=$(fresh term)
bg "$d" env FAKE_NCCL_BLOCK_MS=30000 FAKE_NCCL_BLOCK_AT=2 "$APP" loop
check "term: app ready" wait_ready "$d"
sleep 2.5
kill -TERM $p
{ wait $p; } 2>/dev/null
rc=$?
f=$(one "$d")
check_eq "term: status 128+TERM" $((128 + $(kill -l TERM))) "$rc"
check_eq "term: complete, ended by the signal" "1 1" "$(rd "$f" complete) $(rd "$f" end_reason)"
check_eq "term: once by the writer, once at the end" 2 "$(rd "$f" inflight)"
check_eq "term: both before END" 2 "$(rd "$f" inflight_before_end)"
check_eq "term: the same call both times" "$(rd "$f" inflight_first)" "$(rd "$f" inflight_last)"
check "term: the last one written at the end ($(rd "$f" inflight_last_age_ms) ms in)" test "$(rd "$f" inflight_last_age_ms)" -ge 2500

# --- exit() while another thread is blocked: the end names it ---
d=$(fresh exit_blocked)
run "$d" env FAKE_NCCL_BLOCK_MS=20000 FAKE_NCCL_BLOCK_AT=2 "$APP" block-thread 300
f=$(one "$d")
check_eq "exit, thread blocked: status" 0 "$(cat "$d/.rc")"
check_eq "exit, thread blocked: one INFLIGHT, at the end" "1 1" "$(rd "$f" inflight) $(rd "$f" complete)"
check "exit, thread blocked: another thread's call" test "$(rd "$f" inflight_first | sed 's/.*tid=\([0-9]*\).*/\1/')" != "$(rd "$f" h.pid)"

# --- kill -9 inside ncclCommInitRank: the trace says where ---
d=$(fresh init)
bg "$d" env FAKE_NCCL_BLOCK_FN=CommInitRank FAKE_NCCL_BLOCK_MS=30000 "$APP" calls 1
sleep 3
kill -KILL $p
{ wait $p; } 2>/dev/null
f=$(one "$d")
check_eq "init killed: not complete" 0 "$(rd "$f" complete)"
check_eq "init killed: INFLIGHT in ncclCommInitRank, rank 0 of 1" "1 kind=$K_NCCL fn=$NCCL_COMM_INIT_RANK rank=0 nranks=1" \
	"$(rd "$f" inflight) $(rd "$f" inflight_first | sed 's/ tid=.*peer=-1//; s/ bytes=.*//')"
check "init killed: the communicator's hash" test "$(rd "$f" inflight_first_comm)" != 0

# --- SIGTERM inside a managed allocation (where lazy's CUPTI attach comes; run 16 hung in one) ---
d=$(fresh managed)
bg "$d" env FAKE_CUDART_MANAGED_MS=30000 "$APP" managed 0
check "managed: app ready" wait_ready "$d"
sleep 2.5
kill -TERM $p
{ wait $p; } 2>/dev/null
f=$(one "$d")
check_eq "managed: INFLIGHT in cudaMallocManaged, by the writer and at the end" "2 kind=$K_COPY fn=$CUDA_MALLOC_MANAGED" \
	"$(rd "$f" inflight) $(rd "$f" inflight_last | sed 's/ tid=.*//')"
j=$("$CLI" report --json "$d/tr" 2>/dev/null | python3 -c 'import json,sys; print(" ".join(f["evidence"].get("in_flight","") for f in json.load(sys.stdin)["findings"] if f["id"]=="rank_ended"))')
check "managed: the report's rank_ended names the allocation it was in ($j)" grep -Eq '^cudaMallocManaged, [2-9]\.[0-9] s in$' <<<"$j"
# an allocation in progress for 3 s that returned (the writer's scan, about once a second, sees it
# past 1 s at least once): not in progress at the end
d=$(fresh managed_back)
bg "$d" env FAKE_CUDART_MANAGED_MS=3000 "$APP" managed 30000
check "managed, returned: app ready" wait_ready "$d"
for _ in $(seq 100); do grep -q allocated=0 "$d/.out" && break; sleep 0.05; done
kill -TERM $p
{ wait $p; } 2>/dev/null
f=$(one "$d")
check_eq "managed, returned: INFLIGHT written while it lasted, once" 1 "$(rd "$f" inflight)"
j=$("$CLI" report --json "$d/tr" 2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin)["findings"]; print(sum(1 for f in r if f["id"]=="rank_ended"), " ".join(f["evidence"].get("in_flight","-") for f in r if f["id"]=="rank_ended"))')
check_eq "managed, returned: rank_ended without a call in flight" "1 -" "$j"

# --- fatal signals: FATAL then EXITINFO and END; the process dies as it would have ---
# fatal_case NAME EXPECTED_SIGNAL ARGS...
fatal_case() {
	local name=$1 sig=$2; shift 2
	d=$(fresh "$name")
	run "$d" "$APP" fatal "$@"
	f=$(one "$d")
	check_eq "$name: dies of SIG$sig" "$sig" "$(kill -l "$(cat "$d/.rc")" 2>/dev/null)"
	check_eq "$name: complete, END reason signal" "1 1" "$(rd "$f" complete) $(rd "$f" end_reason)"
	check_eq "$name: EXITINFO names the signal" "$(kill -l "$sig")" "$(rd "$f" exit_signal)"
	check_eq "$name: one FATAL, before EXITINFO" "1 1" "$(rd "$f" fatals) $(rd "$f" fatal_before_exitinfo)"
}
fatal_case abort_thread ABRT abort thread
check_eq "abort_thread: FATAL from the crashing thread (raised: SI_TKILL)" "signal=6 code=-6 addr=0 main=0 name=crasher" "$(rd "$f" fatal)"
check "abort_thread: not the main thread's tid" test "$(rd "$f" fatal_tid)" != "$(rd "$f" h.pid)"
fatal_case segv_main SEGV segv main
check_eq "segv_main: the faulting address, main thread" "signal=11 code=1 addr=0x8 main=1 name=rt_app" "$(rd "$f" fatal)"
fatal_case abrt_sent ABRT kill main
check_eq "abrt_sent: sent (SI_USER), no address" "signal=6 code=0 addr=0 main=1 name=rt_app" "$(rd "$f" fatal)"

# the thread's native stack when the signal came: a STACK record just before FATAL, and the
# report's rank_ended names the job's function first (abort()'s and raise()'s frames left out)
fatal_stack() { # NAME TRACE FIRST_FRAME_RE [MORE_RE]
	local name=$1 tr=$2 first=$3 more=${4:-}
	check_eq "$name: FATAL names the STACK record before it" 1 "$(rd "$tr" fatal_stack)"
	local st
	st=$("$CLI" report "$(dirname "$tr")" 2>/dev/null | sed -n '/rank_ended/,/advice/s/^    stack: //p')
	check "$name: the report's stack starts in $first ($st)" grep -Eq "^$first" <<<"$st"
	[ -z "$more" ] || check "$name: the report's stack goes on through $more" grep -Eq "$more" <<<"$st"
	check "$name: the advice says a crash" sh -c "'$CLI' report '$(dirname "$tr")' 2>/dev/null | grep -q 'advice: The process crashed'"
}
fatal_case segv_stack SEGV segv main
fatal_stack segv_main "$f" 'crash_in_app\+0x[0-9a-f]+ \(rt_app\+' ' <- main\+'
fatal_case abort_stack ABRT abort thread
fatal_stack abort_thread "$f" 'crash_in_app\+' ' <- crash_thread\+'
fatal_case kill_stack ABRT kill main
fatal_stack abrt_sent "$f" 'kill\+' ' <- crash_in_app\+'
if [ -z "${SAN:-}" ]; then # a sanitizer reports a double free itself and exits
	fatal_case double_free ABRT free main
	fatal_stack double_free "$f" 'libc' '__libc_free\+.* <- crash_in_app'
	check "double_free: the advice names heap corruption" sh -c \
		"'$CLI' report '$(dirname "$f")' 2>/dev/null | grep -q 'heap was corrupted'"
fi
# a fault while walking the stack (a smashed one; NVLPROF_TEST_UNWIND_FAULT makes the walk fault):
# FATAL and END still written, without a stack, and the process dies of its own signal
for how in abort:ABRT segv:SEGV; do
	d=$(fresh "unwind_fault_${how%%:*}")
	run "$d" env NVLPROF_TEST_UNWIND_FAULT=1 "$APP" fatal "${how%%:*}" main
	f=$(one "$d")
	check_eq "${how%%:*}, the stack's walk faults: dies of SIG${how#*:}; FATAL (no stack) and END written" \
		"${how#*:} 1 0 1" \
		"$(kill -l "$(cat "$d/.rc")" 2>/dev/null) $(rd "$f" fatals) $(rd "$f" fatal_stack) $(rd "$f" complete)"
done
d=$(fresh nostacks)
run "$d" env NVLPROF_STACKS=0 "$APP" fatal abort main
f=$(one "$d")
check_eq "NVLPROF_STACKS=0: FATAL without a stack, dies of SIGABRT" "1 0 0 ABRT" \
	"$(rd "$f" fatals) $(rd "$f" fatal_stack) $(rd "$f" fatal_stack_frames) $(kill -l "$(cat "$d/.rc")" 2>/dev/null)"
check "NVLPROF_STACKS=0: no stack in the report" sh -c "! '$CLI' report '$d/tr' 2>/dev/null | grep -q '^    stack: '"
# abort() from a thread while the main thread is blocked in a collective: both are in the trace
d=$(fresh abort_blocked)
run "$d" env FAKE_NCCL_BLOCK_MS=20000 FAKE_NCCL_BLOCK_AT=3 "$APP" fatal abort thread
f=$(one "$d")
check_eq "abort, main blocked: dies of SIGABRT" ABRT "$(kill -l "$(cat "$d/.rc")" 2>/dev/null)"
check_eq "abort, main blocked: FATAL and the main thread's call in progress" "1 1 $(rd "$f" h.pid)" \
	"$(rd "$f" fatals) $(rd "$f" inflight) $(rd "$f" inflight_first | sed 's/.*tid=\([0-9]*\).*/\1/')"

# the job's own SIGABRT handler: installed before the trace opened (ours stays out) or after
# (it replaces ours): it runs, the process still dies of SIGABRT
for when in before after; do
	d=$(fresh "handler_$when")
	run "$d" "$APP" fatal abort main "handler-$when"
	f=$(one "$d")
	check_eq "job handler $when: dies of SIGABRT" ABRT "$(kill -l "$(cat "$d/.rc")" 2>/dev/null)"
	check "job handler $when: it ran" grep -q "app abort handler ran" "$d/.out"
	check_eq "job handler $when: no FATAL (the job's handler has the signal)" 0 "$(rd "$f" fatals)"
done

# core dumps and the status the parent sees: the same with and without the shim
if [ -z "${SAN:-}" ] && command -v python3 >/dev/null; then
	cat >"$T/wait.py" <<'EOF'
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, st = os.waitpid(pid, 0)
print("signal=%d core=%d" % (os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0, os.WCOREDUMP(st)))
EOF
	for how in abort segv; do
		d=$(fresh "core_$how")
		got=$(cd "$d" && ulimit -c unlimited && NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" python3 "$T/wait.py" "$APP" fatal $how main 2>/dev/null | tail -1)
		want=$(cd "$d" && ulimit -c unlimited && python3 "$T/wait.py" "$APP" fatal $how main 2>/dev/null | tail -1)
		check_eq "core $how: signal and core flag as without the shim ($want)" "$want" "$got"
		rm -f "$d"/core*
	done
else
	echo "SKIP: core flags (sanitizers disable core dumps, or no python3)"
fi

# --- fork: the child's own trace and the parent's are both whole ---
if [ "${SAN:-}" != thread ]; then
	d=$(fresh fork)
	run "$d" "$APP" fork 3 2
	check_eq "fork: status" 0 "$(cat "$d/.rc")"
	n=0
	for f in "$d"/tr/*.nvlp; do [ "$(rd "$f" complete)" = 1 ] && n=$((n + 1)); done
	# (a trace shorter than the watch period may end before its first heartbeat: END has the time)
	check_eq "fork: both traces complete" 2 "$n"
fi

# --- the cgroup's OOM-kill count: in the header, a NOTE when it changes ---
d=$(fresh oom)
printf 'low 0\nhigh 0\nmax 0\noom 1\noom_kill 3\noom_group_kill 0\n' >"$d/events"
bg "$d" env NVLPROF_TEST_CGROUP_EVENTS="$d/events" "$APP" idle 2500
check "oom: app ready" wait_ready "$d"
sleep 0.8
printf 'low 0\nhigh 0\nmax 0\noom 2\noom_kill 5\noom_group_kill 0\n' >"$d/events.new"
cat "$d/events.new" >"$d/events"
wait $p
f=$(one "$d")
check_eq "oom: the file watched, the count at start" "$d/events 3" "$(rd "$f" h.oom_watch) $(rd "$f" h.oom_kill)"
check_eq "oom: one NOTE(OOM_KILL) with the new count" "1 5" "$(rd "$f" oom_notes) $(rd "$f" oom_last)"
d=$(fresh oom_real)
run "$d" "$APP" calls 1
f=$(one "$d")
w=$(rd "$f" h.oom_watch)
case "$w" in
"none ("*) check_eq "oom: not watchable here, said once ($w); no count" "(none)" "$(rd "$f" h.oom_kill)" ;;
*) check "oom: cgroup v2 count ($w)" test "$(rd "$f" h.oom_kill)" -ge 0 ;;
esac
check_eq "oom: no note when nothing changed" 0 "$(rd "$f" oom_notes)"

exit $((FAILED > 0))

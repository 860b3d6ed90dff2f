#!/usr/bin/env bash
# test_postmortem.sh: the failure catalog on the CPU fakes (issue 26): two ranks of pm_job under
# the real shim, the fake NCCL in its asynchronous mode (a collective completes once both ranks
# entered it; the next call is where a rank waits), each failure with what the report must say
# first: who hung, at which seq, how long the others waited (to their end), how each ended.
. "$(dirname "$0")/../lib.sh"
JOB="$PROGS/pm_job"
for f in "$JOB" "$PROGS/pm_job_cupti" "$CLI" "$LIB" "$FAKES/libnccl.so.2"; do
	[ -x "$f" ] || [ -f "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
export NVLPROF_CUPTI=0 NVLPROF_FLUSH_MS=100
# under a sanitizer: its own fault handlers off, as tests/runtime/test_postmortem.sh (the shim
# walks a fatal signal's stack only where SIGSEGV and SIGBUS come to its handler, its guard of the
# walk)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0"
export TSAN_OPTIONS="${TSAN_OPTIONS:-}:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:die_after_fork=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0"
STEPS=40 AT=20 # rank 1 fails at step 20: its last AllReduce is #20, the hang is #21

# run NAME MODE KILL_AFTER_S WD_MS [launch]: the job in a process group of its own, killed
# (SIGKILL to the group, as a time limit does) after KILL_AFTER_S unless it ended
run() {
	local name=$1 mode=$2 after=$3 wd=$4 how=${5:-ranks} d="$T/$1"
	mkdir -p "$d/tr" "$d/sync"
	local cmd="'$JOB' rank 0 '$d/id' $mode $STEPS $AT $wd & '$JOB' rank 1 '$d/id' $mode $STEPS $AT $wd & wait"
	[ "$how" = launch ] && cmd="exec '$JOB' launch '$d/id' $mode $STEPS $AT $wd"
	(cd "$d" && FAKE_NCCL_ASYNC="$d/sync" NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" \
		exec setsid bash -c "$cmd" >"$d/job.out" 2>&1) &
	local pid=$! waited=0
	while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt $((after * 10)) ]; do
		sleep 0.1
		waited=$((waited + 1))
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	"$CLI" report "$d/tr" >"$d/report.txt" 2>"$d/report.err"
	"$CLI" report --json "$d/tr" >"$d/report.json" 2>/dev/null
}
# the first finding line of a report, and a JSON value of the first finding with that id
first() { grep -m1 '^\[' "$T/$1/report.txt"; }
jv() { python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
f = [x for x in d['findings'] if x['id'] == sys.argv[2]]
print(f[0]['evidence'].get(sys.argv[3], 'MISSING') if f else 'NO_FINDING')" "$T/$1/report.json" "$2" "$3" 2>/dev/null || echo UNPARSABLE; }
ge() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$1" "$2" 2>/dev/null; }
hang_re='^\[critical\] hang_suspect: ncclAllReduce #21 on comm [0-9a-f]{16} never entered by rank 1; others waited [0-9.]+ (us|ms|s)'
killed='ended without an END record (killed by SIGKILL or the OOM killer'

# (a) rank 1 stuck in its own code at step 20; rank 0 enters #21 and waits in its next call;
# both killed 4 s on. First: hang_suspect #21, rank 1 missing, rank 0 waited >= 3 s (the kill
# ends it, not its last call); both ended without an END record.
run stuck stuck 4 0
check "stuck: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first stuck)
w=$(jv stuck hang_suspect wait_ms)
check "stuck: rank 0's wait runs to its end ($w ms >= 3000)" ge "$w" 3000
check_eq "stuck: rank 1's end" "$killed" "$(jv stuck hang_suspect rank_1_ended | cut -c1-${#killed})"
check_eq "stuck: rank 0's end" "$killed" "$(jv stuck hang_suspect rank_0_ended | cut -c1-${#killed})"
check "stuck: rank_ended is told by the hang" bash -c "! grep -q '^\[.*rank_ended' '$T/stuck/report.txt'"

# (b) rank 1 exits with status 3 at step 20; rank 0 waits until killed 3 s on.
run exit exit 3 0
check "exit: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first exit)
w=$(jv exit hang_suspect wait_ms)
check "exit: rank 0's wait runs to its end ($w ms >= 2000)" ge "$w" 2000
check_eq "exit: rank 1 exited" "exited with status 3" "$(jv exit hang_suspect rank_1_ended | cut -c1-20)"
check_eq "exit: rank 0 killed" "$killed" "$(jv exit hang_suspect rank_0_ended | cut -c1-${#killed})"

# (c) rank 1 stuck; rank 0's watchdog thread (pt_nccl_watchdg) calls abort() 1.5 s after it
# entered step 20; rank 1 killed 4 s on. Rank 0's end: SIGABRT in that thread when its trace has
# the shim's FATAL record, else no END record (a shim without it).
run abort abort 4 1500
check "abort: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first abort)
w=$(jv abort hang_suspect wait_ms)
check "abort: rank 0 waited until the abort ($w ms >= 1200)" ge "$w" 1200
check "abort: rank 0 waited no longer than its life (< 3000 ms)" ge 3000 "$w"
e0=$(jv abort hang_suspect rank_0_ended)
if "$CLI" dump "$T/abort/tr"/*.nvlp 2>/dev/null | grep -q '^FATAL\|fatal'; then
	check "abort: rank 0 ended by SIGABRT in its watchdog thread" \
		grep -Eq '^ended by SIGABRT \(abort\) in thread [0-9]+ \(pt_nccl_watchdg\)' <<<"$e0"
	s0=$(jv abort hang_suspect rank_0_stack)
	check "abort: rank 0's stack is its watchdog thread's, abort() left out ($s0)" \
		grep -Eq '^watchdog\+0x[0-9a-f]+ \(pm_job\+0x[0-9a-f]+\) <- ' <<<"$s0"
	check_eq "abort: rank 1 (stuck, killed) has no stack" MISSING "$(jv abort hang_suspect rank_1_stack)"
	# the story's paragraph is wrapped: read it as one line
	check "abort: the story quotes rank 0's stack with its end" grep -Eq \
		'ended by SIGABRT \(abort\) in thread [0-9]+ \(pt_nccl_watchdg\) \(stack: watchdog\+0x[0-9a-f]+ \(pm_job\+0x[0-9a-f]+\) <- [^;]*\) [0-9.]+ (ms|s) later' \
		<(tr '\n' ' ' <"$T/abort/report.txt")
else
	check_eq "abort: rank 0 without the shim's FATAL record: no END record" "$killed" "${e0:0:${#killed}}"
fi

# (d) a launcher forks both ranks; rank 1 gets stuck; kill -9 of the whole tree 2.5 s on. The
# launcher's cut-short trace is a launcher: OTHER PROCESSES, no rank row, no rank_ended, no
# several_jobs; the hang is as in (a).
run launch stuck 3 0 launch
check "launch: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first launch)
check "launch: the launcher is under OTHER PROCESSES" grep -q '^  .* pid [0-9]* .*pm_job launch' "$T/launch/report.txt"
check_eq "launch: two rank rows" 2 "$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['ranks']))" "$T/launch/report.json" 2>/dev/null || echo UNPARSABLE)"
check "launch: no rank_ended, no several_jobs" \
	bash -c "! grep -Eq 'rank_ended|several_jobs|several jobs' '$T/launch/report.txt' '$T/launch/report.err'"

# (e) a healthy run: no hang, no rank_ended, nothing but collection notes.
run healthy healthy 20 0
check_eq "healthy: the job completed" "0 0" "$(grep -c . "$T/healthy/job.out") $(ls "$T/healthy/tr" | grep -c nvlp | sed 's/^2$/0/')"
check "healthy: no finding but collection_gaps" \
	bash -c "grep -q '^FINDINGS' '$T/healthy/report.txt' && ! grep '^\[' '$T/healthy/report.txt' | grep -vq 'collection_gaps'"

# (f) the same failures with CUPTI in the process (pm_job_cupti: the fake libcuda and libcupti,
# cuInit at each rank's start) under NVLPROF_CUPTI=startup: CUPTI detached by the ticker thread's
# copies during the hang (2 s in), before the failure (100 ms), or not yet when the watchdog
# aborts (1.9 s in). The first finding is the same, and the report says which processes detached.
# NVLPROF_CUPTI_FINALIZE=1: the fake CUPTI reports the headers' version, 13.0 here, which detaches only
# when told (cupti/detach.c).
JOB="$PROGS/pm_job_cupti"
detached_re='^data: CUPTI detached after start-up in 2 of 2 processes \(NVLPROF_CUPTI=startup, by [0-9.]+ s\)'
NVLPROF_CUPTI=startup NVLPROF_CUPTI_FINALIZE=1 run stuck_c stuck 4 0
check "stuck, CUPTI detached during the hang: first finding is hang_suspect #21 missing rank 1" \
	grep -Eq "$hang_re" <(first stuck_c)
check "stuck, CUPTI detached during the hang: the report says both detached" \
	grep -Eq "$detached_re" "$T/stuck_c/report.txt"
w=$(jv stuck_c hang_suspect wait_ms)
check "stuck, CUPTI detached during the hang: rank 0's wait runs to its end ($w ms >= 3000)" ge "$w" 3000
NVLPROF_CUPTI=startup:100 NVLPROF_CUPTI_FINALIZE=1 run exit_c exit 3 0
check "exit, CUPTI detached before it: first finding is hang_suspect #21 missing rank 1" \
	grep -Eq "$hang_re" <(first exit_c)
check "exit, CUPTI detached before it: the report says both detached" \
	grep -Eq "$detached_re" "$T/exit_c/report.txt"
check_eq "exit, CUPTI detached before it: rank 1 exited" "exited with status 3" \
	"$(jv exit_c hang_suspect rank_1_ended | cut -c1-20)"
NVLPROF_CUPTI=startup NVLPROF_CUPTI_FINALIZE=1 run abort_c abort 4 1500
check "abort, CUPTI still attached in rank 0: first finding is hang_suspect #21 missing rank 1" \
	grep -Eq "$hang_re" <(first abort_c)
e0=$(jv abort_c hang_suspect rank_0_ended)
check "abort, CUPTI still attached in rank 0: rank 0 ended by SIGABRT in its watchdog thread" \
	grep -Eq '^ended by SIGABRT \(abort\) in thread [0-9]+ \(pt_nccl_watchdg\)' <<<"$e0"

# (g) the same failures under NVLPROF_CUPTI=lazy (CUPTI never attached; the topology from the
# driver and the fake NVML): the first finding is the same; the topology gap only where NVML gave
# no link's state (FAKE_NVML_STATE=none), as an info after the story, never in its place; a healthy
# run has no finding but collection notes; one GPU a rank, with NVML silent or answering.
lazy_re='^data: CUPTI not attached in 2 of 2 processes \(NVLPROF_CUPTI=lazy\)'
topo_gap='topology: no NVLink topology under NVLPROF_CUPTI=lazy (NVML answered the state of 0 of 36 links)'
export LD_LIBRARY_PATH="$FAKES/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NVLPROF_CUPTI=lazy FAKE_NVML_TOPO=pair:4 FAKE_NVML_STATE=none run stuck_l stuck 4 0
check "stuck, lazy, NVML silent: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first stuck_l)
check "stuck, lazy, NVML silent: CUPTI attached in neither rank" grep -Eq "$lazy_re" "$T/stuck_l/report.txt"
check "stuck, lazy, NVML silent: the topology gap, among the collection gaps" grep -qF "    $topo_gap" "$T/stuck_l/report.txt"
NVLPROF_CUPTI=lazy FAKE_NVML_TOPO=pair:4 run exit_l exit 3 0
check "exit, lazy: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first exit_l)
check_eq "exit, lazy: rank 1 exited" "exited with status 3" "$(jv exit_l hang_suspect rank_1_ended | cut -c1-20)"
check "exit, lazy, NVML answering: topology from NVML, no topology gap" \
	bash -c "grep -q 'topology yes' '$T/exit_l/report.txt' && ! grep -q 'no NVLink topology under' '$T/exit_l/report.txt'"
NVLPROF_CUPTI=lazy FAKE_NVML_TOPO=pair:4 run abort_l abort 4 1500
check "abort, lazy: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first abort_l)
check "abort, lazy: rank 0 ended by SIGABRT in its watchdog thread" \
	grep -Eq '^ended by SIGABRT \(abort\) in thread [0-9]+ \(pt_nccl_watchdg\)' <<<"$(jv abort_l hang_suspect rank_0_ended)"
NVLPROF_CUPTI=lazy FAKE_NVML_TOPO=pair:4 run healthy_l healthy 20 0
check "healthy, lazy: no finding but collection_gaps, no topology gap" \
	bash -c "grep -q '^FINDINGS' '$T/healthy_l/report.txt' && ! grep '^\[' '$T/healthy_l/report.txt' | grep -vq 'collection_gaps' && ! grep -q 'no NVLink topology under' '$T/healthy_l/report.txt'"
# one GPU a rank (CUDA_VISIBLE_DEVICES): NVML silent leaves the NVLink to the other rank's GPU
# unknown (the gap, though each process saw one GPU); NVML answering gives each GPU its links to
# the GPU it cannot see (topology yes, no gap)
NVLPROF_CUPTI=lazy FAKE_CUDA_DEVICES=1 FAKE_NVML_TOPO=pair:4 FAKE_NVML_STATE=none run stuck_l1 stuck 4 0
check "stuck, lazy, one GPU a rank, NVML silent: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first stuck_l1)
check "stuck, lazy, one GPU a rank, NVML silent: the topology gap" \
	grep -qF "    topology: no NVLink topology under NVLPROF_CUPTI=lazy (NVML answered the state of 0 of 18 links)" "$T/stuck_l1/report.txt"
NVLPROF_CUPTI=lazy FAKE_CUDA_DEVICES=1 FAKE_NVML_TOPO=pair:4 run exit_l1 exit 3 0
check "exit, lazy, one GPU a rank: first finding is hang_suspect #21 missing rank 1" grep -Eq "$hang_re" <(first exit_l1)
check "exit, lazy, one GPU a rank, NVML answering: topology from the links to the hidden GPU, no gap" \
	bash -c "grep -q 'topology yes' '$T/exit_l1/report.txt' && ! grep -q 'no NVLink topology under' '$T/exit_l1/report.txt'"
exit $((FAILED > 0))

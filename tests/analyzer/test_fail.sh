#!/usr/bin/env bash
# test_fail.sh: the post-mortem on REAL failed jobs (tests/gpu/run_fail.sh on one H200: HF GPT-2 under
# torchrun, two ranks sharing the GPU over NCCL's socket transport, real NCCL 2.28.9 whose calls return
# before the collective runs). fail_*: recorded by the shim of fc224f5 (no heartbeat, INFLIGHT, FATAL, OOM
# or Python samples: what an older nvlprof leaves); fail2_*: by this shim. For each, what the report must
# say first (the story's opening words and the first finding), then the evidence that backs it.
. "$(dirname "$0")/../lib.sh"
TR="$(dirname "$0")/traces"
[ -x "$CLI" ] || { fail "missing $CLI (build first)"; exit 1; }
rep() { # NAME: the text and JSON report of fixture NAME, once
	[ -f "$T/$1.txt" ] && return
	"$CLI" report "$TR/$1" >"$T/$1.txt" 2>/dev/null
	"$CLI" report --json "$TR/$1" >"$T/$1.json" 2>/dev/null
}
story() { rep "$1"; sed -n '1,/^$/p' "$T/$1.txt" | tr '\n' ' '; }
first() { rep "$1"; grep -m1 '^\[' "$T/$1.txt"; }
# ev NAME ID KEY: evidence KEY of the first finding ID (NO_FINDING, MISSING, UNPARSABLE otherwise)
ev() { rep "$1"; python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
f = [x for x in d['findings'] if x['id'] == sys.argv[2]]
print(f[0]['evidence'].get(sys.argv[3], 'MISSING') if f else 'NO_FINDING')" "$T/$1.json" "$2" "$3" 2>/dev/null || echo UNPARSABLE; }
count() { rep "$1"; grep -c "^\[[a-z]*\] $2:" "$T/$1.txt"; }
ge() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$1" "$2" 2>/dev/null; }
starts() { case "$2" in "$1"*) return 0 ;; esac; return 1; }
hang49='^\[critical\] hang_suspect: ncclAllReduce #49 on comm [0-9a-f]{16} never entered by rank 1; '

# healthy (both shims): no story, no hang, mismatch or end of a rank
for n in fail_healthy fail2_healthy; do
	rep $n
	check_eq "$n: no story (text: the report opens with its header)" "nvlprof report:" "$(head -c 15 "$T/$n.txt")"
	check_eq "$n: no story (JSON)" "None" "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('story'))" "$T/$n.json" 2>&1)"
	check_eq "$n: no hang_suspect, collective_mismatch, rank_ended, straggler" 0 \
		"$(( $(count $n hang_suspect) + $(count $n collective_mismatch) + $(count $n rank_ended) + $(count $n straggler) ))"
done

# stuck: rank 1 sleeps in load_next_batch at step 15, rank 0 waits in AllReduce #49 until torchrun is
# stopped. First: "Hung: rank 1 ... never entered #49"; the wait runs to rank 0's end (tens of seconds,
# not its last call-type record's 2 s); the new trace says where rank 1 was, and rank 0's copy in flight.
for n in fail_stuck fail2_stuck; do
	check "$n: the story opens with the hang" starts "Hung: rank 1 made its last call at " "$(story $n)"
	check "$n: first finding is hang_suspect #49, rank 1 missing" grep -Eq "$hang49" <(first $n)
	w=$(ev $n hang_suspect wait_ms)
	check "$n: rank 0's wait runs to its end ($w ms >= 40000)" ge "$w" 40000
	check_eq "$n: rank 1's end is told in the hang" "ended by signal 15 (Terminated)" \
		"$(ev $n hang_suspect rank_1_ended | cut -c1-31)"
	check_eq "$n: no rank_ended beside the hang" 0 "$(count $n rank_ended)"
done
check_eq "fail2_stuck: where rank 1 was" "41.5 s in load_next_batch (fail_train.py:58) <- step (fail_train.py:102)" \
	"$(ev fail2_stuck hang_suspect place_rank1 | cut -c1-72)"
check "fail2_stuck: the story says it" grep -q "at its end it had been 41.5 s in load_next_batch (fail_train.py:58)" \
	<(story fail2_stuck)
check_eq "fail2_stuck: rank 0's call in flight (loss.item()'s copy behind the hung AllReduce)" \
	"cudaMemcpyAsync, 41.4 s in" "$(ev fail2_stuck hang_suspect rank_0_in_flight | cut -c1-26)"
check_eq "fail_stuck (old shim): rank 0 without an END record" \
	"ended without an END record (killed by SIGKILL or the OOM killer" "$(ev fail_stuck hang_suspect rank_0_ended | cut -c1-64)"
check "fail2_loader: rank 1 waits on its DataLoader in step (fail_train.py:102)" starts \
	"40.3 s in step (fail_train.py:102)" "$(ev fail2_loader hang_suspect place_rank1)"

# exits: rank 1 sys.exit(3) at step 15; torchrun stops rank 0
for n in fail_exits fail2_exits; do
	check "$n: first finding is hang_suspect #49, rank 1 missing" grep -Eq "$hang49" <(first $n)
	check_eq "$n: rank 1 exited with status 3" "exited with status 3" "$(ev $n hang_suspect rank_1_ended | cut -c1-20)"
done
w=$(ev fail2_exits hang_suspect wait_ms)
check "fail2_exits: the wait runs to rank 0's last heartbeat ($w ms >= 4000)" ge "$w" 4000

# segv: rank 1 dies of SIGSEGV at step 15. The old trace lost its last 2.5 s (nothing flushed at the
# crash): the hang it shows is where that trace ends. The new one has the signal and the thread.
check "fail_segv (old shim): a hang where rank 1's trace ends, not silence" grep -Eq \
	'^\[critical\] hang_suspect: ncclAllReduce #22 .* never entered by rank 1' <(first fail_segv)
check_eq "fail_segv: rank 1 without an END record" "ended without an END record" \
	"$(ev fail_segv hang_suspect rank_1_ended | cut -c1-27)"
check "fail2_segv: first finding is hang_suspect #49" grep -Eq "$hang49" <(first fail2_segv)
check "fail2_segv: SIGSEGV in rank 1's main thread" starts "ended by SIGSEGV (segmentation fault) in the main thread " \
	"$(ev fail2_segv hang_suspect rank_1_ended)"
check "fail2_segv: the story names the signal" grep -q "rank 1 ended by SIGSEGV (segmentation fault) in the main thread" \
	<(story fail2_segv)

# oom: rank 1 allocates until the cgroup's OOM killer takes it
check_eq "fail_oom (old shim): SIGKILL or the OOM killer" "ended without an END record (killed by SIGKILL or the OOM killer" \
	"$(ev fail_oom hang_suspect rank_1_ended | cut -c1-64)"
check_eq "fail2_oom: the OOM killer, from the cgroup's count" "killed by the OOM killer (oom_kill 0 -> 1 in cgroup /nvlp_oom)" \
	"$(ev fail2_oom hang_suspect rank_1_ended | cut -c1-62)"
check "fail2_oom: where rank 1 was (its allocation loop)" starts "3.3 s in fail (fail_train.py:91)" \
	"$(ev fail2_oom hang_suspect place_rank1)"

# killtree: the whole tree SIGKILLed at a time limit: killed as a whole, not hung; the launcher is
# not a rank nor another job
for n in fail_killtree fail2_killtree; do
	check "$n: the story opens with the kill" starts "Failed at step " "$(story $n)"
	check "$n: ... of every rank together" grep -q "ranks 0,1 ended without an END record" <(story $n)
	check_eq "$n: no hang_suspect (the last flush decides who is 'ahead')" 0 "$(count $n hang_suspect)"
	check_eq "$n: a rank_ended per rank" 2 "$(count $n rank_ended)"
	check "$n: torchrun under OTHER PROCESSES, two rank rows" bash -c "grep -q '^OTHER PROCESSES' '$T/$n.txt' &&
		[ \$(python3 -c \"import json; print(len(json.load(open('$T/$n.json'))['ranks']))\") = 2 ]"
	check "$n: no several-jobs warning" bash -c "! grep -qi 'several jobs' '$T/$n.txt'"
done
# killed_together_ms pinned: fail_killtree's ranks ended 0.3 s apart after a 0.3 s wait
check_eq "killed_together_ms=400: still killed as a whole" 0 \
	"$("$CLI" report --threshold killed_together_ms=400 "$TR/fail_killtree" 2>/dev/null | grep -c '^\[critical\] hang_suspect')"
check_eq "killed_together_ms=250: below the spread, the hang is told" 1 \
	"$("$CLI" report --threshold killed_together_ms=250 "$TR/fail_killtree" 2>/dev/null | grep -c '^\[critical\] hang_suspect')"

# stuckwd (run 3): torch's heartbeat monitor aborts the ranks: rank 1's FATAL names its thread
check "fail2_stuckwd: first finding is hang_suspect #49" grep -Eq "$hang49" <(first fail2_stuckwd)
check "fail2_stuckwd: SIGABRT from torch's heartbeat monitor thread" starts \
	"ended by SIGABRT (abort) in thread " "$(ev fail2_stuckwd hang_suspect rank_1_ended)"
check "fail2_stuckwd: ... named" grep -q "(pt_nccl_heartbt)" <(ev fail2_stuckwd hang_suspect rank_1_ended)
check "fail2_stuckwd: rank 0, aborted while its AllReduce hung, has its FATAL too" starts \
	"ended by SIGABRT (abort) in thread " "$(ev fail2_stuckwd hang_suspect rank_0_ended)"
check "fail2_stuckwd: the story: rank 0 waited until SIGABRT" grep -q "waited in it until it ended by SIGABRT (abort) in" \
	<(story fail2_stuckwd)
# barrier: rank 1 in a subgroup's barrier, rank 0 in the default group's next AllReduce
check "fail2_barrier: first finding is hang_suspect #49" grep -Eq "$hang49" <(first fail2_barrier)
check "fail2_barrier: rank 1 was in the barrier line" starts "44.5 s in fail (fail_train.py:92)" \
	"$(ev fail2_barrier hang_suspect place_rank1)"

# hang_shown's rules pinned on fail2_segv: rank 0 waited 219.3 ms in #49; the two ends are 228.6 ms apart
check_eq "hang_min_ms=225 (above the wait, below the ends' spread): an abnormal end still shows the hang" 1 \
	"$("$CLI" report --threshold hang_min_ms=225 "$TR/fail2_segv" 2>/dev/null | grep -c '^\[critical\] hang_suspect')"
check_eq "hang_min_ms=232 (above both): every member ended abnormally within it: stopped as a whole" 0 \
	"$("$CLI" report --threshold hang_min_ms=232 "$TR/fail2_segv" 2>/dev/null | grep -c '^\[critical\] hang_suspect')"
# the story's ends are when each rank was last alive (its heartbeats), not its last call
check "fail2_exits: rank 0's end 4.9 s after it entered #49, as its wait" grep -q \
	"waited in it until it ended without an END record (killed by SIGKILL or the OOM killer, or a crash the shim could not catch) 4.9 s later" \
	<(story fail2_exits)

# mismatched collectives: at step 15 a metric collective whose arguments differ (same seq, #52)
mm() { # NAME KIND DIFFERS: the story, the first finding and its sides
	local n=$1 what=$2
	check "$n: the story opens with the mismatch" starts "Collective mismatch: " "$(story $n)"
	check "$n: first finding is collective_mismatch #52" grep -Eq \
		"^\[critical\] collective_mismatch: nccl[A-Za-z]+ #52 on comm [0-9a-f]{16} called differently: $what" <(first $n)
	check_eq "$n: differs" "$3" "$(ev $n collective_mismatch differs)"
}
for p in fail fail2; do
	mm ${p}_count "count 2048 on rank 0, 1024 on rank 1" count
	mm ${p}_dtype "dtype f32 on rank 0, f16 on rank 1" dtype
done
mm fail2_op "op sum on rank 0, max on rank 1" op
mm fail2_root "root 0 on rank 0, 1 on rank 1" root
mm fail2_func "function ncclAllReduce on rank 0, ncclBcast on rank 1" function
check_eq "fail2_count: each side's count" "2048 1024" "$(ev fail2_count collective_mismatch side1_count) $(ev fail2_count collective_mismatch side2_count)"
check_eq "fail2_count: the metric's Python line" "calls it at fail_train.py:77 in metric" \
	"$(ev fail2_count collective_mismatch python_rank1 | cut -c1-38)"
# rank_ended: where the Python sampler last saw the main thread (the older shim sampled nothing)
check "fail2_count: the SIGTERMed rank sat 35 s in the metric's sync" grep -Eq \
	'^3[0-9]\.[0-9] s in metric \(fail_train\.py:78\) <- step \(fail_train\.py:108\) <- <module>' \
	<(ev fail2_count rank_ended place)
check "fail2_killtree: the SIGKILLed rank was in its step" grep -Eq '^[0-9.]+ s in step \(fail_train\.py:106\)' \
	<(ev fail2_killtree rank_ended place)
check_eq "fail_killtree (no Python samples): no place" MISSING "$(ev fail_killtree rank_ended place)"

# lazy_segv: fail2_segv again under NVLPROF_CUPTI=lazy with the shim of 84ab9de (run 19, one H100): format 2.2, the
# collectives' GPU times from folded KCOLL records (the first real ones kept), rank 1's FATAL with its native stack
n=lazy_segv
check "$n: the story: rank 1 never entered #49" starts \
	"Hung: rank 1 made its last call at 4.3 s, ncclAllReduce #48, and never entered #49 " "$(story $n)"
check "$n: the story names the signal, the thread and the crash stack" grep -q \
	"rank 1 ended by SIGSEGV (segmentation fault) in the main thread 1453 (python3) 41.4 ms later (stack: libc.so.6+0x19bc5c <- _ctypes" \
	<(story $n)
check "$n: the story ends with the survivor's failed call" grep -q "(its call #49 failed: ncclRemoteError)" <(story $n)
check "$n: first finding is hang_suspect #49" grep -Eq "$hang49" <(first $n)
check "$n: the stack in the evidence" starts "libc.so.6+0x19bc5c <- _ctypes.cpython-312-x86_64-linux-gnu.so+0xab7c <- libffi.so.8" \
	"$(ev $n hang_suspect rank_1_stack)"
check "$n: CUPTI not attached in either process (lazy)" grep -q \
	"^data: CUPTI not attached in 2 of 2 processes (NVLPROF_CUPTI=lazy)" "$T/$n.txt"
check_eq "$n: JSON cupti_lazy" "2 0" "$(python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['job']['cupti_lazy']; print(c['not_attached'], c['attached_for_managed'])" "$T/$n.json" 2>&1)"
check "$n: GPU times from the folded records (84 collectives, the 13 in flight at the crash without)" grep -q \
	"^kernel channels (NCCL KernelCh): 84 collectives from 160 channel records; 84 calls given their GPU time from them, 0 already timed by CUPTI, 13 of 97 collective calls without GPU time" \
	"$T/$n.txt"
exit $((FAILED > 0))

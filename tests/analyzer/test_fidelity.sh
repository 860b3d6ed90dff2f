#!/usr/bin/env bash
# test_fidelity.sh: issue 16's analyzer side on an_gen jobs and the shipped traces: processes by role, steps only where proven, failed collectives, communicator names.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
EX="$ROOT/examples/traces"
gen() { local name=$1; shift; "$GEN" -o "$T/$name" "$@" || fail "an_gen $name $*"; }
gen healthy --launcher
gen sweep --ranks 2 --sweep
gen loop --ranks 2 --graph-loop
gen fail --ranks 2 --fail-at 30 --comm-name dp_group
pyq() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# 1. processes by role: the launcher is listed apart, never a rank
"$CLI" report "$T/healthy" >"$T/h.txt" 2>&1
"$CLI" report --json "$T/healthy" >"$T/h.json" 2>/dev/null
check "role: launcher not counted as a process of the job" grep -q "^nvlprof report: 2 processes" "$T/h.txt"
check "role: launcher listed under OTHER PROCESSES" grep -q "^OTHER PROCESSES" "$T/h.txt"
check "role: launcher row names its command" grep -q "pid 4999 .*torchrun --nproc-per-node" "$T/h.txt"
check_eq "role: RANKS holds one row per rank" "2" "$(sed -n '/^RANKS/,/^$/p' "$T/h.txt" | grep -cE '^ +[0-9]+ node0')"
check_eq "role: JSON ranks 0,1 and the launcher apart" "[0, 1] [4999]" "$(pyq "$T/h.json" "[r['rank'] for r in d['ranks']], [p['pid'] for p in d['other_processes']]")"
"$CLI" info "$T/healthy/launcher-4999.nvlp" >"$T/li.txt"
check "role: info calls the launcher an other process" grep -q "role      other process" "$T/li.txt"
"$CLI" info "$T/healthy/node0-4001.nvlp" >"$T/ri.txt"
check "role: info gives a rank's rank" grep -q "rank      1 (local 1) of 2" "$T/ri.txt"
"$CLI" info "$T/fail/plain-5001.nvlp" >"$T/fi.txt"
"$CLI" info "$EX/ddp_healthy" >"$T/dhi.txt"
"$CLI" report --json "$EX/ddp_healthy" >"$T/dhr.json" 2>/dev/null
check_eq "role: info resolves mp.spawn ranks (no RANK) from their communicator, as report does" \
	"$(pyq "$T/dhr.json" "' '.join(str(r['rank']) for r in d['ranks'])")" \
	"$(grep -oE '^  rank      [0-9]+ of 2 \(from its largest communicator\)' "$T/dhi.txt" | awk '{print $2}' | tr '\n' ' ' | sed 's/ $//')"
check "role: a killed rank's trace stays a rank" grep -q "rank      1 (local 1) of 2" "$T/fi.txt"

# steps torch.profiler marks, seen through CUPTI without emit_nvtx: HF GPT-2 under torchrun with
# torch.profiler inside (schedule wait=2, warmup=2, active=26; one H200, run 9). 26 ProfilerStep#N
# ranges on the main thread, 78 outermost user ranges (DDP's bucket all-reduces) on the autograd
# thread: the steps are the main thread's, 25 between 26 marks, ~32 ms each
HP="$ROOT/tests/analyzer/traces/hf_profiler"
"$CLI" report "$HP" >"$T/hp.txt" 2>/dev/null
"$CLI" report --json "$HP" >"$T/hp.json" 2>/dev/null
check "steps (real torch.profiler): 25 steps of ~32 ms, marked by the job" grep -qE "^nvlprof report: 1 process on 1 host, wall [0-9.]+ ms, 25 steps of 3[12]\.[0-9]+ ms \(marked by the job\)" "$T/hp.txt"
check_eq "steps (real torch.profiler): JSON source marks, ProfilerStep via CUPTI" "25 marks marked by the job (ProfilerStep via CUPTI)" "$(pyq "$T/hp.json" "'%d %s %s' % (d['job']['steps'], d['job']['step_source'], d['job']['steps_why'])")"
check "steps (real torch.profiler): torchrun's parent listed apart" grep -q "^OTHER PROCESSES" "$T/hp.txt"

# 2. steps only where proven
"$CLI" report "$T/sweep" >"$T/sweep.txt" 2>&1
"$CLI" report --json "$T/sweep" >"$T/sweep.json" 2>/dev/null
check "steps: nccl-tests sweep (growing sizes) -> no steps recognised" grep -q "no steps recognised" "$T/sweep.txt"
check "steps: sweep says why (lengths vary)" grep -q "steps: none recognised: .* vary in length" "$T/sweep.txt"
check_eq "steps: sweep JSON steps 0, source none" "0 none" "$(pyq "$T/sweep.json" "d['job']['steps'], d['job']['step_source']" | tr -d '(),')"
"$CLI" report "$T/loop" >"$T/loop.txt" 2>&1
check "steps: tight replay loop (0.05 ms) -> no steps recognised" grep -q "no steps recognised" "$T/loop.txt"
check "steps: loop says why (below step_min_ms)" grep -q "below step_min_ms 1: a loop" "$T/loop.txt"
"$CLI" report --threshold step_min_ms=0.01 "$T/loop" >"$T/loop2.txt" 2>&1
check "steps: step_min_ms=0.01 accepts the regular loop" grep -qE "[0-9]+ steps of 0.0[0-9] ms" "$T/loop2.txt"
check "steps: the an_gen DDP job keeps its 40 steps" grep -q "40 steps of" "$T/h.txt"
check_eq "steps: JSON step_source pattern" "pattern" "$(pyq "$T/h.json" "d['job']['step_source']")"
for x in ddp_healthy:41 ddp_straggler:41 ddp_p2p_disable:41 ddp_killed:21; do
	"$CLI" report "$EX/${x%%:*}" >"$T/ex.txt" 2>/dev/null
	check "steps: shipped ${x%%:*} keeps its ${x##*:} steps" grep -q "^nvlprof report: .*, ${x##*:} steps of" "$T/ex.txt"
done

# 5. a failed collective keeps its seq: hang_suspect names the dead rank and the collective
"$CLI" report --json "$T/fail" >"$T/fail.json" 2>/dev/null
"$CLI" report "$T/fail" >"$T/fail.txt" 2>/dev/null
check_eq "failed: hang_suspect names rank 1 and #30, rank 0 failed with ncclSystemError" \
	"1 30 0 ncclSystemError True" \
	"$(pyq "$T/fail.json" "' '.join(str(x) for f in d['findings'] if f['id']=='hang_suspect' for x in (f['evidence']['rank'], f['evidence']['seq'], f['evidence']['failed_rank'], f['evidence']['failed_with'], f['evidence']['wait_ms'] >= 5000))")"
check "failed: the failed call ends no step (30 steps of 10.01 ms)" grep -q "^nvlprof report: 2 processes on 1 host, wall 5301.2 ms, 30 steps of 10.01 ms" "$T/fail.txt"
check "ended: hang_suspect says how the missing rank 1 ended and in which step" grep -q "rank_1_ended: ended without an END record .* in step 31, which no rank completed (30 completed)" "$T/fail.txt"
check "ended: a rank a hang explains gets no rank_ended of its own" sh -c '! grep -q "rank_ended:" "$1"' _ "$T/fail.txt"
check "ended: a healthy job has no rank_ended" sh -c '! grep -q rank_ended "$1"' _ "$T/h.txt"
check "failed: the text says the call failed" grep -q "hang_suspect: ncclAllReduce #30 .* never entered by rank 1; .*rank 0's call failed: ncclSystemError" "$T/fail.txt"

# 6. communicator names beside the hash
check "names: COLLECTIVES says the name the job gave the comm" grep -q 'comm 0005eed0c0117ec7 is "dp_group"' "$T/fail.txt"
check_eq "names: JSON comm_name" "dp_group" "$(pyq "$T/fail.json" "d['collectives'][0]['comm_name']")"
check "names: hang title names the comm" grep -q 'comm 0005eed0c0117ec7 ("dp_group")' "$T/fail.txt"
check "names: unnamed comm prints no name line" bash -c "! grep -q 'is \"' '$T/h.txt'"
# 3. a finding's cost cannot exceed what the job lost: the shipped straggler lost about
# (25.41 - 4.26) ms x 41 steps = 867 ms (its step time against the healthy run's)
"$CLI" report --json "$EX/ddp_straggler" >"$T/st.json" 2>/dev/null
check_eq "cost: straggler wait_caused_ms within 10% of the 867 ms the job lost" "True" \
	"$(pyq "$T/st.json" "[780 <= f['evidence']['wait_caused_ms'] <= 954 for f in d['findings'] if f['id']=='straggler'][0]")"
check_eq "cost: straggler lost_per_step_ms is the lead, at most a step" "True" \
	"$(pyq "$T/st.json" "[20 <= f['evidence']['lost_per_step_ms'] <= d['job']['step_ms'] for f in d['findings'] if f['id']=='straggler'][0]")"
# 7. runs kept apart: a directory of two jobs, a diff of two programs
mkdir -p "$T/mix"
cp "$T/healthy"/node*.nvlp "$T/sweep"/*.nvlp "$T/mix/"
"$CLI" report "$T/mix" >/dev/null 2>"$T/mix.err"
check "runs: report warns when a directory holds several jobs" grep -q "warning: .*\.nvlp and .*\.nvlp: these traces hold several jobs: pid 4000 ran python3, pid 5000 ran all_reduce_perf" "$T/mix.err"
"$CLI" report "$T/healthy" >/dev/null 2>"$T/h.err"
check "runs: one job plus its launcher: no warning" bash -c "! grep -q 'several jobs' '$T/h.err'"
for x in ddp_healthy ddp_straggler ddp_p2p_disable ddp_killed; do
	"$CLI" report "$EX/$x" >/dev/null 2>"$T/one.err"
	check "runs: shipped $x (mp.spawn ranks) is one job" bash -c "! grep -q 'several jobs' '$T/one.err'"
done
mkdir -p "$T/mix2"
cp "$EX/ddp_healthy"/*.nvlp "$EX/ddp_p2p_disable"/*.nvlp "$T/mix2/"
"$CLI" report "$T/mix2" >/dev/null 2>"$T/mix2.err"
check "runs: a healthy run plus a P2P-disabled run (one program) is two jobs" grep -q "several jobs: pids .* have different parents" "$T/mix2.err"
"$CLI" report "$T/mix2" >"$T/mix2.txt" 2>/dev/null
check "runs: the report itself says so (collection_gaps several_jobs)" grep -q "several_jobs: pids .* have different parents" "$T/mix2.txt"
"$CLI" diff "$T/healthy" "$T/sweep" >/dev/null 2>"$T/d.err"
check "runs: diff warns when the sides ran different programs" grep -q "diff: warning: the two sides ran different programs" "$T/d.err"
"$CLI" diff "$EX/ddp_healthy" "$EX/ddp_straggler" >/dev/null 2>"$T/d2.err"
check "runs: diff of one program: no warning" bash -c "! grep -q 'different programs' '$T/d2.err'"
# 5b. diff without GPU data compares collectives by host time, and says so
gen ng1 --no-gpu
gen ng2 --no-gpu --late-rank 1
"$CLI" diff "$T/ng1" "$T/ng2" >"$T/ng.txt" 2>&1
"$CLI" diff --json "$T/ng1" "$T/ng2" >"$T/ng.json" 2>/dev/null
check "diff host time: table says it is host time" grep -q "host time per call, ms (no GPU time on a side" "$T/ng.txt"
check "diff host time: AllReduce 16M-256M row" grep -qE "^  AllReduce +16M-256M +[0-9.]+ +[0-9.]+ " "$T/ng.txt"
check_eq "diff host time: JSON host_time rows, source host" "True" "$(pyq "$T/ng.json" "len(d['host_time']) >= 3 and all(x['time_source'] == 'host' for x in d['host_time'])")"
"$CLI" diff --json "$EX/ddp_healthy" "$EX/ddp_p2p_disable" >"$T/g.json" 2>/dev/null
check_eq "diff host time: none where both sides have GPU time" "0" "$(pyq "$T/g.json" "len(d['host_time'])")"
# 4. single-rank communicators: GPU time from the copies NCCL ran, not "host time"
gen single --single-rank
"$CLI" report "$T/single" >"$T/single.txt" 2>/dev/null
"$CLI" report --json "$T/single" >"$T/single.json" 2>/dev/null
check_eq "single-rank: AllReduce timed on the GPU from its 40 copies (40 x 0.1198 ms; the job's own copy not taken)" \
	"gpu 4.79" "$(pyq "$T/single.json" "d['collectives'][0]['time_source'] + ' %.2f' % d['collectives'][0]['time_ms_per_rank']")"
check "single-rank: no 'h' mark in COLLECTIVES" grep -qE "^  0005eed0c0117ec7 ncclAllReduce +1 +40.0 +16.000 +4.79  " "$T/single.txt"

# 3. numbers that add up: the summary line's communication equals COLLECTIVES' ms/rank sum and
# the exposed finding's figure (over the steps), shown side by side
"$CLI" report "$EX/ddp_p2p_disable" >"$T/p2p.txt" 2>/dev/null
"$CLI" report --json "$EX/ddp_p2p_disable" >"$T/p2p.json" 2>/dev/null
check "totals: summary gives whole-trace and in-steps communication" grep -qE "^communication: 480.32 ms per rank \(379.35 ms in the steps\)" "$T/p2p.txt"
check_eq "totals: the exposed finding's communication is the summary's in-steps figure" "True" \
	"$(pyq "$T/p2p.json" "abs([f['evidence']['comm_in_steps_ms_per_rank'] for f in d['findings'] if f['id']=='exposed_communication'][0] - d['job']['comm_in_steps_ms_per_rank']) < 0.01")"
check_eq "totals: COLLECTIVES ms/rank add up to comm_ms_per_rank (healthy)" "True" \
	"$(pyq "$T/h.json" "abs(sum(c['time_ms_per_rank'] for c in d['collectives']) - d['job']['comm_ms_per_rank']) < 0.05")"
gen nonccl --single-rank --no-nccl-gpu
"$CLI" report "$T/nonccl" >"$T/nonccl.txt" 2>/dev/null
check "totals: compute kernels but no NCCL GPU time -> host time, not 0.00" grep -qE "^communication: 0.2[0-9] ms per rank in NCCL calls \(host time: no NCCL kernel traced" "$T/nonccl.txt"
"$CLI" report --json "$T/nonccl" >"$T/nonccl.json" 2>/dev/null
check_eq "totals: no NCCL GPU time -> the rank's comm_time_source is host (it has compute kernels)" \
	"host host 0.2" "$(pyq "$T/nonccl.json" "d['ranks'][0]['comm_time_source'], d['job']['comm_time_source'], d['job']['comm_host_ms_per_rank']" | tr -d "(),'")"
check "totals: RANKS marks host-timed comm ms with h" grep -qE "^ +0 node0 +5000 +[0-9.]+ +0\.20h " "$T/nonccl.txt"
# a world-size-1 job: NCCL runs the in-place AllReduce as nothing (host time only, 'h'), the
# Bcast as a copy (GPU time): communication is both, and says which part is host time
gen inplace --single-rank --in-place
"$CLI" report "$T/inplace" >"$T/inplace.txt" 2>/dev/null
"$CLI" report --json "$T/inplace" >"$T/inplace.json" 2>/dev/null
check "totals: in-place AllReduce is an h row, the Bcast a GPU row" bash -c "grep -qE '^  0005eed0c0117ec7 ncclAllReduce +1 +40.0 +16.000 +0.20h ' '$T/inplace.txt' && grep -qE '^  0005eed0c0117ec7 ncclBcast +1 +40.0 +1.000 +0.80  ' '$T/inplace.txt'"
check "totals: summary = GPU part + host part, host part named" grep -qE "^communication: 1.00 ms per rank \(0.90 ms in the steps\); exposed 0.72 ms = 0.2% of the steps' time; 0.20 ms of it is host call time of collectives NCCL ran without GPU work" "$T/inplace.txt"
check "totals: RANKS comm ms 1.00h" grep -qE "^ +0 node0 +5000 +[0-9.]+ +1\.00h +0\.72 " "$T/inplace.txt"
check_eq "totals: JSON COLLECTIVES sum = comm_ms_per_rank = rank comm_ms; source gpu+host; host part 0.2" "True" \
	"$(pyq "$T/inplace.json" "abs(sum(c['time_ms_per_rank'] for c in d['collectives']) - d['job']['comm_ms_per_rank']) < 0.01 and d['ranks'][0]['comm_ms'] == d['job']['comm_ms_per_rank'] and d['job']['comm_time_source'] == d['ranks'][0]['comm_time_source'] == 'gpu+host' and d['job']['comm_host_ms_per_rank'] == d['ranks'][0]['comm_host_ms'] == 0.2")"
# the same on a real job: examples/ddp_train.py --nprocs 1 with NVLPROF_KERNELS=all on one H200
# (run 9): NCCL ran its 118 AllReduce and 5 Bcast as nothing, the 0-byte AllGather as a copy
W1="$ROOT/tests/analyzer/traces/ddp_ws1_all"
"$CLI" report "$W1" >"$T/w1.txt" 2>/dev/null
"$CLI" report --json "$W1" >"$T/w1.json" 2>/dev/null
check "totals (real ws1): summary names the host part" grep -qE "^communication: 0.33 ms per rank \(0.19 ms in the steps\); .*; 0.33 ms of it is host call time" "$T/w1.txt"
check_eq "totals (real ws1): COLLECTIVES sum = comm_ms_per_rank, gpu+host" "True" \
	"$(pyq "$T/w1.json" "abs(sum(c['time_ms_per_rank'] for c in d['collectives']) - d['job']['comm_ms_per_rank']) < 0.005 and d['job']['comm_time_source'] == 'gpu+host' and [c['time_source'] for c in d['collectives']] == ['host', 'host', 'gpu']")"
"$CLI" diff --json "$T/nonccl" "$T/inplace" >"$T/ipd.json" 2>/dev/null
check_eq "totals: diff compares the same figures (comm 0.2 -> 1, host part 0.2 -> 0.2)" "0.2 1 0.2 0.2" \
	"$(pyq "$T/ipd.json" "' '.join('%g %g' % (m['before'], m['after']) for m in d['metrics'] if m['name'] in ('comm_ms_per_rank', 'comm_host_ms_per_rank'))")"
# 3. staged copies: achieved GB/s and what a peer copy would have taken
"$CLI" report --json "$EX/p2p_staged" >"$T/sg.json" 2>/dev/null
check_eq "staged: achieved ~38 GB/s, a peer copy at the 450 GB/s peak ~12.5 ms, lost = staged - peer" "True" \
	"$(pyq "$T/sg.json" "[30 < e['achieved_gbps'] < 45 and 12 < e['peer_copy_ms'] < 13 and abs(e['lost_ms'] - (e['staged_ms'] - e['peer_copy_ms'])) < 0.01 and e['peer_copy_rate'].startswith('nvlink_peak') for f in d['findings'] if f['id']=='peer_access_disabled' for e in [f['evidence']]][0]")"
check_eq "staged: COPIES row has the achieved rate" "True" "$(pyq "$T/sg.json" "30 < d['copies'][0]['gbps'] < 45")"
# names as NCCL spells them: the job's ncclBcast is ncclBcast in both tables
"$CLI" report "$EX/ddp_healthy" >"$T/dh.txt" 2>/dev/null
check "names: CHOICES say ncclBcast where the job called ncclBcast" grep -qE "^  [0-9a-f]{16} ncclBcast +RING/LL" "$T/dh.txt"
check "names: no ncclBroadcast left in that report" bash -c "! grep -q ncclBroadcast '$T/dh.txt'"
# 3. exposed_communication's cost: the exposed time per step and over the run, never above the
# steps' time
check_eq "cost: exposed lost_per_step_ms x steps = lost_ms, below the step time" "True" \
	"$(pyq "$T/p2p.json" "[abs(e['lost_per_step_ms'] * d['job']['steps'] - e['lost_ms']) < 0.5 and e['lost_per_step_ms'] < d['job']['step_ms'] for f in d['findings'] if f['id']=='exposed_communication' for e in [f['evidence']]][0]")"
# a failed collective's 5 s does not stretch the step window
check "failed: the step window stays on the steps (exposure not diluted by the 5 s wait)" grep -qE "^communication: .* exposed .* = [0-9]+\.[0-9]% of the steps' time" "$T/fail.txt"
check_eq "failed: exposed share over the steps ~1.2% (0.06% if the 5 s counted)" "True" "$(pyq "$T/fail.json" "0.008 < d['job']['exposed_share'] < 0.02")"
[ "$FAILED" -eq 0 ]

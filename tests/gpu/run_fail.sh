#!/usr/bin/env bash
# run_fail.sh: the post-mortem catalog on real NCCL: HF GPT-2 under torchrun, two ranks sharing ONE GPU (each
# its own NCCL_HOSTID, so NCCL connects them over NET/Socket on loopback), failing one way per scenario
# (tests/gpu/real/fail_train.py --mode). Logs, reports and traces in $OUT.
#   bash tests/gpu/run_fail.sh [healthy] [stuck] [loader] [count] [dtype] [op] [root] [func] [exits] [segv]
#                              [barrier] [stuckwd] [oom] [killtree]
# What the report must say first, per scenario (tests/gpu/results/fail*.txt holds what it said):
#   healthy   no hang_suspect, collective_mismatch or rank_ended; losses identical to the run without nvlprof
#   stuck     hang_suspect: rank 1 never entered ncclAllReduce #N (in load_next_batch, fail_train.py, time.sleep);
#             rank 0 waited in it until SIGABRT (torch's watchdog), ~timeout later; rank 1 ended by SIGTERM
#   loader    as stuck, rank 1's main thread waiting on its DataLoader
#   count/dtype/op/root/func
#             collective_mismatch at one seq naming both sides' values; the hang that follows points at it
#   exits     rank_ended: rank 1 exited with status 3 in step --at; rank 0 ended by SIGTERM (torchrun)
#   segv      rank 1 ended by SIGSEGV (in its main thread)
#   barrier   hang_suspect on the default group (rank 1 never entered its next AllReduce) and on the subgroup
#             (rank 0 never entered the barrier's AllReduce)
#   stuckwd   stuck with TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=20: torch's heartbeat monitor aborts the rank whose
#             watchdog is stuck (SIGABRT, named with its thread)
#   oom       rank 1 killed by the OOM killer (the cgroup's oom_kill count rose), where cgroup v2 is writable
#   killtree  the whole process tree SIGKILLed at a time limit: every rank "without an END record", the
#             launcher listed as a launcher (not a rank, not another job)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-fail}
DONE_MSG="run_fail: done"
scen=${*:-healthy stuck loader count dtype func exits segv oom killtree}
JOB_TIMEOUT=${JOB_TIMEOUT:-120}
. tests/gpu/common.sh
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=1
R=tests/gpu/real
TRH="torchrun --standalone --nproc-per-node 2 --no-python tests/gpu/hostid_rank.sh"
F="$R/fail_train.py --steps 30 --at 15 --timeout-s ${WD_S:-15}"
# the Python sampler's CPU (schedstat ns of each nvlprof-pysamp thread, and of its whole process) while
# a job runs, polled every 0.5 s into $L/$1.pysamp (the last line per thread is its total)
pysamp_watch() {
	while sleep 0.5; do
		for t in /proc/[0-9]*/task/[0-9]*; do
			[ "$(cat $t/comm 2>/dev/null)" = nvlprof-pysamp ] || continue
			p=${t%/task/*}
			tot=0
			for u in $p/task/*; do tot=$((tot + $(cut -d' ' -f1 $u/schedstat 2>/dev/null || echo 0))); done
			echo "${p#/proc/} ${t##*/} $(cut -d' ' -f1 $t/schedstat) $tot"
		done
	done >"$L/$1.pysamp" 2>/dev/null
}
if want healthy; then
	log "healthy: with and without nvlprof"
	base healthy_base $TRH $F --mode healthy --json $L/healthy_base.json
	pysamp_watch healthy & w=$!
	run healthy $TRH $F --mode healthy --json $L/healthy.json
	kill $w 2>/dev/null
fi
for m in stuck loader count dtype op root func exits segv barrier; do
	want $m || continue
	log "$m"
	run $m $TRH $F --mode $m
done
if want stuckwd; then
	log "stuckwd: stuck, and torch's heartbeat monitor after 20 s"
	TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=20 run stuckwd $TRH $F --mode stuck
fi
if want oom; then
	# the whole job in a cgroup of its own with a memory limit, so the kernel's OOM killer (not Python's
	# MemoryError) ends the rank that allocates; skipped where cgroup v2 cannot be written here
	cg=/sys/fs/cgroup/nvlp_oom
	if grep -q '^0::' /proc/self/cgroup && mkdir -p $cg 2>/dev/null && echo 24G >$cg/memory.max 2>/dev/null; then
		log "oom (cgroup $cg, memory.max 24G)"
		(echo $BASHPID >$cg/cgroup.procs && run oom $TRH $F --mode oom)
		cat $cg/memory.events >$L/oom_memory.events 2>&1
	else
		log "oom: skipped (no writable cgroup v2 memory controller: $(cat /proc/self/cgroup | head -3))"
		echo "skipped" >$L/oom.wall
	fi
fi
if want killtree; then
	log "killtree: the whole tree SIGKILLed after 35 s (a scheduler's time limit)"
	setsid bash -c "exec $NV run -o $T/killtree -- $TRH $R/fail_train.py --steps 100000 --mode healthy" \
		>$L/killtree.log 2>&1 &
	sid=$!
	sleep 35
	kill -9 -- -$sid 2>/dev/null
	sleep 2
	pkill -9 -f 'fail_train.py --steps 100000' 2>/dev/null
	echo "killed after 35 s" >$L/killtree.wall
fi

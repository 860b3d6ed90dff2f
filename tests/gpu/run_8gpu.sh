#!/usr/bin/env bash
# run_8gpu.sh: the 8-GPU proof (issue 5; one HGX host, 8 NVLink/NVSwitch GPUs): FSDP (AllGather/ReduceScatter)
# and DDP jobs on 8 ranks under nvlprof, the scenario matrix on 8 ranks, overhead side by side, report speed,
# and measured bus bandwidth against nccl-tests-style figures. Leaves traces, reports and logs in $OUT
# (default /tmp/nvlp-8gpu), packed by an EXIT trap whatever happens. Needs build/ made (carried) and torch.
#   bash tests/gpu/run_8gpu.sh [scenario ...]
#   scenarios: fsdp ddp torchrun fallback straggler kill busbw speed overhead ship  (default: all, in that order)
#   env: NGPU (8), STEPS (40), LATE_RANK (5), KILL_RANK (5), OVH_PAIRS (2), OVH_STEPS (100)
# The same checks run without a GPU on synthetic 8-rank traces in tests/analyzer/test_eight.sh.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-8gpu} DONE_MSG="8-gpu run done"
scen=${*:-fsdp ddp torchrun fallback straggler kill busbw speed overhead ship}
. tests/gpu/common.sh
N=${NGPU:-8}
STEPS=${STEPS:-40}
LATE=${LATE_RANK:-5}
KILL=${KILL_RANK:-5}
# DDP without its one cuda:0 -> cuda:1 copy: rank 0 would touch GPU 1 first and take its link counters
FSDP="examples/fsdp_train.py --nprocs $N"
DDP="examples/ddp_train.py --nprocs $N --xdev-mib 0"
CK="$PY tests/gpu/check.py"
[ -x "$NV" ] || { echo "FAIL: $NV not built"; exit 1; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "$ngpu" -ge "$N" ] || { echo "FAIL: $N GPUs needed, $ngpu found"; exit 1; }
nvidia-smi topo -m >$L/topo.txt 2>&1
$NV --version >$L/version.txt 2>&1

if want fsdp; then
	log "healthy FSDP on $N ranks: baseline, then under nvlprof run"
	$PY $FSDP --steps $STEPS --json $L/fsdp_base.json >$L/fsdp_base.log 2>&1
	$NV run -o $T/fsdp_healthy -- $PY $FSDP --steps $STEPS --json $L/fsdp_prof.json >$L/fsdp_prof.log 2>&1
	$CK losses $L/fsdp_base.json $L/fsdp_prof.json
	$CK ranks $T/fsdp_healthy $N $((STEPS * 2))
	$CK links $T/fsdp_healthy $N nvlink
	$CK findings $T/fsdp_healthy -
fi
if want ddp; then
	log "healthy DDP on $N ranks: baseline, then under nvlprof run"
	$PY $DDP --steps $STEPS --json $L/ddp_base.json >$L/ddp_base.log 2>&1
	$NV run -o $T/ddp_healthy -- $PY $DDP --steps $STEPS --json $L/ddp_prof.json >$L/ddp_prof.log 2>&1
	$CK losses $L/ddp_base.json $L/ddp_prof.json
	$CK ranks $T/ddp_healthy $N $STEPS
	$CK links $T/ddp_healthy $N nvlink
	$CK findings $T/ddp_healthy -
fi
if want torchrun; then
	log "FSDP under torchrun (the agent is preloaded too: it must not count as a rank)"
	timeout 300 $NV run -o $T/fsdp_torchrun -- torchrun --standalone --nproc-per-node $N examples/fsdp_train.py --steps 20 \
		>$L/fsdp_torchrun.log 2>&1
	$CK ranks $T/fsdp_torchrun $N 40
	$CK findings $T/fsdp_torchrun -
fi
if want fallback; then
	log "FSDP and DDP on $N ranks with NCCL_P2P_DISABLE=1"
	NCCL_P2P_DISABLE=1 $NV run -o $T/fsdp_p2p_disable -- $PY $FSDP --steps $STEPS >$L/fsdp_p2p_disable.log 2>&1
	$CK ranks $T/fsdp_p2p_disable $N $((STEPS * 2))
	$CK findings $T/fsdp_p2p_disable pcie_fallback
	$CK links $T/fsdp_p2p_disable $N pcie
	NCCL_P2P_DISABLE=1 $NV run -o $T/ddp_p2p_disable -- $PY $DDP --steps $STEPS >$L/ddp_p2p_disable.log 2>&1
	$CK findings $T/ddp_p2p_disable pcie_fallback
	$CK links $T/ddp_p2p_disable $N pcie
	if [ -d $T/ddp_healthy ]; then
		$CK flip $T/ddp_healthy $T/ddp_p2p_disable
		$NV diff --json $T/ddp_healthy $T/ddp_p2p_disable >$L/diff_fallback.json 2>&1
		$NV diff $T/ddp_healthy $T/ddp_p2p_disable >$L/diff_fallback.txt 2>&1
		$CK diff $L/diff_fallback.json
	fi
fi
if want straggler; then
	log "FSDP on $N ranks, rank $LATE sleeping 20 ms before each step"
	$NV run -o $T/fsdp_straggler -- $PY $FSDP --steps $STEPS --sleep-rank $LATE --sleep-ms 20 >$L/fsdp_straggler.log 2>&1
	$CK ranks $T/fsdp_straggler $N $((STEPS * 2))
	# the others' wait may show as exposed communication (explained by the straggler: info) or not
	$CK findings $T/fsdp_straggler straggler,exposed_communication? straggler@rank=$LATE
	$NV run -o $T/ddp_straggler -- $PY $DDP --steps $STEPS --sleep-rank $LATE --sleep-ms 20 >$L/ddp_straggler.log 2>&1
	$CK findings $T/ddp_straggler straggler,exposed_communication? straggler@rank=$LATE
fi
if want kill; then
	log "FSDP on $N ranks, rank $KILL killed at step 20"
	timeout 180 $NV run -o $T/fsdp_killed -- $PY $FSDP --steps $STEPS --kill-rank $KILL --kill-step 20 --timeout-s 10 \
		>$L/fsdp_killed.log 2>&1
	$CK findings $T/fsdp_killed hang_suspect hang_suspect@rank=$KILL
	timeout 180 $NV run -o $T/ddp_killed -- $PY $DDP --steps $STEPS --kill-rank $KILL --kill-step 20 --timeout-s 10 \
		>$L/ddp_killed.log 2>&1
	$CK findings $T/ddp_killed hang_suspect hang_suspect@rank=$KILL
fi
if want busbw; then
	log "nccl-tests-style bus bandwidth (no profiler) against what the report measured"
	$PY $FSDP --steps 0 --nccl-tests $L/nccl_tests.json >$L/nccl_tests.log 2>&1
	for d in fsdp_healthy ddp_healthy fsdp_p2p_disable; do
		[ -d $T/$d ] && $CK busbw $T/$d $L/nccl_tests.json
	done
fi
if want speed; then
	log "nvlprof report speed on the $N-rank traces"
	for d in "$T"/*/; do
		[ -d "$d" ] && $CK speed "$d" 5 2
	done
fi
if want overhead; then
	log "overhead: alternating runs without / with nvlprof / API capture only, FSDP and DDP on $N ranks"
	for i in $(seq 1 ${OVH_PAIRS:-2}); do
		for job in fsdp ddp; do
			[ $job = fsdp ] && J=$FSDP || J=$DDP
			$PY $J --steps ${OVH_STEPS:-100} --json $L/${job}8_base_$i.json >$L/${job}8_base_$i.log 2>&1
			# nvlprof run -o refuses a directory holding an earlier run's traces
			rm -rf /tmp/nvlp-ovh8-$job-$i /tmp/nvlp-ovh8-api-$job-$i
			$NV run -o /tmp/nvlp-ovh8-$job-$i -- $PY $J --steps ${OVH_STEPS:-100} --json $L/${job}8_prof_$i.json \
				>$L/${job}8_prof_$i.log 2>&1
			NVLPROF_CUPTI=0 $NV run -o /tmp/nvlp-ovh8-api-$job-$i -- $PY $J --steps ${OVH_STEPS:-100} \
				--json $L/${job}8_api_$i.json >$L/${job}8_api_$i.log 2>&1
		done
	done
	$CK overhead $L fsdp8
	$CK overhead $L ddp8
fi
if want ship; then
	# a small 8-rank trace for examples/traces/ (issue 5.3): copy $OUT/ship/fsdp8_healthy there, then
	# UPDATE_GOLDEN=1 bash tests/analyzer/test_report.sh writes its report.txt golden
	log "small 8-rank trace to ship"
	S=$OUT/ship/fsdp8_healthy
	rm -rf $S
	$NV run -o $S -- $PY $FSDP --steps 12 --warmup 2 --layers 4 --hidden 2048 >$L/ship.log 2>&1
	printf '%s\n' "# 8 x H200, examples/fsdp_train.py --steps 12 --layers 4 --hidden 2048: healthy FSDP" \
		-pcie_fallback -straggler -hang_suspect -low_bus_bandwidth -peer_access_disabled -uma_thrashing >$S/expect
	$CK ranks $S $N 24
	$CK findings $S -
	du -sh $S >&2
fi

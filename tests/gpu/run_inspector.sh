#!/usr/bin/env bash
# run_inspector.sh: NCCL Inspector chained behind nvlprof's NCCL profiler plugin, on the GPU machine.
# The same 2-rank DDP job (two ranks sharing one GPU, NCCL_HOSTID per rank, NCCL's socket transport;
# torch's NCCL 2.28.9) runs ROUNDS times in each of four set-ups, rotated within a round:
#   a: Inspector alone (NCCL_PROFILER_PLUGIN=inspector, no nvlprof)   b: nvlprof + Inspector
#   c: nvlprof alone                                                   d: neither
# and inspector_cmp.py writes $OUT/inspector_cmp.txt: Inspector's records in a and b (collectives,
# sizes, sequence numbers, timing source, execution times within noise), nvlprof's KernelCh
# records and the chain NOTE in b, the losses of all runs (identical), and the step time of each
# set-up against d (median of the rounds, with their spread). Ends with "run_inspector: done".
#   bash tests/gpu/run_inspector.sh        (needs build/libnvlprof.so, build/nvlprof and
#                                           build/inspector/libnccl-profiler-inspector.so carried)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-inspector}
DONE_MSG="run_inspector: done"
scen=all
JOB_TIMEOUT=120
. tests/gpu/common.sh
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=1
INS=$PWD/build/inspector/libnccl-profiler-inspector.so
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-60}
[ -f "$INS" ] || { echo "FAIL: $INS missing (carry it: see docs/NCCL_PLUGIN.md)"; exit 1; }
[ -x "$NV" ] || { echo "FAIL: $NV missing"; exit 1; }
JOB=($PY examples/ddp_train.py --nprocs 2 --hostid-per-rank --steps "$STEPS" --hidden 1024 --layers 4
	--xdev-mib 0 --timeout-s 60)
# one NAME SETUP ROUND: the job in set-up a, b, c or d; Inspector writes into $L/insp_NAME
one() {
	local n=$1 s=$2
	local ins=(env NCCL_PROFILER_PLUGIN="$INS" NCCL_INSPECTOR_ENABLE=1
		NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=${INSPECTOR_US:-200}
		NCCL_INSPECTOR_DUMP_DIR="$L/insp_$n")
	log "$n (set-up $s)"
	# made here: Inspector's own mkdir races between two ranks starting together, and the rank whose
	# mkdir fails with EEXIST writes nothing (inspector.cc, NCCL 2.28.9)
	mkdir -p "$L/insp_$n"
	case $s in
	a) base "$n" "${ins[@]}" "${JOB[@]}" --json "$L/$n.json" ;;
	b) base "$n" "${ins[@]}" "$NV" run -o "$T/$n" -- "${JOB[@]}" --json "$L/$n.json" ;;
	c) run "$n" env -u NCCL_PROFILER_PLUGIN "${JOB[@]}" --json "$L/$n.json" ;;
	d) base "$n" env -u NCCL_PROFILER_PLUGIN "${JOB[@]}" --json "$L/$n.json" ;;
	esac
}
# the first job warms caches (Python, CUDA, NCCL): not measured
base warmup env -u NCCL_PROFILER_PLUGIN "${JOB[@]}" --steps 10
for r in $(seq 1 "$ROUNDS"); do
	order="a b c d"
	[ $((r % 2)) = 0 ] && order="d c b a"
	for s in $order; do
		one "${s}_r$r" "$s"
	done
done
for r in $(seq 1 "$ROUNDS"); do # nvlprof's view of b and c: its KernelCh records and notes
	for s in b c; do
		[ -d "$T/${s}_r$r" ] || continue
		"$NV" dump "$T/${s}_r$r" 2>&1 | awk '{n[$1]++} /^note nccl_plugin/ {print} END {for (k in n) print "count", k, n[k]}' \
			>"$L/dump_${s}_r$r.txt"
	done
done
python3 tests/gpu/inspector_cmp.py "$L" "$ROUNDS" | tee "$OUT/inspector_cmp.txt"

#!/usr/bin/env bash
# test_graphs12.sh: CUDA graph capture and replay, CUDA 12 and 13 runtimes, NCCL 2.18 (no profiler plugin), against the fakes.
set -u
. "$(dirname "$0")/../lib.sh"

export NVLPROF_CUPTI=0
READ="$PROGS/hk_read"
GRAPHP="$PROGS/hk_graph"
GOLD="$ROOT/tests/hooks/golden"

# run_traced NAME LIBDIR CMD...: CMD under the shim with LIBDIR first on the library path
run_traced() {
	local name=$1 dir=$2; shift 2
	mkdir -p "$T/$name"
	NVLPROF_DIR="$T/$name" LD_LIBRARY_PATH="$dir" LD_PRELOAD="$PRELOAD" "$@" >"$T/$name.out" 2>"$T/$name.err"
	local rc=$?
	: >"$T/$name.txt"
	for f in "$T/$name"/*.nvlp; do [ -f "$f" ] && "$READ" "$f" | sed 's/$/ /' >>"$T/$name.txt"; done
	return $rc
}
filt() { if [ $# -eq 0 ]; then cat; else local p=$1; shift; grep -E -- "$p" | filt "$@"; fi; }
count() { local f=$1; shift; filt "$@" <"$f" | wc -l; }
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# ---- the graph and CUDA 12 entry points are exported ---------------------------------------------
exports=$(nm -D --defined-only "$LIB" | awk '{print $3}')
for s in cudaStreamBeginCapture cudaStreamEndCapture_ptsz cudaGraphInstantiate cudaGraphInstantiateWithFlags \
	cudaGraphInstantiateWithParams cudaGraphLaunch cudaGraphLaunch_ptsz cudaMemPrefetchAsync_v2 cudaMemAdvise_v2; do
	check_eq "export_$s" 1 "$(printf '%s\n' "$exports" | grep -cx "$s")"
done

# ---- the same program, without the shim: what it must print under it too ------------------------
LD_LIBRARY_PATH="$FAKES" "$GRAPHP" libcudart.so.13 13 5 libnccl.so.2 >"$T/plain13.out" 2>&1
check_eq plain_replays_copy 1 "$(grep -c 'launches ok=5 of 5 fake_saw=5 data_ok=1' "$T/plain13.out")"

# ---- CUDA 13: capture, instantiate, 5 replays, NCCL called during the capture --------------------
FAKE_NCCL_KCH=1 run_traced g13 "$FAKES" "$GRAPHP" libcudart.so.13 13 5 libnccl.so.2
check_eq g13_exit 0 "$?"
check g13_output_unchanged cmp "$T/plain13.out" "$T/g13.out"
check_eq g13_capture_not_executed 1 "$(grep -c 'copied_during_capture=0' "$T/g13.out")"
check_eq g13_begin 1 "$(count "$T/g13.txt" '^graph op=1 ' ' stream=0x5100 ' ' capture_id=1 ' ' rc=0 ')"
g=$(field "$(grep -m1 '^graph op=2 ' "$T/g13.txt")" graph)
check_eq g13_end_has_graph 1 "$([ -n "$g" ] && [ "$g" != 0x0 ] && echo 1)"
check_eq g13_instantiate_of_that_graph 1 "$(count "$T/g13.txt" '^graph op=3 ' " graph=$g ")"
check_eq g13_launches 5 "$(count "$T/g13.txt" '^graph op=4 ' ' stream=0x5100 ' ' rc=0 ')"
check_eq g13_allreduce_records 3 "$(count "$T/g13.txt" '^nccl fn=ncclAllReduce ')"
cid=$(field "$(grep '^nccl fn=ncclAllReduce ' "$T/g13.txt" | sed -n 2p)" call_id)
check_eq g13_nccl_captured 1 "$(count "$T/g13.txt" '^captured ' " call_id=$cid " ' capture_id=1 ' ' kind=3 ')"
check_eq g13_copy_captured 1 "$(count "$T/g13.txt" '^captured ' ' kind=4 ')"
check_eq g13_eager_not_captured 2 "$(count "$T/g13.txt" '^captured ')"
"$CLI" report "$T/g13" >"$T/g13.rep" 2>&1
check_eq g13_report_executions 1 "$(grep -c '1 collective calls captured (recorded at capture, not executed) ran 5 times in graph replays (5 of them timed), beside 2 executed when called; 1 copies captured' "$T/g13.rep")"
check_eq g13_report_per_call 1 "$(grep -c 'ncclAllReduce seq 2 (256 B, comm [0-9a-f]*): 5 executions, 5 timed (KernelCh): 2.0 us mean (2.0-2.0)' "$T/g13.rep")"
"$CLI" report --json "$T/g13" >"$T/g13.json" 2>&1
check_eq g13_json 1 "$(python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["graphs"]; c=g["captured"][0]; print(int(g["replay_executions"]==5 and g["eager_executions"]==2 and c["executions"]==5 and c["timed"]==5 and abs(c["gpu_mean_us"]-2.0)<0.01))' "$T/g13.json")"
# four eager Broadcasts first: NCCL numbers the AllReduces apart from them (the captured one is its
# AllReduce #1, the shim's seq 6), and the replays are still found under that number
FAKE_NCCL_KCH=1 HK_BCAST=4 run_traced g13b "$FAKES" "$GRAPHP" libcudart.so.13 13 5 libnccl.so.2
check_eq g13b_exit 0 "$?"
"$CLI" report "$T/g13b" >"$T/g13b.rep" 2>&1
check_eq g13b_report_per_call 1 "$(grep -c 'ncclAllReduce seq 6 (256 B, comm [0-9a-f]*): 5 executions, 5 timed (KernelCh): 2.0 us mean (2.0-2.0)' "$T/g13b.rep")"
check_eq g13b_all_timed 1 "$(grep -c '7 collectives from 22 channel records; 7 calls given their GPU time from them' "$T/g13b.rep")"
check_eq g13b_all_matched 1 "$(grep -c '; 0 collectives matched no call' "$T/g13b.rep")"
check_eq g13b_eager_timed 1 "$(grep -c 'beside 6 executed when called' "$T/g13b.rep")"
# golden: the graph lines, communicator hash masked
mkdir -p "$T/gold"
grep -A1 '^CUDA graphs' "$T/g13.rep" | sed 's/comm [0-9a-f]*/comm HASH/' >"$T/gold/graphs.txt"
golden_cmp "golden: graphs" "$GOLD/graphs.txt" "$T/gold/graphs.txt"
# executions timed from CUPTI's graph records (no KernelCh): a synthetic trace (mkgraph.c)
mkdir -p "$T/mg" && "$PROGS/mkgraph" "$T/mg/a.nvlp"
"$CLI" report "$T/mg" >"$T/mg.rep" 2>&1
check_eq mg_totals 1 "$(grep -c '2 collective calls captured (recorded at capture, not executed) ran 8 times in graph replays (8 of them timed), beside 2 executed when called' "$T/mg.rep")"
check_eq mg_allreduce_kth_nccl_node 1 "$(grep -c 'ncclAllReduce seq 3 (1024 B, comm 00000000c0ffee00): 4 executions, 4 timed (CUPTI kernels): 11.5 us mean (10.0-13.0)' "$T/mg.rep")"
check_eq mg_allgather_kth_nccl_node 1 "$(grep -c 'ncclAllGather seq 4 (1024 B, comm 00000000c0ffee00): 4 executions, 4 timed (CUPTI kernels): 20.0 us mean (20.0-20.0)' "$T/mg.rep")"
check_eq mg_graph_span 1 "$(grep -c 'graph 4 on the GPU: 4 executions (of 4 launches), 40.0 us each (40.0-40.0)' "$T/mg.rep")"
check_eq mg_foreign_graph 1 "$(grep -c 'graph 9 on the GPU: 2 executions (no launch intercepted' "$T/mg.rep")"
"$CLI" report --json "$T/mg" >"$T/mg.json" 2>&1
check_eq mg_json 1 "$(python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["graphs"]; c=g["captured"]; u=g["gpu"]; print(int(c[0]["time_source"]=="cupti" and abs(c[0]["gpu_mean_us"]-11.5)<0.01 and u[0]["executions"]==4 and u[0]["launch_seen"] and not u[1]["launch_seen"] and abs(u[1]["span_mean_us"]-7.0)<0.01))' "$T/mg.json")"
grep -A5 '^CUDA graphs' "$T/mg.rep" >"$T/gold/mkgraph.txt"
golden_cmp "golden: mkgraph" "$GOLD/mkgraph.txt" "$T/gold/mkgraph.txt"
# without graphs, the report has no graph section and JSON says null
run_traced nog "$FAKES" "$GRAPHP" libcudart.so.13 13 0
"$CLI" report --json "$T/nog" >"$T/nog.json" 2>&1
check_eq nog_json_zero_launches 1 "$(python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["graphs"]; print(int(g["launches"]==0 and g["replay_executions"]==0))' "$T/nog.json")"

# ---- CUDA 12: the shim binds libcudart.so.12's version node and reads 12's signatures -------------
LD_LIBRARY_PATH="$FAKES/cuda12" "$GRAPHP" libcudart.so.12 12 3 >"$T/plain12.out" 2>&1
run_traced g12 "$FAKES/cuda12" "$GRAPHP" libcudart.so.12 12 3
check_eq g12_exit 0 "$?"
check g12_output_unchanged cmp "$T/plain12.out" "$T/g12.out"
check_eq g12_prefetch_args_forwarded 1 "$(grep -c 'prefetch rc=0 dev=1 stream_ok=1' "$T/g12.out")"
check_eq g12_prefetch_record 1 "$(count "$T/g12.txt" '^managed fn=cudaMemPrefetchAsync ' ' target=1 ' ' stream=0x5100 ' ' flags=0 ')"
check_eq g12_advise_record 1 "$(count "$T/g12.txt" '^managed fn=cudaMemAdvise ' ' target=1 ')"
check_eq g12_launches 3 "$(count "$T/g12.txt" '^graph op=4 ' ' rc=0 ')"
check_eq g12_copy_captured 1 "$(count "$T/g12.txt" '^captured ' ' capture_id=1 ' ' kind=4 ')"
check_eq g12_no_unresolved 0 "$(count "$T/g12.txt" '^note code=unresolved ')"
check_eq g12_no_warning 0 "$(grep -c 'cannot find the real' "$T/g12.err")"
# the 13 run read the same words as a location: both give device 1
check_eq g13_prefetch_record 1 "$(count "$T/g13.txt" '^managed fn=cudaMemPrefetchAsync ' ' target=1 ' ' stream=0x5100 ')"

# ---- CUPTI of CUDA 12: a CUDA 12 runtime gets libcupti.so.12 (even with 13 in /usr/local/cuda) --
C="$FAKES/cupti"
cupti12() { # NAME VERSION: hk_graph on the 12 runtime with the fake CUPTI 12 reporting VERSION
	NVLPROF_CUPTI=1 NVLPROF_KERNELS=all FAKE_CUPTI_VERSION=$2 HK_CUPTI=libcupti.so.12 \
		run_traced "$1" "$FAKES/cuda12:$C/12:$C" "$GRAPHP" libcudart.so.12 12 3
}
cupti12 c12 22
check_eq c12_exit 0 "$?"
check_eq c12_cupti12_loaded 1 "$(grep -c '^cupti_loaded=1' "$T/c12.out")"
check_eq c12_activity_on 1 "$(count "$T/c12.txt" '^note code=activity_on ' ' value=22 ' 'libcupti\.so\.12')"
check_eq c12_kernel_records 4 "$(count "$T/c12.txt" '^kernel ' ' grid_x=4 ' ' block_x=256 ' ' dur=100[0-3] ')"
cupti12 c12bad 999
check_eq c12_unknown_version_noted 1 "$(count "$T/c12bad.txt" '^note code=cupti_version ' ' value=999 ')"
check_eq c12_unknown_version_no_kernels 0 "$(count "$T/c12bad.txt" '^kernel ')"
check_eq c12_unknown_version_job_ok 1 "$(grep -c 'launches ok=3 of 3' "$T/c12bad.out")"

# ---- NCCL 2.18: no profiler plugin, fewer functions; the API records still come ---------------------
# ($FAKES after it: under ASan, dlopen is called from libasan, so the program's RUNPATH does not apply)
run_traced n218 "$FAKES/nccl218:$FAKES" "$GRAPHP" libcudart.so.13 13 2 libnccl.so.2
check_eq n218_exit 0 "$?"
check_eq n218_allreduce_records 3 "$(count "$T/n218.txt" '^nccl fn=ncclAllReduce ' ' rc=0 ')"
check_eq n218_no_plugin_records 0 "$(count "$T/n218.txt" '^(ncclprof|kch) ')"
run_traced n218np "$FAKES/nccl218:$FAKES" "$PROGS/hk_nccl" outparams
check_eq n218_outparams_exit 0 "$?"
# functions 2.18 lacks fail with ncclSystemError (2), are not recorded, and are noted once
check_eq n218_shrink_fails_soft 1 "$(grep -c '^shrink rc=2 ' "$T/n218np.out")"
check_eq n218_shrink_not_recorded 0 "$(count "$T/n218np.txt" '^nccl fn=ncclCommShrink ')"
check_eq n218_shrink_noted 1 "$(count "$T/n218np.txt" '^note code=unresolved ' ' blob=ncclCommShrink ')"
check_eq n218_shrink_reported_once 1 "$(grep -c 'cannot find the real ncclCommShrink' "$T/n218np.err")"
check_eq n218_all_missing_noted 9 "$(count "$T/n218np.txt" '^note code=unresolved ')"
"$CLI" report --json "$T/n218np" >"$T/n218np.json" 2>&1
check_eq nographs_json_null 1 "$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["graphs"] is None))' "$T/n218np.json")"
check_eq n218_init_recorded 1 "$(count "$T/n218np.txt" '^nccl fn=ncclCommInitRank ' ' rc=0 ')"

# ---- Debian's real CUDA 12.4 runtime and CUPTI, no driver (only with NVLP_CUDA12_DIR: the
# libraries from tests/build/fetch_cuda12.sh DIR, in DIR/lib): they load, every call fails soft ----
if [ -n "${NVLP_CUDA12_DIR:-}" ] && [ -f "$NVLP_CUDA12_DIR/lib/libcudart.so.12" ]; then
	L12="$NVLP_CUDA12_DIR/lib"
	LD_LIBRARY_PATH="$L12" "$GRAPHP" libcudart.so.12 12 3 >"$T/real12.plain" 2>&1
	NVLPROF_CUPTI=1 run_traced real12 "$L12" "$GRAPHP" libcudart.so.12 12 3
	check_eq real12_exit 0 "$?"
	check real12_output_unchanged cmp "$T/real12.plain" "$T/real12.out"
	check_eq real12_calls_failed_soft 1 "$(grep -c '^no device memory' "$T/real12.out")"
	check_eq real12_managed_recorded_failed 1 "$(count "$T/real12.txt" '^managed fn=cudaMallocManaged ' ' rc=(35|100) ')"
	check_eq real12_capture_recorded 1 "$(count "$T/real12.txt" '^graph op=1 ')"
	check_eq real12_no_unresolved 0 "$(count "$T/real12.txt" '^note code=unresolved ')"
	check_eq real12_complete 1 "$(count "$T/real12.txt" '^complete=1 ')"
fi

[ "$FAILED" -eq 0 ]

#!/usr/bin/env bash
# test_share.sh: real two-rank traces from one H200 or H100 (two ranks sharing the GPU over NET/Socket, the default capture: kernel windows plus NCCL's kernel channels): NCCL's per-function numbering, one communication figure, link bytes during collectives, a straggler of milliseconds in long steps.
. "$(dirname "$0")/../lib.sh"
TR="$ROOT/tests/analyzer/traces"
pyq() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
for t in ddp straggler killed hf; do
	"$CLI" report "$TR/share_$t" >"$T/$t.txt" 2>&1
	"$CLI" report --json "$TR/share_$t" >"$T/$t.json" 2>/dev/null
done

# NCCL numbers collectives per function (AllGather #0, Broadcast #0-4, AllReduce #0-157), the shim
# per communicator: every collective finds its call, none is taken for a graph replay
check "kch: every collective of share_ddp matched and timed (328 of 328)" \
	grep -q "328 collectives from 646 channel records; 328 calls given their GPU time from them, 0 already timed by CUPTI$" "$T/ddp.txt"
check "kch: no graph replays in a job without graphs" bash -c "! grep -q 'graph replays' '$T/ddp.txt'"
check_eq "kch: JSON unmatched 0, replays 0" "0 0" "$(pyq "$T/ddp.json" "d['kernel_channels']['unmatched'], d['kernel_channels']['graph_replays']" | tr -d '(),')"
check_eq "kch: the Broadcasts are timed (5 per rank, not h)" "gpu 5" "$(pyq "$T/ddp.json" "[(c['time_source'], c['calls_per_rank']) for c in d['collectives'] if c['collective'] == 'ncclBcast'][0]" | tr -d "()',")"
# a CUPTI kernel window's Broadcast kernels had been given to earlier Broadcasts (match.c)
check "kch: calls whose CUPTI kernel was another call's re-timed (share_killed: 2)" \
	grep -q "(2 of them re-timed: CUPTI's kernel was another call's)" "$T/killed.txt"
check_eq "kch: JSON calls_retimed" "2" "$(pyq "$T/killed.json" "d['kernel_channels']['calls_retimed']")"

# one communication figure: kernel-channel GPU time, as COLLECTIVES shows it
check "comm: data line says where GPU times came from" \
	grep -q "^data: GPU activity collectives only (NCCL's kernel channels; no CUPTI kernel)" "$T/ddp.txt"
check "comm: COLLECTIVES in GPU time" grep -q "^COLLECTIVES (per communicator; time is GPU kernel time)" "$T/ddp.txt"
check_eq "comm: summary = sum of COLLECTIVES' GPU time per rank, within 2%" "True" \
	"$(pyq "$T/ddp.json" "abs(d['job']['comm_ms_per_rank'] - sum(c['time_ms_per_rank'] for c in d['collectives'])) < 0.02 * d['job']['comm_ms_per_rank']")"
check_eq "comm: the ranks' comm ms average to the summary" "True" \
	"$(pyq "$T/ddp.json" "abs(sum(r['comm_ms'] for r in d['ranks']) / len(d['ranks']) - d['job']['comm_ms_per_rank']) < 0.01")"
check_eq "comm: source gpu, from kernel channels" "gpu kernel_channels" "$(pyq "$T/ddp.json" "d['job']['comm_time_source'] + ' ' + d['job']['collective_gpu_times']")"
check_eq "comm: in the steps: most of it, never more (both ranks have a device)" "True" \
	"$(pyq "$T/ddp.json" "0.8 * d['job']['comm_ms_per_rank'] < d['job']['comm_in_steps_ms_per_rank'] <= d['job']['comm_ms_per_rank']")"
check "comm: no CUPTI kernel: exposure unknown, not 0%, and how to measure it" grep -q "; exposure unknown (no compute kernel traced: NVLPROF_KERNELS=window measures it, at a cost)" "$T/ddp.txt"
check "comm: kernels in windows: exposure from the windows, not over the steps" \
	grep -q "; exposure from the kernel windows only (below)" "$T/hf.txt"
check_eq "comm: JSON exposed_over kernel_windows" "kernel_windows" "$(pyq "$T/hf.json" "d['job']['exposed_over']")"
check "comm: gap note says collectives are timed" grep -q "none fell inside; collectives timed by NCCL's kernel channels, compute overlap unknown" "$T/ddp.txt"
# link bytes during collectives from the kernel-channel intervals (the socket transport's PCIe traffic)
check_eq "links: PCIe bytes during collectives most of the total" "True" \
	"$(pyq "$T/ddp.json" "d['links'][0]['pcie_bytes_in_collectives'] > 0.9 * d['links'][0]['pcie_bytes']")"

# straggler: 20 ms before each of 40 steps of 183 ms (11%): below the share rule, a long lead
check "straggler: rank 1 late 20 ms per step" grep -q "^\[warning\] straggler: Rank 1 arrives last at 99% of collectives, typically 20.49 ms after the others" "$T/straggler.txt"
check_eq "straggler: cost about the sleeps (40 x 20 ms), not a sum over collectives" "True" \
	"$(pyq "$T/straggler.json" "[700 < f['evidence']['wait_caused_ms'] < 900 for f in d['findings'] if f['id'] == 'straggler'][0]")"
for t in ddp hf; do
	check "straggler: none in the healthy share_$t" bash -c "! grep -q straggler '$T/$t.txt'"
done
# the killed rank: hang_suspect still, with the Python lines of both ranks
check "killed: hang_suspect on rank 1" grep -q "^\[critical\] hang_suspect: ncclAllReduce #84 on comm dc7ee6c8cebbc61e never entered by rank 1" "$T/killed.txt"
check "killed: rank 1's last NCCL call at its Python line" grep -q "python_rank1: last NCCL call at ddp_train.py:134 in worker" "$T/killed.txt"
# Lightning strategy="ddp": rank 0 re-executes the script for rank 1, which inherits the
# OMPI_COMM_WORLD_RANK=0 an MPI singleton (Lightning's environment probe) set in rank 0
"$CLI" report "$TR/share_lightning" >"$T/lt.txt" 2>"$T/lt.err"
"$CLI" report --json "$TR/share_lightning" >"$T/lt.json" 2>/dev/null
check_eq "lightning: ranks 0 and 1 (the child's inherited RANK 0 overruled by its communicator)" "[0, 1]" "$(pyq "$T/lt.json" "sorted(r['rank'] for r in d['ranks'])")"
check "lightning: info says where the child's rank came from" bash -c "'$CLI' info '$TR'/share_lightning/vm-1365.nvlp | grep -q 'rank      1 (local 1) of 2 (from its communicator of 2; its environment said rank 0)'"
check "lightning: a rank started by another rank is one job (no several_jobs)" bash -c "! grep -q 'several jobs' '$T/lt.err' '$T/lt.txt'"
check_eq "lightning: the two MPI singletons' orted listed apart" "2" "$(pyq "$T/lt.json" "sum('orted' in p['cmdline'] for p in d['other_processes'])")"
check "lightning: collectives matched across both ranks" grep -q "^  111 collectives matched across ranks" "$T/lt.txt"
# the ranks share one machine but NCCL took them for two nodes (NCCL_HOSTID per rank)
for t in ddp hf; do
	check "split host: nccl_split_host on share_$t" grep -q "^\[critical\] nccl_split_host: NCCL took the 2 ranks of one machine for 2 nodes" "$T/$t.txt"
done
# a C program naming its communicator in ncclConfig_t.commName, on real NCCL at 2 ranks; NCCL's
# own node count (NCCLCOMM) says 2 nodes
"$CLI" report "$TR/share_commname" >"$T/cn.txt" 2>&1
check "names: commName reached the report" grep -q 'is "nvlp_named_dp" (the name the job gave it)' "$T/cn.txt"
check "names: split host from NCCL's node count" grep -q "basis: NCCL's node count (profiler plugin) above the machines" "$T/cn.txt"
check "names: no CUPTI: the gap says collectives are timed" grep -q "no GPU activity records (CUPTI off or no driver): collectives timed by NCCL's kernel channels" "$T/cn.txt"
# rank 1 dies after 30 AllReduces; NCCL reports it to rank 0 asynchronously and fails its next call
"$CLI" report "$TR/share_failed" >"$T/fl.txt" 2>&1
check "failed: hang on #31 names the survivor's failed next call" grep -q '^\[critical\] hang_suspect: ncclAllReduce #31 on comm [0-9a-f]* ("nvlp_failed") never entered by rank 1; others waited [0-9.]* ms (rank 0.s next call, #32, failed: ncclRemoteError)' "$T/fl.txt"
check "failed: evidence failed_seq 32" grep -q "failed_rank=0  failed_with=ncclRemoteError  failed_seq=32" "$T/fl.txt"
check "failed: how rank 1 ended" grep -q "rank_1_ended: exited with status 9 (_exit) in step 31 of 31 (30 completed)" "$T/fl.txt"
# torchrun's own trace is listed apart
check_eq "hf: two ranks, torchrun apart" "2 1" "$(pyq "$T/hf.json" "len(d['ranks']), len(d['other_processes'])" | tr -d '(),')"

# bytes2_ddp (run 19, the shim of 84ab9de, format 2.2, the default capture: CUPTI attached, no kernel records,
# NCCL's kernel channels folded per collective): every collective timed from its KCOLL record, the cost line
"$CLI" report "$TR/bytes2_ddp" >"$T/b2.txt" 2>/dev/null
"$CLI" report --json "$TR/bytes2_ddp" >"$T/b2.json" 2>/dev/null
check "bytes2_ddp: every collective timed from folded records (11202 of 11202)" \
	grep -q "^kernel channels (NCCL KernelCh): 11202 collectives from 22392 channel records; 11202 calls given their GPU time from them, 0 already timed by CUPTI$" "$T/b2.txt"
check_eq "bytes2_ddp: JSON: no call without GPU time, no channel dropped" "0 0 0 0 0" \
	"$(pyq "$T/b2.json" "d['kernel_channels']['calls_without_gpu_time'], *d['kernel_channels']['dropped_channels'].values()" | tr -d '(),')"
check "bytes2_ddp: the cost line (its PM sampler, 14 MB/h)" grep -q \
	"^nvlprof cost: 0.6% of CPU (its threads 560.6 ms, in the job's calls ~82.3 ms, of 114.23 s), 3.8 MiB, 0.24 MB/min per rank (14 MB/h)$" "$T/b2.txt"
check_eq "bytes2_ddp: JSON cost: link sampler's CPU, MB/h" "0.402955 14.3824" \
	"$(pyq "$T/b2.json" "d['job']['cost']['threads_cpu_s']['link_sampler'], d['job']['cost']['trace_mb_per_hour_per_rank']" | tr -d '(),')"
check "bytes2_ddp: the ranks' separate host ids said first" grep -q "^\[critical\] nccl_split_host: " <(grep -m1 '^\[' "$T/b2.txt")
[ "$FAILED" -eq 0 ]

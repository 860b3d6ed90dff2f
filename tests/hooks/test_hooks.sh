#!/usr/bin/env bash
# test_hooks.sh: NCCL and CUDA runtime interposition under LD_PRELOAD, against the fake libraries.
set -u
. "$(dirname "$0")/../lib.sh"

# CUPTI has its own tests; here, with no driver, it would only probe for libcuda on every call.
export NVLPROF_CUPTI=0
READ="$PROGS/hk_read"
NCCLP="$PROGS/hk_nccl"
CUDAP="$PROGS/hk_cuda"

# run_traced NAME CMD...: runs CMD with the shim into $T/NAME/, text of the trace(s) in $T/NAME.txt
# (each line ends with a space, so that ' name=value ' patterns also match the last field)
run_traced() {
	local name=$1; shift
	mkdir -p "$T/$name"
	NVLPROF_DIR="$T/$name" LD_PRELOAD="$PRELOAD" "$@" >"$T/$name.out" 2>"$T/$name.err"
	local rc=$?
	: >"$T/$name.txt"
	for f in "$T/$name"/*.nvlp; do
		[ -f "$f" ] && "$READ" "$f" | sed 's/$/ /' >>"$T/$name.txt"
	done
	return $rc
}
# count FILE PATTERN...: lines of FILE matching every extended regex
filt() { if [ $# -eq 0 ]; then cat; else local p=$1; shift; grep -E -- "$p" | filt "$@"; fi; }
count() { local f=$1; shift; filt "$@" <"$f" | wc -l; }
# field LINE NAME: value of NAME=... in one record line
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# ---- the exported surface ----------------------------------------------------------------------
exports=$(nm -D --defined-only "$LIB" | awk '{print $3}')
for s in ncclAllReduce ncclSend ncclCommInitRankScalable ncclMemFree cudaMemcpy cudaMemcpyAsync_ptsz \
	cudaMemcpyPeer cudaMallocManaged cudaFree cudaMemPrefetchAsync cudaDeviceEnablePeerAccess; do
	printf '%s\n' "$exports" | grep -qx "$s" || fail "export_$s: not exported by $LIB"
done
check_eq exports_no_internals "" "$(printf '%s\n' "$exports" | grep -E '^(nvlp_|pnccl)' | head -3)"
check_eq exports_wrappers_present 0 "$FAILED"

# ---- RTLD_LOCAL workload: the real functions are not in the global scope -------------------------
# Its constructor makes the first NCCL call under the loader's lock: a deadlock would time out.
run_traced dlopen timeout 20 "$PROGS/hk_dlopen" "$FAKES/libhk_workload.so" 3
rc=$?
cat "$T/dlopen.out"
check_eq dlopen_exit 0 "$rc"
check_eq dlopen_uniqueid_in_constructor 2 "$(count "$T/dlopen.txt" '^nccl fn=ncclGetUniqueId ' ' rc=0 ')"
check_eq dlopen_allreduce_records 3 "$(count "$T/dlopen.txt" '^nccl fn=ncclAllReduce ')"
check_eq dlopen_cross_copy_recorded 1 "$(count "$T/dlopen.txt" '^copy ' ' src_device=0 ' ' dst_device=1 ')"
check_eq dlopen_complete 1 "$(count "$T/dlopen.txt" '^complete=1 ')"

# ---- 3 ranks, one communicator -------------------------------------------------------------------
mkdir -p "$T/ranks"
for r in 0 1 2; do
	NVLPROF_DIR="$T/ranks" LD_PRELOAD="$PRELOAD" "$NCCLP" rank $r 3 "$T/ranks.id" >"$T/rank$r.out" 2>&1 &
	pids[$r]=$!
done
ok=0
for r in 0 1 2; do wait ${pids[$r]} && ok=$((ok + 1)); done
check_eq ranks_all_succeed 3 "$ok"
i=0
for f in "$T/ranks"/*.nvlp; do
	"$READ" "$f" | sed 's/$/ /' >"$T/r.txt"
	rank=$(field "$(grep -m1 '^nccl fn=ncclCommInitRank ' "$T/r.txt")" rank)
	cp "$T/r.txt" "$T/rank_$rank.txt"
	i=$((i + 1))
done
check_eq ranks_traces 3 "$i"
# Per rank: "comm seq count" of every collective on the first communicator, then on the children.
# The even/odd child (count=3000) is left out: its hash differs by color, checked below.
colls() {
	awk '/^nccl fn=nccl(AllReduce|AllGather|ReduceScatter|Broadcast) / && !/ count=3000 /{
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print v["fn"], v["comm"], v["seq"], v["count"], v["bytes"] }' "$1"
}
colls "$T/rank_0.txt" >"$T/c0"
colls "$T/rank_1.txt" >"$T/c1"
colls "$T/rank_2.txt" >"$T/c2"
check ranks_same_collective_sequence cmp "$T/c0" "$T/c1"
check ranks_same_collective_sequence_2 cmp "$T/c0" "$T/c2"
check_eq ranks_collective_count 11 "$(wc -l <"$T/c0")"
check_eq ranks_seq_numbers "1 2 3 4 5 6 7 8" "$(awk 'NR<=8{print $3}' "$T/c0" | xargs)"
# nccl-tests' S: AllGather sendcount*size*nranks (100 bf16 x 3), ReduceScatter likewise.
check_eq ranks_allgather_bytes 600 "$(awk '$1=="ncclAllGather"{print $5}' "$T/c0")"
check_eq ranks_reducescatter_bytes 600 "$(awk '$1=="ncclReduceScatter"{print $5}' "$T/c0")"
init_hashes=$(cat "$T"/rank_*.txt | grep '^nccl fn=ncclCommInitRank ' | tr ' ' '\n' | grep '^comm=' | sort -u | wc -l)
check_eq ranks_one_comm_hash 1 "$init_hashes"
uid_aux=$(field "$(grep -m1 '^nccl fn=ncclGetUniqueId ' "$T/rank_0.txt")" aux)
check_eq ranks_uniqueid_predicts_hash "$uid_aux" "$(field "$(grep -m1 '^nccl fn=ncclCommInitRank ' "$T/rank_2.txt")" comm)"
split_aux() { field "$(grep '^nccl fn=ncclCommSplit ' "$1" | grep " aux2=0x$2 ")" aux; }
even0=$(split_aux "$T/rank_0.txt" 0)
check_eq split_hash_present 1 "$([ -n "$even0" ] && [ "$even0" != 0x0 ] && echo 1)"
check_eq split_same_color_same_hash "$(split_aux "$T/rank_0.txt" 7)" "$(split_aux "$T/rank_1.txt" 7)"
check_eq split_even_ranks_match "$even0" "$(split_aux "$T/rank_2.txt" 0)"
ar3000() { field "$(grep '^nccl fn=ncclAllReduce .* count=3000 ' "$1")" comm; }
check_eq split_child_used_by_even_ranks "$even0" "$(ar3000 "$T/rank_2.txt")"
if [ "$even0" != "$(split_aux "$T/rank_1.txt" 1)" ] && [ -n "$(split_aux "$T/rank_1.txt" 1)" ]; then
	pass split_colors_differ
else
	fail split_colors_differ
fi
check_eq split_child_rank_known 1 "$(count "$T/rank_1.txt" '^nccl fn=ncclAllReduce ' ' count=2000 ' ' rank=1 ' ' nranks=3 ')"
# Point-to-point: the nth send from A to B pairs with B's nth receive from A.
p2p() {
	awk -v me="$2" '/^nccl fn=nccl(Send|Recv) /{
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (v["fn"] == "ncclSend") print "S", me, v["peer"], v["seq"], v["count"], v["group_depth"]
		else print "S", v["peer"], me, v["seq"], v["count"], v["group_depth"] }' "$1"
}
for r in 0 1 2; do p2p "$T/rank_$r.txt" $r; done | sort >"$T/p2p"
check_eq p2p_records 12 "$(wc -l <"$T/p2p")"
check_eq p2p_pairs_match 6 "$(uniq -c "$T/p2p" | awk '$1==2' | wc -l)"
check_eq p2p_in_group 12 "$(awk '$6==1' "$T/p2p" | wc -l)"
check_eq group_end_depth_back_to_0 1 "$(count "$T/rank_0.txt" '^nccl fn=ncclAllReduce ' ' count=2000 ' ' group_depth=0 ')"

# ---- return codes, errno, out-parameters: identical with and without the shim --------------------
"$NCCLP" outparams >"$T/np.plain" 2>&1
run_traced np "$NCCLP" outparams
check nccl_outparams_identical cmp "$T/np.plain" "$T/np.out"
check_eq nccl_errno_sentinel_kept "$(grep -c rc= "$T/np.plain")" "$(grep -c 'errno=4242' "$T/np.out")"
check_eq nccl_shrink_recorded 1 "$(count "$T/np.txt" '^nccl fn=ncclCommShrink ' ' aux2=0x1 ')"
check_eq nccl_every_fn_recorded 20 "$(grep '^nccl ' "$T/np.txt" | awk '{print $2}' | sort -u | wc -l)"
FAKE_NCCL_RC=6 "$NCCLP" outparams >"$T/npf.plain" 2>&1
FAKE_NCCL_RC=6 run_traced npf "$NCCLP" outparams
check nccl_forced_rc_identical cmp "$T/npf.plain" "$T/npf.out"
# rc 6 (remote error): the call on the known communicator keeps its place (seq 1), the one on no
# communicator has none
check_eq nccl_forced_rc_recorded 1 "$(count "$T/npf.txt" '^nccl fn=ncclAllReduce ' ' rc=6 ' ' seq=1 ' ' aux2=0x1 ')"
check_eq nccl_forced_rc_nocomm 1 "$(count "$T/npf.txt" '^nccl fn=ncclAllReduce ' ' rc=6 ' ' comm=0x0 ' ' seq=0 ')"
# rc 7 (ncclInProgress: a collective on a non-blocking communicator, still running) reaches the
# caller as it is, not as success, and is recorded as it is
FAKE_NCCL_RC=7 "$NCCLP" outparams >"$T/npp.plain" 2>&1
FAKE_NCCL_RC=7 run_traced npp "$NCCLP" outparams
check_eq nccl_inprogress_from_fake "allreduce rc=7 errno=4242" "$(grep '^allreduce rc=' "$T/npp.plain")"
check_eq nccl_inprogress_returned "allreduce rc=7 errno=4242" "$(grep '^allreduce rc=' "$T/npp.out")"
check nccl_inprogress_identical cmp "$T/npp.plain" "$T/npp.out"
check_eq nccl_inprogress_recorded 1 "$(count "$T/npp.txt" '^nccl fn=ncclAllReduce ' ' rc=7 ' ' seq=1 ')"
# ---- failed collectives keep their sequence number; communicator names from the config --------
run_traced fs "$NCCLP" failseq
check_eq failseq_exit 0 $?
check_eq failseq_remote_error_keeps_seq 1 "$(count "$T/fs.txt" '^nccl fn=ncclAllReduce ' ' count=3 ' ' rc=6 ' ' seq=3 ' ' aux2=0x1 ')"
check_eq failseq_rejected_flagged 1 "$(count "$T/fs.txt" '^nccl fn=ncclAllReduce ' ' count=4 ' ' rc=4 ' ' seq=4 ' ' aux2=0x1 ')"
check_eq failseq_rejected_not_used_up 1 "$(count "$T/fs.txt" '^nccl fn=ncclAllReduce ' ' count=5 ' ' rc=0 ' ' seq=4 ' ' aux2=0x0 ')"
check_eq failseq_p2p_failed_keeps_seq 1 "$(count "$T/fs.txt" '^nccl fn=ncclSend ' ' count=6 ' ' rc=2 ' ' seq=1 ' ' aux2=0x1 ')"
check_eq failseq_p2p_next 1 "$(count "$T/fs.txt" '^nccl fn=ncclSend ' ' count=7 ' ' rc=0 ' ' seq=2 ')"
# commname NAME: the hash of the communicator a COMMNAME record names with NAME
commname_of() {
	local id
	id=$(sed -n "s/^string id=\([0-9]*\) blob=$1 \$/\1/p" "$T/fs.txt" | head -1)
	[ -n "$id" ] && sed -n "s/^commname comm=\(0x[0-9a-f]*\) name=$id \$/\1/p" "$T/fs.txt"
}
init_comm=$(grep '^nccl fn=ncclCommInitRankConfig ' "$T/fs.txt" | head -1)
check_eq commname_from_config "$(field "$init_comm" comm)" "$(commname_of 'pg0:default_pg')"
split_rec=$(grep '^nccl fn=ncclCommSplit ' "$T/fs.txt" | head -1)
check_eq commname_split_sanitised "$(field "$split_rec" aux)" "$(commname_of 'pg1:tp_group?x')"
check_eq commname_once_per_comm 2 "$(grep -c '^commname ' "$T/fs.txt")"
check_eq commname_old_config_not_read 0 "$(grep -c 'blob=never ' "$T/fs.txt")"
"$CUDAP" outparams >"$T/cp.plain" 2>&1
run_traced cp "$CUDAP" outparams
check cuda_outparams_identical cmp "$T/cp.plain" "$T/cp.out"
check_eq cuda_data_copied 1 "$(grep -c '^data_ok=1' "$T/cp.out")"
check_eq cuda_errno_sentinel_kept "$(grep -c rc= "$T/cp.plain")" "$(grep -c 'errno=4242' "$T/cp.out")"
FAKE_CUDA_RC=2 "$CUDAP" outparams >"$T/cpf.plain" 2>&1
FAKE_CUDA_RC=2 run_traced cpf "$CUDAP" outparams
check cuda_forced_rc_identical cmp "$T/cpf.plain" "$T/cpf.out"
check_eq cuda_forced_rc_recorded 1 "$(count "$T/cpf.txt" '^copy fn=cudaMemcpyPeer ' ' rc=2 ')"

# ---- non-blocking communicators: rank and size learnt once NCCL answers -------------------------
run_traced nb "$NCCLP" nonblocking
check_eq nonblocking_exit 0 $?
check_eq nonblocking_init_recorded 1 "$(count "$T/nb.txt" '^nccl fn=ncclCommInitRankConfig ' ' rc=7 ' ' rank=3 ' ' nranks=4 ')"
check_eq nonblocking_child_unknown_first 1 "$(count "$T/nb.txt" ' count=10 ' ' rank=-1 ' ' seq=1 ')"
check_eq nonblocking_child_known_later 1 "$(count "$T/nb.txt" ' count=20 ' ' rank=3 ' ' nranks=4 ' ' device=2 ' ' seq=2 ')"
check_eq nonblocking_parent_device 1 "$(count "$T/nb.txt" ' count=30 ' ' rank=3 ' ' device=2 ')"

# ---- 16 threads hammering NCCL and copies --------------------------------------------------------
# Under SAN=thread, libunwind's per-thread destructor crashes inside TSan at thread exit (seen with
# gcc 12's TSan): those threads unwind with stacks off.
if [ "${SAN:-}" = thread ]; then
	NVLPROF_STACKS=0 run_traced th "$NCCLP" threads 16 2000
else
	run_traced th "$NCCLP" threads 16 2000
fi
check_eq threads_exit 0 $?
ar=$(count "$T/th.txt" '^nccl fn=ncclAllReduce ')
cp_n=$(count "$T/th.txt" '^copy fn=cudaMemcpyAsync ')
dropped=$(field "$(grep '^end ' "$T/th.txt")" dropped)
check_eq threads_records_accounted 64000 "$((ar + cp_n + dropped))"
check_eq threads_comms 16 "$(grep '^nccl fn=ncclAllReduce ' "$T/th.txt" | tr ' ' '\n' | grep '^comm=' | sort -u | wc -l)"
if [ "$dropped" = 0 ]; then
	check_eq threads_seq_per_comm 16 "$(count "$T/th.txt" '^nccl fn=ncclAllReduce ' ' seq=2000 ')"
fi

# ---- which copies are recorded ------------------------------------------------------------------
run_traced cu "$CUDAP" copies
copy_rec() { count "$T/cu.txt" '^copy ' " bytes=$1 " "${@:2}"; }
check_eq copy_d2d_cross 1 "$(copy_rec 1001 ' src_device=0 ' ' dst_device=1 ' ' copy_kind=3 ' ' peer_enabled=0 ')"
check_eq copy_d2d_same_device_skipped 0 "$(copy_rec 1002)"
check_eq copy_h2d_skipped 0 "$(copy_rec 1003)"
check_eq copy_h2h_skipped 0 "$(copy_rec 1004)"
check_eq copy_default_cross 1 "$(copy_rec 1005 ' src_device=1 ' ' dst_device=0 ' ' fn=cudaMemcpyAsync ')"
check_eq copy_peer_not_enabled 1 "$(copy_rec 1006 ' fn=cudaMemcpyPeer ' ' peer_enabled=0 ')"
check_eq copy_peer_enabled 1 "$(copy_rec 1007 ' fn=cudaMemcpyPeerAsync ' ' peer_enabled=1 ')"
check_eq copy_peer_disabled_again 1 "$(copy_rec 1008 ' peer_enabled=0 ')"
check_eq copy_h2d_managed 1 "$(copy_rec 1009 ' managed=2 ' ' src_device=-1 ')"
check_eq copy_d2h_managed 1 "$(copy_rec 1010 ' managed=1 ')"
check_eq copy_d2h_plain_skipped 0 "$(copy_rec 1011)"
check_eq copy_ptds_cross 1 "$(copy_rec 1012 ' fn=cudaMemcpy_ptds ' ' src_device=1 ' ' dst_device=0 ')"
check_eq copy_ptsz_same_device_skipped 0 "$(copy_rec 1013)"
check_eq peer_records "0 704 0" "$(grep '^peer ' "$T/cu.txt" | tr ' ' '\n' | sed -n 's/^rc=//p' | xargs)"
check_eq managed_alloc 1 "$(count "$T/cu.txt" '^managed fn=cudaMallocManaged ' ' bytes=65536 ' ' rc=0 ')"
check_eq managed_prefetch 1 "$(count "$T/cu.txt" '^managed fn=cudaMemPrefetchAsync ' ' target=1 ' ' bytes=4096 ')"
check_eq managed_advise 1 "$(count "$T/cu.txt" '^managed fn=cudaMemAdvise ' ' target=-1 ' ' flags=3 ')"
check_eq managed_free_only_managed 1 "$(count "$T/cu.txt" '^managed fn=cudaFree ')"
check_eq managed_free_size 1 "$(count "$T/cu.txt" '^managed fn=cudaFree ' ' bytes=65536 ')"
# The allocation's stack starts in this program (its first frame lies in hk_cuda's MODULE).
stack=$(field "$(grep -m1 '^managed fn=cudaMallocManaged ' "$T/cu.txt")" stack)
frame=$(grep "^stack id=$stack " "$T/cu.txt" | sed 's/.*frames=//; s/,.*//')
module=""
while read -r start end path; do
	if [ -n "$frame" ] && ((frame >= start && frame < end)); then module=$path; fi
done < <(grep '^module ' "$T/cu.txt" | sed 's/.* start=\([^ ]*\) end=\([^ ]*\) blob=\([^ ]*\).*/\1 \2 \3/')
check_eq managed_stack_in_caller "hk_cuda" "$(basename "${module:-none}")"
check_eq stack_written_once 1 "$(count "$T/cu.txt" "^stack id=$stack ")"
# Where the copies' pointers live: asked of the runtime only when no driver is in the process (here,
# 2 pointers for each of the 5 device-to-device copies), else of the driver, so that torch.profiler
# sees no runtime call the job did not make. Same records either way.
check_eq pointers_from_runtime_without_driver "pointer_queries=10" "$(grep '^pointer_queries=' "$T/cu.out")"
mkdir -p "$T/cudrv"
NVLPROF_DIR="$T/cudrv" LD_PRELOAD="$PRELOAD:$FAKES/cupti/libcuda.so.1" "$CUDAP" copies >"$T/cudrv.out" 2>&1
check_eq pointers_from_driver "pointer_queries=0" "$(grep '^pointer_queries=' "$T/cudrv.out")"
for f in "$T/cudrv"/*.nvlp; do "$READ" "$f" | sed 's/$/ /'; done >"$T/cudrv.txt"
copy_lines() { grep '^copy ' "$1" | sed 's/ t_enter=[^ ]*//; s/ dur=[^ ]*//; s/ tid=[^ ]*//; s/ stack=[^ ]*//; s/ call_id=[^ ]*//; s/ dst=[^ ]*//; s/ src=[^ ]*//'; }
check_eq pointers_from_driver_copy_records 8 "$(copy_lines "$T/cudrv.txt" | wc -l)"
check pointers_from_driver_same_records cmp <(copy_lines "$T/cu.txt") <(copy_lines "$T/cudrv.txt")

# ---- switches -----------------------------------------------------------------------------------
NVLPROF_STACKS=0 run_traced nostack "$CUDAP" copies
check_eq stacks_off_no_stack_records 0 "$(count "$T/nostack.txt" '^stack ')"
check_eq stacks_off_field_zero 1 "$(count "$T/nostack.txt" '^managed fn=cudaMallocManaged ' ' stack=0 ')"
"$CUDAP" copies >"$T/cu.plain" 2>&1
NVLPROF_DISABLE=1 run_traced off "$CUDAP" copies
check disable_same_results cmp "$T/cu.plain" "$T/off.out"
check_eq disable_no_records 0 "$(count "$T/off.txt" '^(copy|managed|peer|nccl) ')"
# the program's own output, less the count of the shim's pointer questions (checked above)
check enabled_same_results cmp <(grep -v '^pointer_queries=' "$T/cu.plain") <(grep -v '^pointer_queries=' "$T/cu.out")

# ---- a function the loaded runtime lacks: fails soft, reported once -----------------------------
run_traced unres "$CUDAP" unresolved
check_eq unresolved_error_code "302 302" "$(sed -n 's/.* rc=\([0-9]*\) .*/\1/p' "$T/unres.out" | xargs)"
check_eq unresolved_warned_once 1 "$(grep -c '^nvlprof: cannot find the real cudaMemcpyPeer_ptds' "$T/unres.err")"
check_eq unresolved_note_once 1 "$(count "$T/unres.txt" '^note code=unresolved ' 'blob=cudaMemcpyPeer_ptds')"

[ "$FAILED" -eq 0 ]

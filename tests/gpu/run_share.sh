#!/usr/bin/env bash
# run_share.sh: two ranks on ONE GPU, each with its own NCCL_HOSTID, so NCCL accepts them (it refuses
# two ranks of one host on one device) and connects them over NET/Socket on loopback, as it would two
# hosts. Not NVLink: what this proves is the two-rank logic on real NCCL and real launchers (torchrun,
# mp.spawn, Lightning's re-exec), a dead peer, a straggler, torch's group names, and the report on ranks
# that share a host but not NCCL's idea of one. Logs, reports and traces in $OUT.
#   bash tests/gpu/run_share.sh [names] [commname] [ddp] [straggler] [killed] [hf] [lightning] [uma] [kcoll]
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-share}
DONE_MSG="run_share: done"
scen=${*:-names commname ddp straggler killed hf lightning}
JOB_TIMEOUT=200
. tests/gpu/common.sh
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=1
R=tests/gpu/real
N=${NRANKS:-2}
# torchrun with each rank's NCCL_HOSTID set before the interpreter starts (as a container runtime would)
TRH="torchrun --standalone --nproc-per-node $N --no-python tests/gpu/hostid_rank.sh"
if want names; then
	log "torch's process-group names ($N ranks, one GPU)"
	run names $TRH $R/pg_names.py
fi
if want commname; then
	log "a communicator named in ncclConfig_t.commName (C, real NCCL, 2 ranks on one GPU)"
	SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
	NL=$(dirname "$(find "$SP/nvidia" -name 'libnccl.so.2' | head -1)")
	NI=$(dirname "$(find "$SP/nvidia" -name nccl.h | head -1)")
	mkdir -p build/examples
	nvcc -O2 -o build/examples/commname tests/gpu/commname.c -I"$NI" -I/usr/local/cuda/include \
		-Xlinker "$NL/libnccl.so.2" -Xlinker -rpath="$NL" >$L/nvcc_commname.log 2>&1 || echo "FAIL: nvcc commname"
	base commname_base build/examples/commname nvlp_named_dp
	run commname build/examples/commname nvlp_named_dp
	log "a rank dies before AllReduce 30; the survivor's next call fails (real NCCL error)"
	run failed build/examples/commname nvlp_failed 30
fi
if want ddp; then
	log "DDP, $N ranks on one GPU (mp.spawn, NCCL_HOSTID per rank)"
	NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET base ddp_base $PY examples/ddp_train.py --nprocs $N --hostid-per-rank --steps 40 --json $L/ddp_base.json
	run ddp $PY examples/ddp_train.py --nprocs $N --hostid-per-rank --steps 40 --json $L/ddp.json
fi
if want straggler; then
	log "DDP, rank 1 sleeps 20 ms before each step"
	run straggler $PY examples/ddp_train.py --nprocs $N --hostid-per-rank --steps 40 --sleep-rank 1 --sleep-ms 20
fi
if want killed; then
	log "DDP, rank 1 dies at step 20"
	run killed $PY examples/ddp_train.py --nprocs $N --hostid-per-rank --steps 40 --kill-rank 1 --kill-step 20 --timeout-s 10
fi
if want hf; then
	log "HF GPT-2 under torchrun, $N ranks on one GPU"
	base hf_base $TRH $R/hf_train.py --steps 30 --json $L/hf_base.json
	run hf $TRH $R/hf_train.py --steps 30 --json $L/hf.json
fi
if want lightning; then
	log "Lightning strategy=ddp, $N processes on one GPU (re-exec)"
	base lt_base $PY $R/lightning_ddp.py $N $L/lt_base.json --share-gpu
	run lt $PY $R/lightning_ddp.py $N $L/lt.json --share-gpu
fi
if want kcoll; then
	log "DDP, $N ranks on one GPU: kernel channels folded per collective (default) and one record per channel"
	run kcoll $PY examples/ddp_train.py --nprocs $N --hostid-per-rank --steps 200
	NVLPROF_KCH=channels run kch $PY examples/ddp_train.py --nprocs $N --hostid-per-rank --steps 200
	$PY tests/gpu/check.py kcoll "$T/kcoll" "$T/kch" >"$L/kcoll_check.txt" 2>&1
	cat "$L/kcoll_check.txt"
fi
if want uma; then
	log "uma_thrash with the current shim (shipped trace)"
	mkdir -p build/examples
	[ -x build/examples/uma_thrash ] || nvcc -O2 -arch=sm_90 -cudart shared -o build/examples/uma_thrash examples/uma_thrash.cu >$L/nvcc.log 2>&1
	run uma_thrash build/examples/uma_thrash
fi

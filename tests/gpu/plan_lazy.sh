#!/usr/bin/env bash
# plan_lazy.sh: what is left to decide whether NVLPROF_CUPTI=lazy can be the default (issue 27), as device
# calls of under 10 minutes each, the first questions first (a session cut short still answers them).
# Each part runs existing scripts into $OUT/<part> (OUT default /tmp/nvlp-plan); carry build/ (and build/gpu).
#   bash tests/gpu/plan_lazy.sh PART      PART: probe um fail cost ddp all split umcost bytes twogpu
# Run 18 ran um (the no-attach lazy: as expected), cost ((c): A/A -0.08% +-0.92, the default +2.95% +-0.61, lazy
# +0.23% +-0.61 across 10 sets), ddp ((b): the default -0.01% +-0.37, lazy -0.01% +-0.33 across 6) and umcost; run 19
# split (the default's libcupti share as CUPTI's alone) and bytes (56-59 MB/h a rank at 1,000 collectives a second);
# what is left for lazy as the default is twogpu.
#   probe   (~4 min, one GPU)  which of NVML's NVLink routes answers here (nvml_links.py, nvidia-smi); which
#           CUPTI step must come early for managed memory's migrations to be counted (build/gpu/um_attach:
#           attach and counters at cuInit, at the context, at the allocation, after the first migrations); lazy
#           on real CUPTI: plain and managed-memory smoke (the topology NOTE's tally, lazy's managed-memory
#           NOTE and gap); CuPy ping-ponging managed memory through torch's runtime (cupyrt) under lazy
#           (expected since run 16: uma_thrashing, attached_for_managed 1) and under the default (uma_thrashing)
#   um      (~5 min, one GPU)  managed memory under lazy without a mid-run attach (run 17: with it, cupyrt
#           hung in NVRTC's cuInit 2 of 10 times): the smoke's um mode (a NOTE: migrations unmeasured),
#           cupyrt and cupylate (expected: the result unchanged, managed_not_measured 1, the gap saying why),
#           then lazy_um_matrix.sh: the opt-in attach (NVLPROF_UM=attach) against none, 6 runs each
#           interleaved, how often each hangs
#   fail    (~6 min, one GPU)  the post-mortem catalog on real NCCL under lazy (stuck exits count oom killtree)
#   cost    (~8 min, one GPU)  (c), the launch-bound loop, 10 fresh process sets: none none2 default lazy in the
#           order overhead.py now draws each round (runs 14-17's rotation gave each configuration half the places:
#           A/A +0.72% +-0.54; post hoc, lazy +0.56% +-0.48 and the default +2.52% +-0.50 against their own parity's
#           baseline); the A/A should now read ~0 and the places' effects are printed
#   ddp     (~9 min, one GPU)  (b), HF GPT-2 under DDP (world size 1), 6 fresh process sets: none none2 default
#           lazy; (b) was never shown at 1% across sets (run 7: the default +0.73% +-1.52 over 6 sets, a set's sd ~2%)
#   all     (~9 min, one GPU)  NVLPROF_KERNELS=all on (a) and (c) (not measured since run 2), and
#           torch.profiler on (a) in the same rounds (all <= 1/10 of it)
#   split   (~3 min, one GPU)  where the default's cost on (c) goes beyond CUPTI's presence (run 18: the default +2.95%
#           +-0.61, CUPTI attached alone as the default attaches it +1.19% +-0.71, in other calls): none none2, the
#           default, CUPTI's parts alone (inj: injection, clock, buffers, DEVICE/NVLINK kinds; drv: the same and the
#           default's driver callbacks) and lazy, 2 sets, the launching thread sampled (mtprof, libcupti's chains)
#   umcost  (~2 min, one GPU)  what unified-memory counters cost a migrating job (um_cost.sh: CuPy's ping-pong without
#           nvlprof, under the default, with NVLPROF_UM=0, and through torch's runtime; run 18: 1.5x, 0.9-1.0x)
#   bytes   (~4 min, one GPU)  a 2-rank DDP job's trace bytes per hour per rank on real NCCL (bytes2.sh: 560 and 1,000
#           collectives a second, the ranks side by side through MPS, the result compared without nvlprof; run 19:
#           1,000 a second gave 55.8-59.2 MB/h, time-sliced ranks ~230 a second 13.6-18.6 MB/h)
#   twogpu  (2+ GPUs)  run_gpu.sh lazy: lazy's topology against CUPTI's, pcie_fallback and
#           peer_access_disabled under lazy; then bytes2.sh with a GPU a rank (NVLink: NCCL's 24 channels)
# DRY=1 prints the commands instead of running them (tests/gpu/test_plan_lazy.sh checks them).
set -u
cd "$(dirname "$0")/../.."
part=${1:-}
OUT=${OUT:-/tmp/nvlp-plan}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
do_() { # CMD...: run (or print, DRY=1) one step; a failing step does not stop the part
	if [ "${DRY:-0}" = 1 ]; then
		echo "$*"
	else
		echo "== $*" >&2
		eval "$*"
	fi
}
case "$part" in
probe)
	O=$OUT/probe
	do_ "mkdir -p $O"
	do_ "python3 tests/gpu/nvml_links.py >$O/nvml_links.txt 2>&1"
	do_ "{ nvidia-smi topo -m; nvidia-smi nvlink -s; } >$O/nvidia_smi.txt 2>&1"
	do_ "for m in never init-init ctx-ctx alloc-alloc touched-touched init-alloc init-touched ctx-alloc; do UM_ATTACH_CUPTI=\$(find \$(python3 -c 'import site; print(site.getsitepackages()[0])')/nvidia -name libcupti.so.13 | head -1) timeout 60 build/gpu/um_attach \$m 6 64; done >$O/um_attach.txt 2>&1"
	do_ "OUT=$O SMOKE_CUPTI=lazy SMOKE_MODES='plain um' bash tests/gpu/startup_smoke.sh >$O/smoke.log 2>&1"
	do_ "NVLPROF_CUPTI=lazy OUT=$O/real_lazy bash tests/gpu/run_real.sh cupyrt >$O/cupyrt_lazy.log 2>&1"
	do_ "OUT=$O/real_default bash tests/gpu/run_real.sh cupyrt >$O/cupyrt_default.log 2>&1"
	;;
um)
	do_ "mkdir -p $OUT/um"
	do_ "OUT=$OUT/um SMOKE_CUPTI=lazy SMOKE_MODES=um bash tests/gpu/startup_smoke.sh >$OUT/um/smoke.log 2>&1"
	do_ "NVLPROF_CUPTI=lazy JOB_TIMEOUT=60 OUT=$OUT/um/real bash tests/gpu/run_real.sh cupyrt cupylate >$OUT/um/cupyrt.log 2>&1"
	do_ "REPS=6 HANG_S=25 OUT=$OUT/um/matrix bash tests/gpu/lazy_um_matrix.sh attach=NVLPROF_CUPTI=lazy+NVLPROF_UM=attach:--rt auto=NVLPROF_CUPTI=lazy:--rt >$OUT/um/matrix.txt 2>&1"
	;;
fail)
	do_ "NVLPROF_CUPTI=lazy WD_S=10 JOB_TIMEOUT=60 OUT=$OUT/fail bash tests/gpu/run_fail.sh stuck exits count oom killtree >$OUT/fail.log 2>&1"
	;;
cost)
	do_ "SETS=10 TINY_BUDGET=460 WARMUP_S=3 OWN_SHM=1 TINY_CONFIGS=none,none2,default,lazy=NVLPROF_CUPTI=lazy OUT=$OUT/cost bash tests/gpu/run_cost.sh tiny >$OUT/cost.log 2>&1"
	;;
ddp)
	do_ "SETS=6 DDP_BUDGET=500 WARMUP_S=3 OWN_SHM=1 DDP_CONFIGS=none,none2,default,lazy=NVLPROF_CUPTI=lazy OUT=$OUT/ddp bash tests/gpu/run_cost.sh gpt2ddp >$OUT/ddp.log 2>&1"
	;;
all)
	do_ "SETS=2 GPT2_BUDGET=250 TINY_BUDGET=250 WARMUP_S=3 OWN_SHM=1 GPT2_CONFIGS=none,none2,all,torchprof TINY_CONFIGS=none,none2,all OUT=$OUT/all bash tests/gpu/run_cost.sh gpt2 tiny >$OUT/all.log 2>&1"
	;;
split)
	do_ "PRESENCE_SETS=2 PRESENCE_BUDGET=170 WARMUP_S=3 OWN_SHM=1 PRESENCE_CONFIGS=none,none2,default,inj=cupti:inj.ts.reg.kinds,drv=cupti:inj.ts.reg.kinds.drv,lazy=NVLPROF_CUPTI=lazy OUT=$OUT/split bash tests/gpu/run_cost.sh presence >$OUT/split.log 2>&1"
	;;
umcost)
	do_ "REPS=6 OUT=$OUT/umcost bash tests/gpu/um_cost.sh none=-: default=: um0=NVLPROF_UM=0: rtnone=-:--rt rtdefault=:--rt >$OUT/umcost.txt 2>&1"
	;;
bytes)
	do_ "BYTES2_MPS=1 SHORT=10 LONG=40 JOB_TIMEOUT=90 OUT=$OUT/bytes bash tests/gpu/bytes2.sh m560=560 m1000=1000 >$OUT/bytes.log 2>&1"
	;;
twogpu)
	do_ "OUT=$OUT/twogpu bash tests/gpu/run_gpu.sh ddp fallback p2p lazy >$OUT/twogpu.log 2>&1"
	do_ "SHORT=10 LONG=40 JOB_TIMEOUT=90 OUT=$OUT/twogpu/bytes bash tests/gpu/bytes2.sh n560=560 n1000=1000 >$OUT/twogpu/bytes.log 2>&1"
	;;
*)
	echo "usage: bash tests/gpu/plan_lazy.sh probe|um|fail|cost|ddp|all|split|umcost|bytes|twogpu" >&2
	exit 2
	;;
esac

#!/usr/bin/env bash
# gpu_runtime.sh: the runtime's lifecycle under a real torch job (GPU machine, build carried):
# mp.spawn ranks, fork()ed DataLoader workers, vfork'ed subprocesses, and SIGTERM to the ranks.
#   BUILD=build/runtime [SCEN="normal term"] bash tests/runtime/gpu_runtime.sh   (PASS/FAIL lines)
set -u
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
B=${BUILD:-build}
LIB=$PWD/$B/libnvlprof.so
READ=$PWD/$B/tests/progs/rt_read
W=${OUT:-/tmp}/nvlp-rt-gpu
rm -rf "$W"
mkdir -p "$W"
FAILED=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
check() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n"; fi; }
check_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi; }
rd() { "$READ" "$1" | sed -n "s/^$2=//p"; }

cat >"$W/job.py" <<'EOF'
import os, sys, subprocess, time, torch, torch.distributed as dist, torch.multiprocessing as mp
MODE = sys.argv[1]
class DS(torch.utils.data.Dataset):
    def __len__(self): return 64
    def __getitem__(self, i): return torch.randn(1024)
def worker(rank, world):
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = "29571"
    torch.cuda.set_device(rank)
    import signal
    print(f"rank {rank} python SIGTERM handler before init: {signal.getsignal(signal.SIGTERM)}", flush=True)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1024, 1024).cuda(), device_ids=[rank])
    dl = torch.utils.data.DataLoader(DS(), batch_size=8, num_workers=2)  # fork()ed workers
    subprocess.run(["true"], check=True)                                   # vfork + exec
    print(f"rank {rank} python SIGTERM handler after init: {signal.getsignal(signal.SIGTERM)}", flush=True)
    steps = 0
    while True:
        for x in dl:
            m(x.cuda()).sum().backward(); steps += 1
        if MODE == "normal" and steps >= 40: break
    torch.cuda.synchronize()
    print(f"rank {rank} steps {steps}", flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
EOF

SCEN=${SCEN:-normal term}
if [[ " $SCEN " == *" normal "* ]]; then
# 1. a normal run: one complete trace per rank, none from DataLoader workers or `true`
d=$W/normal
mkdir -p "$d"
(cd "$W" && NVLPROF_DIR=$d NVLPROF_VERBOSE=1 LD_PRELOAD=$LIB timeout 180 python3 job.py normal >"$d.log" 2>&1)
check_eq "torch normal: exit status" 0 "$?"
tail -5 "$d.log"
n=0 incomplete=0 ranks=0
for f in "$d"/*.nvlp; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	[ "$(rd "$f" complete)" = 1 ] || incomplete=$((incomplete + 1))
	r=$(rd "$f" h.rank)
	[ "$(rd "$f" nccl)" -gt 0 ] && ranks=$((ranks + 1))
	echo "  $(basename "$f"): rank=$r nccl=$(rd "$f" nccl) records=$(rd "$f" records) dropped=$(rd "$f" end_dropped) reason=$(rd "$f" end_reason)"
done
check_eq "torch normal: all traces complete" 0 "$incomplete"
check_eq "torch normal: NCCL records in two traces (the ranks)" 2 "$ranks"
check "torch normal: no trace from DataLoader workers or subprocesses" test "$n" -le 3

fi
if [[ " $SCEN " == *" term "* ]]; then
# 2. SIGTERM to both ranks mid-training: their traces end complete with reason signal
d=$W/term
mkdir -p "$d"
(cd "$W" && NVLPROF_DIR=$d LD_PRELOAD=$LIB timeout 180 python3 job.py forever >"$d.log" 2>&1) &
p=$!
for _ in $(seq 120); do
	[ "$(ls "$d"/*.nvlp 2>/dev/null | wc -l)" -ge 3 ] && break
	sleep 0.5
done
sleep 6
kids=$(pgrep -f "multiprocessing.spawn" | tr '\n' ' ')
echo "  ranks: $kids"
for k in $kids; do echo "  $k SigCgt $(sed -n 's/^SigCgt:\t*//p' /proc/$k/status) SigBlk $(sed -n 's/^SigBlk:\t*//p' /proc/$k/status)"; done
t0=$(date +%s%N)
kill -TERM $kids 2>/dev/null
for k in $kids; do while kill -0 $k 2>/dev/null; do sleep 0.02; done; done
echo "  ranks gone $((($(date +%s%N) - t0) / 1000000)) ms after SIGTERM"
wait $p
n=0 ok=0
for f in "$d"/*.nvlp; do
	[ "$(rd "$f" nccl)" -gt 0 ] || continue
	n=$((n + 1))
	[ "$(rd "$f" complete)" = 1 ] && [ "$(rd "$f" end_reason)" = 1 ] && ok=$((ok + 1))
	echo "  $(basename "$f"): rank=$(rd "$f" h.rank) complete=$(rd "$f" complete) reason=$(rd "$f" end_reason) nccl=$(rd "$f" nccl)"
done
check_eq "torch SIGTERM: both rank traces complete, ended by the signal" "2 2" "$n $ok"
fi
exit $((FAILED > 0))

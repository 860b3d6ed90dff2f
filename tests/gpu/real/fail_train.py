# fail_train.py: HF GPT-2 (from a config, random tokens) under DDP/torchrun that fails on purpose, one way per
# --mode, for the post-mortem catalog (tests/gpu/run_fail.sh): what the report must say first is in that script.
#   healthy   no failure (no finding may fire)
#   stuck     rank 1 blocks in its own data loading (time.sleep in load_next_batch) at --at; rank 0 enters the
#             next AllReduces and waits until torch's watchdog aborts it (SIGABRT)
#   loader    rank 1's DataLoader worker hangs at --at (the main thread waits on its queue); as stuck
#   count     at --at a metric all_reduce of 2048 floats on rank 0, 1024 on rank 1 (same seq)
#   dtype     ... float32 on rank 0, float16 on rank 1
#   op        ... SUM on rank 0, MAX on rank 1
#   root      ... broadcast from root 0 on rank 0, root 1 on rank 1
#   func      ... all_reduce on rank 0, broadcast on rank 1
#   exits     rank 1 calls sys.exit(3) at --at (torchrun then stops rank 0)
#   oom       rank 1 allocates host memory at --at until the OOM killer takes it (run in a memory-limited cgroup)
#   segv      rank 1 dies of SIGSEGV at --at (ctypes reads address 0)
#   barrier   rank 1 enters a barrier on a subgroup (new_group([0, 1])) at --at that rank 0 never calls;
#             rank 0 enters the next AllReduce on the default group: each waits in another communicator
# Prints {"rank", "losses", "wall_s"} as JSON (rank 0) so runs with and without nvlprof compare.
import argparse, ctypes, datetime, json, os, sys, time
T0 = time.time()
import torch
import torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel

p = argparse.ArgumentParser()
p.add_argument("--mode", default="healthy")
p.add_argument("--steps", type=int, default=30)
p.add_argument("--at", type=int, default=15)
p.add_argument("--timeout-s", type=int, default=20)
p.add_argument("--json", default="")
a = p.parse_args()
rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
local = int(os.environ.get("LOCAL_RANK", 0)) % max(torch.cuda.device_count(), 1)  # ranks may share a GPU
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local),
                        timeout=datetime.timedelta(seconds=a.timeout_s))
torch.manual_seed(1234)
cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=512, vocab_size=8192,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(cfg).cuda()
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
sub = dist.new_group([0, 1]) if a.mode == "barrier" else None
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
g = torch.Generator(device="cuda").manual_seed(99 + rank)
data = [torch.randint(0, cfg.vocab_size, (8, 256), device="cuda", generator=g) for _ in range(4)]
losses = []


class Batches(torch.utils.data.Dataset):
    """CPU token batches; the worker hangs at item --at on rank 1 in mode loader."""
    def __len__(self):
        return a.steps

    def __getitem__(self, i):
        if a.mode == "loader" and rank == 1 and i == a.at:
            time.sleep(3600)
        return torch.randint(0, cfg.vocab_size, (8, 256), generator=torch.Generator().manual_seed(i))


def load_next_batch(i):
    if a.mode == "stuck" and rank == 1 and i == a.at:
        time.sleep(3600)  # a data loader that never returns
    return data[i % len(data)]


def metric(i):
    """One extra collective at step --at whose arguments differ between the ranks (the mismatch modes)."""
    m = a.mode
    if i != a.at or m not in ("count", "dtype", "op", "root", "func"):
        return
    n = 2048 if (m == "count" and rank == 0) else 1024
    dt = torch.float16 if (m == "dtype" and rank == 1) else torch.float32
    t = torch.ones(n, device="cuda", dtype=dt)
    if m == "op":
        dist.all_reduce(t, op=dist.ReduceOp.MAX if rank == 1 else dist.ReduceOp.SUM)
    elif m == "root":
        dist.broadcast(t, src=rank)
    elif m == "func" and rank == 1:
        dist.broadcast(t, src=0)
    else:
        dist.all_reduce(t)
    torch.cuda.synchronize()


def fail(i):
    if rank != 1 or i != a.at:
        return
    if a.mode == "exits":
        sys.exit(3)
    if a.mode == "segv":
        ctypes.string_at(0)
    if a.mode == "barrier":
        dist.barrier(group=sub)
    if a.mode == "oom":
        hog = []
        while True:
            hog.append(bytearray(256 << 20))
            for k in range(0, len(hog[-1]), 4096):
                hog[-1][k] = 1


loader = iter(torch.utils.data.DataLoader(Batches(), batch_size=None, num_workers=1)) \
    if a.mode == "loader" else None


def step(i):
    fail(i)
    x = next(loader).cuda() if loader else load_next_batch(i)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    metric(i)
    losses.append(loss.detach())


for i in range(a.steps):
    step(i)
torch.cuda.synchronize()
out = {"rank": rank, "world": world, "mode": a.mode, "losses": [float(l) for l in losses],
       "wall_s": time.time() - T0}
if rank == 0:
    print(json.dumps(out))
    if a.json:
        open(a.json, "w").write(json.dumps(out))
dist.destroy_process_group()

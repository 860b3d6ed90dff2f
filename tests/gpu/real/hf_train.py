# hf_train.py: a HF transformers GPT-2-style model built from a config (no download), random tokens, AdamW,
# wrapped in DDP when launched by torchrun; prints its losses and wall time as JSON so runs with and without
# nvlprof compare. --profiler: torch.profiler inside the job, with a schedule (ProfilerStep#N marks).
# --compile: the DDP model under torch.compile (Inductor's Triton kernels, launched through the driver API).
import argparse, json, os, time
T0 = time.time()
import torch
import torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30)
p.add_argument("--profiler", default="")
p.add_argument("--json", default="")
p.add_argument("--kill-step", type=int, default=-1)
p.add_argument("--compile", action="store_true")
a = p.parse_args()
rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
local = int(os.environ.get("LOCAL_RANK", 0)) % max(torch.cuda.device_count(), 1)  # ranks may share a GPU
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
torch.manual_seed(1234)
cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=512, vocab_size=8192,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(cfg).cuda()
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
if a.compile:
    model = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
g = torch.Generator(device="cuda").manual_seed(99 + rank)
data = [torch.randint(0, cfg.vocab_size, (8, 256), device="cuda", generator=g) for _ in range(4)]
losses = []

def step(i):
    if i == a.kill_step:
        torch.cuda.synchronize()
        os.kill(os.getpid(), 9)  # dies as an OOM-killed rank does: no exit handlers
    x = data[i % len(data)]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(loss.detach())

if a.profiler:
    from torch.profiler import profile, schedule, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=2, warmup=2, active=a.steps - 4, repeat=1)) as prof:
        for i in range(a.steps):
            step(i)
            prof.step()
    if rank == 0:
        prof.export_chrome_trace(a.profiler)
else:
    for i in range(a.steps):
        step(i)
torch.cuda.synchronize()
out = {"rank": rank, "world": world, "losses": [float(l) for l in losses], "wall_s": time.time() - T0}
if rank == 0:
    print(json.dumps(out))
    if a.json:
        open(a.json, "w").write(json.dumps(out))
dist.destroy_process_group()

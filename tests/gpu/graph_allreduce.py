# graph_allreduce.py: one-rank NCCL all_reduce captured in a torch CUDA graph and replayed N times beside eager ones; prints the result so runs with and without nvlprof compare.
import os
import sys

import torch
import torch.distributed as dist

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
x = torch.full((1 << 20,), 2.0, device="cuda")
for _ in range(N):  # eager
    dist.all_reduce(x)
torch.cuda.synchronize()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):  # warm-up on the side stream, as torch's docs ask before a capture
    dist.all_reduce(x)
torch.cuda.current_stream().wait_stream(s)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    dist.all_reduce(x)
    x.mul_(1.0)
for _ in range(N):
    g.replay()
torch.cuda.synchronize()
print(f"result sum={x.sum().item():.1f} replays={N}")
dist.destroy_process_group()

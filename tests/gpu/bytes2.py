# bytes2.py: a 2-rank DDP job paced to a chosen rate of collectives, for the trace's bytes per hour per rank.
"""Two ranks (mp.spawn; a GPU each, or sharing one with its own NCCL_HOSTID each) train K Linear layers under
DDP with buckets of half a layer's weight (so most layers make a bucket of their own; DDP's first bucket
holds up to 1 MiB), the AllReduce hook counting the buckets. The first 4 steps count a step's
collectives; the rest are paced so each rank makes about RATE collectives a second. A fixed number of
steps (RATE * SECONDS / collectives a step), seeded, so a run with and without nvlprof can be compared:
rank 0 prints the final loss and a checksum of the parameters.

  python3 tests/gpu/bytes2.py --rate 560 --seconds 30 [--layers 20] [--width 256] [--json F]
"""
import argparse
import json
import os
import socket
import time


def worker(rank, n, a):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(a.port))
    ngpu = torch.cuda.device_count()
    share = a.share_gpu or ngpu < 2
    if share:  # NCCL refuses two ranks of one host on one GPU: each rank its own host id (NET/Socket)
        os.environ["NCCL_HOSTID"] = "%s-b2rank%d" % (socket.gethostname(), rank)
    dev = torch.device("cuda", 0 if share else rank % ngpu)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=dev)
    torch.manual_seed(1234)
    layers = [torch.nn.Linear(a.width, a.width) for _ in range(a.layers)]
    model = torch.nn.Sequential(*layers).to(dev)
    mib = (a.width * a.width + a.width) * 4 / (1 << 20)
    ddp = DDP(model, device_ids=[dev.index], bucket_cap_mb=mib / 2)
    calls = [0]

    def counting_allreduce(pg, bucket):
        calls[0] += 1
        return default_hooks.allreduce_hook(pg, bucket)

    ddp.register_comm_hook(None, counting_allreduce)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    g = torch.Generator(device=dev)
    g.manual_seed(99 + rank)
    x = torch.randn(a.batch, a.width, device=dev, generator=g)
    y = torch.randn(a.batch, a.width, device=dev, generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(2):  # DDP rebuilds its buckets after the first step
        step()
    c0 = calls[0]
    for _ in range(2):
        step()
    per_step = max(1, (calls[0] - c0) // 2)
    steps = max(1, int(round(a.rate * a.seconds / per_step)))
    period = per_step / a.rate  # seconds a step, to make RATE collectives a second
    dist.barrier()
    c0 = calls[0]
    t0 = time.monotonic()
    loss = None
    for s in range(steps):
        loss = step()
        if (s + 1) % 8 == 0:
            torch.cuda.synchronize(dev)
        late = t0 + (s + 1) * period - time.monotonic()
        if late > 0:
            time.sleep(late)
    torch.cuda.synchronize(dev)
    wall = time.monotonic() - t0
    csum = float(sum(p.detach().double().sum().item() for p in model.parameters()))
    dist.barrier()
    if rank == 0:
        out = {"steps": steps, "collectives_per_step": per_step, "target_rate": a.rate, "wall_s": round(wall, 3),
               "rate": round((calls[0] - c0) / wall, 1), "loss": float(loss.item()), "checksum": csum}
        print("bytes2: " + json.dumps(out), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=float, default=560, help="collectives a second per rank to aim at")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--layers", type=int, default=20, help="Linear layers, about one bucket each")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--port", type=int, default=29561)
    p.add_argument("--share-gpu", action="store_true", help="every rank on GPU 0")
    p.add_argument("--json")
    a = p.parse_args()
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(a.nprocs, a), nprocs=a.nprocs)


if __name__ == "__main__":
    main()

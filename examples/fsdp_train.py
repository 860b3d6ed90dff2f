#!/usr/bin/env python3
"""fsdp_train.py: a small but real FSDP training job (MLP regression, FULL_SHARD), AllGather and ReduceScatter
heavy: the FSDP scenario driver for nvlprof's 8-GPU tests (tests/gpu/run_8gpu.sh). Same CLI as ddp_train.py.

Every block is its own FSDP unit: its parameters are all-gathered before its forward, all-gathered again
before its backward (FULL_SHARD frees them after forward), and its gradients are reduce-scattered.
Runs under torchrun (RANK/WORLD_SIZE set) or launches its own ranks with torch.multiprocessing.spawn.
Prints per-rank step times and, on rank 0, the losses (identical from run to run: seeded, deterministic).

  python3 examples/fsdp_train.py --steps 40                       # healthy
  NCCL_P2P_DISABLE=1 python3 examples/fsdp_train.py               # NCCL falls back to host memory (SHM)
  python3 examples/fsdp_train.py --sleep-rank 5 --sleep-ms 20     # rank 5 straggles before every step
  python3 examples/fsdp_train.py --kill-rank 5 --kill-step 20     # rank 5 dies mid-run (others hang, then time out)
  python3 examples/fsdp_train.py --steps 0 --nccl-tests nt.json   # nccl-tests-style busbw of AllReduce /
                                                                  # AllGather / ReduceScatter (the prediction)
  python3 examples/fsdp_train.py --fsdp2                          # FSDP2 (fully_shard) instead of FSDP1
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--fsdp2", action="store_true", help="shard with fully_shard (FSDP2) instead of FSDP1 FULL_SHARD")
    p.add_argument("--nprocs", type=int, default=0, help="ranks to spawn (default: all GPUs, at most 8)")
    p.add_argument("--sleep-rank", type=int, default=-1)
    p.add_argument("--sleep-ms", type=float, default=0.0)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-step", type=int, default=-1)
    p.add_argument("--nccl-tests", default="", help="before training, time AllReduce/AllGather/ReduceScatter "
                   "as nccl-tests do (S, algbw = S/t, busbw = algbw x factor) and write rank 0's table here")
    p.add_argument("--timeout-s", type=int, default=60, help="process group timeout")
    p.add_argument("--json", default="", help="write rank 0's losses and step times here")
    p.add_argument("--port", type=int, default=29534)
    return p.parse_args()


class Block(torch.nn.Module):
    """One FSDP unit: Linear + ReLU."""

    def __init__(self, h):
        super().__init__()
        self.fc = torch.nn.Linear(h, h)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Net(torch.nn.Module):
    def __init__(self, h, layers):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(h) for _ in range(layers))
        self.head = torch.nn.Linear(h, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def nccl_tests(rank, world, dev, path):
    """nccl-tests' definitions: S = bytes of the whole buffer (AllGather: output, ReduceScatter: input),
    t = time per call over 20 back-to-back calls, algbw = S/t, busbw = algbw x 2(n-1)/n (AllReduce) or
    x (n-1)/n (AllGather, ReduceScatter)."""
    res = []
    for name in ("AllReduce", "AllGather", "ReduceScatter"):
        for mib in (1, 4, 16, 64, 256):
            s = mib << 20
            n_el = s // 2  # bf16
            n_el -= n_el % world
            big = torch.ones(n_el, device=dev, dtype=torch.bfloat16)
            part = torch.ones(n_el // world, device=dev, dtype=torch.bfloat16)
            if name == "AllReduce":
                op, factor = (lambda: dist.all_reduce(big)), 2.0 * (world - 1) / world
            elif name == "AllGather":
                op, factor = (lambda: dist.all_gather_into_tensor(big, part)), (world - 1) / world
            else:
                op, factor = (lambda: dist.reduce_scatter_tensor(part, big)), (world - 1) / world
            for _ in range(5):
                op()
            torch.cuda.synchronize()
            dist.barrier()
            iters = 20
            t0 = torch.cuda.Event(enable_timing=True)
            t1 = torch.cuda.Event(enable_timing=True)
            t0.record()
            for _ in range(iters):
                op()
            t1.record()
            t1.synchronize()
            t = t0.elapsed_time(t1) / 1e3 / iters  # seconds per call
            nbytes = n_el * 2
            res.append({"collective": name, "bytes": nbytes, "time_us": t * 1e6, "algbw_gbps": nbytes / t / 1e9,
                        "busbw_gbps": nbytes / t / 1e9 * factor})
            del big, part
    if rank == 0:
        for r in res:
            print(f"nccl-tests {r['collective']:13s} {r['bytes']:>10d} B  {r['time_us']:9.1f} us  "
                  f"algbw {r['algbw_gbps']:7.1f}  busbw {r['busbw_gbps']:7.1f} GB/s", flush=True)
        with open(path, "w") as f:
            json.dump({"world": world, "results": res}, f)


def worker(rank, world, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout_s), device_id=dev)
    if args.nccl_tests:
        nccl_tests(rank, world, dev, args.nccl_tests)
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.manual_seed(1234)  # same initial weights on every rank
    model = Net(args.hidden, args.layers).to(dev)
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except ImportError:  # a torch without FSDP1: shard with FSDP2
        FSDP = None
    if args.fsdp2 or FSDP is None:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp_policy = MixedPrecisionPolicy(param_dtype=dt, reduce_dtype=dt)
        for b in model.blocks:
            fully_shard(b, mp_policy=mp_policy)  # reshard_after_forward=True: FULL_SHARD
        fully_shard(model, mp_policy=mp_policy)
        fmodel = model
    else:
        from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        mixed = MixedPrecision(param_dtype=dt, reduce_dtype=dt, buffer_dtype=dt) if dt != torch.float32 else None
        fmodel = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, auto_wrap_policy=ModuleWrapPolicy({Block}),
                      mixed_precision=mixed, device_id=dev, use_orig_params=True)
    opt = torch.optim.SGD(fmodel.parameters(), lr=1e-3)  # after sharding: the optimizer sees the shards
    g = torch.Generator(device=dev)
    g.manual_seed(100 + rank)
    xs = torch.randn(8, args.batch, args.hidden, device=dev, generator=g)
    ys = torch.randn(8, args.batch, 1, device=dev, generator=g)
    losses, times = [], []
    for step in range(args.steps):
        if rank == args.kill_rank and step == args.kill_step:
            print(f"rank {rank} dying at step {step}", flush=True)
            os._exit(9)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if rank == args.sleep_rank and args.sleep_ms > 0:
            time.sleep(args.sleep_ms / 1e3)
        x, y = xs[step % 8], ys[step % 8]
        loss = torch.nn.functional.mse_loss(fmodel(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    if times:
        meas = times[args.warmup:] or times
        med = statistics.median(meas)
        print(f"rank {rank} steps {len(times)} step_ms median {med:.3f} mean {statistics.mean(meas):.3f}", flush=True)
        if rank == 0:
            vals = [float(v) for v in losses]
            print("losses " + " ".join(f"{v:.6e}" for v in vals), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"losses": vals, "step_ms": times, "median_ms": med}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    n = args.nprocs or min(torch.cuda.device_count(), 8)
    if n < 1:
        sys.exit("fsdp_train.py: no GPU")
    mp.spawn(worker, args=(n, args), nprocs=n)


if __name__ == "__main__":
    main()

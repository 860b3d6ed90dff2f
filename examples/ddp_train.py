#!/usr/bin/env python3
"""ddp_train.py: a small but real DDP training job (MLP regression), the scenario driver for nvlprof's GPU tests.

Runs under torchrun (RANK/WORLD_SIZE set) or launches its own ranks with torch.multiprocessing.spawn.
Prints per-rank step times and, on rank 0, the losses (identical from run to run: seeded, deterministic).

  python3 examples/ddp_train.py --steps 40                       # healthy
  NCCL_P2P_DISABLE=1 python3 examples/ddp_train.py               # NCCL falls back to host memory (SHM)
  python3 examples/ddp_train.py --sleep-rank 1 --sleep-ms 20     # rank 1 straggles before every step
  python3 examples/ddp_train.py --kill-rank 1 --kill-step 20     # rank 1 dies mid-run (others hang, then time out)
  python3 examples/ddp_train.py --torch-profiler prof.json       # torch.profiler around some steps
  python3 examples/ddp_train.py --pin --steps 300 --json t.json  # ranks pinned near their GPU: steadier timings
  python3 examples/ddp_train.py --nprocs 2 --hostid-per-rank     # 2 ranks on one GPU: NCCL sees 2 hosts (NET/Socket)
"""
import argparse
import json
import os
import socket
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
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--nprocs", type=int, default=0, help="ranks to spawn (default: all GPUs, at most 8)")
    p.add_argument("--sleep-rank", type=int, default=-1)
    p.add_argument("--sleep-ms", type=float, default=0.0)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-step", type=int, default=-1)
    p.add_argument("--xdev-mib", type=int, default=16, help="rank 0 copies this much cuda:0 -> cuda:1 once (0 = off)")
    p.add_argument("--torch-profiler", default="", help="export a torch.profiler chrome trace of steps 10-14 here")
    p.add_argument("--timeout-s", type=int, default=60, help="process group timeout")
    p.add_argument("--json", default="", help="write rank 0's losses and step times here")
    p.add_argument("--port", type=int, default=29533)
    p.add_argument("--hostid-per-rank", action="store_true",
                   help="give each rank its own NCCL_HOSTID (as containers with their own host names get): NCCL "
                        "then takes the ranks for separate hosts and connects them over the network, which also "
                        "lets several ranks share one GPU")
    p.add_argument("--pin", action="store_true",
                   help="pin each rank to the CPUs near its GPU (split evenly when all CPUs are near both)")
    return p.parse_args()


def cpulist(text):
    cpus = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pin(rank, world):
    """The CPUs the kernel lists as local to this rank's GPU; if those are all of them (one node),
    an even share by rank. Fewer placements from run to run, less run-to-run spread in step time."""
    mine = os.sched_getaffinity(0)
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    bus = "%04x:%02x:%02x.0" % tuple(getattr(p, a, 0) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id"))
    try:
        with open(f"/sys/bus/pci/devices/{bus}/local_cpulist") as f:
            near = cpulist(f.read()) & mine
    except (OSError, ValueError):
        near = set()
    if not near or near == mine:
        allc = sorted(mine)
        n = max(1, len(allc) // world)
        near = set(allc[rank * n:(rank + 1) * n]) or mine
    for tid in os.listdir("/proc/self/task"):  # every thread so far (CUDA's, a profiler's); later ones inherit
        try:
            os.sched_setaffinity(int(tid), near)
        except OSError:
            pass
    print(f"rank {rank} pinned to {len(near)} CPUs ({min(near)}-{max(near)}) near GPU {bus}", flush=True)


def worker(rank, world, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    if args.hostid_per_rank:
        os.environ["NCCL_HOSTID"] = f"{socket.gethostname()}-rank{rank}"
    torch.cuda.set_device(rank % torch.cuda.device_count())
    if args.pin:
        pin(rank, world)
    import datetime
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout_s),
                            device_id=torch.device("cuda", torch.cuda.current_device()))
    dev = torch.device("cuda", torch.cuda.current_device())
    if rank == 0 and args.xdev_mib > 0 and torch.cuda.device_count() > 1:
        a = torch.ones(args.xdev_mib << 18, device="cuda:0")  # float32: MiB * 2^18 elements
        b = a.to("cuda:1")  # cross-device copy: cudaMemcpyAsync DeviceToDevice
        torch.cuda.synchronize("cuda:1")
        assert float(b[-1]) == 1.0
        del a, b
    torch.manual_seed(1234)
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(args.hidden, 1)).to(dev, dt)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    g = torch.Generator(device=dev)
    g.manual_seed(100 + rank)
    xs = torch.randn(8, args.batch, args.hidden, device=dev, dtype=dt, generator=g)
    ys = torch.randn(8, args.batch, 1, device=dev, dtype=dt, generator=g)
    prof = None
    losses, times = [], []
    for step in range(args.steps):
        if args.torch_profiler and step == 10:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                      torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        if rank == args.kill_rank and step == args.kill_step:
            print(f"rank {rank} dying at step {step}", flush=True)
            os._exit(9)
        torch.cuda.synchronize()
        if step == args.warmup:
            cpu0 = time.process_time()  # the process's CPU time, all threads (the profiler's too)
        t0 = time.perf_counter()
        if rank == args.sleep_rank and args.sleep_ms > 0:
            time.sleep(args.sleep_ms / 1e3)
        x, y = xs[step % 8], ys[step % 8]
        loss = torch.nn.functional.mse_loss(ddp(x).float(), y.float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        if prof is not None and step == 14:
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(f"{args.torch_profiler}.rank{rank}.json")
            prof = None
    cpu_ms = (time.process_time() - cpu0) * 1e3 / (len(times) - args.warmup) if len(times) > args.warmup else 0.0
    meas = times[args.warmup:] or times
    med = statistics.median(meas)
    print(f"rank {rank} steps {len(times)} step_ms median {med:.3f} mean {statistics.mean(meas):.3f}", flush=True)
    if rank == 0:
        vals = [float(v) for v in losses]
        print("losses " + " ".join(f"{v:.6e}" for v in vals), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"losses": vals, "step_ms": times, "median_ms": med, "cpu_ms_per_step": cpu_ms}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    n = args.nprocs or min(torch.cuda.device_count(), 8)
    if n < 1:
        sys.exit("ddp_train.py: no GPU")
    mp.spawn(worker, args=(n, args), nprocs=n)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""overhead.py: step-time cost of nvlprof's modes and of torch.profiler, side by side in rotated paired rounds.

One long-lived worker process per configuration (so start-up is paid once), each pinned to its own
CPUs, the CPU sets rotating with the rounds (run 2 showed a +-0.3% bias between fixed placements); the driver hands a turn to one worker at a time (the others idle, the GPU is theirs alone),
in an order rotated every round. A turn is BLOCK steps after a synchronize; the worker answers with
the mean step time of the turn. Per round, each configuration's time is divided by the no-profiler
time of the same round (paired); the report gives the mean ratio, its 2-standard-error interval,
and how many rounds a 1% effect needs at the measured spread (2 SE <= 1%).

  python3 overhead.py --workload gpt2|ddp --rounds 30 --block 40 --configs none,default,all,torchprof
  configs: none, torchprof (no nvlprof), api (NVLPROF_CUPTI=0), off (NVLPROF_KERNELS=off),
           default (nvlprof as installed), closed (kernels traced 2 s, then never: what a closed
           window leaves behind), all (NVLPROF_KERNELS=all), or NAME=ENV1+ENV2 (nvlprof + env)
Written for N GPUs: --gpus N gives worker i GPU i % N (one GPU: all share it, one at a time).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

CONFIGS = {
    "none": None,
    "torchprof": None,
    "api": ["NVLPROF_CUPTI=0"],
    "off": ["NVLPROF_KERNELS=off"],
    "default": [],
    "closed": ["NVLPROF_KERNELS=window:2000/3600000"],
    "all": ["NVLPROF_KERNELS=all"],
}


# ---- worker ------------------------------------------------------------------------------------

def build_gpt2(dev):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512, vocab_size=50257)
    model = GPT2LMHeadModel(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device=dev)
    g.manual_seed(7)
    data = torch.randint(0, cfg.vocab_size, (4, 8, 512), device=dev, generator=g)

    def step(i):
        x = data[i % 4]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def build_ddp(dev, port):
    """examples/ddp_train.py's default model and step (4 x Linear 4096 + ReLU, batch 256, fp32, SGD)
    under DDP at world size 1."""
    import datetime
    import torch
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=0, world_size=1, timeout=datetime.timedelta(seconds=60),
                            device_id=dev)
    torch.manual_seed(1234)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(4096, 4096), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(4096, 1)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    g = torch.Generator(device=dev)
    g.manual_seed(100)
    xs = torch.randn(8, 256, 4096, device=dev, generator=g)
    ys = torch.randn(8, 256, 1, device=dev, generator=g)

    def step(i):
        loss = torch.nn.functional.mse_loss(ddp(xs[i % 8]), ys[i % 8])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def pin_all(cpus):
    """Every thread of the process (torch's, CUDA's, nvlprof's) on these CPUs."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass


def worker(a):
    cpus = [int(c) for c in a.cpus.split(",")]
    pin_all(cpus)
    import torch
    torch.set_num_threads(max(1, len(cpus)))
    torch.cuda.set_device(a.gpu)
    dev = torch.device("cuda", a.gpu)
    step = build_gpt2(dev) if a.workload == "gpt2" else build_ddp(dev, a.port)
    rfd = os.fdopen(a.rfd, "r")
    wfd = os.fdopen(a.wfd, "w")
    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    prof = None
    if a.torchprof:
        # around all measured steps, as a user would: CPU + CUDA activities
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
        prof.__enter__()
    n = 0
    wfd.write("ready\n")
    wfd.flush()
    for line in rfd:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        k = int(cmd[1])
        if len(cmd) > 2:  # this turn's CPUs: placement rotates with the rounds
            pin_all([int(c) for c in cmd[2].split(",")])
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(k):
            step(n)
            n += 1
        torch.cuda.synchronize()
        wfd.write("%.6f\n" % ((time.perf_counter() - t0) * 1e3 / k))
        wfd.flush()
    if prof is not None:
        prof.__exit__(None, None, None)  # after the last measured turn: its post-processing is not timed
    wfd.write("bye\n")
    wfd.flush()
    if a.workload == "ddp":
        import torch.distributed as dist
        dist.destroy_process_group()


# ---- driver ------------------------------------------------------------------------------------

def mean_2se(v):
    m = statistics.mean(v)
    se = statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else float("nan")
    return m, 2 * se, (statistics.stdev(v) if len(v) > 1 else float("nan"))


def driver(a):
    names = a.configs.split(",")
    ncpu = len(os.sched_getaffinity(0))
    per = max(1, min(2, ncpu // max(1, len(names))))
    allc = sorted(os.sched_getaffinity(0))
    here = os.path.dirname(os.path.abspath(__file__))
    nv = os.environ.get("NVLPROF", os.path.join(here, "..", "..", "build", "nvlprof"))
    os.makedirs(a.out, exist_ok=True)
    procs = {}

    def slot_cpus(i):
        lo = (i * per) % len(allc)
        return ",".join(str(c) for c in allc[lo:lo + per])
    for i, name in enumerate(names):
        spec = name.split("=", 1)
        env = dict(os.environ)
        key = spec[0]
        extra = spec[1].split("+") if len(spec) > 1 else CONFIGS.get(key)
        if key not in CONFIGS and len(spec) == 1:
            sys.exit("overhead.py: unknown configuration %s" % key)
        r1, w1 = os.pipe()  # driver -> worker
        r2, w2 = os.pipe()  # worker -> driver
        cpus = slot_cpus(i)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--workload", a.workload,
               "--cpus", cpus, "--gpu", str(i % a.gpus), "--rfd", str(r1), "--wfd", str(w2),
               "--warmup", str(a.warmup), "--port", str(29600 + i)]
        if key == "torchprof":
            cmd.append("--torchprof")
        if extra is not None:
            for e in extra:
                k, _, v = e.partition("=")
                env[k] = v
            cmd = [nv, "run", "-o", os.path.join(a.out, "%s_%s" % (a.workload, key))] + cmd
        log = open(os.path.join(a.out, "%s_%s.log" % (a.workload, key)), "w")
        p = subprocess.Popen(cmd, env=env, pass_fds=(r1, w2), stdout=log, stderr=subprocess.STDOUT)
        os.close(r1)
        os.close(w2)
        procs[name] = (p, os.fdopen(w1, "w"), os.fdopen(r2, "r"))
    for name, (p, w, r) in procs.items():
        line = r.readline()
        if line.strip() != "ready":
            sys.exit("overhead.py: worker %s did not start (see its log)" % name)
    times = {n: [] for n in names}
    t_start = time.time()
    for rnd in range(a.rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        if rnd % 2:
            order.reverse()
        for name in order:
            p, w, r = procs[name]
            slot = (names.index(name) + rnd) % len(names)  # CPUs rotate too: no config keeps good ones
            w.write("run %d %s\n" % (a.block, slot_cpus(slot)))
            w.flush()
            times[name].append(float(r.readline()))
        if a.budget_s and time.time() - t_start > a.budget_s:
            break
    for name, (p, w, r) in procs.items():
        w.write("quit\n")
        w.flush()
    for name, (p, w, r) in procs.items():
        r.readline()
        p.wait(timeout=120)
    n = len(times[names[0]])
    base = times.get("none")
    res = {"workload": a.workload, "rounds": n, "block_steps": a.block, "configs": {}}
    print("workload %s: %d rounds of %d steps per configuration (rotated, paired with 'none')"
          % (a.workload, n, a.block))
    for name in names:
        t = times[name]
        row = {"step_ms_mean": statistics.mean(t), "step_ms_median": statistics.median(t), "times": t}
        if base and name != "none":
            ratios = [x / b - 1 for x, b in zip(t, base)]
            m, se2, sd = mean_2se(ratios)
            need = math.ceil((2 * sd / 0.01) ** 2) if sd == sd else None
            row.update({"ratio_mean": m, "ratio_2se": se2, "ratio_sd": sd, "rounds_for_1pct": need})
            print("  %-10s %8.3f ms/step  %+6.2f%% +- %5.2f%% (2 SE)  sd %.2f%%  rounds for 1%%: %s"
                  % (name, row["step_ms_mean"], 100 * m, 100 * se2, 100 * sd, need))
        else:
            print("  %-10s %8.3f ms/step" % (name, row["step_ms_mean"]))
        res["configs"][name] = row
    with open(os.path.join(a.out, "overhead_%s.json" % a.workload), "w") as f:
        json.dump(res, f, indent=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--workload", choices=["gpt2", "ddp"], default="gpt2")
    p.add_argument("--configs", default="none,default,all,torchprof")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--block", type=int, default=40)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--budget-s", type=float, default=0, help="stop after the round that passes this")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/nvlp-overhead"))
    p.add_argument("--cpus", default="0")
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--rfd", type=int, default=-1)
    p.add_argument("--wfd", type=int, default=-1)
    p.add_argument("--port", type=int, default=29600)
    p.add_argument("--torchprof", action="store_true")
    a = p.parse_args()
    worker(a) if a.worker else driver(a)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""overhead.py: step-time cost of nvlprof's modes and of torch.profiler, side by side in rotated paired rounds.

One long-lived worker process per configuration (so start-up is paid once), each pinned to its own
CPUs, the CPU sets rotating with the rounds (run 2 showed a +-0.3% bias between fixed placements); the driver hands a turn to one worker at a time (the others idle, the GPU is theirs alone),
in an order drawn at random every round (--order-seed; the rotation used until run 17, reversed every other
round, gave each configuration only half the positions with an even number of configurations: in run 17 a
round's last turn read 1.2% slower than its first, and the A/A 'none2', always at odd positions, +0.72%
+-0.54 over 38 sets). A turn is BLOCK steps after a synchronize; the worker answers with
the mean step time of the turn. Per round, each configuration's time is divided by the no-profiler
time of the same round (paired); the report gives the mean ratio on the log scale (the plain mean
of ratios is biased upwards by about a turn's variance: +2% on the tiny loop), its 2-standard-error
interval, how many rounds a 1% effect needs at the measured spread (2 SE <= 1%), and the same with
the core sets' and rounds' effects fitted out. Every turn is saved to overhead_WORKLOAD.raw.json as
the run goes (every 10 s, and on SIGTERM); --analyze FILE reports a saved run, cut short or not.
A worker's own speed is a fixed effect of its process (identical Python workers differed by up to
4%): --sets N starts fresh workers N times and gives each configuration's figure across the sets,
whose interval holds it; with none2 in the run, each configuration is also given against the
geometric mean of the two no-profiler workers (half the baseline's own process variance).
--warmup-s S keeps warming up until S s after CUDA came up (3: past the default's CUPTI detach).
--workload cpu (no torch, no GPU) is the harness's own test workload.

  python3 overhead.py --workload gpt2|ddp|gpt2ddp|tiny|ddp2 --rounds 30 --block 40 --configs none,default,all,torchprof
  configs: none, none2 (a second worker without a profiler: the A/A control), torchprof (no nvlprof), api (NVLPROF_CUPTI=0), off (NVLPROF_KERNELS=off),
           default (nvlprof as installed: CUPTI detached after start-up), full (NVLPROF_CUPTI=1: attached throughout), window (NVLPROF_KERNELS=window: 20 ms of every 10 s), closed (kernels traced 2 s, then never: what a closed
           window leaves behind), all (NVLPROF_KERNELS=all), or NAME=ENV1+ENV2 (nvlprof + env)
Written for N GPUs: --gpus N gives worker i GPU i % N (one GPU: all share it, one at a time).
"""
import argparse
import glob
import json
import math
import os
import random
import statistics
import signal
import subprocess
import sys
import time

# NAME=cupti:PARTS (no nvlprof): CUPTI's parts done alone (tests/gpu/cupti_presence.c, `make gpu-probes`)
PRESENCE_SO = os.environ.get("CUPTI_PRESENCE_SO") or os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../build/gpu/cupti_presence.so"))
CONFIGS = {
    "none": None,
    "none2": None,  # a second worker without any profiler: the method's own spread and bias (A/A)
    "torchprof": None,
    "api": ["NVLPROF_CUPTI=0"],
    "off": ["NVLPROF_KERNELS=off"],
    "default": [],  # CUPTI attached for the whole run (NVLPROF_CUPTI=1, the default again since run 10)
    "full": ["NVLPROF_CUPTI=1"],  # the same, named (run 10's build had startup as the default)
    # detached ~2 s after it attached; on CUPTI 13.0 only when told (cuptiFinalize corrupts the heap
    # of ~1.4% of processes there: runs 11-13)
    "startup": ["NVLPROF_CUPTI=startup", "NVLPROF_CUPTI_FINALIZE=1"],
    "closed": ["NVLPROF_KERNELS=window:2000/3600000"],
    "window": ["NVLPROF_KERNELS=window"],
    "all": ["NVLPROF_KERNELS=all"],
}


# ---- worker ------------------------------------------------------------------------------------

def build_gpt2(dev, wrap=None):
    """HF GPT-2 from a config (6 x 768, bf16 autocast, batch 8 x 512, AdamW); wrap(model) gives
    the module the step calls (DDP), None the model itself."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512, vocab_size=50257)
    torch.manual_seed(7)
    model = GPT2LMHeadModel(cfg).to(dev)
    run = wrap(model) if wrap else model
    opt = torch.optim.AdamW(run.parameters(), lr=1e-4)
    g = torch.Generator(device=dev)
    g.manual_seed(7)
    data = torch.randint(0, cfg.vocab_size, (4, 8, 512), device=dev, generator=g)

    def step(i):
        x = data[i % 4]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = run(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def build_tiny(dev):
    """The launch-bound worst case: 400 tiny elementwise kernels per step on a 256-element tensor
    (well over 20k launches per second; the GPU idles between them)."""
    import torch
    x0 = torch.ones(256, device=dev)
    st = {"x": x0.clone()}

    def step(i):
        x = st["x"]
        for _ in range(200):
            x = x * 1.0001 + 0.0001
        st["x"] = x if i % 50 else x0.clone()
    return step


def build_cpu():
    """The harness's self-test workload: ~0.06 ms of Python arithmetic a step, no GPU;
    OV_CPU_EXTRA_PCT=P does P% more of it (a known cost, for the harness's positive control)."""
    iters = 2000 * (100 + int(os.environ.get("OV_CPU_EXTRA_PCT", "0"))) // 100

    def step(i):
        x = 0
        for j in range(iters):
            x += j * i
        return x
    return step


def init_pg(dev, port, rank, world, timeout_s):
    """The NCCL process group of a DDP workload (rendezvous on 127.0.0.1:port)."""
    import datetime
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s), device_id=dev)


def build_gpt2ddp(dev, port):
    """The GPT-2 loop of build_gpt2 under DDP (world size 1, NCCL): the same step through
    torch.distributed, as torchrun jobs run it."""
    import torch
    init_pg(dev, port, 0, 1, 60)
    return build_gpt2(dev, lambda m: torch.nn.parallel.DistributedDataParallel(
        m, device_ids=[dev.index]))


def mlp_ddp_step(dev, width, seed):
    """4 x Linear(width) + ReLU under DDP (the process group is up), batch 256, fp32, SGD: the
    step of examples/ddp_train.py's model at that width."""
    import torch
    torch.manual_seed(1234)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    xs = torch.randn(8, 256, width, device=dev, generator=g)
    ys = torch.randn(8, 256, 1, device=dev, generator=g)

    def step(i):
        loss = torch.nn.functional.mse_loss(ddp(xs[i % 8]), ys[i % 8])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def build_ddp2(dev, port, rank):
    """A 2-rank DDP job (4 x Linear 2048 + ReLU, batch 256, fp32, SGD); both ranks may share one
    GPU (each its own NCCL_HOSTID, as tests/gpu/hostid_rank.sh does). Returns the step and the
    control group (gloo) rank 0 sends each turn's orders on."""
    import torch.distributed as dist
    os.environ["NCCL_HOSTID"] = "ov-rank%d" % rank
    init_pg(dev, port, rank, 2, 120)
    ctl = dist.new_group(backend="gloo")
    return mlp_ddp_step(dev, 2048, 100 + rank), ctl


def ddp2_follower(a):
    """Rank 1 of the ddp2 workload: runs what rank 0 orders (k steps on these CPUs), until 0."""
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(a.gpu)
    dev = torch.device("cuda", a.gpu)
    step, ctl = build_ddp2(dev, a.port, 1)
    n = 0
    order = torch.zeros(17, dtype=torch.int64)
    while True:
        dist.broadcast(order, 0, group=ctl)
        k = int(order[0])
        if k <= 0:
            break
        cpus = [int(c) for c in order[2:2 + int(order[1])]]
        if cpus:
            pin_all(cpus)
        for _ in range(k):
            step(n)
            n += 1
        torch.cuda.synchronize()
    dist.destroy_process_group()


def build_ddp(dev, port):
    """examples/ddp_train.py's default model and step (4 x Linear 4096 + ReLU, batch 256, fp32, SGD)
    under DDP at world size 1."""
    init_pg(dev, port, 0, 1, 60)
    return mlp_ddp_step(dev, 4096, 100)


def pin_all(cpus):
    """Every thread of the process (torch's, CUDA's, nvlprof's) on these CPUs."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass


def mtprof_lib():
    """tests/gpu/mtprof.c, when the driver preloaded it (MTPROF=path/mtprof.so): the main thread's CPU
    by shared object, in place of perf (none on the GPU machine)."""
    if not os.environ.get("MTPROF_WORKER_OUT"):
        return None
    import ctypes
    try:
        lib = ctypes.CDLL(None)
        lib.mtprof_start, lib.mtprof_write
    except (OSError, AttributeError):
        print("overhead.py: MTPROF set but mtprof.so is not loaded in this worker", file=sys.stderr)
        return None
    lib.mtprof_write.argtypes = [ctypes.c_char_p]
    return lib


def worker(a):
    cpus = [int(c) for c in a.cpus.split(",")]
    pin_all(cpus)
    ctl = None
    if a.workload == "cpu":  # the harness's own test (test_overhead_stats.sh): no torch, no GPU
        dev = None

        def sync():
            pass
    else:
        import torch
        torch.set_num_threads(max(1, len(cpus)))
        torch.cuda.set_device(a.gpu)
        dev = torch.device("cuda", a.gpu)
        sync = torch.cuda.synchronize
    if a.workload == "ddp2":  # rank 1 follows rank 0's orders, in a process of its own
        import torch.distributed as dist
        follower = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--follower",
                                     "--workload", "ddp2", "--gpu", str(a.gpu), "--port", str(a.port)])
        step, ctl = build_ddp2(dev, a.port, 0)

        def order(k, cpus):
            o = torch.zeros(17, dtype=torch.int64)
            o[0] = k
            o[1] = len(cpus)
            for j, c in enumerate(cpus[:15]):
                o[2 + j] = c
            dist.broadcast(o, 0, group=ctl)
    else:
        step = {"cpu": build_cpu, "gpt2": lambda: build_gpt2(dev), "tiny": lambda: build_tiny(dev),
                "gpt2ddp": lambda: build_gpt2ddp(dev, a.port),
                "ddp": lambda: build_ddp(dev, a.port)}[a.workload]()
    if ctl is not None:
        order(a.warmup, cpus)
    rfd = os.fdopen(a.rfd, "r")
    wfd = os.fdopen(a.wfd, "w")
    i, t_warm = 0, time.time()
    # --warmup-s: on until that long after CUDA came up (in build), so the measured turns follow what
    # nvlprof does after start-up (NVLPROF_CUPTI=startup detaches CUPTI ~2-2.5 s after it attached);
    # ddp2's follower runs exactly --warmup steps, so it keeps the step count
    while i < a.warmup or (ctl is None and time.time() - t_warm < a.warmup_s):
        step(i)
        i += 1
    sync()
    prof = None
    if a.torchprof:
        # around all measured steps, as a user would: CPU + CUDA activities
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
        prof.__enter__()
    n = 0
    mt = mtprof_lib()
    if mt is not None:
        mt.mtprof_start()  # from here on, this (the main) thread's CPU time is sampled
    wfd.write("ready\n")
    wfd.flush()
    for line in rfd:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        k = int(cmd[1])
        if len(cmd) > 2:  # this turn's CPUs: placement rotates with the rounds
            cpus = [int(c) for c in cmd[2].split(",")]
            pin_all(cpus)
        sync()
        if ctl is not None:
            order(k, cpus)
        t0 = time.perf_counter()
        c0 = time.thread_time()
        for _ in range(k):
            step(n)
            n += 1
        sync()
        # wall ms per step, and the main thread's CPU ms per step (less noisy: it shows what the
        # hooks and CUPTI add to the launching thread)
        wfd.write("%.6f %.6f\n" % ((time.perf_counter() - t0) * 1e3 / k,
                                   (time.thread_time() - c0) * 1e3 / k))
        wfd.flush()
    if mt is not None:
        mt.mtprof_write(os.environ["MTPROF_WORKER_OUT"].encode())
    if prof is not None:
        prof.__exit__(None, None, None)  # after the last measured turn: its post-processing is not timed
    wfd.write("bye\n")
    wfd.flush()
    if ctl is not None:
        order(0, [])
        follower.wait(timeout=120)
    if a.workload in ("ddp", "gpt2ddp", "ddp2"):
        import torch.distributed as dist
        dist.destroy_process_group()


# ---- driver ------------------------------------------------------------------------------------

def mean_2se(v):
    m = statistics.mean(v)
    se = statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else float("nan")
    return m, 2 * se, (statistics.stdev(v) if len(v) > 1 else float("nan"))


def log_ratios(t, base):
    """log(t / base) of each round, None where a time is not positive."""
    return [math.log(x / b) if x > 0 and b > 0 else None for x, b in zip(t, base)]


def paired_ratio(t, base):
    """Each turn's time over the no-profiler turn of its round, averaged on the log scale: (ratio - 1,
    2 SE, sd of one round's log ratio). The plain mean of t/base - 1 is biased upwards by about the
    variance of one turn's time (Jensen: E[1/b] > 1/E[b]): +2% at the 20% spread of the tiny loop's
    turns (tests/gpu/results/cost6.txt), where the log-scale mean and the core-set fit agree."""
    m, se2, sd = mean_2se([v for v in log_ratios(t, base) if v is not None])
    return math.exp(m) - 1, se2 * math.exp(m), sd


def _solve(A, B):
    """Gaussian elimination with partial pivoting: A X = B (lists; B a list of columns)."""
    n = len(A)
    M = [row[:] + [b[i] for b in B] for i, row in enumerate(A)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(M[r][c]))
        if abs(M[p][c]) < 1e-12:
            return None
        M[c], M[p] = M[p], M[c]
        for r in range(n):
            if r != c and M[r][c]:
                f = M[r][c] / M[c][c]
                M[r] = [x - f * y for x, y in zip(M[r], M[c])]
    return [[M[i][n + j] / M[i][i] for i in range(n)] for j in range(len(B))]


def slot_adjusted(times, slots, names, positions=None):
    """Each configuration's effect against 'none' with the core sets' and the rounds' own effects
    taken out: least squares on log(step time) = config + core set + round + noise (every
    configuration visits every core set as the sets rotate, so the three are separable; the rounds
    are removed by centring each round, the rest solved exactly). Returns {name: (ratio - 1,
    2 SE)}. The paired ratio's spread is mostly the core sets' differences. With positions (each
    turn's place in its round, recorded since the order is drawn at random) the positions' effects
    come out too."""
    if "none" not in names:
        return {}
    n = len(times[names[0]])
    nc = len(names)
    ns = max(max(v) for v in slots.values()) + 1
    npos = max(max(v) for v in positions.values()) + 1 if positions else 1
    p = nc - 1 + ns - 1 + npos - 1  # configs against 'none', core sets against set 0, positions against 0
    b = names.index("none")
    cols = [ci for ci in range(nc) if ci != b]
    X, y = [], []
    for r in range(n):
        xr, yr = [], []
        for ci, name in enumerate(names):
            x = [1.0 if ci == c else 0.0 for c in cols]
            sl = slots[name][r]
            x += [1.0 if sl == k else 0.0 for k in range(1, ns)]
            if positions:
                x += [1.0 if positions[name][r] == k else 0.0 for k in range(1, npos)]
            xr.append(x)
            yr.append(math.log(times[name][r]))
        mx = [sum(col) / nc for col in zip(*xr)]
        my = sum(yr) / nc
        X += [[v - m for v, m in zip(x, mx)] for x in xr]
        y += [v - my for v in yr]
    A = [[sum(X[k][i] * X[k][j] for k in range(len(X))) for j in range(p)] for i in range(p)]
    Xy = [sum(X[k][i] * y[k] for k in range(len(X))) for i in range(p)]
    sol = _solve(A, [Xy])
    inv = _solve(A, [[1.0 if i == j else 0.0 for i in range(p)] for j in range(p)])
    dof = len(y) - p - (n - 1)
    if sol is None or inv is None or dof <= 0:
        return {}
    beta = sol[0]
    resid = [yk - sum(bi * xi for bi, xi in zip(beta, xk)) for xk, yk in zip(X, y)]
    s2 = sum(e * e for e in resid) / dof
    out = {}
    for j, ci in enumerate(cols):
        d, se = beta[j], math.sqrt(max(s2 * inv[j][j], 0))
        out[names[ci]] = (math.exp(d) - 1, 2 * se * math.exp(d))
    return out


def by_sets(t, base, sets):
    """Across process sets: each set's own log-scale paired ratio, then their mean and 2 SE over the
    sets (ratio - 1, 2 SE, the per-set figures). Each set has its own processes, so the interval
    holds the per-process effects that rounds within one set share."""
    per = {}
    for v, k in zip(log_ratios(t, base), sets):
        if v is not None:
            per.setdefault(k, []).append(v)
    means = [statistics.mean(v) for k, v in sorted(per.items())]
    if len(means) < 2:
        return None
    m, se2, _ = mean_2se(means)
    return math.exp(m) - 1, se2 * math.exp(m), [math.exp(v) - 1 for v in means]


def sets_for_bound(m, se2, n, target=0.01):
    """How many process sets the 2-SE upper bound m + se2 needs to fall under target if the mean m and
    the sets' spread (se2 over n sets) hold: 0 where it is under already, None where m is not under
    target (no number of sets brings it there)."""
    if m + se2 < target:
        return 0
    if m >= target:
        return None
    sd = se2 / 2 * math.sqrt(n)
    return max(n + 1, math.ceil((2 * sd / (target - m)) ** 2))


def bound_text(m, se2, n):
    """The 2-SE bound and what a 1% target needs, for the sets' line."""
    k = sets_for_bound(m, se2, n)
    return "bound %.2f%%, %s" % (100 * (m + se2), "under 1%" if k == 0 else
                                 "its mean not under 1%" if k is None else
                                 "~%d sets for a bound under 1%% at this mean and spread" % k)


def sets_block(res, names, times, base, sets, skip, key):
    """Each configuration but skip across the process sets against base (by_sets), printed and kept
    in res as KEY_mean, KEY_2se, KEY_each, KEY_sets_for_1pct (sets_for_bound)."""
    for name in names:
        if name in skip:
            continue
        bs = by_sets(times[name], base, sets)
        if bs:
            m, se2, each = bs
            res["configs"][name].update({key + "_mean": m, key + "_2se": se2, key + "_each": each,
                                         key + "_sets_for_1pct": sets_for_bound(m, se2, len(each))})
            print("  %-10s %+6.2f%% +- %5.2f%% (2 SE over sets; sets %s); %s"
                  % (name, 100 * m, 100 * se2, " ".join("%+.1f" % (100 * e) for e in each),
                     bound_text(m, se2, len(each))))


def analyze(workload, block, names, times, cpu, slots, sets=None, positions=None):
    """The report of a run's turns (printed), as the JSON result; "_adj" holds the core-set fit."""
    n = len(times[names[0]])
    base = times.get("none")
    res = {"workload": workload, "rounds": n, "block_steps": block, "configs": {}}
    print("workload %s: %d rounds of %d steps per configuration (%s, paired with 'none')"
          % (workload, n, block, "in an order drawn each round" if positions else "rotated"))
    for name in names:
        t = times[name]
        row = {"step_ms_mean": statistics.mean(t), "step_ms_median": statistics.median(t), "times": t,
               "cpu_ms": cpu[name]}
        if base and name != "none":
            cm, cse2, _ = paired_ratio(cpu[name], cpu["none"])
            row.update({"cpu_ratio_mean": cm, "cpu_ratio_2se": cse2})
            m, se2, sd = paired_ratio(t, base)
            am = statistics.mean([x / b - 1 for x, b in zip(t, base)])
            need = math.ceil((2 * sd / 0.01) ** 2) if sd == sd else None
            row.update({"ratio_mean": m, "ratio_2se": se2, "ratio_sd": sd, "rounds_for_1pct": need,
                        "ratio_arith_mean": am})
            print("  %-10s %8.3f ms/step  %+6.2f%% +- %5.2f%% (2 SE)  sd %.2f%%  rounds for 1%%: %s"
                  "  | main-thread CPU %.3f ms/step %+6.2f%% +- %5.2f%%"
                  % (name, row["step_ms_mean"], 100 * m, 100 * se2, 100 * sd, need,
                     statistics.mean(cpu[name]), 100 * cm, 100 * cse2))
        else:
            print("  %-10s %8.3f ms/step  | main-thread CPU %.3f ms/step"
                  % (name, row["step_ms_mean"], statistics.mean(cpu[name])))
        res["configs"][name] = row
    nsets = len(set(sets)) if sets else 1
    res["sets"] = nsets
    if base and nsets > 1:
        print("  across %d process sets (fresh workers each; the interval holds each process's own speed):"
              % nsets)
        sets_block(res, names, times, base, sets, ("none",), "sets")
        if "none2" in times:
            # each round's baseline the geometric mean of the two no-profiler workers: half the
            # variance of one process's own speed on the baseline side (the A/A is none2 vs none above)
            base2 = [math.sqrt(x * y) if x > 0 and y > 0 else 0.0 for x, y in zip(base, times["none2"])]
            print("  against the mean of the two no-profiler workers (none, none2), across sets:")
            sets_block(res, names, times, base2, sets, ("none", "none2"), "sets2")
    elif base:
        print("  one process per configuration: the intervals leave out each process's own speed "
              "(up to +-4% between identical Python workers); --sets N measures it")
    res["_adj"] = slot_adjusted(times, slots, names, positions)
    if positions:
        res["position_effects"] = position_effects(times, positions, names)
        print("  a turn's place in its round (drawn at random each round), mean log time against the round's: %s"
              % " ".join("%d:%+.2f%%" % (k, 100 * v) for k, v in enumerate(res["position_effects"])))
    return res


def position_effects(times, positions, names):
    """Each place in a round: the mean of its turns' log time minus their round's mean (ratio - 1). Only
    meaningful where the order is drawn at random (every configuration at every place)."""
    npos = max(max(v) for v in positions.values()) + 1
    acc = [[] for _ in range(npos)]
    for r in range(len(times[names[0]])):
        lt = {nm: math.log(times[nm][r]) for nm in names if times[nm][r] > 0}
        if len(lt) < len(names):
            continue
        m = statistics.mean(lt.values())
        for nm in names:
            acc[positions[nm][r]].append(lt[nm] - m)
    return [math.exp(statistics.mean(v)) - 1 if v else float("nan") for v in acc]


def read_mtprof(out, workload, key):
    """mtprof.c's tables of one configuration's workers (one per process set), summed:
    (samples, {object: count}, {symbol: count}, {call chain into MTPROF_FOCUS: count}), or None."""
    paths = glob.glob(os.path.join(out, "mtprof_%s_%s.*.txt" % (workload, key)))
    if not paths:
        return None
    n, dso, sym, chain = 0, {}, {}, {}
    for path in paths:
        for ln in open(path).read().splitlines():
            f = ln.split(" ", 2)
            if f[0] == "samples":
                n += int(f[1])
            elif f[0] in ("dso", "sym", "chain") and len(f) == 3:
                t = {"dso": dso, "sym": sym, "chain": chain}[f[0]]
                t[f[2]] = t.get(f[2], 0) + int(f[1])
    return n, dso, sym, chain


def mtprof_report(out, workload, names, res):
    """Per configuration, the main thread's CPU per step in each shared object (share of its samples
    x its CPU ms per step), and against 'none' the difference with its 2-SE (binomial) interval:
    where a configuration's extra main-thread time goes."""
    tabs = {n: read_mtprof(out, workload, n.split("=", 1)[0]) for n in names}
    print("  main thread's CPU by shared object (mtprof: us per step; against none, 2 SE):")
    base = tabs.get("none")
    ms0 = statistics.mean(res["configs"]["none"]["cpu_ms"]) if base and base[0] else None
    objs = set()
    for t in tabs.values():
        if t and t[0]:
            objs |= {o for o, c in sorted(t[1].items(), key=lambda x: -x[1])[:8]}
    for name in names:
        t = tabs[name]
        if not t or not t[0]:
            print("  %-10s (no mtprof samples)" % name)
            continue
        ms = statistics.mean(res["configs"][name]["cpu_ms"])
        cells = []
        against = base and base[0] and name != "none"
        for o in sorted(objs, key=lambda o: -(t[1].get(o, 0))):
            p = t[1].get(o, 0) / t[0]
            cell = "%s %.1f" % (o, 1000 * ms * p)
            if against:
                p0 = base[1].get(o, 0) / base[0]
                se = math.sqrt(p * (1 - p) / t[0] * ms ** 2 + p0 * (1 - p0) / base[0] * ms0 ** 2)
                cell += " (%+.1f +- %.1f)" % (1000 * (ms * p - ms0 * p0), 2000 * se)
            cells.append(cell)
        res["configs"][name]["mtprof"] = {"samples": t[0], "dso": t[1], "sym": t[2]}
        print("  %-10s %d samples: %s" % (name, t[0], "; ".join(cells)))
    focus = os.environ.get("MTPROF_FOCUS")
    if not focus:
        return
    print("  main thread's samples in %s (MTPROF_FOCUS), and the commonest call chains into it:" % focus)
    for name in names:
        t = tabs[name]
        if not t or not t[0]:
            continue
        k = sum(c for o, c in t[1].items() if focus in o)
        print("  %-10s %d of %d samples (%.2f%% +- %.2f, 2 SE)" % (
            name, k, t[0], 100.0 * k / t[0], 200.0 * math.sqrt(k * (t[0] - k) / t[0]) / t[0]))
        res["configs"][name]["mtprof"]["chain"] = t[3]
        for c, cnt in sorted(t[3].items(), key=lambda x: -x[1])[:6]:
            print("      %5d %s" % (cnt, c))


def report_adj(res, names):
    """Prints the core-set fit kept in res["_adj"] and moves it into each configuration's row."""
    adj = res.pop("_adj")
    if adj:
        print("  core-set and round effects taken out (least squares on log step time):")
    for name in names:
        if name in adj:
            m, se2 = adj[name]
            print("  %-10s %+6.2f%% +- %5.2f%% (2 SE)" % (name, 100 * m, 100 * se2))
            res["configs"][name].update({"adjusted_mean": m, "adjusted_2se": se2})


def old_rotation_places(names, n):
    """Each turn's place in its round under the rotation used before run 17 (rotated every round,
    reversed every other round): what a raw file without recorded places had."""
    pos = {nm: [] for nm in names}
    for rnd in range(n):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        if rnd % 2:
            order.reverse()
        for k, nm in enumerate(order):
            pos[nm].append(k)
    return pos


def old_rotation_report(names, times, sets):
    """A run of the old rotation: the places each configuration took, the places' effects (mixed with
    the configurations' own where a configuration kept half the places), and each configuration
    against the no-profiler worker that took the same places (none or none2), across sets."""
    n = len(times[names[0]])
    pos = old_rotation_places(names, n)
    took = {nm: sorted(set(v)) for nm, v in pos.items()}
    print("  places (the rotation before run 17): %s" % "; ".join("%s %s" % (nm.split("=", 1)[0], ",".join(
        map(str, v))) for nm, v in took.items()))
    pe = position_effects(times, pos, names)
    print("  a turn's place in its round, mean log time against the round's (with the configurations at it): %s"
          % " ".join("%d:%+.2f%%" % (k, 100 * v) for k, v in enumerate(pe)))
    out = {}
    if "none2" in names and took["none"] != took["none2"] and sets and len(set(sets)) > 1:
        print("  against the no-profiler worker of the same places, across sets:")
        for nm in names:
            if nm in ("none", "none2"):
                continue
            b = "none" if took[nm] == took["none"] else "none2" if took[nm] == took["none2"] else None
            bs = by_sets(times[nm], times[b], sets) if b else None
            if bs:
                out[nm] = (b,) + bs
                print("  %-10s %+6.2f%% +- %5.2f%% against %s (2 SE over sets)" % (nm, 100 * bs[0], 100 * bs[1], b))
    return took, pe, out


def analyze_file(path):
    """--analyze: the report of the turns a run saved (overhead_WORKLOAD.raw.json), cut short or not."""
    with open(path) as f:
        raw = json.load(f)
    names = raw["names"]
    n = min(len(raw["times"][k]) for k in names)
    if n < 2 or "none" not in names:
        sys.exit("overhead.py: %s: %d whole rounds%s; nothing to compare" %
                 (path, n, "" if "none" in names else ", no 'none' configuration"))
    cut = {key: {k: v[:n] for k, v in raw[key].items()} for key in ("times", "cpu", "slots")}
    pos = {k: v[:n] for k, v in raw["positions"].items()} if raw.get("positions") else None
    res = analyze(raw["workload"], raw["block_steps"], names, cut["times"], cut["cpu"], cut["slots"],
                  raw.get("sets", [])[:n] or None, pos)
    report_adj(res, names)
    if pos is None:
        took, pe, same = old_rotation_report(names, cut["times"], raw.get("sets", [])[:n] or None)
        res["old_rotation"] = {"places": took, "place_effects": pe,
                               "same_places": {k: {"base": v[0], "mean": v[1], "2se": v[2]} for k, v in same.items()}}
    return res


def driver(a):
    names = a.configs.split(",")
    ncpu = len(os.sched_getaffinity(0))
    per = max(1, min(a.per_cpus, ncpu // max(1, len(names))))
    allc = sorted(os.sched_getaffinity(0))
    here = os.path.dirname(os.path.abspath(__file__))
    nv = os.environ.get("NVLPROF", os.path.join(here, "..", "..", "build", "nvlprof"))
    os.makedirs(a.out, exist_ok=True)
    specs = {}  # name: (key, the env it adds: None for no nvlprof)
    presence = {}  # key: the CUPTI parts a no-nvlprof worker does (NAME=cupti:PARTS)
    for name in names:
        spec = name.split("=", 1)
        if spec[0] not in CONFIGS and len(spec) == 1:
            sys.exit("overhead.py: unknown configuration %s" % spec[0])
        specs[name] = (spec[0], spec[1].split("+") if len(spec) > 1 else CONFIGS.get(spec[0]))
        if len(spec) > 1 and spec[1].startswith("cupti:"):  # no nvlprof: cupti_presence.c's parts
            specs[name] = (spec[0], None)
            presence[spec[0]] = spec[1][len("cupti:"):]
    if presence and not os.path.exists(PRESENCE_SO):
        sys.exit("overhead.py: a cupti: configuration needs %s (make gpu-probes)" % PRESENCE_SO)

    def slot_cpus(i):
        lo = (i * per) % len(allc)
        return ",".join(str(c) for c in allc[lo:lo + per])

    def spawn(pset):
        """One worker per configuration: a process set (a fresh one per --sets). Which configuration is
        started first (and starts on the first core set, GPU and port) rotates with the sets: in runs 14-17
        the first, always 'none', read 0.72% +-0.54 faster than 'none2' over 38 sets."""
        procs = {}
        first = pset % len(names)
        order0 = names[first:] + names[:first]
        spawned.append(order0)
        for i, name in enumerate(order0):
            key, extra = specs[name]
            env = dict(os.environ)
            if a.hashseed != "random":
                env["PYTHONHASHSEED"] = a.hashseed
            if key in presence:  # tests/gpu/cupti_presence.c does these CUPTI parts, nothing else
                env["CUPTI_PRESENCE"] = presence[key]
                env["LD_PRELOAD"] = ":".join(x for x in (PRESENCE_SO, env.get("LD_PRELOAD")) if x)
            if os.environ.get("MTPROF"):  # the main thread's CPU by shared object (mtprof.c)
                env["LD_PRELOAD"] = ":".join(x for x in (os.environ["MTPROF"], env.get("LD_PRELOAD")) if x)
                env["MTPROF_WORKER_OUT"] = os.path.join(a.out, "mtprof_%s_%s.%d.txt" % (a.workload, key, pset))
            r1, w1 = os.pipe()  # driver -> worker
            r2, w2 = os.pipe()  # worker -> driver
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--workload", a.workload,
                   "--cpus", slot_cpus(i), "--gpu", str(i % a.gpus), "--rfd", str(r1), "--wfd", str(w2),
                   "--warmup", str(a.warmup), "--warmup-s", str(a.warmup_s), "--port", str(29600 + i + 20 * (pset % 50))]
            if key == "torchprof":
                cmd.append("--torchprof")
            if extra is not None:
                for e in extra:
                    k, _, v = e.partition("=")
                    env[k] = v
                # one folder per configuration; later process sets add their traces to it
                cmd = [nv, "run", "-o", os.path.join(a.out, "%s_%s" % (a.workload, key))] + \
                    (["--append"] if pset else []) + cmd
            if a.own_shm:  # a /dev/shm of its own: every nvlprof worker holds its GPU's link sampler
                cmd = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs tmpfs /dev/shm && exec "$@"', "sh"] + cmd
            with open(os.path.join(a.out, "%s_%s.log" % (a.workload, key)), "a") as log:
                p = subprocess.Popen(cmd, env=env, pass_fds=(r1, w2), stdout=log, stderr=subprocess.STDOUT)
            os.close(r1)
            os.close(w2)
            procs[name] = (p, os.fdopen(w1, "w"), os.fdopen(r2, "r"))
        for name, (p, w, r) in procs.items():
            line = r.readline()
            if line.strip() != "ready":
                sys.exit("overhead.py: worker %s did not start (see its log)" % name)
        return procs

    def quit_all(procs):
        for name, (p, w, r) in procs.items():
            w.write("quit\n")
            w.flush()
        for name, (p, w, r) in procs.items():
            r.readline()
            p.wait(timeout=120)
    times = {n: [] for n in names}
    cpu = {n: [] for n in names}
    slots = {n: [] for n in names}
    positions = {n: [] for n in names}  # each turn's place in its round
    rng = random.Random(a.order_seed)
    sets = []  # each round's process set
    spawned = []  # each process set's start order
    raw_path = os.path.join(a.out, "overhead_%s.raw.json" % a.workload)

    def save_raw():
        # every turn so far, rewritten often: a run cut short (a device call's time limit) keeps
        # its rounds, and `overhead.py --analyze FILE` reports them
        tmp = raw_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"workload": a.workload, "block_steps": a.block, "names": names,
                       "times": times, "cpu": cpu, "slots": slots, "sets": sets, "spawned": spawned,
                       "positions": positions}, f)
        os.replace(tmp, raw_path)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    t_start = t_saved = time.time()
    rnd = 0
    for pset in range(a.sets):
        if stop:
            break
        procs = spawn(pset)
        set_end = t_start + a.budget_s * (pset + 1) / a.sets if a.budget_s else None
        set_rounds = a.rounds * (pset + 1) // a.sets
        while rnd < set_rounds:
            if stop:
                print("overhead.py: SIGTERM: stopping after %d rounds" % rnd)
                break
            order = rng.sample(names, len(names))  # every place and every predecessor, in the long run
            for place, name in enumerate(order):
                p, w, r = procs[name]
                slot = (names.index(name) + rnd) % len(names)  # CPUs rotate too: no config keeps good ones
                w.write("run %d %s\n" % (a.block, slot_cpus(slot)))
                w.flush()
                wall, c = r.readline().split()
                slots[name].append(slot)
                positions[name].append(place)
                times[name].append(float(wall))
                cpu[name].append(float(c))
            sets.append(pset)
            rnd += 1
            if time.time() - t_saved > 10:
                save_raw()
                t_saved = time.time()
            if set_end and time.time() > set_end:
                break
        quit_all(procs)
    n = min(len(v) for v in times.values())  # a SIGTERM inside a round: whole rounds only
    for d in (times, cpu, slots, positions):
        for k in d:
            del d[k][n:]
    del sets[n:]
    save_raw()
    res = analyze(a.workload, a.block, names, times, cpu, slots, sets, positions)
    report_adj(res, names)
    if os.environ.get("MTPROF"):
        mtprof_report(a.out, a.workload, names, res)
    for name in names:
        d = os.path.join(a.out, "%s_%s" % (a.workload, name.split("=", 1)[0]))
        if os.path.isdir(d):
            rep = subprocess.run([nv, "report", d], capture_output=True, text=True).stdout
            line = [x for x in rep.splitlines() if x.startswith("nvlprof cost:")]
            print("  %-10s %s" % (name, line[0] if line else "(no cost line)"))
            res["configs"][name]["cost_line"] = line[0] if line else None
    with open(os.path.join(a.out, "overhead_%s.json" % a.workload), "w") as f:
        json.dump(res, f, indent=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--workload", choices=["gpt2", "ddp", "tiny", "gpt2ddp", "ddp2", "cpu"], default="gpt2")
    p.add_argument("--follower", action="store_true")
    p.add_argument("--configs", default="none,default,all,torchprof")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--block", type=int, default=40)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--warmup-s", type=float, default=0,
                   help="warm up at least this long after CUDA came up (3: past NVLPROF_CUPTI=startup's detach)")
    p.add_argument("--budget-s", type=float, default=0, help="stop after the round that passes this")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/nvlp-overhead"))
    p.add_argument("--cpus", default="0")
    p.add_argument("--per-cpus", type=int, default=2, help="CPUs in each worker's core set (1: the main thread cannot move between cores within a turn)")
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--rfd", type=int, default=-1)
    p.add_argument("--wfd", type=int, default=-1)
    p.add_argument("--port", type=int, default=29600)
    p.add_argument("--torchprof", action="store_true")
    p.add_argument("--own-shm", action="store_true",
                   help="each worker in a mount namespace with a /dev/shm of its own (root): each nvlprof worker then samples "
                        "its GPU's links itself, as the one process of a GPU does, instead of the first to claim it (run 10)")
    p.add_argument("--hashseed", default="random", help="PYTHONHASHSEED of every worker (random: each its own)")
    p.add_argument("--order-seed", type=int, default=1, help="seed of the turns' random order within each round")
    p.add_argument("--sets", type=int, default=1,
                   help="process sets: fresh workers this many times, the budget and rounds split between them; "
                        "the interval across sets includes each process's own speed (A/A: +-4%% between identical "
                        "Python workers), which the rounds of one set cannot")
    p.add_argument("--analyze", metavar="RAW_JSON", help="report the turns a run saved, and stop")
    a = p.parse_args()
    if a.analyze:
        analyze_file(a.analyze)
    elif a.follower:
        ddp2_follower(a)
    else:
        worker(a) if a.worker else driver(a)


if __name__ == "__main__":
    main()

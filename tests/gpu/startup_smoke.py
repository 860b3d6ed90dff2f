# startup_smoke.py: a torch job for NVLPROF_CUPTI=startup on real CUPTI (tests/gpu/startup_smoke.sh).
# MODE plain: --steps steps of matmuls and a D2H copy, each followed by a 10 ms sleep (so the run
# outlasts the detach, and the checksum does not depend on its time); um: also cudaMallocManaged
# (through the runtime, so through nvlprof when preloaded) at step --at, written by the CPU and
# copied by the GPU; prof_late: torch.profiler from step --at on; prof_early: torch.profiler at once
# (it registers before the detach is due).
# Prints a checksum of the job's results and, with a profiler, how many kernels it recorded.
import argparse, ctypes, time
import torch
from torch.profiler import profile, ProfilerActivity
ap = argparse.ArgumentParser()
ap.add_argument("mode", choices=["plain", "um", "prof_late", "prof_early"])
ap.add_argument("--steps", type=int, default=400)
ap.add_argument("--at", type=int, default=200)
a = ap.parse_args()
torch.manual_seed(0)
x = torch.randn(1024, 1024, device="cuda")
w = torch.randn(1024, 1024, device="cuda") / 32
t0 = time.time()
acc = 0.0
prof = None
steps = 0
um_done = False
def step():
    global x, acc
    y = torch.tanh(x @ w)
    x = y + 0.01 * x
    acc += float(x[0, :8].sum().cpu())  # a D2H copy every step
if a.mode == "prof_early":
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    prof.__enter__()
while steps < a.steps:
    step()
    steps += 1
    time.sleep(0.01)
    if not um_done and steps >= a.at:
        um_done = True
        if a.mode == "um":
            rt = ctypes.CDLL(None)  # the global scope: nvlprof's cudaMallocManaged when preloaded
            p = ctypes.c_void_p()
            n = 8 << 20
            rc = rt.cudaMallocManaged(ctypes.byref(p), ctypes.c_size_t(n), ctypes.c_uint(1))
            assert rc == 0, rc
            ctypes.memset(p, 1, n)
            dst = torch.empty(n, dtype=torch.uint8, device="cuda")
            rc = rt.cudaMemcpy(ctypes.c_void_p(dst.data_ptr()), p, ctypes.c_size_t(n), ctypes.c_int(4))
            assert rc == 0, rc
            acc += float(dst.sum().item())
            rt.cudaFree(p)
        if a.mode == "prof_late":
            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            prof.__enter__()
torch.cuda.synchronize()
line = "startup_smoke: mode=%s steps=%d secs=%.1f checksum=%.9e acc=%.9e" % (
    a.mode, steps, time.time() - t0, float(x.double().sum().item()), acc)
if prof is not None:
    prof.__exit__(None, None, None)
    k = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    line += " profiler_kernels=%d" % len(k)
print(line)

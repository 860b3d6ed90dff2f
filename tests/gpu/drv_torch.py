# drv_torch.py: torch.profiler inside a torch job (under nvlprof it must still record its kernels); prints kernel count and a checksum.
import torch
from torch.profiler import profile, ProfilerActivity
torch.manual_seed(0)
x = torch.randn(2048, 2048, device="cuda")
w = torch.randn(2048, 2048, device="cuda")
for _ in range(3):
    y = torch.relu(x @ w)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(20):
        y = torch.relu(x @ w) * 0.5
        x = y / (y.norm() + 1.0)
    torch.cuda.synchronize()
k = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
import collections
names = collections.Counter(e.name[:60] for e in k)
for nm, c in sorted(names.items()):
    print("drv_torch:   %4d %s" % (c, nm))
print("drv_torch: profiler cuda events=%d kernels_named=%d checksum=%.6e" % (
    len(k), len({e.name for e in k}), float(x.double().sum().item())))

"""exit_worker.py: a short life of overhead.py's tiny launch-bound loop (200 elementwise kernels a
step on 256 elements), then a normal exit: what tests/gpu/exit_hunt.sh runs hundreds of times to
catch a process that dies at exit. Prints the steps it made and the result's checksum."""
import os
import time

import torch

loop_s = float(os.environ.get("HUNT_LOOP_S", "4"))
dev = torch.device("cuda")
x0 = torch.ones(256, device=dev)
x = x0.clone()
t_end = time.monotonic() + loop_s
steps = 0
while time.monotonic() < t_end:
    for _ in range(200):
        x = x * 1.0001 + 0.0001
    steps += 1
    if steps % 50 == 0:
        x = x0.clone()
torch.cuda.synchronize()
print("steps=%d sum=%.6f" % (steps, float(x.sum())))

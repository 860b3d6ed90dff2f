export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi topo -m; which nvcc python3; id -u
python3 - <<'P'
import torch, os, glob
print(torch.__version__, torch.cuda.device_count(), torch.cuda.nccl.version())
import torch.utils
for pat in ["/opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libcupti*", "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libnccl*", "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libcudart*", "/usr/lib/x86_64-linux-gnu/libnvidia-ml*", "/usr/local/nvidia/lib64/libnvidia-ml*", "/usr/local/cuda/extras/CUPTI/lib64/*"]:
    print(pat, glob.glob(pat)[:4])
P
cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null; cat /proc/driver/nvidia/params 2>/dev/null | grep -i RmProfilingAdminOnly
( time python3 examples/ddp_train.py --steps 30 ) 2>&1 | tail -5
NCCL_P2P_DISABLE=1 python3 examples/ddp_train.py --steps 30 2>&1 | tail -3

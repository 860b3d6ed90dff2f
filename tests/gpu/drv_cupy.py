# drv_cupy.py: CuPy (static CUDA runtime) managed-memory ping-pong between GPU and CPU; --advise: the same with cudaMemAdvise (preferred location CPU, accessed by the GPU) and prefetches.
# --rt: torch imported first (its libcudart loaded, as in a PyTorch job) and the managed memory
# allocated through the CUDA runtime library's cudaMallocManaged (nvlprof's hook when preloaded),
# CuPy's kernels then working on it: what NVLPROF_CUPTI=lazy sees (CUPTI attaches at the allocation).
# --late-cupy (with --rt): torch's runtime brings CUDA up first and the managed allocation comes before
# CuPy's first call, so CuPy's static runtime first calls cuInit after lazy attached CUPTI (run 16:
# a runtime's first cuInit after that attach hung, where it came inside the allocation).
import ctypes, sys, time
late = "--late-cupy" in sys.argv
if late and "--rt" not in sys.argv:
    sys.argv.append("--rt")
if "--rt" in sys.argv:
    import torch  # noqa: F401  (loads libcudart.so: a CUDA runtime library in the process)
import numpy as np
import cupy as cp

MB = 1 << 20
advise = "--advise" in sys.argv
rounds = 12
size = 128 * MB
if late:
    free, total = torch.cuda.mem_get_info(0)  # torch's runtime up, CuPy's not yet
else:
    dev = cp.cuda.Device(0)
    free, total = cp.cuda.runtime.memGetInfo()
size = min(size, free // 4)  # never ask for more managed memory than the card has free
n = size // 4
if "--rt" in sys.argv:
    rtlib = ctypes.CDLL(None)  # the global scope: nvlprof's cudaMallocManaged when preloaded
    ptr = ctypes.c_void_p()
    assert rtlib.cudaMallocManaged(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_uint(1)) == 0
    if late:
        dev = cp.cuda.Device(0)
        cp.cuda.runtime.memGetInfo()  # CuPy's first call: its runtime's cuInit, after the attach
    mem = cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr.value, size, None), 0)
else:
    mem = cp.cuda.malloc_managed(size)  # cudaMallocManaged inside CuPy's static runtime
a = cp.ndarray((n,), dtype=cp.float32, memptr=mem)
h = np.ctypeslib.as_array((ctypes.c_float * n).from_address(mem.ptr))
rt = cp.cuda.runtime
stream = cp.cuda.Stream.null
def try_call(what, *variants):
    for f in variants:
        try:
            f()
            return True
        except Exception as e:  # CuPy's signatures differ across versions
            err = e
    print("drv_cupy: %s failed: %s" % (what, err), file=sys.stderr)
    return False
if advise:
    # 3 = cudaMemAdviseSetPreferredLocation, 5 = cudaMemAdviseSetAccessedBy, -1 = cudaCpuDeviceId
    try_call("memAdvise preferred=CPU", lambda: rt.memAdvise(mem.ptr, size, 3, -1))
    try_call("memAdvise accessedBy=GPU0", lambda: rt.memAdvise(mem.ptr, size, 5, 0))
h[:] = 1.0
t0 = time.time()
for r in range(rounds):
    if advise:
        try_call("memPrefetchAsync", lambda: rt.memPrefetchAsync(mem.ptr, size, -1, stream.ptr))
    a *= 1.0001  # the GPU touches every page
    a += 1.0
    dev.synchronize()
    h += 1.0  # then the CPU does
print("drv_cupy: mode=%s rounds=%d MiB=%d time=%.3fs checksum=%.6e" % (
    "advise" if advise else "pingpong", rounds, size // MB, time.time() - t0,
    float(np.sum(h, dtype=np.float64))))
del a, h
mem = None

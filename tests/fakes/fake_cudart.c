/* fake_cudart.c: a CPU-only libcudart.so.13 (or .12, FAKE_CUDART_MAJOR=12) with a deterministic device memory model and stream capture, for shim tests. */
#include <errno.h>   /* errno */
#include <pthread.h> /* pthread_mutex_t */
#include <stdint.h>  /* uintptr_t */
#include <stdlib.h>  /* getenv, malloc */
#include <string.h>  /* memcpy */
#include <sys/mman.h> /* mmap */
#include <time.h>     /* nanosleep */

#include <cuda_runtime_api.h>
#include <cupti_driver_cbid.h> /* the driver calls the real runtime makes inside its own */
#include <dlfcn.h>             /* dlsym */

#include "fake.h"

/* The per-thread-default-stream variants are only declared by the header under a macro. */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
				 cudaStream_t s);
#ifndef FAKE_CUDART_MAJOR
#define FAKE_CUDART_MAJOR 13
#endif

#define MAX_DEV 16
static int fake_capture_copy(void *dst, const void *src, size_t n, cudaStream_t st);
#define MAX_MANAGED 4096
#define RET(rc)                                                                                    \
	do {                                                                                       \
		errno = FAKE_ERRNO_SENTINEL;                                                       \
		return (rc);                                                                       \
	} while (0)

static int forced_rc = -1;
static int ndev = 4;
static __thread int cur_dev;

/* Device memory: one lazily mapped arena per device, bump-allocated, never reused (deterministic). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *arena[MAX_DEV];
static size_t arena_used[MAX_DEV];

/* Managed memory: malloc'ed blocks remembered with the device that allocated them. */
static struct {
	char *p;
	size_t n;
	int dev;
} managed[MAX_MANAGED];

/* Peer access enabled from device a to device b. */
static unsigned char peer_on[MAX_DEV][MAX_DEV];

__attribute__((constructor)) static void fake_init(void)
{
	const char *s = getenv("FAKE_CUDA_RC");
	if (s && *s)
		forced_rc = atoi(s);
	s = getenv("FAKE_CUDA_DEVICES");
	if (s && atoi(s) > 0 && atoi(s) <= MAX_DEV)
		ndev = atoi(s);
}

void fake_cuda_set_rc(int rc) { forced_rc = rc; }

/* @return the device whose arena holds p, or -1. */
static int arena_dev(const void *p)
{
	for (int d = 0; d < ndev; d++) {
		char *a = __atomic_load_n(&arena[d], __ATOMIC_ACQUIRE);
		if (a && (const char *)p >= a && (const char *)p < a + FAKE_DEV_SIZE)
			return d;
	}
	return -1;
}

/* @return index into managed[] of the block holding p, or -1 (caller holds mu). */
static int managed_find(const void *p)
{
	for (int i = 0; i < MAX_MANAGED; i++)
		if (managed[i].p && (const char *)p >= managed[i].p &&
		    (const char *)p < managed[i].p + managed[i].n)
			return i;
	return -1;
}

/* Like the real runtime, managed allocation, free and cudaMemcpy end in a driver call: when the
 * fake libcuda is in the process, its driver-API callbacks fire inside the runtime call. */
typedef void (*echo_fn)(unsigned cbid, const char *name, const void *params, int site, int *rc,
                        unsigned long long *corr);
static void echo(unsigned cbid, const char *name, const void *params, int site, int rc,
                 unsigned long long *corr)
{
	static echo_fn f;
	static int looked;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&f, (echo_fn)dlsym(RTLD_DEFAULT, "fake_cuda_drv_echo"),
				 __ATOMIC_RELEASE);
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	echo_fn g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (g)
		g(cbid, name, params, site, &rc, corr);
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
	case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
	default: return "fake cuda error";
	}
}

cudaError_t cudaGetDeviceCount(int *count)
{
	*count = ndev;
	RET(cudaSuccess);
}

/* The profiler API: nothing to start without a profiler; the shim records them as marks. */
cudaError_t cudaProfilerStart(void)
{
	RET(cudaSuccess);
}
cudaError_t cudaProfilerStop(void)
{
	RET(cudaSuccess);
}

cudaError_t cudaGetDevice(int *device)
{
	*device = cur_dev;
	RET(cudaSuccess);
}

cudaError_t cudaSetDevice(int device)
{
	if (device < 0 || device >= ndev)
		RET(cudaErrorInvalidDevice);
	cur_dev = device;
	RET(cudaSuccess);
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
	if (device < 0 || device >= ndev || peer < 0 || peer >= ndev)
		RET(cudaErrorInvalidDevice);
	*can = device != peer;
	RET(cudaSuccess);
}

cudaError_t cudaMalloc(void **p, size_t n)
{
	n = (n + 255) & ~(size_t)255;
	pthread_mutex_lock(&mu);
	if (!arena[cur_dev]) {
		void *a = mmap(NULL, FAKE_DEV_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (a != MAP_FAILED)
			__atomic_store_n(&arena[cur_dev], (char *)a, __ATOMIC_RELEASE);
	}
	cudaError_t rc = cudaErrorMemoryAllocation;
	if (arena[cur_dev] && arena_used[cur_dev] + n <= FAKE_DEV_SIZE) {
		*p = arena[cur_dev] + arena_used[cur_dev];
		arena_used[cur_dev] += n;
		rc = cudaSuccess;
	}
	pthread_mutex_unlock(&mu);
	RET(rc);
}

static _Atomic int pointer_queries;
/* How many times the program (or the shim) asked the runtime about a pointer. */
int fake_cuda_pointer_queries(void)
{
	return pointer_queries;
}
static void pointer_info(struct cudaPointerAttributes *a, const void *p);
/* The same answer for the fake libcuda's cuPointerGetAttributes, without counting a runtime call. */
void fake_cuda_pointer_info(const void *p, int *type, int *device)
{
	struct cudaPointerAttributes a;
	pointer_info(&a, p);
	*type = (int)a.type;
	*device = a.device;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	pointer_queries++;
	pointer_info(a, p);
	RET(cudaSuccess);
}
static void pointer_info(struct cudaPointerAttributes *a, const void *p)
{
	memset(a, 0, sizeof *a);
	int d = arena_dev(p);
	if (d >= 0) {
		a->type = cudaMemoryTypeDevice;
		a->device = d;
		a->devicePointer = (void *)p;
		return;
	}
	pthread_mutex_lock(&mu);
	int i = managed_find(p);
	if (i >= 0) {
		a->type = cudaMemoryTypeManaged;
		a->device = managed[i].dev;
		a->devicePointer = a->hostPointer = (void *)p;
	} else {
		a->type = cudaMemoryTypeUnregistered;
		a->device = -2; /* what the real runtime reports for plain host memory */
		a->hostPointer = (void *)p;
	}
	pthread_mutex_unlock(&mu);
}

/* Every fake copy really copies: device arenas and managed blocks are host memory here. */
static cudaError_t do_copy(void *dst, const void *src, size_t n)
{
	if (forced_rc >= 0)
		return (cudaError_t)forced_rc;
	if (n && (!dst || !src))
		return cudaErrorInvalidValue;
	memmove(dst, src, n);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	struct {
		const void *dst, *src;
		size_t n;
	} prm = {dst, src, n};
	unsigned cbid = kind == cudaMemcpyHostToDevice ? CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2
			: kind == cudaMemcpyDeviceToHost ? CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2
			: kind == cudaMemcpyDeviceToDevice ? CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2
							   : CUPTI_DRIVER_TRACE_CBID_cuMemcpy;
	unsigned long long corr = 0;
	echo(cbid, "cuMemcpy", &prm, 0, 0, &corr);
	const char *slow = getenv("FAKE_CUDART_COPY_MS"); /* a synchronous copy that takes this long */
	if (slow && atol(slow) > 0) {
		struct timespec ts = {atol(slow) / 1000, atol(slow) % 1000 * 1000000L};
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	cudaError_t rc = do_copy(dst, src, n);
	echo(cbid, "cuMemcpy", &prm, 1, (int)rc, &corr);
	RET(rc);
}
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	(void)kind;
	RET(do_copy(dst, src, n));
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
			    cudaStream_t s)
{
	(void)kind;
	if (fake_capture_copy(dst, src, n, s))
		RET(cudaSuccess);
	RET(do_copy(dst, src, n));
}
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
				 cudaStream_t s)
{
	(void)kind, (void)s;
	RET(do_copy(dst, src, n));
}
/* Like the real 13.0 runtime, there is no cudaMemcpyPeer_ptds / cudaMemcpyPeerAsync_ptsz. */
cudaError_t cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n)
{
	if (forced_rc < 0 && (dd < 0 || dd >= ndev || sd < 0 || sd >= ndev))
		RET(cudaErrorInvalidDevice);
	RET(do_copy(dst, src, n));
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n,
				cudaStream_t s)
{
	(void)s;
	if (forced_rc < 0 && (dd < 0 || dd >= ndev || sd < 0 || sd >= ndev))
		RET(cudaErrorInvalidDevice);
	RET(do_copy(dst, src, n));
}

/* Managed allocations made while the fake libcupti (when loaded) had no activity buffers registered:
 * real CUPTI counts none of their migrations, even when it attaches later (run 15). */
static int managed_unattached;
int fake_cudart_managed_unattached(void)
{
	return __atomic_load_n(&managed_unattached, __ATOMIC_RELAXED);
}
/* FAKE_CUDART_INIT_ON_ALLOC=1: this runtime comes up (cuInit: the driver and its injection, where
 * nothing brought CUDA up before) at its first cudaMallocManaged or cudaFree, as the real runtime
 * initializes itself at its first call, before doing what was asked */
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static void rt_init(void)
{
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "cuInit");
	if (init)
		init(0);
}
static void rt_up(void)
{
	if (getenv("FAKE_CUDART_INIT_ON_ALLOC"))
		pthread_once(&rt_once, rt_init);
}
cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags)
{
	(void)flags;
	rt_up();
	const char *slow = getenv("FAKE_CUDART_MANAGED_MS"); /* an allocation that takes this long */
	if (slow && atol(slow) > 0) {
		struct timespec ts = {atol(slow) / 1000, atol(slow) % 1000 * 1000000L};
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	void *(*req)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "fake_cupti_request_callback");
	if (req && !req())
		__atomic_fetch_add(&managed_unattached, 1, __ATOMIC_RELAXED);
	if (forced_rc >= 0)
		RET((cudaError_t)forced_rc);
	if (!n)
		RET(cudaErrorInvalidValue);
	char *m = malloc(n);
	if (!m)
		RET(cudaErrorMemoryAllocation);
	cudaError_t rc = cudaErrorMemoryAllocation;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_MANAGED; i++)
		if (!managed[i].p) {
			managed[i].p = m;
			managed[i].n = n;
			managed[i].dev = cur_dev;
			rc = cudaSuccess;
			break;
		}
	pthread_mutex_unlock(&mu);
	struct {
		void **p;
		size_t n;
		unsigned flags;
	} prm = {p, n, flags};
	unsigned long long corr = 0;
	echo(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, "cuMemAllocManaged", &prm, 0, 0, &corr);
	if (rc != cudaSuccess)
		free(m);
	else
		*p = m;
	echo(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, "cuMemAllocManaged", &prm, 1, (int)rc, &corr);
	RET(rc);
}

cudaError_t cudaFree(void *p)
{
	rt_up();
	if (forced_rc >= 0)
		RET((cudaError_t)forced_rc);
	if (!p || arena_dev(p) >= 0)
		RET(cudaSuccess); /* device arenas are bump-allocated: nothing to give back */
	unsigned long long corr = 0;
	echo(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &p, 0, 0, &corr);
	pthread_mutex_lock(&mu);
	int i = managed_find(p);
	char *m = NULL;
	if (i >= 0 && managed[i].p == p) {
		m = managed[i].p;
		managed[i].p = NULL;
	}
	pthread_mutex_unlock(&mu);
	free(m);
	echo(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &p, 1, m ? 0 : 1, &corr);
	RET(m ? cudaSuccess : cudaErrorInvalidValue);
}

static cudaError_t check_managed_range(const void *p, size_t n, struct cudaMemLocation loc)
{
	if (forced_rc >= 0)
		return (cudaError_t)forced_rc;
	if (loc.type == cudaMemLocationTypeDevice && (loc.id < 0 || loc.id >= ndev))
		return cudaErrorInvalidDevice;
	pthread_mutex_lock(&mu);
	int i = managed_find(p);
	int ok = i >= 0 && (const char *)p + n <= managed[i].p + managed[i].n;
	pthread_mutex_unlock(&mu);
	return ok ? cudaSuccess : cudaErrorInvalidValue;
}

/* The prefetch/advice signatures of the runtime this fake stands for: 12's plain names take an
 * int device (its _v2 names take 13's cudaMemLocation). Declared here, not from the 13 header. */
#define LOC_PREFETCH(name)                                                                         \
	cudaError_t name(const void *p, size_t n, struct cudaMemLocation loc, unsigned flags,      \
			 cudaStream_t s) __asm__(#name);                                           \
	cudaError_t name(const void *p, size_t n, struct cudaMemLocation loc, unsigned flags,      \
			 cudaStream_t s)                                                           \
	{                                                                                          \
		(void)flags, (void)s;                                                              \
		last_prefetch = (struct fake_prefetch){loc.type == cudaMemLocationTypeDevice ? loc.id \
											     : -1, \
						       flags, s};                          \
		RET(check_managed_range(p, n, loc));                                               \
	}
#define DEV_PREFETCH(name)                                                                         \
	cudaError_t fake12_##name(const void *p, size_t n, int dev, cudaStream_t s) __asm__(#name); \
	cudaError_t fake12_##name(const void *p, size_t n, int dev, cudaStream_t s)                \
	{                                                                                          \
		struct cudaMemLocation loc = {dev < 0 ? cudaMemLocationTypeHost                    \
						      : cudaMemLocationTypeDevice,         \
					      dev};                                                \
		last_prefetch = (struct fake_prefetch){dev, 0, s};                                 \
		RET(check_managed_range(p, n, loc));                                               \
	}
/* What the last prefetch received, so a test can prove the shim forwarded every argument. */
static struct fake_prefetch {
	int dev;
	unsigned flags;
	cudaStream_t s;
} last_prefetch;
void fake_cuda_last_prefetch(int *dev, unsigned *flags, void **s)
{
	*dev = last_prefetch.dev, *flags = last_prefetch.flags, *s = last_prefetch.s;
}
#if FAKE_CUDART_MAJOR == 12
DEV_PREFETCH(cudaMemPrefetchAsync)
DEV_PREFETCH(cudaMemPrefetchAsync_ptsz)
LOC_PREFETCH(cudaMemPrefetchAsync_v2)
cudaError_t fake12_cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise advice, int dev)
    __asm__("cudaMemAdvise");
cudaError_t fake12_cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise advice, int dev)
{
	(void)advice;
	struct cudaMemLocation loc = {dev < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice,
				      dev};
	RET(check_managed_range(p, n, loc));
}
cudaError_t cudaMemAdvise_v2(const void *p, size_t n, enum cudaMemoryAdvise advice,
			     struct cudaMemLocation loc);
cudaError_t cudaMemAdvise_v2(const void *p, size_t n, enum cudaMemoryAdvise advice,
			     struct cudaMemLocation loc)
#else
LOC_PREFETCH(cudaMemPrefetchAsync)
LOC_PREFETCH(cudaMemPrefetchAsync_ptsz)
cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise advice,
			  struct cudaMemLocation loc)
#endif
{
	(void)advice;
	RET(check_managed_range(p, n, loc));
}

/* ---- stream capture and graphs: a capturing stream records the copies issued on it; a graph
 * launch replays them (so a test sees data move once per replay). ---- */
#define MAX_CAPTURE 64
struct fake_op {
	void *dst;
	const void *src;
	size_t n;
};
struct fake_graph {
	unsigned long long id;
	int nops, nhost;
	struct fake_op op[MAX_CAPTURE];
	struct {
		cudaHostFn_t fn;
		void *arg;
	} host[MAX_CAPTURE];
};
static struct {
	cudaStream_t st;
	unsigned long long id;
	struct fake_graph *g;
} capturing[8];
static unsigned long long capture_ids;
static int launches;

static int capture_slot(cudaStream_t st)
{
	for (int i = 0; i < 8; i++)
		if (st && capturing[i].st == st)
			return i;
	return -1;
}

/* A copy issued on a capturing stream: recorded, not run. @return 1 when captured */
static int fake_capture_copy(void *dst, const void *src, size_t n, cudaStream_t st)
{
	pthread_mutex_lock(&mu);
	int i = capture_slot(st);
	if (i >= 0 && capturing[i].g->nops < MAX_CAPTURE)
		capturing[i].g->op[capturing[i].g->nops++] = (struct fake_op){dst, src, n};
	pthread_mutex_unlock(&mu);
	return i >= 0;
}

/* A host function: run now, or at each replay when st is capturing (NCCL reports a captured
 * collective's profiler events this way). */
cudaError_t cudaLaunchHostFunc(cudaStream_t st, cudaHostFn_t fn, void *arg)
{
	pthread_mutex_lock(&mu);
	int i = capture_slot(st);
	int ok = i < 0 || capturing[i].g->nhost < MAX_CAPTURE;
	if (i >= 0 && ok) {
		struct fake_graph *g = capturing[i].g;
		g->host[g->nhost].fn = fn, g->host[g->nhost].arg = arg, g->nhost++;
	}
	pthread_mutex_unlock(&mu);
	if (i < 0)
		fn(arg);
	RET(ok ? cudaSuccess : cudaErrorUnknown);
}

int fake_cuda_graph_launches(void)
{
	return __atomic_load_n(&launches, __ATOMIC_RELAXED);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t st, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	pthread_mutex_lock(&mu);
	int i = capture_slot(NULL);
	for (int j = 0; j < 8 && i < 0; j++)
		if (!capturing[j].st)
			i = j;
	cudaError_t rc = cudaErrorUnknown;
	if (st && capture_slot(st) < 0 && i >= 0 && (capturing[i].g = calloc(1, sizeof(struct fake_graph)))) {
		capturing[i].st = st;
		capturing[i].id = capturing[i].g->id = ++capture_ids;
		rc = cudaSuccess;
	}
	pthread_mutex_unlock(&mu);
	RET(rc);
}

#if FAKE_CUDART_MAJOR == 12
cudaError_t fake12_cudaStreamGetCaptureInfo(cudaStream_t st, enum cudaStreamCaptureStatus *status,
					    unsigned long long *id) __asm__("cudaStreamGetCaptureInfo");
cudaError_t fake12_cudaStreamGetCaptureInfo(cudaStream_t st, enum cudaStreamCaptureStatus *status,
					    unsigned long long *id)
#else
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t st, enum cudaStreamCaptureStatus *status,
				     unsigned long long *id, cudaGraph_t *g,
				     const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
				     size_t *ndeps)
#endif
{
#if FAKE_CUDART_MAJOR != 12
	if (g || deps || edges || ndeps)
		RET(cudaErrorNotSupported); /* the shim asks for status and id only */
#endif
	if ((uintptr_t)st <= 1)
		RET(cudaErrorStreamCaptureImplicit); /* what the legacy stream answers during a capture */
	pthread_mutex_lock(&mu);
	int i = capture_slot(st);
	*status = i >= 0 ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	if (id)
		*id = i >= 0 ? capturing[i].id : 0;
	pthread_mutex_unlock(&mu);
	RET(cudaSuccess);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t st, enum cudaStreamCaptureStatus *status)
{
	pthread_mutex_lock(&mu);
	*status = capture_slot(st) >= 0 ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	pthread_mutex_unlock(&mu);
	RET(cudaSuccess);
}

cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g)
{
	pthread_mutex_lock(&mu);
	int i = capture_slot(st);
	if (i >= 0) {
		*g = (cudaGraph_t)(void *)capturing[i].g;
		capturing[i].st = NULL;
	}
	pthread_mutex_unlock(&mu);
	RET(i >= 0 ? cudaSuccess : cudaErrorIllegalState);
}

/* An exec is its graph (the fake keeps no separate state). */
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags)
{
	(void)flags;
	*e = (cudaGraphExec_t)(void *)g;
	RET(g ? cudaSuccess : cudaErrorInvalidValue);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *e, cudaGraph_t g,
					  unsigned long long flags)
{
	return cudaGraphInstantiate(e, g, flags);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t st)
{
	(void)st;
	struct fake_graph *g = (struct fake_graph *)(void *)e;
	if (!g)
		RET(cudaErrorInvalidValue);
	for (int i = 0; i < g->nops; i++)
		memmove(g->op[i].dst, g->op[i].src, g->op[i].n);
	for (int i = 0; i < g->nhost; i++)
		g->host[i].fn(g->host[i].arg);
	__atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
	RET(cudaSuccess);
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
	if (forced_rc >= 0)
		RET((cudaError_t)forced_rc);
	if (peer < 0 || peer >= ndev || peer == cur_dev || flags)
		RET(cudaErrorInvalidDevice);
	int was = __atomic_exchange_n(&peer_on[cur_dev][peer], 1, __ATOMIC_ACQ_REL);
	RET(was ? cudaErrorPeerAccessAlreadyEnabled : cudaSuccess);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
	if (forced_rc >= 0)
		RET((cudaError_t)forced_rc);
	if (peer < 0 || peer >= ndev)
		RET(cudaErrorInvalidDevice);
	int was = __atomic_exchange_n(&peer_on[cur_dev][peer], 0, __ATOMIC_ACQ_REL);
	RET(was ? cudaSuccess : cudaErrorPeerAccessNotEnabled);
}

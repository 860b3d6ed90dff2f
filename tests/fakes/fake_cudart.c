/* fake_cudart.c: a CPU-only libcudart.so.13 with a deterministic device memory model, for shim tests. */
#include <errno.h>   /* errno */
#include <pthread.h> /* pthread_mutex_t */
#include <stdint.h>  /* uintptr_t */
#include <stdlib.h>  /* getenv, malloc */
#include <string.h>  /* memcpy */
#include <sys/mman.h> /* mmap */

#include <cuda_runtime_api.h>

#include "fake.h"

/* The per-thread-default-stream variants are only declared by the header under a macro. */
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
				 cudaStream_t s);
cudaError_t cudaMemPrefetchAsync_ptsz(const void *p, size_t n, struct cudaMemLocation loc,
				      unsigned flags, cudaStream_t s);

#define MAX_DEV 16
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
	(void)kind;
	RET(do_copy(dst, src, n));
}
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	(void)kind;
	RET(do_copy(dst, src, n));
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
			    cudaStream_t s)
{
	(void)kind, (void)s;
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

cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags)
{
	(void)flags;
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
	if (rc != cudaSuccess)
		free(m);
	else
		*p = m;
	RET(rc);
}

cudaError_t cudaFree(void *p)
{
	if (forced_rc >= 0)
		RET((cudaError_t)forced_rc);
	if (!p || arena_dev(p) >= 0)
		RET(cudaSuccess); /* device arenas are bump-allocated: nothing to give back */
	pthread_mutex_lock(&mu);
	int i = managed_find(p);
	char *m = NULL;
	if (i >= 0 && managed[i].p == p) {
		m = managed[i].p;
		managed[i].p = NULL;
	}
	pthread_mutex_unlock(&mu);
	free(m);
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

cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation loc,
				 unsigned flags, cudaStream_t s)
{
	(void)flags, (void)s;
	RET(check_managed_range(p, n, loc));
}
cudaError_t cudaMemPrefetchAsync_ptsz(const void *p, size_t n, struct cudaMemLocation loc,
				      unsigned flags, cudaStream_t s)
{
	(void)flags, (void)s;
	RET(check_managed_range(p, n, loc));
}
cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise advice,
			  struct cudaMemLocation loc)
{
	(void)advice;
	RET(check_managed_range(p, n, loc));
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

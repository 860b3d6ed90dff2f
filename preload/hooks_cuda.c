/* hooks_cuda.c: wrappers of the CUDA runtime's copies, managed memory, peer access and graph calls. */
#include <errno.h>   /* errno, saved around recording */
#include <pthread.h> /* the managed range table's mutex */
#include <stdint.h>  /* uintptr_t */
#include <stdlib.h>  /* realloc */
#include <string.h>  /* memcpy */

#include <cuda_runtime_api.h>

#include "nvlp_cost.h"
#include "hooks_cuda.h"
#include "nvlp_cupti.h"
#include "nvlp_pystacks.h"
#include "nvlp_rt.h"
#include "nvlp_stacks.h"
#include "resolve.h"

/* Per-thread-default-stream variants: the header declares them only under a macro, and the 13.0
 * runtime has no cudaMemcpyPeer_ptds / cudaMemcpyPeerAsync_ptsz (their wrappers then never run). */
cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemcpyPeer_ptds(void *, int, const void *, int, size_t);
cudaError_t cudaMemcpyPeerAsync_ptsz(void *, int, const void *, int, size_t, cudaStream_t);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t, enum cudaStreamCaptureMode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t, cudaGraph_t *);
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *, cudaGraph_t,
						cudaGraphInstantiateParams *);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t, cudaStream_t);

/*
 * The one list: X(ID, FN, name, params, args). ID is this file's slot in the resolver table, FN the
 * nvlp_cuda_fn the records carry (the _ptsz prefetch has no value of its own). H rows are helpers
 * the shim calls but does not wrap. Copies are generated whole from COPIES below.
 */
#define CUDA_OTHERS(X)                                                                             \
	X(MALLOC_MANAGED, MALLOC_MANAGED, cudaMallocManaged, (void **p, size_t n, unsigned flags), \
	  (p, n, flags))                                                                           \
	X(FREE, FREE, cudaFree, (void *p), (p))                                                    \
	X(MEM_PREFETCH_ASYNC, MEM_PREFETCH_ASYNC, cudaMemPrefetchAsync, RAW_PREFETCH, RAW_ARGS)     \
	X(MEM_PREFETCH_ASYNC_PTSZ, MEM_PREFETCH_ASYNC, cudaMemPrefetchAsync_ptsz, RAW_PREFETCH,    \
	  RAW_ARGS)                                                                                \
	X(MEM_PREFETCH_ASYNC_V2, MEM_PREFETCH_ASYNC, cudaMemPrefetchAsync_v2, RAW_PREFETCH, RAW_ARGS) \
	X(MEM_PREFETCH_ASYNC_V2_PTSZ, MEM_PREFETCH_ASYNC, cudaMemPrefetchAsync_v2_ptsz,            \
	  RAW_PREFETCH, RAW_ARGS)                                                                  \
	X(MEM_ADVISE, MEM_ADVISE, cudaMemAdvise, RAW_ADVISE, RAW_ARGS4)                            \
	X(MEM_ADVISE_V2, MEM_ADVISE, cudaMemAdvise_v2, RAW_ADVISE, RAW_ARGS4)                      \
	X(ENABLE_PEER_ACCESS, ENABLE_PEER_ACCESS, cudaDeviceEnablePeerAccess,                      \
	  (int peer, unsigned flags), (peer, flags))                                               \
	X(DISABLE_PEER_ACCESS, DISABLE_PEER_ACCESS, cudaDeviceDisablePeerAccess, (int peer), (peer))
/*
 * Prefetch and advice changed signature between runtimes: 12's cudaMemPrefetchAsync(p, n, int dev,
 * stream) and cudaMemAdvise(p, n, advice, int dev) became 13's (p, n, cudaMemLocation, flags,
 * stream) and (p, n, advice, cudaMemLocation) (12's _v2 names). On x86-64 both pass every argument
 * in the same integer registers (a cudaMemLocation is one 8-byte word: type low, id high), so the
 * wrappers take raw words, forward them unchanged, and read them by the bound runtime's major.
 */
#define RAW_PREFETCH (const void *p, size_t n, uint64_t a2, uint64_t a3, uint64_t a4)
#define RAW_ARGS (p, n, a2, a3, a4)
#define RAW_ADVISE (const void *p, size_t n, uint64_t a2, uint64_t a3)
#define RAW_ARGS4 (p, n, a2, a3)
/* CUDA graphs: G(ID, name, params, args); bodies below. */
#define CUDA_GRAPHS(G)                                                                             \
	G(BEGIN_CAPTURE, cudaStreamBeginCapture, (cudaStream_t st, enum cudaStreamCaptureMode m),  \
	  (st, m))                                                                                 \
	G(BEGIN_CAPTURE_PTSZ, cudaStreamBeginCapture_ptsz,                                         \
	  (cudaStream_t st, enum cudaStreamCaptureMode m), (st, m))                                \
	G(END_CAPTURE, cudaStreamEndCapture, (cudaStream_t st, cudaGraph_t * g), (st, g))         \
	G(END_CAPTURE_PTSZ, cudaStreamEndCapture_ptsz, (cudaStream_t st, cudaGraph_t * g), (st, g)) \
	G(INSTANTIATE, cudaGraphInstantiate,                                                       \
	  (cudaGraphExec_t * e, cudaGraph_t g, unsigned long long flags), (e, g, flags))            \
	G(INSTANTIATE_WITH_FLAGS, cudaGraphInstantiateWithFlags,                                   \
	  (cudaGraphExec_t * e, cudaGraph_t g, unsigned long long flags), (e, g, flags))            \
	G(INSTANTIATE_WITH_PARAMS, cudaGraphInstantiateWithParams,                                 \
	  (cudaGraphExec_t * e, cudaGraph_t g, cudaGraphInstantiateParams * prm), (e, g, prm))      \
	G(INSTANTIATE_WITH_PARAMS_PTSZ, cudaGraphInstantiateWithParams_ptsz,                       \
	  (cudaGraphExec_t * e, cudaGraph_t g, cudaGraphInstantiateParams * prm), (e, g, prm))      \
	G(GRAPH_LAUNCH, cudaGraphLaunch, (cudaGraphExec_t e, cudaStream_t st), (e, st))            \
	G(GRAPH_LAUNCH_PTSZ, cudaGraphLaunch_ptsz, (cudaGraphExec_t e, cudaStream_t st), (e, st))
#define CUDA_HELPERS(H)                                                                            \
	H(GET_DEVICE, cudaGetDevice, (int *dev))                                                   \
	H(POINTER_GET_ATTRIBUTES, cudaPointerGetAttributes,                                        \
	  (struct cudaPointerAttributes * a, const void *p))                                       \
	H(GET_CAPTURE_INFO, cudaStreamGetCaptureInfo, CAPTURE_INFO_PARAMS)
/* 12's cudaStreamGetCaptureInfo takes (stream, status, id); 13's adds four optional outputs, which
 * are passed as NULL: one call works with both (extra register arguments are ignored). */
#define CAPTURE_INFO_PARAMS                                                                        \
	(cudaStream_t st, enum cudaStreamCaptureStatus * status, unsigned long long *id, void *g,  \
	 void *deps, void *edges, void *ndeps)

/* Copies: C(ID, name, params, args, stream, peer). Peer copies name their devices sd and dd;
 * the others their kind kind. All name dst, src, n. */
#define COPIES(C)                                                                                  \
	C(MEMCPY, cudaMemcpy, (void *dst, const void *src, size_t n, enum cudaMemcpyKind kind),    \
	  (dst, src, n, kind), 0, 0)                                                               \
	C(MEMCPY_PTDS, cudaMemcpy_ptds,                                                            \
	  (void *dst, const void *src, size_t n, enum cudaMemcpyKind kind), (dst, src, n, kind), 0, 0) \
	C(MEMCPY_ASYNC, cudaMemcpyAsync,                                                           \
	  (void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t st),       \
	  (dst, src, n, kind, st), st, 0)                                                          \
	C(MEMCPY_ASYNC_PTSZ, cudaMemcpyAsync_ptsz,                                                 \
	  (void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t st),       \
	  (dst, src, n, kind, st), st, 0)                                                          \
	C(MEMCPY_PEER, cudaMemcpyPeer, (void *dst, int dd, const void *src, int sd, size_t n),     \
	  (dst, dd, src, sd, n), 0, 1)                                                             \
	C(MEMCPY_PEER_PTDS, cudaMemcpyPeer_ptds,                                                   \
	  (void *dst, int dd, const void *src, int sd, size_t n), (dst, dd, src, sd, n), 0, 1)     \
	C(MEMCPY_PEER_ASYNC, cudaMemcpyPeerAsync,                                                  \
	  (void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t st),                 \
	  (dst, dd, src, sd, n, st), st, 1)                                                        \
	C(MEMCPY_PEER_ASYNC_PTSZ, cudaMemcpyPeerAsync_ptsz,                                        \
	  (void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t st),                 \
	  (dst, dd, src, sd, n, st), st, 1)

enum slot {
#define SLOT_X(ID, ...) S_##ID,
	CUDA_OTHERS(SLOT_X) COPIES(SLOT_X) CUDA_HELPERS(SLOT_X) CUDA_GRAPHS(SLOT_X)
#undef SLOT_X
	S_COUNT
};

#define TYPEDEF_X(ID, FN, name, params, args) typedef cudaError_t (*real_##name##_t) params;
#define TYPEDEF_C(ID, name, params, ...) typedef cudaError_t (*real_##name##_t) params;
CUDA_OTHERS(TYPEDEF_X)
COPIES(TYPEDEF_C)
CUDA_HELPERS(TYPEDEF_C)
CUDA_GRAPHS(TYPEDEF_C)

/* Ask for the versioned symbol first: the real runtime exports name@libcudart.so.N, N that of the
 * runtime the process loaded (12 or 13). */
#define SYM(ID, name) [S_##ID] = {#name, NULL, NVLP_VERSION_CUDART, NULL},
#define SYM_X(ID, FN, name, ...) SYM(ID, name)
#define SYM_C(ID, name, ...) SYM(ID, name)
static struct nvlp_sym syms[S_COUNT] = {CUDA_OTHERS(SYM_X) COPIES(SYM_C) CUDA_HELPERS(SYM_C)
						CUDA_GRAPHS(SYM_C)};

#define REAL(ID, name) ((real_##name##_t)nvlp_real(&syms[S_##ID]))

/* Wrapper skeleton, as for NCCL: a missing real function fails the call, never crashes it. */
#define ENTER(ID, name, args)                                                                      \
	real_##name##_t real = REAL(ID, name);                                                     \
	if (NVLP_UNLIKELY(!real))                                                                  \
		return cudaErrorSharedObjectSymbolNotFound;                                        \
	struct nvlp_tls *tls = nvlp_recording_tls();                                               \
	if (!tls)                                                                                  \
		return real args;                                                                  \
	uint64_t cost0 = nvlp_cost_begin();
/* The real call, timed (t0, dur, rc); LIVE (evaluated after t0 is taken: a slot from live_call, or
 * NULL) publishes it as in progress until it returns. CALL: none published. */
#define CALL_LIVE(args, LIVE)                                                                      \
	tls->in_hook = 1;                                                                          \
	nvlp_py_enter(tls);                                                                        \
	uint64_t t0 = nvlp_now();                                                                  \
	struct nvlp_live *live_call_ = (LIVE);                                                     \
	cudaError_t rc = real args;                                                                \
	uint64_t dur = nvlp_elapsed(t0, nvlp_now());                                               \
	nvlp_live_end(live_call_);                                                                 \
	int saved_errno = errno;
#define CALL(args) CALL_LIVE(args, NULL)
#define LEAVE                                                                                      \
	nvlp_py_leave(tls);                                                                        \
	tls->in_hook = 0;                                                                          \
	nvlp_cost_end(cost0, dur);                                                                 \
	errno = saved_errno;                                                                       \
	return rc;

static int64_t current_device(void)
{
	int d = -1;
	real_cudaGetDevice_t f = REAL(GET_DEVICE, cudaGetDevice);
	return f && f(&d) == cudaSuccess ? d : -1;
}

/* ---- managed allocations: a sorted range table; copies check an atomic count first ------------ */

struct range {
	uintptr_t lo, hi;
};
static struct {
	pthread_mutex_t mu;
	struct range *at;
	size_t n, cap;
	atomic_size_t live; /* == n, readable without the mutex */
} managed_table = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Index of the first range with hi > p (caller holds the mutex). */
static size_t range_pos(uintptr_t p)
{
	size_t lo = 0, hi = managed_table.n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (managed_table.at[mid].hi <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void managed_add(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	pthread_mutex_lock(&managed_table.mu);
	if (managed_table.n == managed_table.cap) {
		size_t cap = managed_table.cap ? 2 * managed_table.cap : 256;
		struct range *r = realloc(managed_table.at, cap * sizeof *r);
		if (!r) {
			pthread_mutex_unlock(&managed_table.mu);
			return; /* copies touching this block will not be seen as managed */
		}
		managed_table.at = r;
		managed_table.cap = cap;
	}
	size_t i = range_pos(a);
	for (size_t j = managed_table.n; j > i; j--)
		managed_table.at[j] = managed_table.at[j - 1];
	managed_table.at[i] = (struct range){a, a + (n ? n : 1)};
	managed_table.n++;
	atomic_store(&managed_table.live, managed_table.n);
	pthread_mutex_unlock(&managed_table.mu);
}

/* Forget the block starting exactly at p. @return its size, 0 if p starts no managed block. */
static size_t managed_remove(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	size_t n = 0;
	pthread_mutex_lock(&managed_table.mu);
	size_t i = range_pos(a);
	if (i < managed_table.n && managed_table.at[i].lo == a) {
		n = managed_table.at[i].hi - managed_table.at[i].lo;
		for (; i + 1 < managed_table.n; i++)
			managed_table.at[i] = managed_table.at[i + 1];
		managed_table.n--;
		atomic_store(&managed_table.live, managed_table.n);
	}
	pthread_mutex_unlock(&managed_table.mu);
	return n;
}

static int is_managed(const void *p)
{
	if (!atomic_load_explicit(&managed_table.live, memory_order_relaxed))
		return 0;
	uintptr_t a = (uintptr_t)p;
	pthread_mutex_lock(&managed_table.mu);
	size_t i = range_pos(a);
	int in = i < managed_table.n && managed_table.at[i].lo <= a;
	pthread_mutex_unlock(&managed_table.mu);
	return in;
}

/* ---- peer access seen enabled through us ------------------------------------------------------ */

/* NCCL enables peer access through its own static runtime, which we never see: a copy between
 * devices that NCCL connected can show peer_enabled 0 while the hardware path is open. */
#define MAX_DEV 64
static _Atomic unsigned char peer_on[MAX_DEV][MAX_DEV];

static int64_t peer_state(int64_t sd, int64_t dd)
{
	if (sd < 0 || dd < 0 || sd == dd)
		return -1;
	if (sd >= MAX_DEV || dd >= MAX_DEV)
		return 0;
	return atomic_load(&peer_on[sd][dd]) || atomic_load(&peer_on[dd][sd]);
}

/* ---- copies ----------------------------------------------------------------------------------- */

struct plan {
	int64_t sd, dd;
	unsigned managed; /* bit 0 src, bit 1 dst */
};

/* Device of p (-1 host), and whether it is managed: from the driver, else the runtime; -1 if
 * neither can tell. */
static int64_t pointer_device(const void *p, unsigned *managed_bit, unsigned bit)
{
	int dev, managed;
	if (nvlp_cupti_pointer_info(p, &dev, &managed) == 0) {
		if (managed)
			*managed_bit |= bit;
		return dev;
	}
	struct cudaPointerAttributes a;
	real_cudaPointerGetAttributes_t f = REAL(POINTER_GET_ATTRIBUTES, cudaPointerGetAttributes);
	if (!f || f(&a, p) != cudaSuccess)
		return -1;
	if (a.type == cudaMemoryTypeManaged)
		*managed_bit |= bit;
	return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

/*
 * Decide cheaply whether a copy is worth a record: it crosses devices or touches managed memory.
 * Host<->device copies cost one atomic load unless managed memory exists. Device-to-device and
 * default-kind copies are rare in host terms, so they may ask the runtime about both pointers
 * (before the copy, so that a failing query cannot be the last error the program sees after it).
 */
static int plan_copy(struct plan *pl, const void *dst, const void *src, enum cudaMemcpyKind kind)
{
	pl->managed = 0;
	switch (kind) {
	case cudaMemcpyHostToHost:
		return 0;
	case cudaMemcpyHostToDevice:
	case cudaMemcpyDeviceToHost:
		if (!atomic_load_explicit(&managed_table.live, memory_order_relaxed))
			return 0;
		pl->managed = (unsigned)is_managed(src) | (unsigned)is_managed(dst) << 1;
		if (!pl->managed)
			return 0;
		pl->sd = kind == cudaMemcpyHostToDevice ? -1 : current_device();
		pl->dd = kind == cudaMemcpyHostToDevice ? current_device() : -1;
		return 1;
	default:
		pl->sd = pointer_device(src, &pl->managed, 1);
		pl->dd = pointer_device(dst, &pl->managed, 2);
		return pl->managed || (pl->sd >= 0 && pl->dd >= 0 && pl->sd != pl->dd);
	}
}

/* A runtime call in progress (INFLIGHT of kind COPY, "a CUDA runtime call, fn names it", which
 * every analyzer reads): a copy (synchronous ones are where a rank waits for its GPU; call_id 0
 * for one that writes no record, host <-> device) or a managed allocation (where lazy's CUPTI
 * attach comes: run 16's hang sat in one). reg 0: not for a thread that has recorded nothing yet
 * (no trace is opened for such a copy). */
static inline struct nvlp_live *live_call(struct nvlp_tls *tls, unsigned fn, uint64_t t0,
					  uint64_t call_id, size_t n, void *st, int64_t dev,
					  int reg)
{
	struct nvlp_live *l = nvlp_live_begin(tls, reg);
	if (!l)
		return NULL;
	NVLP_LIVE_SET(l, kind, NVLP_K_COPY);
	NVLP_LIVE_SET(l, fn, fn);
	NVLP_LIVE_SET(l, t_enter, t0);
	NVLP_LIVE_SET(l, device, dev);
	NVLP_LIVE_SET(l, stream, (uintptr_t)st);
	NVLP_LIVE_SET(l, comm, 0);
	NVLP_LIVE_SET(l, seq, 0);
	NVLP_LIVE_SET(l, count, 0);
	NVLP_LIVE_SET(l, dtype, 0);
	NVLP_LIVE_SET(l, op, 0);
	NVLP_LIVE_SET(l, peer, 0);
	NVLP_LIVE_SET(l, rank, 0);
	NVLP_LIVE_SET(l, nranks, 0);
	NVLP_LIVE_SET(l, call_id, call_id);
	NVLP_LIVE_SET(l, bytes, n);
	nvlp_live_publish(l);
	return l;
}

static void emit_copy(struct nvlp_tls *tls, unsigned fn, uint64_t t0, uint64_t dur,
		      const struct plan *pl, const void *dst, const void *src, size_t n,
		      unsigned kind, void *st, cudaError_t rc, int64_t dev, uint64_t call_id)
{
	struct nvlp_rec_copy r = {
		.fn = fn,
		.t_enter = t0,
		.dur = dur,
		.tid = tls->tid,
		.device = (uint64_t)dev,
		.src_device = (uint64_t)pl->sd,
		.dst_device = (uint64_t)pl->dd,
		.bytes = n,
		.copy_kind = kind,
		.stream = (uintptr_t)st,
		.cupti_stream = nvlp_cupti_stream_id(st),
		.peer_enabled = (uint64_t)peer_state(pl->sd, pl->dd),
		.managed = pl->managed,
		.rc = (uint64_t)(int64_t)rc,
		.stack = nvlp_stack_capture(),
		.dst = (uintptr_t)dst,
		.src = (uintptr_t)src,
		.call_id = call_id,
	};
	nvlp_emit(NVLP_K_COPY, &r, NULL, 0);
	nvlp_capture_note(NVLP_K_COPY, r.call_id, st);
	nvlp_py_attach(NVLP_K_COPY, r.tid, t0, r.call_id);
}

/* Peer copies: always recorded; kind is recorded as cudaMemcpyDeviceToDevice. */
#define PLAN_1(dst, src, args, ID, st)                                                               \
	pl.sd = sd;                                                                                \
	pl.dd = dd;                                                                                \
	pl.managed = (unsigned)is_managed(src) | (unsigned)is_managed(dst) << 1;                   \
	unsigned kind = cudaMemcpyDeviceToDevice;
#define PLAN_0(dst, src, args, ID, st)                                                             \
	if (!plan_copy(&pl, dst, src, kind)) {                                                     \
		nvlp_py_enter(tls); /* the Python sampler follows a thread blocked in the copy */  \
		errno = errno0;                                                                    \
		struct nvlp_live *live_ = live_call(tls, NVLP_CUDA_##ID, nvlp_now(), 0, n, st, -1, 0); \
		uint64_t in0_ = cost0 ? nvlp_now() : 0;                                            \
		cudaError_t rc_ = real args;                                                       \
		nvlp_cost_end(cost0, cost0 ? nvlp_now() - in0_ : 0);                               \
		nvlp_live_end(live_);                                                              \
		nvlp_py_leave(tls);                                                                \
		return rc_;                                                                        \
	}
#define STREAM_0 NULL
#define STREAM_st st

#define COPY_WRAPPER(ID, name, params, args, stream, peer)                                         \
	NVLP_EXPORT cudaError_t name params                                                        \
	{                                                                                          \
		ENTER(ID, name, args)                                                              \
		struct plan pl;                                                                    \
		int errno0 = errno; /* the queries below must not leak into what the call sees */ \
		PLAN_##peer(dst, src, args, ID, STREAM_##stream)                                   \
		int64_t dev = current_device();                                                    \
		uint64_t call_id = nvlp_next_call_id();                                            \
		errno = errno0;                                                                    \
		CALL_LIVE(args, live_call(tls, NVLP_CUDA_##ID, t0, call_id, n, STREAM_##stream,   \
					  dev, 1))                                                 \
		emit_copy(tls, NVLP_CUDA_##ID, t0, dur, &pl, dst, src, n, kind, STREAM_##stream,   \
			  rc, dev, call_id);                                                       \
		LEAVE                                                                              \
	}
COPIES(COPY_WRAPPER)

/* ---- managed memory --------------------------------------------------------------------------- */

static void emit_managed(struct nvlp_tls *tls, unsigned fn, uint64_t t0, uint64_t dur,
			 const void *p, size_t n, unsigned flags, int64_t target, cudaError_t rc,
			 void *st)
{
	struct nvlp_rec_managed r = {
		.fn = fn,
		.t_enter = t0,
		.dur = dur,
		.tid = tls->tid,
		.device = (uint64_t)current_device(),
		.ptr = (uintptr_t)p,
		.bytes = n,
		.flags = flags,
		.target = (uint64_t)target,
		.rc = (uint64_t)(int64_t)rc,
		.stack = nvlp_stack_capture(),
		.stream = (uintptr_t)st,
	};
	nvlp_emit(NVLP_K_MANAGED, &r, NULL, 0);
	nvlp_py_attach(NVLP_K_MANAGED, r.tid, t0, 0);
}

/* A prefetch/advice target as a device number (-1 = cudaCpuDeviceId, any host location): raw
 * word w of the call, an int device (old: 12's plain names) or a cudaMemLocation. */
static int64_t raw_target(uint64_t w, int old)
{
	if (old)
		return (int32_t)(uint32_t)w;
	struct cudaMemLocation loc;
	memcpy(&loc, &w, sizeof loc);
	return loc.type == cudaMemLocationTypeDevice ? loc.id : cudaCpuDeviceId;
}

/* Does this plain-named call have 12's signature? (_v2 names always have 13's.) */
static int old_signature(int v2)
{
	return !v2 && nvlp_cudart_major() == 12;
}

/* The calling runtime brought up (its context on the current device) before CUPTI attaches. */
static cudaError_t rt_up_for_attach(void)
{
	real_cudaFree_t rf = REAL(FREE, cudaFree);
	return rf ? rf(NULL) : cudaErrorSharedObjectSymbolNotFound;
}

NVLP_EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags)
{
	ENTER(MALLOC_MANAGED, cudaMallocManaged, (p, n, flags))
	/* A mid-run attach (NVLPROF_CUPTI=lazy with NVLPROF_UM=attach, or after startup's detach):
	 * CUPTI attached before the allocation, or it counts nothing (run 15); this runtime up before
	 * that: its first cuInit after a mid-run attach hangs in the driver (run 16; another library's
	 * later cuInit still may, run 17). cudaFree(NULL) does what the allocation's own start would;
	 * where it fails, so does the allocation. */
	if (!nvlp_cupti_managed_attach_due() || rt_up_for_attach() == cudaSuccess)
		nvlp_cupti_managed_coming();
	CALL_LIVE((p, n, flags), live_call(tls, NVLP_CUDA_MALLOC_MANAGED, t0, 0, n, NULL, -1, 1))
	void *ptr = rc == cudaSuccess && p ? *p : NULL;
	if (ptr) {
		managed_add(ptr, n);
		nvlp_cupti_managed_seen();
	}
	emit_managed(tls, NVLP_CUDA_MALLOC_MANAGED, t0, dur, ptr, n, flags, -1, rc, NULL);
	LEAVE
}

/* Only the end of a managed block is recorded. Its entry goes before the real call (afterwards
 * the address could already belong to a new block of another thread) and comes back on failure. */
NVLP_EXPORT cudaError_t cudaFree(void *p)
{
	ENTER(FREE, cudaFree, (p))
	size_t n = p && atomic_load_explicit(&managed_table.live, memory_order_relaxed)
	               ? managed_remove(p)
	               : 0;
	if (!n)
		return real(p);
	CALL((p))
	if (rc != cudaSuccess)
		managed_add(p, n);
	emit_managed(tls, NVLP_CUDA_FREE, t0, dur, p, n, 0, -1, rc, NULL);
	LEAVE
}

#define PREFETCH_WRAPPER(ID, name, v2)                                                             \
	NVLP_EXPORT cudaError_t nvlp_w_##name RAW_PREFETCH __asm__(#name);                         \
	NVLP_EXPORT cudaError_t nvlp_w_##name RAW_PREFETCH                                         \
	{                                                                                          \
		ENTER(ID, name, RAW_ARGS)                                                          \
		CALL(RAW_ARGS)                                                                     \
		int old = old_signature(v2);                                                       \
		emit_managed(tls, NVLP_CUDA_MEM_PREFETCH_ASYNC, t0, dur, p, n,                     \
			     old ? 0 : (unsigned)a3, raw_target(a2, old), rc,                      \
			     (void *)(uintptr_t)(old ? a3 : a4));                                  \
		LEAVE                                                                              \
	}
PREFETCH_WRAPPER(MEM_PREFETCH_ASYNC, cudaMemPrefetchAsync, 0)
PREFETCH_WRAPPER(MEM_PREFETCH_ASYNC_PTSZ, cudaMemPrefetchAsync_ptsz, 0)
PREFETCH_WRAPPER(MEM_PREFETCH_ASYNC_V2, cudaMemPrefetchAsync_v2, 1)
PREFETCH_WRAPPER(MEM_PREFETCH_ASYNC_V2_PTSZ, cudaMemPrefetchAsync_v2_ptsz, 1)

#define ADVISE_WRAPPER(ID, name, v2)                                                               \
	NVLP_EXPORT cudaError_t nvlp_w_##name RAW_ADVISE __asm__(#name);                           \
	NVLP_EXPORT cudaError_t nvlp_w_##name RAW_ADVISE                                           \
	{                                                                                          \
		ENTER(ID, name, RAW_ARGS4)                                                         \
		CALL(RAW_ARGS4)                                                                    \
		emit_managed(tls, NVLP_CUDA_MEM_ADVISE, t0, dur, p, n, (unsigned)a2,               \
			     raw_target(a3, old_signature(v2)), rc, NULL);                         \
		LEAVE                                                                              \
	}
ADVISE_WRAPPER(MEM_ADVISE, cudaMemAdvise, 0)
ADVISE_WRAPPER(MEM_ADVISE_V2, cudaMemAdvise_v2, 1)

/* ---- peer access ------------------------------------------------------------------------------ */

static void emit_peer(struct nvlp_tls *tls, unsigned fn, uint64_t t0, uint64_t dur, int64_t dev,
		      int peer, unsigned flags, cudaError_t rc)
{
	struct nvlp_rec_peer r = {
		.fn = fn,
		.t_enter = t0,
		.dur = dur,
		.tid = tls->tid,
		.device = (uint64_t)dev,
		.peer_device = (uint64_t)(int64_t)peer,
		.flags = flags,
		.rc = (uint64_t)(int64_t)rc,
	};
	nvlp_emit(NVLP_K_PEER, &r, NULL, 0);
}

static void set_peer(int64_t dev, int peer, unsigned char on)
{
	if (dev >= 0 && dev < MAX_DEV && peer >= 0 && peer < MAX_DEV)
		atomic_store(&peer_on[dev][peer], on);
}

NVLP_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
	ENTER(ENABLE_PEER_ACCESS, cudaDeviceEnablePeerAccess, (peer, flags))
	CALL((peer, flags))
	int64_t dev = current_device();
	if (rc == cudaSuccess || rc == cudaErrorPeerAccessAlreadyEnabled)
		set_peer(dev, peer, 1);
	emit_peer(tls, NVLP_CUDA_ENABLE_PEER_ACCESS, t0, dur, dev, peer, flags, rc);
	LEAVE
}

NVLP_EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
	ENTER(DISABLE_PEER_ACCESS, cudaDeviceDisablePeerAccess, (peer))
	CALL((peer))
	int64_t dev = current_device();
	if (rc == cudaSuccess)
		set_peer(dev, peer, 0);
	emit_peer(tls, NVLP_CUDA_DISABLE_PEER_ACCESS, t0, dur, dev, peer, 0, rc);
	LEAVE
}

/* ---- CUDA graphs: capture, instantiation, replay ---------------------------------------------- */

/* Captures begun through us and not ended yet. While 0, nothing asks the runtime about capture:
 * work issued then runs when issued. (A capture begun through the driver or a static runtime is
 * not counted, so what is issued into it looks executed: see README's limits.) */
static atomic_int captures_live;

/* The capture sequence st belongs to, or 0. The legacy default stream is never asked: querying it
 * while another stream captures in global mode is an error that would invalidate that capture. */
static uint64_t capture_of(void *st)
{
	if ((uintptr_t)st <= 1) /* NULL and cudaStreamLegacy */
		return 0;
	real_cudaStreamGetCaptureInfo_t f = REAL(GET_CAPTURE_INFO, cudaStreamGetCaptureInfo);
	enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
	unsigned long long id = 0;
	if (!f || f(st, &status, &id, NULL, NULL, NULL, NULL) != cudaSuccess)
		return 0;
	return status == cudaStreamCaptureStatusActive ? id : 0;
}

void nvlp_capture_note(unsigned kind, uint64_t call_id, void *st)
{
	if (NVLP_LIKELY(!atomic_load_explicit(&captures_live, memory_order_relaxed)))
		return;
	int saved_errno = errno;
	uint64_t id = capture_of(st);
	if (id) {
		struct nvlp_rec_captured r = {
		    .call_id = call_id, .capture_id = id, .stream = (uintptr_t)st, .kind = kind};
		nvlp_emit(NVLP_K_CAPTURED, &r, NULL, 0);
	}
	errno = saved_errno;
}

static void emit_graph(struct nvlp_tls *tls, unsigned op, uint64_t t0, uint64_t dur, void *st,
		       uint64_t capture, void *graph, void *exec, cudaError_t rc)
{
	struct nvlp_rec_graph r = {
		.op = op,
		.t_enter = t0,
		.dur = dur,
		.tid = tls->tid,
		.stream = (uintptr_t)st,
		.capture_id = capture,
		.graph = (uintptr_t)graph,
		.exec = (uintptr_t)exec,
		.rc = (uint64_t)(int64_t)rc,
		.call_id = nvlp_next_call_id(),
	};
	nvlp_emit(NVLP_K_GRAPH, &r, NULL, 0);
}

#define BEGIN_CAPTURE_WRAPPER(ID, name)                                                            \
	NVLP_EXPORT cudaError_t name(cudaStream_t st, enum cudaStreamCaptureMode m)                \
	{                                                                                          \
		ENTER(ID, name, (st, m))                                                           \
		CALL((st, m))                                                                      \
		uint64_t id = 0;                                                                   \
		if (rc == cudaSuccess) {                                                           \
			atomic_fetch_add(&captures_live, 1);                                       \
			id = capture_of(st);                                                       \
		}                                                                                  \
		emit_graph(tls, NVLP_GRAPH_BEGIN_CAPTURE, t0, dur, st, id, NULL, NULL, rc);        \
		LEAVE                                                                              \
	}
BEGIN_CAPTURE_WRAPPER(BEGIN_CAPTURE, cudaStreamBeginCapture)
BEGIN_CAPTURE_WRAPPER(BEGIN_CAPTURE_PTSZ, cudaStreamBeginCapture_ptsz)

/* One fewer live capture, never below 0 (a capture begun where we do not see it may end here). */
static void capture_ended(void)
{
	int n = atomic_load(&captures_live);
	while (n > 0 && !atomic_compare_exchange_weak(&captures_live, &n, n - 1))
		;
}

/* The capture ends whether or not the call succeeds (an invalidated capture fails here). */
#define END_CAPTURE_WRAPPER(ID, name)                                                              \
	NVLP_EXPORT cudaError_t name(cudaStream_t st, cudaGraph_t *g)                              \
	{                                                                                          \
		ENTER(ID, name, (st, g))                                                           \
		int errno0 = errno;                                                                \
		uint64_t id = capture_of(st);                                                      \
		errno = errno0;                                                                    \
		CALL((st, g))                                                                      \
		if (id)                                                                            \
			capture_ended();                                                           \
		emit_graph(tls, NVLP_GRAPH_END_CAPTURE, t0, dur, st, id,                           \
			   rc == cudaSuccess && g ? (void *)*g : NULL, NULL, rc);                  \
		LEAVE                                                                              \
	}
END_CAPTURE_WRAPPER(END_CAPTURE, cudaStreamEndCapture)
END_CAPTURE_WRAPPER(END_CAPTURE_PTSZ, cudaStreamEndCapture_ptsz)

#define INSTANTIATE_WRAPPER(ID, name, ptype)                                                       \
	NVLP_EXPORT cudaError_t name(cudaGraphExec_t *e, cudaGraph_t g, ptype x)                   \
	{                                                                                          \
		ENTER(ID, name, (e, g, x))                                                         \
		CALL((e, g, x))                                                                    \
		emit_graph(tls, NVLP_GRAPH_INSTANTIATE, t0, dur, NULL, 0, g,                       \
			   rc == cudaSuccess && e ? (void *)*e : NULL, rc);                        \
		LEAVE                                                                              \
	}
INSTANTIATE_WRAPPER(INSTANTIATE, cudaGraphInstantiate, unsigned long long)
INSTANTIATE_WRAPPER(INSTANTIATE_WITH_FLAGS, cudaGraphInstantiateWithFlags, unsigned long long)
INSTANTIATE_WRAPPER(INSTANTIATE_WITH_PARAMS, cudaGraphInstantiateWithParams,
		    cudaGraphInstantiateParams *)
INSTANTIATE_WRAPPER(INSTANTIATE_WITH_PARAMS_PTSZ, cudaGraphInstantiateWithParams_ptsz,
		    cudaGraphInstantiateParams *)

#define LAUNCH_WRAPPER(ID, name)                                                                   \
	NVLP_EXPORT cudaError_t name(cudaGraphExec_t e, cudaStream_t st)                           \
	{                                                                                          \
		ENTER(ID, name, (e, st))                                                           \
		CALL((e, st))                                                                      \
		emit_graph(tls, NVLP_GRAPH_LAUNCH, t0, dur, st, 0, NULL, e, rc);                   \
		LEAVE                                                                              \
	}
LAUNCH_WRAPPER(GRAPH_LAUNCH, cudaGraphLaunch)
LAUNCH_WRAPPER(GRAPH_LAUNCH_PTSZ, cudaGraphLaunch_ptsz)

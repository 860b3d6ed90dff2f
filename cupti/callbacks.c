/* callbacks.c: driver-level capture: managed memory, prefetch/advice, peer access and cross-device or managed copies, whichever runtime (or none) issued them. */
/*
 * CuPy and NCCL link the CUDA runtime statically, JAX/XLA and Triton call the driver: their
 * cudaMallocManaged/cudaMemcpy never reach a runtime hook (FACTS.md), but every one of them ends
 * in libcuda. CUPTI's callback API (driver domain) is enabled for the few functions below only,
 * through the one subscription subscribe.c holds, and each is recorded in its exit callback as the
 * same MANAGED/COPY/PEER records the runtime hooks write (fn: the cu* values of nvlp_cuda_fn).
 *
 * Once each: a runtime hook that records a call sets its thread's in_hook around the real call
 * (hooks_cuda.c CALL), and the driver call it makes inside is then only tracked (managed table,
 * peer table, UM counters), never recorded: the runtime record has the caller's own view. Calls
 * the runtime hooks pass on unrecorded (a copy they judged uninteresting) are judged again here,
 * with what only the driver path knows (managed blocks allocated by any runtime).
 *
 * Cost: host<->device copies are the frequent ones (torch's .item(), every input batch), and they
 * can only matter when managed memory exists, so their callbacks are enabled at the first managed
 * allocation; device-to-device and unified-address copies cost two pointer queries each.
 * NVLPROF_DRIVER=0 turns driver capture off.
 */
#include <string.h> /* memset */

#include "cupti_int.h"
#include "nvlp_cost.h"
#include "nvlp_cupti.h"
#include "nvlp_pystacks.h"
#include "nvlp_rt.h"
#include "nvlp_stacks.h"
#include "resolve.h" /* nvlp_recording_tls */

static void (*managed_seen_fn)(void); /* cupti.c's, given at start */

/* cu*_params (the callbacks' functionParams) come with cupti.h (generated_cuda_meta.h). */
enum op {
	OP_NONE,
	OP_ALLOC,
	OP_FREE,
	OP_PREFETCH,    /* CUmemLocation */
	OP_PREFETCH_V1, /* CUdevice */
	OP_ADVISE,
	OP_ADVISE_V1,
	OP_PEER_ON,
	OP_PEER_OFF,
	OP_H2D,
	OP_D2H,
	OP_D2D,
	OP_ANY, /* unified addressing: cuMemcpy, cuMemcpyAsync */
	OP_PEER_COPY,
};

/* The one list: D(cbid name, op, fn, async). A host<->device row is enabled lazily (see top). */
#define DRV_CALLS(D)                                                                               \
	D(cuMemAllocManaged, ALLOC, CU_MEM_ALLOC_MANAGED, 0)                                       \
	D(cuMemFree_v2, FREE, CU_MEM_FREE, 0)                                                      \
	D(cuMemPrefetchAsync, PREFETCH_V1, CU_MEM_PREFETCH_ASYNC, 1)                               \
	D(cuMemPrefetchAsync_ptsz, PREFETCH_V1, CU_MEM_PREFETCH_ASYNC, 1)                          \
	D(cuMemPrefetchAsync_v2, PREFETCH, CU_MEM_PREFETCH_ASYNC, 1)                               \
	D(cuMemPrefetchAsync_v2_ptsz, PREFETCH, CU_MEM_PREFETCH_ASYNC, 1)                          \
	D(cuMemAdvise, ADVISE_V1, CU_MEM_ADVISE, 0)                                                \
	D(cuMemAdvise_v2, ADVISE, CU_MEM_ADVISE, 0)                                                \
	D(cuCtxEnablePeerAccess, PEER_ON, CU_CTX_ENABLE_PEER_ACCESS, 0)                            \
	D(cuCtxDisablePeerAccess, PEER_OFF, CU_CTX_DISABLE_PEER_ACCESS, 0)                         \
	D(cuMemcpy, ANY, CU_MEMCPY, 0)                                                             \
	D(cuMemcpy_ptds, ANY, CU_MEMCPY, 0)                                                        \
	D(cuMemcpyAsync, ANY, CU_MEMCPY_ASYNC, 1)                                                  \
	D(cuMemcpyAsync_ptsz, ANY, CU_MEMCPY_ASYNC, 1)                                             \
	D(cuMemcpyHtoD_v2, H2D, CU_MEMCPY_HTOD, 0)                                                 \
	D(cuMemcpyHtoD_v2_ptds, H2D, CU_MEMCPY_HTOD, 0)                                            \
	D(cuMemcpyHtoDAsync_v2, H2D, CU_MEMCPY_HTOD_ASYNC, 1)                                      \
	D(cuMemcpyHtoDAsync_v2_ptsz, H2D, CU_MEMCPY_HTOD_ASYNC, 1)                                 \
	D(cuMemcpyDtoH_v2, D2H, CU_MEMCPY_DTOH, 0)                                                 \
	D(cuMemcpyDtoH_v2_ptds, D2H, CU_MEMCPY_DTOH, 0)                                            \
	D(cuMemcpyDtoHAsync_v2, D2H, CU_MEMCPY_DTOH_ASYNC, 1)                                      \
	D(cuMemcpyDtoHAsync_v2_ptsz, D2H, CU_MEMCPY_DTOH_ASYNC, 1)                                 \
	D(cuMemcpyDtoD_v2, D2D, CU_MEMCPY_DTOD, 0)                                                 \
	D(cuMemcpyDtoD_v2_ptds, D2D, CU_MEMCPY_DTOD, 0)                                            \
	D(cuMemcpyDtoDAsync_v2, D2D, CU_MEMCPY_DTOD_ASYNC, 1)                                      \
	D(cuMemcpyDtoDAsync_v2_ptsz, D2D, CU_MEMCPY_DTOD_ASYNC, 1)                                 \
	D(cuMemcpyPeer, PEER_COPY, CU_MEMCPY_PEER, 0)                                              \
	D(cuMemcpyPeer_ptds, PEER_COPY, CU_MEMCPY_PEER, 0)                                         \
	D(cuMemcpyPeerAsync, PEER_COPY, CU_MEMCPY_PEER_ASYNC, 1)                                   \
	D(cuMemcpyPeerAsync_ptsz, PEER_COPY, CU_MEMCPY_PEER_ASYNC, 1)

static const struct row {
	unsigned char op, fn, async;
} rows[CUPTI_DRIVER_TRACE_CBID_SIZE] = {
#define ROW(name, o, f, a) [CUPTI_DRIVER_TRACE_CBID_##name] = {OP_##o, NVLP_CUDA_##f, a},
    DRV_CALLS(ROW)
#undef ROW
};

static struct {
	int on;      /* our callbacks are enabled */
	int hd_on;   /* host<->device copy callbacks enabled (managed memory exists) */
	int managed; /* live managed blocks we know of */
} callback_state;

/* cudaMemcpyKind values, as the runtime hooks record them */
enum { K_H2H = 0, K_H2D = 1, K_D2H = 2, K_D2D = 3 };
#define CU_PEER_ALREADY_ENABLED 704 /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */

/* ---- managed blocks: lock-free open addressing keyed by base address ---- */

#define MG_SLOTS 8192 /* power of two */
#define MG_PROBES 64
#define MG_TOMB 1ull
#define MG_FREEING (1ull << 63) /* in size: a cuMemFree of the block is in flight */
static struct {
	uint64_t key, size;
} mg[MG_SLOTS];

static unsigned mg_hash(uint64_t p)
{
	return (unsigned)((p * 0x9e3779b97f4a7c15ull) >> 51) & (MG_SLOTS - 1);
}

static int mg_find(uint64_t p)
{
	unsigned h = mg_hash(p);
	for (unsigned i = 0; i < MG_PROBES; i++) {
		unsigned s = (h + i) & (MG_SLOTS - 1);
		uint64_t k = __atomic_load_n(&mg[s].key, __ATOMIC_ACQUIRE);
		if (k == p)
			return (int)s;
		if (k == 0)
			return -1;
	}
	return -1;
}

/* @return 1 if added, 0 if the table is full there (the block's free then goes unseen) */
static int mg_add(uint64_t p, uint64_t size)
{
	int s = mg_find(p); /* same address again: its free was in flight (see mg_free_*) */
	if (s >= 0) {
		__atomic_store_n(&mg[s].size, size, __ATOMIC_RELEASE);
		return 1;
	}
	unsigned h = mg_hash(p);
	for (unsigned i = 0; i < MG_PROBES; i++) {
		unsigned x = (h + i) & (MG_SLOTS - 1);
		uint64_t k = __atomic_load_n(&mg[x].key, __ATOMIC_ACQUIRE);
		if ((k == 0 || k == MG_TOMB) &&
		    __atomic_compare_exchange_n(&mg[x].key, &k, p, 0, __ATOMIC_ACQ_REL,
		                                __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&mg[x].size, size, __ATOMIC_RELEASE);
			__atomic_fetch_add(&callback_state.managed, 1, __ATOMIC_RELAXED);
			return 1;
		}
	}
	return 0;
}

/* Free entering: @return the block's size (0: not a managed block we know) and mark it. */
static uint64_t mg_free_enter(uint64_t p)
{
	if (!__atomic_load_n(&callback_state.managed, __ATOMIC_RELAXED))
		return 0;
	int s = mg_find(p);
	if (s < 0)
		return 0;
	uint64_t size = __atomic_fetch_or(&mg[s].size, MG_FREEING, __ATOMIC_ACQ_REL);
	return size & ~MG_FREEING;
}

/* Free returned: forget the block (ok), or unmark it (failed). A block that another thread got at
 * the same address meanwhile was re-added unmarked, and stays. */
static void mg_free_exit(uint64_t p, int ok)
{
	int s = mg_find(p);
	if (s < 0)
		return;
	uint64_t size = __atomic_load_n(&mg[s].size, __ATOMIC_ACQUIRE);
	if (!(size & MG_FREEING))
		return;
	if (!ok) {
		__atomic_fetch_and(&mg[s].size, ~MG_FREEING, __ATOMIC_ACQ_REL);
		return;
	}
	__atomic_store_n(&mg[s].key, MG_TOMB, __ATOMIC_RELEASE);
	__atomic_fetch_sub(&callback_state.managed, 1, __ATOMIC_RELAXED);
}

/* ---- peer access seen through the driver (any runtime, NCCL's included) ---- */

#define MAX_DEV 64
static unsigned char peer_on[MAX_DEV][MAX_DEV];

static int64_t peer_state(int64_t sd, int64_t dd)
{
	if (sd < 0 || dd < 0 || sd == dd)
		return -1;
	if (sd >= MAX_DEV || dd >= MAX_DEV)
		return 0;
	return __atomic_load_n(&peer_on[sd][dd], __ATOMIC_RELAXED) ||
	       __atomic_load_n(&peer_on[dd][sd], __ATOMIC_RELAXED);
}

/* ---- helpers ---- */

static int64_t ctx_device(CUcontext ctx)
{
	uint32_t d = 0;
	if (!ctx || !nvlp_cu.cuptiGetDeviceId || nvlp_cu.cuptiGetDeviceId(ctx, &d) != CUPTI_SUCCESS)
		return -1;
	return d;
}

static int64_t loc_device(CUmemLocation loc)
{
	return loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? loc.id : -1;
}

/* Device of p (-1: host) and whether it is managed; unknown pointers count as host. */
static int64_t ptr_device(uint64_t p, unsigned *managed, unsigned bit)
{
	int dev = -1, m = 0;
	if (nvlp_cupti_pointer_info((const void *)(uintptr_t)p, &dev, &m) != 0)
		return -1;
	if (m)
		*managed |= bit;
	return dev;
}

static void hd_enable(void)
{
	if (__atomic_exchange_n(&callback_state.hd_on, 1, __ATOMIC_ACQ_REL))
		return;
	for (int c = 0; c < CUPTI_DRIVER_TRACE_CBID_SIZE; c++)
		if (rows[c].op == OP_H2D || rows[c].op == OP_D2H)
			nvlp_sub_enable(CUPTI_CB_DOMAIN_DRIVER_API, (CUpti_CallbackId)c, 1);
}

static void emit_managed(struct nvlp_tls *tls, const struct row *w, uint64_t t0, int64_t dev,
                         uint64_t p, uint64_t n, unsigned flags, int64_t target, int rc, void *st)
{
	struct nvlp_rec_managed r = {
	    .fn = w->fn,
	    .t_enter = t0,
	    .dur = nvlp_elapsed(t0, nvlp_now()),
	    .tid = tls->tid,
	    .device = (uint64_t)dev,
	    .ptr = p,
	    .bytes = n,
	    .flags = flags,
	    .target = (uint64_t)target,
	    .rc = (uint64_t)(int64_t)rc,
	    .stack = nvlp_stack_capture(),
	    .stream = (uintptr_t)st,
	};
	nvlp_emit(NVLP_K_MANAGED, &r, NULL, 0);
	/* the Python chain, as the runtime hook attaches it: CuPy's static runtime reaches only here */
	nvlp_py_attach(NVLP_K_MANAGED, r.tid, t0, 0);
}

struct copy {
	uint64_t dst, src, n;
	CUstream st;
	int64_t sd, dd;
	unsigned managed, kind;
};

/* What a copy is, and whether it is worth a record (crosses devices or touches managed memory). */
static int plan_copy(const struct row *w, const void *fp, CUcontext ctx, struct copy *c)
{
	memset(c, 0, sizeof *c);
	switch (w->op) {
	case OP_H2D: {
		const cuMemcpyHtoDAsync_v2_params *p = fp; /* the sync form is its prefix */
		c->dst = p->dstDevice, c->src = (uintptr_t)p->srcHost, c->n = p->ByteCount;
		c->st = w->async ? p->hStream : NULL;
		c->kind = K_H2D;
		break;
	}
	case OP_D2H: {
		const cuMemcpyDtoHAsync_v2_params *p = fp;
		c->dst = (uintptr_t)p->dstHost, c->src = p->srcDevice, c->n = p->ByteCount;
		c->st = w->async ? p->hStream : NULL;
		c->kind = K_D2H;
		break;
	}
	case OP_D2D:
	case OP_ANY: {
		const cuMemcpyAsync_params *p = fp; /* DtoD and unified copies share this layout */
		c->dst = p->dst, c->src = p->src, c->n = p->ByteCount;
		c->st = w->async ? p->hStream : NULL;
		break;
	}
	case OP_PEER_COPY: {
		const cuMemcpyPeerAsync_params *p = fp;
		c->dst = p->dstDevice, c->src = p->srcDevice, c->n = p->ByteCount;
		c->st = w->async ? p->hStream : NULL;
		c->sd = ctx_device(p->srcContext), c->dd = ctx_device(p->dstContext);
		c->managed = 0;
		ptr_device(c->src, &c->managed, 1);
		ptr_device(c->dst, &c->managed, 2);
		c->kind = K_D2D;
		return 1; /* peer copies: always recorded, as the runtime hook does */
	}
	default:
		return 0;
	}
	if (w->op == OP_H2D || w->op == OP_D2H) {
		if (!__atomic_load_n(&callback_state.managed, __ATOMIC_RELAXED))
			return 0;
		ptr_device(c->src, &c->managed, 1);
		ptr_device(c->dst, &c->managed, 2);
		if (!c->managed)
			return 0;
		int64_t dev = ctx_device(ctx);
		c->sd = w->op == OP_H2D ? -1 : dev;
		c->dd = w->op == OP_H2D ? dev : -1;
		return 1;
	}
	c->sd = ptr_device(c->src, &c->managed, 1);
	c->dd = ptr_device(c->dst, &c->managed, 2);
	c->kind = c->sd >= 0 && c->dd >= 0 ? K_D2D : c->sd >= 0 ? K_D2H : c->dd >= 0 ? K_H2D : K_H2H;
	return c->managed || (c->sd >= 0 && c->dd >= 0 && c->sd != c->dd);
}

static void emit_copy(struct nvlp_tls *tls, const struct row *w, uint64_t t0, CUcontext ctx,
                      const struct copy *c, int rc)
{
	struct nvlp_rec_copy r = {
	    .fn = w->fn,
	    .t_enter = t0,
	    .dur = nvlp_elapsed(t0, nvlp_now()),
	    .tid = tls->tid,
	    .device = (uint64_t)ctx_device(ctx),
	    .src_device = (uint64_t)c->sd,
	    .dst_device = (uint64_t)c->dd,
	    .bytes = c->n,
	    .copy_kind = c->kind,
	    .stream = (uintptr_t)c->st,
	    .cupti_stream = nvlp_streams_lookup(c->st),
	    .peer_enabled = (uint64_t)peer_state(c->sd, c->dd),
	    .managed = c->managed,
	    .rc = (uint64_t)(int64_t)rc,
	    .stack = nvlp_stack_capture(),
	    .dst = c->dst,
	    .src = c->src,
	    .call_id = nvlp_next_call_id(),
	};
	nvlp_emit(NVLP_K_COPY, &r, NULL, 0);
	nvlp_py_attach(NVLP_K_COPY, r.tid, t0, r.call_id);
}

static void set_peer(int64_t dev, int64_t peer, unsigned char on)
{
	if (dev >= 0 && dev < MAX_DEV && peer >= 0 && peer < MAX_DEV)
		__atomic_store_n(&peer_on[dev][peer], on, __ATOMIC_RELAXED);
}

/* ---- the callback ---- */

/* The exit of a managed allocation or free: the block table, and a MANAGED record. */
static void drv_exit_block(const struct row *w, const CUpti_CallbackData *cb, const void *fp,
                           int rc, uint64_t t0, struct nvlp_tls *tls)
{
	switch (w->op) {
	case OP_ALLOC: {
		const cuMemAllocManaged_params *p = fp;
		uint64_t ptr = rc == 0 && p->dptr ? *p->dptr : 0;
		if (ptr) {
			mg_add(ptr, p->bytesize);
			hd_enable();
			managed_seen_fn(); /* UM counters on before the block is returned */
		}
		if (tls)
			emit_managed(tls, w, t0, ctx_device(cb->context), ptr, p->bytesize,
			             p->flags, -1, rc, NULL);
		return;
	}
	case OP_FREE: {
		uint64_t ptr = ((const cuMemFree_v2_params *)fp)->dptr;
		int s = mg_find(ptr);
		if (s < 0)
			return;
		uint64_t size = __atomic_load_n(&mg[s].size, __ATOMIC_ACQUIRE);
		if (!(size & MG_FREEING))
			return;
		mg_free_exit(ptr, rc == 0);
		if (tls)
			emit_managed(tls, w, t0, ctx_device(cb->context), ptr, size & ~MG_FREEING,
			             0, -1, rc, NULL);
		return;
	}
	default:
		return;
	}
}

/* The exit of a prefetch or an advice (both API versions): a MANAGED record. */
static void drv_exit_hint(const struct row *w, const CUpti_CallbackData *cb, const void *fp,
                          int rc, uint64_t t0, struct nvlp_tls *tls)
{
	if (!tls)
		return;
	switch (w->op) {
	case OP_PREFETCH: {
		const cuMemPrefetchAsync_v2_params *p = fp;
		emit_managed(tls, w, t0, ctx_device(cb->context), p->devPtr, p->count,
		             p->flags, loc_device(p->location), rc, p->hStream);
		return;
	}
	case OP_PREFETCH_V1: {
		const cuMemPrefetchAsync_params *p = fp;
		emit_managed(tls, w, t0, ctx_device(cb->context), p->devPtr, p->count, 0,
		             p->dstDevice, rc, p->hStream);
		return;
	}
	case OP_ADVISE: {
		const cuMemAdvise_v2_params *p = fp;
		emit_managed(tls, w, t0, ctx_device(cb->context), p->devPtr, p->count,
		             (unsigned)p->advice, loc_device(p->location), rc, NULL);
		return;
	}
	case OP_ADVISE_V1: {
		const cuMemAdvise_params *p = fp;
		emit_managed(tls, w, t0, ctx_device(cb->context), p->devPtr, p->count,
		             (unsigned)p->advice, p->device, rc, NULL);
		return;
	}
	default:
		return;
	}
}

/* The exit of cuCtxEnablePeerAccess / cuCtxDisablePeerAccess: the peer table, and a PEER record. */
static void drv_exit_peer(const struct row *w, const CUpti_CallbackData *cb, const void *fp,
                          int rc, uint64_t t0, struct nvlp_tls *tls)
{
	/* both forms start with the peer context */
	CUcontext peer_ctx = ((const cuCtxDisablePeerAccess_params *)fp)->peerContext;
	unsigned flags = w->op == OP_PEER_ON ? ((const cuCtxEnablePeerAccess_params *)fp)->Flags
	                                     : 0;
	int64_t dev = ctx_device(cb->context), peer = ctx_device(peer_ctx);
	if (w->op == OP_PEER_ON && (rc == 0 || rc == CU_PEER_ALREADY_ENABLED))
		set_peer(dev, peer, 1);
	else if (w->op == OP_PEER_OFF && rc == 0)
		set_peer(dev, peer, 0);
	if (tls) {
		struct nvlp_rec_peer r = {
		    .fn = w->fn,
		    .t_enter = t0,
		    .dur = nvlp_elapsed(t0, nvlp_now()),
		    .tid = tls->tid,
		    .device = (uint64_t)dev,
		    .peer_device = (uint64_t)peer,
		    .flags = flags,
		    .rc = (uint64_t)(int64_t)rc,
		};
		nvlp_emit(NVLP_K_PEER, &r, NULL, 0);
	}
}

static void drv_callback(CUpti_CallbackId cbid, const CUpti_CallbackData *cb);

/* nvlprof's code on the job's thread, at the call's entry and exit: timed one in NVLP_COST_EVERY
 * (COST), as the wrappers are. */
void nvlp_drv_callback(CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
	uint64_t c0 = nvlp_cost_begin();
	drv_callback(cbid, cb);
	nvlp_cost_end(c0, 0);
}

static void drv_callback(CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
	if (cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE || !cb || !cb->functionParams)
		return;
	const struct row *w = &rows[cbid];
	if (w->op == OP_NONE)
		return;
	const void *fp = cb->functionParams;
	if (cb->callbackSite == CUPTI_API_ENTER) {
		/* the time, for the exit; and a free's block leaves the table before the real
		 * call (afterwards its address could already be another thread's new block) */
		if (cb->correlationData)
			*cb->correlationData = nvlp_now();
		if (w->op == OP_FREE)
			mg_free_enter(((const cuMemFree_v2_params *)fp)->dptr);
		return;
	}
	int rc = cb->functionReturnValue ? *(const int *)cb->functionReturnValue : 0;
	uint64_t t0 = cb->correlationData ? *cb->correlationData : 0;
	struct nvlp_tls *tls = nvlp_recording_tls(); /* NULL inside a recording runtime hook */
	switch (w->op) {
	case OP_ALLOC:
	case OP_FREE:
		drv_exit_block(w, cb, fp, rc, t0, tls);
		return;
	case OP_PREFETCH:
	case OP_PREFETCH_V1:
	case OP_ADVISE:
	case OP_ADVISE_V1:
		drv_exit_hint(w, cb, fp, rc, t0, tls);
		return;
	case OP_PEER_ON:
	case OP_PEER_OFF:
		drv_exit_peer(w, cb, fp, rc, t0, tls);
		return;
	default: {
		struct copy c;
		if (tls && plan_copy(w, fp, cb->context, &c))
			emit_copy(tls, w, t0, cb->context, &c, rc);
		return;
	}
	}
}

void nvlp_drv_start(void (*managed_seen)(void))
{
	managed_seen_fn = managed_seen;
	if (!nvlp_cfg()->driver) {
		nvlp_note(NVLP_NOTE_CONFIG, -1, 0,
		          "NVLPROF_DRIVER=0: no driver-level capture (managed memory and copies "
		          "seen through the CUDA runtime hooks only)");
		return;
	}
	if (nvlp_sub_start(nvlp_drv_callback) != 0)
		return;
	int n = 0, failed = 0;
	for (int c = 0; c < CUPTI_DRIVER_TRACE_CBID_SIZE; c++) {
		if (rows[c].op == OP_NONE || rows[c].op == OP_H2D || rows[c].op == OP_D2H)
			continue;
		if (nvlp_sub_enable(CUPTI_CB_DOMAIN_DRIVER_API, (CUpti_CallbackId)c, 1) == 0)
			n++;
		else
			failed++;
	}
	__atomic_store_n(&callback_state.on, 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&callback_state.managed, __ATOMIC_RELAXED))
		hd_enable();
	nvlp_note(NVLP_NOTE_INFO, -1, (uint64_t)n,
	          "driver-level capture on: %d driver functions (managed memory, prefetch, advice, "
	          "peer access, device-to-device and peer copies; host<->device copies from the "
	          "first managed allocation)%s",
	          n, failed ? "; some refused by CUPTI" : "");
}

void nvlp_drv_atfork_child(void)
{
	memset(&callback_state, 0, sizeof callback_state);
	memset(mg, 0, sizeof mg);
	memset(peer_on, 0, sizeof peer_on);
}

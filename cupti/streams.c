/* streams.c: CUDA stream -> CUPTI stream id, and where a pointer lives: lookups without side effects (the NCCL hot path calls them). */
/*
 * A lookup never starts CUPTI, registers a GPU or enables counters: it answers from a cache, asks
 * CUPTI once per new stream, and remembers which devices those streams were on. The link sampler
 * reads that memo on its own schedule (nvlp_streams_devices).
 */
#include <dlfcn.h>  /* dlopen */
#include <string.h> /* memset */

#include "cupti_int.h"
#include "nvlp_cupti.h"
#include "nvlp_rt.h"

/* ---- stream ids: a small lock-free open-addressing cache (key 0 = empty) ---- */

#define SID_SLOTS 1024         /* power of two; a job has tens of streams */
#define SID_UNKNOWN UINT64_MAX /* cached "CUPTI has no id for this stream" */
static struct {
	uint64_t key, val;
} sid_cache[SID_SLOTS];

static uint64_t sid_lookup(uint64_t key)
{
	uint64_t h = (key * 0x9e3779b97f4a7c15ull) >> 54;
	for (unsigned i = 0; i < 16; i++) {
		unsigned s = (unsigned)(h + i) & (SID_SLOTS - 1);
		uint64_t k = __atomic_load_n(&sid_cache[s].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return __atomic_load_n(&sid_cache[s].val, __ATOMIC_ACQUIRE);
		if (k == 0)
			return 0;
	}
	return 0;
}

static void sid_insert(uint64_t key, uint64_t val)
{
	uint64_t h = (key * 0x9e3779b97f4a7c15ull) >> 54;
	for (unsigned i = 0; i < 16; i++) {
		unsigned s = (unsigned)(h + i) & (SID_SLOTS - 1);
		uint64_t expect = 0;
		if (__atomic_compare_exchange_n(&sid_cache[s].key, &expect, key, 0,
		                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
		    expect == key) {
			__atomic_store_n(&sid_cache[s].val, val, __ATOMIC_RELEASE);
			return;
		}
	}
	/* full neighbourhood: stay uncached (still correct, just slower) */
}

/*
 * Where a copy's pointer lives, asked of the driver: the runtime's cudaPointerGetAttributes would
 * do, but it is an API call that torch.profiler (Kineto) records, so every device-to-device copy of
 * the job would show two calls the job never made (measured: 100 per 5 DDP steps).
 * cuPointerGetAttributes answers all three attributes in one call, sets no runtime error state, and
 * Kineto keeps no driver calls but launches. Only a libcuda already in the process is used (never
 * loaded for this): before CUDA is up there is nothing to ask, and the caller falls back to the
 * runtime.
 */
int nvlp_cupti_pointer_info(const void *p, int *device, int *managed)
{
	static int tries; /* libcuda is in the process before any device pointer exists */
	if (NVLP_UNLIKELY(!nvlp_driver_loaded())) {
		if (__atomic_fetch_add(&tries, 1, __ATOMIC_RELAXED) >= 16 ||
		    !dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) ||
		    nvlp_driver_load(NULL, 0) != 0)
			return -1;
	}
	if (!nvlp_drv.cuPointerGetAttributes)
		return -1;
	/* CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _IS_MANAGED, _DEVICE_ORDINAL (cuda.h 13.0) */
	int attrs[3] = {2, 8, 9};
	unsigned type = 0, is_managed = 0;
	int ordinal = -1;
	void *data[3] = {&type, &is_managed, &ordinal};
	if (nvlp_drv.cuPointerGetAttributes(3, attrs, data, (uint64_t)(uintptr_t)p) != 0)
		return -1;
	*managed = is_managed != 0;
	/* CU_MEMORYTYPE_DEVICE 2, _UNIFIED 4; host, registered or unknown memory: no device */
	*device = (type == 2 || type == 4 || is_managed) && ordinal >= 0 ? ordinal : -1;
	return 0;
}

#define DEV_WORDS (NVLP_LINK_MAX_GPUS / 64)
static uint64_t devs_seen[DEV_WORDS]; /* devices of the streams looked up so far */

void nvlp_streams_devices(uint64_t out[NVLP_LINK_MAX_GPUS / 64])
{
	for (int i = 0; i < DEV_WORDS; i++)
		out[i] = __atomic_load_n(&devs_seen[i], __ATOMIC_ACQUIRE);
}

uint64_t nvlp_streams_lookup(void *stream)
{
	if (NVLP_UNLIKELY(nvlp_cupti_state() != NVLP_CS_ACTIVE))
		return 0;
	uintptr_t s = (uintptr_t)stream;
	CUcontext ctx = NULL;
	uint64_t key = s;
	if (s <= 2) {
		/* NULL / legacy / per-thread default streams are per context */
		if (nvlp_driver_load(NULL, 0) != 0 || nvlp_drv.cuCtxGetCurrent(&ctx) != 0 || !ctx)
			return 0;
		key =
		    ((uint64_t)(uintptr_t)ctx ^ (s << 1)) | 1; /* real stream handles are aligned */
	}
	uint64_t id = sid_lookup(key);
	if (NVLP_LIKELY(id))
		return id == SID_UNKNOWN ? 0 : id;
	/* slow path: ask the driver for the context, CUPTI for the id */
	if (nvlp_driver_load(NULL, 0) != 0 || !nvlp_cu.cuptiGetStreamIdEx)
		return 0;
	if (!ctx &&
	    (!nvlp_drv.cuStreamGetCtx || nvlp_drv.cuStreamGetCtx((CUstream)stream, &ctx) != 0))
		return 0;
	uint32_t sid = 0, dev = 0;
	if (!nvlp_act_enter()) /* detached meanwhile (detach.c): CUPTI is not to be called */
		return 0;
	CUptiResult r = nvlp_cu.cuptiGetStreamIdEx(ctx, s == 2 ? NULL : (CUstream)stream,
	                                           s == 2 ? 1 : 0, &sid);
	int dev_ok = r == CUPTI_SUCCESS && sid && nvlp_cu.cuptiGetDeviceId &&
	             nvlp_cu.cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS;
	nvlp_act_leave();
	if (r != CUPTI_SUCCESS || sid == 0) {
		sid_insert(key, SID_UNKNOWN); /* do not ask CUPTI again on every call */
		return 0;
	}
	if (dev_ok && dev < NVLP_LINK_MAX_GPUS)
		__atomic_fetch_or(&devs_seen[dev / 64], 1ull << (dev % 64), __ATOMIC_RELEASE);
	sid_insert(key, sid);
	return sid;
}

void nvlp_streams_atfork_child(void)
{
	memset(sid_cache, 0, sizeof sid_cache);
	memset(devs_seen, 0, sizeof devs_seen);
}

/* fake_cupti.c: fake libcupti.so.13 (default), libcuda.so.1 (-DFAKE_LIBCUDA) or libnvperf_host.so
 * (-DFAKE_NVPERF, compiled as C++) for tests. */
/*
 * libcupti: activity records use the real CUDA 13.0 layouts (CUpti_ActivityKernel10, ...) and are
 * laid out back to back, each sizeof(struct) long, so cuptiActivityGetNextRecord walks them by kind
 * like the real one. Records are produced on cuptiActivityFlushAll for the kinds enabled at that
 * moment, through whichever buffer callbacks are registered (last registration wins, as in CUPTI).
 * Test controls: fake_cupti_generate(kind, n), fake_cupti_enabled(kind),
 * fake_cupti_finalize_calls(), fake_cupti_hold_buffer(), fake_cupti_materialize(). Env:
 * FAKE_CUPTI_VERSION (cuptiGetVersion), FAKE_CUPTI_NO_TS_CB=1 (refuse timestamp callbacks),
 * FAKE_CUPTI_DROPPED=n (report n dropped records once).
 *
 * PM sampling (off unless FAKE_CUPTI_PM=1; otherwise cuptiProfilerInitialize is refused): like the
 * real one, the profiler-host functions live in libnvperf_host.so, dlopen'ed from next to this
 * library on the first cuptiProfilerHostInitialize; that library registers an exit-time destructor
 * when loaded and aborts if called after it ran (the real one corrupts the heap or crashes).
 * FAKE_CUPTI_PM_SLOW_MS=n makes each device-side setup step (profiler init, counter availability,
 * enable, set config) take n ms (about 0.9 s in all on an H200); FAKE_CUPTI_PM_ENABLE_MS=n adds n
 * ms to enable; FAKE_NVPERF_SLOW_MS=n makes the host library's add-metrics call take n ms,
 * FAKE_NVPERF_EVAL_MS=n each evaluation of a sample. fake_cupti_pm_progress(): 1 profiler
 * initialised, 2 host library loaded, 3 in enable, 4 started; 5 inside that slow add-metrics call,
 * 6 inside a slow evaluation. Decoded samples (two a decode) add up in the counter data image
 * (8 at most, then COUNTER_DATA_FULL) until it is initialised again, as in CUPTI; each decode's
 * two cover the time since the previous one.
 *
 * libcuda: cuInit loads CUDA_INJECTION64_PATH and calls its InitializeInjection, as the driver
 * does; two devices, one context (device 0's primary context is active once cuInit ran);
 * cuPointerGetAttributes answers from the fake cudart's memory model.
 * FAKE_CUDA_UUID_BASE=b (0-255): first byte of device UUIDs (default 0xa0), so that parallel
 * tests do not share the per-GPU sampling lock. Device d: "Fake GPU d", 141 GiB, 132 SMs,
 * compute capability FAKE_CUDA_CC (default 9.0), PCI FAKE_CUDA_PCI_DOMAIN (default 0):0x18+d:00.0
 * (what the fake libnvidia-ml.so.1 expects); FAKE_CUDA_DEVICES=1: one device instead of two.
 */
#include <dlfcn.h>  /* dlopen */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* getenv */
#include <string.h> /* memset */
#include <time.h>   /* clock_gettime, nanosleep */

/* the slow steps' milliseconds from the environment (the libcupti and libnvperf_host builds) */
static inline long env_ms(const char *name)
{
	const char *e = getenv(name);
	return e ? strtol(e, NULL, 10) : 0;
}
static inline void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (ms > 0 && nanosleep(&ts, &ts) != 0)
		;
}

#ifdef FAKE_LIBCUDA

typedef struct {
	unsigned char bytes[16];
} fake_uuid;
static int inited, init_done;
/* 1 once the first cuInit returned: CUPTI attaching after it attaches mid-run (the fake libcupti asks) */
int fake_cuda_init_done(void)
{
	return __atomic_load_n(&init_done, __ATOMIC_ACQUIRE);
}
int cuInit(unsigned flags)
{
	(void)flags;
	if (__atomic_fetch_add(&inited, 1, __ATOMIC_ACQ_REL)) {
		/* FAKE_CUDA_REINIT_HANG=1: a cuInit after CUPTI attached mid-run hangs in the real driver when
		 * it is a runtime's first (run 16: torch's libcudart coming up inside cudaMallocManaged, after
		 * CuPy's runtime brought CUDA up and nvlprof attached CUPTI); here it says so and aborts */
		int (*mid)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fake_cupti_attached_mid_run");
		if (getenv("FAKE_CUDA_REINIT_HANG") && mid && mid()) {
			fprintf(stderr, "fake libcuda: cuInit after CUPTI attached mid-run: the driver would "
			                "hang here (run 16)\n");
			abort();
		}
		return 0;
	}
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	if (inj && *inj) {
		void *h = dlopen(inj, RTLD_NOW);
		int (*f)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
		if (f)
			f();
	}
	__atomic_store_n(&init_done, 1, __ATOMIC_RELEASE);
	return 0;
}
int cuDriverGetVersion(int *v)
{
	*v = 13000;
	return 0;
}
/* Contexts: device d's primary context is 0x1000 + 0x100 * d (the fake libcupti decodes it). */
static __thread int cur_dev;
#define FAKE_CTX(d) ((void *)(uintptr_t)(0x1000 + 0x100 * (d)))
int cuCtxGetCurrent(void **ctx)
{
	*ctx = __atomic_load_n(&inited, __ATOMIC_ACQUIRE) ? FAKE_CTX(cur_dev) : NULL;
	return 0;
}
/* Make device dev current on this thread (the driver-API test's cuCtxSetCurrent). */
void fake_cuda_set_device(int dev)
{
	cur_dev = dev;
}
int cuStreamGetCtx(void *stream, void **ctx)
{
	(void)stream;
	*ctx = (void *)0x1000;
	return 0;
}
int cuCtxGetDevice(int *dev)
{
	*dev = cur_dev;
	return 0;
}
static int device_counts; /* cuDeviceGetCount calls: the sampler makes one per wake-up */
int cuDeviceGetCount(int *n)
{
	__atomic_fetch_add(&device_counts, 1, __ATOMIC_RELAXED);
	const char *e = getenv("FAKE_CUDA_DEVICES"); /* 1 or 2 (the default) */
	*n = e && atoi(e) == 1 ? 1 : 2;
	return 0;
}
int fake_cuda_device_counts(void)
{
	return __atomic_load_n(&device_counts, __ATOMIC_RELAXED);
}
/* PCI domain (FAKE_CUDA_PCI_DOMAIN, default 0), bus 0x18 + dev, device 0; 132 SMs; compute
 * capability FAKE_CUDA_CC ("M.m", default 9.0); every other attribute 0. */
static unsigned fake_pci_domain(void)
{
	const char *e = getenv("FAKE_CUDA_PCI_DOMAIN");
	return e ? (unsigned)strtoul(e, NULL, 0) : 0;
}
int cuDeviceGetAttribute(int *v, int attr, int dev)
{
	const char *cc = getenv("FAKE_CUDA_CC");
	int major = 9, minor = 0;
	if (cc && sscanf(cc, "%d.%d", &major, &minor) != 2)
		major = 9, minor = 0;
	*v = attr == 33   ? 0x18 + dev
	     : attr == 50 ? (int)fake_pci_domain()
	     : attr == 16 ? 132
	     : attr == 75 ? major
	     : attr == 76 ? minor
	                  : 0;
	return 0;
}
int cuDeviceGetName(char *name, int len, int dev)
{
	snprintf(name, (size_t)len, "Fake GPU %d", dev);
	return 0;
}
int cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
	(void)dev;
	*bytes = (size_t)141 << 30;
	return 0;
}
int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
	*flags = 0;
	*active = __atomic_load_n(&inited, __ATOMIC_ACQUIRE) && dev == 0;
	return 0;
}
int cuDeviceGetUuid_v2(fake_uuid *u, int dev)
{
	const char *e = getenv("FAKE_CUDA_UUID_BASE");
	unsigned base = e ? (unsigned)strtoul(e, NULL, 0) : 0xa0;
	for (int i = 0; i < 16; i++)
		u->bytes[i] = (unsigned char)(base + dev * 16 + i);
	return 0;
}
int cuDeviceGetPCIBusId(char *buf, int len, int dev)
{
	snprintf(buf, (size_t)len, "%08X:%02X:00.0", fake_pci_domain(), 0x18 + dev);
	return 0;
}
/* Pointer attributes (memory type 2, is-managed 8, device ordinal 9) from the fake cudart's memory
 * model when that library is in the process; unknown pointers get the driver's zero answer. */
static int drv_pointer_info(uint64_t p, int *type, int *dev);
int cuPointerGetAttributes(unsigned n, const int *attrs, void **data, unsigned long long ptr)
{
	/* looked up once found (bench_drv's loops), again while absent (cudart may come later) */
	static void (*cached)(const void *, int *, int *);
	static int misses;
	void (*info)(const void *, int *, int *) = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
	if (!info && __atomic_fetch_add(&misses, 1, __ATOMIC_RELAXED) < 64) {
		info = (void (*)(const void *, int *, int *))dlsym(RTLD_DEFAULT,
		                                                   "fake_cuda_pointer_info");
		__atomic_store_n(&cached, info, __ATOMIC_RELEASE);
	}
	int type = 0, dev = -1; /* cudaMemoryType: 0 unregistered, 1 host, 2 device, 3 managed */
	if (!drv_pointer_info(ptr, &type, &dev) && info)
		info((const void *)(uintptr_t)ptr, &type, &dev);
	for (unsigned i = 0; i < n; i++) {
		if (attrs[i] == 2)
			*(unsigned *)data[i] = type == 1 ? 1 : type == 2 || type == 3 ? 2 : 0;
		else if (attrs[i] == 8)
			*(unsigned *)data[i] = type == 3;
		else if (attrs[i] == 9)
			*(int *)data[i] = type >= 2 ? dev : -1;
		else
			return 1; /* CUDA_ERROR_INVALID_VALUE: not modelled */
	}
	return 0;
}

/*
 * Driver entry points of memory and peer access, for programs that reach the driver without the
 * runtime (CuPy's static runtime, JAX): each issues the CUPTI driver-API callbacks around its work
 * (through the fake libcupti's fake_cupti_driver_api, as the real driver calls into CUPTI), and the
 * fake cudart's managed calls echo theirs here (fake_cuda_drv_echo) as the real runtime's inner
 * driver calls would. Memory: device arenas bump-allocated per device, managed blocks malloc'ed.
 */
#include <cupti_driver_cbid.h> /* CUPTI_DRIVER_TRACE_CBID_* */
#include <pthread.h>           /* pthread_mutex_t */
#include <sys/mman.h>          /* mmap */

typedef void (*fake_api_fn)(unsigned cbid, const char *name, const void *params, int site,
                            int *rc, uint64_t *corr, void *ctx);
static fake_api_fn api_fn(void)
{
	static fake_api_fn f;
	static int looked;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&f, (fake_api_fn)dlsym(RTLD_DEFAULT, "fake_cupti_driver_api"),
		                 __ATOMIC_RELEASE);
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&f, __ATOMIC_ACQUIRE);
}
void fake_cuda_drv_echo(unsigned cbid, const char *name, const void *params, int site, int *rc,
                        uint64_t *corr)
{
	fake_api_fn f = api_fn();
	if (f)
		f(cbid, name, params, site, rc, corr,
		  __atomic_load_n(&inited, __ATOMIC_ACQUIRE) ? FAKE_CTX(cur_dev) : NULL);
}
#define API(name, params, ...)                                                                    \
	do {                                                                                       \
		uint64_t corr_ = 0;                                                                \
		int rc_ = 0;                                                                       \
		fake_cuda_drv_echo(CUPTI_DRIVER_TRACE_CBID_##name, #name, &params, 0, &rc_,        \
		                   &corr_);                                                        \
		__VA_ARGS__;                                                                       \
		fake_cuda_drv_echo(CUPTI_DRIVER_TRACE_CBID_##name, #name, &params, 1, &rc_,        \
		                   &corr_);                                                        \
		return rc_;                                                                        \
	} while (0)

#define DRV_MAX_DEV 4
#define FAKE_KIND_UM 25 /* CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER (no cupti_activity.h on this side) */
#define DRV_ARENA (64ull << 20)
#define DRV_MAX_MANAGED 256
static pthread_mutex_t drv_mu = PTHREAD_MUTEX_INITIALIZER;
static char *drv_arena[DRV_MAX_DEV];
static size_t drv_used[DRV_MAX_DEV];
static struct {
	char *p;
	size_t n;
	int dev;
} drv_managed[DRV_MAX_MANAGED];

/* @return 1 if p is driver-allocated memory (type, dev filled), else 0 */
static int drv_pointer_info(uint64_t p, int *type, int *dev)
{
	int hit = 0;
	pthread_mutex_lock(&drv_mu);
	for (int d = 0; d < DRV_MAX_DEV && !hit; d++)
		if (drv_arena[d] && p >= (uintptr_t)drv_arena[d] &&
		    p < (uintptr_t)drv_arena[d] + DRV_ARENA)
			*type = 2, *dev = d, hit = 1;
	for (int i = 0; i < DRV_MAX_MANAGED && !hit; i++)
		if (drv_managed[i].p && p >= (uintptr_t)drv_managed[i].p &&
		    p < (uintptr_t)drv_managed[i].p + drv_managed[i].n)
			*type = 3, *dev = drv_managed[i].dev, hit = 1;
	pthread_mutex_unlock(&drv_mu);
	return hit;
}

struct p_alloc_managed {
	uint64_t *dptr;
	size_t bytesize;
	unsigned flags;
};
int cuMemAllocManaged(uint64_t *dptr, size_t n, unsigned flags)
{
	struct p_alloc_managed p = {dptr, n, flags};
	API(cuMemAllocManaged, p, {
		char *m = n ? malloc(n) : NULL;
		rc_ = 2; /* CUDA_ERROR_OUT_OF_MEMORY */
		pthread_mutex_lock(&drv_mu);
		for (int i = 0; m && i < DRV_MAX_MANAGED; i++)
			if (!drv_managed[i].p) {
				drv_managed[i].p = m, drv_managed[i].n = n;
				drv_managed[i].dev = cur_dev;
				rc_ = 0;
				break;
			}
		pthread_mutex_unlock(&drv_mu);
		if (rc_)
			free(m);
		else
			*dptr = (uintptr_t)m;
	});
}
struct p_alloc {
	uint64_t *dptr;
	size_t bytesize;
};
int cuMemAlloc_v2(uint64_t *dptr, size_t n)
{
	struct p_alloc p = {dptr, n};
	API(cuMemAlloc_v2, p, {
		n = (n + 255) & ~(size_t)255;
		rc_ = 2;
		pthread_mutex_lock(&drv_mu);
		if (!drv_arena[cur_dev]) {
			void *a = mmap(NULL, DRV_ARENA, PROT_READ | PROT_WRITE,
			               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			drv_arena[cur_dev] = a == MAP_FAILED ? NULL : a;
		}
		if (drv_arena[cur_dev] && drv_used[cur_dev] + n <= DRV_ARENA) {
			*dptr = (uintptr_t)drv_arena[cur_dev] + drv_used[cur_dev];
			drv_used[cur_dev] += n;
			rc_ = 0;
		}
		pthread_mutex_unlock(&drv_mu);
	});
}
struct p_free {
	uint64_t dptr;
};
int cuMemFree_v2(uint64_t ptr)
{
	struct p_free p = {ptr};
	API(cuMemFree_v2, p, {
		char *m = NULL;
		int in_arena = 0;
		pthread_mutex_lock(&drv_mu);
		for (int d = 0; d < DRV_MAX_DEV; d++)
			in_arena |= drv_arena[d] && ptr >= (uintptr_t)drv_arena[d] &&
			            ptr < (uintptr_t)drv_arena[d] + DRV_ARENA;
		for (int i = 0; i < DRV_MAX_MANAGED; i++)
			if (drv_managed[i].p && (uintptr_t)drv_managed[i].p == ptr) {
				m = drv_managed[i].p;
				drv_managed[i].p = NULL;
			}
		pthread_mutex_unlock(&drv_mu);
		free(m);
		rc_ = m || in_arena ? 0 : 1; /* CUDA_ERROR_INVALID_VALUE */
	});
}
struct p_copy3 {
	uint64_t dst, src;
	size_t n;
	void *stream;
};
#define COPY3(name, async)                                                                         \
	int name(uint64_t dst, uint64_t src, size_t n, void *stream)                               \
	{                                                                                          \
		struct p_copy3 p = {dst, src, n, async ? stream : NULL};                           \
		API(name, p, memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n));   \
	}
COPY3(cuMemcpyHtoD_v2, 0)
COPY3(cuMemcpyDtoH_v2, 0)
COPY3(cuMemcpyDtoD_v2, 0)
COPY3(cuMemcpyAsync, 1)
COPY3(cuMemcpyDtoDAsync_v2, 1)
struct p_peer_copy {
	uint64_t dst;
	void *dctx;
	uint64_t src;
	void *sctx;
	size_t n;
};
int cuMemcpyPeer(uint64_t dst, void *dctx, uint64_t src, void *sctx, size_t n)
{
	struct p_peer_copy p = {dst, dctx, src, sctx, n};
	API(cuMemcpyPeer, p, memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n));
}
struct p_loc {
	int type, id;
};
struct p_prefetch {
	uint64_t ptr;
	size_t n;
	struct p_loc loc;
	unsigned flags;
	void *stream;
};
int cuMemPrefetchAsync_v2(uint64_t ptr, size_t n, struct p_loc loc, unsigned flags, void *st)
{
	struct p_prefetch p = {ptr, n, loc, flags, st};
	/* FAKE_CUPTI_UM_PER_PREFETCH=N: a prefetch migrates pages, N unified-memory counter records
	 * in the fake libcupti while that kind is enabled (CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) */
	const char *um = getenv("FAKE_CUPTI_UM_PER_PREFETCH");
	int (*on)(int) = um ? (int (*)(int))dlsym(RTLD_DEFAULT, "fake_cupti_enabled") : NULL;
	void (*gen)(int, int) = um ? (void (*)(int, int))dlsym(RTLD_DEFAULT, "fake_cupti_generate") : NULL;
	if (on && gen && on(FAKE_KIND_UM))
		gen(FAKE_KIND_UM, atoi(um));
	API(cuMemPrefetchAsync_v2, p, {});
}
struct p_advise {
	uint64_t ptr;
	size_t n;
	int advice;
	struct p_loc loc;
};
int cuMemAdvise_v2(uint64_t ptr, size_t n, int advice, struct p_loc loc)
{
	struct p_advise p = {ptr, n, advice, loc};
	API(cuMemAdvise_v2, p, {});
}
static unsigned char drv_peer[DRV_MAX_DEV][DRV_MAX_DEV];
struct p_peer {
	void *ctx;
	unsigned flags;
};
int cuCtxEnablePeerAccess(void *peer_ctx, unsigned flags)
{
	struct p_peer p = {peer_ctx, flags};
	int peer = (int)(((uintptr_t)peer_ctx - 0x1000) / 0x100) % DRV_MAX_DEV;
	API(cuCtxEnablePeerAccess, p, {
		rc_ = __atomic_exchange_n(&drv_peer[cur_dev][peer], 1, __ATOMIC_ACQ_REL) ? 704 : 0;
	});
}
void *fake_cuda_ctx(int dev)
{
	return FAKE_CTX(dev);
}

#elif defined(FAKE_NVPERF)

#include <stdlib.h> /* abort */

#include <cupti_profiler_host.h> /* CUpti_Profiler_Host_* params */

/* The library's static state, destroyed at exit like a C++ global's (registered when loaded). */
struct nvperf_state {
	int metrics;
};
static struct nvperf_state *state;
static void destroy(void)
{
	free(state);
	state = NULL;
}
/* FAKE_NVPERF_CTOR_MS=n: the constructors take n ms before the destructor is registered (the real
 * library is large: loaded and counted in dl_iterate_phdr's adds, its initialisers still running) */
__attribute__((constructor)) static void load(void)
{
	sleep_ms(env_ms("FAKE_NVPERF_CTOR_MS"));
	state = (struct nvperf_state *)calloc(1, sizeof *state);
	atexit(destroy);
}
static void alive(const char *fn)
{
	if (state)
		return;
	fprintf(stderr, "fake libnvperf_host: %s called after the exit-time destructor\n", fn);
	abort();
}

/* env=n: this call takes n ms, fake_cupti_pm_progress() saying p meanwhile (so that a program can
 * exit in the middle of it) */
static void slow_call(const char *env, int p)
{
	const char *slow = getenv(env);
	if (!slow || !*slow)
		return;
	void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "fake_cupti_pm_set_progress");
	if (set)
		set(p);
	sleep_ms(env_ms(env));
}

extern "C" {
CUptiResult fake_nvperf_init(CUpti_Profiler_Host_Initialize_Params *p)
{
	alive(__func__);
	p->pHostObject = (CUpti_Profiler_Host_Object *)state;
	return CUPTI_SUCCESS;
}
CUptiResult fake_nvperf_deinit(CUpti_Profiler_Host_Deinitialize_Params *p)
{
	(void)p;
	alive(__func__);
	return CUPTI_SUCCESS;
}
CUptiResult fake_nvperf_add_metrics(CUpti_Profiler_Host_ConfigAddMetrics_Params *p)
{
	/* FAKE_NVPERF_SLOW_MS=n: the config's host calls take their time (the real ones build an
	 * image): progress 5 while this one sleeps, so a program can exit in the middle of them */
	slow_call("FAKE_NVPERF_SLOW_MS", 5);
	alive(__func__);
	state->metrics = (int)p->numMetrics;
	return CUPTI_SUCCESS;
}
CUptiResult fake_nvperf_image_size(CUpti_Profiler_Host_GetConfigImageSize_Params *p)
{
	alive(__func__);
	p->configImageSize = 64;
	return CUPTI_SUCCESS;
}
CUptiResult fake_nvperf_image(CUpti_Profiler_Host_GetConfigImage_Params *p)
{
	alive(__func__);
	memset(p->pConfigImage, 0x5a, p->configImageSize);
	return CUPTI_SUCCESS;
}
CUptiResult fake_nvperf_passes(CUpti_Profiler_Host_GetNumOfPasses_Params *p)
{
	alive(__func__);
	p->numOfPasses = 1;
	return CUPTI_SUCCESS;
}
CUptiResult fake_nvperf_evaluate(CUpti_Profiler_Host_EvaluateToGpuValues_Params *p)
{
	slow_call("FAKE_NVPERF_EVAL_MS", 6);
	alive(__func__);
	for (size_t i = 0; i < p->numMetrics; i++)
		p->pMetricValues[i] = 1000.0 * (double)(i + 1);
	return CUPTI_SUCCESS;
}
}

#else /* libcupti */

#include <cupti.h>
#include <pthread.h> /* pthread_mutex_t */

/* CUPTI is thread-safe: record production (the application's thread) and flushes (the shim's
 * sampler thread) take this lock. Recursive: a completion callback may call back into CUPTI. */
static pthread_mutex_t act_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static CUpti_BuffersCallbackRequestFunc req_cb;
static CUpti_BuffersCallbackCompleteFunc comp_cb;
static int attached_mid_run; /* buffers registered after the first cuInit returned */
static CUpti_TimestampCallbackFunc ts_cb;
static unsigned char enabled[CUPTI_ACTIVITY_KIND_COUNT];
static int pending[CUPTI_ACTIVITY_KIND_COUNT];
static int finalize_calls, dropped_reported;
/* cuptiFinalize's state (below): where it was called from, and calls after it */
static __thread int in_callback;
static int finalized, finalize_in_cb, after_finalize;
static void fin_check(const char *fn)
{
	if (!__atomic_load_n(&finalized, __ATOMIC_ACQUIRE))
		return;
	__atomic_fetch_add(&after_finalize, 1, __ATOMIC_RELAXED);
	fprintf(stderr, "fake cupti: %s after cuptiFinalize (CUPTI attaches again)\n", fn);
}
static uint64_t serial;

void fake_cupti_generate(int kind, int n)
{
	pthread_mutex_lock(&act_mu);
	pending[kind] += n;
	pthread_mutex_unlock(&act_mu);
}
int fake_cupti_enabled(int kind)
{
	pthread_mutex_lock(&act_mu); /* nvlprof's flush thread turns kinds on and off */
	int on = enabled[kind];
	pthread_mutex_unlock(&act_mu);
	return on;
}
int fake_cupti_finalize_calls(void)
{
	return finalize_calls;
}
/* the buffer-request callback registered with this CUPTI now (whose buffers it fills) */
void *fake_cupti_request_callback(void)
{
	pthread_mutex_lock(&act_mu);
	void *f = (void *)req_cb;
	pthread_mutex_unlock(&act_mu);
	return f;
}
/* Request a buffer now and fill it at the next flush (a buffer in flight across a change of
 * callbacks, as CUPTI holds one while records accumulate). */
static uint8_t *held;
static size_t held_size, held_used;
void fake_cupti_hold_buffer(void)
{
	size_t max = 0;
	pthread_mutex_lock(&act_mu);
	if (req_cb && !held) {
		req_cb(&held, &held_size, &max);
		held_used = 0;
	}
	pthread_mutex_unlock(&act_mu);
}

static size_t rec_size(int kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		return sizeof(CUpti_ActivityMemcpyPtoP4);
	case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER:
		return sizeof(CUpti_ActivityUnifiedMemoryCounter3);
	case CUPTI_ACTIVITY_KIND_NVLINK:
		return sizeof(CUpti_ActivityNvLink4);
	case CUPTI_ACTIVITY_KIND_DEVICE:
		return sizeof(CUpti_ActivityDevice5);
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return sizeof(CUpti_ActivityAPI);
	default:
		return 0;
	}
}

static uint64_t now_ts(void)
{
	if (ts_cb)
		return ts_cb();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *const kernel_names[2] = {"ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                            "gemm_bf16_128x128"};

static void fill(uint8_t *p, int kind, uint64_t i)
{
	uint64_t t = now_ts();
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		CUpti_ActivityKernel10 *k = (void *)p;
		k->start = t, k->end = t + 1000 + i;
		k->deviceId = (uint32_t)(i % 2), k->contextId = 1, k->streamId = 7;
		k->correlationId = (uint32_t)i + 1;
		k->gridX = 4, k->gridY = 1, k->gridZ = 1, k->blockX = 256, k->blockY = 1,
		k->blockZ = 1;
		k->name = kernel_names[i % 2];
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		CUpti_ActivityMemcpy6 *m = (void *)p;
		m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, m->srcKind = 3, m->dstKind = 2;
		m->bytes = 1 << 20, m->start = t, m->end = t + 5000;
		m->deviceId = 1, m->contextId = 1, m->streamId = 7, m->correlationId = (uint32_t)i;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		CUpti_ActivityMemcpyPtoP4 *m = (void *)p;
		m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, m->srcKind = 3, m->dstKind = 3;
		m->bytes = 256 << 20, m->start = t, m->end = t + 700000;
		m->deviceId = 0, m->srcDeviceId = 0, m->dstDeviceId = 1, m->streamId = 7;
		break;
	}
	case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
		CUpti_ActivityUnifiedMemoryCounter3 *u = (void *)p;
		u->counterKind = (CUpti_ActivityUnifiedMemoryCounterKind)(1 + i % 8);
		u->value = 65536, u->start = t, u->end = t + 2000,
		u->address = 0x7f0000000000 + i * 65536;
		u->srcId = 0, u->dstId = 1, u->streamId = 7, u->processId = 42;
		break;
	}
	case CUPTI_ACTIVITY_KIND_NVLINK: {
		CUpti_ActivityNvLink4 *n = (void *)p;
		n->nvlinkVersion = 4, n->typeDev0 = CUPTI_DEV_TYPE_GPU,
		n->typeDev1 = CUPTI_DEV_TYPE_GPU;
		for (int b = 0; b < 16; b++) {
			n->idDev0.uuidDev.bytes[b] = (char)(0xa0 + b);
			n->idDev1.uuidDev.bytes[b] = (char)(0xb0 + b);
		}
		memset(n->portDev0, -1, sizeof n->portDev0);
		memset(n->portDev1, -1, sizeof n->portDev1);
		n->portDev0[0] = 0, n->portDev0[1] = 5, n->portDev1[0] = 3;
		n->physicalNvLinkCount = 18, n->bandwidth = 26562500000ull,
		n->nvswitchConnected = 1;
		break;
	}
	case CUPTI_ACTIVITY_KIND_DEVICE: {
		CUpti_ActivityDevice5 *d = (void *)p;
		d->id = (uint32_t)(i % 2);
		for (int b = 0; b < 16; b++)
			d->uuid.bytes[b] = (char)(0xa0 + (i % 2) * 16 + b);
		d->name = "Fake H200";
		d->numMultiprocessors = 132, d->globalMemorySize = 141ull << 30;
		d->computeCapabilityMajor = 9, d->computeCapabilityMinor = 0;
		break;
	}
	default: {
		CUpti_ActivityAPI *a = (void *)p;
		a->start = t, a->end = t + 100, a->correlationId = (uint32_t)i;
		break;
	}
	}
}

/* External correlation: one stack of ids per kind and thread, as CUPTI keeps them; popping an
 * empty stack is an error, as in CUPTI. */
#define FAKE_XC_DEPTH 256
static __thread uint64_t xc_stack[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE][FAKE_XC_DEPTH];
static __thread int xc_n[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];
CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	if ((unsigned)kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE || kind == 0)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (xc_n[kind] == FAKE_XC_DEPTH)
		return CUPTI_ERROR_UNKNOWN;
	xc_stack[kind][xc_n[kind]++] = id;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last)
{
	if ((unsigned)kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE || kind == 0)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (xc_n[kind] == 0)
		return CUPTI_ERROR_QUEUE_EMPTY;
	uint64_t v = xc_stack[kind][--xc_n[kind]];
	if (last)
		*last = v;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetVersion(uint32_t *v)
{
	const char *e = getenv("FAKE_CUPTI_VERSION");
	*v = e ? (uint32_t)strtoul(e, NULL, 10) : CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	*s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "FAKE_CUPTI_ERROR";
	return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                           CUpti_BuffersCallbackCompleteFunc c)
{
	fin_check("cuptiActivityRegisterCallbacks");
	if (getenv("FAKE_CUPTI_REGISTER_FAIL")) /* another tool owns CUPTI */
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	int (*done)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_init_done");
	pthread_mutex_lock(&act_mu);
	req_cb = r, comp_cb = c;
	if (done && done())
		attached_mid_run = 1;
	pthread_mutex_unlock(&act_mu);
	return CUPTI_SUCCESS;
}
/* 1 once activity buffers were registered after CUDA came up (not inside cuInit's injection) */
int fake_cupti_attached_mid_run(void)
{
	pthread_mutex_lock(&act_mu);
	int m = attached_mid_run;
	pthread_mutex_unlock(&act_mu);
	return m;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	fin_check("cuptiActivityEnable");
	if (!rec_size((int)k) && k != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
		return CUPTI_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&act_mu);
	enabled[k] = 1;
	pthread_mutex_unlock(&act_mu);
	return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	fin_check("cuptiActivityDisable");
	pthread_mutex_lock(&act_mu);
	enabled[k] = 0;
	pthread_mutex_unlock(&act_mu);
	return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnableContext(CUcontext c, CUpti_ActivityKind k)
{
	(void)c;
	return cuptiActivityEnable(k);
}
CUptiResult cuptiActivityDisableContext(CUcontext c, CUpti_ActivityKind k)
{
	(void)c;
	return cuptiActivityDisable(k);
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	uint8_t *p = *rec ? (uint8_t *)*rec + rec_size((int)(*rec)->kind) : buf;
	if (p + sizeof(CUpti_Activity) > buf + valid || !rec_size((int)((CUpti_Activity *)p)->kind))
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)p;
	return CUPTI_SUCCESS;
}
/* Write the pending records of enabled kinds into the buffer CUPTI holds (requesting one when
 * needed), completing buffers that fill up; the last one stays held until a flush. */
static CUptiResult produce(void)
{
	size_t max = 0;
	for (int k = 0; k < CUPTI_ACTIVITY_KIND_COUNT; k++) {
		for (; pending[k] > 0; pending[k]--) {
			if (!enabled[k])
				continue; /* a disabled kind produces nothing */
			size_t sz = rec_size(k);
			if (held && held_used + sz > held_size) {
				comp_cb(NULL, 0, held, held_size, held_used);
				held = NULL;
			}
			if (!held) {
				req_cb(&held, &held_size, &max);
				held_used = 0;
				if (!held || held_size < sz)
					return CUPTI_ERROR_OUT_OF_MEMORY;
			}
			memset(held + held_used, 0, sz);
			((CUpti_Activity *)(held + held_used))->kind = (CUpti_ActivityKind)k;
			fill(held + held_used, k, serial++);
			held_used += sz;
		}
	}
	return CUPTI_SUCCESS;
}
/* Record now what was generated (as the GPU does while a kind is enabled), without completing. */
void fake_cupti_materialize(void)
{
	pthread_mutex_lock(&act_mu);
	if (req_cb && comp_cb)
		produce();
	pthread_mutex_unlock(&act_mu);
}
CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	fin_check("cuptiActivityFlushAll");
	(void)flag;
	pthread_mutex_lock(&act_mu);
	if (!req_cb || !comp_cb) {
		pthread_mutex_unlock(&act_mu);
		return CUPTI_SUCCESS;
	}
	CUptiResult r = produce();
	if (held) {
		uint8_t *b = held;
		held = NULL;
		comp_cb(NULL, 0, b, held_size, held_used);
	}
	pthread_mutex_unlock(&act_mu);
	return r;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n)
{
	(void)c, (void)s;
	const char *e = getenv("FAKE_CUPTI_DROPPED");
	*n = (e && !dropped_reported++) ? strtoul(e, NULL, 10) : 0;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t *t)
{
	fin_check("cuptiGetTimestamp");
	*t = now_ts();
	return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	fin_check("cuptiActivityRegisterTimestampCallback");
	if (getenv("FAKE_CUPTI_NO_TS_CB"))
		return CUPTI_ERROR_NOT_SUPPORTED;
	ts_cb = f;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityConfigureUnifiedMemoryCounter(CUpti_ActivityUnifiedMemoryCounterConfig *c,
                                                       uint32_t n)
{
	fin_check("cuptiActivityConfigureUnifiedMemoryCounter");
	for (uint32_t i = 0; i < n; i++)
		if (c[i].scope != CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE)
			return CUPTI_ERROR_INVALID_PARAMETER;
	return CUPTI_SUCCESS;
}
/* FAKE_CUPTI_SID_SLOW_MS: the stream-id lookup of stream 0x9900 takes that long (a thread inside
 * a CUPTI call when another finalizes: fake_cupti_finalize_raced counts such finalizes) */
static int in_sid_calls, finalize_raced;
int fake_cupti_finalize_raced(void)
{
	return finalize_raced;
}
CUptiResult cuptiGetStreamIdEx(CUcontext c, CUstream s, uint8_t per_thread, uint32_t *id)
{
	fin_check("cuptiGetStreamIdEx");
	__atomic_fetch_add(&in_sid_calls, 1, __ATOMIC_SEQ_CST);
	if ((uintptr_t)s == 0x9900)
		sleep_ms(env_ms("FAKE_CUPTI_SID_SLOW_MS"));
	(void)c;
	*id = per_thread ? 3 : (uint32_t)(((uintptr_t)s >> 4) & 0xffff) + 7;
	__atomic_fetch_sub(&in_sid_calls, 1, __ATOMIC_SEQ_CST);
	return CUPTI_SUCCESS;
}
CUptiResult cuptiGetDeviceId(CUcontext c, uint32_t *dev)
{
	fin_check("cuptiGetDeviceId");
	uintptr_t x = (uintptr_t)c; /* the fake libcuda's contexts: 0x1000 + 0x100 * device */
	*dev = x >= 0x1000 && x < 0x1000 + 0x100 * 16 ? (uint32_t)((x - 0x1000) / 0x100) : 0;
	return CUPTI_SUCCESS;
}
/* cuptiFinalize, as CUPTI: buffers handed back, callbacks, kinds and the subscription dropped.
 * CUPTI documents calling it from an API callback's exit; fake_cupti_finalize_in_callback()
 * says where it came from. A CUPTI call after it attaches CUPTI again (its cost back): those
 * calls are counted (fake_cupti_calls_after_finalize) and named on stderr. */
int fake_cupti_finalize_in_callback(void)
{
	return finalize_in_cb;
}
int fake_cupti_calls_after_finalize(void)
{
	return __atomic_load_n(&after_finalize, __ATOMIC_RELAXED);
}
static void unsubscribe_all(void);
CUptiResult cuptiFinalize(void)
{
	pthread_mutex_lock(&act_mu);
	finalize_calls++;
	finalize_in_cb = in_callback;
	finalize_raced += __atomic_load_n(&in_sid_calls, __ATOMIC_SEQ_CST) > 0;
	if (held && comp_cb)
		comp_cb(NULL, 0, held, held_size, held_used);
	held = NULL;
	req_cb = NULL, comp_cb = NULL, ts_cb = NULL;
	memset(enabled, 0, sizeof enabled);
	unsubscribe_all();
	__atomic_store_n(&finalized, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&act_mu);
	return CUPTI_SUCCESS;
}
/*
 * The callback API: one subscriber per process, as CUPTI (a second cuptiSubscribe fails with
 * MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). The fake libcuda issues driver-API callbacks through
 * fake_cupti_driver_api; fake_cupti_fire issues one of any domain (a resource callback, say).
 * fake_cupti_cb_enabled(domain, cbid) and fake_cupti_cb_calls() let tests check the real state.
 */
#define FAKE_MAXCB 2048
static CUpti_CallbackFunc sub_cb;
static void *sub_data;
static int subscribed;
static unsigned char cb_on[CUPTI_CB_DOMAIN_SIZE][FAKE_MAXCB];
static uint64_t cb_calls;
#define SUB_HANDLE ((CUpti_SubscriberHandle)(uintptr_t)0x5ab)
static CUptiResult subscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc f, void *d)
{
	if (!s)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&act_mu);
	CUptiResult r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	if (!subscribed) {
		subscribed = 1, sub_cb = f, sub_data = d;
		memset(cb_on, 0, sizeof cb_on);
		*s = SUB_HANDLE;
		r = CUPTI_SUCCESS;
	}
	pthread_mutex_unlock(&act_mu);
	return r;
}
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc f, void *d)
{
	fin_check("cuptiSubscribe");
	return subscribe(s, f, d);
}
CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc f, void *d,
                              CUpti_SubscriberParams *p)
{
	CUptiResult r = subscribe(s, f, d); /* not through the exported name (nvlprof's) */
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && p && p->oldSubscriberName &&
	    p->oldSubscriberSize)
		snprintf(p->oldSubscriberName, p->oldSubscriberSize, "CUPTI for fake tool");
	return r;
}
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
	if (s != SUB_HANDLE || !subscribed)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&act_mu);
	subscribed = 0, sub_cb = NULL;
	memset(cb_on, 0, sizeof cb_on);
	pthread_mutex_unlock(&act_mu);
	return CUPTI_SUCCESS;
}
static int bad_sub(CUpti_SubscriberHandle s, int d)
{
	return s != SUB_HANDLE || !subscribed || d <= 0 || d >= CUPTI_CB_DOMAIN_SIZE;
}
CUptiResult cuptiEnableCallback(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
                                CUpti_CallbackId cbid)
{
	fin_check("cuptiEnableCallback");
	if (bad_sub(s, (int)d) || cbid >= FAKE_MAXCB)
		return CUPTI_ERROR_INVALID_PARAMETER;
	__atomic_store_n(&cb_on[d][cbid], (unsigned char)(en != 0), __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableDomain(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d)
{
	fin_check("cuptiEnableDomain");
	if (bad_sub(s, (int)d))
		return CUPTI_ERROR_INVALID_PARAMETER;
	memset(cb_on[d], en != 0, FAKE_MAXCB);
	return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableAllDomains(uint32_t en, CUpti_SubscriberHandle s)
{
	if (bad_sub(s, 1))
		return CUPTI_ERROR_INVALID_PARAMETER;
	for (int d = 1; d < CUPTI_CB_DOMAIN_SIZE; d++)
		memset(cb_on[d], en != 0, FAKE_MAXCB);
	return CUPTI_SUCCESS;
}
CUptiResult cuptiGetCallbackState(uint32_t *en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
                                  CUpti_CallbackId cbid)
{
	if (bad_sub(s, (int)d) || cbid >= FAKE_MAXCB || !en)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*en = cb_on[d][cbid];
	return CUPTI_SUCCESS;
}
int fake_cupti_cb_enabled(int d, int cbid)
{
	return d > 0 && d < CUPTI_CB_DOMAIN_SIZE && cbid >= 0 && cbid < FAKE_MAXCB &&
	       __atomic_load_n(&cb_on[d][cbid], __ATOMIC_RELAXED);
}
uint64_t fake_cupti_cb_calls(void)
{
	return __atomic_load_n(&cb_calls, __ATOMIC_RELAXED);
}
static void issue(int d, unsigned cbid, const void *data)
{
	CUpti_CallbackFunc f = sub_cb;
	if (!subscribed || !f || cbid >= FAKE_MAXCB || !__atomic_load_n(&cb_on[d][cbid], __ATOMIC_RELAXED))
		return;
	__atomic_fetch_add(&cb_calls, 1, __ATOMIC_RELAXED);
	in_callback = 1;
	f(sub_data, (CUpti_CallbackDomain)d, (CUpti_CallbackId)cbid, data);
	in_callback = 0;
}
static void unsubscribe_all(void)
{
	subscribed = 0, sub_cb = NULL;
	memset(cb_on, 0, sizeof cb_on);
}
/* A driver-API callback (site 0 enter, 1 exit), as the driver issues them around its work. */
void fake_cupti_driver_api(unsigned cbid, const char *name, const void *params, int site, int *rc,
                           uint64_t *corr, void *ctx)
{
	static uint32_t corr_ids;
	CUpti_CallbackData cd = {
	    .callbackSite = site ? CUPTI_API_EXIT : CUPTI_API_ENTER,
	    .functionName = name,
	    .functionParams = params,
	    .functionReturnValue = rc,
	    .context = (CUcontext)ctx,
	    .correlationData = corr,
	    .correlationId = __atomic_add_fetch(&corr_ids, site ? 0 : 1, __ATOMIC_RELAXED),
	};
	issue(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cd);
}
/* A callback of any domain with no data of its own (resource, synchronize...). */
void fake_cupti_fire(int d, unsigned cbid)
{
	if (d > 0 && d < CUPTI_CB_DOMAIN_SIZE)
		issue(d, cbid, NULL);
}

/* ---- PM sampling ---- */
#include <cupti_pmsampling.h>      /* CUpti_PmSampling_* params */
#include <cupti_profiler_target.h> /* cuptiProfilerInitialize */
#include <cupti_target.h>          /* cuptiDeviceGetChipName */

static int pm_progress;
int fake_cupti_pm_progress(void)
{
	return __atomic_load_n(&pm_progress, __ATOMIC_ACQUIRE);
}
static void progress(int p)
{
	__atomic_store_n(&pm_progress, p, __ATOMIC_RELEASE);
}
/* the fake libnvperf_host's way to say where it is (5: sleeping in add-metrics) */
void fake_cupti_pm_set_progress(int p)
{
	progress(p);
}
static void slow_step(void)
{
	sleep_ms(env_ms("FAKE_CUPTI_PM_SLOW_MS"));
}
static uint64_t realtime(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* GPU time, as the driver syncs PTIMER */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params *p)
{
	fin_check("cuptiProfilerInitialize");
	(void)p;
	if (!getenv("FAKE_CUPTI_PM"))
		return CUPTI_ERROR_NOT_SUPPORTED;
	slow_step();
	progress(1);
	return CUPTI_SUCCESS;
}
CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params *p)
{
	p->pChipName = "GH100";
	return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params *p)
{
	if (!p->pCounterAvailabilityImage) {
		p->counterAvailabilityImageSize = 32;
		return CUPTI_SUCCESS;
	}
	slow_step();
	memset(p->pCounterAvailabilityImage, 1, p->counterAvailabilityImageSize);
	return CUPTI_SUCCESS;
}

/* The host side: forwarded to libnvperf_host.so, loaded on first use like the real one. */
typedef CUptiResult (*host_fn)(void *);
static struct {
	host_fn init, deinit, add_metrics, image_size, image, passes, evaluate;
} H;
static int host_load(void)
{
	if (H.init)
		return 0;
	Dl_info di;
	char path[4096];
	if (!dladdr((void *)host_load, &di) || !di.dli_fname)
		return -1;
	const char *slash = strrchr(di.dli_fname, '/');
	snprintf(path, sizeof path, "%.*s/libnvperf_host.so",
	         slash ? (int)(slash - di.dli_fname) : 1, slash ? di.dli_fname : ".");
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	H.deinit = (host_fn)dlsym(h, "fake_nvperf_deinit");
	H.add_metrics = (host_fn)dlsym(h, "fake_nvperf_add_metrics");
	H.image_size = (host_fn)dlsym(h, "fake_nvperf_image_size");
	H.image = (host_fn)dlsym(h, "fake_nvperf_image");
	H.passes = (host_fn)dlsym(h, "fake_nvperf_passes");
	H.evaluate = (host_fn)dlsym(h, "fake_nvperf_evaluate");
	H.init = (host_fn)dlsym(h, "fake_nvperf_init");
	return H.init ? 0 : -1;
}
CUptiResult cuptiProfilerHostInitialize(void *p)
{
	if (host_load() != 0)
		return CUPTI_ERROR_NOT_SUPPORTED;
	progress(2);
	return H.init(p);
}
#define HOST_FORWARD(name, member)                                                                 \
	CUptiResult name(void *p)                                                                  \
	{                                                                                          \
		return H.member ? H.member(p) : CUPTI_ERROR_NOT_INITIALIZED;                       \
	}
HOST_FORWARD(cuptiProfilerHostDeinitialize, deinit)
HOST_FORWARD(cuptiProfilerHostConfigAddMetrics, add_metrics)
HOST_FORWARD(cuptiProfilerHostGetConfigImageSize, image_size)
HOST_FORWARD(cuptiProfilerHostGetConfigImage, image)
HOST_FORWARD(cuptiProfilerHostGetNumOfPasses, passes)
HOST_FORWARD(cuptiProfilerHostEvaluateToGpuValues, evaluate)

/* One sampling object per device; the counter data image holds this header. */
static struct pm_obj {
	int enabled, started;
	uint64_t last; /* GPU time of the previous sample's end */
} pm_objs[2];
#define IMG_CAP 8 /* samples an image holds until it is initialised again */
struct image {
	size_t n;
	uint64_t start[IMG_CAP], end[IMG_CAP];
};
static struct pm_obj *obj(CUpti_PmSampling_Object *o)
{
	return (struct pm_obj *)(void *)o;
}

CUptiResult cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params *p)
{
	if (p->deviceIndex >= 2)
		return CUPTI_ERROR_INVALID_DEVICE;
	if (getenv("FAKE_CUPTI_PM_BUSY")) /* another tool (DCGM profiling, Nsight Compute) holds it */
		return CUPTI_ERROR_HARDWARE_BUSY;
	progress(3);
	slow_step();
	sleep_ms(env_ms("FAKE_CUPTI_PM_ENABLE_MS"));
	pm_objs[p->deviceIndex].enabled = 1;
	p->pPmSamplingObject = (CUpti_PmSampling_Object *)(void *)&pm_objs[p->deviceIndex];
	return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params *p)
{
	slow_step();
	return obj(p->pPmSamplingObject)->enabled ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params *p)
{
	p->counterDataSize = sizeof(struct image);
	return CUPTI_SUCCESS;
}
CUptiResult
cuptiPmSamplingCounterDataImageInitialize(CUpti_PmSampling_CounterDataImage_Initialize_Params *p)
{
	if (p->counterDataSize < sizeof(struct image))
		return CUPTI_ERROR_INVALID_PARAMETER;
	memset(p->pCounterData, 0, sizeof(struct image));
	return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingStart(CUpti_PmSampling_Start_Params *p)
{
	struct pm_obj *o = obj(p->pPmSamplingObject);
	o->started = 1;
	o->last = realtime();
	progress(4);
	return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params *p)
{
	obj(p->pPmSamplingObject)->started = 0;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params *p)
{
	obj(p->pPmSamplingObject)->enabled = 0;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params *p)
{
	struct pm_obj *o = obj(p->pPmSamplingObject);
	struct image *im = (struct image *)(void *)p->pCounterDataImage;
	if (!o->enabled || p->counterDataImageSize < sizeof *im)
		return CUPTI_ERROR_INVALID_PARAMETER;
	/* like CUPTI, decoded samples are added to the image until it is initialised again */
	uint64_t now = realtime(), mid = o->last + (now - o->last) / 2;
	p->decodeStopReason = CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
	if (now > o->last + 2 && im->n + 2 > IMG_CAP)
		p->decodeStopReason = CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
	else if (now > o->last + 2) {
		im->start[im->n] = o->last, im->end[im->n++] = mid;
		im->start[im->n] = mid, im->end[im->n++] = now;
		o->last = now;
	}
	p->overflow = 0;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params *p)
{
	const struct image *im = (const struct image *)(const void *)p->pCounterDataImage;
	p->numTotalSamples = IMG_CAP;
	p->numPopulatedSamples = p->numCompletedSamples = im->n;
	return CUPTI_SUCCESS;
}
CUptiResult
cuptiPmSamplingCounterDataGetSampleInfo(CUpti_PmSampling_CounterData_GetSampleInfo_Params *p)
{
	const struct image *im = (const struct image *)(const void *)p->pCounterDataImage;
	if (p->sampleIndex >= im->n)
		return CUPTI_ERROR_INVALID_PARAMETER;
	p->startTimestamp = im->start[p->sampleIndex];
	p->endTimestamp = im->end[p->sampleIndex];
	return CUPTI_SUCCESS;
}

#endif

/* cupti_presence.c: which part of CUPTI's mere presence costs a job's launching thread, without
 * nvlprof. LD_PRELOAD it with CUPTI_PRESENCE=PARTS (dot-separated); it does those parts once, as
 * nvlprof's default would, and nothing else:
 *   inj    do the parts inside cuInit, as the driver's injection (CUDA_INJECTION64_PATH = this
 *          library; InitializeInjection), instead of in this library's constructor
 *   reg    cuptiActivityRegisterCallbacks (buffers of 1 MiB, freed when CUPTI hands them back)
 *   kinds  the DEVICE and NVLINK activity kinds on (nvlprof's topology records)
 *   kern   the CONCURRENT_KERNEL activity kind on (a record per kernel: what NVLPROF_KERNELS=all
 *          asks of CUPTI, without nvlprof's hooks or its decoding of the records)
 *   ts     cuptiActivityRegisterTimestampCallback (CLOCK_MONOTONIC, as nvlprof's clock.c)
 *   sub    cuptiSubscribe, no callback enabled
 *   drv    sub + the driver-API callbacks of nvlprof's default (copies, managed memory, peer)
 *   fin    cuptiFinalize after the other parts (CUPTI detached again: what it leaves behind)
 *   late   cuptiFinalize later, as NVLPROF_CUPTI=startup does but without nvlprof: a thread waits
 *          CUPTI_PRESENCE_LATE_MS ms (2000), flushes, turns the kinds off, flushes again, enables
 *          the runtime and driver domains, and the exit of the next API call finalizes (CUPTI's
 *          documented place); one line on stderr names that call. exit_hunt.sh's `cfin` lane:
 *          does cuptiFinalize corrupt the heap of a process nvlprof is not in (runs 11-13)?
 * overhead.py's configuration NAME=cupti:PARTS runs a worker this way (run_cost.sh tiny), and
 * MTPROF=1 then counts the launching thread's samples in libcupti for each. libcupti is dlopened
 * (CUPTI_PRESENCE_LIB when set, else libcupti.so.13, else libcupti.so). A failed step prints one line on
 * stderr and the job runs on. Test-only: never shipped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

static struct {
	void *lib;
	CUpti_SubscriberHandle sub;
	int kinds;
	int late; /* 0, 1 once the late finalize is due, 2 once done */
} cp;

static void *fn(const char *name)
{
	void *f = cp.lib ? dlsym(cp.lib, name) : NULL;
	if (!f)
		fprintf(stderr, "cupti_presence: %s not found\n", name);
	return f;
}

static void check(const char *what, CUptiResult r)
{
	if (r != CUPTI_SUCCESS)
		fprintf(stderr, "cupti_presence: %s: CUPTI error %d\n", what, (int)r);
}

static void CUPTIAPI buf_req(uint8_t **b, size_t *sz, size_t *max)
{
	*sz = 1 << 20;
	*b = aligned_alloc(8, *sz);
	*max = 0;
}

static void CUPTIAPI buf_done(CUcontext c, uint32_t s, uint8_t *b, size_t sz, size_t valid)
{
	(void)c, (void)s, (void)sz, (void)valid;
	free(b);
}

static uint64_t CUPTIAPI mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void CUPTIAPI on_call(void *u, CUpti_CallbackDomain d, CUpti_CallbackId c, const void *p)
{
	(void)u, (void)c;
	if (d != CUPTI_CB_DOMAIN_RUNTIME_API && d != CUPTI_CB_DOMAIN_DRIVER_API)
		return;
	const CUpti_CallbackData *cd = p;
	int due = 1;
	if (!cd || cd->callbackSite != CUPTI_API_EXIT ||
	    !__atomic_compare_exchange_n(&cp.late, &due, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	typedef CUptiResult (*fin_t)(void);
	fin_t fin = (fin_t)fn("cuptiFinalize");
	CUptiResult r = fin ? fin() : CUPTI_ERROR_UNKNOWN;
	fprintf(stderr, "cupti_presence: late: cuptiFinalize at the exit of %s: %d\n",
	        cd->functionName ? cd->functionName : "?", (int)r);
}

/* part late: the detach NVLPROF_CUPTI=startup makes, without nvlprof */
static void *late_thread(void *arg)
{
	(void)arg;
	const char *e = getenv("CUPTI_PRESENCE_LATE_MS");
	long ms = e && *e ? atol(e) : 2000;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	typedef CUptiResult (*flush_t)(uint32_t);
	typedef CUptiResult (*kind_t)(CUpti_ActivityKind);
	typedef CUptiResult (*dom_t)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
	flush_t flush = (flush_t)fn("cuptiActivityFlushAll");
	kind_t dis = (kind_t)fn("cuptiActivityDisable");
	dom_t dom = (dom_t)fn("cuptiEnableDomain");
	if (flush)
		check("cuptiActivityFlushAll", flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	if (cp.kinds && dis) {
		check("DEVICE off", dis(CUPTI_ACTIVITY_KIND_DEVICE));
		check("NVLINK off", dis(CUPTI_ACTIVITY_KIND_NVLINK));
	}
	if (flush)
		check("cuptiActivityFlushAll", flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	if (dom && cp.sub) {
		check("runtime domain", dom(1, cp.sub, CUPTI_CB_DOMAIN_RUNTIME_API));
		check("driver domain", dom(1, cp.sub, CUPTI_CB_DOMAIN_DRIVER_API));
	}
	__atomic_store_n(&cp.late, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* the driver calls nvlprof's default traces (cupti/callbacks.c's DRV_CALLS, less host<->device) */
static const CUpti_CallbackId drv_calls[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,      CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync,     CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAdvise,            CUPTI_DRIVER_TRACE_CBID_cuCtxEnablePeerAccess,
    CUPTI_DRIVER_TRACE_CBID_cuCtxDisablePeerAccess, CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,          CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,   CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync};

static int has(const char *parts, const char *p)
{
	size_t n = strlen(p);
	for (const char *s = parts; (s = strstr(s, p)) != NULL; s += n)
		if ((s == parts || s[-1] == '.') && (s[n] == 0 || s[n] == '.'))
			return 1;
	return 0;
}

static void do_parts(const char *parts)
{
	const char *path = getenv("CUPTI_PRESENCE_LIB");
	cp.lib = dlopen(path && *path ? path : "libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
	if (!cp.lib && !(path && *path))
		cp.lib = dlopen("libcupti.so", RTLD_NOW | RTLD_GLOBAL);
	if (!cp.lib) {
		fprintf(stderr, "cupti_presence: no libcupti: %s\n", dlerror());
		return;
	}
	typedef CUptiResult (*reg_t)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
	typedef CUptiResult (*kind_t)(CUpti_ActivityKind);
	typedef CUptiResult (*ts_t)(CUpti_TimestampCallbackFunc);
	typedef CUptiResult (*sub_t)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	typedef CUptiResult (*en_t)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
	                            CUpti_CallbackId);
	typedef CUptiResult (*fin_t)(void);
	reg_t reg = (reg_t)fn("cuptiActivityRegisterCallbacks");
	kind_t en = (kind_t)fn("cuptiActivityEnable");
	ts_t ts = (ts_t)fn("cuptiActivityRegisterTimestampCallback");
	sub_t sub = (sub_t)fn("cuptiSubscribe");
	en_t cb = (en_t)fn("cuptiEnableCallback");
	fin_t fin = (fin_t)fn("cuptiFinalize");
	if (has(parts, "ts") && ts)
		check("cuptiActivityRegisterTimestampCallback", ts(mono));
	if (has(parts, "reg") && reg)
		check("cuptiActivityRegisterCallbacks", reg(buf_req, buf_done));
	if (has(parts, "kinds") && en) {
		cp.kinds = 1;
		check("DEVICE", en(CUPTI_ACTIVITY_KIND_DEVICE));
		check("NVLINK", en(CUPTI_ACTIVITY_KIND_NVLINK));
	}
	if (has(parts, "kern") && en)
		check("CONCURRENT_KERNEL", en(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	if ((has(parts, "sub") || has(parts, "drv") || has(parts, "late")) && sub)
		check("cuptiSubscribe", sub(&cp.sub, on_call, NULL));
	if (has(parts, "drv") && cb && cp.sub)
		for (size_t i = 0; i < sizeof drv_calls / sizeof drv_calls[0]; i++)
			check("cuptiEnableCallback", cb(1, cp.sub, CUPTI_CB_DOMAIN_DRIVER_API, drv_calls[i]));
	if (has(parts, "fin") && fin)
		check("cuptiFinalize", fin());
	pthread_t t;
	if (has(parts, "late") && cp.sub && pthread_create(&t, NULL, late_thread, NULL) == 0)
		pthread_detach(t);
	fprintf(stderr, "cupti_presence: %s done\n", parts);
}

/* the driver calls this inside cuInit when CUDA_INJECTION64_PATH names this library */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
	const char *parts = getenv("CUPTI_PRESENCE");
	if (parts && has(parts, "inj"))
		do_parts(parts);
	return 1;
}

__attribute__((constructor)) static void presence_init(void)
{
	const char *parts = getenv("CUPTI_PRESENCE");
	if (!parts || !*parts)
		return;
	if (!has(parts, "inj")) {
		do_parts(parts);
		return;
	}
	Dl_info di;
	if (dladdr((void *)presence_init, &di) && di.dli_fname)
		setenv("CUDA_INJECTION64_PATH", di.dli_fname, 1);
	else
		fprintf(stderr, "cupti_presence: cannot name this library for CUDA_INJECTION64_PATH\n");
}

/* cupti.c: when GPU activity collection starts and stops, what it collects (kinds, UM counters),
 * and the flush schedule (kernel windows: windows.c). */
/*
 * Layers (each calls only those below it): cupti.c -> windows.c (kernel tracing) -> share.c
 * (Kineto) -> activity.c (buffers) -> clock.c, streams.c, linksample.c -> driver.c (the function
 * tables).
 *
 * Attaching. The runtime's constructor points CUDA_INJECTION64_PATH at this library, so the driver
 * calls InitializeInjection() inside cuInit, early enough for the NVLINK/DEVICE topology records.
 * When that cannot happen (the user set their own CUDA_INJECTION64_PATH, or CUDA came up without
 * calling us), the first intercepted call (nvlp_cupti_note_call / nvlp_cupti_managed_seen) starts
 * collection late and a NOTE says topology is missing. A profiler that owns CUPTI (nsys, ncu) makes
 * us step aside with NOTE(FOREIGN_TOOL); torch.profiler (Kineto) is shared with (share.c).
 *
 * Unified-memory counters (NVLPROF_UM): 1 = on from the first intercepted CUDA call; 0 = never;
 * auto (default) = on when the process allocates managed memory. The cudaMallocManaged hook calls
 * nvlp_cupti_managed_seen() before the allocation returns, and no page of that allocation can
 * fault or migrate before then, so enabling at that moment still catches the first faults, while
 * jobs without managed memory pay nothing for UM tracking (the driver's UM counters are not free).
 *
 * The flush schedule is this file's own thread (nvlprof-flush): it converts the buffers CUPTI
 * completed by itself every 100 ms, forces a flush every NVLPROF_GPU_FLUSH_MS, opens and closes
 * kernel-tracing windows (NVLPROF_KERNELS, windows.c) and enables UM counters deferred from
 * injection time.
 */
#include <dlfcn.h>   /* dlopen, dladdr */
#include <errno.h>   /* errno, EINTR */
#include <limits.h>  /* PATH_MAX */
#include <pthread.h> /* pthread_mutex_t */
#include <stdio.h>   /* snprintf */
#include <stdlib.h>  /* getenv, realpath */
#include <string.h>  /* strcmp, strstr, strrchr */
#include <time.h>    /* clock_gettime */

#include "cupti_int.h"
#include "nvlp_cost.h"
#include "nvlp_cupti.h"
#include "nvlp_module.h"
#include "nvlp_rt.h"

static struct {
	int injected;   /* InitializeInjection ran */
	int calls_seen; /* an intercepted call reached us (diagnose at stop if never started) */
	int um_on;      /* UM counters enabled (or attempted) */
	int um_pending; /* NVLPROF_UM=1 and injected: enable at the first tick with devices */
	int um_first;   /* a managed allocation began before CUDA was up (lazy attaches at cuInit) */
	uint64_t t_start;
} injection_state;

/* ---- start / stop ---- */

static int injection_is_ours(void);
static void um_enable_locked(void);
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- the flush schedule: its own thread ---- */

#define DRAIN_NS 100000000ull /* convert buffers CUPTI completed by itself every 100 ms */
#define SCHED_EXIT_WAIT_MS 1500
static struct {
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running, stop;
} flush_schedule = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t ms_ns(long ms)
{
	return (uint64_t)ms * 1000000ull;
}

static void um_tick(void)
{
	if (!__atomic_load_n(&injection_state.um_pending, __ATOMIC_ACQUIRE))
		return;
	int n = 0;
	if (nvlp_driver_load(NULL, 0) != 0 || nvlp_drv.cuDeviceGetCount(&n) != 0 || n <= 0)
		return; /* still inside cuInit */
	/* never wait for start_mu here: stop holds it while it waits for this thread */
	if (pthread_mutex_trylock(&start_mu) != 0)
		return;
	um_enable_locked();
	pthread_mutex_unlock(&start_mu);
	__atomic_store_n(&injection_state.um_pending, 0, __ATOMIC_RELEASE);
}

/* Sleep until wake (CLOCK_MONOTONIC ns) or a signal; flush_schedule.mu held. */
static void sched_wait(uint64_t wake)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t cur = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (wake > cur) {
		ts.tv_sec = (time_t)(wake / 1000000000ull);
		ts.tv_nsec = (long)(wake % 1000000000ull);
		pthread_cond_timedwait(&flush_schedule.cv, &flush_schedule.mu, &ts);
	}
}

static void *sched(void *arg)
{
	(void)arg;
	nvlp_cost_thread_start(NVLP_COST_FLUSH);
	const struct nvlp_config *cfg = nvlp_cfg();
	/* cuptiActivityFlushAll holds up the application's kernel launches for several ms (measured
	 * on H200: 4-11 ms per flush, a stalled training step each time), so it runs rarely; CUPTI
	 * hands over full buffers by itself, and those are converted every DRAIN_NS here. */
	long flush_ms = cfg->gpu_flush_ms > 0 && cfg->gpu_flush_ms < 100 ? 100 : cfg->gpu_flush_ms;
	uint64_t now = nvlp_now();
	uint64_t next_flush = flush_ms ? now + ms_ns(flush_ms) : UINT64_MAX;
	uint64_t next_drain = now + DRAIN_NS;
	uint64_t next_win = nvlp_kw_first_wake();
	pthread_mutex_lock(&flush_schedule.mu);
	while (!flush_schedule.stop) {
		uint64_t wake = next_flush < next_drain ? next_flush : next_drain;
		if (next_win < wake)
			wake = next_win;
		sched_wait(wake);
		if (flush_schedule.stop)
			break;
		pthread_mutex_unlock(&flush_schedule.mu);
		now = nvlp_now();
		int dt = nvlp_detach_tick(now, __atomic_load_n(&injection_state.um_on, __ATOMIC_ACQUIRE) ||
		                                   __atomic_load_n(&injection_state.um_pending,
		                                                   __ATOMIC_ACQUIRE));
		if (dt == 2) { /* CUPTI detached (NVLPROF_CUPTI=startup): nothing left to flush */
			pthread_mutex_lock(&flush_schedule.mu);
			break;
		}
		if (dt == 1) { /* a detach is under way: no CUPTI call from here */
			next_drain = now + DRAIN_NS;
			pthread_mutex_lock(&flush_schedule.mu);
			continue;
		}
		um_tick();
		nvlp_kw_tick(now, &next_win); /* opens or closes a kernel window when due */
		if (now >= next_flush) {
			nvlp_act_flush(0);
			nvlp_cupti_clock_pair();
			next_flush = nvlp_now() + ms_ns(flush_ms);
			next_drain = nvlp_now() + DRAIN_NS;
		} else if (now >= next_drain) {
			nvlp_cupti_drain(); /* full buffers CUPTI completed on its own */
			next_drain = now + DRAIN_NS;
		}
		pthread_mutex_lock(&flush_schedule.mu);
	}
	pthread_mutex_unlock(&flush_schedule.mu);
	nvlp_cost_thread_end(NVLP_COST_FLUSH);
	return NULL;
}

static void sched_start(void)
{
	if (flush_schedule.running)
		return;
	nvlp_kw_start();
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* matches the CLOCK_MONOTONIC deadlines */
	pthread_cond_init(&flush_schedule.cv, &ca);
	pthread_condattr_destroy(&ca);
	flush_schedule.stop = 0;
	if (pthread_create(&flush_schedule.thr, NULL, sched, NULL) != 0) {
		nvlp_note(
		    NVLP_NOTE_ACTIVITY_ON, -1, (uint64_t)errno,
		    "cannot start the flush thread: activity flushed when buffers fill and at "
		    "exit only; kernel tracing stays %s",
		    nvlp_kw_mode() == NVLP_KM_OFF ? "off" : "on");
		return;
	}
	pthread_setname_np(flush_schedule.thr, "nvlprof-flush");
	flush_schedule.running = 1;
}

/* Ask the thread to stop and wait for it, at most SCHED_EXIT_WAIT_MS (it may be in a flush). */
static void sched_stop(void)
{
	if (!flush_schedule.running)
		return;
	flush_schedule.running = 0;
	pthread_mutex_lock(&flush_schedule.mu);
	flush_schedule.stop = 1;
	pthread_cond_broadcast(&flush_schedule.cv);
	pthread_mutex_unlock(&flush_schedule.mu);
	if (pthread_equal(pthread_self(), flush_schedule.thr))
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* pthread_timedjoin_np's clock */
	ts.tv_sec += SCHED_EXIT_WAIT_MS / 1000;
	ts.tv_nsec += (SCHED_EXIT_WAIT_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_sec++, ts.tv_nsec -= 1000000000L;
	int rc;
	while ((rc = pthread_timedjoin_np(flush_schedule.thr, NULL, &ts)) == EINTR)
		;
	if (rc == 0)
		nvlp_kw_stop(); /* the last window, or a zero-length one when none opened */
}



/* What else owns CUPTI or the injection hook. @return a description, or NULL. */
static const char *foreign_tool(char *buf, size_t len)
{
	extern char **environ;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "NSYS_", 5) == 0) {
			snprintf(buf, len, "Nsight Systems (%.*s set)",
			         (int)(strchr(*e, '=') ? strchr(*e, '=') - *e : 32), *e);
			return buf;
		}
	/* nsys: libToolsInjection64.so; ncu: lib*Injection*.so; compute-sanitizer: libsanitizer* */
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	const char *base = inj ? strrchr(inj, '/') : NULL;
	base = base ? base + 1 : inj;
	if (base && !injection_is_ours() &&
	    (strcasestr(base, "injection") || strcasestr(base, "sanitizer") ||
	     strcasestr(inj, "nsight"))) {
		snprintf(buf, len, "a profiler (CUDA_INJECTION64_PATH=%s)", inj);
		return buf;
	}
	return NULL;
}

/* 1 if CUDA_INJECTION64_PATH names this library (the driver will call InitializeInjection). */
static int injection_is_ours(void)
{
	static int cached = -1;
	if (cached >= 0)
		return cached;
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	Dl_info di;
	char a[PATH_MAX], b[PATH_MAX];
	cached = inj && dladdr((void *)injection_is_ours, &di) && di.dli_fname &&
	         realpath(inj, a) && realpath(di.dli_fname, b) && strcmp(a, b) == 0;
	return cached;
}

/* The steps of start_locked, each called with start_mu held, in the order CUPTI needs them.
 * Those returning int return 0 to go on, -1 after the note saying why nvlprof stays aside. */

/* Whether this process wants GPU activity from nvlprof and CUPTI can be loaded. */
static int start_wanted(const struct nvlp_config *cfg)
{
	char why[600], tool[600];
	if (!nvlp_is_active())
		return -1; /* recording is off (NVLPROF_DISABLE, inherited injection path): stay
		              out */
	if (!cfg->cupti) {
		nvlp_note(NVLP_NOTE_CONFIG, -1, 0,
		          "NVLPROF_CUPTI=0: no GPU activity or link counters collected");
		return -1;
	}
	if (foreign_tool(tool, sizeof tool)) {
		nvlp_note(NVLP_NOTE_FOREIGN_TOOL, -1, 0,
		          "%s owns CUPTI: no GPU activity, UM counters or link counters collected "
		          "by nvlprof in this process (from its start)",
		          tool);
		return -1;
	}
	if (nvlp_cupti_load(why, sizeof why) != 0) {
		nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, 0, "no GPU activity: %s", why);
		return -1;
	}
	return 0;
}

/* The loaded CUPTI's API version in *ver; -1 when its records are not those we read. */
static int start_version(uint32_t *ver)
{
	CUptiResult r = nvlp_cu.cuptiGetVersion(ver);
	if (r != CUPTI_SUCCESS || !nvlp_cupti_layout(*ver)) {
		nvlp_note(NVLP_NOTE_CUPTI_VERSION, -1, *ver,
		          "%s reports CUPTI API version %u, nvlprof reads those of CUDA 12.x (18-29) "
		          "and 13.x (13xxxx): no GPU activity collected",
		          nvlp_cupti_path(), *ver);
		return -1;
	}
	return 0;
}

/* Late start only: CUDA should be up; find out whether there is a driver at all. */
static int start_driver(uint32_t ver)
{
	char why[600];
	if (nvlp_driver_load(why, sizeof why) != 0) {
		nvlp_note(NVLP_NOTE_NO_DRIVER, -1, 0,
		          "no NVIDIA driver: %s; no GPU activity collected (CUPTI %u at %s)", why,
		          ver, nvlp_cupti_path());
		return -1;
	}
	nvlp_cures cr = nvlp_drv.cuInit(0); /* no-op when CUDA is up, as it should be */
	if (cr != 0) {
		nvlp_note(NVLP_NOTE_NO_DRIVER, -1, (uint64_t)cr,
		          "cuInit failed with CUresult %d%s: no GPU activity collected (CUPTI "
		          "%u at %s)",
		          cr, cr == 34 ? " (stub libcuda, no driver)" : "", ver, nvlp_cupti_path());
		return -1;
	}
	return 0;
}

/* Our activity buffer callbacks, registered with CUPTI (at start, and again after a detach). */
static CUptiResult register_buffers(void)
{
	return nvlp_cu.cuptiActivityRegisterCallbacks(nvlp_cupti_buf_request,
	                                              nvlp_cupti_buf_complete);
}

/* Hands CUPTI our activity buffers. */
static int start_buffers(void)
{
	CUptiResult r = register_buffers();
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
	    r == CUPTI_ERROR_NOT_INITIALIZED) {
		nvlp_note(NVLP_NOTE_FOREIGN_TOOL, -1, (uint64_t)r,
		          "CUPTI refused our activity callbacks (%s): another tool owns it; no GPU "
		          "activity collected from the start",
		          nvlp_cupti_err(r));
		return -1;
	}
	if (r != CUPTI_SUCCESS) {
		nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, (uint64_t)r,
		          "cuptiActivityRegisterCallbacks: %s; no GPU activity collected",
		          nvlp_cupti_err(r));
		return -1;
	}
	return 0;
}

/* Enables the activity kinds, naming those enabled in list. */
static int start_kinds(uint32_t ver, char *list, size_t len)
{
	CUptiResult r;
	/* topology first: DEVICE/NVLINK records are only produced when enabled before cuInit
	 * ends */
	nvlp_act_enable(CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE", list, len);
	r = (CUptiResult)nvlp_act_enable(CUPTI_ACTIVITY_KIND_NVLINK, "NVLINK", list, len);
	nvlp_kw_config();
	/* off: kernels never instrumented; the kinds' refusal still tells whether CUPTI works */
	if (nvlp_kw_mode() != NVLP_KM_OFF)
		r = (CUptiResult)nvlp_act_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
		                                 "CONCURRENT_KERNEL", list, len);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		nvlp_note(NVLP_NOTE_FOREIGN_TOOL, -1, (uint64_t)r,
		          "CUPTI refused activity (%s): another tool owns it; no GPU activity "
		          "collected from the start",
		          nvlp_cupti_err(r));
		return -1;
	}
	if (r != CUPTI_SUCCESS) {
		/* kernels are the point: without them CUPTI is not usable here (seen: no driver) */
		nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, (uint64_t)r,
		          "CUPTI %u (%s) cannot trace kernels (%s): no GPU activity collected", ver,
		          nvlp_cupti_path(), nvlp_cupti_err(r));
		return -1;
	}
	if (nvlp_kw_mode() != NVLP_KM_OFF) {
		nvlp_act_enable(CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", list, len);
		nvlp_act_enable(CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", list, len);
	}
	return 0;
}

/* The note saying what is collected and how it is timed. */
static void start_note(uint32_t ver, const char *list)
{
	char km[128];
	nvlp_kw_describe(km, sizeof km);
	nvlp_note(
	    NVLP_NOTE_ACTIVITY_ON, -1, ver, "CUPTI %u (%s): %s; %s (NVLPROF_KERNELS); clock %s%s",
	    ver, nvlp_cupti_path(), list, km,
	    nvlp_cupti_clock_identity() ? "CLOCK_MONOTONIC via timestamp callback"
	                                : "converted from CUPTI timestamps (CLOCK pairs)",
	    injection_state.injected ? ""
	                             : "; started late (CUDA was initialised before nvlprof's "
	                               "injection ran): NVLINK/DEVICE topology records missing");
}

/* Activity is on: starts what rides on it (sharing, driver callbacks, UM, links, windows). */
static void start_collectors(const struct nvlp_config *cfg)
{
	nvlp_act_set_state(NVLP_CS_ACTIVE);
	nvlp_share_on_start();
	nvlp_drv_start(nvlp_cupti_managed_seen); /* driver-API callbacks: managed memory and copies from any runtime */
	if (cfg->um == NVLP_UM_ON && !injection_state.injected)
		um_enable_locked();
	else if (cfg->um == NVLP_UM_ON)
		__atomic_store_n(&injection_state.um_pending, 1,
		                 __ATOMIC_RELEASE); /* no devices inside cuInit */
	nvlp_link_start();
	nvlp_detach_arm(injection_state.t_start);
	sched_start();
	if (!injection_state.injected) {
		/* the current context's device is in use already */
		int dev = -1;
		if (nvlp_drv.cuCtxGetDevice && nvlp_drv.cuCtxGetDevice(&dev) == 0 && dev >= 0)
			nvlp_link_device_seen(dev);
	}
}

/* NVLPROF_CUPTI=lazy (detach.c): CUPTI left out unless something needs it from the start; the
 * link sampler (NVML) records the topology and the link counters. @return 0 left out, -1 attach */
static int start_lazy(uint32_t ver)
{
	const char *b = nvlp_detach_lazy_blocker();
	if (!b && __atomic_load_n(&injection_state.um_first, __ATOMIC_RELAXED))
		b = "managed memory allocated as CUDA came up (CUPTI counts none of it unless attached "
		    "first)";
	if (b) {
		nvlp_note(NVLP_NOTE_CONFIG, -1, ver, NVLP_NOTE_CUPTI_LAZY_NEEDED " %s", b);
		return -1;
	}
	nvlp_detach_lazy(injection_state.t_start);
	nvlp_act_set_state(NVLP_CS_ASIDE);
	nvlp_note(NVLP_NOTE_CONFIG, -1, ver,
	          NVLP_NOTE_CUPTI_LAZY " CUPTI %u (%s) loaded but not attached: topology from the "
	          "driver and NVML, link counters from NVML, no driver-level capture; managed memory "
	          "attaches it only with NVLPROF_UM=attach; a profiler reaches CUPTI itself",
	          ver, nvlp_cupti_path());
	nvlp_link_start();
	return 0;
}

static void start_locked(void)
{
	const struct nvlp_config *cfg = nvlp_cfg();
	injection_state.t_start = nvlp_now();
	if (start_wanted(cfg) != 0)
		goto aside;
	uint32_t ver = 0;
	if (start_version(&ver) != 0)
		goto aside;
	if (!injection_state.injected && start_driver(ver) != 0)
		goto aside;
	if (cfg->cupti == 3 && start_lazy(ver) == 0)
		return;

	/* One clock for everything: ours, when CUPTI lets us. */
	nvlp_cupti_clock_register();
	nvlp_cupti_clock_pair();

	if (start_buffers() != 0)
		goto aside;
	char list[256] = "";
	if (start_kinds(ver, list, sizeof list) != 0)
		goto aside;
	start_note(ver, list);
	start_collectors(cfg);
	return;
aside:
	nvlp_act_set_state(NVLP_CS_ASIDE);
}

/* From InitializeInjection, or late from an intercepted call when CUDA is already up. */
static void nvlp_cupti_start(void)
{
	nvlp_init();
	pthread_mutex_lock(&start_mu);
	if (nvlp_cupti_state() == NVLP_CS_OFF) {
		nvlp_act_set_state(NVLP_CS_STARTING);
		start_locked();
	}
	pthread_mutex_unlock(&start_mu);
}

NVLP_EXPORT int InitializeInjection(void)
{
	injection_state.injected = 1;
	nvlp_cupti_start();
	return 1; /* the driver only checks that the entry point ran */
}

/* "CUPTI 130001 at /path" or "libcupti not loaded", for NOTEs. */
static void cupti_desc(char *out, size_t len)
{
	uint32_t ver = 0;
	if (nvlp_cupti_loaded() && nvlp_cupti_load(NULL, 0) == 0 &&
	    nvlp_cu.cuptiGetVersion(&ver) == CUPTI_SUCCESS)
		snprintf(out, len, "CUPTI %u at %.600s", ver, nvlp_cupti_path());
	else
		snprintf(out, len, "libcupti not loaded");
}

/* Intercepted calls before CUDA is up, with no driver able to bring it up: say so once and stop
 * looking (the hot path then costs one load). @return 1 if there is no usable driver. */
static int no_driver_check(void)
{
	char why[600], cupti[700];
	int v = 0, cr = 0;
	if (nvlp_driver_load(why, sizeof why) == 0) {
		cr = nvlp_drv.cuDriverGetVersion ? nvlp_drv.cuDriverGetVersion(&v) : 0;
		if (cr == 0)
			return 0; /* a driver: CUDA just is not initialised yet */
	}
	pthread_mutex_lock(&start_mu);
	if (nvlp_cupti_state() == NVLP_CS_OFF) {
		cupti_desc(cupti, sizeof cupti);
		if (cr)
			nvlp_note(NVLP_NOTE_NO_DRIVER, -1, (uint64_t)cr,
			          "cuDriverGetVersion failed with CUresult %d%s: no GPU activity "
			          "collected (%s)",
			          cr, cr == 34 ? " (stub libcuda, no driver)" : "", cupti);
		else
			nvlp_note(NVLP_NOTE_NO_DRIVER, -1, 0,
			          "no NVIDIA driver (%s): no GPU activity collected (%s)", why,
			          cupti);
		nvlp_act_set_state(NVLP_CS_ASIDE);
	}
	pthread_mutex_unlock(&start_mu);
	return 1;
}

/* Intercepted call while not started: start now if injection will not do it. Runs its checks
 * (dlopen, driver calls) at most every 100 ms, on one thread at a time. */
static void maybe_late_start(void)
{
	static uint64_t next_check;
	if (!__atomic_load_n(&injection_state.calls_seen, __ATOMIC_RELAXED))
		__atomic_store_n(&injection_state.calls_seen, 1, __ATOMIC_RELAXED);
	uint64_t now = nvlp_now(), next = __atomic_load_n(&next_check, __ATOMIC_RELAXED);
	if (now < next || !__atomic_compare_exchange_n(&next_check, &next, now + 100000000ull, 0,
	                                               __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	if (!nvlp_cfg()->cupti || foreign_tool((char[8]){0}, 8) || !injection_is_ours()) {
		nvlp_cupti_start(); /* notes why it does nothing, or starts late */
		return;
	}
	/* the driver calls InitializeInjection at cuInit; only if CUDA is already up without it
	 * (injection failed, or CUDA came up before our constructor) do we start here */
	if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
		CUcontext ctx = NULL;
		if (nvlp_driver_load(NULL, 0) == 0 && nvlp_drv.cuCtxGetCurrent(&ctx) == 0 && ctx)
			nvlp_cupti_start();
		return;
	}
	no_driver_check();
}

/* ---- unified memory counters ---- */

static void um_enable_body(void);
/* CUPTI calls outside the flush thread go through activity.c's enter/leave (a detach waits) */
static void um_enable_locked(void)
{
	if (injection_state.um_on || !nvlp_act_enter())
		return;
	um_enable_body();
	nvlp_act_leave();
}

static void um_enable_body(void)
{
	__atomic_store_n(&injection_state.um_on, 1, __ATOMIC_RELEASE);
	int n = 0;
	if (nvlp_driver_load(NULL, 0) != 0 || nvlp_drv.cuDeviceGetCount(&n) != 0 || n <= 0 ||
	    !nvlp_cu.cuptiActivityConfigureUnifiedMemoryCounter) {
		nvlp_note(NVLP_NOTE_UM_ON, -1, 0,
		          "unified-memory counters not enabled: no device count or no "
		          "cuptiActivityConfigureUnifiedMemoryCounter");
		return;
	}
	static const CUpti_ActivityUnifiedMemoryCounterKind all[] = {
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP,
	};
	const size_t nk = sizeof all / sizeof all[0];
	if (n > NVLP_CUPTI_MAX_DEV)
		n = NVLP_CUPTI_MAX_DEV;
	CUpti_ActivityUnifiedMemoryCounterConfig cfg[NVLP_CUPTI_MAX_DEV * 8];
	memset(cfg, 0, sizeof cfg);
	/* fall back to the essential counters if the full set is refused */
	size_t tries[2] = {nk, 4};
	CUptiResult r = CUPTI_ERROR_UNKNOWN;
	size_t used = 0;
	for (int t = 0; t < 2 && r != CUPTI_SUCCESS; t++) {
		size_t c = 0;
		for (int d = 0; d < n; d++)
			for (size_t k = 0; k < tries[t]; k++, c++) {
				cfg[c].scope =
				    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
				cfg[c].kind = all[k];
				cfg[c].deviceId = (uint32_t)d;
				cfg[c].enable = 1;
			}
		r = nvlp_cu.cuptiActivityConfigureUnifiedMemoryCounter(cfg, (uint32_t)c);
		used = tries[t];
	}
	if (r == CUPTI_SUCCESS)
		r = nvlp_cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	if (r != CUPTI_SUCCESS) {
		nvlp_note(NVLP_NOTE_UM_ON, -1, (uint64_t)r,
		          "unified-memory counters not enabled: %s", nvlp_cupti_err(r));
		return;
	}
	nvlp_act_mark_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	nvlp_note(NVLP_NOTE_UM_ON, -1, (uint64_t)n,
	          "unified-memory counters on for %d device(s) (%s; NVLPROF_UM=%s%s)%s", n,
	          used == nk
	              ? "HtoD DtoH DtoD bytes, GPU/CPU faults, thrashing, throttling, remote map"
	              : "HtoD DtoH DtoD bytes, GPU faults only",
	          nvlp_cfg_um_word(nvlp_cfg()->um),
	          nvlp_cfg()->um == NVLP_UM_ON ? "" : ", managed memory allocated",
	          used == nk ? "" : " (full set refused)");
}

/* Managed memory after a detach (NVLPROF_CUPTI=startup) or under NVLPROF_CUPTI=lazy: CUPTI
 * attached (again), for good, with what UM counters need (buffers, clock, the flush thread); no
 * driver callbacks. Before the allocation: CUPTI counts no migration of memory allocated before it
 * attached, even with its counters on from then on (um_attach.c's alloc-alloc and touched-touched
 * orders, run 15), and counts all of them when it attached first, whenever the counters come on
 * (ctx-alloc). */
static void attach_again(void)
{
	pthread_mutex_lock(&start_mu);
	if (nvlp_cupti_state() == NVLP_CS_ASIDE && nvlp_detach_again()) {
		int ok = register_buffers() == CUPTI_SUCCESS; /* its NOTE: nvlp_detach_again_note */
		if (ok) {
			nvlp_cupti_clock_register();
			nvlp_cupti_clock_pair();
			nvlp_act_set_state(NVLP_CS_ACTIVE);
			nvlp_share_on_start(); /* a profiler that came after the detach is adopted */
			sched_stop(); /* the thread ended at the detach: joined */
			sched_start();
		}
		nvlp_detach_again_note(ok, (double)(nvlp_now() - injection_state.t_start) / 1e9);
	}
	pthread_mutex_unlock(&start_mu);
}

/* Under lazy only where NVLPROF_UM=attach asks: a later cuInit (NVRTC's, CuPy compiling its
 * first kernel; another runtime's) hung in the driver after such an attach (runs 16-17,
 * detach.c). */
int nvlp_cupti_managed_attach_due(void)
{
	const struct nvlp_config *cfg = nvlp_cfg();
	return cfg->um != NVLP_UM_OFF && nvlp_cupti_state() != NVLP_CS_OFF && nvlp_detach_done() &&
	       (cfg->um == NVLP_UM_ATTACH || !nvlp_detach_is_lazy());
}

void nvlp_cupti_managed_coming(void)
{
	if (nvlp_cupti_managed_attach_due())
		attach_again();
	else if (nvlp_cfg()->um != NVLP_UM_OFF && nvlp_cupti_state() == NVLP_CS_OFF)
		__atomic_store_n(&injection_state.um_first, 1, __ATOMIC_RELAXED); /* at its cuInit */
}

void nvlp_cupti_managed_seen(void)
{
	if (nvlp_cupti_state() == NVLP_CS_OFF)
		maybe_late_start();
	if (nvlp_cfg()->um != NVLP_UM_OFF && nvlp_detach_done()) {
		/* nvlp_cupti_managed_coming could not attach before this allocation */
		if (nvlp_detach_is_lazy()) /* not attached before it; now, CUPTI would count nothing */
			nvlp_detach_lazy_um(nvlp_cfg()->um == NVLP_UM_ATTACH);
		else
			attach_again(); /* NVLPROF_CUPTI=startup: later allocations' counters */
	}
	if (nvlp_cupti_state() != NVLP_CS_ACTIVE || nvlp_cfg()->um == NVLP_UM_OFF ||
	    __atomic_load_n(&injection_state.um_on, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&start_mu);
	um_enable_locked();
	pthread_mutex_unlock(&start_mu);
	/* the allocating context's device is in use: sample its links too */
	int dev = -1;
	if (nvlp_drv.cuCtxGetDevice && nvlp_drv.cuCtxGetDevice(&dev) == 0 && dev >= 0)
		nvlp_link_device_seen(dev);
}

/* ---- intercepted calls ---- */

void nvlp_cupti_note_call(void)
{
	if (NVLP_UNLIKELY(nvlp_cupti_state() == NVLP_CS_OFF))
		maybe_late_start();
}

/* Kept for preload/'s callers: the attach step, then the pure lookup (streams.c). */
uint64_t nvlp_cupti_stream_id(void *stream)
{
	nvlp_cupti_note_call();
	return nvlp_streams_lookup(stream);
}

/* Never started although the process made CUDA/NCCL calls and a driver exists. No dlopen or
 * driver call here: stop may run from a signal's shutdown path. */
static void diagnose_never_started(void)
{
	if (!__atomic_load_n(&injection_state.calls_seen, __ATOMIC_RELAXED))
		return;
	nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, 0,
	          "CUDA was never initialised through nvlprof's injection and no intercepted call "
	          "found a CUDA context: no GPU activity collected");
}

/* The module's flush: CUPTI buffers and samplers into the trace, while recording is on. */
static void nvlp_cupti_stop(void)
{
	pthread_mutex_lock(&start_mu);
	/* the flush thread first: no detach is requested beside this stop (detach.c) */
	sched_stop();
	int detached = nvlp_detach_stop();
	int st = nvlp_cupti_state();
	if (st == NVLP_CS_OFF) {
		diagnose_never_started();
		nvlp_act_set_state(NVLP_CS_ASIDE);
	} else if (detached) {
		/* CUPTI detached (NVLPROF_CUPTI=startup): only the NVML link sampler is left */
		nvlp_link_stop_thread();
		nvlp_kick_writer();
		nvlp_link_stop();
	} else if (st == NVLP_CS_ACTIVE) {
		/* Activity first: it is the bulk of the trace, and the PM calls that follow go
		 * through libnvperf_host, whose fate at exit we control less. The flush thread
		 * stopped above, so that its periodic flush never runs alongside this one; the
		 * sampler stops now, so that it touches no GPU while this thread decodes its last
		 * samples. */
		nvlp_link_stop_thread();
		nvlp_act_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		nvlp_cupti_clock_pair();
		nvlp_kick_writer();
		nvlp_link_stop();
		uint64_t records, dropped, lost;
		nvlp_act_stats(&records, &dropped, &lost);
		if (lost)
			nvlp_note(NVLP_NOTE_ACTIVITY_LOST, -1, lost,
			          "%llu GPU activity records lost: the trace writer had no room "
			          "within 1 s",
			          (unsigned long long)lost);
		if (nvlp_cfg()->verbose) {
			nvlp_warn("GPU activity: %llu records, %llu dropped by CUPTI, %llu lost",
			          (unsigned long long)records, (unsigned long long)dropped,
			          (unsigned long long)lost);
			nvlp_act_report_verbose();
			nvlp_kw_verbose();
		}
		/* records arriving from now on (Kineto's flushes) are relayed, not recorded */
		nvlp_act_set_state(NVLP_CS_ASIDE);
	}
	pthread_mutex_unlock(&start_mu);
}

static void nvlp_cupti_atfork_child(void)
{
	/* CUDA does not survive fork; the child must not call into CUPTI or join our threads */
	injection_state.calls_seen = 0;
	injection_state.um_pending = 0;
	injection_state.um_first = 0;
	flush_schedule.running = 0; /* the thread does not exist in the child */
	pthread_mutex_init(&flush_schedule.mu, NULL);
	pthread_mutex_init(&start_mu, NULL);
	nvlp_act_atfork_child();
	nvlp_driver_atfork_child();
	nvlp_streams_atfork_child();
	nvlp_link_atfork_child();
	nvlp_share_atfork_child();
	nvlp_sub_atfork_child();
	nvlp_drv_atfork_child();
	nvlp_detach_atfork_child();
}
/* The module: at init the driver is told to load us as its injection library. */
static void cupti_init(const struct nvlp_config *cfg)
{
	if (cfg->cupti)
		nvlp_env_point_at_self("CUDA_INJECTION64_PATH");
}
static const struct nvlp_module cupti_module = {
    .name = "cupti", .init = cupti_init, .flush = nvlp_cupti_stop, .atfork_child = nvlp_cupti_atfork_child};
NVLP_MODULE(CUPTI, cupti_module)

/* share.c: exported cupti* wrappers so that torch.profiler (Kineto) shares CUPTI with us. */
/*
 * CUPTI has one set of activity buffer callbacks per process; the last
 * cuptiActivityRegisterCallbacks wins. torch's libtorch_cpu imports cupti* dynamically, so these
 * definitions (LD_PRELOAD, first in the global scope) receive Kineto's calls while our own calls go
 * to the real functions through the nvlp_cu table. While we collect:
 *  - Kineto's callbacks are remembered, ours stay registered. Buffers are requested from Kineto
 *    while it has kinds enabled (so it gets back buffers it allocated); each completed buffer is
 *    processed by us first, then compacted in place to Kineto's kinds and handed to Kineto's
 *    completion callback. Records of Kineto's kinds that land in one of our buffers are copied into
 *    a buffer Kineto supplies. Kineto never sees kinds it did not enable: its handler logs every
 *    unexpected kind, and UM/NVLINK/DEVICE records would be exactly that.
 *  - Enable/Disable(Context): we track Kineto's kinds; a kind we need is never really disabled.
 *    Kineto disables its kinds before its final flush and reads what that flush completes, so a
 *    kind it disabled is still relayed until its next cuptiActivityFlushAll returns.
 *  - Kineto flushes only while it holds a buffer it allocated; records can all land in our
 *    buffers, so while it has kinds enabled we hold one of its buffers in reserve (the first to
 *    fill when relaying) and hand it back, empty if unused, at the end of its flush.
 *  - cuptiFinalize is ignored; Kineto's timestamp callback is installed (its window filter needs
 *    its clock) and clock.c converts from it.
 *  - cuptiSubscribe and the callback API: subscribe.c (one real subscription, multiplexed).
 * When we are not collecting (not started, disabled, stepped aside, stopped) everything passes
 * through, and a client that registered before our start is adopted at start. A pass-through
 * goes to the definition the caller would have bound to without us (its own dependencies first),
 * so a tool with a private libcupti (nsys, ncu) keeps using its copy while we stand aside.
 */
#include <dlfcn.h>   /* dladdr, dlopen, dlsym */
#include <pthread.h> /* pthread_mutex_t */
#include <string.h>  /* memmove, memcpy */

#include "cupti_int.h"
#include "nvlp_rt.h"

static struct {
	CUpti_BuffersCallbackRequestFunc req; /* the other client's (Kineto's) callbacks */
	CUpti_BuffersCallbackCompleteFunc comp;
	unsigned char kinds[CUPTI_ACTIVITY_KIND_COUNT]; /* kinds it has enabled */
	/* kinds enabled, or disabled since its last flush */
	unsigned char relay[CUPTI_ACTIVITY_KIND_COUNT];
	int nkinds, nrelay;
	uint8_t *res; /* one of its buffers, held so that it always has one to flush */
	size_t res_size;
	int noted, noted_finalize, noted_ts;
} other_client;
static pthread_mutex_t kmu = PTHREAD_MUTEX_INITIALIZER;

static int real_ok(void)
{
	nvlp_cupti_load(NULL, 0); /* the caller linked libcupti, so the lookup finds it */
	return nvlp_cu.cuptiActivityEnable != NULL;
}

/* The definition the caller would have bound to without us: looked up in the caller's own
 * object and its dependencies. A tool with a private libcupti (nsys, ncu) thus keeps talking to
 * its own copy while we stand aside. NULL when the caller is the executable or has no such
 * dependency (callers then use the process's libcupti, nvlp_cu). */
#define CALLER_CACHE 16
static struct {
	void *base;
	const char *name;
	void *fn;
} ccache[CALLER_CACHE];
void *nvlp_share_caller_real(const char *name, void *caller, void *self)
{
	Dl_info di, me;
	if (!dladdr(caller, &di) || !di.dli_fname || !dladdr(self, &me) ||
	    di.dli_fbase == me.dli_fbase)
		return NULL;
	void *fn = NULL;
	pthread_mutex_lock(&kmu);
	for (int i = 0; i < CALLER_CACHE; i++)
		if (ccache[i].base == di.dli_fbase && ccache[i].name == name) {
			fn = ccache[i].fn;
			pthread_mutex_unlock(&kmu);
			return fn;
		}
	void *h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (h) {
		fn = dlsym(h, name);
		dlclose(h);
	}
	if (fn == self)
		fn = NULL;
	for (int i = 0; i < CALLER_CACHE; i++)
		if (!ccache[i].base) {
			ccache[i].base = di.dli_fbase, ccache[i].name = name, ccache[i].fn = fn;
			break;
		}
	pthread_mutex_unlock(&kmu);
	return fn;
}

/* Pass a call through: to the caller's own CUPTI if it has one, else to the process's. */
#define PASS_THROUGH(name, ...)                                                                    \
	do {                                                                                       \
		__typeof__(&name) f_ = (__typeof__(&name))nvlp_share_caller_real(                             \
		    #name, __builtin_return_address(0), (void *)name);                             \
		if (!f_ && real_ok())                                                              \
			f_ = nvlp_cu.name;                                                         \
		return f_ ? f_(__VA_ARGS__) : CUPTI_ERROR_NOT_INITIALIZED;                         \
	} while (0)

static int collecting(void)
{
	return nvlp_cupti_state() == NVLP_CS_ACTIVE;
}

static void note_shared(void)
{
	if (__atomic_exchange_n(&other_client.noted, 1, __ATOMIC_ACQ_REL))
		return;
	nvlp_note(NVLP_NOTE_SHARED_CUPTI, -1, 0,
	          "another CUPTI client (torch.profiler/Kineto) registered activity callbacks: "
	          "nvlprof keeps its own and relays that client's kinds to it; its timestamp "
	          "callback and cuptiFinalize are ignored while nvlprof collects");
}

/* Hand the reserve buffer back to the client (nothing in it) */
static void reserve_return(void)
{
	uint8_t *b = __atomic_exchange_n(&other_client.res, NULL, __ATOMIC_ACQ_REL);
	if (b && other_client.comp)
		other_client.comp(NULL, 0, b, other_client.res_size, 0);
}

/* While the client traces and we collect, make sure it holds one buffer of its own */
static void reserve_take(void)
{
	if (!collecting() || !other_client.req || other_client.nkinds <= 0 ||
	    __atomic_load_n(&other_client.res, __ATOMIC_ACQUIRE))
		return;
	uint8_t *b = NULL;
	size_t size = 0, max = 0;
	other_client.req(&b, &size, &max);
	if (!b)
		return;
	other_client.res_size = size;
	uint8_t *expect = NULL;
	if (!__atomic_compare_exchange_n(&other_client.res, &expect, b, 0, __ATOMIC_ACQ_REL,
	                                 __ATOMIC_ACQUIRE) &&
	    other_client.comp)
		other_client.comp(NULL, 0, b, size, 0); /* another thread took one first */
}

static void set_kind(int kind, int on)
{
	if (kind < 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT)
		return;
	pthread_mutex_lock(&kmu);
	if (other_client.kinds[kind] != on) {
		other_client.kinds[kind] = (unsigned char)on;
		other_client.nkinds += on ? 1 : -1;
	}
	if (on && !other_client.relay[kind]) {
		other_client.relay[kind] = 1;
		other_client.nrelay++;
	}
	pthread_mutex_unlock(&kmu);
	if (on)
		reserve_take();
}

/* After the client's flush: kinds it disabled are no longer relayed */
static void relay_trim(void)
{
	pthread_mutex_lock(&kmu);
	for (int k = 0; k < CUPTI_ACTIVITY_KIND_COUNT; k++)
		if (other_client.relay[k] && !other_client.kinds[k]) {
			other_client.relay[k] = 0;
			other_client.nrelay--;
		}
	pthread_mutex_unlock(&kmu);
}

static int keep_kineto(int kind, void *arg)
{
	(void)arg;
	return kind >= 0 && kind < CUPTI_ACTIVITY_KIND_COUNT && other_client.relay[kind];
}

size_t nvlp_share_filter(uint8_t *buf, size_t valid, int (*keep)(int kind, void *arg), void *arg)
{
	/* Move record i only after CUPTI has found record i+1 from i's header. */
	CUpti_Activity *cur = NULL, *prev = NULL;
	size_t out = 0;
	for (;;) {
		int more = nvlp_cu.cuptiActivityGetNextRecord(buf, valid, &cur) == CUPTI_SUCCESS;
		if (prev) {
			size_t off = (size_t)((uint8_t *)prev - buf);
			size_t end = more ? (size_t)((uint8_t *)cur - buf) : valid;
			if (keep((int)prev->kind, arg)) {
				if (out != off)
					memmove(buf + out, buf + off, end - off);
				out += end - off;
			}
		}
		if (!more)
			break;
		prev = cur;
	}
	return out;
}

/* Copy the records of Kineto's kinds from one of our buffers into a buffer Kineto supplies. */
static void copy_to_kineto(CUcontext ctx, uint32_t sid, const uint8_t *buf, size_t valid)
{
	CUpti_Activity *cur = NULL, *prev = NULL;
	uint8_t *kb = NULL;
	size_t ksize = 0, kmax = 0, out = 0;
	for (;;) {
		int more = nvlp_cu.cuptiActivityGetNextRecord((uint8_t *)buf, valid, &cur) ==
		           CUPTI_SUCCESS;
		if (prev && keep_kineto((int)prev->kind, NULL)) {
			size_t off = (size_t)((uint8_t *)prev - buf);
			size_t len = (more ? (size_t)((uint8_t *)cur - buf) : valid) - off;
			if (kb && out + len > ksize) {
				other_client.comp(ctx, sid, kb, ksize, out);
				kb = NULL;
			}
			if (!kb) {
				kb = __atomic_exchange_n(&other_client.res, NULL, __ATOMIC_ACQ_REL);
				if (kb)
					ksize = other_client.res_size;
				else
					other_client.req(&kb, &ksize, &kmax);
				out = 0;
				if (!kb || ksize < len)
					/* Kineto gave no room: its records are lost to it */
					return;
			}
			memcpy(kb + out, buf + off, len);
			out += len;
		}
		if (!more)
			break;
		prev = cur;
	}
	if (kb)
		other_client.comp(ctx, sid, kb, ksize, out);
}

static CUpti_BuffersCallbackRequestFunc share_request_cb(void)
{
	return (other_client.req && other_client.nkinds > 0) ? other_client.req : NULL;
}

static int share_client(void)
{
	return __atomic_load_n(&other_client.comp, __ATOMIC_ACQUIRE) != NULL;
}

static int share_complete(CUcontext ctx, uint32_t sid, uint8_t *buf, size_t size, size_t valid,
                          int ours)
{
	if (!other_client.comp)
		return 0;
	if (ours) {
		if (other_client.nrelay > 0 && other_client.req && valid)
			copy_to_kineto(ctx, sid, buf, valid);
		return 0;
	}
	/* Kineto's own buffer: it gets it back, with only its kinds in it */
	valid = valid ? nvlp_share_filter(buf, valid, keep_kineto, NULL) : 0;
	other_client.comp(ctx, sid, buf, size, valid);
	return 1;
}

static const struct nvlp_act_share hooks = {share_client, share_request_cb, share_complete};

int nvlp_share_wants(int kind)
{
	return kind >= 0 && kind < CUPTI_ACTIVITY_KIND_COUNT &&
	       __atomic_load_n(&other_client.kinds[kind], __ATOMIC_RELAXED);
}

void nvlp_share_on_start(void)
{
	nvlp_act_set_share(&hooks);
	if (other_client.comp) {
		note_shared();
		reserve_take();
	}
}

void nvlp_share_atfork_child(void)
{
	pthread_mutex_init(&kmu, NULL);
}

/* ---- the exported wrappers ---- */

NVLP_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc comp)
{
	if (!collecting()) {
		/* remembered, so that a start after this adopts the client instead of evicting
		 * it */
		other_client.req = req;
		other_client.comp = comp;
		PASS_THROUGH(cuptiActivityRegisterCallbacks, req, comp);
	}
	other_client.req = req;
	other_client.comp = comp;
	note_shared();
	return CUPTI_SUCCESS;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
	set_kind((int)kind, 1);
	if (!collecting())
		PASS_THROUGH(cuptiActivityEnable, kind);
	/* Enabled for real even when the kind is ours: a kernel window may have it off right now
	 * (NVLPROF_KERNELS=window, the default), and the window leaves on what the client wants.
	 * Returning early left torch.profiler without a single kernel on the H200 (20 memsets of
	 * 140 CUDA events; 140 with NVLPROF_CUPTI=0). */
	return nvlp_cu.cuptiActivityEnable(kind);
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
	set_kind((int)kind, 0);
	if (!collecting())
		PASS_THROUGH(cuptiActivityDisable, kind);
	if (nvlp_cupti_we_enabled((int)kind))
		return CUPTI_SUCCESS; /* we still need it */
	return nvlp_cu.cuptiActivityDisable(kind);
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableContext(CUcontext ctx, CUpti_ActivityKind kind)
{
	set_kind((int)kind, 1);
	if (!collecting())
		PASS_THROUGH(cuptiActivityEnableContext, ctx, kind);
	if (nvlp_cupti_we_enabled((int)kind)) /* ours: on for every context (window or not) */
		return nvlp_cu.cuptiActivityEnable(kind);
	return nvlp_cu.cuptiActivityEnableContext ? nvlp_cu.cuptiActivityEnableContext(ctx, kind)
	                                          : CUPTI_ERROR_NOT_INITIALIZED;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiActivityDisableContext(CUcontext ctx, CUpti_ActivityKind kind)
{
	set_kind((int)kind, 0);
	if (!collecting())
		PASS_THROUGH(cuptiActivityDisableContext, ctx, kind);
	if (nvlp_cupti_we_enabled((int)kind))
		return CUPTI_SUCCESS;
	return nvlp_cu.cuptiActivityDisableContext ? nvlp_cu.cuptiActivityDisableContext(ctx, kind)
	                                           : CUPTI_ERROR_NOT_INITIALIZED;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
	if (!collecting())
		PASS_THROUGH(cuptiActivityFlushAll, flag);
	/* completions come to us, then to the client; then it gets its reserve back (its flush
	 * takes the buffers completed by then), and a new one if it still traces */
	CUptiResult r = nvlp_cu.cuptiActivityFlushAll(flag);
	/* buffers queued before the client came, relayed before its flush ends */
	nvlp_cupti_drain();
	reserve_return();
	relay_trim();
	reserve_take();
	return r;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void)
{
	if (!collecting())
		PASS_THROUGH(cuptiFinalize);
	if (!__atomic_exchange_n(&other_client.noted_finalize, 1, __ATOMIC_ACQ_REL))
		nvlp_note(NVLP_NOTE_SHARED_CUPTI, -1, 0,
		          "cuptiFinalize from another client ignored while nvlprof collects");
	/* the client is done: disable the kinds only it had on */
	for (int k = 0; k < CUPTI_ACTIVITY_KIND_COUNT; k++)
		if (other_client.kinds[k]) {
			set_kind(k, 0);
			if (!nvlp_cupti_we_enabled(k))
				nvlp_cu.cuptiActivityDisable((CUpti_ActivityKind)k);
		}
	reserve_return();
	relay_trim();
	return CUPTI_SUCCESS;
}

NVLP_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	/* torch.profiler (Kineto) drops every GPU record outside its window as measured by its
	 * own clock (the system clock): keeping ours left its trace without a single kernel (seen
	 * on the GPU machine). So its callback wins; ours tells the clocks apart by magnitude
	 * (nvlp_cupti_ts: epoch-sized values are CLOCK_REALTIME, converted by the latest pairing).
	 */
	if (collecting() && !__atomic_exchange_n(&other_client.noted_ts, 1, __ATOMIC_ACQ_REL))
		nvlp_note(NVLP_NOTE_SHARED_CUPTI, -1, 0,
		          "another client's CUPTI timestamp callback installed: later activity "
		          "timestamps are converted from its clock");
	/* The pair read before CUPTI switches marks where its clock starts; the fit is made once
	 * CUPTI took the callback (records are converted later, when their buffer completes). */
	uint64_t pre_mono = nvlp_now(), pre_ts = f && f != nvlp_cupti_clock_ours() ? f() : 0;
	__typeof__(&cuptiActivityRegisterTimestampCallback) real_ =
	    (__typeof__(&cuptiActivityRegisterTimestampCallback))nvlp_share_caller_real(
	        "cuptiActivityRegisterTimestampCallback", __builtin_return_address(0),
	        (void *)cuptiActivityRegisterTimestampCallback);
	if (!real_ && real_ok())
		real_ = nvlp_cu.cuptiActivityRegisterTimestampCallback;
	CUptiResult r = real_ ? real_(f) : CUPTI_ERROR_NOT_INITIALIZED;
	if (r == CUPTI_SUCCESS)
		nvlp_cupti_clock_foreign(f, pre_mono, pre_ts);
	return r;
}

/* cuptiSubscribe and the callback API: subscribe.c */

/* subscribe.c: the process's one CUPTI callback subscription: ours, with one client's (torch.profiler/Kineto) multiplexed onto it. */
/*
 * CUPTI allows one subscriber per process: a second cuptiSubscribe fails with
 * MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, and torch.profiler (Kineto) subscribes too. The exported
 * cuptiSubscribe(_v2) below receive its calls (libtorch imports them dynamically, as it does the
 * activity calls share.c receives). While nvlprof collects or is about to, nvlprof holds the one
 * real subscription with dispatch() as its callback, and the client gets a handle of its own
 * (CLIENT). The client's enable/disable calls on that handle are recorded per (domain, cbid) and
 * forwarded so that the real state is the union of its and ours; dispatch() calls our driver
 * capture for our cbids and the client's callback for its own, each seeing exactly what it asked
 * for. A client that subscribes before our start gets the same arrangement (the real subscription
 * is made then and ours joins it at start), so the order does not matter. When nvlprof stands
 * aside (disabled, NVLPROF_CUPTI=0, another tool owns CUPTI) and holds nothing, every call passes
 * through to the CUPTI the caller would have bound to.
 */
#include <pthread.h> /* pthread_mutex_t */
#include <stdio.h>   /* snprintf */
#include <stdlib.h>  /* getenv */
#include <string.h>  /* memset, strcmp */

#include "cupti_int.h"
#include "nvlp_rt.h"

#define NDOM CUPTI_CB_DOMAIN_SIZE
#define MAXCB 2048 /* above every cbid of CUDA 13.0 (driver: 807); beyond it: the client's */

static struct {
	CUpti_SubscriberHandle real; /* the one real subscription (ours) */
	int held;
	int refused; /* CUptiResult of our refused attempt, 0 if none */
	CUpti_CallbackFunc ccb;      /* the client's callback and data */
	void *cdata;
	int client;
	unsigned char ours[NDOM][MAXCB], theirs[NDOM][MAXCB];
	int noted;
	int holding;      /* a thread is inside our real cuptiSubscribe(_v2) */
	pthread_t holder; /* that thread: a CUPTI calling its own exported names reaches us */
	/* callbacks.c's handler of our driver-API callbacks, given at start (no call back by
	 * name) */
	nvlp_sub_drv_fn drv_cb;
	/* detach.c's, called at the exit of every runtime/driver API call while set */
	void (*exit_hook)(const char *fn);
} subscribers;
static pthread_mutex_t mmu = PTHREAD_MUTEX_INITIALIZER;
static char client_token;
#define CLIENT ((CUpti_SubscriberHandle)(void *)&client_token)

static void CUPTIAPI dispatch(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId cbid,
                              const void *data)
{
	(void)ud;
	int in = (unsigned)d < NDOM && cbid < MAXCB;
	nvlp_sub_drv_fn drv = __atomic_load_n(&subscribers.drv_cb, __ATOMIC_ACQUIRE);
	if (drv && in && d == CUPTI_CB_DOMAIN_DRIVER_API &&
	    __atomic_load_n(&subscribers.ours[d][cbid], __ATOMIC_RELAXED))
		drv(cbid, (const CUpti_CallbackData *)data);
	CUpti_CallbackFunc f = __atomic_load_n(&subscribers.ccb, __ATOMIC_ACQUIRE);
	if (f && (!in || __atomic_load_n(&subscribers.theirs[d][cbid], __ATOMIC_RELAXED)))
		f(subscribers.cdata, d, cbid, data);
	void (*h)(const char *) = __atomic_load_n(&subscribers.exit_hook, __ATOMIC_ACQUIRE);
	if (h && (d == CUPTI_CB_DOMAIN_RUNTIME_API || d == CUPTI_CB_DOMAIN_DRIVER_API) && data &&
	    ((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_EXIT)
		h(((const CUpti_CallbackData *)data)->functionName); /* where CUPTI documents
		                                                       * cuptiFinalize */
}

/* Take the real subscription (caller holds mmu). @return 0 or the CUptiResult that refused. */
static int hold_locked(char *who, size_t wholen)
{
	if (subscribers.held)
		return 0;
	if (subscribers.refused)
		return subscribers.refused;
	if (nvlp_cupti_load(NULL, 0) != 0 || !nvlp_cu.cuptiSubscribe || !nvlp_cu.cuptiEnableCallback)
		return subscribers.refused = CUPTI_ERROR_NOT_INITIALIZED;
	CUptiResult r;
	subscribers.holder = pthread_self();
	__atomic_store_n(&subscribers.holding, 1, __ATOMIC_RELEASE);
	if (nvlp_cu.cuptiSubscribe_v2) {
		char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
		CUpti_SubscriberParams p = {.structSize = CUpti_SubscriberParams_STRUCT_SIZE,
		                            .subscriberName = "nvlprof",
		                            .oldSubscriberName = old,
		                            .oldSubscriberSize = sizeof old - 1};
		r = nvlp_cu.cuptiSubscribe_v2(&subscribers.real, dispatch, NULL, &p);
		if (who && wholen)
			snprintf(who, wholen, "%s", old);
	} else {
		r = nvlp_cu.cuptiSubscribe(&subscribers.real, dispatch, NULL);
	}
	__atomic_store_n(&subscribers.holding, 0, __ATOMIC_RELEASE);
	if (r != CUPTI_SUCCESS)
		return subscribers.refused = (int)r;
	subscribers.held = 1;
	return 0;
}

static void apply_locked(int d, int cbid)
{
	if (subscribers.held)
		nvlp_cu.cuptiEnableCallback(subscribers.ours[d][cbid] | subscribers.theirs[d][cbid],
		                            subscribers.real, (CUpti_CallbackDomain)d,
		                            (CUpti_CallbackId)cbid);
}

/* After the client turned a whole domain off: ours in it back on. */
static void reapply_ours_locked(int d)
{
	for (int c = 0; c < MAXCB; c++)
		if (subscribers.ours[d][c])
			apply_locked(d, c);
}

int nvlp_sub_start(nvlp_sub_drv_fn drv)
{
	__atomic_store_n(&subscribers.drv_cb, drv, __ATOMIC_RELEASE);
	char who[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
	pthread_mutex_lock(&mmu);
	int r = hold_locked(who, sizeof who);
	pthread_mutex_unlock(&mmu);
	if (r)
		nvlp_note(NVLP_NOTE_FOREIGN_TOOL, -1, (uint64_t)r,
		          "CUPTI callback API held by another subscriber (%s%s%s): no driver-level "
		          "capture; managed memory and copies are seen only through the CUDA runtime "
		          "hooks (not from CuPy, JAX, Triton or NCCL's own runtime)",
		          nvlp_cupti_err((CUptiResult)r), who[0] ? ", " : "", who);
	return r;
}

int nvlp_sub_enable(CUpti_CallbackDomain d, CUpti_CallbackId cbid, int on)
{
	if ((unsigned)d >= NDOM || cbid >= MAXCB)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&mmu);
	int r = subscribers.held ? 0 : CUPTI_ERROR_NOT_INITIALIZED;
	if (subscribers.held) {
		__atomic_store_n(&subscribers.ours[d][cbid], (unsigned char)(on != 0),
		                 __ATOMIC_RELAXED);
		r = nvlp_cu.cuptiEnableCallback(subscribers.ours[d][cbid] |
		                                    subscribers.theirs[d][cbid],
		                                subscribers.real, d, cbid);
	}
	pthread_mutex_unlock(&mmu);
	return r;
}

/* The API domains a detach waits in (every runtime and driver call reaches dispatch). */
static const CUpti_CallbackDomain api_domains[] = {CUPTI_CB_DOMAIN_RUNTIME_API,
                                                   CUPTI_CB_DOMAIN_DRIVER_API};

/* The API domains back to the union of ours and the client's (mmu held). */
static void api_domains_restore_locked(void)
{
	for (size_t i = 0; i < sizeof api_domains / sizeof api_domains[0]; i++) {
		int d = (int)api_domains[i];
		nvlp_cu.cuptiEnableDomain(0, subscribers.real, (CUpti_CallbackDomain)d);
		for (int c = 0; c < MAXCB; c++)
			if (subscribers.ours[d][c] || subscribers.theirs[d][c])
				apply_locked(d, c);
	}
}

int nvlp_sub_exit_hook(void (*hook)(const char *fn))
{
	pthread_mutex_lock(&mmu);
	int r = hold_locked(NULL, 0);
	if (!r && !nvlp_cu.cuptiEnableDomain)
		r = CUPTI_ERROR_NOT_INITIALIZED;
	for (size_t i = 0; !r && i < sizeof api_domains / sizeof api_domains[0]; i++)
		r = (int)nvlp_cu.cuptiEnableDomain(1, subscribers.real, api_domains[i]);
	if (r && subscribers.held && nvlp_cu.cuptiEnableDomain)
		api_domains_restore_locked();
	else if (!r) /* set last: no detach runs while a domain is being enabled */
		__atomic_store_n(&subscribers.exit_hook, hook, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mmu);
	return r;
}

void nvlp_sub_exit_hook_cancel(void)
{
	pthread_mutex_lock(&mmu);
	if (__atomic_exchange_n(&subscribers.exit_hook, NULL, __ATOMIC_ACQ_REL) && subscribers.held)
		api_domains_restore_locked();
	pthread_mutex_unlock(&mmu);
}

int nvlp_sub_nofinalize(void)
{
	static int v = -1;
	int t = __atomic_load_n(&v, __ATOMIC_RELAXED);
	if (t < 0) {
		const char *e = getenv("NVLPROF_DETACH_TEST");
		t = e && !strcmp(e, "nofinalize");
		__atomic_store_n(&v, t, __ATOMIC_RELAXED);
	}
	return t;
}

int nvlp_sub_finalize(void)
{
	pthread_mutex_lock(&mmu);
	__atomic_store_n(&subscribers.exit_hook, NULL, __ATOMIC_RELEASE);
	int r = nvlp_sub_nofinalize() ? CUPTI_SUCCESS
	        : nvlp_cu.cuptiFinalize  ? (int)nvlp_cu.cuptiFinalize()
	                                 : CUPTI_ERROR_NOT_INITIALIZED;
	/* CUPTI dropped the subscription: a later client passes through (mux_wanted) */
	__atomic_store_n(&subscribers.ccb, NULL, __ATOMIC_RELEASE);
	subscribers.held = subscribers.client = 0;
	memset(subscribers.ours, 0, sizeof subscribers.ours);
	memset(subscribers.theirs, 0, sizeof subscribers.theirs);
	pthread_mutex_unlock(&mmu);
	return r;
}

int nvlp_sub_client(void)
{
	return __atomic_load_n(&subscribers.client, __ATOMIC_ACQUIRE);
}

void nvlp_sub_atfork_child(void)
{
	/* CUDA (and CUPTI's subscriptions) do not survive fork */
	memset(&subscribers, 0, sizeof subscribers);
	pthread_mutex_init(&mmu, NULL);
}

/* ---- the exported wrappers ---- */

#define PASS(name, ...)                                                                            \
	do {                                                                                       \
		__typeof__(&name) f_ = (__typeof__(&name))nvlp_share_caller_real(                  \
		    #name, __builtin_return_address(0), (void *)name);                             \
		if (!f_ && nvlp_cupti_load(NULL, 0) == 0)                                          \
			f_ = nvlp_cu.name;                                                         \
		return f_ ? f_(__VA_ARGS__) : CUPTI_ERROR_NOT_INITIALIZED;                         \
	} while (0)

/* Multiplex a new subscriber when we hold the subscription or will: recording on, CUPTI not
 * given up, and the caller uses the process's CUPTI (a tool's private copy is its own business). */
static int mux_wanted(void *caller, const char *name, void *self)
{
	if (__atomic_load_n(&subscribers.holding, __ATOMIC_ACQUIRE) &&
	    pthread_equal(subscribers.holder, pthread_self()))
		return 0; /* our own subscription, re-entering through CUPTI's exported name */
	if (__atomic_load_n(&subscribers.held, __ATOMIC_ACQUIRE))
		return 1;
	if (!nvlp_is_active() || !nvlp_cfg()->cupti || nvlp_cupti_state() == NVLP_CS_ASIDE)
		return 0;
	if (!nvlp_cfg()->driver)
		return 0; /* no driver capture: nothing of ours to share the subscription with */
	void *f = nvlp_share_caller_real(name, caller, self);
	if (!f)
		return 1;
	return nvlp_cupti_load(NULL, 0) == 0 &&
	       (f == (void *)nvlp_cu.cuptiSubscribe || f == (void *)nvlp_cu.cuptiSubscribe_v2);
}

static CUptiResult client_subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
                                    void *data)
{
	if (!sub)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&mmu);
	CUptiResult r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; /* as CUPTI: one client */
	if (!subscribers.client) {
		r = (CUptiResult)hold_locked(NULL, 0);
		if (r == CUPTI_SUCCESS) {
			memset(subscribers.theirs, 0, sizeof subscribers.theirs);
			subscribers.cdata = data;
			__atomic_store_n(&subscribers.ccb, cb, __ATOMIC_RELEASE);
			subscribers.client = 1;
			*sub = CLIENT;
		}
	}
	pthread_mutex_unlock(&mmu);
	if (r == CUPTI_SUCCESS && !__atomic_exchange_n(&subscribers.noted, 1, __ATOMIC_ACQ_REL))
		nvlp_note(NVLP_NOTE_SHARED_CUPTI, -1, 0,
		          "another CUPTI client (torch.profiler/Kineto) subscribed to callbacks: "
		          "nvlprof holds the one subscription and forwards that client the callbacks "
		          "it enables");
	return r;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
                                                void *data)
{
	if (mux_wanted(__builtin_return_address(0), "cuptiSubscribe", (void *)cuptiSubscribe))
		return client_subscribe(sub, cb, data);
	PASS(cuptiSubscribe, sub, cb, data);
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *sub,
                                                   CUpti_CallbackFunc cb, void *data,
                                                   CUpti_SubscriberParams *params)
{
	if (mux_wanted(__builtin_return_address(0), "cuptiSubscribe_v2",
	               (void *)cuptiSubscribe_v2)) {
		CUptiResult r = client_subscribe(sub, cb, data);
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params &&
		    params->oldSubscriberName && params->oldSubscriberSize > 0)
			snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s",
			         subscribers.held ? "nvlprof" : "");
		return r;
	}
	PASS(cuptiSubscribe_v2, sub, cb, data, params);
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
	if (sub != CLIENT || !subscribers.held)
		PASS(cuptiUnsubscribe, sub);
	pthread_mutex_lock(&mmu);
	if (!subscribers.client) {
		pthread_mutex_unlock(&mmu);
		return CUPTI_ERROR_INVALID_PARAMETER;
	}
	__atomic_store_n(&subscribers.ccb, NULL, __ATOMIC_RELEASE);
	subscribers.client = 0;
	for (int d = 0; d < NDOM; d++)
		for (int c = 0; c < MAXCB; c++)
			if (subscribers.theirs[d][c]) {
				subscribers.theirs[d][c] = 0;
				apply_locked(d, c);
			}
	pthread_mutex_unlock(&mmu);
	return CUPTI_SUCCESS;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t en, CUpti_SubscriberHandle sub,
                                                     CUpti_CallbackDomain d, CUpti_CallbackId cbid)
{
	if (sub != CLIENT || !subscribers.held)
		PASS(cuptiEnableCallback, en, sub, d, cbid);
	if ((unsigned)d >= NDOM)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&mmu);
	CUptiResult r;
	if (cbid >= MAXCB) {
		r = nvlp_cu.cuptiEnableCallback(en, subscribers.real, d, cbid); /* never ours */
	} else {
		__atomic_store_n(&subscribers.theirs[d][cbid], (unsigned char)(en != 0),
		                 __ATOMIC_RELAXED);
		r = nvlp_cu.cuptiEnableCallback(en || subscribers.ours[d][cbid], subscribers.real,
		                                d, cbid);
	}
	pthread_mutex_unlock(&mmu);
	return r;
}

/* The client turns a whole domain on or off; ours in it stay on. */
static CUptiResult domain_locked(uint32_t en, int d)
{
	memset(subscribers.theirs[d], en != 0, MAXCB);
	CUptiResult r =
	    nvlp_cu.cuptiEnableDomain
	        ? nvlp_cu.cuptiEnableDomain(en, subscribers.real, (CUpti_CallbackDomain)d)
	        : CUPTI_ERROR_NOT_INITIALIZED;
	if (!en)
		reapply_ours_locked(d);
	return r;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t en, CUpti_SubscriberHandle sub,
                                                   CUpti_CallbackDomain d)
{
	if (sub != CLIENT || !subscribers.held)
		PASS(cuptiEnableDomain, en, sub, d);
	if ((unsigned)d >= NDOM || d == CUPTI_CB_DOMAIN_INVALID)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&mmu);
	CUptiResult r = domain_locked(en, (int)d);
	pthread_mutex_unlock(&mmu);
	return r;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t en, CUpti_SubscriberHandle sub)
{
	if (sub != CLIENT || !subscribers.held)
		PASS(cuptiEnableAllDomains, en, sub);
	pthread_mutex_lock(&mmu);
	CUptiResult r = CUPTI_SUCCESS;
	for (int d = 1; d < NDOM; d++) {
		CUptiResult r1 = domain_locked(en, d);
		if (r1 != CUPTI_SUCCESS && r == CUPTI_SUCCESS)
			r = r1;
	}
	pthread_mutex_unlock(&mmu);
	return r;
}

NVLP_EXPORT CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t *en, CUpti_SubscriberHandle sub,
                                                       CUpti_CallbackDomain d, CUpti_CallbackId cbid)
{
	if (sub != CLIENT || !subscribers.held)
		PASS(cuptiGetCallbackState, en, sub, d, cbid);
	if (!en || (unsigned)d >= NDOM)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (cbid >= MAXCB)
		return nvlp_cu.cuptiGetCallbackState(en, subscribers.real, d, cbid);
	*en = __atomic_load_n(&subscribers.theirs[d][cbid], __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}

/* fake_nccl_prof.c: the fake libnccl.so.2's side of NCCL's profiler plugin interface: loads a plugin and starts its events as NCCL 2.28.9 does. */
/*
 * Loading, as NCCL's src/plugin/plugin_open.cc: NCCL_PROFILER_PLUGIN as given (a path or a
 * soname), else libnccl-profiler-NAME.so; unset: libnccl-profiler.so; "none": no plugin. The
 * table: ncclProfiler_v5, else ncclProfiler_v4 (its events made v4 ones as NCCL's adapter does:
 * no API events, a collective's parent is its group); FAKE_NCCL_PROFILER_V4=1: v4 only (2.27).
 *
 * Events, by NCCL's rules (src/plugin/profiler.cc): an event type starts when the mask (one int,
 * handed to every init, re-read at every call) holds a bit that needs it: GroupApi for any of
 * them, CollApi for CollApi, Coll and what lies under a collective, Group for Group or Coll (and
 * below), Coll for Coll (and below), KernelLaunch and KernelCh for their own bits. A collective
 * outside a group: GroupApi start, state GroupStartApiStop, CollApi start, Group start, Coll start
 * (parent: the CollApi, parentGroup: the Group), KernelLaunch start and stop, CollApi stop, state
 * GroupEndApiStart; after its kernel: per channel KernelCh start (parent: the Coll), state
 * KernelChStop, stop; then Coll stop, Group stop, GroupApi stop. In a group the GroupApi spans the
 * group and the kernels run at its end (one fused kernel: shared stamps).
 *
 * Kernel channels (FAKE_NCCL_KCH=1), as NCCL's proxy thread reports its kernels' globaltimer
 * stamps (here CLOCK_REALTIME, the H100's globaltimer base). Each collective's "kernel" runs
 * [launch, launch + 2 us + bytes / 64 ns] (launch: the call, or its group's end); channel c
 * starts 7c ns later and stops 3c ns earlier, so the span is exactly that. FAKE_NCCL_KCH_BAD=1
 * adds, by seq % 10: 3 a channel with a zero stamp, 5 a reversed one, 7 one that never stops;
 * seq % 50 == 11 is replayed once (a CUDA graph), its last channel's stop reported after the
 * replay's first channel's (outside a group). FAKE_NCCL_KCH_LOG=PATH appends
 * "seq fn span share" per collective: what the analyzer must find. Collectives of 1 MiB or more
 * run on FAKE_NCCL_KCH_CHANNELS channels (default 16), smaller ones on 2. FAKE_NCCL_KCH_JITTER=1:
 * each channel but 0 starts and stops up to 2 us inside the span, by a hash of the kernel's start
 * and the channel (so fused collectives still share stamps), as real channels scatter (the span
 * stays exact). FAKE_NCCL_KCH_WANT=N: the Coll event says nChannels + N (N < 0: NCCL reports
 * more channels than it declared; N > 0: fewer), the shim's folding must not depend on it.
 * FAKE_NCCL_PROFILER_LOG=1 prints what was loaded; FAKE_NCCL_NNODES=N: init says N nodes.
 */
#include <dlfcn.h>   /* dlopen */
#include <pthread.h> /* pthread_mutex_t */
#include <stdio.h>   /* fprintf */
#include <stdlib.h>  /* getenv */
#include <string.h>  /* memset, strcmp */
#include <strings.h> /* strcasecmp */
#include <time.h>    /* clock_gettime */

#include <nccl.h>
#include "nccl/profiler.h" /* the project's vendored copy of NCCL's plugin headers */

#include "fake.h" /* fake_kch_inset */
#include "fake_nccl_int.h"

typedef ncclProfilerEventDescr_v5_t descr;
/* NCCL 2.28.9's GroupApi states (src/include/plugin/nccl_profiler.h; the example plugin's header
 * names them differently): after the API's group start, at the API's group end. */
enum { GROUP_START_API_STOP = 23, GROUP_END_API_START = 24 };
static const ncclProfiler_v5_t *p5; /* set once, under prof_mu */
static const ncclProfiler_v4_t *p4;
static int prof_mask, prof_tried;
static uint64_t prof_comms;
static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;

static int loaded(void)
{
	return __atomic_load_n(&p5, __ATOMIC_ACQUIRE) || __atomic_load_n(&p4, __ATOMIC_ACQUIRE);
}

/* ---- calls into the plugin, through the table NCCL took ---- */
static void p_start(void *ctx, void **h, descr *d)
{
	*h = NULL;
	if (p5) {
		p5->startEvent(ctx, h, d);
		return;
	}
	if (d->type & (ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
	               ncclProfileKernelLaunch))
		return; /* v4 knows none of them */
	ncclProfilerEventDescr_v4_t e;
	memset(&e, 0, sizeof e);
	e.type = (uint8_t)d->type;
	e.parentObj = d->type == ncclProfileColl ? d->coll.parentGroup : d->parentObj;
	e.rank = d->rank;
	if (d->type == ncclProfileColl) {
		e.coll.seqNumber = d->coll.seqNumber, e.coll.func = d->coll.func;
		e.coll.count = d->coll.count, e.coll.datatype = d->coll.datatype;
		e.coll.nChannels = d->coll.nChannels, e.coll.nWarps = d->coll.nWarps;
		e.coll.algo = d->coll.algo, e.coll.proto = d->coll.proto;
	} else if (d->type == ncclProfileKernelCh) {
		e.kernelCh.channelId = d->kernelCh.channelId, e.kernelCh.pTimer = d->kernelCh.pTimer;
	}
	p4->startEvent(ctx, h, &e);
}
static void p_stop(void *h)
{
	if (h)
		p5 ? p5->stopEvent(h) : p4->stopEvent(h);
}
static void p_state(void *h, int s, ncclProfilerEventStateArgs_v5_t *a)
{
	if (!h)
		return;
	if (p5)
		p5->recordEventState(h, s, a);
	else if (s == ncclProfilerKernelChStop) /* the GroupApi states are v5's */
		p4->recordEventState(h, s, (ncclProfilerEventStateArgs_v4_t *)a);
}

/* ---- loading ---- */
__attribute__((unused)) static void *open_plugin(const char *name)
{
	char buf[4096];
	if (name && !strcasecmp(name, "none"))
		return NULL;
	snprintf(buf, sizeof buf, "%s", name && *name ? name : "libnccl-profiler.so");
	void *h = dlopen(buf, RTLD_NOW | RTLD_LOCAL);
	size_t n = name ? strlen(name) : 0;
	if (!h && n && !strchr(name, '/') && (strncmp(name, "lib", 3) || strcmp(name + n - 3, ".so"))) {
		snprintf(buf, sizeof buf, "libnccl-profiler-%s.so", name);
		h = dlopen(buf, RTLD_NOW | RTLD_LOCAL);
	}
	return h;
}

static void load(void)
{
	const char *name = getenv("NCCL_PROFILER_PLUGIN");
#ifdef FAKE_NCCL_2_18 /* NCCL before 2.23 has no profiler plugin interface */
	void *h = NULL;
#else
	void *h = open_plugin(name);
#endif
	/* FAKE_NCCL_PROFILER_V4=1: NCCL 2.27, which knows no interface after v4 */
	const ncclProfiler_v5_t *t5 =
	    h && !getenv("FAKE_NCCL_PROFILER_V4") ? dlsym(h, "ncclProfiler_v5") : NULL;
	const ncclProfiler_v4_t *t4 = h && !t5 ? dlsym(h, "ncclProfiler_v4") : NULL;
	__atomic_store_n(&p4, t4, __ATOMIC_RELEASE);
	__atomic_store_n(&p5, t5, __ATOMIC_RELEASE);
	if (getenv("FAKE_NCCL_PROFILER_LOG"))
		fprintf(stderr, "fake nccl: profiler plugin %s: %s%s\n", name ? name : "(unset)",
		        t5 ? t5->name : t4 ? t4->name : "not loaded", t4 ? " (v4)" : "");
}

/* NCCL's logger (ncclDebugLog): plugins call it (Inspector's INFO does, unchecked) */
static void fake_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                     const char *fmt, ...)
{
	(void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

/* name: the config's commName, as NCCL passes it (NULL when the job gave none). */
void fake_prof_comm_init(struct ncclComm *c, const char *name)
{
	pthread_mutex_lock(&prof_mu); /* as NCCL: the plugin is loaded once, inits serialised */
	if (!prof_tried++)
		load();
	const char *nn = getenv("FAKE_NCCL_NNODES"); /* nNodes, as NCCL counts host hashes */
	int nnodes = nn && *nn ? atoi(nn) : 1;
	uint64_t id = 0xfacade00ull + ++prof_comms;
	int rc = ncclSuccess;
	if (p5)
		rc = p5->init(&c->prof, id, &prof_mask, name, nnodes, c->nranks, c->rank, fake_log);
	else if (p4)
		rc = p4->init(&c->prof, &prof_mask, name, id, nnodes, c->nranks, c->rank, fake_log);
	if (rc != ncclSuccess)
		c->prof = NULL;
	pthread_mutex_unlock(&prof_mu);
}

void fake_prof_comm_fini(struct ncclComm *c)
{
	if (loaded() && c->prof)
		p5 ? p5->finalize(c->prof) : p4->finalize(c->prof);
}

/* ---- kernel channels ---- */
static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define KCH_GROUP_MAX 64
/* The calling thread's collectives waiting for their group's end (their launch) */
static __thread struct {
	void *h[KCH_GROUP_MAX], *capi[KCH_GROUP_MAX];
	uint64_t seq[KCH_GROUP_MAX];
	const char *fn[KCH_GROUP_MAX];
	size_t count[KCH_GROUP_MAX];
	int nch[KCH_GROUP_MAX];
	struct ncclComm *c[KCH_GROUP_MAX];
	int n;
	uint64_t start, dur;
} kg;
static __thread void *gapi; /* the API group event of the calling thread's group */
static __thread int gapi_on;

/* FAKE_NCCL_KCH*, read once (a getenv per collective would be in bench_shim) */
static int kch_on, kch_big = 16, kch_jitter, kch_want;
__attribute__((constructor)) static void kch_init(void)
{
	kch_on = getenv("FAKE_NCCL_KCH") != NULL;
	const char *v = getenv("FAKE_NCCL_KCH_CHANNELS");
	if (v && atoi(v) > 0 && atoi(v) <= 64)
		kch_big = atoi(v);
	kch_jitter = getenv("FAKE_NCCL_KCH_JITTER") != NULL;
	v = getenv("FAKE_NCCL_KCH_WANT");
	kch_want = v ? atoi(v) : 0;
}

/* FAKE_NCCL_KCH_JITTER: how far inside the span channel ch of the kernel started at g0 starts
 * (which = 0) or stops (1): at most 2 us and a third of the span */
static uint64_t kch_inset(uint64_t g0, int ch, int which, uint64_t dur)
{
	return fake_kch_inset(g0, ch, which, dur / 3 < 2000 ? dur / 3 : 2000);
}

/* FAKE_NCCL_KCH_BAD's graph replays: the original's last channel reports its stop only after
 * the replay's first channel did (NCCL's proxy polls channels in its own order) */
static __thread struct {
	void *h;
	uint64_t stop;
} kch_late;

static void kch_stop(void *h, uint64_t stop)
{
	ncclProfilerEventStateArgs_v5_t st;
	memset(&st, 0, sizeof st);
	st.kernelCh.pTimer = stop;
	p_state(h, ncclProfilerKernelChStop, &st);
	p_stop(h);
}

static void kch_channels(struct ncclComm *c, void *parent, int nch, uint64_t seq, uint64_t g0,
                         uint64_t dur, int bad)
{
	for (int ch = 0; ch < nch; ch++) {
		descr d;
		memset(&d, 0, sizeof d);
		d.type = ncclProfileKernelCh;
		d.parentObj = parent;
		d.rank = c->rank;
		d.kernelCh.channelId = (uint8_t)ch;
		d.kernelCh.pTimer = g0 + 7ull * ch;
		uint64_t stop = g0 + dur - 3ull * ch;
		if (kch_jitter && ch) {
			d.kernelCh.pTimer = g0 + kch_inset(g0, ch, 0, dur);
			stop = g0 + dur - kch_inset(g0, ch, 1, dur);
		}
		int last = ch == nch - 1 && nch > 1;
		if (bad && last && seq % 10 == 3)
			d.kernelCh.pTimer = 0;
		if (bad && last && seq % 10 == 5)
			stop = d.kernelCh.pTimer - 100;
		void *h = NULL;
		p_start(c->prof, &h, &d);
		if (!h || (bad && last && seq % 10 == 7))
			continue; /* never stopped */
		if (bad && last && seq % 50 == 11 && kg.n == 1) { /* replayed next: its stop comes late
		                                                    * (a collective alone in its kernel) */
			kch_late.h = h, kch_late.stop = stop;
			continue;
		}
		kch_stop(h, stop);
		if (!ch && kch_late.h) {
			kch_stop(kch_late.h, kch_late.stop);
			kch_late.h = NULL;
		}
	}
}

/* Which mask bits make NCCL start an event of this type */
static int wanted(uint64_t type)
{
	enum { BELOW = ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh |
	               ncclProfileNetPlugin };
	int m = __atomic_load_n(&prof_mask, __ATOMIC_RELAXED);
	switch (type) {
	case ncclProfileGroupApi:
		return m & (ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
		            ncclProfileKernelLaunch | ncclProfileGroup | ncclProfileColl |
		            ncclProfileP2p | BELOW);
	case ncclProfileCollApi: return m & (ncclProfileCollApi | ncclProfileColl | BELOW);
	case ncclProfileGroup: return m & (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | BELOW);
	case ncclProfileColl: return m & (ncclProfileColl | BELOW);
	default: return m & (int)type;
	}
}

static void *ev(struct ncclComm *c, descr *d)
{
	void *h = NULL;
	if (wanted(d->type))
		p_start(c->prof, &h, d);
	return h;
}

/* The task events of queued collective i (NCCL's hostStreamPlanTask: Group, then each Coll,
 * started and stopped at launch; the kernel channels refer to the Coll later). */
static void *coll_event(int i, void *grp)
{
	descr d;
	memset(&d, 0, sizeof d);
	d.type = ncclProfileColl;
	d.parentObj = kg.capi[i];
	d.rank = kg.c[i]->rank;
	d.coll.parentGroup = grp;
	d.coll.seqNumber = kg.seq[i];
	d.coll.func = kg.fn[i];
	d.coll.count = kg.count[i];
	d.coll.datatype = "ncclFloat32";
	int declared = kg.nch[i] + kch_want;
	d.coll.nChannels = (uint8_t)(declared < 0 ? 0 : declared > 255 ? 255 : declared);
	d.coll.nWarps = 16;
	d.coll.algo = "RING";
	d.coll.proto = kg.nch[i] > 2 ? "SIMPLE" : "LL";
	return ev(kg.c[i], &d);
}

static void launch(void)
{
	descr d;
	void *grp = NULL;
	for (int i = 0; i < kg.n; i++) {
		if (!i || kg.c[i] != kg.c[i - 1]) { /* a plan per communicator */
			p_stop(grp);
			memset(&d, 0, sizeof d);
			d.type = ncclProfileGroup;
			grp = ev(kg.c[i], &d);
		}
		kg.h[i] = coll_event(i, grp);
		p_stop(kg.h[i]);
	}
	p_stop(grp);
	memset(&d, 0, sizeof d);
	d.type = ncclProfileKernelLaunch;
	d.parentObj = gapi;
	if (kg.n)
		p_stop(ev(kg.c[0], &d));
}

static void kernels(void)
{
	kg.start = real_ns(); /* launched at the end of the group, as NCCL does */
	while (real_ns() < kg.start + kg.dur) /* the events come after the kernel ended */
		;
	int bad = getenv("FAKE_NCCL_KCH_BAD") != NULL;
	const char *logp = getenv("FAKE_NCCL_KCH_LOG");
	FILE *lf = logp ? fopen(logp, "a") : NULL;
	for (int i = 0; i < kg.n; i++) {
		kch_channels(kg.c[i], kg.h[i], kg.nch[i], kg.seq[i], kg.start, kg.dur, bad);
		if (lf)
			fprintf(lf, "%llu %s %llu %d\n", (unsigned long long)kg.seq[i], kg.fn[i],
			        (unsigned long long)kg.dur, kg.n);
		if (bad && kg.seq[i] % 50 == 11) /* a graph replay, later */
			kch_channels(kg.c[i], kg.h[i], kg.nch[i], kg.seq[i] + 1, kg.start + kg.dur + 5000,
			             kg.dur, 0);
	}
	if (lf)
		fclose(lf);
}

/* The end of the calling thread's outermost group (or of a collective outside one). */
void fake_prof_group_end(void)
{
	if (gapi_on)
		p_state(gapi, GROUP_END_API_START, NULL);
	if (kg.n && loaded()) {
		launch();
		if (kch_on && wanted(ncclProfileKernelCh))
			kernels();
	}
	kg.n = 0;
	if (gapi_on) {
		gapi_on = 0;
		p_stop(gapi);
		gapi = NULL;
	}
}

/* A collective of the calling thread; depth: its group depth (0: outside a group). */
void fake_prof_coll(struct ncclComm *c, const char *func, size_t n, ncclDataType_t t,
                    uint64_t seq, int depth)
{
	if (!loaded() || !c || !c->prof)
		return;
	size_t bytes = n * (t == ncclFloat32 || t == ncclInt32 ? 4 : t == ncclInt8 ? 1 : 2);
	descr d;
	memset(&d, 0, sizeof d);
	if (!gapi_on) { /* only the outermost group has an API event */
		d.type = ncclProfileGroupApi;
		d.groupApi.groupDepth = depth + 1;
		gapi = ev(c, &d);
		gapi_on = 1;
		p_state(gapi, GROUP_START_API_STOP, NULL);
	}
	memset(&d, 0, sizeof d);
	d.type = ncclProfileCollApi;
	d.parentObj = gapi;
	d.collApi.func = func, d.collApi.count = n, d.collApi.datatype = "ncclFloat32";
	void *capi = ev(c, &d);
	p_stop(capi); /* the API call returns; its task runs at the group's end */
	if (kg.n < KCH_GROUP_MAX) {
		uint64_t dur = 2000 + bytes / 64;
		if (!kg.n)
			kg.dur = 0;
		if (dur > kg.dur)
			kg.dur = dur; /* a fused kernel lasts as long as its longest part */
		kg.capi[kg.n] = capi, kg.seq[kg.n] = seq, kg.fn[kg.n] = func, kg.count[kg.n] = n;
		kg.nch[kg.n] = bytes >= (1u << 20) ? kch_big : 2, kg.c[kg.n] = c;
		kg.n++;
	}
	if (!depth)
		fake_prof_group_end();
}

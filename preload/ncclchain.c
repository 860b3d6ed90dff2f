/* ncclchain.c: the NCCL profiler plugin NCCL finds (ncclProfiler_v5): nvlprof's own, with the plugin the user named in NCCL_PROFILER_PLUGIN chained behind it. */
/*
 * NCCL loads one profiler plugin. The runtime's constructor (nvlp_nccl_plugin_env) keeps the
 * user's NCCL_PROFILER_PLUGIN in NVLPROF_NCCL_CHAIN (empty: it was unset) and points NCCL at
 * this library. At the first init this file loads that plugin as NCCL 2.28.9 would
 * (src/plugin/plugin_open.cc, profiler.cc): the value as given (a path or a soname), else
 * libnccl-profiler-NAME.so; unset: libnccl-profiler.so, else the net plugin NCCL loaded; a
 * prefix of STATIC_PLUGIN: the program; the newest table NCCL would take (v5 .. v3 here).
 *
 * NCCL is handed the union of both plugins' event masks. Every call is forwarded with each
 * plugin's own context and handles: an event NCCL starts gets a pair {nvlprof's handle, the
 * other's handle} from a ring of the communicator, a parent handle in a descriptor is the pair
 * and each plugin is given its own half. The other plugin is given an event only when its own
 * mask would have made NCCL start it (NCCL's rules in 2.28.9: a collective event comes for
 * Coll, ProxyOp, ProxyStep, KernelCh or NetPlugin, and so on), so it sees what it sees alone.
 * A pair is reused CH_TASK (or CH_PROXY) events later: more than the plugins' own pools hold
 * (NCCL's example plugin: 256 collectives), so a handle still referenced is still the right one.
 *
 * A plugin that is missing, offers no table NCCL would take, or fails init, is left out with a
 * NOTE and one stderr line; nvlprof goes on alone. Without a chained plugin the table calls
 * nvlprof's functions directly, as before.
 */
#include <dlfcn.h>   /* dlopen, dladdr */
#include <limits.h>  /* PATH_MAX */
#include <pthread.h> /* pthread_once */
#include <stdio.h>   /* snprintf */
#include <stdlib.h>  /* getenv, setenv, realpath */
#include <string.h>  /* strcmp, strncasecmp */
#include <strings.h> /* strcasecmp */

#include "ncclprof.h"
#include "nvlp_module.h"
#include "nvlp_rt.h"

#define CHAIN_ENV "NVLPROF_NCCL_CHAIN"
#define CH_TASK 8192   /* pairs for API, group and task events per communicator (power of two) */
#define CH_PROXY 16384 /* pairs for proxy, kernel-channel and net events (power of two) */

static ncclResult_t ex_init(void **context, uint64_t commId, int *mask, const char *commName,
                            int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);

/* Found by NCCL 2.28+: nvlprof's functions until a chained plugin is loaded (at the first init,
 * before any event: NCCL starts events only on an initialised communicator). */
NVLP_EXPORT ncclProfiler_v5_t ncclProfiler_v5 = {
    .name = "nvlprof",
    .init = ex_init,
    .startEvent = nvlp_np_start,
    .stopEvent = nvlp_np_stop,
    .recordEventState = nvlp_np_state,
    .finalize = nvlp_np_finalize,
};

/* ---- ncclProfiler_v4, for NCCL 2.27: its events made v5 ones ---- */

static ncclResult_t v4_init(void **context, int *mask, const char *commName, uint64_t commHash,
                            int nNodes, int nranks, int rank, ncclDebugLogger_t logfn)
{
	__atomic_store_n(&nvlp_np_iface, 4, __ATOMIC_RELAXED);
	return ncclProfiler_v5.init(context, commHash, mask, commName, nNodes, nranks, rank, logfn);
}

static ncclResult_t v4_start(void *context, void **handle, ncclProfilerEventDescr_v4_t *e)
{
	if (!e) {
		if (handle)
			*handle = NULL;
		return ncclSuccess;
	}
	ncclProfilerEventDescr_v5_t d;
	memset(&d, 0, sizeof d);
	memcpy((char *)&d + offsetof(ncclProfilerEventDescr_v5_t, parentObj), (const char *)e + offsetof(ncclProfilerEventDescr_v4_t, parentObj),
	       sizeof *e - offsetof(ncclProfilerEventDescr_v4_t, parentObj));
	d.type = e->type;
	if (e->type == ncclProfileColl) { /* in v4 the group is a collective's parent */
		d.coll.parentGroup = e->parentObj;
		d.parentObj = NULL;
	} else if (e->type == ncclProfileP2p) {
		d.p2p.parentGroup = e->parentObj;
		d.parentObj = NULL;
	}
	return ncclProfiler_v5.startEvent(context, handle, &d);
}

static ncclResult_t v4_stop(void *handle)
{
	return ncclProfiler_v5.stopEvent(handle);
}

static ncclResult_t v4_state(void *handle, ncclProfilerEventState_v4_t state,
                             ncclProfilerEventStateArgs_v4_t *args)
{
	return ncclProfiler_v5.recordEventState(handle, state,
	                                        (ncclProfilerEventStateArgs_v5_t *)(void *)args);
}

static ncclResult_t v4_finalize(void *context)
{
	return ncclProfiler_v5.finalize(context);
}

NVLP_EXPORT const ncclProfiler_v4_t ncclProfiler_v4 = {
    .name = "nvlprof",
    .init = v4_init,
    .startEvent = v4_start,
    .stopEvent = v4_stop,
    .recordEventState = v4_state,
    .finalize = v4_finalize,
};

/* ---- the chained plugin ---- */
static struct {
	void *lib;
	int ver; /* 5, 4 or 3 */
	union {
		const ncclProfiler_v5_t *v5;
		const ncclProfiler_v4_t *v4;
		const ncclProfiler_v3_t *v3;
	} t;
	const char *name; /* the table's name */
	char path[PATH_MAX];
} chain;
/* The event masks: ours, the chained plugin's, and NCCL's global. */
static struct {
	int their, their_seen; /* the chained plugin's mask, as NCCL's global would hold it */
	int own;
	int *nccl; /* NCCL's global mask, as init was given it */
} masks;

struct pair {
	uint64_t type; /* the event's type word, first as in every handle */
	void *own, *their;
};
struct cctx {
	void *own, *their;
	struct pair *task, *proxy;
	uint64_t next_task, next_proxy;
};

/* Where NCCL would open a plugin of this kind (prefix libnccl-profiler or libnccl-net).
 * @return the library, or NULL with the names tried in tried */
static void *open_like_nccl(const char *prefix, const char *name, int flags, char *tried, size_t n)
{
	char buf[PATH_MAX];
	if (name && *name && !strncasecmp(name, "STATIC_PLUGIN", strlen(name)))
		return dlopen(NULL, flags);
	if (name && *name)
		snprintf(buf, sizeof buf, "%s", name);
	else
		snprintf(buf, sizeof buf, "%s.so", prefix);
	void *h = dlopen(buf, flags);
	size_t len = strlen(name ? name : "");
	int plain = name && *name && !strchr(name, '/') &&
	            (strncmp(name, "lib", 3) || len < 3 || strcmp(name + len - 3, ".so"));
	snprintf(tried, n, "%s", buf);
	if (!h && plain) {
		snprintf(buf, sizeof buf, "%s-%s.so", prefix, name);
		h = dlopen(buf, flags);
		size_t t = strlen(tried);
		snprintf(tried + t, n - t, ", %s", buf);
	}
	return h;
}

/* The newest table NCCL (through interface nvlp_np_iface) would take, skipping nvlprof's own
 * (the program's scope, a symlink to this library). @return its version, 0 none */
static int find_table(void *lib, int *older)
{
	const void *self[] = {&ncclProfiler_v5, &ncclProfiler_v4};
	*older = 0;
	for (int v = __atomic_load_n(&nvlp_np_iface, __ATOMIC_RELAXED); v >= 1; v--) {
		char sym[32];
		snprintf(sym, sizeof sym, "ncclProfiler_v%d", v);
		void *t = dlsym(lib, sym);
		if (!t || t == self[0] || t == self[1])
			continue;
		if (v < 3) {
			*older = v;
			return 0;
		}
		chain.t.v5 = t;
		return v;
	}
	return 0;
}

static void chain_fail(const char *what, const char *name, const char *detail)
{
	nvlp_note(NVLP_NOTE_NCCL_PLUGIN, -1, 0,
	          "NCCL profiler plugin %s %s (%s): nvlprof's plugin runs alone", name, what, detail);
	nvlp_warn("NCCL profiler plugin %s %s (%s); nvlprof goes on without it "
	          "(NVLPROF_NCCL_PLUGIN=0 leaves it to NCCL alone)", name, what, detail);
}

static void install(void);

static void load_once(void)
{
	const char *name = getenv(CHAIN_ENV);
	if (!name || !strcasecmp(name, "none"))
		return;
	char tried[2 * PATH_MAX + 8];
	void *lib = open_like_nccl("libnccl-profiler", name, RTLD_NOW | RTLD_LOCAL, tried, sizeof tried);
	if (!lib && !*name) /* NCCL's fallback: profiler tables in the net plugin it loaded */
		lib = open_like_nccl("libnccl-net", getenv("NCCL_NET_PLUGIN"),
		                     RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, tried, sizeof tried);
	if (!lib) {
		if (*name) /* unset and no libnccl-profiler.so: NCCL would load none either */
			chain_fail("not loaded", name, tried);
		return;
	}
	int older;
	chain.ver = find_table(lib, &older);
	if (!chain.ver) {
		char d[64];
		if (older)
			snprintf(d, sizeof d, "it offers only interface v%d", older);
		else
			snprintf(d, sizeof d, "no ncclProfiler_v%d..v3 table", nvlp_np_iface);
		if (*name || older)
			chain_fail("not chained", *name ? name : "libnccl-profiler.so", d);
		dlclose(lib);
		return;
	}
	chain.lib = lib;
	chain.name = chain.t.v5->name ? chain.t.v5->name : "?";
	Dl_info di;
	if (!dladdr((const void *)chain.t.v5, &di) || !di.dli_fname ||
	    !realpath(di.dli_fname, chain.path))
		snprintf(chain.path, sizeof chain.path, "%s", *name ? name : "libnccl-profiler.so");
	install();
}

/* ---- forwarding ---- */

/* Which mask bits make NCCL 2.28.9 start an event of this type (src/plugin/profiler.cc). */
static int triggers(uint64_t type)
{
	enum { PROXY = ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin,
	       TASK = PROXY | ncclProfileKernelCh };
	switch (type) {
	case ncclProfileGroupApi:
		return ncclProfileGroupApi | ncclProfileP2pApi | ncclProfileCollApi |
		       ncclProfileKernelLaunch | ncclProfileGroup | ncclProfileColl | ncclProfileP2p | TASK;
	case ncclProfileCollApi: return ncclProfileCollApi | ncclProfileColl | TASK;
	case ncclProfileP2pApi: return ncclProfileP2pApi | ncclProfileP2p | TASK;
	case ncclProfileGroup: return ncclProfileGroup | ncclProfileColl | ncclProfileP2p | TASK;
	case ncclProfileColl: return ncclProfileColl | TASK;
	case ncclProfileP2p: return ncclProfileP2p | TASK;
	case ncclProfileProxyOp: return PROXY;
	case ncclProfileProxyStep: return ncclProfileProxyStep | ncclProfileNetPlugin;
	default: return (int)type; /* KernelLaunch, ProxyCtrl, KernelCh, NetPlugin: their own bit */
	}
}

/* The chained plugin may change its mask at any time (NCCL re-reads its global at every group
 * call): seen at nvlprof's next event, NCCL's copy then follows. */
static void mask_sync(void)
{
	int t = __atomic_load_n(&masks.their, __ATOMIC_RELAXED);
	if (t != __atomic_load_n(&masks.their_seen, __ATOMIC_RELAXED)) {
		__atomic_store_n(&masks.their_seen, t, __ATOMIC_RELAXED);
		int *m = __atomic_load_n(&masks.nccl, __ATOMIC_RELAXED);
		if (m)
			__atomic_store_n(m, __atomic_load_n(&masks.own, __ATOMIC_RELAXED) | t,
			                 __ATOMIC_RELAXED);
	}
}

static int is_task(uint64_t type)
{
	return !!(type & (ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
	                  ncclProfileKernelLaunch | ncclProfileGroup | ncclProfileColl |
	                  ncclProfileP2p));
}

/* A parent handle NCCL passes back: one of this communicator's pairs, split in its halves.
 * Anything else (another process's proxy parent) is given to neither plugin. */
static void split(const struct cctx *c, void *p, void **own, void **their)
{
	uintptr_t a = (uintptr_t)p, t = (uintptr_t)c->task, x = (uintptr_t)c->proxy;
	const struct pair *s = NULL;
	if (a - t < CH_TASK * sizeof *c->task && (a - t) % sizeof *c->task == 0)
		s = p;
	else if (a - x < CH_PROXY * sizeof *c->proxy && (a - x) % sizeof *c->proxy == 0)
		s = p;
	*own = s ? __atomic_load_n(&s->own, __ATOMIC_RELAXED) : NULL;
	*their = s ? __atomic_load_n(&s->their, __ATOMIC_RELAXED) : NULL;
}

static void split_descr(const struct cctx *c, ncclProfilerEventDescr_v5_t *mine,
                        ncclProfilerEventDescr_v5_t *theirs)
{
	split(c, mine->parentObj, &mine->parentObj, &theirs->parentObj);
	if (mine->type == ncclProfileColl)
		split(c, mine->coll.parentGroup, &mine->coll.parentGroup, &theirs->coll.parentGroup);
	else if (mine->type == ncclProfileP2p)
		split(c, mine->p2p.parentGroup, &mine->p2p.parentGroup, &theirs->p2p.parentGroup);
}

static void *their_start(void *ctx, ncclProfilerEventDescr_v5_t *d)
{
	void *h = NULL;
	if (!nvlp_np_type_in(chain.ver, d->type))
		return NULL;
	if (chain.ver == 5) {
		chain.t.v5->startEvent(ctx, &h, d);
	} else if (chain.ver == 4) {
		ncclProfilerEventDescr_v4_t o;
		nvlp_np_descr_v4(&o, d);
		chain.t.v4->startEvent(ctx, &h, &o);
	} else {
		ncclProfilerEventDescr_v3_t o;
		nvlp_np_descr_v3(&o, d);
		chain.t.v3->startEvent(ctx, &h, &o);
	}
	return h;
}

static ncclResult_t ch_start(void *context, void **handle, ncclProfilerEventDescr_v5_t *d)
{
	if (handle)
		*handle = NULL;
	struct cctx *c = context;
	if (!c || !d || !handle)
		return ncclSuccess;
	mask_sync();
	ncclProfilerEventDescr_v5_t mine = *d, theirs = *d;
	split_descr(c, &mine, &theirs);
	void *o = NULL, *t = NULL;
	if (c->own)
		nvlp_np_start(c->own, &o, &mine);
	if (c->their && (__atomic_load_n(&masks.their, __ATOMIC_RELAXED) & triggers(d->type)))
		t = their_start(c->their, &theirs);
	if (!o && !t)
		return ncclSuccess;
	struct pair *s;
	if (is_task(d->type))
		s = &c->task[__atomic_fetch_add(&c->next_task, 1, __ATOMIC_RELAXED) & (CH_TASK - 1)];
	else
		s = &c->proxy[__atomic_fetch_add(&c->next_proxy, 1, __ATOMIC_RELAXED) & (CH_PROXY - 1)];
	__atomic_store_n(&s->own, o, __ATOMIC_RELAXED);
	__atomic_store_n(&s->their, t, __ATOMIC_RELAXED);
	__atomic_store_n(&s->type, d->type, __ATOMIC_RELEASE);
	*handle = s;
	return ncclSuccess;
}

/* A handle NCCL passes back: a pair this file handed out (NULL: no plugin wanted the event). */
static void halves(const struct pair *s, void **o, void **t)
{
	*o = __atomic_load_n(&s->own, __ATOMIC_ACQUIRE);
	*t = __atomic_load_n(&s->their, __ATOMIC_ACQUIRE);
}

static ncclResult_t ch_stop(void *handle)
{
	void *o, *t;
	if (!handle)
		return ncclSuccess;
	halves(handle, &o, &t);
	if (o)
		nvlp_np_stop(o);
	if (t)
		chain.t.v5->stopEvent(t); /* the same member in every version */
	return ncclSuccess;
}

static ncclResult_t ch_state(void *handle, ncclProfilerEventState_v5_t state,
                             ncclProfilerEventStateArgs_v5_t *args)
{
	void *o, *t;
	if (!handle)
		return ncclSuccess;
	halves(handle, &o, &t);
	if (o)
		nvlp_np_state(o, state, args);
	if (!t)
		return ncclSuccess;
	if (chain.ver == 5) {
		chain.t.v5->recordEventState(t, state, args);
	} else if (chain.ver == 4) {
		if (nvlp_np_state_v4(state)) /* v4's arguments are v5's union */
			chain.t.v4->recordEventState(t, state, (ncclProfilerEventStateArgs_v4_t *)(void *)args);
	} else {
		ncclProfilerEventStateArgs_v3_t a3;
		if (nvlp_np_state_v3(&a3, state, args))
			chain.t.v3->recordEventState(t, state, &a3);
	}
	return ncclSuccess;
}

static ncclResult_t ch_finalize(void *context)
{
	struct cctx *c = context;
	if (!c)
		return ncclSuccess;
	if (c->their)
		chain.t.v5->finalize(c->their); /* the same member in every version */
	if (c->own)
		nvlp_np_finalize(c->own);
	free(c->task);
	free(c->proxy);
	free(c);
	return ncclSuccess;
}

static ncclResult_t their_init(struct cctx *c, uint64_t commId, const char *commName, int nNodes,
                               int nranks, int rank, ncclDebugLogger_t logfn)
{
	if (chain.ver == 5)
		return chain.t.v5->init(&c->their, commId, &masks.their, commName, nNodes, nranks,
		                        rank, logfn);
	if (chain.ver == 4)
		return chain.t.v4->init(&c->their, &masks.their, commName, commId, nNodes, nranks,
		                        rank, logfn);
	return chain.t.v3->init(&c->their, &masks.their);
}

static void noted_chain(void)
{
	static int noted;
	if (!__atomic_exchange_n(&noted, 1, __ATOMIC_ACQ_REL))
		nvlp_note(
		    NVLP_NOTE_NCCL_PLUGIN, -1, (uint64_t)chain.ver,
		    "NCCL profiler plugin %s (v%d, %s) chained behind nvlprof's: it is given the "
		    "events its own mask 0x%x asks for",
		    chain.name, chain.ver, chain.path,
		    __atomic_load_n(&masks.their, __ATOMIC_RELAXED));
}

static ncclResult_t ch_init(void **context, uint64_t commId, int *mask, const char *commName,
                            int nNodes, int nranks, int rank, ncclDebugLogger_t logfn)
{
	if (!context)
		return ncclSuccess;
	*context = NULL;
	struct cctx *c = calloc(1, sizeof *c);
	if (c) {
		c->task = calloc(CH_TASK, sizeof *c->task);
		c->proxy = calloc(CH_PROXY, sizeof *c->proxy);
	}
	if (!c || !c->task || !c->proxy) {
		if (c)
			free(c->task), free(c->proxy), free(c);
		nvlp_warn_once(&chain, "no memory for the chained NCCL profiler plugin's handles: "
		                       "a communicator is not profiled");
		return ncclSuccess;
	}
	int om = 0;
	nvlp_np_init(&c->own, commId, &om, commName, nNodes, nranks, rank, logfn);
	ncclResult_t rc = their_init(c, commId, commName, nNodes, nranks, rank, logfn);
	if (rc != ncclSuccess) {
		c->their = NULL; /* NCCL would go on without it; so does the chain */
		char d[48];
		snprintf(d, sizeof d, "its init returned %d", (int)rc);
		static int told;
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_ACQ_REL))
			chain_fail("failed", chain.name, d);
	} else if (c->their) {
		noted_chain();
	}
	__atomic_store_n(&masks.own, om, __ATOMIC_RELAXED);
	__atomic_store_n(&masks.nccl, mask, __ATOMIC_RELAXED);
	int t = __atomic_load_n(&masks.their, __ATOMIC_RELAXED);
	__atomic_store_n(&masks.their_seen, t, __ATOMIC_RELAXED);
	if (mask)
		*mask = om | t;
	*context = c;
	return ncclSuccess;
}

/* The chained plugin's calls in the table NCCL holds (before init returns: no event yet). */
static void install(void)
{
	ncclProfiler_v5.startEvent = ch_start;
	ncclProfiler_v5.stopEvent = ch_stop;
	ncclProfiler_v5.recordEventState = ch_state;
	ncclProfiler_v5.finalize = ch_finalize;
}

static ncclResult_t ex_init(void **context, uint64_t commId, int *mask, const char *commName,
                            int nNodes, int nranks, int rank, ncclDebugLogger_t logfn)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, load_once);
	if (chain.lib)
		return ch_init(context, commId, mask, commName, nNodes, nranks, rank, logfn);
	return nvlp_np_init(context, commId, mask, commName, nNodes, nranks, rank, logfn);
}

/* ---- the environment, at the runtime's start ---- */

static int is_self(const char *v, const char *self)
{
	char p[PATH_MAX];
	return v && strchr(v, '/') && realpath(v, p) && !strcmp(p, self);
}

void nvlp_nccl_plugin_env(int on)
{
	Dl_info di;
	char self[PATH_MAX];
	if (!dladdr((void *)nvlp_nccl_plugin_env, &di) || !di.dli_fname || !realpath(di.dli_fname, self))
		return;
	const char *cur = getenv("NCCL_PROFILER_PLUGIN");
	if (!on) { /* NCCL's alone: undo what an earlier process's runtime did */
		const char *orig = getenv(CHAIN_ENV);
		if (is_self(cur, self) && orig && *orig)
			setenv("NCCL_PROFILER_PLUGIN", orig, 1);
		else if (is_self(cur, self) && orig)
			unsetenv("NCCL_PROFILER_PLUGIN");
		return;
	}
	if ((cur && !strcasecmp(cur, "none")) || is_self(cur, self))
		return; /* no plugin wanted; or set by an earlier process's runtime (its chain kept) */
	setenv(CHAIN_ENV, cur ? cur : "", 1);
	setenv("NCCL_PROFILER_PLUGIN", self, 1);
}

/* The module: at init, NCCL_PROFILER_PLUGIN points at us (the user's plugin chained behind). */
static void nccl_init(const struct nvlp_config *cfg)
{
	nvlp_nccl_plugin_env(cfg->nccl_plugin);
}
static const struct nvlp_module nccl_module = {.name = "nccl",
                                              .init = nccl_init,
                                              .flush = nvlp_np_flush,
                                              .atfork_child = nvlp_np_atfork_child};
NVLP_MODULE(NCCL, nccl_module)

/* ncclprof.c: NCCL's profiler plugin interface (v5), served by the shim: what NCCL chose for each collective. */
/*
 * NCCL (2.27 and later) loads a profiler plugin from NCCL_PROFILER_PLUGIN; the runtime's
 * constructor points it at this library unless the user set it (NVLPROF_NCCL_PLUGIN=0: never).
 * NCCL looks up the symbol ncclProfiler_v5 here, calls init once per communicator and, with only
 * collective events activated, startEvent once per collective with the algorithm, protocol,
 * channel and warp counts it picked. Each becomes an NCCLPROF record; nothing else is activated
 * (no proxy, kernel-channel or network events), so NCCL does no extra work on the GPU.
 *
 * NCCL passes its own communicator hash, not the ncclComm_t. The shim's hash is found from the
 * ncclComm_t of the calling thread's latest collective (set by the collective wrappers before the
 * real call) when its rank and size match; the analyzer maps the rest through nccl_comm.
 *
 * The v5 types are declared here from NCCL's published plugin interface (ext-profiler), as the
 * CUDA toolkit does not ship them. Only the members read here must match NCCL's layout: the
 * descriptor's head and the collective member of its union.
 */
#include <pthread.h> /* pthread_mutex_t */
#include <stdbool.h> /* bool */
#include <stdint.h>  /* uint64_t */
#include <stdlib.h>  /* calloc, free */
#include <string.h>  /* strcmp */

#include <nccl.h> /* ncclResult_t */

#include "comms.h"
#include "nvlp_trace.h" /* nvlp_nccl_fn_name */
#include "nvlp_rt.h"

enum { PROFILE_COLL = 1 << 1 }; /* ncclProfileColl */

typedef struct {
	uint64_t type;   /* ncclProfile* event type */
	void *parentObj; /* parent event handle */
	int rank;
	union {
		struct {
			uint64_t seqNumber;
			const char *func; /* "AllReduce", "AllGather", ... */
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nChannels;
			uint8_t nWarps;
			const char *algo;  /* "RING", "TREE", "NVLS", ... */
			const char *proto; /* "LL", "LL128", "SIMPLE" */
			void *parentGroup;
		} coll;
		uint64_t align; /* other event kinds: not read */
	};
} nvlp_nccl_descr_v5;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask,
	                     const char *commName, int nNodes, int nranks, int rank, void *logfn);
	ncclResult_t (*startEvent)(void *context, void **eHandle, nvlp_nccl_descr_v5 *eDescr);
	ncclResult_t (*stopEvent)(void *eHandle);
	ncclResult_t (*recordEventState)(void *eHandle, int eState, void *eStateArgs);
	ncclResult_t (*finalize)(void *context);
} nvlp_nccl_profiler_v5;

struct pctx {
	uint64_t nccl_comm; /* NCCL's commHash */
	uint64_t comm;      /* the shim's hash, once known (atomic) */
	int rank, nranks;
};

/* Strings NCCL passes are its own constants: their ids (or fn) are cached by pointer. Readers are
 * lock-free (a slot's value is written before its key is published); inserts take a mutex. The
 * ids belong to one trace file, so the cache is emptied in a fork child (new epoch). */
#define PCACHE 32
static struct {
	const char *p;
	uint64_t v;
} pcache[PCACHE];
static unsigned pcache_epoch;
static pthread_mutex_t pcache_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t lookup(const char *s, int is_fn)
{
	if (!is_fn)
		return nvlp_intern(s);
	for (unsigned f = 1; f < NVLP_NCCL_FN_COUNT; f++) {
		const char *n = nvlp_nccl_fn_name(f);
		if (n && !strncmp(n, "nccl", 4) && !strcmp(n + 4, s))
			return f;
	}
	return 0;
}

static uint64_t cached(const char *s, int is_fn)
{
	if (!s)
		return 0;
	unsigned ep = nvlp_tls_epoch;
	if (__atomic_load_n(&pcache_epoch, __ATOMIC_ACQUIRE) == ep)
		for (int i = 0; i < PCACHE; i++) {
			const char *p = __atomic_load_n(&pcache[i].p, __ATOMIC_ACQUIRE);
			if (!p)
				break;
			if (p == s)
				return pcache[i].v;
		}
	uint64_t v = lookup(s, is_fn);
	pthread_mutex_lock(&pcache_mu);
	if (pcache_epoch != ep) {
		for (int i = 0; i < PCACHE; i++)
			__atomic_store_n(&pcache[i].p, NULL, __ATOMIC_RELEASE);
		__atomic_store_n(&pcache_epoch, ep, __ATOMIC_RELEASE);
	}
	for (int i = 0; i < PCACHE; i++) {
		if (pcache[i].p == s)
			break;
		if (!pcache[i].p) {
			pcache[i].v = v;
			__atomic_store_n(&pcache[i].p, s, __ATOMIC_RELEASE);
			break;
		}
	}
	pthread_mutex_unlock(&pcache_mu);
	return v;
}

static ncclResult_t p_init(void **context, uint64_t commId, int *mask, const char *commName,
                           int nNodes, int nranks, int rank, void *logfn)
{
	(void)commName, (void)nNodes, (void)logfn;
	*context = NULL;
	if (!nvlp_is_active() || !nvlp_cfg()->nccl_plugin) {
		if (mask)
			*mask = 0;
		return ncclSuccess;
	}
	struct pctx *c = calloc(1, sizeof *c);
	if (!c) {
		if (mask)
			*mask = 0;
		return ncclSuccess;
	}
	c->nccl_comm = commId;
	c->rank = rank;
	c->nranks = nranks;
	*context = c;
	if (mask)
		*mask = PROFILE_COLL;
	static int noted;
	if (!__atomic_exchange_n(&noted, 1, __ATOMIC_ACQ_REL))
		nvlp_note(NVLP_NOTE_NCCL_PLUGIN, -1, 5,
		          "NCCL profiler plugin (v5) active: algorithm, protocol and channels of "
		          "every collective");
	return ncclSuccess;
}

static ncclResult_t p_start(void *context, void **handle, nvlp_nccl_descr_v5 *d)
{
	if (handle)
		*handle = NULL; /* no stop or state events wanted */
	struct pctx *c = context;
	if (!c || !d || d->type != PROFILE_COLL || !nvlp_is_active())
		return ncclSuccess;
	uint64_t comm = __atomic_load_n(&c->comm, __ATOMIC_RELAXED);
	if (NVLP_UNLIKELY(!comm)) {
		const void *hint = nvlp_tls()->nccl_comm;
		struct nvlp_comm *e = hint ? nvlp_comm_find(hint) : NULL;
		if (e && atomic_load_explicit(&e->rank, memory_order_relaxed) == c->rank &&
		    atomic_load_explicit(&e->nranks, memory_order_relaxed) == c->nranks) {
			comm = e->hash;
			__atomic_store_n(&c->comm, comm, __ATOMIC_RELAXED);
		}
	}
	struct nvlp_rec_ncclprof r = {
	    .comm = comm,
	    .seq = d->coll.seqNumber,
	    .fn = cached(d->coll.func, 1),
	    .algo = cached(d->coll.algo, 0),
	    .proto = cached(d->coll.proto, 0),
	    .channels = d->coll.nChannels,
	    .start = nvlp_now(),
	    .dur = 0,
	    .warps = d->coll.nWarps,
	    .count = d->coll.count,
	    .nccl_comm = c->nccl_comm,
	    .rank = (uint64_t)(int64_t)c->rank,
	    .nranks = (uint64_t)(int64_t)c->nranks,
	};
	/* built in the thread's buffer when it has room in one piece, as the NCCL wrappers do */
	struct nvlp_emit_slot slot;
	struct nvlp_rec_ncclprof *w = nvlp_emit_reserve(NVLP_K_NCCLPROF, &slot);
	if (NVLP_LIKELY(w != NULL)) {
		*w = r;
		nvlp_emit_commit(&slot);
	} else {
		nvlp_emit(NVLP_K_NCCLPROF, &r, NULL, 0);
	}
	return ncclSuccess;
}

static ncclResult_t p_stop(void *handle)
{
	(void)handle;
	return ncclSuccess;
}

static ncclResult_t p_state(void *handle, int state, void *args)
{
	(void)handle, (void)state, (void)args;
	return ncclSuccess;
}

static ncclResult_t p_finalize(void *context)
{
	free(context);
	return ncclSuccess;
}

NVLP_EXPORT const nvlp_nccl_profiler_v5 ncclProfiler_v5 = {
    .name = "nvlprof",
    .init = p_init,
    .startEvent = p_start,
    .stopEvent = p_stop,
    .recordEventState = p_state,
    .finalize = p_finalize,
};

/* ncclprof.c: NCCL's profiler plugin interface (v5), served by the shim: what NCCL chose for each collective, and its kernels' per-channel GPU times. */
/*
 * NCCL (2.27 and later) loads a profiler plugin from NCCL_PROFILER_PLUGIN; the runtime's
 * constructor points it at this library unless the user set it (NVLPROF_NCCL_PLUGIN=0: never).
 * NCCL looks up the symbol ncclProfiler_v5 here, calls init once per communicator and, with
 * collective events activated, startEvent once per collective with the algorithm, protocol,
 * channel and warp counts it picked. Each becomes an NCCLPROF record. Each init becomes an
 * NCCLCOMM record: NCCL's count of nodes among the communicator's ranks.
 *
 * Kernel channels (KernelCh, on unless NVLPROF_KCH=0): NCCL's kernels write a GPU globaltimer
 * stamp when each channel's work starts and stops into host-mapped memory, and NCCL's proxy thread
 * reports them here: startEvent(KernelCh, parent = our collective handle, pTimer = start), then
 * recordEventState(KernelChStop, pTimer = stop), then stopEvent. Each channel becomes one KCH
 * record, so every collective has a GPU time without CUPTI kernel tracing (the analyzer takes the
 * longest channel, and converts globaltimer to the trace clock: kernelch.c). Handles come from
 * fixed rings per communicator (no allocation on NCCL's threads); a collective handle is reused
 * KCH_COLLS collectives later, so a channel of a graph replayed after that many collectives on one
 * communicator is attributed to a later one (its seq is then wrong; noted in README). A channel
 * NCCL never stops is recorded NOSTOP when its slot is reused or at finalize.
 *
 * NCCL passes its own communicator hash, not the ncclComm_t. The shim's hash is found from the
 * ncclComm_t of the calling thread's latest collective (set by the collective wrappers before the
 * real call) when its rank and size match; the analyzer maps the rest through nccl_comm.
 *
 * The types are NCCL's own published plugin headers (preload/nccl/, from NCCL's example plugin),
 * as the CUDA toolkit does not ship them. NCCL finds this plugin through ncclchain.c, which
 * exports the tables (ncclProfiler_v5, _v4) and, when another plugin is chained, calls these
 * functions with this plugin's own contexts and handles.
 */
#include <pthread.h> /* pthread_mutex_t */
#include <stdbool.h> /* bool */
#include <stdint.h>  /* uint64_t */
#include <stdlib.h>  /* calloc, free */
#include <string.h>  /* strcmp, strnlen */
#include <time.h>    /* clock_gettime */

#include "comms.h"
#include "ncclprof.h" /* NCCL's profiler interface (vendored headers) */
#include "nvlp_trace.h" /* nvlp_nccl_fn_name */
#include "nvlp_cost.h"
#include "nvlp_rt.h"

/* The interface NCCL calls this plugin through (5, or 4 for NCCL 2.27: ncclchain.c's v4 table). */
int nvlp_np_iface = 5;

enum { PROFILE_COLL = ncclProfileColl, PROFILE_KERNEL_CH = ncclProfileKernelCh };
typedef ncclProfilerEventDescr_v5_t nvlp_nccl_descr_v5;
typedef ncclProfilerEventStateArgs_v5_t nvlp_nccl_state_args_v5;

/* Every handle starts with NCCL's 64-bit type word (NCCL reads it; #1973). */
struct coll_h {
	uint64_t type; /* PROFILE_COLL */
	uint64_t seq, fn;
	struct pctx *ctx;
};
struct kch_h {
	uint64_t type;  /* PROFILE_KERNEL_CH */
	uint32_t state; /* KS_* */
	uint32_t channel;
	uint64_t seq, fn, gpu_start, gpu_stop, flags;
	struct pctx *ctx;
};
enum { KS_FREE = 0, KS_STARTED = 1, KS_EMITTING = 2 };
#define KCH_COLLS 4096  /* collective handles per communicator (power of two) */
#define KCH_SLOTS 16384 /* channel handles per communicator (power of two) */

struct pctx {
	uint64_t nccl_comm; /* NCCL's commHash */
	uint64_t comm;      /* the shim's hash, once known (atomic) */
	int rank, nranks;
	int kch;            /* KernelCh activated */
	uint64_t next_coll, next_kch;
	struct coll_h *colls; /* KCH_COLLS, or NULL without KernelCh */
	struct kch_h *kchs;   /* KCH_SLOTS */
	char name[128];       /* the commName NCCL gave init (copied: its lifetime is NCCL's) */
};

/* CLOCK pairs for the globaltimer fit: at most one per KCH_CLOCK_NS per process. */
#define KCH_CLOCK_NS 100000000ull
static uint64_t kch_next_clock;

/* Strings NCCL passes are its own constants: their ids (or fn) are cached by pointer. Readers are
 * lock-free (a slot's value is written before its key is published); inserts take a mutex. The
 * ids belong to one trace file, so the cache is emptied in a fork child (new epoch). */
#define PCACHE 32
static struct {
	struct {
		const char *p;
		uint64_t v;
	} at[PCACHE];
	unsigned epoch;
	pthread_mutex_t mu;
} nccl_strings = {.mu = PTHREAD_MUTEX_INITIALIZER};

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
	if (__atomic_load_n(&nccl_strings.epoch, __ATOMIC_ACQUIRE) == ep)
		for (int i = 0; i < PCACHE; i++) {
			const char *p = __atomic_load_n(&nccl_strings.at[i].p, __ATOMIC_ACQUIRE);
			if (!p)
				break;
			if (p == s)
				return nccl_strings.at[i].v;
		}
	uint64_t v = lookup(s, is_fn);
	pthread_mutex_lock(&nccl_strings.mu);
	if (nccl_strings.epoch != ep) {
		for (int i = 0; i < PCACHE; i++)
			__atomic_store_n(&nccl_strings.at[i].p, NULL, __ATOMIC_RELEASE);
		__atomic_store_n(&nccl_strings.epoch, ep, __ATOMIC_RELEASE);
	}
	for (int i = 0; i < PCACHE; i++) {
		if (nccl_strings.at[i].p == s)
			break;
		if (!nccl_strings.at[i].p) {
			nccl_strings.at[i].v = v;
			__atomic_store_n(&nccl_strings.at[i].p, s, __ATOMIC_RELEASE);
			break;
		}
	}
	pthread_mutex_unlock(&nccl_strings.mu);
	return v;
}

/* This communicator gets no event from nvlprof's plugin. */
static ncclResult_t no_events(int *mask)
{
	if (mask)
		*mask = 0;
	return ncclSuccess;
}

ncclResult_t nvlp_np_init(void **context, uint64_t commId, int *mask, const char *commName,
                          int nNodes, int nranks, int rank, ncclDebugLogger_t logfn)
{
	(void)logfn;
	if (!context)
		return no_events(mask);
	*context = NULL;
	if (!nvlp_is_active() || !nvlp_cfg()->nccl_plugin)
		return no_events(mask);
	/* NCCL's node count, once per communicator (init runs once per communicator): the
	 * analyzer compares it with the machines the ranks are on (nccl_split_host) */
	struct nvlp_rec_ncclcomm nc = {
	    .nccl_comm = commId,
	    .nnodes = (uint64_t)(int64_t)nNodes,
	    .nranks = (uint64_t)(int64_t)nranks,
	    .rank = (uint64_t)(int64_t)rank,
	};
	nvlp_emit(NVLP_K_NCCLCOMM, &nc, NULL, 0);
	struct pctx *c = calloc(1, sizeof *c);
	if (!c)
		return no_events(mask);
	c->nccl_comm = commId;
	if (commName) {
		size_t n = strnlen(commName, sizeof c->name - 1);
		memcpy(c->name, commName, n);
		c->name[n] = 0;
	}
	c->rank = rank;
	c->nranks = nranks;
	if (nvlp_cfg()->kch) {
		c->colls = calloc(KCH_COLLS, sizeof *c->colls);
		c->kchs = calloc(KCH_SLOTS, sizeof *c->kchs);
		c->kch = c->colls && c->kchs;
		if (!c->kch) {
			free(c->colls), free(c->kchs);
			c->colls = NULL, c->kchs = NULL;
		}
	}
	*context = c;
	if (mask)
		*mask = PROFILE_COLL | (c->kch ? PROFILE_KERNEL_CH : 0);
	static int noted;
	if (!__atomic_exchange_n(&noted, 1, __ATOMIC_ACQ_REL))
		nvlp_note(NVLP_NOTE_NCCL_PLUGIN, -1, (uint64_t)nvlp_np_iface,
		          "NCCL profiler plugin (v%d) active: algorithm, protocol and channels of "
		          "every collective%s",
		          nvlp_np_iface, c->kch ? "; kernel channels' GPU timestamps (KernelCh)"
		                 : (!nvlp_cfg()->kch ? " (NVLPROF_KCH=0: no kernel-channel timestamps)"
		                       : " (no memory for kernel-channel handles)"));
	return ncclSuccess;
}

static uint64_t ctx_comm(struct pctx *c)
{
	uint64_t comm = __atomic_load_n(&c->comm, __ATOMIC_RELAXED);
	if (NVLP_UNLIKELY(!comm)) {
		const void *hint = nvlp_tls()->nccl_comm;
		struct nvlp_comm *e = hint ? nvlp_comm_find(hint) : NULL;
		if (e && atomic_load_explicit(&e->rank, memory_order_relaxed) == c->rank &&
		    atomic_load_explicit(&e->nranks, memory_order_relaxed) == c->nranks) {
			comm = e->hash;
			__atomic_store_n(&c->comm, comm, __ATOMIC_RELAXED);
			/* Once per communicator: NCCL's name for it, unless the config's was written. */
			if (c->name[0] && !atomic_load_explicit(&e->named, memory_order_relaxed))
				nvlp_comm_name_emit(e, comm, c->name);
		}
	}
	return comm;
}

static void kch_emit(struct kch_h *h, uint64_t flags)
{
	struct pctx *c = h->ctx;
	uint64_t now = nvlp_now();
	if (!h->gpu_start || !h->gpu_stop)
		flags |= NVLP_KCH_ZERO;
	else if (h->gpu_stop < h->gpu_start)
		flags |= NVLP_KCH_REVERSED;
	struct nvlp_rec_kch r = {
	    .comm = ctx_comm(c),
	    .seq = h->seq,
	    .channel = h->channel,
	    .gpu_start = h->gpu_start,
	    .gpu_stop = h->gpu_stop,
	    .host = now,
	    .flags = flags | h->flags,
	    .nccl_comm = c->nccl_comm,
	    .fn = h->fn,
	};
	struct nvlp_emit_slot slot;
	struct nvlp_rec_kch *w = nvlp_emit_reserve(NVLP_K_KCH, &slot);
	if (NVLP_LIKELY(w != NULL)) {
		*w = r;
		nvlp_emit_commit(&slot);
	} else {
		nvlp_emit(NVLP_K_KCH, &r, NULL, 0);
	}
	/* the fit's pairs: (when the host learnt of a stop, that stop) bound the GPU clock's offset
	 * from above; a CLOCK_REALTIME pair beside it gives the usual time base (kernelch.c) */
	uint64_t next = __atomic_load_n(&kch_next_clock, __ATOMIC_RELAXED);
	if (!(flags & (NVLP_KCH_ZERO | NVLP_KCH_REVERSED | NVLP_KCH_NOSTOP)) && now >= next &&
	    __atomic_compare_exchange_n(&kch_next_clock, &next, now + KCH_CLOCK_NS, 0,
	                                __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		struct nvlp_rec_clock k = {.source = NVLP_CLOCK_KCH, .mono = now, .other = h->gpu_stop};
		nvlp_emit(NVLP_K_CLOCK, &k, NULL, 0);
		struct timespec ts;
		uint64_t m0 = nvlp_now();
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t m1 = nvlp_now();
		struct nvlp_rec_clock rt = {
		    .source = NVLP_CLOCK_REALTIME,
		    .mono = m0 + (m1 - m0) / 2,
		    .other = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec};
		nvlp_emit(NVLP_K_CLOCK, &rt, NULL, 0);
	}
}

/* A channel started: take the next slot of the ring (recording a channel that never stopped,
 * if that slot still holds one). */
static void kch_start(struct pctx *c, void **handle, nvlp_nccl_descr_v5 *d)
{
	uint64_t i = __atomic_fetch_add(&c->next_kch, 1, __ATOMIC_RELAXED);
	struct kch_h *h = &c->kchs[i & (KCH_SLOTS - 1)];
	uint32_t st = KS_STARTED;
	if (__atomic_compare_exchange_n(&h->state, &st, KS_EMITTING, 0, __ATOMIC_ACQUIRE,
	                                __ATOMIC_RELAXED))
		kch_emit(h, NVLP_KCH_NOSTOP);
	else if (st == KS_EMITTING)
		return; /* another thread is recording the old one: drop this channel */
	struct coll_h *p = d->parentObj;
	h->type = PROFILE_KERNEL_CH;
	h->ctx = c;
	h->channel = d->kernelCh.channelId;
	h->gpu_start = d->kernelCh.pTimer;
	h->gpu_stop = 0;
	h->flags = 0;
	/* the slot may be refilled by the next KCH_COLLS-th collective meanwhile: atomic reads */
	if (p >= c->colls && p < c->colls + KCH_COLLS &&
	    __atomic_load_n(&p->type, __ATOMIC_ACQUIRE) == PROFILE_COLL) {
		h->seq = __atomic_load_n(&p->seq, __ATOMIC_RELAXED);
		h->fn = __atomic_load_n(&p->fn, __ATOMIC_RELAXED);
	} else {
		h->seq = 0, h->fn = 0;
		h->flags = NVLP_KCH_NOPARENT;
	}
	__atomic_store_n(&h->state, KS_STARTED, __ATOMIC_RELEASE);
	*handle = h;
}

static ncclResult_t np_start(void *context, void **handle, nvlp_nccl_descr_v5 *d)
{
	if (handle)
		*handle = NULL; /* no stop or state events wanted */
	struct pctx *c = context;
	if (!c || !d || !handle || !nvlp_is_active())
		return ncclSuccess;
	if (d->type == PROFILE_KERNEL_CH) {
		if (c->kch)
			kch_start(c, handle, d);
		return ncclSuccess;
	}
	if (d->type != PROFILE_COLL)
		return ncclSuccess;
	uint64_t comm = ctx_comm(c);
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
	if (c->kch) {
		/* the parent of this collective's channels */
		uint64_t i = __atomic_fetch_add(&c->next_coll, 1, __ATOMIC_RELAXED);
		struct coll_h *h = &c->colls[i & (KCH_COLLS - 1)];
		__atomic_store_n(&h->seq, r.seq, __ATOMIC_RELAXED);
		__atomic_store_n(&h->fn, r.fn, __ATOMIC_RELAXED);
		h->ctx = c;
		__atomic_store_n(&h->type, (uint64_t)PROFILE_COLL, __ATOMIC_RELEASE);
		*handle = h;
	}
	return ncclSuccess;
}

/* NCCL's calls into the plugin are nvlprof's code on the job's threads (its own and NCCL's proxy
 * thread): timed one in NVLP_COST_EVERY, as the wrappers are (COST). */
ncclResult_t nvlp_np_start(void *context, void **handle, nvlp_nccl_descr_v5 *d)
{
	uint64_t c0 = nvlp_cost_begin();
	ncclResult_t r = np_start(context, handle, d);
	nvlp_cost_end(c0, 0);
	return r;
}

static ncclResult_t np_stop(void *handle)
{
	struct kch_h *h = handle;
	if (!h || h->type != PROFILE_KERNEL_CH)
		return ncclSuccess; /* a collective: nothing to do at its stop */
	uint32_t st = KS_STARTED;
	if (!__atomic_compare_exchange_n(&h->state, &st, KS_EMITTING, 0, __ATOMIC_ACQUIRE,
	                                 __ATOMIC_RELAXED))
		return ncclSuccess; /* already recorded (reused as NOSTOP) */
	if (nvlp_is_active())
		kch_emit(h, 0);
	__atomic_store_n(&h->state, KS_FREE, __ATOMIC_RELEASE);
	return ncclSuccess;
}

ncclResult_t nvlp_np_stop(void *handle)
{
	uint64_t c0 = nvlp_cost_begin();
	ncclResult_t r = np_stop(handle);
	nvlp_cost_end(c0, 0);
	return r;
}

ncclResult_t nvlp_np_state(void *handle, ncclProfilerEventState_v5_t state,
                           nvlp_nccl_state_args_v5 *args)
{
	struct kch_h *h = handle;
	nvlp_nccl_state_args_v5 *a = args;
	if (h && a && h->type == PROFILE_KERNEL_CH && state == ncclProfilerKernelChStop &&
	    __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == KS_STARTED)
		h->gpu_stop = a->kernelCh.pTimer;
	return ncclSuccess;
}

ncclResult_t nvlp_np_finalize(void *context)
{
	struct pctx *c = context;
	if (c && c->kch && nvlp_is_active())
		for (unsigned i = 0; i < KCH_SLOTS; i++) {
			uint32_t st = KS_STARTED;
			if (__atomic_compare_exchange_n(&c->kchs[i].state, &st, KS_EMITTING, 0,
			                                __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				kch_emit(&c->kchs[i], NVLP_KCH_NOSTOP);
		}
	if (c) {
		free(c->colls);
		free(c->kchs);
	}
	free(context);
	return ncclSuccess;
}

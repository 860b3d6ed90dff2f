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
 * recordEventState(KernelChStop, pTimer = stop), then stopEvent. A collective's channels are folded
 * into one KCOLL record (their earliest start, latest stop, and how many had no usable stamps), so
 * every collective has a GPU time without CUPTI kernel tracing (the analyzer converts globaltimer
 * to the trace clock: kernelch.c); NVLPROF_KCH=channels writes one KCH record per channel instead
 * (24 channels of an NVLink AllReduce: ~250 trace bytes a collective, a KCOLL 14; bench_bytes).
 * Handles come from fixed rings per communicator (no allocation on NCCL's threads); a collective
 * handle is reused KCH_COLLS collectives later, so a channel of a graph replayed after that many
 * collectives on one communicator is attributed to a later one (its seq is then wrong; noted in
 * README). A channel NCCL never stops is recorded NOSTOP when its slot is reused or at finalize.
 *
 * Folding (under the communicator's mutex: NCCL's proxy thread reports the channels, the job's
 * thread reuses a collective's handle): a collective's record is written when its nChannels
 * channels are in; when the communicator's next collective reports its first channel (a channel
 * of it that comes later is written as a record of its own, part 1, 2 ...); when a channel comes
 * again (a CUDA graph's next replay: a new execution, part 0); when its handle is reused; at
 * finalize; and at the end of the trace (the module's flush). The analyzer folds the parts of one
 * execution as it folds channels, so the figures are those of per-channel records.
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
	/* KCOLL: its channels folded so far (under ctx->mu) */
	uint64_t gen;     /* 1 + its place in the communicator's collectives (0: slot unused) */
	uint64_t seen[4]; /* channel ids (0..255) of its current execution */
	uint64_t xgs;     /* the earliest start of its current execution (0: none yet) */
	uint64_t gs, ge, host;
	uint32_t want; /* nChannels NCCL gave it (0: unknown) */
	uint32_t got;  /* channels folded into the record not yet written */
	uint32_t done; /* channels of the current execution already written */
	uint32_t part; /* records of the current execution written */
	uint32_t zero, reversed, nostop;
};
struct kch_h {
	uint64_t type;  /* PROFILE_KERNEL_CH */
	uint32_t state; /* KS_* */
	uint32_t channel;
	uint64_t seq, fn, gpu_start, gpu_stop, flags;
	struct pctx *ctx;
	struct coll_h *parent; /* KCOLL: folded into it while parent->gen is still gen */
	uint64_t gen;
};
enum { KS_FREE = 0, KS_STARTED = 1, KS_EMITTING = 2 };
#define KCH_COLLS 4096  /* collective handles per communicator (power of two) */
#define KCH_SLOTS 16384 /* channel handles per communicator (power of two) */
/* what a communicator's handle rings hold (1.8 MiB), counted in COST's memory */
#define KCH_RINGS_BYTES                                                                            \
	((int64_t)(KCH_COLLS * sizeof(struct coll_h) + KCH_SLOTS * sizeof(struct kch_h)))

struct pctx {
	uint64_t nccl_comm; /* NCCL's commHash */
	uint64_t comm;      /* the shim's hash, once known (atomic) */
	int rank, nranks;
	int kch;            /* KernelCh activated */
	int fold;           /* ... and folded into KCOLL records (NVLPROF_KCH=1) */
	pthread_mutex_t mu; /* the collectives' folding state (fold) */
	struct pctx *next;  /* in kch_proc's list (fold) */
	uint64_t noparent;  /* channels without a parent collective not yet written (fold, mu) */
	uint64_t next_coll, next_kch;
	struct coll_h *colls; /* KCH_COLLS, or NULL without KernelCh */
	struct kch_h *kchs;   /* KCH_SLOTS */
	char name[128];       /* the commName NCCL gave init (copied: its lifetime is NCCL's) */
};

/* CLOCK pairs for the globaltimer fit: at most one per KCH_CLOCK_NS per process. */
#define KCH_CLOCK_NS 100000000ull

/* The process's kernel-channel state: when the next CLOCK pair is due; the contexts that fold
 * channels, for the flush at the end of the trace (forgotten in a fork child: they are the parent
 * NCCL's), under mu. */
static struct {
	uint64_t next_clock;
	pthread_mutex_t mu;
	struct pctx *head;
} kch_proc = {0, PTHREAD_MUTEX_INITIALIZER, NULL};

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
		nvlp_cost_mem(c->kch ? KCH_RINGS_BYTES : 0); /* the COST record's memory held */
	}
	c->fold = c->kch && nvlp_cfg()->kch == NVLP_KCH_COLL;
	if (c->fold) {
		pthread_mutex_init(&c->mu, NULL);
		pthread_mutex_lock(&kch_proc.mu);
		c->next = kch_proc.head;
		kch_proc.head = c;
		pthread_mutex_unlock(&kch_proc.mu);
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

/* The fit's pairs: (when the host learnt of a stop, that stop) bound the GPU clock's offset from
 * above; a CLOCK_REALTIME pair beside it gives the usual time base (kernelch.c). */
static void kch_clock_pair(uint64_t now, uint64_t gpu_stop)
{
	uint64_t next = __atomic_load_n(&kch_proc.next_clock, __ATOMIC_RELAXED);
	if (now >= next &&
	    __atomic_compare_exchange_n(&kch_proc.next_clock, &next, now + KCH_CLOCK_NS, 0,
	                                __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		struct nvlp_rec_clock k = {.source = NVLP_CLOCK_KCH, .mono = now, .other = gpu_stop};
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

/* A record without blob, copied into the thread's buffer when it has room in one piece (as the
 * NCCL wrappers build theirs there), else through nvlp_emit. */
static inline void emit_fixed(unsigned kind, const void *r, size_t size)
{
	struct nvlp_emit_slot slot;
	void *w = nvlp_emit_reserve(kind, &slot);
	if (NVLP_LIKELY(w != NULL)) {
		memcpy(w, r, size);
		nvlp_emit_commit(&slot);
	} else {
		nvlp_emit(kind, r, NULL, 0);
	}
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
	emit_fixed(NVLP_K_KCH, &r, sizeof r);
	if (!(flags & (NVLP_KCH_ZERO | NVLP_KCH_REVERSED | NVLP_KCH_NOSTOP)))
		kch_clock_pair(now, h->gpu_stop);
}

/* ---- KCOLL: a collective's channels folded into one record (NVLPROF_KCH=1) ---- */

/* Write what p holds of its current execution (ctx->mu held); p is then empty but still knows
 * which channels that execution had. */
static void kcoll_emit(struct pctx *c, struct coll_h *p)
{
	uint64_t now = nvlp_now();
	struct nvlp_rec_kcoll r = {
	    .comm = ctx_comm(c),
	    .seq = p->seq,
	    .fn = p->fn,
	    .chans = p->got,
	    .gpu_start = p->gs,
	    .gpu_stop = p->ge,
	    .host = p->host ? p->host : now,
	    .zero = p->zero,
	    .reversed = p->reversed,
	    .nostop = p->nostop,
	    .part = p->part,
	    .nccl_comm = c->nccl_comm,
	};
	nvlp_emit(NVLP_K_KCOLL, &r, NULL, 0); /* one a collective: no need for emit_reserve */
	if (p->ge)
		kch_clock_pair(p->host, p->ge); /* the last good channel's report: every stop before */
	p->done += p->got;
	if (p->part < NVLP_KCOLL_PART_ALONE - 1)
		p->part++;
	p->got = p->zero = p->reversed = p->nostop = 0;
	p->gs = p->ge = p->host = 0;
}

/* Why the channel's stamps are not usable (NVLP_KCH_NOSTOP, _ZERO or _REVERSED, as the analyzer
 * reads a KCH), 0 when they are */
static uint64_t kch_unusable(const struct kch_h *h, uint64_t flags)
{
	if (flags & NVLP_KCH_NOSTOP)
		return NVLP_KCH_NOSTOP;
	if (!h->gpu_start || !h->gpu_stop)
		return NVLP_KCH_ZERO;
	if (h->gpu_stop < h->gpu_start || h->gpu_stop - h->gpu_start > NVLP_KCH_MAX_NS)
		return NVLP_KCH_REVERSED;
	return 0;
}

/* One channel into p's record: its stamps, or why it has none. */
static void kcoll_add(struct coll_h *p, const struct kch_h *h, uint64_t flags, uint64_t now)
{
	p->got++;
	uint64_t why = kch_unusable(h, flags);
	if (why == NVLP_KCH_NOSTOP) {
		p->nostop++;
	} else if (why == NVLP_KCH_ZERO) {
		p->zero++;
	} else if (why == NVLP_KCH_REVERSED) {
		p->reversed++;
	} else {
		if (!p->gs || h->gpu_start < p->gs)
			p->gs = h->gpu_start;
		if (h->gpu_stop > p->ge)
			p->ge = h->gpu_stop;
		if (now > p->host)
			p->host = now;
		if (!p->xgs || h->gpu_start < p->xgs)
			p->xgs = h->gpu_start;
	}
}

/* A record of h alone (part NVLP_KCOLL_PART_ALONE + its channel: it never repeats a part of its
 * execution, so the analyzer folds it into the execution its stamps lie in). ctx->mu held. */
static void kcoll_alone(struct pctx *c, const struct kch_h *h, uint64_t flags, uint64_t now)
{
	struct coll_h one = {.seq = h->seq, .fn = h->fn,
	                     .part = NVLP_KCOLL_PART_ALONE + (h->channel & 127)};
	kcoll_add(&one, h, flags, now);
	kcoll_emit(c, &one);
}

static int kcoll_seen(const struct coll_h *p, unsigned ch)
{
	return (int)(p->seen[ch >> 6] >> (ch & 63) & 1);
}

/* The channels without a parent collective counted so far, on one record (ctx->mu held) */
static void kcoll_noparent_emit(struct pctx *c)
{
	struct nvlp_rec_kcoll r = {.comm = ctx_comm(c),
	                           .chans = c->noparent,
	                           .host = nvlp_now(),
	                           .nccl_comm = c->nccl_comm,
	                           .noparent = c->noparent};
	nvlp_emit(NVLP_K_KCOLL, &r, NULL, 0);
	c->noparent = 0;
}

/* A channel ended (or never will: NOSTOP): folded into its collective's record, which is written
 * once complete. The caller owns h (KS_EMITTING). */
static void kch_fold(struct kch_h *h, uint64_t flags)
{
	struct pctx *c = h->ctx;
	if ((h->flags & NVLP_KCH_NOPARENT) && (flags & NVLP_KCH_NOSTOP)) {
		kch_emit(h, flags); /* as before: a KCH record, read as a channel never stopped */
		return;
	}
	pthread_mutex_lock(&c->mu);
	if (h->flags & NVLP_KCH_NOPARENT) { /* no collective to fold into: counted */
		if (++c->noparent >= 4096)
			kcoll_noparent_emit(c);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	uint64_t now = nvlp_now();
	unsigned ch = h->channel & 255;
	struct coll_h *p = h->parent;
	if (!p || p->gen != h->gen || /* its collective's handle was reused meanwhile */
	    /* or it ended before the collective's current execution began: a channel of the
	     * execution before, reported after the next one's (a CUDA graph's replays) */
	    (p->xgs && !kch_unusable(h, flags) && h->gpu_stop < p->xgs)) {
		kcoll_alone(c, h, flags, now);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	int first = !(p->seen[0] | p->seen[1] | p->seen[2] | p->seen[3]);
	if (kcoll_seen(p, ch)) { /* this channel again: the next execution (a graph's replay) */
		if (p->got)
			kcoll_emit(c, p);
		memset(p->seen, 0, sizeof p->seen);
		p->done = p->part = 0;
		p->xgs = 0;
		first = 1;
	}
	if (first && p->gen > 1) { /* the collective before it is over: its record goes now */
		struct coll_h *q = &c->colls[(p->gen - 2) & (KCH_COLLS - 1)];
		if (q->gen == p->gen - 1 && q->got)
			kcoll_emit(c, q);
	}
	p->seen[ch >> 6] |= 1ull << (ch & 63);
	kcoll_add(p, h, flags, now);
	if (p->want && p->done + p->got >= p->want)
		kcoll_emit(c, p);
	pthread_mutex_unlock(&c->mu);
}

/* Every record c still holds (c->mu held) */
static void kcoll_emit_all(struct pctx *c)
{
	for (unsigned i = 0; i < KCH_COLLS; i++)
		if (c->colls[i].got)
			kcoll_emit(c, &c->colls[i]);
	if (c->noparent)
		kcoll_noparent_emit(c);
}

/* Take mu within about 10 ms, or give up (the end of a trace never waits on a thread that a
 * signal stopped while it held the lock). */
static int lock_bounded(pthread_mutex_t *mu)
{
	for (int i = 0; i < 200; i++) {
		if (!pthread_mutex_trylock(mu))
			return 1;
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

void nvlp_np_flush(void)
{
	if (!lock_bounded(&kch_proc.mu))
		return;
	for (struct pctx *c = kch_proc.head; c; c = c->next)
		if (lock_bounded(&c->mu)) {
			kcoll_emit_all(c);
			pthread_mutex_unlock(&c->mu);
		}
	pthread_mutex_unlock(&kch_proc.mu);
}

/* A fork child (only this thread runs): a context's mutex may have been held by a thread that is
 * gone here, so the child's copies of the parent's contexts never fold (a child that calls NCCL
 * through them gets KCH records, as with NVLPROF_KCH=channels), and what they hold is the
 * parent's to write. */
void nvlp_np_atfork_child(void)
{
	for (struct pctx *c = kch_proc.head; c; c = c->next)
		c->fold = 0;
	kch_proc.head = NULL;
	pthread_mutex_init(&kch_proc.mu, NULL);
}

/* A channel started: take the next slot of the ring (recording a channel that never stopped,
 * if that slot still holds one). */
static void kch_start(struct pctx *c, void **handle, nvlp_nccl_descr_v5 *d)
{
	uint64_t i = __atomic_fetch_add(&c->next_kch, 1, __ATOMIC_RELAXED);
	struct kch_h *h = &c->kchs[i & (KCH_SLOTS - 1)];
	uint32_t st = KS_STARTED;
	if (__atomic_compare_exchange_n(&h->state, &st, KS_EMITTING, 0, __ATOMIC_ACQUIRE,
	                                __ATOMIC_RELAXED)) {
		if (c->fold)
			kch_fold(h, NVLP_KCH_NOSTOP);
		else
			kch_emit(h, NVLP_KCH_NOSTOP);
	} else if (st == KS_EMITTING)
		return; /* another thread is recording the old one: drop this channel */
	struct coll_h *p = d->parentObj;
	h->type = PROFILE_KERNEL_CH;
	h->ctx = c;
	h->channel = d->kernelCh.channelId;
	h->gpu_start = d->kernelCh.pTimer;
	h->gpu_stop = 0;
	h->flags = 0;
	h->parent = NULL;
	h->gen = 0;
	/* the slot may be refilled by the next KCH_COLLS-th collective meanwhile: atomic reads, or
	 * under the lock that refilling takes when folding */
	if (p >= c->colls && p < c->colls + KCH_COLLS &&
	    __atomic_load_n(&p->type, __ATOMIC_ACQUIRE) == PROFILE_COLL) {
		if (c->fold)
			pthread_mutex_lock(&c->mu);
		h->seq = __atomic_load_n(&p->seq, __ATOMIC_RELAXED);
		h->fn = __atomic_load_n(&p->fn, __ATOMIC_RELAXED);
		if (c->fold) {
			h->parent = p;
			h->gen = p->gen;
			pthread_mutex_unlock(&c->mu);
		}
	} else {
		h->seq = 0, h->fn = 0;
		h->flags = NVLP_KCH_NOPARENT;
	}
	__atomic_store_n(&h->state, KS_STARTED, __ATOMIC_RELEASE);
	*handle = h;
}

/* NCCLPROF.start: 0 inside an NCCL call the shim records (its NCCL record has the entry time
 * and length; the start would repeat it, ~4.8 of the ~37 bytes a collective costs in a trace),
 * now where NCCL was reached some other way. */
static uint64_t coll_start(void)
{
	struct nvlp_tls *t = nvlp_tls();
	return t && t->in_hook ? 0 : nvlp_now();
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
	    .start = coll_start(),
	    .dur = 0,
	    .warps = d->coll.nWarps,
	    .count = d->coll.count,
	    .nccl_comm = c->nccl_comm,
	    .rank = (uint64_t)(int64_t)c->rank,
	    .nranks = (uint64_t)(int64_t)c->nranks,
	};
	emit_fixed(NVLP_K_NCCLPROF, &r, sizeof r);
	if (c->kch) {
		/* the parent of this collective's channels */
		uint64_t i = __atomic_fetch_add(&c->next_coll, 1, __ATOMIC_RELAXED);
		struct coll_h *h = &c->colls[i & (KCH_COLLS - 1)];
		if (c->fold) {
			pthread_mutex_lock(&c->mu);
			if (h->got) /* the collective KCH_COLLS before it: what it has, now */
				kcoll_emit(c, h);
			memset(h->seen, 0, sizeof h->seen);
			h->done = h->part = 0;
			h->xgs = 0;
			h->gen = i + 1;
			h->want = d->coll.nChannels;
		}
		__atomic_store_n(&h->seq, r.seq, __ATOMIC_RELAXED);
		__atomic_store_n(&h->fn, r.fn, __ATOMIC_RELAXED);
		if (c->fold)
			pthread_mutex_unlock(&c->mu);
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
	if (nvlp_is_active()) {
		if (h->ctx->fold)
			kch_fold(h, 0);
		else
			kch_emit(h, 0);
	}
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
			if (!__atomic_compare_exchange_n(&c->kchs[i].state, &st, KS_EMITTING, 0,
			                                 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				continue;
			if (c->fold)
				kch_fold(&c->kchs[i], NVLP_KCH_NOSTOP);
			else
				kch_emit(&c->kchs[i], NVLP_KCH_NOSTOP);
		}
	if (c && c->fold) {
		pthread_mutex_lock(&kch_proc.mu);
		for (struct pctx **pp = &kch_proc.head; *pp; pp = &(*pp)->next)
			if (*pp == c) {
				*pp = c->next;
				break;
			}
		pthread_mutex_unlock(&kch_proc.mu);
		pthread_mutex_lock(&c->mu);
		if (nvlp_is_active())
			kcoll_emit_all(c);
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_destroy(&c->mu);
	}
	if (c) {
		if (c->kch)
			nvlp_cost_mem(-KCH_RINGS_BYTES);
		free(c->colls);
		free(c->kchs);
	}
	free(context);
	return ncclSuccess;
}

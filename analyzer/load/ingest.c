/* ingest.c: reads one trace file into its process's tables (one thread per file): one handler per
 * record kind, dispatched by a switch generated from NVLP_RECORD_KINDS; the handler checks every
 * decoded value it uses, and a record it cannot use is skipped with one warning naming file,
 * frame and record. */
#include <malloc.h>    /* mallopt */
#include <stdarg.h>    /* va_list */
#include <stdatomic.h> /* atomic_fetch_add */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, qsort */
#include <string.h>    /* strcmp */
#include <unistd.h>    /* sysconf */

#include "load/graphs.h"
#include "load/kernelch.h"
#include "model/model.h"
#include "nvlp_trace.h"
#include "model/stages.h"
#include "util/util.h"

struct tdrop {
	uint64_t tid, dropped;
};
/* Loading state of one file (freed after it). */
struct lctx {
	struct an_rank *r;
	nvlp_reader *rd;
	const struct nvlp_record *rec; /* the record being handled */
	struct an_match *m;
	int8_t *scls; /* per string id: an_coll_of_kernel + 2, 0 = not looked up */
	size_t nscls;
	struct tdrop *drops;
	size_t ndrops, capdrops;
	struct an_index comm_ix, pair_ix, drop_ix;
	int lastcomm; /* the latest communicator found (most calls are on one) */
	struct an_index sig_ix; /* struct an_csig -> its entry in r->csigs */
	long lastsig;           /* the latest call's entry (a DDP job repeats a few in a row) */
	size_t capdevs, cappairs, capallocs, capnotes, caplinks, capmods, capstacks, capcomms;
	size_t capchoices, capsyms;
	int lastdev;
	/* NCCL runs a single-rank communicator's collectives as device copies on the call's stream:
	 * those calls and the device-to-device copies, matched at the end of the file */
	struct srcall {
		uint32_t idx;
		int dev;
		uint64_t cs, t, bytes;
	} *sr;
	size_t nsr, capsr;
	struct dcopy {
		int dev;
		uint64_t stream, s, d, bytes;
		int used;
	} *dc;
	size_t ndc, capdc;
	/* calls that lasted long enough to have been written as in flight first (tid, t_enter):
	 * an INFLIGHT record of one of them names a call that returned */
	struct longcall {
		uint64_t tid, t_enter;
	} *longs;
	size_t nlongs, caplongs;
};
/* INFLIGHT is written for calls in progress for more than 1 s: a call that returned after a
 * shorter time never had one */
#define LONG_CALL_NS 500000000ull

/* The record is unusable: skip it, and say so once per file (the count says how many). */
static int bad(struct lctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct lctx *c, const char *fmt, ...)
{
	struct an_rank *r = c->r;
	if (!r->nbad++) {
		unsigned frame = 0;
		uint64_t rec = 0;
		nvlp_reader_position(c->rd, &frame, &rec);
		int n = snprintf(r->bad, sizeof r->bad, "%s: frame %u, record %llu: %s record ", r->path,
		                 frame, (unsigned long long)rec, nvlp_kind_info(c->rec->kind)->name);
		if (n > 0 && (size_t)n < sizeof r->bad) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(r->bad + n, sizeof r->bad - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -1;
}

static int dev_ok(uint64_t d)
{
	int64_t v = (int64_t)d;
	return v >= -1 && v <= AN_MAX_DEVICE;
}

/* A time of process r's own clock it could have lived to (see AN_MAX_LIFE_NS) */
static inline int life_ok(const struct an_rank *r, uint64_t t)
{
	return !r->t_mono0 || t - r->t_mono0 <= AN_MAX_LIFE_NS || t < r->t_mono0;
}

static inline void seen_time(struct an_rank *r, uint64_t s, uint64_t e)
{
	if (!s)
		return;
	if (s < r->t_first || !r->t_first)
		r->t_first = s;
	if (e > r->t_last && life_ok(r, e))
		r->t_last = e;
}

/* A record of a kind that seen_time does not take: the process was alive at t. */
static inline void alive_at(struct an_rank *r, uint64_t t)
{
	if (t > r->t_alive && life_ok(r, t))
		r->t_alive = t;
}

/* A call that may have had an INFLIGHT record before it returned */
static void long_call(struct lctx *c, uint64_t tid, uint64_t t_enter, uint64_t dur)
{
	if (dur < LONG_CALL_NS)
		return;
	struct longcall *x = PUSH(c->longs, c->nlongs, c->caplongs);
	if (x)
		*x = (struct longcall){tid, t_enter};
}

static struct an_dev *__attribute__((noinline)) get_dev_slow(struct lctx *c, int device)
{
	struct an_rank *r = c->r;
	for (size_t i = 0; i < r->ndevs; i++) /* at most AN_MAX_DEVICE + 2 */
		if (r->devs[i].device == device) {
			c->lastdev = (int)i;
			return &r->devs[i];
		}
	struct an_dev *d = PUSH(r->devs, r->ndevs, c->capdevs);
	if (!d)
		return NULL;
	memset(d, 0, sizeof *d);
	d->device = device;
	c->lastdev = (int)(r->ndevs - 1);
	return d;
}

/* The last device's check inline: kernels and link samples come by the million, mostly of one
 * GPU (perf: 1.5% of an 8-rank report in the call). */
static inline struct an_dev *get_dev(struct lctx *c, int device)
{
	struct an_rank *r = c->r;
	if (c->lastdev >= 0 && r->devs[c->lastdev].device == device)
		return &r->devs[c->lastdev];
	return get_dev_slow(c, device);
}

/* ---- NCCL calls ---- */
static int local_comm(struct lctx *c, uint64_t hash, int rank, int nranks, int device)
{
	struct an_rank *r = c->r;
	if (c->lastcomm >= 0 && r->comms[c->lastcomm].hash == hash &&
	    r->comms[c->lastcomm].rank == rank)
		return c->lastcomm;
	/* one process may hold several ranks of a comm */
	long i = an_index_get(&c->comm_ix, hash, (uint64_t)(int64_t)rank);
	if (i >= 0)
		return c->lastcomm = (int)i;
	if (r->ncomms >= AN_MAX_COMMS)
		return -1;
	struct an_rcomm *x = PUSH(r->comms, r->ncomms, c->capcomms);
	if (!x)
		return -1;
	if (an_index_put(&c->comm_ix, hash, (uint64_t)(int64_t)rank, (uint32_t)(r->ncomms - 1))) {
		r->ncomms--;
		return -1;
	}
	x->hash = hash;
	x->rank = rank;
	x->nranks = nranks;
	x->device = device;
	return (int)(r->ncomms - 1);
}

/* The entry of a call's (count, dtype, op, root) in r->csigs, added when new; AN_CSIG_NONE for
 * values no NCCL call passes, and beyond AN_MAX_CSIGS distinct ones (those are not compared). */
static uint16_t csig_of(struct lctx *c, const struct nvlp_rec_nccl *n)
{
	struct an_rank *r = c->r;
	int64_t dt = (int64_t)n->dtype, op = (int64_t)n->op, root = (int64_t)n->peer;
	if (dt < -1 || dt > INT16_MAX || op < -1 || op > INT16_MAX || root < -1 ||
	    root > AN_MAX_NRANKS)
		return AN_CSIG_NONE;
	struct an_csig k = {n->count, (int32_t)root, (int16_t)dt, (int16_t)op};
	if (c->lastsig >= 0) {
		const struct an_csig *l = &r->csigs[c->lastsig];
		if (l->count == k.count && l->root == k.root && l->dtype == k.dtype && l->op == k.op)
			return (uint16_t)c->lastsig;
	}
	uint64_t b = (uint64_t)(uint16_t)k.dtype | (uint64_t)(uint16_t)k.op << 16 |
	             (uint64_t)(uint32_t)k.root << 32;
	long i = an_index_get(&c->sig_ix, k.count, b);
	if (i < 0) {
		if (r->ncsigs >= AN_MAX_CSIGS)
			return AN_CSIG_NONE;
		struct an_csig *x = PUSH(r->csigs, r->ncsigs, r->capcsigs);
		if (!x)
			return AN_CSIG_NONE;
		*x = k;
		i = (long)(r->ncsigs - 1);
		if (an_index_put(&c->sig_ix, k.count, b, (uint32_t)i)) {
			r->ncsigs--;
			return AN_CSIG_NONE;
		}
	}
	c->lastsig = i;
	return (uint16_t)i;
}

/* nvlp_nccl_fn_class's table, here so the per-call look-up is not a call into the trace library */
static const char nccl_fn_cls[NVLP_NCCL_FN_COUNT] = {
#define AN_X_CLS(E, sym, cls) (#cls)[0],
    NVLP_NCCL_FUNCS(AN_X_CLS)
#undef AN_X_CLS
};

static int on_nccl(struct lctx *c)
{
	const struct nvlp_rec_nccl *n = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	unsigned fn32 = (unsigned)n->fn; /* nvlp_nccl_fn_class's argument */
	char cls = fn32 < NVLP_NCCL_FN_COUNT ? nccl_fn_cls[fn32] : '?';
	seen_time(r, n->t_enter, n->t_enter + n->dur);
	long_call(c, n->tid, n->t_enter, n->dur);
	if (cls == 'G') {
		if (n->fn == NVLP_NCCL_GROUP_START || n->fn == NVLP_NCCL_GROUP_END)
			an_match_group(c->m, n->tid, n->fn == NVLP_NCCL_GROUP_START);
		return 0;
	}
	if (cls == 'C' || cls == 'P') /* failed ones too: graphs.c counts what ran when issued */
		an_graphs_on_nccl(r, n);
	/* a failed call keeps its place when the shim says its seq is the one it was issued at
	 * (aux2 bit 0; earlier traces wrote seq 0 for every failed call: those are skipped) */
	int failed = (int64_t)n->rc != 0;
	if ((cls != 'C' && cls != 'P') || (failed && !(n->aux2 & 1)))
		return 0;
	int64_t rank = (int64_t)n->rank, nranks = (int64_t)n->nranks;
	if (!dev_ok(n->device))
		return bad(c, "with device %lld", (long long)(int64_t)n->device);
	if (nranks < -1 || nranks > AN_MAX_NRANKS || rank < -1 || (nranks > 0 && rank >= nranks))
		return bad(c, "with rank %lld of %lld", (long long)rank, (long long)nranks);
	if (r->ncalls >= UINT32_MAX - 1)
		return bad(c, "beyond 4G calls");
	int comm = local_comm(c, n->comm, (int)rank, (int)nranks, (int)(int64_t)n->device);
	if (comm < 0)
		return bad(c, "of communicator %016llx: more than %d communicators",
		           (unsigned long long)n->comm, AN_MAX_COMMS);
	/* the signature first: csig[ncalls] is written once the call is kept */
	if (__builtin_expect(r->ncalls >= r->capcsig, 0)) {
		uint16_t *g = an_grow(r->csig, &r->capcsig, r->ncalls + 1, sizeof *r->csig);
		if (!g)
			return bad(c, "not kept: out of memory");
		r->csig = g;
	}
	uint16_t sig = csig_of(c, n);
	struct an_call *cl = PUSH(r->calls, r->ncalls, r->capcalls);
	if (!cl)
		return bad(c, "not kept: out of memory");
	r->csig[r->ncalls - 1] = sig;
	cl->t_enter = n->t_enter;
	cl->bytes = n->bytes;
	cl->gpu_start = 0;
	cl->gpu_dur = 0;
	cl->host_dur = n->dur > UINT32_MAX ? UINT32_MAX : (uint32_t)n->dur;
	r->host_sum += cl->host_dur;
	r->host_sum_n++;
	cl->seq = (uint32_t)n->seq;
	cl->fn = (uint8_t)n->fn;
	cl->device = (int8_t)n->device;
	cl->comm = (int32_t)comm;
	an_match_call(c->m, (uint32_t)(r->ncalls - 1), n->tid, n->group_depth, n->cupti_stream);
	if (nranks == 1 && cls == 'C' && n->cupti_stream && !failed) {
		struct srcall *x = PUSH(c->sr, c->nsr, c->capsr);
		if (x)
			*x = (struct srcall){(uint32_t)(r->ncalls - 1), (int)(int64_t)n->device,
			                     n->cupti_stream, n->t_enter, n->bytes};
	}
	if (failed) {
		struct an_failed *x = PUSH(r->failed, r->nfailed, r->capfailed);
		if (x)
			*x = (struct an_failed){n->comm, (uint32_t)n->seq, (int)(int64_t)n->rc, n->dur};
	}
	return 0;
}

/* NCCLPROF: count the choice; the distinct ones of a process are few (a linear scan). */
static int on_ncclprof(struct lctx *c)
{
	const struct nvlp_rec_ncclprof *p = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	an_kch_on_ncclprof(r, p); /* NCCL's communicator -> the shim's, for KCH records */
	const char *algo = p->algo ? nvlp_reader_string(c->rd, p->algo) : NULL;
	const char *proto = p->proto ? nvlp_reader_string(c->rd, p->proto) : NULL;
	if (!algo)
		algo = "?";
	if (!proto)
		proto = "?";
	int fn = p->fn < NVLP_NCCL_FN_COUNT ? (int)p->fn : 0;
	int channels = p->channels > 4096 ? -1 : (int)p->channels;
	for (size_t i = 0; i < r->nchoices; i++) {
		struct an_choice *x = &r->choices[i];
		if (x->nccl_comm == p->nccl_comm && x->fn == fn && x->channels == channels &&
		    !strcmp(x->algo, algo) && !strcmp(x->proto, proto)) {
			x->calls++;
			if (!x->comm)
				x->comm = p->comm;
			return 0;
		}
	}
	if (r->nchoices >= 4096)
		return 0;
	struct an_choice *x = PUSH(r->choices, r->nchoices, c->capchoices);
	if (!x)
		return 0;
	memset(x, 0, sizeof *x);
	x->nccl_comm = p->nccl_comm;
	x->comm = p->comm;
	x->fn = (uint8_t)fn;
	snprintf(x->algo, sizeof x->algo, "%s", algo);
	snprintf(x->proto, sizeof x->proto, "%s", proto);
	x->channels = channels;
	x->calls = 1;
	return 0;
}

/* NCCLCOMM: NCCL's node count for a communicator it set up; one per communicator (a repeat of
 * a commHash, as after a fork, keeps the first). Values NCCL could not have passed are skipped. */
static int on_ncclcomm(struct lctx *c)
{
	const struct nvlp_rec_ncclcomm *n = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	int64_t nnodes = (int64_t)n->nnodes, nranks = (int64_t)n->nranks, rank = (int64_t)n->rank;
	if (nranks < 1 || nranks > AN_MAX_NRANKS || rank < 0 || rank >= nranks || nnodes < 1 ||
	    nnodes > nranks)
		return bad(c, "with %lld nodes, rank %lld of %lld", (long long)nnodes,
		           (long long)rank, (long long)nranks);
	for (unsigned i = 0; i < r->nncclcomms; i++)
		if (r->ncclcomms[i].nccl_comm == n->nccl_comm && r->ncclcomms[i].rank == (int)rank)
			return 0;
	if (r->nncclcomms >= AN_MAX_NCCLCOMMS) {
		r->nncclcomms_more++;
		return 0;
	}
	r->ncclcomms[r->nncclcomms++] =
	    (struct an_ncclcomm){n->nccl_comm, (int)nnodes, (int)nranks, (int)rank};
	return 0;
}

/* ---- GPU activity ---- */
static int kernel_class(struct lctx *c, uint64_t id, uint64_t flags)
{
	if (id < c->nscls && c->scls[id])
		return c->scls[id] - 2;
	int k = an_coll_of_kernel(nvlp_reader_string(c->rd, id));
	if ((flags & NVLP_KERNEL_F_NCCL) && k == 0)
		k = -1;
	if (id < (1u << 24)) {
		if (id >= c->nscls) {
			size_t n = c->nscls ? c->nscls : 64;
			while (n <= id)
				n *= 2;
			int8_t *p = realloc(c->scls, n);
			if (p) {
				memset(p + c->nscls, 0, n - c->nscls);
				c->scls = p;
				c->nscls = n;
			}
		}
		if (id < c->nscls)
			c->scls[id] = (int8_t)(k + 2);
	}
	return k;
}

static int on_kernel(struct lctx *c)
{
	const struct nvlp_rec_kernel *k = (const void *)c->rec->f;
	if (!dev_ok(k->device))
		return bad(c, "with device %lld", (long long)(int64_t)k->device);
	uint64_t s = k->start, e = k->start + k->dur;
	struct an_dev *d = get_dev(c, (int)(int64_t)k->device);
	if (!d)
		return 0;
	int kc = kernel_class(c, k->name, k->flags);
	if (an_bad_gpu_time(k->start, k->dur)) {
		if (kc) /* still the k-th kernel of its stream: consume its call */
			an_match_kernel(c->m, d->device, k->stream, 0, 0, kc);
		return 0;
	}
	seen_time(c->r, s, e);
	if (kc) {
		an_ivals_push(&d->nccl, s, e);
		an_match_kernel(c->m, d->device, k->stream, s, e, kc);
	} else
		an_ivals_push(&d->compute, s, e);
	return 0;
}

static int on_linksample(struct lctx *c)
{
	const struct nvlp_rec_linksample *l = (const void *)c->rec->f;
	if (an_bad_gpu_time(l->start, l->dur))
		return 0;
	if (!dev_ok(l->device))
		return bad(c, "with device %lld", (long long)(int64_t)l->device);
	seen_time(c->r, l->start, l->start + l->dur);
	struct an_dev *d = get_dev(c, (int)(int64_t)l->device);
	if (!d)
		return 0;
	d->nvl_tx += l->nvl_tx;
	d->nvl_rx += l->nvl_rx;
	d->pcie_rd += l->pcie_rd;
	d->pcie_wr += l->pcie_wr;
	d->link_sources |= 1u << (l->source < 32 ? l->source : 0); /* bit 0: a source not known */
	struct an_sample *sm = PUSH(d->samples, d->nsamples, d->capsamples);
	if (sm) {
		sm->s = l->start;
		sm->e = l->start + l->dur;
		sm->nvl = l->nvl_tx + l->nvl_rx;
		sm->pcie = l->pcie_rd + l->pcie_wr;
		sm->gap = (l->flags & NVLP_LINKSAMPLE_F_GAP) != 0;
	}
	return 0;
}

static struct an_pair *get_pair(struct lctx *c, int src, int dst)
{
	struct an_rank *r = c->r;
	long i = an_index_get(&c->pair_ix, (uint64_t)(int64_t)src, (uint64_t)(int64_t)dst);
	if (i >= 0)
		return &r->pairs[i];
	struct an_pair *p = PUSH(r->pairs, r->npairs, c->cappairs);
	if (!p)
		return NULL;
	if (an_index_put(&c->pair_ix, (uint64_t)(int64_t)src, (uint64_t)(int64_t)dst,
	                 (uint32_t)(r->npairs - 1))) {
		r->npairs--;
		return NULL;
	}
	memset(p, 0, sizeof *p);
	p->src = src;
	p->dst = dst;
	return p;
}

static int on_copy(struct lctx *c)
{
	const struct nvlp_rec_copy *cp = (const void *)c->rec->f;
	seen_time(c->r, cp->t_enter, cp->t_enter + cp->dur);
	long_call(c, cp->tid, cp->t_enter, cp->dur);
	int64_t sd = (int64_t)cp->src_device, dd = (int64_t)cp->dst_device;
	if ((int64_t)cp->rc != 0 || sd < 0 || dd < 0 || sd == dd)
		return 0;
	if (!dev_ok(cp->src_device) || !dev_ok(cp->dst_device))
		return bad(c, "with devices %lld -> %lld", (long long)sd, (long long)dd);
	struct an_pair *p = get_pair(c, (int)sd, (int)dd);
	if (!p)
		return 0;
	p->api_copies++;
	p->api_bytes += cp->bytes;
	if ((int64_t)cp->peer_enabled == 0) {
		p->staged_copies++;
		p->staged_bytes += cp->bytes;
		p->staged_ns += cp->dur;
		for (int k = 0; k < 4; k++) /* their Python locations: a PYREF names the call */
			if (!p->staged_call[k]) {
				p->staged_call[k] = cp->call_id;
				p->staged_stack = k ? p->staged_stack : cp->stack;
				break;
			}
	}
	unsigned fn = nvlp_cuda_fn_base(cp->fn); /* cu* records count as their cuda* twin */
	if (fn == NVLP_CUDA_MEMCPY || fn == NVLP_CUDA_MEMCPY_PEER || fn == NVLP_CUDA_MEMCPY_PTDS ||
	    fn == NVLP_CUDA_MEMCPY_PEER_PTDS) {
		p->sync_bytes += cp->bytes;
		p->sync_ns += cp->dur;
	}
	return 0;
}

static int on_gpucopy(struct lctx *c)
{
	const struct nvlp_rec_gpucopy *g = (const void *)c->rec->f;
	if (an_bad_gpu_time(g->start, g->dur))
		return 0;
	seen_time(c->r, g->start, g->start + g->dur);
	if (g->copy_kind == NVLP_GPUCOPY_DTOD && c->nsr && c->ndc < (1u << 20)) {
		struct dcopy *x = PUSH(c->dc, c->ndc, c->capdc);
		if (x)
			*x = (struct dcopy){(int)(int64_t)g->device, g->stream, g->start, g->dur,
			                    g->bytes, 0};
	}
	if (g->copy_kind != NVLP_GPUCOPY_PTOP) /* PTOP: direct over NVLink */
		return 0;
	if (!dev_ok(g->src_device) || !dev_ok(g->dst_device))
		return bad(c, "with devices %lld -> %lld", (long long)(int64_t)g->src_device,
		           (long long)(int64_t)g->dst_device);
	struct an_pair *p = get_pair(c, (int)(int64_t)g->src_device, (int)(int64_t)g->dst_device);
	if (p) {
		p->p2p_copies++;
		p->p2p_bytes += g->bytes;
		p->p2p_gpu_ns += g->dur;
	}
	return 0;
}

/* ---- managed memory ---- */
static struct an_alloc *find_alloc(struct an_rank *r, uint64_t addr)
{
	/* allocs are kept sorted by ptr; the last one starting at or below addr may hold it */
	size_t lo = 0, hi = r->nallocs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->allocs[mid].ptr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	struct an_alloc *a = &r->allocs[lo - 1];
	return addr - a->ptr < a->bytes ? a : NULL;
}

static int on_managed(struct lctx *c)
{
	const struct nvlp_rec_managed *m = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	seen_time(r, m->t_enter, m->t_enter + m->dur);
	if ((int64_t)m->rc != 0)
		return 0;
	unsigned fn = nvlp_cuda_fn_base(m->fn);
	if (fn == NVLP_CUDA_MALLOC_MANAGED) {
		if (!dev_ok(m->device))
			return bad(c, "with device %lld", (long long)(int64_t)m->device);
		if (r->nallocs >= AN_MAX_ALLOCS)
			return bad(c, "beyond %d managed allocations", AN_MAX_ALLOCS);
		if (!PUSH(r->allocs, r->nallocs, c->capallocs))
			return 0;
		size_t i = r->nallocs - 1;
		while (i > 0 && r->allocs[i - 1].ptr > m->ptr) {
			r->allocs[i] = r->allocs[i - 1];
			i--;
		}
		struct an_alloc *a = &r->allocs[i];
		memset(a, 0, sizeof *a);
		a->ptr = m->ptr;
		a->bytes = m->bytes;
		a->stack = m->stack;
		a->t = m->t_enter;
		a->last_dst = -2;
		a->device = (int)(int64_t)m->device;
		return 0;
	}
	struct an_alloc *a = find_alloc(r, m->ptr);
	if (!a)
		return 0;
	if (fn == NVLP_CUDA_MEM_PREFETCH_ASYNC)
		a->prefetched++;
	else if (fn == NVLP_CUDA_MEM_ADVISE)
		a->advised++;
	return 0;
}

static int on_um(struct lctx *c)
{
	const struct nvlp_rec_um *u = (const void *)c->rec->f;
	if (an_bad_gpu_time(u->start, u->dur))
		return 0;
	seen_time(c->r, u->start, u->start + u->dur);
	struct an_alloc *a = find_alloc(c->r, u->address);
	int dst;
	switch (u->counter) {
	case NVLP_UM_BYTES_TRANSFER_HTOD:
	case NVLP_UM_BYTES_TRANSFER_DTOD:
		if (!dev_ok(u->dst))
			return bad(c, "with device %lld", (long long)(int64_t)u->dst);
		dst = (int)(int64_t)u->dst;
		break;
	case NVLP_UM_BYTES_TRANSFER_DTOH:
		dst = -1;
		break;
	case NVLP_UM_CPU_PAGE_FAULT_COUNT:
		if (a) /* one record per fault group; CUPTI's value is not a count here (seen: ~1e14) */
			a->cpu_faults += 1;
		return 0;
	case NVLP_UM_GPU_PAGE_FAULT:
		if (a) {
			a->gpu_faults += u->value;
			a->migrate_ns += u->dur;
		}
		return 0;
	case NVLP_UM_THRASHING:
		if (a)
			a->thrash_events++;
		return 0;
	default:
		return 0;
	}
	if (!a)
		return 0;
	if (u->counter == NVLP_UM_BYTES_TRANSFER_HTOD)
		a->htod += u->value;
	else if (u->counter == NVLP_UM_BYTES_TRANSFER_DTOH)
		a->dtoh += u->value;
	else
		a->dtod += u->value;
	a->migrations++;
	a->migrate_ns += u->dur;
	if (a->last_dst != -2 && a->last_dst != dst)
		a->flips++;
	a->last_dst = dst;
	return 0;
}

static int on_peer(struct lctx *c)
{
	const struct nvlp_rec_peer *p = (const void *)c->rec->f;
	/* still enabled after "already enabled" */
	if (nvlp_cuda_fn_base(p->fn) == NVLP_CUDA_ENABLE_PEER_ACCESS && (int64_t)p->rc != 0 &&
	    (int64_t)p->rc != NVLP_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
		c->r->peer_enable_fail++;
	return 0;
}

static int on_nvlink(struct lctx *c)
{
	const struct nvlp_rec_nvlink *n = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	/* The peak is NVIDIA's per-direction figure of the NVLink version (an_nvlink_link_Bps),
	 * not CUPTI's field: CUPTI documents kB/s per link, but H200 (NVLink 4, 18 links) reported
	 * 849960000, i.e. 850 GB/s for the whole bundle. The field is used only for a version we
	 * do not know, and only when it is plausible for one link. */
	double per = an_nvlink_link_Bps(n->version);
	uint64_t bw = n->bandwidth * 1000ull;
	if (per > 0)
		bw = (uint64_t)per;
	else if (!n->bandwidth || n->bandwidth > UINT64_MAX / 1000 || (double)bw > 60e9)
		bw = (uint64_t)25e9;
	if (!dev_ok(n->dev0) || !dev_ok(n->dev1) || n->type0 > 16 || n->type1 > 16 ||
	    n->links > 1024)
		return bad(c, "with devices %lld, %lld of types %llu, %llu, %llu links",
		           (long long)(int64_t)n->dev0, (long long)(int64_t)n->dev1,
		           (unsigned long long)n->type0, (unsigned long long)n->type1,
		           (unsigned long long)n->links);
	for (size_t i = 0; i < r->nlinks; i++)
		if (r->links[i].dev0 == (int)(int64_t)n->dev0 &&
		    r->links[i].dev1 == (int)(int64_t)n->dev1 && r->links[i].type0 == (int)n->type0 &&
		    r->links[i].type1 == (int)n->type1)
			return 0;
	if (r->nlinks >= AN_MAX_LINKS)
		return bad(c, "beyond %d distinct links", AN_MAX_LINKS);
	struct an_link *l = PUSH(r->links, r->nlinks, c->caplinks);
	if (l) {
		l->dev0 = (int)(int64_t)n->dev0;
		l->dev1 = (int)(int64_t)n->dev1;
		l->type0 = (int)n->type0;
		l->type1 = (int)n->type1;
		l->links = n->links;
		l->bw_Bps = bw;
	}
	return 0;
}

/* ---- process metadata ---- */
static int on_note(struct lctx *c)
{
	const struct nvlp_rec_note *n = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	if (r->nnotes >= 64) {
		alive_at(r, n->t);
		if (n->code == NVLP_NOTE_OOM_KILL && n->value <= INT64_MAX)
			r->oom_last = (int64_t)n->value;
		return 0;
	}
	struct an_note *x = PUSH(r->notes, r->nnotes, c->capnotes);
	if (!x)
		return 0;
	alive_at(r, n->t);
	if (n->code == NVLP_NOTE_OOM_KILL && n->value <= INT64_MAX)
		r->oom_last = (int64_t)n->value; /* cumulative: the last one is the count then */
	x->code = n->code < NVLP_NOTE_CODE_COUNT ? (unsigned)n->code : NVLP_NOTE_CODE_COUNT;
	x->t = n->t;
	x->device = dev_ok(n->device) ? (int)(int64_t)n->device : -1;
	x->value = n->value;
	const struct nvlp_record *rec = c->rec;
	size_t len = rec->blob_len < sizeof x->msg - 1 ? rec->blob_len : sizeof x->msg - 1;
	if (!rec->blob)
		len = 0;
	memcpy(x->msg, rec->blob ? (const char *)rec->blob : "", len);
	x->msg[len] = 0;
	for (char *p = x->msg; *p; p++)
		if (*p == '\n' || *p == '"' || *p == '\\')
			*p = ' ';
	return 0;
}

static int on_stack(struct lctx *c)
{
	const struct nvlp_rec_stack *s = (const void *)c->rec->f;
	const struct nvlp_record *rec = c->rec;
	if (rec->blob_len % 8)
		return bad(c, "of %u bytes, not a whole number of addresses", rec->blob_len);
	struct an_stack *x = PUSH(c->r->stacks, c->r->nstacks, c->capstacks);
	if (!x)
		return 0;
	x->id = s->id;
	x->n = rec->blob_len / 8;
	x->pc = malloc(x->n ? x->n * 8 : 1);
	if (x->pc && rec->blob)
		memcpy(x->pc, rec->blob, (size_t)x->n * 8);
	else
		x->n = 0;
	return 0;
}

static int on_module(struct lctx *c)
{
	const struct nvlp_rec_module *m = (const void *)c->rec->f;
	const struct nvlp_record *rec = c->rec;
	if (m->end < m->start)
		return bad(c, "ending before it starts");
	struct an_module *x = PUSH(c->r->modules, c->r->nmodules, c->capmods);
	if (!x)
		return 0;
	memset(x, 0, sizeof *x);
	x->base = m->base;
	x->start = m->start;
	x->end = m->end;
	x->path = strndup(rec->blob ? (const char *)rec->blob : "", rec->blob_len);
	if (!x->path)
		c->r->nmodules--;
	return 0;
}

static int on_buildid(struct lctx *c)
{
	const struct nvlp_rec_buildid *b = (const void *)c->rec->f;
	const struct nvlp_record *rec = c->rec;
	if (!rec->blob_len || rec->blob_len > sizeof c->r->modules[0].build_id)
		return bad(c, "of %u bytes", rec->blob_len);
	an_sym_buildid(c->r, b->base, rec->blob, rec->blob_len);
	return 0;
}

static int on_symbol(struct lctx *c)
{
	const struct nvlp_rec_symbol *s = (const void *)c->rec->f;
	const struct nvlp_record *rec = c->rec;
	if (!rec->blob_len || s->size > (1ull << 32))
		return bad(c, "of size %llu named by %u bytes", (unsigned long long)s->size,
		           rec->blob_len);
	struct an_rank *r = c->r;
	if (r->nsyms >= AN_MAX_SYMBOLS)
		return bad(c, "beyond %u symbols", AN_MAX_SYMBOLS);
	char *name = strndup((const char *)rec->blob, rec->blob_len);
	struct an_sym *x = name ? PUSH(r->syms, r->nsyms, c->capsyms) : NULL;
	if (!x) {
		free(name);
		return 0;
	}
	x->base = s->base;
	x->off = s->offset;
	x->size = s->size;
	x->name = name;
	return 0;
}

static int on_drops(struct lctx *c)
{
	const struct nvlp_rec_drops *d = (const void *)c->rec->f;
	alive_at(c->r, d->t);
	long i = an_index_get(&c->drop_ix, d->tid, 0);
	if (i < 0) {
		struct tdrop *x = PUSH(c->drops, c->ndrops, c->capdrops);
		if (!x)
			return 0;
		if (an_index_put(&c->drop_ix, d->tid, 0, (uint32_t)(c->ndrops - 1))) {
			c->ndrops--;
			return 0;
		}
		x->tid = d->tid;
		x->dropped = 0;
		i = (long)(c->ndrops - 1);
	}
	if (d->dropped > c->drops[i].dropped) /* cumulative per thread */
		c->drops[i].dropped = d->dropped;
	return 0;
}

static int on_end(struct lctx *c)
{
	const struct nvlp_rec_end *e = (const void *)c->rec->f;
	seen_time(c->r, e->t, e->t);
	c->r->dropped = e->dropped;
	c->r->end_reason = nvlp_end_reason_name(e->reason) ? (int)e->reason : NVLP_END_EXIT;
	return 0;
}

/* COST: what recording cost so far (cumulative); the last one is kept. */
static int on_cost(struct lctx *c)
{
	const struct nvlp_rec_cost *x = (const void *)c->rec->f;
	alive_at(c->r, x->t);
	c->r->cost = *x;
	c->r->have_cost = 1;
	return 0;
}

/* EXITINFO: the signal and exit status of a process's end, written just before END. */
static int on_exitinfo(struct lctx *c)
{
	const struct nvlp_rec_exitinfo *x = (const void *)c->rec->f;
	seen_time(c->r, x->t, x->t);
	int64_t sig = (int64_t)x->signal, st = (int64_t)x->status;
	c->r->end_signal = sig > 0 && sig < 128 ? (int)sig : 0;
	c->r->end_status = st >= -255 && st <= 255 ? (int)st : 0;
	c->r->have_exitinfo = 1;
	return 0;
}

static int on_header(struct lctx *c)
{
	const struct nvlp_rec_header *hd = (const void *)c->rec->f;
	if (!c->r->t_mono0)
		c->r->t_mono0 = hd->t_mono;
	if (!c->r->t_real0)
		c->r->t_real0 = hd->t_real;
	return 0;
}

/* COMMNAME: a communicator's name; the first one of a hash is kept (a process names it once). */
static int on_commname(struct lctx *c)
{
	const struct nvlp_rec_commname *n = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	const char *s = n->name ? nvlp_reader_string(c->rd, n->name) : NULL;
	if (!s || !*s)
		return 0;
	for (size_t i = 0; i < r->ncnames; i++)
		if (r->cnames[i].hash == n->comm)
			return 0;
	if (r->ncnames >= AN_MAX_COMMS)
		return 0;
	struct an_cname *x = PUSH(r->cnames, r->ncnames, r->capcnames);
	if (!x)
		return bad(c, "not kept: out of memory");
	x->hash = n->comm;
	size_t i = 0; /* printable only: the name goes into text tables and JSON */
	for (; s[i] && i < sizeof x->name - 1; i++)
		x->name[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	x->name[i] = 0;
	return 0;
}

#ifdef NVLP_FIELDS_MARK
/* MARK: torch.profiler's ProfilerStep#N ranges begin steps: as NVTX ranges (emit_nvtx), else as
 * the outermost user ranges the shim saw through CUPTI (USER_RANGE, no name; only those of the
 * thread that made the earliest, as prof.step() runs on one thread: steps.c). A capture range from
 * cudaProfilerStart/Stop is not a step. */
static int on_mark(struct lctx *c)
{
	const struct nvlp_rec_mark *m = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	seen_time(r, m->t, m->t);
	const char *name = NULL;
	if (m->kind == NVLP_MARK_RANGE_PUSH || m->kind == NVLP_MARK_RANGE_START) {
		const char *s = m->name ? nvlp_reader_string(c->rd, m->name) : NULL;
		if (!s || strncmp(s, "ProfilerStep#", 13))
			return 0;
		r->mark_src = 1; /* the named marks replace the unnamed ones (umarks) */
		name = "ProfilerStep";
	} else if (m->kind == NVLP_MARK_USER_RANGE) {
		if (r->mark_src == 1)
			return 0;
		r->mark_src = 2;
		struct an_umark *u = PUSH(r->umarks, r->numarks, r->capumarks);
		if (!u)
			return bad(c, "not kept: out of memory");
		u->t = m->t;
		u->tid = m->tid;
		return 0;
	} else {
		return 0;
	}
	if (an_steps_mark(r, m->t, name) < 0)
		return bad(c, "not kept: out of memory");
	return 0;
}
#endif

/* ---- kernel channels and CUDA graphs: kept for kernelch.c and graphs.c ---- */
static int on_kch(struct lctx *c)
{
	const struct nvlp_rec_kch *k = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	alive_at(r, k->host);
	if (k->flags & NVLP_KCH_NOSTOP) { /* the hang's evidence: still running on the GPU */
		r->kch_nostop++;
		r->kch_nostop_seq = k->seq > UINT32_MAX ? UINT32_MAX : (uint32_t)k->seq;
		r->kch_nostop_fn = k->fn < NVLP_NCCL_FN_COUNT ? (uint8_t)k->fn : 0;
	}
	an_kch_on_kch(r, k);
	an_graphs_on_kch(c->r, k); /* per-execution times of captured collectives */
	return 0;
}
static int on_clock(struct lctx *c)
{
	const struct nvlp_rec_clock *k = (const void *)c->rec->f;
	alive_at(c->r, k->mono); /* heartbeats (NVLP_CLOCK_HEARTBEAT) are there for this */
	an_kch_on_clock(c->r, k);
	return 0;
}
static int on_kwindow(struct lctx *c)
{
	an_kch_on_kwindow(c->r, (const void *)c->rec->f);
	return 0;
}
static int on_graph(struct lctx *c)
{
	an_graphs_on_graph(c->r, (const void *)c->rec->f);
	return 0;
}
static int on_captured(struct lctx *c)
{
	an_graphs_on_captured(c->r, (const void *)c->rec->f);
	return 0;
}
static int on_gpugraph(struct lctx *c)
{
	an_graphs_on_gpugraph(c->r, (const void *)c->rec->f);
	return 0;
}

/* Kinds the model does not use: the reader keeps STRING texts, the rest is for dump. */
static int on_ignored(struct lctx *c)
{
	(void)c;
	return 0;
}
#define on_string on_ignored
#define on_device on_ignored

/* INFLIGHT: a call not returned when written; per thread the latest call is kept (a later one
 * means the earlier returned), rewritten ones (the writer's, then the final flush's) update t. */
static int on_inflight(struct lctx *c)
{
	const struct nvlp_rec_inflight *f = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	int nccl = f->kind == NVLP_K_NCCL;
	if ((!nccl && f->kind != NVLP_K_COPY) || f->fn >= (nccl ? NVLP_NCCL_FN_COUNT : 65536) ||
	    !dev_ok(f->device) || !f->t_enter || f->t_enter > f->t || f->seq > UINT32_MAX)
		return bad(c, "of kind %llu, fn %llu, device %lld, entered at %llu",
		           (unsigned long long)f->kind, (unsigned long long)f->fn,
		           (long long)(int64_t)f->device, (unsigned long long)f->t_enter);
	alive_at(r, f->t);
	struct an_inflight *x = NULL;
	for (size_t i = 0; i < r->ninflight && !x; i++) /* threads with a call >1 s: a few */
		if (r->inflight[i].tid == f->tid)
			x = &r->inflight[i];
	if (x && x->t_enter > f->t_enter)
		return 0;
	if (!x && r->ninflight >= AN_MAX_INFLIGHT)
		return bad(c, "beyond %d threads in flight", AN_MAX_INFLIGHT);
	if (!x && !(x = PUSH(r->inflight, r->ninflight, r->capinflight)))
		return bad(c, "not kept: out of memory");
	int64_t rank = (int64_t)f->rank, nranks = (int64_t)f->nranks;
	if (nranks < -1 || nranks > AN_MAX_NRANKS || rank < -1 || (nranks > 0 && rank >= nranks))
		rank = nranks = -1; /* where it was still says something; its seat does not */
	*x = (struct an_inflight){.tid = f->tid,
	                          .t = f->t,
	                          .t_enter = f->t_enter,
	                          .comm = f->comm,
	                          .bytes = f->bytes,
	                          .seq = (uint32_t)f->seq,
	                          .rank = (int)rank,
	                          .nranks = (int)nranks,
	                          .kind = (uint16_t)f->kind,
	                          .fn = (uint16_t)f->fn,
	                          .device = (int)(int64_t)f->device,
	                          .call = -1};
	return 0;
}

/* FATAL: the signal that ended the process and the thread it hit (the first one kept). */
static int on_fatal(struct lctx *c)
{
	const struct nvlp_rec_fatal *f = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	int64_t sig = (int64_t)f->signal;
	if (sig <= 0 || sig >= 128)
		return bad(c, "with signal %lld", (long long)sig);
	alive_at(r, f->t);
	if (r->fatal.signal)
		return 0;
	r->fatal = (struct an_fatal){.signal = (int)sig, .main = f->main == 1, .tid = f->tid, .t = f->t};
	size_t n = c->rec->blob ? c->rec->blob_len : 0, i = 0;
	for (; i < n && i < sizeof r->fatal.thread - 1; i++) { /* printable: it goes into text */
		char ch = ((const char *)c->rec->blob)[i];
		r->fatal.thread[i] = ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? ch : '?';
	}
	r->fatal.thread[i] = 0;
	return 0;
}
/* Python chains: kept as they are; findings.c joins them to the records PYREFs name. */
static int on_pystack(struct lctx *c)
{
	const struct nvlp_rec_pystack *s = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	if (!s->id || !c->rec->blob_len)
		return bad(c, "with id 0 or no frames");
	struct an_pystack *x = PUSH(r->pystacks, r->npystacks, r->cappystacks);
	if (!x)
		return bad(c, "not kept: out of memory");
	x->id = s->id;
	if (!(x->text = strndup((const char *)c->rec->blob, c->rec->blob_len)))
		r->npystacks--;
	return 0;
}

static int on_pyref(struct lctx *c)
{
	const struct nvlp_rec_pyref *p = (const void *)c->rec->f;
	if (p->kind >= NVLP_K_COUNT)
		return bad(c, "naming kind %llu", (unsigned long long)p->kind);
	alive_at(c->r, p->t);
	struct an_pyref *x = PUSH(c->r->pyrefs, c->r->npyrefs, c->r->cappyrefs);
	if (!x)
		return bad(c, "not kept: out of memory");
	*x = (struct an_pyref){p->tid, p->t, p->call_id, p->pystack, (unsigned)p->kind};
	return 0;
}

/* One handler per kind, generated from the kind list: a new kind without a handler does not
 * compile. A handler returns 0, or -1 the record was skipped (bad() said why). A switch, not a
 * table of pointers: the compiler inlines the handlers of the kinds that come by the million
 * (an indirect call per record was 2% of an 8-rank report's instructions). */
static inline void dispatch(struct lctx *c, unsigned kind)
{
	switch (kind) {
#define AN_HANDLER(NAME, name, blob, FIELDS)                                                       \
	case NVLP_K_##NAME:                                                                        \
		on_##name(c);                                                                      \
		break;
		NVLP_RECORD_KINDS(AN_HANDLER)
#undef AN_HANDLER
	default: /* the reader hands out valid kinds only */
		break;
	}
}

static int hdr_int(const char *s)
{
	char *end;
	long v = s && *s ? strtol(s, &end, 10) : -1;
	return s && *s && !*end && v >= 0 && v < AN_MAX_NRANKS ? (int)v : -1;
}

void an_rank_guess_init(struct an_rank_guess *g, const char *header_rank, const char *header_world)
{
	g->header_rank = hdr_int(header_rank);
	g->header_world = hdr_int(header_world);
	g->best_nranks = 0;
	g->comm_rank = -1;
}

int an_rank_guess_overrides(const struct an_rank_guess *g)
{
	return g->header_rank >= 0 && g->comm_rank >= 0 && g->comm_rank != g->header_rank &&
	       g->header_world > 1 && g->best_nranks == g->header_world;
}

void an_rank_guess_comm(struct an_rank_guess *g, int rank, int nranks)
{
	if (rank >= 0 && nranks > g->best_nranks && rank < nranks) {
		g->best_nranks = nranks;
		g->comm_rank = rank;
	}
}

int an_rank_guess_get(const struct an_rank_guess *g)
{
	return g->header_rank >= 0 && !an_rank_guess_overrides(g) ? g->header_rank : g->comm_rank;
}

int an_rank_is_worker(const uint64_t kind_count[NVLP_K_COUNT], int truncated)
{
	if (truncated)
		return 1;
	static const unsigned work[] = {NVLP_K_NCCL,    NVLP_K_COPY, NVLP_K_MANAGED, NVLP_K_PEER,
	                                NVLP_K_KERNEL,  NVLP_K_GPUCOPY, NVLP_K_UM, NVLP_K_NCCLPROF,
	                                NVLP_K_LINKSAMPLE};
	for (size_t i = 0; i < sizeof work / sizeof work[0]; i++)
		if (kind_count[work[i]])
			return 1;
	return 0;
}

/* An in-flight collective as a call of its own, at its seq (its host time: until last seen) */
static void inflight_call(struct lctx *c, struct an_inflight *x)
{
	struct an_rank *r = c->r;
	char cls = x->kind == NVLP_K_NCCL ? nccl_fn_cls[x->fn] : 0;
	if ((cls != 'C' && cls != 'P') || r->ncalls >= UINT32_MAX - 1)
		return;
	int comm = local_comm(c, x->comm, x->rank, x->nranks, x->device);
	/* its signature is not known (INFLIGHT has no count or dtype): not compared. Without an
	 * entry the call read csig past what was written (past the array, when it was full) */
	if (comm >= 0 && r->csig && r->ncalls >= r->capcsig) {
		uint16_t *g = an_grow(r->csig, &r->capcsig, r->ncalls + 1, sizeof *r->csig);
		if (!g)
			return;
		r->csig = g;
	}
	struct an_call *cl = comm >= 0 ? PUSH(r->calls, r->ncalls, r->capcalls) : NULL;
	if (!cl)
		return;
	if (r->csig)
		r->csig[r->ncalls - 1] = AN_CSIG_NONE;
	uint64_t d = x->t - x->t_enter;
	*cl = (struct an_call){.t_enter = x->t_enter,
	                       .bytes = x->bytes,
	                       .host_dur = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d,
	                       .seq = x->seq,
	                       .comm = (int32_t)comm,
	                       .fn = (uint8_t)x->fn,
	                       .device = (int8_t)x->device};
	if (r->host_sum_n == r->ncalls - 1) {
		r->host_sum += cl->host_dur;
		r->host_sum_n++;
	}
	x->call = (int64_t)(r->ncalls - 1);
}

static void read_header(struct an_rank *r, nvlp_reader *rd)
{
	const char *h = nvlp_reader_header_text(rd);
	r->header = strdup(h ? h : "");
	char buf[128];
	const char *v;
	r->rank = -1;
	if ((v = an_header_get(r, NVLP_HDR_HOST, buf, sizeof buf)))
		snprintf(r->host, sizeof r->host, "%s", v);
	if ((v = an_header_get(r, NVLP_HDR_PID, buf, sizeof buf)))
		r->pid = atoi(v);
	if ((v = an_header_get(r, NVLP_HDR_T_MONO, buf, sizeof buf)))
		r->t_mono0 = strtoull(v, NULL, 10);
	if ((v = an_header_get(r, NVLP_HDR_T_REAL, buf, sizeof buf)))
		r->t_real0 = strtoull(v, NULL, 10);
	/* the cgroup's memory.events oom_kill count at start (the shim's key) */
	char *end;
	r->oom_start = r->oom_last = -1;
	if ((v = an_header_get(r, NVLP_HDR_OOM_KILL, buf, sizeof buf)) && *v) {
		long long n = strtoll(v, &end, 10);
		r->oom_start = !*end && n >= 0 ? n : -1;
	}
}

/* The end of the file's in-flight calls: those that returned (a long call of the thread with
 * the same entry) go; a collective or point-to-point call still in flight counts as entered
 * (a rank blocked inside #50 entered #50: the hang is the first seq some rank lacks). */
static void finish_inflight(struct lctx *c)
{
	struct an_rank *r = c->r;
	size_t o = 0;
	for (size_t i = 0; i < r->ninflight; i++) {
		struct an_inflight *x = &r->inflight[i];
		int returned = 0;
		for (size_t k = 0; k < c->nlongs && !returned; k++) /* calls over 0.5 s: a few */
			returned = c->longs[k].tid == x->tid && c->longs[k].t_enter == x->t_enter;
		if (!returned)
			r->inflight[o++] = *x;
	}
	r->ninflight = o;
	for (size_t i = 0; i < r->ninflight; i++)
		inflight_call(c, &r->inflight[i]);
}

/* Single-rank collectives without GPU time take it from the device copy NCCL made for them: on
 * the call's stream and device, of the call's bytes, the first unused one starting after the call
 * (calls and copies in time order; a copy of other bytes on that stream is the job's own). */
static int cmp_dcopy(const void *a, const void *b)
{
	const struct dcopy *x = a, *y = b;
	return x->s < y->s ? -1 : x->s > y->s;
}
static void single_rank_copies(struct lctx *c)
{
	struct an_rank *r = c->r;
	if (!c->nsr || !c->ndc)
		return;
	qsort(c->dc, c->ndc, sizeof *c->dc, cmp_dcopy);
	size_t from = 0;
	for (size_t i = 0; i < c->nsr; i++) {
		struct srcall *q = &c->sr[i];
		struct an_call *cl = &r->calls[q->idx];
		if (cl->gpu_start)
			continue;
		while (from < c->ndc && c->dc[from].used)
			from++;
		for (size_t j = from; j < c->ndc && j < from + 4096; j++) {
			struct dcopy *x = &c->dc[j];
			if (x->used || x->s < q->t || x->dev != q->dev || x->stream != q->cs ||
			    x->bytes != q->bytes)
				continue;
			x->used = 1;
			cl->gpu_start = x->s;
			cl->gpu_dur = x->d > UINT32_MAX ? UINT32_MAX : (uint32_t)x->d;
			struct an_dev *d = get_dev(c, q->dev);
			if (d)
				an_ivals_push(&d->nccl, x->s, x->s + x->d);
			break;
		}
	}
}

/* Read one file completely into r. */
static void load_file(struct an_rank *r)
{
	struct lctx c = {.r = r, .lastdev = -1, .lastcomm = -1, .lastsig = -1};
	c.rd = nvlp_reader_open(r->path, r->err, sizeof r->err);
	if (!c.rd) {
		r->ok = 0;
		return;
	}
	r->ok = 1;
	r->end_reason = -1;
	read_header(r, c.rd);
	c.m = an_match_open(r);
	struct nvlp_record rec;
	int rc;
	c.rec = &rec;
	while (c.m && (rc = nvlp_reader_next(c.rd, &rec)) == 1) {
		r->records++;
		r->kind_count[rec.kind]++; /* the reader hands out valid kinds only */
		dispatch(&c, rec.kind);
	}
	if (!c.m)
		rc = -1;
	r->complete = nvlp_reader_complete(c.rd);
	r->truncated = rc < 0 || nvlp_reader_truncated(c.rd) || !r->complete;
	if (r->truncated)
		snprintf(r->err, sizeof r->err, "%s",
		         *nvlp_reader_error(c.rd) ? nvlp_reader_error(c.rd)
		         : !c.m                   ? "out of memory"
		                                  : "no END record (process did not exit cleanly)");
	r->frames_skipped = nvlp_reader_frames_skipped(c.rd);
	if (r->t_last > r->t_alive)
		r->t_alive = r->t_last;
	if (r->t_mono0 > r->t_alive) /* it was alive when it wrote its header */
		r->t_alive = r->t_mono0;
	struct an_rank_guess g;
	char buf[64], wbuf[64];
	an_rank_guess_init(&g, an_header_get(r, NVLP_HDR_RANK, buf, sizeof buf),
	                   an_header_get(r, NVLP_HDR_WORLD_SIZE, wbuf, sizeof wbuf));
	for (size_t i = 0; i < r->ncomms; i++)
		an_rank_guess_comm(&g, r->comms[i].rank, r->comms[i].nranks);
	r->rank = an_rank_guess_get(&g);
	if (!r->dropped)
		for (size_t i = 0; i < c.ndrops; i++)
			r->dropped += c.drops[i].dropped;
	an_match_close(c.m);
	finish_inflight(&c);
	free(c.longs);
	an_kch_file_end(r);
	/* what kernelch.c and graphs.c will not read (they take traces with their kinds only) */
	if (!r->kind_count[NVLP_K_KCH] && !r->kind_count[NVLP_K_KWINDOW])
		an_kch_file_free(r);
	if (!r->kind_count[NVLP_K_GRAPH] && !r->kind_count[NVLP_K_GPUGRAPH])
		an_graphs_file_free(r);
	single_rank_copies(&c);
	free(c.sr);
	free(c.dc);
	an_sym_finish(r);
	free(c.scls);
	free(c.drops);
	an_index_free(&c.comm_ix);
	an_index_free(&c.pair_ix);
	an_index_free(&c.drop_ix);
	an_index_free(&c.sig_ix);
	nvlp_reader_close(c.rd);
}

/* ---- input listing and parallel load ---- */
struct loadq {
	struct an_rank *r;
	size_t n;
	atomic_size_t next;
};
static void *load_worker(void *arg)
{
	struct loadq *q = arg;
	size_t i;
	while ((i = atomic_fetch_add(&q->next, 1)) < q->n)
		load_file(&q->r[i]);
	return NULL;
}

static int cmp_rank(const void *a, const void *b)
{
	const struct an_rank *x = a, *y = b;
	if (x->ok != y->ok)
		return y->ok - x->ok;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	int c = strcmp(x->host, y->host);
	if (c)
		return c;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->path, y->path);
}

static void tune_malloc(void)
{
	/* Fresh pages are dear (zeroing dominated loading on a VM): keep freed blocks in the heap
	 * for reuse instead of returning them to the kernel (measured against a 4 MiB mmap
	 * threshold, where growing arrays move by mremap: the heap was 10-20% less CPU on both
	 * bench shapes, the analysis reusing the loading's blocks). The CLI is the only user. */
	static int tuned;
	if (!tuned++) {
		mallopt(M_MMAP_THRESHOLD, 512 << 20);
		mallopt(M_TRIM_THRESHOLD, 1 << 30);
		/* No M_ARENA_MAX 1: one arena for all reader threads made their small allocations
		 * (match.c's index per flushed group, then; ingest's growing arrays) contend for its
		 * lock: report -j 8 of an 8-rank job made 7,880 futex calls (-j 1: 1) and took 1.31-
		 * 1.47 s of CPU against 0.93-1.32 s with per-thread arenas on 2 cores; on the 16-core
		 * GPU machine 8 threads took 3.8-4.2 s of CPU to load what one thread loads in 0.5 s
		 * (tests/gpu/results/run5.txt; tests/gpu/report_scaling.sh compares the two). */
	}
}

/* The traces' parents, sorted by (ppid, host): a launcher is found by its pid in O(log n). */
struct parent {
	long ppid;
	const char *host;
};
static int cmp_parent(const void *a, const void *b)
{
	const struct parent *x = a, *y = b;
	return x->ppid != y->ppid ? (x->ppid < y->ppid ? -1 : 1) : strcmp(x->host, y->host);
}
static struct parent *parents_of(const struct an_job *job, size_t nf)
{
	struct parent *p = malloc((nf ? nf : 1) * sizeof *p);
	for (size_t i = 0; p && i < nf; i++) {
		char b[32];
		const char *x = job->ranks[i].ok ? an_header_get(&job->ranks[i], NVLP_HDR_PPID, b, sizeof b)
		                                 : NULL;
		p[i] = (struct parent){x ? strtol(x, NULL, 10) : -1, job->ranks[i].host};
	}
	if (p)
		qsort(p, nf, sizeof *p, cmp_parent);
	return p;
}

/* A trace cut short keeps its place among the ranks (it may have lost its work), unless it did
 * none and is the parent of a traced process of its host: a launcher killed with its job
 * (kill -9 of the tree, a time limit) is a launcher, not a rank. */
static int is_worker(const struct an_rank *r, const struct parent *par, size_t nf)
{
	if (!an_rank_is_worker(r->kind_count, 0))
		return r->truncated && !(par && bsearch(&(struct parent){r->pid, r->host}, par, nf,
		                                        sizeof *par, cmp_parent));
	return 1;
}

/* Processes that did no rank's work go last, out of every table; when none did any (a trace
 * without GPU or NCCL records at all) all stay, so the report still shows them. */
static void workers_first(struct an_job *job, size_t nf)
{
	size_t nw = 0;
	struct parent *par = parents_of(job, nf);
	for (size_t i = 0; i < nf; i++)
		nw += job->ranks[i].ok && is_worker(&job->ranks[i], par, nf);
	if (nw) {
		struct an_rank *tmp = malloc(nf * sizeof *tmp);
		if (tmp) {
			size_t a = 0, b = 0;
			for (int pass = 0; pass < 3; pass++)
				for (size_t i = 0; i < nf; i++) {
					struct an_rank *r = &job->ranks[i];
					int cls = !r->ok ? 1 : is_worker(r, par, nf) ? 0 : 2;
					if (cls == pass)
						tmp[a++] = *r;
					b += pass == 2 && cls == 2;
				}
			memcpy(job->ranks, tmp, nf * sizeof *tmp);
			free(tmp);
			job->nothers = b;
			job->nranks = nf - b;
		}
	}
	free(par);
}

void an_job_order(struct an_job *job)
{
	size_t nf = job->nranks + job->nothers;
	job->nranks = nf;
	job->nothers = 0;
	job->nok = 0;
	qsort(job->ranks, nf, sizeof *job->ranks, cmp_rank);
	workers_first(job, nf);
	for (size_t i = 0; i < job->nranks; i++)
		job->nok += job->ranks[i].ok;
}

int an_job_load(struct an_job *job, char **paths, int npaths, int nthreads, char *err,
                size_t errlen)
{
	memset(job, 0, sizeof *job);
	tune_malloc();
	struct nvlp_paths ps = {0};
	for (int i = 0; i < npaths; i++)
		if (nvlp_paths_add(&ps, paths[i], err, errlen) < 0) {
			nvlp_paths_free(&ps);
			return -1;
		}
	size_t nf = ps.n;
	if (!nf) {
		snprintf(err, errlen, "no traces found (expected *.nvlp files in %s)",
		         npaths ? paths[0] : "the arguments");
		nvlp_paths_free(&ps);
		return -1;
	}
	job->ranks = calloc(nf, sizeof *job->ranks);
	if (!job->ranks) {
		snprintf(err, errlen, "out of memory");
		nvlp_paths_free(&ps);
		return -1;
	}
	job->nranks = nf;
	for (size_t i = 0; i < nf; i++) {
		job->ranks[i].path = ps.v[i];
		ps.v[i] = NULL;
	}
	nvlp_paths_free(&ps);
	long np = sysconf(_SC_NPROCESSORS_ONLN);
	if (nthreads <= 0)
		nthreads = np > 0 ? (int)np : 1;
	if ((size_t)nthreads > nf)
		nthreads = (int)nf;
	struct loadq q = {.r = job->ranks, .n = nf};
	atomic_init(&q.next, 0);
	nvlp_run_parallel(load_worker, &q, (size_t)nthreads);
	an_job_order(job);
	if (!job->nok) {
		snprintf(err, errlen, "no readable trace among %zu file(s): %s", nf,
		         job->ranks[0].err);
		return -1;
	}
	if (an_hosts_number(job) < 0) {
		snprintf(err, errlen, "out of memory numbering the hosts of %zu file(s)", nf);
		return -1;
	}
	return 0;
}

/* ingest.c: reads one trace file into its process's tables (one thread per file): one handler per
 * record kind, dispatched by a switch generated from NVLP_RECORD_KINDS (the kinds that come by the
 * million here, the others in ingest_meta.c); the handler checks every decoded value it uses, and
 * a record it cannot use is skipped with one warning naming file, frame and record. The files are
 * read in parallel, then ordered and numbered (order.c). */
#include <malloc.h>    /* mallopt */
#include <stdatomic.h> /* atomic_fetch_add */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, qsort */
#include <string.h>    /* strcmp */
#include <unistd.h>    /* sysconf */

#include "load/graphs.h"
#include "load/ingest.h"
#include "load/kernelch.h"
#include "load/load.h"
#include "model/model.h"
#include "nvlp_trace.h"
#include "util/containers.h"
#include "util/util.h" /* nvlp_paths_add, nvlp_run_parallel */

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

/* Call n of communicator comm (checked) appended to r->calls, its signature beside it.
 * @return 0, or -1 not kept (an_ingest_bad said why) */
static inline int keep_call(struct lctx *c, const struct nvlp_rec_nccl *n, int comm)
{
	struct an_rank *r = c->r;
	/* the signature first: csig[ncalls] is written once the call is kept */
	if (__builtin_expect(r->ncalls >= r->capcsig, 0)) {
		uint16_t *g = an_grow(r->csig, &r->capcsig, r->ncalls + 1, sizeof *r->csig);
		if (!g)
			return an_ingest_bad(c, "not kept: out of memory");
		r->csig = g;
	}
	uint16_t sig = csig_of(c, n);
	struct an_call *cl = PUSH(r->calls, r->ncalls, r->capcalls);
	if (!cl)
		return an_ingest_bad(c, "not kept: out of memory");
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
	return 0;
}

static int an_ingest_nccl(struct lctx *c)
{
	const struct nvlp_rec_nccl *n = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	unsigned fn32 = (unsigned)n->fn; /* nvlp_nccl_fn_class's argument */
	char cls = fn32 < NVLP_NCCL_FN_COUNT ? nccl_fn_cls[fn32] : '?';
	seen_time(r, n->t_enter, n->t_enter + n->dur);
	an_ingest_long_call(c, n->tid, n->t_enter, n->dur);
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
		return an_ingest_bad(c, "with device %lld", (long long)(int64_t)n->device);
	if (nranks < -1 || nranks > AN_MAX_NRANKS || rank < -1 || (nranks > 0 && rank >= nranks))
		return an_ingest_bad(c, "with rank %lld of %lld", (long long)rank, (long long)nranks);
	if (r->ncalls >= UINT32_MAX - 1)
		return an_ingest_bad(c, "beyond 4G calls");
	int comm = local_comm(c, n->comm, (int)rank, (int)nranks, (int)(int64_t)n->device);
	if (comm < 0)
		return an_ingest_bad(c, "of communicator %016llx: more than %d communicators",
		           (unsigned long long)n->comm, AN_MAX_COMMS);
	if (keep_call(c, n, comm) < 0)
		return -1;
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
static int an_ingest_ncclprof(struct lctx *c)
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

static int an_ingest_kernel(struct lctx *c)
{
	const struct nvlp_rec_kernel *k = (const void *)c->rec->f;
	if (!dev_ok(k->device))
		return an_ingest_bad(c, "with device %lld", (long long)(int64_t)k->device);
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

static int an_ingest_linksample(struct lctx *c)
{
	const struct nvlp_rec_linksample *l = (const void *)c->rec->f;
	if (an_bad_gpu_time(l->start, l->dur))
		return 0;
	if (!dev_ok(l->device))
		return an_ingest_bad(c, "with device %lld", (long long)(int64_t)l->device);
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

static int an_ingest_copy(struct lctx *c)
{
	const struct nvlp_rec_copy *cp = (const void *)c->rec->f;
	seen_time(c->r, cp->t_enter, cp->t_enter + cp->dur);
	an_ingest_long_call(c, cp->tid, cp->t_enter, cp->dur);
	int64_t sd = (int64_t)cp->src_device, dd = (int64_t)cp->dst_device;
	if ((int64_t)cp->rc != 0 || sd < 0 || dd < 0 || sd == dd)
		return 0;
	if (!dev_ok(cp->src_device) || !dev_ok(cp->dst_device))
		return an_ingest_bad(c, "with devices %lld -> %lld", (long long)sd, (long long)dd);
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

static int an_ingest_gpucopy(struct lctx *c)
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
		return an_ingest_bad(c, "with devices %lld -> %lld", (long long)(int64_t)g->src_device,
		           (long long)(int64_t)g->dst_device);
	struct an_pair *p = get_pair(c, (int)(int64_t)g->src_device, (int)(int64_t)g->dst_device);
	if (p) {
		p->p2p_copies++;
		p->p2p_bytes += g->bytes;
		p->p2p_gpu_ns += g->dur;
	}
	return 0;
}

/* ---- kernel channels and CUDA graphs: kept for kernelch.c and graphs.c ---- */
/* The hang's evidence: n channels still running on the GPU, the last of collective seq of fn */
static void kch_nostop(struct an_rank *r, uint64_t n, uint64_t seq, uint64_t fn)
{
	r->kch_nostop += n;
	r->kch_nostop_seq = seq > UINT32_MAX ? UINT32_MAX : (uint32_t)seq;
	r->kch_nostop_fn = fn < NVLP_NCCL_FN_COUNT ? (uint8_t)fn : 0;
}
static int an_ingest_kch(struct lctx *c)
{
	const struct nvlp_rec_kch *k = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	alive_at(r, k->host);
	if (k->flags & NVLP_KCH_NOSTOP)
		kch_nostop(r, 1, k->seq, k->fn);
	an_kch_on_kch(r, k);
	an_graphs_on_kch(c->r, k); /* per-execution times of captured collectives */
	return 0;
}
/* One collective's channels folded by the shim (KCOLL): as its channels' KCH records would be */
static int an_ingest_kcoll(struct lctx *c)
{
	const struct nvlp_rec_kcoll *k = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	struct an_kcoll_split x = an_kcoll_split(k);
	alive_at(r, k->host);
	if (x.nostop)
		kch_nostop(r, x.nostop, k->seq, k->fn);
	an_kch_on_kcoll(r, k, &x);
	an_graphs_on_kcoll(r, k, &x);
	return 0;
}
static int an_ingest_clock(struct lctx *c)
{
	const struct nvlp_rec_clock *k = (const void *)c->rec->f;
	alive_at(c->r, k->mono); /* heartbeats (NVLP_CLOCK_HEARTBEAT) are there for this */
	an_kch_on_clock(c->r, k);
	return 0;
}
static int an_ingest_kwindow(struct lctx *c)
{
	an_kch_on_kwindow(c->r, (const void *)c->rec->f);
	return 0;
}
static int an_ingest_graph(struct lctx *c)
{
	an_graphs_on_graph(c->r, (const void *)c->rec->f);
	return 0;
}
static int an_ingest_captured(struct lctx *c)
{
	an_graphs_on_captured(c->r, (const void *)c->rec->f);
	return 0;
}
static int an_ingest_gpugraph(struct lctx *c)
{
	an_graphs_on_gpugraph(c->r, (const void *)c->rec->f);
	return 0;
}

/* Kinds the model does not use: the reader keeps STRING texts, the rest is for dump. */
static int an_ingest_ignored(struct lctx *c)
{
	(void)c;
	return 0;
}
#define an_ingest_string an_ingest_ignored
#define an_ingest_device an_ingest_ignored

/* One handler per kind, generated from the kind list: a new kind without a handler does not
 * compile. A handler returns 0, or -1 the record was skipped (an_ingest_bad said why). A switch, not a
 * table of pointers: the compiler inlines the handlers of the kinds that come by the million
 * (an indirect call per record was 2% of an 8-rank report's instructions). */
static inline void dispatch(struct lctx *c, unsigned kind)
{
	switch (kind) {
#define AN_HANDLER(NAME, name, blob, FIELDS)                                                       \
	case NVLP_K_##NAME:                                                                        \
		an_ingest_##name(c);                                                                      \
		break;
		NVLP_RECORD_KINDS(AN_HANDLER)
#undef AN_HANDLER
	default: /* the reader hands out valid kinds only */
		break;
	}
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

/* The rank of a process read whole: its header's, else its communicators' (an_rank_guess). */
static int rank_of(const struct an_rank *r)
{
	struct an_rank_guess g;
	char buf[64], wbuf[64];
	an_rank_guess_init(&g, an_header_get(r, NVLP_HDR_RANK, buf, sizeof buf),
	                   an_header_get(r, NVLP_HDR_WORLD_SIZE, wbuf, sizeof wbuf));
	for (size_t i = 0; i < r->ncomms; i++)
		an_rank_guess_comm(&g, r->comms[i].rank, r->comms[i].nranks);
	return an_rank_guess_get(&g);
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
	r->rank = rank_of(r);
	if (!r->dropped)
		for (size_t i = 0; i < c.ndrops; i++)
			r->dropped += c.drops[i].dropped;
	an_match_close(c.m);
	finish_inflight(&c);
	free(c.longs);
	an_kch_file_end(r);
	/* what kernelch.c and graphs.c will not read (they take traces with their kinds only) */
	if (!r->kind_count[NVLP_K_KCH] && !r->kind_count[NVLP_K_KCOLL] &&
	    !r->kind_count[NVLP_K_KWINDOW])
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

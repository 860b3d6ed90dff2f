/* ingest_meta.c: the handlers of the record kinds that come a few per process: communicators set
 * up, managed memory and unified-memory events, peer access and NVLink topology, notes, stacks,
 * modules and symbols, drops, how the process ended, its step marks, the calls in flight, Python
 * chains; and the one warning per file of a record skipped (an_ingest_bad). ingest.c dispatches
 * to them. */
#include <stdarg.h> /* va_list */
#include <stdio.h>  /* snprintf, vsnprintf */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* strcmp, strndup */

#include "load/ingest.h"
#include "load/load.h"
#include "model/model.h"
#include "nvlp_trace.h"
#include "util/containers.h" /* PUSH */

int an_ingest_bad(struct lctx *c, const char *fmt, ...)
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

/* NCCLCOMM: NCCL's node count for a communicator it set up; one per communicator (a repeat of
 * a commHash, as after a fork, keeps the first). Values NCCL could not have passed are skipped. */
int an_ingest_ncclcomm(struct lctx *c)
{
	const struct nvlp_rec_ncclcomm *n = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	int64_t nnodes = (int64_t)n->nnodes, nranks = (int64_t)n->nranks, rank = (int64_t)n->rank;
	if (nranks < 1 || nranks > AN_MAX_NRANKS || rank < 0 || rank >= nranks || nnodes < 1 ||
	    nnodes > nranks)
		return an_ingest_bad(c, "with %lld nodes, rank %lld of %lld", (long long)nnodes,
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

/* ---- managed memory ---- */
static struct an_alloc *find_alloc(struct an_rank *r, uint64_t addr)
{
	long k = an_alloc_index(r, addr);
	return k < 0 ? NULL : &r->allocs[k];
}

void an_ingest_long_call(struct lctx *c, uint64_t tid, uint64_t t_enter, uint64_t dur)
{
	if (dur < LONG_CALL_NS)
		return;
	struct longcall *x = PUSH(c->longs, c->nlongs, c->caplongs);
	if (x)
		*x = (struct longcall){tid, t_enter};
}

int an_ingest_managed(struct lctx *c)
{
	const struct nvlp_rec_managed *m = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	seen_time(r, m->t_enter, m->t_enter + m->dur);
	an_ingest_long_call(c, m->tid, m->t_enter, m->dur); /* an allocation in flight returned */
	if ((int64_t)m->rc != 0)
		return 0;
	unsigned fn = nvlp_cuda_fn_base(m->fn);
	if (fn == NVLP_CUDA_MALLOC_MANAGED) {
		if (!dev_ok(m->device))
			return an_ingest_bad(c, "with device %lld", (long long)(int64_t)m->device);
		if (r->nallocs >= AN_MAX_ALLOCS)
			return an_ingest_bad(c, "beyond %d managed allocations", AN_MAX_ALLOCS);
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

int an_ingest_um(struct lctx *c)
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
			return an_ingest_bad(c, "with device %lld", (long long)(int64_t)u->dst);
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
	c->r->um_transfers++;
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

int an_ingest_peer(struct lctx *c)
{
	const struct nvlp_rec_peer *p = (const void *)c->rec->f;
	/* still enabled after "already enabled" */
	if (nvlp_cuda_fn_base(p->fn) == NVLP_CUDA_ENABLE_PEER_ACCESS && (int64_t)p->rc != 0 &&
	    (int64_t)p->rc != NVLP_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
		c->r->peer_enable_fail++;
	return 0;
}

int an_ingest_nvlink(struct lctx *c)
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
		return an_ingest_bad(c, "with devices %lld, %lld of types %llu, %llu, %llu links",
		           (long long)(int64_t)n->dev0, (long long)(int64_t)n->dev1,
		           (unsigned long long)n->type0, (unsigned long long)n->type1,
		           (unsigned long long)n->links);
	int sw = (n->flags & NVLP_NVLINK_F_NVSWITCH) != 0;
	for (size_t i = 0; i < r->nlinks; i++)
		if (r->links[i].dev0 == (int)(int64_t)n->dev0 &&
		    r->links[i].dev1 == (int)(int64_t)n->dev1 && r->links[i].type0 == (int)n->type0 &&
		    r->links[i].type1 == (int)n->type1 && r->links[i].nvswitch == sw)
			return 0;
	if (r->nlinks >= AN_MAX_LINKS)
		return an_ingest_bad(c, "beyond %d distinct links", AN_MAX_LINKS);
	struct an_link *l = PUSH(r->links, r->nlinks, c->caplinks);
	if (l) {
		l->dev0 = (int)(int64_t)n->dev0;
		l->dev1 = (int)(int64_t)n->dev1;
		l->type0 = (int)n->type0;
		l->type1 = (int)n->type1;
		l->links = n->links;
		l->bw_Bps = bw;
		l->nvswitch = sw;
	}
	return 0;
}

/* ---- process metadata ---- */
int an_ingest_note(struct lctx *c)
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

int an_ingest_stack(struct lctx *c)
{
	const struct nvlp_rec_stack *s = (const void *)c->rec->f;
	const struct nvlp_record *rec = c->rec;
	if (rec->blob_len % 8)
		return an_ingest_bad(c, "of %u bytes, not a whole number of addresses", rec->blob_len);
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

int an_ingest_module(struct lctx *c)
{
	const struct nvlp_rec_module *m = (const void *)c->rec->f;
	const struct nvlp_record *rec = c->rec;
	if (m->end < m->start)
		return an_ingest_bad(c, "ending before it starts");
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

int an_ingest_buildid(struct lctx *c)
{
	const struct nvlp_rec_buildid *b = (const void *)c->rec->f;
	const struct nvlp_record *rec = c->rec;
	if (!rec->blob_len || rec->blob_len > sizeof c->r->modules[0].build_id)
		return an_ingest_bad(c, "of %u bytes", rec->blob_len);
	an_sym_buildid(c->r, b->base, rec->blob, rec->blob_len);
	return 0;
}

int an_ingest_symbol(struct lctx *c)
{
	const struct nvlp_rec_symbol *s = (const void *)c->rec->f;
	const struct nvlp_record *rec = c->rec;
	if (!rec->blob_len || s->size > (1ull << 32))
		return an_ingest_bad(c, "of size %llu named by %u bytes", (unsigned long long)s->size,
		           rec->blob_len);
	struct an_rank *r = c->r;
	if (r->nsyms >= AN_MAX_SYMBOLS)
		return an_ingest_bad(c, "beyond %u symbols", AN_MAX_SYMBOLS);
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

int an_ingest_drops(struct lctx *c)
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

int an_ingest_end(struct lctx *c)
{
	const struct nvlp_rec_end *e = (const void *)c->rec->f;
	seen_time(c->r, e->t, e->t);
	c->r->dropped = e->dropped;
	c->r->end_reason = nvlp_end_reason_name(e->reason) ? (int)e->reason : NVLP_END_EXIT;
	return 0;
}

/* COST: what recording cost so far (cumulative); the last one is kept. */
int an_ingest_cost(struct lctx *c)
{
	const struct nvlp_rec_cost *x = (const void *)c->rec->f;
	alive_at(c->r, x->t);
	c->r->cost = *x;
	c->r->have_cost = 1;
	return 0;
}

/* EXITINFO: the signal and exit status of a process's end, written just before END. */
int an_ingest_exitinfo(struct lctx *c)
{
	const struct nvlp_rec_exitinfo *x = (const void *)c->rec->f;
	seen_time(c->r, x->t, x->t);
	int64_t sig = (int64_t)x->signal, st = (int64_t)x->status;
	c->r->end_signal = sig > 0 && sig < 128 ? (int)sig : 0;
	c->r->end_status = st >= -255 && st <= 255 ? (int)st : 0;
	c->r->have_exitinfo = 1;
	return 0;
}

int an_ingest_header(struct lctx *c)
{
	const struct nvlp_rec_header *hd = (const void *)c->rec->f;
	if (!c->r->t_mono0)
		c->r->t_mono0 = hd->t_mono;
	if (!c->r->t_real0)
		c->r->t_real0 = hd->t_real;
	return 0;
}

/* COMMNAME: a communicator's name; the first one of a hash is kept (a process names it once). */
int an_ingest_commname(struct lctx *c)
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
		return an_ingest_bad(c, "not kept: out of memory");
	x->hash = n->comm;
	size_t i = 0; /* printable only: the name goes into text tables and JSON */
	for (; s[i] && i < sizeof x->name - 1; i++)
		x->name[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	x->name[i] = 0;
	return 0;
}

int an_steps_mark(struct an_rank *r, uint64_t t, const char *name)
{
	uint64_t *m = PUSH(r->marks, r->nmarks, r->capmarks);
	if (!m)
		return -1;
	*m = t;
	if (name && !r->mark_name[0])
		snprintf(r->mark_name, sizeof r->mark_name, "%s", name);
	return 0;
}

#ifdef NVLP_FIELDS_MARK
/* MARK: torch.profiler's ProfilerStep#N ranges begin steps: as NVTX ranges (emit_nvtx), else as
 * the outermost user ranges the shim saw through CUPTI (USER_RANGE, no name; only those of the
 * thread that made the earliest, as prof.step() runs on one thread: steps.c). A capture range from
 * cudaProfilerStart/Stop is not a step. */
int an_ingest_mark(struct lctx *c)
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
			return an_ingest_bad(c, "not kept: out of memory");
		u->t = m->t;
		u->tid = m->tid;
		return 0;
	} else {
		return 0;
	}
	if (an_steps_mark(r, m->t, name) < 0)
		return an_ingest_bad(c, "not kept: out of memory");
	return 0;
}
#endif

/* INFLIGHT: a call not returned when written; per thread the latest call is kept (a later one
 * means the earlier returned), rewritten ones (the writer's, then the final flush's) update t. */
int an_ingest_inflight(struct lctx *c)
{
	const struct nvlp_rec_inflight *f = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	int nccl = f->kind == NVLP_K_NCCL;
	if ((!nccl && f->kind != NVLP_K_COPY) || f->fn >= (nccl ? NVLP_NCCL_FN_COUNT : 65536) ||
	    !dev_ok(f->device) || !f->t_enter || f->t_enter > f->t || f->seq > UINT32_MAX)
		return an_ingest_bad(c, "of kind %llu, fn %llu, device %lld, entered at %llu",
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
		return an_ingest_bad(c, "beyond %d threads in flight", AN_MAX_INFLIGHT);
	if (!x && !(x = PUSH(r->inflight, r->ninflight, r->capinflight)))
		return an_ingest_bad(c, "not kept: out of memory");
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
int an_ingest_fatal(struct lctx *c)
{
	const struct nvlp_rec_fatal *f = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	int64_t sig = (int64_t)f->signal;
	if (sig <= 0 || sig >= 128)
		return an_ingest_bad(c, "with signal %lld", (long long)sig);
	alive_at(r, f->t);
	if (r->fatal.signal)
		return 0;
	r->fatal = (struct an_fatal){
	    .signal = (int)sig, .main = f->main == 1, .tid = f->tid, .t = f->t, .stack = f->stack};
	size_t n = c->rec->blob ? c->rec->blob_len : 0, i = 0;
	for (; i < n && i < sizeof r->fatal.thread - 1; i++) { /* printable: it goes into text */
		char ch = ((const char *)c->rec->blob)[i];
		r->fatal.thread[i] = ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? ch : '?';
	}
	r->fatal.thread[i] = 0;
	return 0;
}
/* Python chains: kept as they are; findings.c joins them to the records PYREFs name. */
int an_ingest_pystack(struct lctx *c)
{
	const struct nvlp_rec_pystack *s = (const void *)c->rec->f;
	struct an_rank *r = c->r;
	if (!s->id || !c->rec->blob_len)
		return an_ingest_bad(c, "with id 0 or no frames");
	struct an_pystack *x = PUSH(r->pystacks, r->npystacks, r->cappystacks);
	if (!x)
		return an_ingest_bad(c, "not kept: out of memory");
	x->id = s->id;
	if (!(x->text = strndup((const char *)c->rec->blob, c->rec->blob_len)))
		r->npystacks--;
	return 0;
}

int an_ingest_pyref(struct lctx *c)
{
	const struct nvlp_rec_pyref *p = (const void *)c->rec->f;
	if (p->kind >= NVLP_K_COUNT)
		return an_ingest_bad(c, "naming kind %llu", (unsigned long long)p->kind);
	alive_at(c->r, p->t);
	struct an_pyref *x = PUSH(c->r->pyrefs, c->r->npyrefs, c->r->cappyrefs);
	if (!x)
		return an_ingest_bad(c, "not kept: out of memory");
	*x = (struct an_pyref){p->tid, p->t, p->call_id, p->pystack, (unsigned)p->kind};
	return 0;
}

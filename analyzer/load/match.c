/* match.c: gives each NCCL kernel of a process to the call (or the calls of a group) that launched
 * it: per stream, in launch order, tolerating CUPTI's out-of-order delivery. */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memset, memmove */

#include "model/model.h"
#include "model/stages.h"

struct unit { /* one kernel launch expected: a call, or the calls of a group on one stream */
	uint32_t first, n;
	uint32_t *list; /* n > 1: call indices */
	uint32_t mask;  /* an_coll bits of its calls */
	uint32_t skips; /* kernels of other collectives matched to later units meanwhile */
	uint64_t t;     /* launch order: t_enter (a group: its last call) */
};
struct pkern {
	uint64_t s, e, seq; /* seq: arrival order */
};
struct kfifo { /* waiting kernels of one collective (index 0: NCCL kernels of unknown kind) */
	struct pkern *k;
	size_t h, n, cap;
};
/* Pending units (sorted by launch time) and pending kernels (per collective, in arrival order) of
 * one stream. Both may be pending at once: a process's records interleave threads, and CUPTI
 * delivers kernel records out of order (seen: a stream's first AllReduce kernel after the two
 * Broadcasts that followed it), so a kernel may wait for a call written later, and a call for a
 * late kernel. Within one collective, kernels and calls keep their order. */
struct squeue {
	int dev;
	uint64_t stream;
	struct unit *u;
	size_t uh, un, ucap;
	struct kfifo kf[AN_C_COUNT];
	size_t kpend;    /* kernels waiting, all collectives */
	uint64_t kseq;   /* kernels seen */
	uint64_t tmatch; /* latest launch time of a unit given a kernel */
};
#define MATCH_UWIN 64    /* pending units looked at for a kernel */
#define MATCH_KMAX 65536 /* pending kernels kept per stream; the oldest beyond are dropped */
#define MATCH_SKIPS 256  /* a unit passed over this often launched no kernel we will see */
#define MATCH_SORT 256   /* how far back a late unit is moved to its launch order */
/* Pending calls kept per stream: CUPTI delivers kernels in buffers (flushed every 10 s by
 * default), so calls may wait long, but not unboundedly (a trace of calls whose kernels never
 * come, e.g. CUPTI off, would otherwise hold every call twice). The oldest beyond are given up. */
#define MATCH_UMAX (1u << 18)
struct gcall {
	uint32_t idx;
	uint64_t cs;
};
struct tgroup {
	uint64_t tid;
	int depth;
	struct gcall *c;
	size_t n, cap;
};

struct an_match {
	struct an_rank *r;
	struct squeue *q;
	size_t nq, capq;
	struct an_index qix; /* (dev, stream) -> q */
	struct tgroup *g;
	size_t ng, capg;
	struct an_index gix; /* tid -> g */
	long lastq, lastg;   /* the latest found: most records name the same stream and thread */
	/* Until the process's first NCCL kernel, single calls are only logged (8 bytes each, not a
	 * 32-byte unit in a sorted queue): with no kernel waiting, queueing them has no effect yet,
	 * so replaying the log in order at the first kernel (or group unit) builds the same queues;
	 * a trace without NCCL kernels (CUPTI off, NCCL-only) never pays for the queues. */
	int live;
	/* runs of calls idx, idx + 1, ... idx + n - 1 on one stream: a trace without kernels logs
	 * a few runs, not 8 bytes per call */
	struct dcall {
		uint32_t idx, n, cs; /* cs: index into dcs */
	} *d;
	size_t nd, capd;
	uint64_t *dcs; /* distinct stream ids of the logged calls */
	size_t ndcs, capdcs, lastd;
};
#define MATCH_MAXQ 4096 /* streams per process; kernels and calls of more are not matched */


static struct squeue *get_q(struct an_match *c, int dev, uint64_t stream, int create)
{
	if (c->lastq >= 0 && c->q[c->lastq].dev == dev && c->q[c->lastq].stream == stream)
		return &c->q[c->lastq];
	long i = an_index_get(&c->qix, (uint64_t)(int64_t)dev, stream);
	if (i >= 0) {
		c->lastq = i;
		return &c->q[i];
	}
	if (!create || c->nq >= MATCH_MAXQ)
		return NULL;
	struct squeue *q = PUSH(c->q, c->nq, c->capq);
	if (!q)
		return NULL;
	if (an_index_put(&c->qix, (uint64_t)(int64_t)dev, stream, (uint32_t)(c->nq - 1)) < 0) {
		c->nq--;
		return NULL;
	}
	memset(q, 0, sizeof *q);
	q->dev = dev;
	q->stream = stream;
	return q;
}

static uint32_t unit_call(const struct unit *u, uint32_t i)
{
	return u->n > 1 ? u->list[i] : u->first;
}

static int compat(uint32_t mask, int kcoll)
{
	return kcoll <= 0 || (mask & (1u << kcoll));
}

/* Give a kernel's time to the calls of a unit: a group's kernel is split by bytes, laid end to end.
 * s == 0: the kernel never finished; its calls keep no GPU time (hang analysis uses host time). */
static void assign(struct an_rank *r, struct unit *u, uint64_t s, uint64_t e)
{
	if (!s) {
		r->gpu_unfinished += u->n;
		free(u->list);
		u->list = NULL;
		return;
	}
	uint64_t total = 0, dur = e > s ? e - s : 0;
	for (uint32_t i = 0; i < u->n; i++)
		total += r->calls[unit_call(u, i)].bytes;
	uint64_t at = s;
	for (uint32_t i = 0; i < u->n; i++) {
		struct an_call *cl = &r->calls[unit_call(u, i)];
		/* a share of dur; a corrupt trace's byte counts can wrap total below one call's
		 * bytes, so the share is capped at the whole (not a double past 2^64 cast) */
		double f = total ? (double)dur * cl->bytes / total : 0;
		uint64_t part = !total ? dur / u->n : f >= (double)dur ? dur : (uint64_t)f;
		cl->gpu_start = at ? at : 1;
		cl->gpu_dur = part > UINT32_MAX ? UINT32_MAX : (uint32_t)part;
		at += part;
	}
	free(u->list);
	u->list = NULL;
}

/* Give a kernel to the earliest pending unit of q (in launch order) whose collective agrees.
 * Units passed over keep waiting (their kernels may come later, CUPTI does not deliver in order)
 * until they were passed over MATCH_SKIPS times: then they launched no kernel we will see. */
static int match_kernel(struct an_match *c, struct squeue *q, uint64_t s, uint64_t e, int kcoll)
{
	size_t avail = q->un - q->uh;
	for (size_t j = 0; j < avail && j < MATCH_UWIN; j++) {
		struct unit *u = &q->u[q->uh + j];
		if (!compat(u->mask, kcoll))
			continue;
		struct unit m = *u;
		/* close the gap, keeping the passed-over units that still wait, in order */
		size_t w = q->uh + j + 1;
		for (size_t k = j; k-- > 0;) {
			struct unit *x = &q->u[q->uh + k];
			if (++x->skips > MATCH_SKIPS) {
				free(x->list);
				c->r->gpu_resync++;
				continue;
			}
			q->u[--w] = *x;
		}
		q->uh = w;
		if (m.t > q->tmatch)
			q->tmatch = m.t;
		assign(c->r, &m, s, e);
		if (q->uh == q->un)
			q->uh = q->un = 0;
		return 1;
	}
	return 0;
}

/* The earliest waiting kernel a unit of these an_coll bits may take (unknown kinds: any). */
static struct kfifo *oldest_kernel(struct squeue *q, uint32_t mask)
{
	struct kfifo *best = NULL;
	for (int i = 0; i < AN_C_COUNT; i++) {
		struct kfifo *f = &q->kf[i];
		if (f->h < f->n && (i == 0 || (mask & (1u << i))) &&
		    (!best || f->k[f->h].seq < best->k[best->h].seq))
			best = f;
	}
	return best;
}

static void kfifo_pop(struct squeue *q, struct kfifo *f)
{
	f->h++;
	if (f->h == f->n)
		f->h = f->n = 0;
	q->kpend--;
}

static void on_nccl_kernel(struct an_match *c, int dev, uint64_t stream, uint64_t s, uint64_t e,
                           int kcoll)
{
	struct squeue *q = get_q(c, dev, stream, 1);
	if (!q)
		return;
	if (q->un > q->uh) {
		if (match_kernel(c, q, s, e, kcoll))
			return;
	} else {
		struct squeue *q0 = get_q(c, dev, 0, 0); /* calls recorded without a stream id */
		if (q0 && q0->un > q0->uh && match_kernel(c, q0, s, e, kcoll))
			return;
	}
	/* no call yet: wait for it (bounded: the oldest waiting kernel is given up) */
	if (q->kpend >= MATCH_KMAX) {
		struct kfifo *o = oldest_kernel(q, ~0u);
		if (o) {
			kfifo_pop(q, o);
			c->r->gpu_unmatched_kernels++;
		}
	}
	struct kfifo *f = &q->kf[kcoll > 0 && kcoll < AN_C_COUNT ? kcoll : 0];
	if (f->h > 1024 && f->h * 2 > f->n) {
		memmove(f->k, f->k + f->h, (f->n - f->h) * sizeof *f->k);
		f->n -= f->h;
		f->h = 0;
	}
	struct pkern *k = PUSH(f->k, f->n, f->cap);
	if (k) {
		k->s = s;
		k->e = e;
		k->seq = q->kseq++;
		q->kpend++;
	}
}

/* Give u the earliest waiting kernel of q it may take. @return 1 if it took one */
static int take_oldest(struct an_match *c, struct squeue *q, struct unit *u)
{
	struct kfifo *f = oldest_kernel(q, u->mask);
	if (!f)
		return 0;
	assign(c->r, u, f->k[f->h].s, f->k[f->h].e);
	kfifo_pop(q, f);
	return 1;
}

static void push_unit(struct an_match *c, int dev, uint64_t cs, struct unit *u);

/* Queue the logged calls, in their order, and queue from now on. */
static void go_live(struct an_match *c)
{
	c->live = 1;
	for (size_t i = 0; i < c->nd; i++)
		for (uint32_t j = 0; j < c->d[i].n; j++) {
			uint32_t idx = c->d[i].idx + j;
			const struct an_call *cl = &c->r->calls[idx];
			struct unit u = {.first = idx, .n = 1, .mask = 1u << an_coll_of_fn(cl->fn),
			                 .t = cl->t_enter};
			push_unit(c, cl->device, c->dcs[c->d[i].cs], &u);
		}
	free(c->d);
	free(c->dcs);
	c->d = NULL;
	c->dcs = NULL;
	c->nd = c->capd = c->ndcs = c->capdcs = 0;
}

/* Log a single call while no kernel came. @return 0 if logged */
static int defer_call(struct an_match *c, uint32_t idx, uint64_t cs)
{
	size_t k = c->lastd;
	if (k >= c->ndcs || c->dcs[k] != cs) {
		for (k = 0; k < c->ndcs && c->dcs[k] != cs; k++)
			;
		if (k == c->ndcs) {
			if (c->ndcs >= 64) /* many streams: the linear look-up would cost more */
				return -1;
			uint64_t *x = PUSH(c->dcs, c->ndcs, c->capdcs);
			if (!x)
				return -1;
			*x = cs;
		}
		c->lastd = k;
	}
	struct dcall *l = c->nd ? &c->d[c->nd - 1] : NULL;
	if (l && l->cs == k && (uint64_t)l->idx + l->n == idx) {
		l->n++;
		return 0;
	}
	struct dcall *x = PUSH(c->d, c->nd, c->capd);
	if (!x)
		return -1;
	*x = (struct dcall){idx, 1, (uint32_t)k};
	return 0;
}

static void push_unit(struct an_match *c, int dev, uint64_t cs, struct unit *u)
{
	if (!c->live)
		go_live(c);
	/* Kernels may arrive first (CUPTI buffers flushed before the API records): match the
	 * earliest waiting one of its collective now; the others keep waiting for their calls. */
	struct squeue *q;
	if (cs) { /* one lookup: the queue the unit waits in if no kernel is waiting for it */
		q = get_q(c, dev, cs, 1);
		if (q && q->kpend && take_oldest(c, q, u))
			return;
	} else { /* a call without a stream id: a kernel waiting on any stream of its GPU */
		for (size_t i = 0; i < c->nq; i++)
			if (c->q[i].dev == dev && c->q[i].kpend && take_oldest(c, &c->q[i], u))
				return;
		q = get_q(c, dev, cs, 1);
	}
	if (q && q->un - q->uh >= MATCH_UMAX) { /* give up the oldest call: it keeps host time */
		struct unit *o = &q->u[q->uh++];
		if (o->t < q->tmatch)
			c->r->gpu_resync++;
		free(o->list);
	}
	if (q && q->uh > 1024 && q->uh * 2 > q->un) {
		memmove(q->u, q->u + q->uh, (q->un - q->uh) * sizeof *q->u);
		q->un -= q->uh;
		q->uh = 0;
	}
	struct unit *x = q ? PUSH(q->u, q->un, q->ucap) : NULL;
	if (!x) {
		free(u->list);
		return;
	}
	/* a call of a thread whose records came late: put it back in launch order */
	u->skips = 0;
	size_t at = q->un - 1;
	while (at > q->uh && q->un - 1 - at < MATCH_SORT && q->u[at - 1].t > u->t) {
		q->u[at] = q->u[at - 1];
		at--;
	}
	q->u[at] = *u;
}

static struct tgroup *get_group(struct an_match *c, uint64_t tid, int create)
{
	if (c->lastg >= 0 && c->g[c->lastg].tid == tid)
		return &c->g[c->lastg];
	if (!c->ng && !create)
		return NULL;
	long i = an_index_get(&c->gix, tid, 0);
	if (i >= 0) {
		c->lastg = i;
		return &c->g[i];
	}
	if (!create)
		return NULL;
	struct tgroup *g = PUSH(c->g, c->ng, c->capg);
	if (!g)
		return NULL;
	if (an_index_put(&c->gix, tid, 0, (uint32_t)(c->ng - 1)) < 0) {
		c->ng--;
		return NULL;
	}
	memset(g, 0, sizeof *g);
	g->tid = tid;
	return g;
}

/* The outermost ncclGroupEnd launches one kernel per stream for the grouped calls: one unit per
 * (device, stream), in the order of its first call, built in one pass over the group. */
struct gunit {
	struct unit u;
	int dev;
	uint64_t cs;
};
/* Which unit each call of a group goes to (cls), the units in the order of their first call.
 * A small group (the usual pair or handful) looks its units up in place: no index, no
 * allocation (flush_group's mallocs, frees and index were 5% of loading an 8-rank job).
 * @return the units, gu_small or allocated; NULL out of memory */
#define GROUP_SMALL 16
static struct gunit *group_units(const struct an_rank *r, const struct tgroup *g, uint32_t *cls,
                                 struct gunit *gu_small, size_t *ngu)
{
	int small = g->n <= GROUP_SMALL;
	struct an_index ix = {0};
	struct gunit *gu = small ? gu_small : NULL;
	size_t capgu = small ? GROUP_SMALL : 0;
	*ngu = 0;
	for (size_t i = 0; i < g->n; i++) {
		const struct an_call *cl = &r->calls[g->c[i].idx];
		long k = -1;
		if (small) {
			for (size_t j = 0; j < *ngu && k < 0; j++)
				if (gu[j].dev == cl->device && gu[j].cs == g->c[i].cs)
					k = (long)j;
		} else
			k = an_index_get(&ix, (uint64_t)(int64_t)cl->device, g->c[i].cs);
		if (k < 0) {
			struct gunit *x = PUSH(gu, *ngu, capgu);
			if (!x || (!small && an_index_put(&ix, (uint64_t)(int64_t)cl->device,
			                                  g->c[i].cs, (uint32_t)(*ngu - 1)) < 0)) {
				if (!small)
					free(gu);
				an_index_free(&ix);
				return NULL;
			}
			memset(x, 0, sizeof *x);
			x->u.first = g->c[i].idx;
			x->dev = cl->device;
			x->cs = g->c[i].cs;
			k = (long)(*ngu - 1);
		}
		cls[i] = (uint32_t)k;
		gu[k].u.n++;
	}
	an_index_free(&ix);
	return gu;
}

static void flush_group(struct an_match *c, struct tgroup *g)
{
	struct an_rank *r = c->r;
	struct gunit gu_small[GROUP_SMALL];
	uint32_t cls_small[GROUP_SMALL];
	size_t ngu = 0;
	uint32_t *cls = g->n <= GROUP_SMALL ? cls_small : malloc(g->n * sizeof *cls);
	struct gunit *gu = cls ? group_units(r, g, cls, gu_small, &ngu) : NULL;
	if (!gu) { /* out of memory: each call its own unit */
		for (size_t i = 0; i < g->n; i++) {
			const struct an_call *cl = &r->calls[g->c[i].idx];
			struct unit u = {.first = g->c[i].idx, .n = 1,
			                 .mask = 1u << an_coll_of_fn(cl->fn), .t = cl->t_enter};
			push_unit(c, cl->device, g->c[i].cs, &u);
		}
		ngu = 0;
	}
	for (size_t k = 0; k < ngu; k++) {
		struct unit *u = &gu[k].u;
		u->list = u->n > 1 ? malloc(u->n * sizeof *u->list) : NULL;
		if (u->n > 1 && !u->list) { /* out of memory: the unit keeps its first call only */
			u->n = 1;
			u->mask = 1u << an_coll_of_fn(r->calls[u->first].fn);
			u->t = r->calls[u->first].t_enter;
		} else
			u->n = 0;
	}
	for (size_t i = 0; gu && i < g->n; i++) {
		struct unit *u = &gu[cls[i]].u;
		uint32_t idx = g->c[i].idx;
		if (!u->list && u->n) /* its first call only (see above) */
			continue;
		if (u->list)
			u->list[u->n] = idx;
		u->n++;
		u->mask |= 1u << an_coll_of_fn(r->calls[idx].fn);
		if (r->calls[idx].t_enter > u->t)
			u->t = r->calls[idx].t_enter;
	}
	for (size_t k = 0; k < ngu; k++)
		push_unit(c, gu[k].dev, gu[k].cs, &gu[k].u);
	if (cls != cls_small)
		free(cls);
	if (gu != gu_small)
		free(gu);
	g->n = 0;
}

struct an_match *an_match_open(struct an_rank *r)
{
	struct an_match *m = calloc(1, sizeof *m);
	if (m) {
		m->r = r;
		m->lastq = m->lastg = -1;
	}
	return m;
}

void an_match_group(struct an_match *c, uint64_t tid, int start)
{
	struct tgroup *g = get_group(c, tid, 1);
	if (!g)
		return;
	if (start)
		g->depth++;
	else if (--g->depth <= 0) {
		g->depth = 0;
		flush_group(c, g);
	}
}

void an_match_call(struct an_match *c, uint32_t idx, uint64_t tid, uint64_t group_depth,
                   uint64_t cs)
{
	const struct an_call *cl = &c->r->calls[idx];
	/* a thread not seen in a group, and not saying it is in one, needs no group of its own */
	struct tgroup *g = group_depth > 0 || c->ng ? get_group(c, tid, group_depth > 0) : NULL;
	if (g && group_depth > 0 && g->depth == 0) /* group start not recorded: trust the call */
		g->depth = group_depth > 1024 ? 1024 : (int)group_depth;
	if (g && g->depth > 0) {
		struct gcall *x = PUSH(g->c, g->n, g->cap);
		if (x) {
			x->idx = idx;
			x->cs = cs;
		}
		return;
	}
	if (!c->live && defer_call(c, idx, cs) == 0)
		return;
	struct unit u = {.first = idx, .n = 1, .mask = 1u << an_coll_of_fn(cl->fn), .t = cl->t_enter};
	push_unit(c, cl->device, cs, &u);
}

void an_match_kernel(struct an_match *c, int dev, uint64_t stream, uint64_t s, uint64_t e,
                     int kcoll)
{
	if (!c->live)
		go_live(c);
	on_nccl_kernel(c, dev, stream, s, e, kcoll);
}

void an_match_close(struct an_match *c)
{
	if (!c)
		return;
	struct an_rank *r = c->r;
	/* groups never closed, and units never given a kernel: their calls keep host time only.
	 * No kernel came (still logging): queueing them now would change nothing. */
	for (size_t i = 0; i < c->ng; i++) {
		if (c->live)
			flush_group(c, &c->g[i]);
		free(c->g[i].c);
	}
	free(c->d);
	free(c->dcs);
	for (size_t i = 0; i < c->nq; i++) {
		for (size_t j = c->q[i].uh; j < c->q[i].un; j++) {
			/* launched before a call that got its kernel: it launched none we saw */
			if (c->q[i].u[j].t < c->q[i].tmatch)
				r->gpu_resync++;
			free(c->q[i].u[j].list);
		}
		r->gpu_unmatched_kernels += c->q[i].kpend;
		free(c->q[i].u);
		for (int k = 0; k < AN_C_COUNT; k++)
			free(c->q[i].kf[k].k);
	}
	free(c->q);
	free(c->g);
	an_index_free(&c->qix);
	an_index_free(&c->gix);
	free(c);
}

/* model.c: loads a job's traces (one thread per file), matches NCCL kernels to calls, aligns hosts,
 * attributes time. */
#include "kernelch.h"
#include "model.h"

#include <elf.h>       /* Elf64_Ehdr, Elf64_Sym */
#include <errno.h>     /* errno */
#include <fcntl.h>     /* open */
#include <malloc.h>    /* mallopt */
#include <pthread.h>   /* pthread_create */
#include <stdatomic.h> /* atomic_fetch_add */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, qsort */
#include <string.h>    /* strcmp */
#include <sys/mman.h>  /* mmap */
#include <sys/stat.h>  /* stat */
#include <unistd.h>    /* sysconf */

#include "nvlp_trace.h"
#include "util.h"

/* ---- thresholds ---- */
const char *const an_threshold_names[AN_TH_COUNT] = {
#define AN_T_NAME(name, def, doc) #name,
    AN_THRESHOLDS(AN_T_NAME)
#undef AN_T_NAME
};
const char *const an_threshold_docs[AN_TH_COUNT] = {
#define AN_T_DOC(name, def, doc) doc,
    AN_THRESHOLDS(AN_T_DOC)
#undef AN_T_DOC
};
const double an_threshold_defaults[AN_TH_COUNT] = {
#define AN_T_DEF(name, def, doc) def,
    AN_THRESHOLDS(AN_T_DEF)
#undef AN_T_DEF
};

int an_threshold_set(double *th, const char *assign)
{
	const char *eq = strchr(assign, '=');
	if (!eq)
		return -1;
	for (int i = 0; i < AN_TH_COUNT; i++) {
		size_t n = strlen(an_threshold_names[i]);
		if ((size_t)(eq - assign) == n && !strncmp(assign, an_threshold_names[i], n)) {
			char *end;
			double v = strtod(eq + 1, &end);
			if (end == eq + 1 || *end)
				return -1;
			th[i] = v;
			return 0;
		}
	}
	return -1;
}

/* ---- collective kinds ---- */
static const char *const coll_names[AN_C_COUNT] = {
    "?", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv"};
const char *an_coll_name(int c)
{
	return c > 0 && c < AN_C_COUNT ? coll_names[c] : "?";
}

int an_coll_of_fn(unsigned fn)
{
	switch (fn) {
	case NVLP_NCCL_ALL_REDUCE:
		return AN_C_ALLREDUCE;
	case NVLP_NCCL_ALL_GATHER:
		return AN_C_ALLGATHER;
	case NVLP_NCCL_REDUCE_SCATTER:
		return AN_C_REDUCESCATTER;
	case NVLP_NCCL_BROADCAST:
	case NVLP_NCCL_BCAST:
		return AN_C_BROADCAST;
	case NVLP_NCCL_REDUCE:
		return AN_C_REDUCE;
	case NVLP_NCCL_SEND:
	case NVLP_NCCL_RECV:
	case NVLP_NCCL_ALL_TO_ALL:
	case NVLP_NCCL_GATHER:
	case NVLP_NCCL_SCATTER:
		return AN_C_SENDRECV;
	default:
		return AN_C_NONE;
	}
}

int an_coll_of_kernel(const char *name)
{
	const char *p;
	if (!name)
		return 0;
	/* CUPTI gives mangled names ("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDev..."):
	 * look for the marker anywhere near the start, not only as a prefix. */
	if ((p = strstr(name, "ncclDevKernel_")) && p - name < 16)
		p += 14;
	else if ((p = strstr(name, "ncclKernel_")) && p - name < 16)
		p += 11;
	else
		return (p = strstr(name, "nccl")) && p - name < 16 ? -1 : 0;
	/* Longest names first: "Reduce" is a prefix of "ReduceScatter". */
	static const struct {
		const char *s;
		int c;
	} tab[] = {
	    {"ReduceScatter", AN_C_REDUCESCATTER}, {"AllReduce", AN_C_ALLREDUCE},
	    {"AllGather", AN_C_ALLGATHER},         {"Broadcast", AN_C_BROADCAST},
	    {"SendRecv", AN_C_SENDRECV},           {"Reduce", AN_C_REDUCE},
	};
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
		if (!strncmp(p, tab[i].s, strlen(tab[i].s)))
			return tab[i].c;
	return -1;
}

double an_busbw_factor(unsigned fn, int n)
{
	if (n < 1)
		return 1;
	switch (fn) {
	case NVLP_NCCL_ALL_REDUCE:
		return 2.0 * (n - 1) / n;
	case NVLP_NCCL_REDUCE_SCATTER:
	case NVLP_NCCL_ALL_GATHER:
	case NVLP_NCCL_ALL_TO_ALL:
		return (double)(n - 1) / n;
	default:
		return 1;
	}
}

int an_size_class(uint64_t b)
{
	if (b < (64u << 10))
		return 0;
	if (b < (1u << 20))
		return 1;
	if (b < (16u << 20))
		return 2;
	if (b < (256u << 20))
		return 3;
	return 4;
}
const char *an_size_class_name(int c)
{
	static const char *const n[AN_SIZE_CLASSES] = {"<64K", "64K-1M", "1M-16M", "16M-256M",
	                                               ">=256M"};
	return c >= 0 && c < AN_SIZE_CLASSES ? n[c] : "?";
}

/* ---- small growable arrays ---- */
static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *q;
	size_t bytes = nc * elem;
	if (bytes >= (4u << 20)) {
		/* Big per-rank arrays: first-touch page faults dominated loading (VMs make them
		 * dear); 2 MiB-aligned blocks let the kernel back them with transparent huge pages.
		 */
		if (posix_memalign(&q, 2u << 20, bytes))
			return NULL;
		madvise(q, bytes, MADV_HUGEPAGE);
		if (p)
			memcpy(q, p, *cap * elem);
		free(p);
	} else if (!(q = realloc(p, bytes)))
		return NULL;
	*cap = nc;
	return q;
}
#define PUSH(arr, n, cap)                                                                          \
	((arr) = grow((arr), &(cap), (n) + 1, sizeof *(arr)), (arr) ? &(arr)[(n)++] : NULL)

static void ivals_push(struct an_ivals *iv, uint64_t s, uint64_t e)
{
	/* Only the union is ever used: an interval overlapping the last one (back-to-back kernels,
	 * concurrent streams) widens it instead of taking memory. */
	if (iv->n) {
		struct an_ival *l = &iv->v[iv->n - 1];
		if (s <= l->e && e >= l->s) {
			if (s < l->s)
				l->s = s;
			if (e > l->e)
				l->e = e;
			return;
		}
	}
	struct an_ival *x = PUSH(iv->v, iv->n, iv->cap);
	if (x) {
		x->s = s;
		x->e = e;
	}
}

/* ---- per-file loading state (only what matching needs; freed after the file) ---- */
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
struct tdrop {
	uint64_t tid, dropped;
};
struct lctx {
	struct an_rank *r;
	nvlp_reader *rd;
	struct squeue *q;
	size_t nq, capq;
	struct tgroup *g;
	size_t ng, capg;
	int8_t *scls; /* per string id: an_coll_of_kernel + 2, 0 = not looked up */
	size_t nscls;
	struct tdrop *drops;
	size_t ndrops, capdrops;
	size_t capdevs, cappairs, capallocs, capnotes, caplinks, capmods, capstacks, capcomms;
	size_t capchoices;
	int lastdev;
};

/* NCCLPROF: count the choice; the distinct ones of a process are few (a linear scan). */
static void on_choice(struct lctx *c, const struct nvlp_rec_ncclprof *p)
{
	struct an_rank *r = c->r;
	const char *algo = p->algo ? nvlp_reader_string(c->rd, p->algo) : NULL;
	const char *proto = p->proto ? nvlp_reader_string(c->rd, p->proto) : NULL;
	if (!algo)
		algo = "?";
	if (!proto)
		proto = "?";
	int fn = p->fn < NVLP_NCCL_FN_COUNT ? (int)p->fn : 0;
	for (size_t i = 0; i < r->nchoices; i++) {
		struct an_choice *x = &r->choices[i];
		if (x->nccl_comm == p->nccl_comm && x->fn == fn && x->channels == (int)p->channels &&
		    !strcmp(x->algo, algo) && !strcmp(x->proto, proto)) {
			x->calls++;
			if (!x->comm)
				x->comm = p->comm;
			return;
		}
	}
	if (r->nchoices >= 4096)
		return;
	struct an_choice *x = PUSH(r->choices, r->nchoices, c->capchoices);
	if (!x)
		return;
	memset(x, 0, sizeof *x);
	x->nccl_comm = p->nccl_comm;
	x->comm = p->comm;
	x->fn = (uint8_t)fn;
	snprintf(x->algo, sizeof x->algo, "%s", algo);
	snprintf(x->proto, sizeof x->proto, "%s", proto);
	x->channels = (int)p->channels;
	x->warps = (int)p->warps;
	x->calls = 1;
}

static struct an_dev *get_dev(struct lctx *c, int device)
{
	struct an_rank *r = c->r;
	if (c->lastdev >= 0 && r->devs[c->lastdev].device == device)
		return &r->devs[c->lastdev];
	for (size_t i = 0; i < r->ndevs; i++)
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

static struct squeue *get_q(struct lctx *c, int dev, uint64_t stream, int create)
{
	for (size_t i = 0; i < c->nq; i++)
		if (c->q[i].dev == dev && c->q[i].stream == stream)
			return &c->q[i];
	if (!create)
		return NULL;
	struct squeue *q = PUSH(c->q, c->nq, c->capq);
	if (q) {
		memset(q, 0, sizeof *q);
		q->dev = dev;
		q->stream = stream;
	}
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

/* GPU records of work that never ran or never finished (job hung or killed) come with start
 * 0 or ~0 (-1 converted), or an end before the start: they carry no time. */
static inline int bad_gpu_time(uint64_t s, uint64_t d)
{
	return s == 0 || s > (1ull << 62) || d > 86400ull * 1000000000ull;
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
		uint64_t part = total ? (uint64_t)((double)dur * cl->bytes / total) : dur / u->n;
		cl->gpu_start = at ? at : 1;
		cl->gpu_dur = part > UINT32_MAX ? UINT32_MAX : (uint32_t)part;
		at += part;
	}
	r->gpu_matched += u->n;
	free(u->list);
	u->list = NULL;
}

/* Give a kernel to the earliest pending unit of q (in launch order) whose collective agrees.
 * Units passed over keep waiting (their kernels may come later, CUPTI does not deliver in order)
 * until they were passed over MATCH_SKIPS times: then they launched no kernel we will see. */
static int match_kernel(struct lctx *c, struct squeue *q, uint64_t s, uint64_t e, int kcoll)
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

static void on_nccl_kernel(struct lctx *c, int dev, uint64_t stream, uint64_t s, uint64_t e,
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

static void push_unit(struct lctx *c, int dev, uint64_t cs, struct unit *u)
{
	/* Kernels may arrive first (CUPTI buffers flushed before the API records): match the
	 * earliest waiting one of its collective now; the others keep waiting for their calls. */
	for (size_t i = 0; i < c->nq; i++) {
		struct squeue *q = &c->q[i];
		if (q->dev != dev || (cs && q->stream != cs) || !q->kpend)
			continue;
		struct kfifo *f = oldest_kernel(q, u->mask);
		if (f) {
			assign(c->r, u, f->k[f->h].s, f->k[f->h].e);
			kfifo_pop(q, f);
			return;
		}
		if (cs)
			break;
	}
	struct squeue *q = get_q(c, dev, cs, 1);
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

static struct tgroup *get_group(struct lctx *c, uint64_t tid)
{
	for (size_t i = 0; i < c->ng; i++)
		if (c->g[i].tid == tid)
			return &c->g[i];
	struct tgroup *g = PUSH(c->g, c->ng, c->capg);
	if (g) {
		memset(g, 0, sizeof *g);
		g->tid = tid;
	}
	return g;
}

/* The outermost ncclGroupEnd launches one kernel per stream for the grouped calls. */
static void flush_group(struct lctx *c, struct tgroup *g)
{
	struct an_rank *r = c->r;
	for (size_t i = 0; i < g->n; i++) {
		if (g->c[i].idx == UINT32_MAX)
			continue;
		struct an_call *first = &r->calls[g->c[i].idx];
		struct unit u = {.first = g->c[i].idx, .n = 0};
		size_t cnt = 0;
		for (size_t j = i; j < g->n; j++)
			if (g->c[j].idx != UINT32_MAX && g->c[j].cs == g->c[i].cs &&
			    r->calls[g->c[j].idx].device == first->device)
				cnt++;
		u.list = cnt > 1 ? malloc(cnt * sizeof *u.list) : NULL;
		if (cnt > 1 && !u.list)
			cnt = 1;
		int dev = first->device;
		uint64_t cs = g->c[i].cs;
		for (size_t j = i; j < g->n && u.n < cnt; j++) {
			if (g->c[j].idx == UINT32_MAX || g->c[j].cs != cs ||
			    r->calls[g->c[j].idx].device != dev)
				continue;
			uint32_t idx = g->c[j].idx;
			if (u.list)
				u.list[u.n] = idx;
			u.n++;
			u.mask |= 1u << an_coll_of_fn(r->calls[idx].fn);
			if (r->calls[idx].t_enter > u.t)
				u.t = r->calls[idx].t_enter;
			g->c[j].idx = UINT32_MAX;
		}
		push_unit(c, dev, cs, &u);
	}
	g->n = 0;
}

static uint16_t local_comm(struct lctx *c, uint64_t hash, int rank, int nranks, int device)
{
	struct an_rank *r = c->r;
	for (size_t i = 0; i < r->ncomms; i++) /* one process may hold several ranks of a comm */
		if (r->comms[i].hash == hash && r->comms[i].rank == rank)
			return (uint16_t)i;
	struct an_rcomm *x = PUSH(r->comms, r->ncomms, c->capcomms);
	if (!x)
		return 0;
	x->hash = hash;
	x->rank = rank;
	x->nranks = nranks;
	x->device = device;
	return (uint16_t)(r->ncomms - 1);
}

static inline void seen_time(struct an_rank *r, uint64_t s, uint64_t e)
{
	if (!s)
		return;
	if (s < r->t_first || !r->t_first)
		r->t_first = s;
	if (e > r->t_last)
		r->t_last = e;
}

static void on_nccl(struct lctx *c, const struct nvlp_rec_nccl *n)
{
	struct an_rank *r = c->r;
	char cls = nvlp_nccl_fn_class((unsigned)n->fn);
	seen_time(r, n->t_enter, n->t_enter + n->dur);
	if (cls == 'G') {
		struct tgroup *g = get_group(c, n->tid);
		if (!g)
			return;
		if (n->fn == NVLP_NCCL_GROUP_START)
			g->depth++;
		else if (n->fn == NVLP_NCCL_GROUP_END && --g->depth <= 0) {
			g->depth = 0;
			flush_group(c, g);
		}
		return;
	}
	if ((cls != 'C' && cls != 'P') || (int64_t)n->rc != 0)
		return;
	struct an_call *cl = PUSH(r->calls, r->ncalls, r->capcalls);
	if (!cl)
		return;
	uint32_t idx = (uint32_t)(r->ncalls - 1);
	cl->t_enter = n->t_enter;
	cl->bytes = n->bytes;
	cl->gpu_start = 0;
	cl->gpu_dur = 0;
	cl->host_dur = n->dur > UINT32_MAX ? UINT32_MAX : (uint32_t)n->dur;
	cl->seq = (uint32_t)n->seq;
	cl->fn = (uint8_t)n->fn;
	cl->device = (int8_t)n->device;
	cl->comm = local_comm(c, n->comm, (int)n->rank, (int)n->nranks, (int)n->device);
	struct tgroup *g = get_group(c, n->tid);
	if (g && n->group_depth > 0 && g->depth == 0)
		g->depth =
		    (int)n->group_depth; /* group start not recorded: trust the call's depth */
	if (g && g->depth > 0) {
		struct gcall *x = PUSH(g->c, g->n, g->cap);
		if (x) {
			x->idx = idx;
			x->cs = n->cupti_stream;
		}
		return;
	}
	struct unit u = {
	    .first = idx, .n = 1, .mask = 1u << an_coll_of_fn((unsigned)n->fn), .t = n->t_enter};
	push_unit(c, (int)(int64_t)n->device, n->cupti_stream, &u);
}

static int kernel_class(struct lctx *c, uint64_t id, uint64_t flags)
{
	if (id < c->nscls && c->scls[id])
		return c->scls[id] - 2;
	int k = an_coll_of_kernel(nvlp_reader_string(c->rd, id));
	if ((flags & 1) && k == 0)
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

static struct an_pair *get_pair(struct lctx *c, int src, int dst)
{
	struct an_rank *r = c->r;
	for (size_t i = 0; i < r->npairs; i++)
		if (r->pairs[i].src == src && r->pairs[i].dst == dst)
			return &r->pairs[i];
	struct an_pair *p = PUSH(r->pairs, r->npairs, c->cappairs);
	if (p) {
		memset(p, 0, sizeof *p);
		p->src = src;
		p->dst = dst;
	}
	return p;
}

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
	return addr < a->ptr + a->bytes ? a : NULL;
}

static void on_managed(struct lctx *c, const struct nvlp_rec_managed *m)
{
	struct an_rank *r = c->r;
	seen_time(r, m->t_enter, m->t_enter + m->dur);
	if ((int64_t)m->rc != 0)
		return;
	if (m->fn == NVLP_CUDA_MALLOC_MANAGED) {
		if (!PUSH(r->allocs, r->nallocs, c->capallocs))
			return;
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
		return;
	}
	struct an_alloc *a = find_alloc(r, m->ptr);
	if (!a)
		return;
	if (m->fn == NVLP_CUDA_MEM_PREFETCH_ASYNC)
		a->prefetched++;
	else if (m->fn == NVLP_CUDA_MEM_ADVISE)
		a->advised++;
}

static void on_um(struct lctx *c, const struct nvlp_rec_um *u)
{
	struct an_rank *r = c->r;
	struct an_alloc *a = find_alloc(r, u->address);
	int dst;
	switch (u->counter) {
	case 1:
		dst = (int)(int64_t)u->dst;
		break; /* HTOD */
	case 2:
		dst = -1;
		break; /* DTOH */
	case 8:
		dst = (int)(int64_t)u->dst;
		break; /* DTOD */
	case 3:
		if (a) /* one record per fault group; CUPTI's value is not a count here (seen: ~1e14) */
			a->cpu_faults += 1;
		return;
	case 4:
		if (a) {
			a->gpu_faults += u->value;
			a->migrate_ns += u->dur;
		}
		return;
	case 5:
		if (a)
			a->thrash_events++;
		return;
	default:
		return;
	}
	if (!a) {
		r->um_unknown_bytes += u->value;
		return;
	}
	if (u->counter == 1)
		a->htod += u->value;
	else if (u->counter == 2)
		a->dtoh += u->value;
	else
		a->dtod += u->value;
	a->migrations++;
	a->migrate_ns += u->dur;
	if (a->last_dst != -2 && a->last_dst != dst)
		a->flips++;
	a->last_dst = dst;
}

/* Read one file completely into r. */
static void load_file(struct an_rank *r)
{
	struct lctx c = {.r = r, .lastdev = -1};
	c.rd = nvlp_reader_open(r->path, r->err, sizeof r->err);
	if (!c.rd) {
		r->ok = 0;
		return;
	}
	r->ok = 1;
	const char *h = nvlp_reader_header_text(c.rd);
	r->header = strdup(h ? h : "");
	char buf[128];
	const char *v;
	r->rank = r->local_rank = r->world_size = -1;
	if ((v = an_header_get(r, NVLP_HDR_HOST, buf, sizeof buf)))
		snprintf(r->host, sizeof r->host, "%s", v);
	if ((v = an_header_get(r, NVLP_HDR_PID, buf, sizeof buf)))
		r->pid = atoi(v);
	if ((v = an_header_get(r, NVLP_HDR_RANK, buf, sizeof buf)))
		r->rank = atoi(v);
	if ((v = an_header_get(r, NVLP_HDR_LOCAL_RANK, buf, sizeof buf)))
		r->local_rank = atoi(v);
	if ((v = an_header_get(r, NVLP_HDR_WORLD_SIZE, buf, sizeof buf)))
		r->world_size = atoi(v);
	if ((v = an_header_get(r, NVLP_HDR_T_MONO, buf, sizeof buf)))
		r->t_mono0 = strtoull(v, NULL, 10);
	if ((v = an_header_get(r, NVLP_HDR_T_REAL, buf, sizeof buf)))
		r->t_real0 = strtoull(v, NULL, 10);

	struct nvlp_record rec;
	int rc;
	while ((rc = nvlp_reader_next(c.rd, &rec)) == 1) {
		r->records++;
		if (rec.kind < NVLP_K_COUNT)
			r->kind_count[rec.kind]++;
		switch (rec.kind) {
		case NVLP_K_NCCL:
			on_nccl(&c, (const struct nvlp_rec_nccl *)rec.f);
			break;
		case NVLP_K_KERNEL: {
			const struct nvlp_rec_kernel *k = (const void *)rec.f;
			uint64_t s = k->start, e = k->start + k->dur;
			struct an_dev *d = get_dev(&c, (int)(int64_t)k->device);
			if (!d)
				break;
			int kc = kernel_class(&c, k->name, k->flags);
			if (bad_gpu_time(k->start, k->dur)) {
				if (kc) /* still the k-th kernel of its stream: consume its call */
					on_nccl_kernel(&c, d->device, k->stream, 0, 0, kc);
				break;
			}
			seen_time(r, s, e);
			if (kc) {
				ivals_push(&d->nccl, s, e);
				d->nccl_kernel_ns += k->dur;
				d->nccl_kernels++;
				on_nccl_kernel(&c, d->device, k->stream, s, e, kc);
			} else {
				ivals_push(&d->compute, s, e);
				d->compute_ns += k->dur;
			}
			break;
		}
		case NVLP_K_LINKSAMPLE: {
			const struct nvlp_rec_linksample *l = (const void *)rec.f;
			if (bad_gpu_time(l->start, l->dur))
				break;
			seen_time(r, l->start, l->start + l->dur);
			struct an_dev *d = get_dev(&c, (int)(int64_t)l->device);
			if (!d)
				break;
			d->nvl_tx += l->nvl_tx;
			d->nvl_rx += l->nvl_rx;
			d->pcie_rd += l->pcie_rd;
			d->pcie_wr += l->pcie_wr;
			struct an_sample *sm = PUSH(d->samples, d->nsamples, d->capsamples);
			if (sm) {
				sm->s = l->start;
				sm->e = l->start + l->dur;
				sm->nvl = l->nvl_tx + l->nvl_rx;
				sm->pcie = l->pcie_rd + l->pcie_wr;
			}
			break;
		}
		case NVLP_K_COPY: {
			const struct nvlp_rec_copy *cp = (const void *)rec.f;
			seen_time(r, cp->t_enter, cp->t_enter + cp->dur);
			int sd = (int)(int64_t)cp->src_device, dd = (int)(int64_t)cp->dst_device;
			if ((int64_t)cp->rc != 0 || sd < 0 || dd < 0 || sd == dd)
				break;
			struct an_pair *p = get_pair(&c, sd, dd);
			if (!p)
				break;
			p->api_copies++;
			p->api_bytes += cp->bytes;
			p->api_ns += cp->dur;
			if ((int64_t)cp->peer_enabled == 0) {
				p->staged_copies++;
				p->staged_bytes += cp->bytes;
			}
			if (cp->fn == NVLP_CUDA_MEMCPY || cp->fn == NVLP_CUDA_MEMCPY_PEER ||
			    cp->fn == NVLP_CUDA_MEMCPY_PTDS ||
			    cp->fn == NVLP_CUDA_MEMCPY_PEER_PTDS) {
				p->sync_bytes += cp->bytes;
				p->sync_ns += cp->dur;
			}
			break;
		}
		case NVLP_K_GPUCOPY: {
			const struct nvlp_rec_gpucopy *g = (const void *)rec.f;
			if (bad_gpu_time(g->start, g->dur))
				break;
			seen_time(r, g->start, g->start + g->dur);
			if (g->copy_kind == 10) { /* PTOP: direct over NVLink */
				struct an_pair *p = get_pair(&c, (int)(int64_t)g->src_device,
				                             (int)(int64_t)g->dst_device);
				if (p) {
					p->p2p_copies++;
					p->p2p_bytes += g->bytes;
					p->p2p_gpu_ns += g->dur;
				}
			}
			break;
		}
		case NVLP_K_MANAGED:
			on_managed(&c, (const void *)rec.f);
			break;
		case NVLP_K_UM: {
			const struct nvlp_rec_um *u = (const void *)rec.f;
			if (bad_gpu_time(u->start, u->dur))
				break;
			seen_time(r, u->start, u->start + u->dur);
			on_um(&c, u);
			break;
		}
		case NVLP_K_PEER: {
			const struct nvlp_rec_peer *p = (const void *)rec.f;
			if (p->fn == NVLP_CUDA_ENABLE_PEER_ACCESS) {
				/* 704 = cudaErrorPeerAccessAlreadyEnabled: still enabled */
				if ((int64_t)p->rc == 0 || (int64_t)p->rc == 704)
					r->peer_enable_ok++;
				else
					r->peer_enable_fail++;
			}
			break;
		}
		case NVLP_K_NVLINK: {
			const struct nvlp_rec_nvlink *n = (const void *)rec.f;
			/* CUPTI documents kB/s per link, but H200 (NVLink 4, 18 links) reported
			 * 849960000, i.e. 850 GB/s for the whole bundle. Trust the field only when
			 * it is plausible for one link; else use the per-link, per-direction rate
			 * of the NVLink version (the figure nvidia-smi nvlink -s shows: 26.562 GB/s
			 * for NVLink 4). */
			static const double per_version[] = {0, 20e9, 25e9, 25e9, 26.5625e9, 50e9};
			double per = n->version < 6 ? per_version[n->version] : 50e9;
			uint64_t bw = n->bandwidth * 1000ull;
			if (!n->bandwidth || (double)bw > 60e9)
				bw = (uint64_t)(per ? per : 25e9);
			int dup = 0;
			for (size_t i = 0; i < r->nlinks; i++)
				if (r->links[i].dev0 == (int)(int64_t)n->dev0 &&
				    r->links[i].dev1 == (int)(int64_t)n->dev1 &&
				    r->links[i].type0 == (int)n->type0 &&
				    r->links[i].type1 == (int)n->type1)
					dup = 1;
			struct an_link *l = dup ? NULL : PUSH(r->links, r->nlinks, c.caplinks);
			if (l) {
				l->dev0 = (int)(int64_t)n->dev0;
				l->dev1 = (int)(int64_t)n->dev1;
				l->type0 = (int)n->type0;
				l->type1 = (int)n->type1;
				l->links = n->links;
				l->bw_Bps = bw;
			}
			break;
		}
		case NVLP_K_NCCLPROF:
			on_choice(&c, (const void *)rec.f);
			break;
		case NVLP_K_NOTE: {
			const struct nvlp_rec_note *n = (const void *)rec.f;
			if (r->nnotes >= 64)
				break;
			struct an_note *x = PUSH(r->notes, r->nnotes, c.capnotes);
			if (x) {
				x->code = (unsigned)n->code;
				x->device = (int)(int64_t)n->device;
				x->value = n->value;
				int len = rec.blob_len < sizeof x->msg - 1 ? (int)rec.blob_len
				                                           : (int)sizeof x->msg - 1;
				memcpy(x->msg, rec.blob ? (const char *)rec.blob : "",
				       rec.blob ? (size_t)len : 0);
				x->msg[rec.blob ? len : 0] = 0;
				for (char *p = x->msg; *p; p++)
					if (*p == '\n' || *p == '"' || *p == '\\')
						*p = ' ';
			}
			break;
		}
		case NVLP_K_STACK: {
			const struct nvlp_rec_stack *s = (const void *)rec.f;
			struct an_stack *x = PUSH(r->stacks, r->nstacks, c.capstacks);
			if (x) {
				x->id = s->id;
				x->n = rec.blob_len / 8;
				x->pc = malloc(x->n ? x->n * 8 : 1);
				if (x->pc && rec.blob)
					memcpy(x->pc, rec.blob, (size_t)x->n * 8);
				else
					x->n = 0;
			}
			break;
		}
		case NVLP_K_MODULE: {
			const struct nvlp_rec_module *m = (const void *)rec.f;
			struct an_module *x = PUSH(r->modules, r->nmodules, c.capmods);
			if (x) {
				x->base = m->base;
				x->start = m->start;
				x->end = m->end;
				x->path =
				    strndup(rec.blob ? (const char *)rec.blob : "", rec.blob_len);
			}
			break;
		}
		case NVLP_K_DROPS: {
			const struct nvlp_rec_drops *d = (const void *)rec.f;
			size_t i;
			for (i = 0; i < c.ndrops && c.drops[i].tid != d->tid; i++)
				;
			if (i == c.ndrops) {
				struct tdrop *x = PUSH(c.drops, c.ndrops, c.capdrops);
				if (!x)
					break;
				x->tid = d->tid;
				x->dropped = 0;
			}
			if (d->dropped > c.drops[i].dropped)
				c.drops[i].dropped = d->dropped;
			break;
		}
		case NVLP_K_END: {
			const struct nvlp_rec_end *e = (const void *)rec.f;
			seen_time(r, e->t, e->t);
			r->dropped = e->dropped;
			break;
		}
		case NVLP_K_HEADER: {
			const struct nvlp_rec_header *hd = (const void *)rec.f;
			if (!r->t_mono0)
				r->t_mono0 = hd->t_mono;
			if (!r->t_real0)
				r->t_real0 = hd->t_real;
			break;
		}
		default:
			break;
		}
	}
	r->complete = nvlp_reader_complete(c.rd);
	r->truncated = rc < 0 || nvlp_reader_truncated(c.rd) || !r->complete;
	if (r->truncated)
		snprintf(r->err, sizeof r->err, "%s",
		         *nvlp_reader_error(c.rd) ? nvlp_reader_error(c.rd)
		                                  : "no END record (process did not exit cleanly)");
	/* mp.spawn jobs leave RANK unset: the rank in the largest communicator is the global one */
	if (r->rank < 0) {
		int best = 0;
		for (size_t i = 0; i < r->ncomms; i++)
			if (r->comms[i].nranks > best && r->comms[i].rank >= 0) {
				best = r->comms[i].nranks;
				r->rank = r->comms[i].rank;
				if (r->world_size < 0)
					r->world_size = best;
			}
	}
	if (!r->dropped)
		for (size_t i = 0; i < c.ndrops; i++)
			r->dropped += c.drops[i].dropped;
	/* groups never closed, and units never given a kernel: their calls keep host time only */
	for (size_t i = 0; i < c.ng; i++) {
		flush_group(&c, &c.g[i]);
		free(c.g[i].c);
	}
	for (size_t i = 0; i < c.nq; i++) {
		for (size_t j = c.q[i].uh; j < c.q[i].un; j++) {
			/* launched before a call that got its kernel: it launched none we saw */
			if (c.q[i].u[j].t < c.q[i].tmatch)
				r->gpu_resync++;
			free(c.q[i].u[j].list);
		}
		r->gpu_unmatched_kernels += c.q[i].kpend;
		free(c.q[i].u);
		for (int k = 0; k < AN_C_COUNT; k++)
			free(c.q[i].kf[k].k);
	}
	free(c.q);
	free(c.g);
	free(c.scls);
	free(c.drops);
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

int an_job_load(struct an_job *job, char **paths, int npaths, int nthreads, char *err,
                size_t errlen)
{
	memset(job, 0, sizeof *job);
	/* Fresh pages are dear (zeroing dominated loading on a VM): keep freed blocks in the heap
	 * for reuse instead of returning them to the kernel. The CLI is the only user of this file.
	 */
	static int tuned;
	if (!tuned++) {
		mallopt(M_MMAP_THRESHOLD, 512 << 20);
		mallopt(M_TRIM_THRESHOLD, 1 << 30);
		/* reader threads allocate rarely (arrays double): one arena lets them reuse each
		 * other's freed blocks instead of faulting in per-thread heaps */
		mallopt(M_ARENA_MAX, 1);
	}
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
	pthread_t th[256];
	int started = 0;
	for (int i = 1; i < nthreads && i < 256; i++)
		if (pthread_create(&th[started], NULL, load_worker, &q) == 0)
			started++;
	load_worker(&q);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	qsort(job->ranks, nf, sizeof *job->ranks, cmp_rank);
	for (size_t i = 0; i < nf; i++)
		job->nok += job->ranks[i].ok;
	if (!job->nok) {
		snprintf(err, errlen, "no readable trace among %zu file(s): %s", nf,
		         job->ranks[0].err);
		return -1;
	}
	return 0;
}

/* ---- analysis ---- */
static int cmp_ival(const void *a, const void *b)
{
	const struct an_ival *x = a, *y = b;
	return x->s < y->s ? -1 : x->s > y->s;
}

/* Sort (only when needed: CUPTI mostly delivers in order) and merge overlapping intervals in
 * place. */
static uint64_t ivals_union(struct an_ivals *iv)
{
	size_t n = iv->n;
	for (size_t i = 1; i < n; i++)
		if (iv->v[i].s < iv->v[i - 1].s) {
			qsort(iv->v, n, sizeof *iv->v, cmp_ival);
			break;
		}
	size_t o = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (o && iv->v[i].s <= iv->v[o - 1].e) {
			if (iv->v[i].e > iv->v[o - 1].e)
				iv->v[o - 1].e = iv->v[i].e;
		} else
			iv->v[o++] = iv->v[i];
	}
	iv->n = o;
	for (size_t i = 0; i < o; i++)
		total += iv->v[i].e - iv->v[i].s;
	return total;
}

/* Length of [s, e) covered by the sorted disjoint intervals v, starting the scan at *pos. */
static uint64_t covered(const struct an_ivals *iv, size_t *pos, uint64_t s, uint64_t e)
{
	uint64_t c = 0;
	size_t i = *pos;
	while (i < iv->n && iv->v[i].e <= s)
		i++;
	*pos = i;
	for (; i < iv->n && iv->v[i].s < e; i++) {
		uint64_t a = iv->v[i].s > s ? iv->v[i].s : s;
		uint64_t b = iv->v[i].e < e ? iv->v[i].e : e;
		if (b > a)
			c += b - a;
	}
	return c;
}

static int cmp_sample(const void *a, const void *b)
{
	const struct an_sample *x = a, *y = b;
	return x->s < y->s ? -1 : x->s > y->s;
}

static void analyze_dev(struct an_dev *d)
{
	ivals_union(&d->compute);
	d->union_nccl_ns = ivals_union(&d->nccl);
	size_t pos = 0;
	uint64_t hidden = 0;
	for (size_t i = 0; i < d->nccl.n; i++)
		hidden += covered(&d->compute, &pos, d->nccl.v[i].s, d->nccl.v[i].e);
	d->exposed_ns = d->union_nccl_ns - hidden;
	for (size_t i = 1; i < d->nsamples; i++)
		if (d->samples[i].s < d->samples[i - 1].s) {
			qsort(d->samples, d->nsamples, sizeof *d->samples, cmp_sample);
			break;
		}
	pos = 0;
	for (size_t i = 0; i < d->nsamples; i++) {
		struct an_sample *s = &d->samples[i];
		if (s->e <= s->s)
			continue;
		/* Samples (1-20 ms) are coarser than most collectives (0.1-1 ms), so a
		 * time-weighted split would hide collective traffic: a sample that overlaps a
		 * collective counts whole. */
		if (covered(&d->nccl, &pos, s->s, s->e)) {
			d->nvl_coll += s->nvl;
			d->pcie_coll += s->pcie;
		}
	}
}

struct dev_worker_arg {
	struct an_job *job;
	atomic_size_t next;
};
static void *dev_worker(void *arg)
{
	struct dev_worker_arg *a = arg;
	size_t i;
	while ((i = atomic_fetch_add(&a->next, 1)) < a->job->nranks) {
		struct an_rank *r = &a->job->ranks[i];
		for (size_t d = 0; d < r->ndevs; d++)
			analyze_dev(&r->devs[d]);
	}
	return NULL;
}

/* Collective table of one comm: rows = seq, columns = member processes; cell = call index + 1. */
struct ctab {
	uint32_t minseq, nseq;
	int ncol;
	int *col_file;    /* column -> index in job->ranks */
	int *col_dev;     /* column -> device */
	uint32_t *cell;   /* nseq * ncol */
	uint32_t *maxseq; /* per column: highest seq it entered */
};

/* Columns are (process, device): a process driving several GPUs holds several ranks of one comm. */
static void ctab_build(struct an_job *job, uint16_t ci, struct ctab *t)
{
	memset(t, 0, sizeof *t);
	uint32_t lo = UINT32_MAX, hi = 0;
	size_t capcol = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		int first = t->ncol;
		for (size_t k = 0; k < r->ncalls; k++) {
			struct an_call *c = &r->calls[k];
			if (c->comm != ci || an_coll_of_fn(c->fn) == AN_C_SENDRECV)
				continue;
			if (c->seq < lo)
				lo = c->seq;
			if (c->seq > hi)
				hi = c->seq;
			int col;
			for (col = first; col < t->ncol && t->col_dev[col] != c->device; col++)
				;
			if (col < t->ncol)
				continue;
			if ((size_t)t->ncol + 1 > capcol) {
				capcol = capcol ? capcol * 2 : 16;
				int *a = realloc(t->col_file, capcol * sizeof *a),
				    *b = realloc(t->col_dev, capcol * sizeof *b);
				if (a)
					t->col_file = a;
				if (b)
					t->col_dev = b;
				if (!a || !b)
					return;
			}
			t->col_file[t->ncol] = (int)f;
			t->col_dev[t->ncol++] = c->device;
		}
	}
	if (!t->ncol || lo > hi)
		return;
	t->minseq = lo;
	t->nseq = hi - lo + 1;
	t->cell = calloc((size_t)t->nseq * t->ncol, sizeof *t->cell);
	t->maxseq = calloc(t->ncol, sizeof *t->maxseq);
	if (!t->cell || !t->maxseq) {
		t->nseq = 0;
		return;
	}
	for (int col0 = 0; col0 < t->ncol;) {
		int f = t->col_file[col0], ncf = 0;
		while (col0 + ncf < t->ncol && t->col_file[col0 + ncf] == f)
			ncf++;
		struct an_rank *r = &job->ranks[f];
		for (size_t k = 0; k < r->ncalls; k++) {
			struct an_call *c = &r->calls[k];
			if (c->comm != ci || an_coll_of_fn(c->fn) == AN_C_SENDRECV)
				continue;
			int col = col0;
			while (col < col0 + ncf - 1 && t->col_dev[col] != c->device)
				col++;
			t->cell[(size_t)(c->seq - lo) * t->ncol + col] = (uint32_t)k + 1;
			if (c->seq > t->maxseq[col])
				t->maxseq[col] = c->seq;
		}
		col0 += ncf;
	}
}

static void ctab_free(struct ctab *t)
{
	free(t->col_file);
	free(t->col_dev);
	free(t->cell);
	free(t->maxseq);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Hosts with different clocks: correct each host by the median difference of collective
 * completions (GPU kernel ends of the same (comm, seq) finish together on all ranks). */
static void refine_clocks(struct an_job *job, struct ctab *tabs)
{
	const char *ref = job->ranks[0].host;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (!r->ok || !strcmp(r->host, ref))
			continue;
		int done = 0;
		for (size_t g = 0; g < f; g++)
			if (!strcmp(job->ranks[g].host, r->host))
				done = 1;
		if (done)
			continue;
		job->multi_host = 1;
		int64_t *d = NULL;
		size_t nd = 0, capd = 0;
		for (size_t ci = 0; ci < job->ncomms; ci++) {
			struct ctab *t = &tabs[ci];
			int cr = -1, cx = -1;
			for (int col = 0; col < t->ncol; col++) {
				const char *h = job->ranks[t->col_file[col]].host;
				if (cr < 0 && !strcmp(h, ref))
					cr = col;
				if (cx < 0 && !strcmp(h, r->host))
					cx = col;
			}
			if (cr < 0 || cx < 0)
				continue;
			struct an_rank *a = &job->ranks[t->col_file[cr]],
			               *b = &job->ranks[t->col_file[cx]];
			for (uint32_t s = 0; s < t->nseq; s++) {
				uint32_t ka = t->cell[(size_t)s * t->ncol + cr],
				         kb = t->cell[(size_t)s * t->ncol + cx];
				if (!ka || !kb)
					continue;
				struct an_call *x = &a->calls[ka - 1], *y = &b->calls[kb - 1];
				if (!x->gpu_start || !y->gpu_start)
					continue;
				int64_t ex = (int64_t)(x->gpu_start + x->gpu_dur) + a->offset;
				int64_t ey = (int64_t)(y->gpu_start + y->gpu_dur) + b->offset;
				int64_t *p = PUSH(d, nd, capd);
				if (p)
					*p = ey - ex;
			}
		}
		if (nd >= 3) {
			qsort(d, nd, sizeof *d, cmp_i64);
			int64_t med = d[nd / 2];
			for (size_t g = 0; g < job->nranks; g++)
				if (!strcmp(job->ranks[g].host, r->host)) {
					job->ranks[g].offset -= med;
					job->ranks[g].refine = -med;
				}
			double a = med < 0 ? -(double)med : (double)med;
			if (a > job->max_refine_ns)
				job->max_refine_ns = a;
		}
		free(d);
	}
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static void cross_rank(struct an_job *job, struct ctab *tabs)
{
	double skew_sum = 0;
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		struct ctab *t = &tabs[ci];
		int hang_done = 0;
		if (t->ncol < 2)
			continue;
		for (uint32_t s = 0; s < t->nseq; s++) {
			uint32_t *row = &t->cell[(size_t)s * t->ncol];
			int present = 0;
			for (int col = 0; col < t->ncol; col++)
				present += row[col] != 0;
			if (present == t->ncol) {
				int64_t mx = INT64_MIN, mx2 = INT64_MIN, mn = INT64_MAX;
				int last = -1;
				for (int col = 0; col < t->ncol; col++) {
					struct an_rank *r = &job->ranks[t->col_file[col]];
					int64_t te =
					    (int64_t)r->calls[row[col] - 1].t_enter + r->offset;
					if (te > mx) {
						mx2 = mx;
						mx = te;
						last = col;
					} else if (te > mx2)
						mx2 = te;
					if (te < mn)
						mn = te;
				}
				if (t->nseq && !job->comms[ci].xfer) {
					job->comms[ci].xfer = calloc(t->nseq, sizeof(uint32_t));
					job->comms[ci].xfer_seq0 = t->minseq;
					job->comms[ci].nxfer = job->comms[ci].xfer ? t->nseq : 0;
				}
				if (job->comms[ci].xfer) {
					uint32_t xmin = 0;
					for (int col = 0; col < t->ncol; col++) {
						const struct an_call *c =
						    &job->ranks[t->col_file[col]]
						         .calls[row[col] - 1];
						if (c->gpu_start && c->gpu_dur &&
						    (!xmin || c->gpu_dur < xmin))
							xmin = c->gpu_dur;
					}
					job->comms[ci].xfer[s] = xmin;
				}
				double skew = (double)(mx - mn);
				skew_sum += skew;
				job->matched_colls++;
				if (skew > job->max_skew_ns)
					job->max_skew_ns = skew;
				for (int col = 0; col < t->ncol; col++) {
					struct an_rank *r = &job->ranks[t->col_file[col]];
					int64_t te =
					    (int64_t)r->calls[row[col] - 1].t_enter + r->offset;
					struct an_rank_x *x = &job->rx[t->col_file[col]];
					x->colls++;
					x->wait_ns += (double)(mx - te);
					if (col == last) {
						x->last_count++;
						x->lead_ns_sum += (double)(mx - mx2);
						float *l = PUSH(x->leads, x->nleads, x->capleads);
						if (l)
							*l = (float)(mx - mx2);
					}
				}
				struct an_rank_x *lx = &job->rx[t->col_file[last]];
				for (int col = 0; col < t->ncol; col++) {
					struct an_rank *r = &job->ranks[t->col_file[col]];
					lx->caused_wait_ns +=
					    (double)(mx - ((int64_t)r->calls[row[col] - 1].t_enter +
					                   r->offset));
				}
				continue;
			}
			if (hang_done || !present)
				continue;
			/* Some entered, some never did: only ranks whose trace stops before this
			 * seq hung it. */
			struct an_hang h = {.comm = (uint16_t)ci, .seq = t->minseq + s};
			for (int col = 0; col < t->ncol; col++) {
				struct an_rank *r = &job->ranks[t->col_file[col]];
				int gr = r->rank >= 0 ? r->rank : (int)t->col_file[col];
				if (row[col]) {
					struct an_call *c = &r->calls[row[col] - 1];
					h.fn = c->fn;
					double w = c->gpu_start
					               ? (double)c->gpu_dur
					               : (double)(r->t_last > c->t_enter
					                              ? r->t_last - c->t_enter
					                              : 0);
					if (w / 1e6 > h.wait_ms)
						h.wait_ms = w / 1e6;
					if (h.npresent < 16)
						h.present[h.npresent++] = gr;
				} else if (t->maxseq[col] < t->minseq + s) {
					if (h.nmissing < 16)
						h.missing[h.nmissing++] = gr;
				}
			}
			if (h.nmissing) {
				struct an_hang *x =
				    realloc(job->hangs, (job->nhangs + 1) * sizeof *x);
				if (x) {
					job->hangs = x;
					x[job->nhangs++] = h;
				}
				hang_done = 1;
			}
		}
	}
	job->mean_skew_ns = job->matched_colls ? skew_sum / job->matched_colls : 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank_x *x = &job->rx[f];
		if (x->nleads) {
			qsort(x->leads, x->nleads, sizeof *x->leads, cmp_float);
			x->median_lead_ns = x->leads[x->nleads / 2];
		}
		free(x->leads);
		x->leads = NULL;
		x->nleads = x->capleads = 0;
	}
}

static const struct an_call
    *seq_calls; /* qsort has no context argument; analysis is single-threaded here */
static int cmp_by_seq(const void *a, const void *b)
{
	uint32_t x = seq_calls[*(const uint32_t *)a].seq, y = seq_calls[*(const uint32_t *)b].seq;
	return x < y ? -1 : x > y;
}

/* The period of the repeating collective pattern on the busiest comm of the first rank. */
static void find_steps(struct an_job *job)
{
	struct an_rank *r = &job->ranks[0];
	if (!r->ok || !r->ncalls)
		return;
	size_t *cnt = calloc(job->ncomms + 1, sizeof *cnt);
	if (!cnt)
		return;
	for (size_t k = 0; k < r->ncalls; k++)
		cnt[r->calls[k].comm]++;
	uint16_t main = 0;
	for (size_t c = 1; c < job->ncomms; c++)
		if (cnt[c] > cnt[main])
			main = (uint16_t)c;
	size_t n = cnt[main];
	free(cnt);
	uint32_t *ix = malloc(n * sizeof *ix);
	if (!ix)
		return;
	size_t m = 0;
	for (size_t k = 0; k < r->ncalls; k++)
		if (r->calls[k].comm == main)
			ix[m++] = (uint32_t)k;
	/* calls from several threads are in file order, not issue order: order them by seq */
	seq_calls = r->calls;
	qsort(ix, m, sizeof *ix, cmp_by_seq);
	/* skip the first calls (setup broadcasts); the steady pattern must repeat >= 3 times */
	size_t skip = m / 10;
	for (int p = 1; p <= 256 && (size_t)p * 3 <= m - skip; p++) {
		size_t same = 0, tot = 0;
		for (size_t i = skip; i + p < m; i++) {
			struct an_call *a = &r->calls[ix[i]], *b = &r->calls[ix[i + p]];
			tot++;
			same += a->fn == b->fn && a->bytes == b->bytes;
		}
		if (tot && same >= tot * 95 / 100) {
			size_t k = (m - 1 - skip) / p;
			if (k >= 2) {
				double ta = (double)r->calls[ix[skip]].t_enter,
				       tb = (double)r->calls[ix[skip + k * p]].t_enter;
				job->step_ns = tb > ta ? (tb - ta) / k : 0;
				job->step_period = p;
				job->steps = m / p;
				/* the step window: from the first steady-state step to the end of
				 * the last call */
				const struct an_call *last = &r->calls[ix[m - 1]];
				uint64_t e = last->t_enter + last->host_dur;
				if (last->gpu_start && last->gpu_start + last->gpu_dur > e)
					e = last->gpu_start + last->gpu_dur;
				if (job->step_ns > 0 && e > (uint64_t)ta) {
					job->win0 = (uint64_t)((int64_t)ta + r->offset);
					job->win1 = (uint64_t)((int64_t)e + r->offset);
				}
			}
			break;
		}
	}
	free(ix);
}

const char *an_choice_channels(const struct an_jchoice *x, char *buf, size_t len)
{
	if (x->ch_min == x->ch_max)
		snprintf(buf, len, "%d", x->ch_min);
	else
		snprintf(buf, len, "%d-%d", x->ch_min, x->ch_max);
	return buf;
}

static int choice_cmp(const void *a, const void *b)
{
	const struct an_jchoice *x = a, *y = b;
	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	if (x->fn != y->fn)
		return x->fn < y->fn ? -1 : 1;
	return x->calls > y->calls ? -1 : x->calls < y->calls;
}

/* NCCL's choices over the job: communicators identified through the shim's hash (records made
 * before it was known take it from the others of the same NCCL communicator). */
static void build_choices(struct an_job *job)
{
	size_t cap = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->nchoices; i++)
			for (size_t k = 0; !r->choices[i].comm && k < r->nchoices; k++)
				if (r->choices[k].comm && r->choices[k].nccl_comm == r->choices[i].nccl_comm)
					r->choices[i].comm = r->choices[k].comm;
		for (size_t i = 0; i < r->nchoices; i++) {
			const struct an_choice *x = &r->choices[i];
			int ci = -1;
			for (size_t k = 0; x->comm && k < job->ncomms; k++)
				if (job->comms[k].hash == x->comm)
					ci = (int)k;
			struct an_jchoice *j = NULL;
			for (size_t k = 0; k < job->nchoices && !j; k++)
				if (job->choices[k].comm == ci && job->choices[k].fn == x->fn &&
				    !strcmp(job->choices[k].algo, x->algo) &&
				    !strcmp(job->choices[k].proto, x->proto))
					j = &job->choices[k];
			if (!j) {
				j = PUSH(job->choices, job->nchoices, cap);
				if (!j)
					return;
				memset(j, 0, sizeof *j);
				j->comm = ci;
				j->fn = x->fn;
				memcpy(j->algo, x->algo, sizeof j->algo);
				memcpy(j->proto, x->proto, sizeof j->proto);
				j->ch_min = j->ch_max = x->channels;
			}
			j->calls += x->calls;
			if (x->channels < j->ch_min)
				j->ch_min = x->channels;
			if (x->channels > j->ch_max)
				j->ch_max = x->channels;
		}
	}
	if (job->nchoices > 1)
		qsort(job->choices, job->nchoices, sizeof *job->choices, choice_cmp);
}

void an_job_analyze(struct an_job *job)
{
	/* job-wide comm table */
	size_t capc = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (r->kind_count[NVLP_K_KERNEL])
			job->have_gpu = 1;
		if (r->kind_count[NVLP_K_KERNEL] || r->kind_count[NVLP_K_GPUCOPY] ||
		    r->kind_count[NVLP_K_UM])
			job->have_gpu_any = 1;
		if (r->kind_count[NVLP_K_LINKSAMPLE])
			job->have_links = 1;
		if (r->nlinks)
			job->have_topo = 1;
		for (size_t i = 0; i < r->ncomms; i++) {
			size_t j;
			for (j = 0; j < job->ncomms && job->comms[j].hash != r->comms[i].hash; j++)
				;
			if (j == job->ncomms) {
				struct an_comm *c = PUSH(job->comms, job->ncomms, capc);
				if (!c)
					return;
				memset(c, 0, sizeof *c);
				c->hash = r->comms[i].hash;
				c->nranks = r->comms[i].nranks;
				c->single_host = 1;
				c->peak_Bps = -1;
			}
			r->comms[i].job_comm = (uint16_t)j;
		}
		for (size_t k = 0; k < r->ncalls; k++) {
			struct an_call *c = &r->calls[k];
			c->comm = r->comms[c->comm].job_comm;
			if (c->seq > job->comms[c->comm].max_seq)
				job->comms[c->comm].max_seq = c->seq;
		}
	}
	an_kch_apply(job); /* collectives' GPU times from NCCL's kernel-channel stamps */
	/* comm membership, host locality and NVLink peak */
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		struct an_comm *c = &job->comms[ci];
		const char *host0 = NULL;
		for (size_t f = 0; f < job->nranks; f++) {
			struct an_rank *r = &job->ranks[f];
			for (size_t i = 0; i < r->ncomms; i++) {
				if (r->comms[i].job_comm != ci)
					continue;
				c->nmembers++;
				if (!host0)
					host0 = r->host;
				else if (strcmp(host0, r->host))
					c->single_host = 0;
				double pk = an_dev_peak(job, r, r->comms[i].device);
				if (c->peak_Bps < 0 || pk < c->peak_Bps)
					c->peak_Bps = pk;
			}
		}
		if (!c->single_host || c->peak_Bps < 0)
			c->peak_Bps = 0;
	}
	/* clocks: realtime anchors first */
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		r->offset =
		    (r->t_real0 && r->t_mono0) ? (int64_t)r->t_real0 - (int64_t)r->t_mono0 : 0;
	}
	/* per-GPU interval work, in parallel */
	{
		struct dev_worker_arg a = {.job = job};
		atomic_init(&a.next, 0);
		long np = sysconf(_SC_NPROCESSORS_ONLN);
		int nt = np > 1 ? (int)np : 1;
		pthread_t th[64];
		int started = 0;
		for (int i = 1; i < nt && i < 64 && (size_t)i < job->nranks; i++)
			if (pthread_create(&th[started], NULL, dev_worker, &a) == 0)
				started++;
		dev_worker(&a);
		for (int i = 0; i < started; i++)
			pthread_join(th[i], NULL);
	}
	job->rx = calloc(job->nranks, sizeof *job->rx);
	struct ctab *tabs = calloc(job->ncomms ? job->ncomms : 1, sizeof *tabs);
	if (tabs && job->rx) {
		for (size_t ci = 0; ci < job->ncomms; ci++)
			ctab_build(job, (uint16_t)ci, &tabs[ci]);
		refine_clocks(job, tabs);
		cross_rank(job, tabs);
		for (size_t ci = 0; ci < job->ncomms; ci++)
			ctab_free(&tabs[ci]);
	}
	free(tabs);
	/* job time span */
	job->t0 = UINT64_MAX;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (!r->ok || !r->t_last)
			continue;
		uint64_t a = (uint64_t)((int64_t)r->t_first + r->offset),
		         b = (uint64_t)((int64_t)r->t_last + r->offset);
		if (a < job->t0)
			job->t0 = a;
		if (b > job->t1)
			job->t1 = b;
	}
	if (job->t0 == UINT64_MAX)
		job->t0 = job->t1 = 0;
	/* aggregates per (comm, fn) */
	size_t na = job->ncomms * NVLP_NCCL_FN_COUNT;
	struct an_agg *all = calloc(na ? na : 1, sizeof *all);
	if (all) {
		for (size_t f = 0; f < job->nranks; f++) {
			struct an_rank *r = &job->ranks[f];
			for (size_t k = 0; k < r->ncalls; k++) {
				struct an_call *c = &r->calls[k];
				struct an_agg *a =
				    &all[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
				a->calls++;
				a->bytes += c->bytes;
				a->host_ns += c->host_dur;
				if (c->gpu_start) {
					a->calls_gpu++;
					a->gpu_ns += c->gpu_dur;
					a->xfer_ns += an_call_xfer_ns(job, c);
					a->bytes_gpu += c->bytes;
				}
				if (c->bytes > a->max_call_bytes)
					a->max_call_bytes = (double)c->bytes;
			}
		}
		for (size_t i = 0; i < na; i++)
			if (all[i].calls) {
				all[i].comm = (uint16_t)(i / NVLP_NCCL_FN_COUNT);
				all[i].fn = (uint8_t)(i % NVLP_NCCL_FN_COUNT);
				all[job->naggs++] = all[i];
			}
		job->aggs = all;
	}
	find_steps(job);
	/* exposure inside the step window, per GPU (intervals are already merged and sorted) */
	for (size_t f = 0; job->win1 && f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		uint64_t a = (uint64_t)((int64_t)job->win0 - r->offset),
		         b = (uint64_t)((int64_t)job->win1 - r->offset);
		for (size_t d = 0; d < r->ndevs; d++) {
			struct an_dev *v = &r->devs[d];
			size_t pos = 0;
			for (size_t i = 0; i < v->nccl.n; i++) {
				uint64_t s = v->nccl.v[i].s > a ? v->nccl.v[i].s : a;
				uint64_t e = v->nccl.v[i].e < b ? v->nccl.v[i].e : b;
				if (e <= s)
					continue;
				v->win_nccl_ns += e - s;
				v->win_exposed_ns += (e - s) - covered(&v->compute, &pos, s, e);
			}
		}
	}
	build_choices(job);
}

int an_rank_exposure(const struct an_job *job, const struct an_rank *r, double *exposed_ns,
                     double *span_ns, double *comm_ns)
{
	double e = 0, c = 0;
	int win = job->win1 > job->win0;
	for (size_t d = 0; d < r->ndevs; d++) {
		e += (double)(win ? r->devs[d].win_exposed_ns : r->devs[d].exposed_ns);
		c += (double)(win ? r->devs[d].win_nccl_ns : r->devs[d].union_nccl_ns);
	}
	*exposed_ns = e;
	*span_ns = win ? (double)(job->win1 - job->win0) : (double)an_rank_wall(r);
	if (comm_ns)
		*comm_ns = c;
	return win;
}

void an_job_free(struct an_job *job)
{
	an_kch_free(job);
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		free(r->path);
		free(r->header);
		free(r->calls);
		free(r->comms);
		for (size_t d = 0; d < r->ndevs; d++) {
			free(r->devs[d].compute.v);
			free(r->devs[d].nccl.v);
			free(r->devs[d].samples);
		}
		free(r->devs);
		free(r->pairs);
		free(r->allocs);
		free(r->notes);
		free(r->links);
		for (size_t i = 0; i < r->nmodules; i++)
			free(r->modules[i].path);
		free(r->modules);
		for (size_t i = 0; i < r->nstacks; i++)
			free(r->stacks[i].pc);
		free(r->stacks);
		free(r->choices);
	}
	free(job->ranks);
	free(job->choices);
	for (size_t ci = 0; ci < job->ncomms; ci++)
		free(job->comms[ci].xfer);
	free(job->comms);
	free(job->aggs);
	free(job->hangs);
	free(job->rx);
	memset(job, 0, sizeof *job);
}

/* ---- helpers ---- */
uint32_t an_call_xfer_ns(const struct an_job *job, const struct an_call *c)
{
	if (!c->gpu_start)
		return 0;
	const struct an_comm *m = &job->comms[c->comm];
	if (m->xfer && c->seq >= m->xfer_seq0 && c->seq - m->xfer_seq0 < m->nxfer &&
	    an_coll_of_fn(c->fn) != AN_C_SENDRECV) {
		uint32_t x = m->xfer[c->seq - m->xfer_seq0];
		/* The shortest rank's time is the transfer only when the data could not move
		 * before it arrived. A root that pushes a broadcast into the late rank's buffers
		 * leaves that rank a kernel far too short to be a transfer (seen: 0.5 ms for
		 * 256 MiB, 11x the link). Then the data moved while the others waited: keep the
		 * rank's own time rather than report a bandwidth the link cannot carry. */
		double bus = x ? (double)c->bytes / ((double)x * 1e-9) *
		                     an_busbw_factor(c->fn, m->nranks)
		               : 0;
		if (x && x < c->gpu_dur && !(m->peak_Bps > 0 && bus > m->peak_Bps))
			return x;
	}
	return c->gpu_dur;
}

const char *an_header_get(const struct an_rank *r, const char *key, char *buf, size_t len)
{
	if (!r->header)
		return NULL;
	size_t kl = strlen(key);
	for (const char *p = r->header; *p;) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		if (ll > kl && p[kl] == '=' && !strncmp(p, key, kl)) {
			size_t vl = ll - kl - 1;
			if (vl >= len)
				vl = len - 1;
			memcpy(buf, p + kl + 1, vl);
			buf[vl] = 0;
			return buf;
		}
		p += ll + (nl ? 1 : 0);
	}
	return NULL;
}

static double dev_peak_in(const struct an_rank *r, int device)
{
	double pk = 0;
	for (size_t i = 0; i < r->nlinks; i++) {
		const struct an_link *l = &r->links[i];
		if ((l->type0 == 1 && l->dev0 == device) || (l->type1 == 1 && l->dev1 == device))
			pk += (double)l->links * (double)l->bw_Bps;
	}
	return pk;
}

double an_dev_peak(const struct an_job *job, const struct an_rank *r, int device)
{
	double pk = dev_peak_in(r, device);
	/* processes on one host share the topology: borrow it from one that recorded it */
	for (size_t f = 0; !pk && f < job->nranks; f++)
		if (job->ranks[f].ok && !strcmp(job->ranks[f].host, r->host))
			pk = dev_peak_in(&job->ranks[f], device);
	return pk;
}

int an_nvlink_between(const struct an_rank *r, int a, int b)
{
	int da = 0, db = 0;
	for (size_t i = 0; i < r->nlinks; i++) {
		const struct an_link *l = &r->links[i];
		if (!l->links)
			continue;
		if ((l->dev0 == a && l->dev1 == b) || (l->dev0 == b && l->dev1 == a))
			return 1;
		/* GPU to NVSwitch links: both GPUs on the fabric */
		if (l->type0 == 1 && l->type1 != 1) {
			da |= l->dev0 == a;
			db |= l->dev0 == b;
		}
		if (l->type1 == 1 && l->type0 != 1) {
			da |= l->dev1 == a;
			db |= l->dev1 == b;
		}
	}
	return da && db;
}

const struct an_stack *an_find_stack(const struct an_rank *r, uint64_t id)
{
	for (size_t i = 0; i < r->nstacks; i++)
		if (r->stacks[i].id == id)
			return &r->stacks[i];
	return NULL;
}

/* Offline symbolization from the module file's .symtab (or .dynsym): no dladdr, no process
 * needed. */
static int elf_lookup(const char *path, uint64_t off, char *name, size_t len, uint64_t *symoff)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	int found = -1;
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return -1;
	}
	const uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -1;
	size_t sz = (size_t)st.st_size;
	const Elf64_Ehdr *eh = (const void *)m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > sz)
		goto out;
	const Elf64_Shdr *sh = (const void *)(m + eh->e_shoff);
	for (int pass = 0; pass < 2 && found < 0; pass++) {
		uint32_t want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
		for (int i = 0; i < eh->e_shnum; i++) {
			if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum)
				continue;
			const Elf64_Shdr *strs = &sh[sh[i].sh_link];
			if (sh[i].sh_offset + sh[i].sh_size > sz ||
			    strs->sh_offset + strs->sh_size > sz)
				continue;
			const Elf64_Sym *sym = (const void *)(m + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof *sym;
			for (size_t k = 0; k < n; k++) {
				if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || !sym[k].st_value)
					continue;
				uint64_t sz2 = sym[k].st_size ? sym[k].st_size : 1;
				if (off >= sym[k].st_value && off < sym[k].st_value + sz2 &&
				    sym[k].st_name < strs->sh_size) {
					snprintf(
					    name, len, "%s",
					    (const char *)(m + strs->sh_offset + sym[k].st_name));
					*symoff = off - sym[k].st_value;
					found = 0;
					break;
				}
			}
		}
	}
out:
	munmap((void *)m, sz);
	return found;
}

void an_symbolize(const struct an_rank *r, uint64_t pc, char *out, size_t len)
{
	for (size_t i = 0; i < r->nmodules; i++) {
		const struct an_module *m = &r->modules[i];
		if (pc < m->start || pc >= m->end)
			continue;
		const char *base = strrchr(m->path, '/');
		base = base ? base + 1 : m->path;
		uint64_t off = pc - m->base, so = 0;
		char fn[128];
		if (elf_lookup(m->path, off, fn, sizeof fn, &so) == 0)
			snprintf(out, len, "%s+0x%llx (%s+0x%llx)", fn, (unsigned long long)so,
			         base, (unsigned long long)off);
		else
			snprintf(out, len, "%s+0x%llx", base, (unsigned long long)off);
		return;
	}
	snprintf(out, len, "0x%llx", (unsigned long long)pc);
}

uint64_t an_rank_wall(const struct an_rank *r)
{
	return r->t_last > r->t_first ? r->t_last - r->t_first : 0;
}

uint64_t an_rank_comm_ns(const struct an_rank *r, int *host_only)
{
	uint64_t g = 0, h = 0;
	for (size_t d = 0; d < r->ndevs; d++)
		g += r->devs[d].union_nccl_ns;
	for (size_t k = 0; k < r->ncalls; k++)
		h += r->calls[k].host_dur;
	if (host_only)
		*host_only = r->kind_count[NVLP_K_KERNEL] == 0;
	return r->kind_count[NVLP_K_KERNEL] ? g : h;
}

uint64_t an_rank_exposed_ns(const struct an_rank *r)
{
	uint64_t e = 0;
	for (size_t d = 0; d < r->ndevs; d++)
		e += r->devs[d].exposed_ns;
	return e;
}

/* Compute time of the sorted, merged intervals iv inside [s, e) (binary search for the start). */
static uint64_t covered_at(const struct an_ivals *iv, uint64_t s, uint64_t e)
{
	size_t lo = 0, hi = iv->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (iv->v[mid].e <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return covered(iv, &lo, s, e);
}

double an_comm_exposed_ns(const struct an_job *job, int comm, double *all_ns)
{
	double mine = 0, all = 0;
	int win = job->win1 > job->win0;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok)
			continue;
		uint64_t a = win ? (uint64_t)((int64_t)job->win0 - r->offset) : 0,
		         b = win ? (uint64_t)((int64_t)job->win1 - r->offset) : UINT64_MAX;
		for (size_t k = 0; k < r->ncalls; k++) {
			const struct an_call *c = &r->calls[k];
			if (!c->gpu_start || !c->gpu_dur)
				continue;
			const struct an_dev *d = NULL;
			for (size_t i = 0; i < r->ndevs && !d; i++)
				if (r->devs[i].device == c->device)
					d = &r->devs[i];
			if (!d && r->ndevs == 1)
				d = &r->devs[0];
			if (!d)
				continue;
			uint64_t s = c->gpu_start > a ? c->gpu_start : a;
			uint64_t e = c->gpu_start + c->gpu_dur < b ? c->gpu_start + c->gpu_dur : b;
			if (e <= s)
				continue;
			double x = (double)((e - s) - covered_at(&d->compute, s, e));
			all += x;
			if (c->comm == comm)
				mine += x;
		}
	}
	if (all_ns)
		*all_ns = all;
	return mine;
}

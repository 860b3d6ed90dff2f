/* export_stream.c: the record stream the format writers and the HTML report share: each trace's
 * records in job time (aligned as `report` aligns them), with the analyzer's call/kernel matches
 * attached, fed to a sink; and the flow ids the formats share. Below the writers: they call it,
 * it calls none of them. */
#include <stdlib.h> /* malloc */
#include <string.h> /* memset */

#include "util/diag.h"
#include "out/export.h"
#include "nvlp_trace.h"
#include "util/containers.h" /* AN_CMP_KEY, an_lower_bound */

uint64_t xe_flow_call(size_t r, long k)
{
	return xe_mix64(xe_mix64((uint64_t)r ^ 0x63616c6cULL) ^ (uint64_t)k) | 1;
}
uint64_t xe_flow_coll(uint64_t comm_hash, uint64_t seq)
{
	return xe_mix64(xe_mix64(comm_hash ^ 0x636f6c6cULL) ^ seq) | 1;
}

/* NCCL calls with GPU time, by (device, gpu start): a kernel finds the calls it ran */
struct gcall {
	int device;
	uint64_t s, d;
	long k;
};
static int cmp_gcall(const void *a, const void *b)
{
	const struct gcall *x = a, *y = b;
	AN_CMP_KEY(x, y, device);
	return x->s < y->s ? -1 : x->s > y->s;
}

/* per trace: NCCL kernel or not, by kernel name id (0 unknown, 1 no, 2 yes) */
struct kname {
	uint8_t *v;
	size_t n;
};
static int is_nccl(struct kname *c, uint64_t id, const char *name)
{
	if (id < c->n && c->v[id])
		return c->v[id] == 2;
	int y = xm_is_nccl_kernel(name);
	if (id < (1u << 24)) { /* ids are small and dense (STRING records, per file) */
		if (id >= c->n) {
			size_t n = c->n ? c->n : 64;
			while (n <= id)
				n *= 2;
			uint8_t *v = realloc(c->v, n);
			if (v) {
				memset(v + c->n, 0, n - c->n);
				c->v = v;
				c->n = n;
			}
		}
		if (id < c->n)
			c->v[id] = (uint8_t)(1 + y);
	}
	return y;
}

static inline uint64_t job_t(const struct xm_rank *r, uint64_t local)
{
	return local + (uint64_t)r->offset;
}

/* One rank's stream: its calls with GPU time in GPU order (g), the kernel names' classes (kn),
 * and the current kernel's calls (kc, reused from kernel to kernel). */
struct xstream {
	const struct xm_job *x;
	size_t ri;
	const struct xm_rank *R;
	nvlp_reader *rd;
	struct gcall *g;
	size_t ng, nc;
	long ncall; /* NCCL records that became calls, in file order (as the model) */
	struct kname kn;
	long *kc;
	size_t kcap;
	char dev[256]; /* the name of the last DEVICE record */
};

/* The rank's calls that have GPU time, by (device, start); NULL when out of memory. */
static struct gcall *gpu_calls(const struct xm_job *x, size_t ri, size_t nc, size_t *ngp)
{
	size_t ng = 0;
	struct gcall *g = malloc((nc ? nc : 1) * sizeof *g);
	if (!g)
		return NULL;
	for (size_t k = 0; k < nc; k++) {
		struct xm_call c;
		xm_call(x, ri, k, &c);
		if (c.gpu_start)
			g[ng++] = (struct gcall){c.device, c.gpu_start, c.gpu_dur, (long)k};
	}
	size_t sorted = 1; /* the model's calls mostly come in GPU order already */
	while (sorted < ng && cmp_gcall(&g[sorted - 1], &g[sorted]) <= 0)
		sorted++;
	if (sorted < ng)
		qsort(g, ng, sizeof *g, cmp_gcall);
	*ngp = ng;
	return g;
}

static void ev_nccl(struct xstream *t, const struct nvlp_rec_nccl *n, struct xe_ev *e)
{
	char cls = nvlp_nccl_fn_class((unsigned)n->fn);
	e->type = XE_NCCL;
	e->ts = job_t(t->R, n->t_enter);
	e->dur = n->dur;
	e->name = nvlp_nccl_fn_name((unsigned)n->fn);
	if ((cls == 'C' || cls == 'P') && (int64_t)n->rc == 0 && (size_t)t->ncall < t->nc) {
		e->call = t->ncall++;
		struct xm_call c;
		xm_call(t->x, t->ri, (size_t)e->call, &c);
		e->comm = c.comm;
		e->has_gpu = c.gpu_start != 0;
	} else if (n->comm)
		e->comm = xm_comm_of_hash(t->x, n->comm);
}

static void ev_kernel(struct xstream *t, const struct nvlp_rec_kernel *k, struct xe_ev *e)
{
	e->type = XE_KERNEL;
	e->ts = job_t(t->R, k->start);
	e->dur = k->dur;
	const char *nm = nvlp_reader_string(t->rd, k->name);
	e->name = nm ? nm : "";
	/* the calls this kernel ran: the model gives a kernel's first call its start and the
	 * group's next calls the following shares, back to back */
	const struct gcall *g = t->g;
	size_t ng = t->ng;
	struct gcall key = {(int)(int64_t)k->device, e->ts, 0, 0};
	size_t lo = an_lower_bound(g, ng, sizeof *g, &key, cmp_gcall);
	size_t n = 0;
	uint64_t next = e->ts;
	if (!is_nccl(&t->kn, k->name, e->name))
		lo = ng; /* another stream's kernel starting at the same ns */
	for (size_t i = lo; i < ng && g[i].device == key.device && g[i].s == next &&
	                    (n == 0 || g[i].s < e->ts + e->dur);
	     i++) {
		if (n == t->kcap) {
			size_t nk = t->kcap ? 2 * t->kcap : 16;
			long *p = realloc(t->kc, nk * sizeof *p);
			if (!p)
				break;
			t->kc = p;
			t->kcap = nk;
		}
		t->kc[n++] = g[i].k;
		next = g[i].s + g[i].d;
	}
	e->calls = t->kc;
	e->ncalls = n;
}

/* An API call's event (cudaMemcpy*, cudaMemAdvise/Prefetch, cudaDeviceEnablePeerAccess...). */
static void api_ev(struct xe_ev *e, int type, const struct xm_rank *R, uint64_t t_enter,
                   uint64_t dur, unsigned fn)
{
	e->type = type;
	e->ts = job_t(R, t_enter);
	e->dur = dur;
	e->name = nvlp_cuda_fn_name(fn);
}
/* A GPU activity's event. */
static void gpu_ev(struct xe_ev *e, int type, const struct xm_rank *R, uint64_t start,
                   uint64_t dur)
{
	e->type = type;
	e->ts = job_t(R, start);
	e->dur = dur;
}

/* The event of a record; 0 for a record the timeline does not show. */
static int ev_of(struct xstream *t, const struct nvlp_record *rec, struct xe_ev *e)
{
	const struct xm_rank *R = t->R;
	switch (rec->kind) {
	case NVLP_K_NCCL:
		ev_nccl(t, (const void *)rec->f, e);
		return 1;
	case NVLP_K_COPY: {
		const struct nvlp_rec_copy *c = (const void *)rec->f;
		api_ev(e, XE_COPY, R, c->t_enter, c->dur, (unsigned)c->fn);
		return 1;
	}
	case NVLP_K_MANAGED: {
		const struct nvlp_rec_managed *m = (const void *)rec->f;
		api_ev(e, XE_MANAGED, R, m->t_enter, m->dur, (unsigned)m->fn);
		return 1;
	}
	case NVLP_K_PEER: {
		const struct nvlp_rec_peer *p = (const void *)rec->f;
		api_ev(e, XE_PEER, R, p->t_enter, p->dur, (unsigned)p->fn);
		return 1;
	}
	case NVLP_K_KERNEL:
		ev_kernel(t, (const void *)rec->f, e);
		return 1;
	case NVLP_K_GPUCOPY: {
		const struct nvlp_rec_gpucopy *c = (const void *)rec->f;
		gpu_ev(e, XE_GPUCOPY, R, c->start, c->dur);
		return 1;
	}
	case NVLP_K_UM: {
		const struct nvlp_rec_um *u = (const void *)rec->f;
		gpu_ev(e, XE_UM, R, u->start, u->dur);
		e->alloc = xm_alloc_of(t->x, t->ri, u->address);
		return 1;
	}
	case NVLP_K_LINKSAMPLE: {
		const struct nvlp_rec_linksample *l = (const void *)rec->f;
		gpu_ev(e, XE_SAMPLE, R, l->start, l->dur);
		return 1;
	}
	case NVLP_K_DEVICE:
		e->type = XE_DEVICE;
		snprintf(t->dev, sizeof t->dev, "%.*s", (int)rec->blob_len,
		         rec->blob ? (const char *)rec->blob : "");
		e->name = t->dev;
		return 1;
	default:
		return 0;
	}
}

int xe_stream_rank(const struct xm_job *x, struct xe_sink *s, size_t ri, uint64_t *records)
{
	struct xstream t = {.x = x, .ri = ri, .R = xm_rank(x, ri)};
	if (!t.R->ok)
		return 0;
	char err[320];
	t.rd = nvlp_reader_open(t.R->path, err, sizeof err);
	if (!t.rd) {
		an_diag("nvlprof: export: %s\n", err);
		return -1;
	}
	t.nc = xm_ncalls(x, ri);
	t.g = gpu_calls(x, ri, t.nc, &t.ng);
	if (!t.g) {
		nvlp_reader_close(t.rd);
		an_diag("nvlprof: export: out of memory\n");
		return -1;
	}
	if (s->rank)
		s->rank(s->ctx, x, ri);
	struct nvlp_record rec;
	int rc;
	while ((rc = nvlp_reader_next(t.rd, &rec)) == 1) {
		(*records)++;
		struct xe_ev e = {
		    .rank = ri, .f = rec.f, .name = "", .comm = -1, .call = -1, .alloc = -1};
		if (ev_of(&t, &rec, &e))
			s->ev(s->ctx, x, &e);
	}
	if (rc < 0)
		an_diag("nvlprof: export: %s\n", nvlp_reader_error(t.rd));
	if (s->rank_end)
		s->rank_end(s->ctx, x, ri);
	free(t.g);
	free(t.kn.v);
	nvlp_reader_close(t.rd);
	free(t.kc);
	return 0;
}

int xe_stream(const struct xm_job *x, struct xe_sink *s, uint64_t *records)
{
	*records = 0;
	for (size_t ri = 0; ri < xm_nranks(x); ri++)
		if (xe_stream_rank(x, s, ri, records) != 0)
			return -1;
	return 0;
}


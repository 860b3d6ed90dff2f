/* graphs.c: the CUDA graph attribution stage: calls captured into a graph are executed once per
 * launch of an exec of that graph, timed per execution from KernelCh stamps (from what
 * load/graphs.c kept of each trace). */
#include <stdlib.h> /* calloc, qsort, bsearch */

#include "load/graphs.h"   /* struct an_graph_file, an_graphs_file_free */
#include "load/kernelch.h" /* an_nccl_func */
#include "model/graphs.h"
#include "model/kernelch.h" /* an_nccl_numbers */
#include "model/model.h"
#include "util/containers.h" /* PUSH, an_lower_bound */
#include "nvlp_trace.h"

/*
 * The shim records a capture's calls as captured (CAPTURED, tied by call_id to the NCCL or COPY
 * record), the graph each capture made (GRAPH end_capture), the execs made from each graph
 * (instantiate) and each launch. A captured collective thus runs once per launch of any exec of
 * its graph. Its executions are timed by NCCL's KernelCh stamps when there are some: every replay
 * stamps the same (comm, function, seq) again, so the channels of one are cut into executions
 * where a channel starts after all earlier ones stopped. NCCL numbers a communicator's
 * collectives per function (model/kernelch.c's an_nccl_numbers gives each call its number).
 */

static int cmp_call(const void *a, const void *b)
{
	const struct an_gcall *x = a, *y = b;
	return x->call_id < y->call_id ? -1 : x->call_id > y->call_id;
}
static int cmp_stamp(const void *a, const void *b)
{
	const struct an_gstamp *x = a, *y = b;
	AN_CMP_KEY(x, y, comm);
	AN_CMP_KEY(x, y, fn);
	AN_CMP_KEY(x, y, seq);
	return x->s < y->s ? -1 : x->s > y->s;
}

/* The a of the pair whose b is b (graph of an exec), or 0. */
static uint64_t lookup_rev(const struct an_gpair *v, size_t n, uint64_t b)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].b == b)
			return v[i].a;
	return 0;
}

static uint64_t lookup(const struct an_gpair *v, size_t n, uint64_t a)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].a == a)
			return v[i].b;
	return 0;
}

/* Index of the first stamp of (comm, fn, seq) in the sorted stamps, d->nk if none. */
static size_t first_stamp(const struct an_graph_file *d, uint64_t comm, uint64_t fn, uint64_t seq)
{
	struct an_gstamp key = {comm, seq, 0, 0, fn};
	size_t lo = an_lower_bound(d->k, d->nk, sizeof *d->k, &key, cmp_stamp);
	return lo < d->nk && d->k[lo].comm == comm && d->k[lo].fn == fn && d->k[lo].seq == seq ? lo
	                                                                                    : d->nk;
}

/* A call's number under NCCL's per-function numbering (per_fn) or the shim's + dd */
static uint64_t call_num(const struct an_gcall *c, int per_fn, int64_t dd)
{
	if (per_fn && c->nseq == UINT32_MAX)
		return UINT64_MAX;
	return (per_fn ? c->nseq : c->seq) + (uint64_t)dd;
}

/* The numbering (NCCL's per function, or the shim's per communicator, which counts from 1) and
 * offset under which most calls find stamps of their own function; per function wins ties. */
static int64_t seq_offset(const struct an_graph_file *d, int *per_fn)
{
	int64_t best = -1;
	size_t best_n = 0;
	*per_fn = 0;
	for (int pf = 1; pf >= 0; pf--)
		for (int64_t dd = -2; dd <= 2; dd++) {
			size_t n = 0;
			for (size_t i = 0; i < d->ncall; i++) {
				uint64_t fn = an_nccl_func((uint8_t)d->call[i].fn);
				n += first_stamp(d, d->call[i].comm, fn, call_num(&d->call[i], pf, dd)) <
				     d->nk;
			}
			if (n > best_n)
				best = dd, best_n = n, *per_fn = pf;
		}
	return best;
}

/* Each call's NCCL number, from the rank's calls (d->call is sorted by call_id) */
static void number_calls(const struct an_job *job, const struct an_rank *r, struct an_graph_file *d)
{
	struct an_ncclnum *num;
	size_t n = an_nccl_numbers(job, r, &num);
	for (size_t i = 0; n && i < d->ncall; i++) {
		struct an_ncclnum key = {.comm = d->call[i].comm, .seq = (uint32_t)d->call[i].seq};
		const struct an_ncclnum *x = bsearch(&key, num, n, sizeof *num, an_ncclnum_cmp);
		if (x)
			d->call[i].nseq = x->nseq;
	}
	free(num);
}

/* Executions of (comm, seq) cut from its stamps (sorted): adds them to c. */
/* One timed execution of ns more for c: count, sum, min and max. */
static void gcoll_add(struct an_gcoll *c, uint64_t ns)
{
	c->timed++;
	c->gpu_ns += ns;
	if (!c->gpu_min_ns || ns < c->gpu_min_ns)
		c->gpu_min_ns = ns;
	if (ns > c->gpu_max_ns)
		c->gpu_max_ns = ns;
}

static void time_executions(const struct an_graph_file *d, struct an_gcoll *c, uint64_t seq)
{
	uint64_t s = 0, e = 0, fn = an_nccl_func((uint8_t)c->fn);
	for (size_t i = first_stamp(d, c->comm, fn, seq); i <= d->nk; i++) {
		int same = i < d->nk && d->k[i].comm == c->comm && d->k[i].fn == fn && d->k[i].seq == seq;
		if (same && e && d->k[i].s <= e) {
			if (d->k[i].e > e)
				e = d->k[i].e;
			continue;
		}
		if (e)
			gcoll_add(c, e - s);
		if (!same)
			break;
		s = d->k[i].s, e = d->k[i].e;
	}
}

static int cmp_gnode(const void *a, const void *b)
{
	const struct an_gnode *x = a, *y = b;
	AN_CMP_KEY(x, y, graph_id);
	AN_CMP_KEY(x, y, corr);
	return x->node < y->node ? -1 : x->node > y->node;
}

/* First start of each CUPTI graph (for matching to execs by order of first use). */
struct gfirst {
	uint64_t graph_id, first;
	size_t at; /* its first node in d->gn */
};
static int cmp_gfirst(const void *a, const void *b)
{
	const struct gfirst *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* CUPTI's graphs with their first node start, ordered by it (d->gn sorted by graph first). */
static struct gfirst *graphs_by_first_node(const struct an_graph_file *d, size_t *ngf)
{
	struct gfirst *gf = NULL;
	size_t capgf = 0;
	*ngf = 0;
	for (size_t i = 0; i < d->ngn; i++) {
		if (i && d->gn[i].graph_id == d->gn[i - 1].graph_id) {
			if (d->gn[i].s < gf[*ngf - 1].first)
				gf[*ngf - 1].first = d->gn[i].s;
			continue;
		}
		struct gfirst *f = PUSH(gf, *ngf, capgf);
		if (!f)
			break;
		*f = (struct gfirst){d->gn[i].graph_id, d->gn[i].s, i};
	}
	if (*ngf)
		qsort(gf, *ngf, sizeof *gf, cmp_gfirst);
	return gf;
}

/* The execs with their first launch, ordered by it (launch records are in time order per
 * thread; take the minimum). */
static struct an_gpair *execs_by_first_launch(const struct an_graph_file *d, size_t *nex)
{
	struct an_gpair *ex = NULL; /* exec, first launch */
	size_t capex = 0;
	*nex = 0;
	for (size_t l = 0; l < d->nlaunch; l++) {
		size_t k = 0;
		while (k < *nex && ex[k].a != d->launch[l].a)
			k++;
		if (k == *nex) {
			struct an_gpair *p = PUSH(ex, *nex, capex);
			if (p)
				*p = d->launch[l];
		} else if (d->launch[l].b < ex[k].b)
			ex[k].b = d->launch[l].b;
	}
	for (size_t i = 1; i < *nex; i++) /* insertion sort by first launch: few execs */
		for (size_t j = i; j > 0 && ex[j].b < ex[j - 1].b; j--) {
			struct an_gpair t = ex[j];
			ex[j] = ex[j - 1], ex[j - 1] = t;
		}
	return ex;
}

/* A captured collective takes an NCCL kernel node's time unless KernelCh timed it. */
static void time_by_node(struct an_gcoll *c, const struct an_gnode *n)
{
	if (c->source == 1) /* KernelCh times come first */
		return;
	c->source = 2;
	gcoll_add(c, n->e - n->s);
}

/* One execution: the nodes from d->gn[a] on that share its graph and correlation id; its span
 * joins o's. @return the first node after it */
static size_t one_execution(struct an_graphs *g, const struct an_graph_file *d, struct an_ggpu *o,
                            const size_t *cc, size_t ncc, size_t a)
{
	size_t b = a;
	uint64_t s = UINT64_MAX, e = 0;
	size_t nth = 0;
	for (;
	     b < d->ngn && d->gn[b].graph_id == d->gn[a].graph_id && d->gn[b].corr == d->gn[a].corr;
	     b++) {
		const struct an_gnode *n = &d->gn[b];
		if (n->s < s)
			s = n->s;
		if (n->e > e)
			e = n->e;
		if (n->nccl && nth < ncc)
			time_by_node(&g->c[cc[nth++]], n);
	}
	o->executions++;
	uint64_t ns = e > s ? e - s : 0;
	o->span_ns += ns;
	if (!o->span_min_ns || ns < o->span_min_ns)
		o->span_min_ns = ns;
	if (ns > o->span_max_ns)
		o->span_max_ns = ns;
	return b;
}

/* One CUPTI graph matched to exec (0: none): its launches and every execution. @return 0 out of
 * memory */
static int graph_executions(struct an_graphs *g, const struct an_graph_file *d, int rank, size_t c0,
                            const struct gfirst *f, uint64_t exec)
{
	struct an_ggpu *o = PUSH(g->gpu, g->ngpu, g->capgpu);
	if (!o)
		return 0;
	*o = (struct an_ggpu){.rank = rank, .graph_id = f->graph_id, .exec = exec};
	for (size_t l = 0; o->exec && l < d->nlaunch; l++)
		o->launches += d->launch[l].a == o->exec;
	uint64_t graph = o->exec ? lookup_rev(d->inst, d->ninst, o->exec) : 0;
	/* captured collectives of that graph, in call order (c0.. are this rank's) */
	size_t cc[64], ncc = 0;
	for (size_t k = c0; graph && k < g->n && ncc < 64; k++)
		if (g->c[k].graph == graph)
			cc[ncc++] = k;
	for (size_t a = f->at; a < d->ngn && d->gn[a].graph_id == f->graph_id;)
		a = one_execution(g, d, o, cc, ncc, a);
	return 1;
}

/*
 * Executions as CUPTI saw them: the nodes of one CUDA graph launch share its correlation id.
 * CUPTI's graph id is not a handle the trace knows, so CUPTI's graphs are matched to the execs in
 * order of first use (first node start vs first launch); graphs.c says how many executions each
 * showed. A captured collective without KernelCh times takes, in each execution, the time of the
 * k-th NCCL kernel node (node ids follow capture order) when it is the k-th collective of its
 * capture.
 */
static void gpu_executions(struct an_graphs *g, struct an_graph_file *d, int rank, size_t c0)
{
	if (!d->ngn)
		return;
	qsort(d->gn, d->ngn, sizeof *d->gn, cmp_gnode);
	size_t ngf, nex;
	struct gfirst *gf = graphs_by_first_node(d, &ngf);
	struct an_gpair *ex = execs_by_first_launch(d, &nex);
	for (size_t i = 0; i < ngf; i++)
		if (!graph_executions(g, d, rank, c0, &gf[i], i < nex ? ex[i].a : 0))
			break;
	free(gf);
	free(ex);
}

static void apply_rank(const struct an_job *job, const struct an_rank *r, struct an_graphs *g,
                       struct an_graph_file *d, int rank)
{
	size_t c0 = g->n;
	if (d->ncall) /* qsort and bsearch take no NULL array, even empty */
		qsort(d->call, d->ncall, sizeof *d->call, cmp_call);
	if (d->nk)
		qsort(d->k, d->nk, sizeof *d->k, cmp_stamp);
	int per_fn = 0;
	if (d->nk)
		number_calls(job, r, d);
	int64_t dd = d->nk ? seq_offset(d, &per_fn) : 0;
	g->graphs += d->nend;
	g->execs += d->ninst;
	g->launches += d->nlaunch;
	g->captured_copies += d->copies;
	g->captures += d->captures;
	size_t captured = 0;
	for (size_t i = 0; i < d->ncapt; i++) {
		struct an_gcall key = {.call_id = d->capt[i].a};
		struct an_gcall *c =
		    d->ncall ? bsearch(&key, d->call, d->ncall, sizeof *d->call, cmp_call) : NULL;
		if (!c || !c->ok)
			continue;
		c->ok = 2; /* captured: not an eager execution */
		captured++;
		struct an_gcoll *o = PUSH(g->c, g->n, g->cap);
		if (!o)
			break;
		*o = (struct an_gcoll){.comm = c->comm,
		                       .seq = c->seq,
		                       .bytes = c->bytes,
		                       .fn = c->fn,
		                       .rank = rank,
		                       .graph = lookup(d->end, d->nend, d->capt[i].b)};
		for (size_t x = 0; o->graph && x < d->ninst; x++)
			if (d->inst[x].a == o->graph)
				for (size_t l = 0; l < d->nlaunch; l++)
					o->executions += d->launch[l].a == d->inst[x].b;
		uint64_t num = call_num(c, per_fn, dd);
		if (num != UINT64_MAX)
			time_executions(d, o, num);
		o->source = o->timed ? 1 : 0;
		g->executions += o->executions;
	}
	g->captured_colls += captured;
	gpu_executions(g, d, rank, c0);
	for (size_t k = c0; k < g->n; k++) {
		struct an_gcoll *o = &g->c[k];
		if (o->timed >
		    o->executions) /* stamps of eager runs of the same seq: none expected */
			o->timed = o->executions;
		g->timed += o->timed;
	}
	/* every successful call not captured ran when issued (those of the ring left out too) */
	uint64_t marked = 0;
	for (size_t i = 0; i < d->ncall; i++)
		marked += d->call[i].ok == 2;
	g->eager_colls += d->ok_calls - marked;
}

int an_graphs_apply(struct an_job *job)
{
	struct an_graphs *g = NULL;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (!r->ok || (!r->kind_count[NVLP_K_GRAPH] && !r->kind_count[NVLP_K_GPUGRAPH])) {
			an_graphs_file_free(r);
			continue;
		}
		if (!g && !(g = calloc(1, sizeof *g)))
			return -1;
		struct an_graph_file none = {0};
		apply_rank(job, r, g, r->graph_file ? r->graph_file : &none, (int)f);
		an_graphs_file_free(r);
	}
	job->graphs = g;
	return 0;
}

void an_graphs_free(struct an_job *job)
{
	if (job->graphs)
		free(job->graphs->c), free(job->graphs->gpu);
	free(job->graphs);
	job->graphs = NULL;
}

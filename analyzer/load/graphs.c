/* graphs.c: CUDA graph attribution: calls captured into a graph are executed once per launch of an
 * exec of that graph, timed per execution from KernelCh stamps. */
#include <math.h>   /* NAN */
#include <stdlib.h> /* calloc, qsort, bsearch */

#include "load/graphs.h"
#include "util/json.h"
#include "load/kernelch.h"
#include "model/model.h"
#include "load/pio.h" /* an_pio, PIO_ARRC */
#include "model/stages.h" /* PUSH */
#include "nvlp_trace.h"

/*
 * The shim records a capture's calls as captured (CAPTURED, tied by call_id to the NCCL or COPY
 * record), the graph each capture made (GRAPH end_capture), the execs made from each graph
 * (instantiate) and each launch. A captured collective thus runs once per launch of any exec of
 * its graph. Its executions are timed by NCCL's KernelCh stamps when there are some: every replay
 * stamps the same (comm, function, seq) again, so the channels of one are cut into executions
 * where a channel starts after all earlier ones stopped. NCCL numbers a communicator's
 * collectives per function (kernelch.c's an_nccl_numbers gives each call its number).
 */


struct call {
	uint64_t call_id, comm, seq, bytes;
	unsigned fn;
	int ok;
	uint32_t nseq; /* NCCL's number for it (apply_rank), UINT32_MAX unknown */
};
struct pair {
	uint64_t a, b;
};
struct stamp {
	uint64_t comm, seq, s, e, fn;
};
struct gnode {
	uint64_t graph_id, corr, node, s, e;
	int nccl;
};
/* Calls kept before a trace shows anything of graphs (the NCCL record of a call comes just
 * before its CAPTURED record, from the same thread): the latest ones, overwritten in turn, so a
 * trace without graphs stores no call at all. */
#define GRAPH_RING 4096
/* What graphs.c keeps of one trace, filled by ingest's handlers as the file is decoded once
 * (r->graph_file), used and freed by an_graphs_apply. */
struct an_graph_file {
	struct gnode *gn;
	size_t ngn, capgn;
	struct call *call; /* NCCL calls from the first graph record on (and the ring's then) */
	size_t ncall, capcall;
	struct call *ring; /* before that: the latest GRAPH_RING */
	uint64_t nring;    /* calls written to it */
	uint64_t ok_calls; /* collective and p2p calls that returned success, all of them */
	int live;          /* a GRAPH, CAPTURED or GPUGRAPH record was seen */
	struct pair *capt, *end, *inst,
	    *launch; /* call->capture, capture->graph, graph->exec, exec */
	size_t ncapt, capcapt, nend, capend, ninst, capinst, nlaunch, caplaunch;
	struct stamp *k;
	size_t nk, capk;
	uint64_t copies, captures;
};

static void add_pair(struct pair **v, size_t *n, size_t *cap, uint64_t a, uint64_t b)
{
	struct pair *p = PUSH(*v, *n, *cap);
	if (p)
		*p = (struct pair){a, b};
}

static struct an_graph_file *gfile(struct an_rank *r)
{
	if (!r->graph_file)
		r->graph_file = calloc(1, sizeof *r->graph_file);
	return r->graph_file;
}

/* The trace has graphs: from now on every call is kept, the ring's first (oldest first). */
static struct an_graph_file *glive(struct an_rank *r)
{
	struct an_graph_file *d = gfile(r);
	if (!d || d->live)
		return d;
	d->live = 1;
	uint64_t n = d->nring < GRAPH_RING ? d->nring : GRAPH_RING;
	for (uint64_t i = d->nring - n; i < d->nring; i++) {
		struct call *c = PUSH(d->call, d->ncall, d->capcall);
		if (c)
			*c = d->ring[i % GRAPH_RING];
	}
	free(d->ring);
	d->ring = NULL;
	return d;
}

void an_graphs_on_nccl(struct an_rank *r, const struct nvlp_rec_nccl *n)
{
	struct an_graph_file *d = gfile(r);
	if (!d)
		return;
	struct call c = {n->call_id, n->comm, n->seq, n->bytes, (unsigned)n->fn, n->rc == 0, UINT32_MAX};
	d->ok_calls += c.ok;
	if (d->live) {
		struct call *x = PUSH(d->call, d->ncall, d->capcall);
		if (x)
			*x = c;
		return;
	}
	if (!d->ring && !(d->ring = malloc(GRAPH_RING * sizeof *d->ring)))
		return;
	d->ring[d->nring++ % GRAPH_RING] = c;
}

void an_graphs_on_captured(struct an_rank *r, const struct nvlp_rec_captured *c)
{
	struct an_graph_file *d = glive(r);
	if (!d)
		return;
	if (c->kind == NVLP_K_NCCL)
		add_pair(&d->capt, &d->ncapt, &d->capcapt, c->call_id, c->capture_id);
	else
		d->copies++;
}

void an_graphs_on_graph(struct an_rank *r, const struct nvlp_rec_graph *g)
{
	struct an_graph_file *d = glive(r);
	if (!d || g->rc != 0)
		return;
	if (g->op == NVLP_GRAPH_BEGIN_CAPTURE)
		d->captures++;
	else if (g->op == NVLP_GRAPH_END_CAPTURE && g->graph)
		add_pair(&d->end, &d->nend, &d->capend, g->capture_id, g->graph);
	else if (g->op == NVLP_GRAPH_INSTANTIATE && g->exec)
		add_pair(&d->inst, &d->ninst, &d->capinst, g->graph, g->exec);
	else if (g->op == NVLP_GRAPH_LAUNCH)
		add_pair(&d->launch, &d->nlaunch, &d->caplaunch, g->exec, g->t_enter);
}

void an_graphs_on_gpugraph(struct an_rank *r, const struct nvlp_rec_gpugraph *g)
{
	struct an_graph_file *d = glive(r);
	if (!d || g->dur > AN_KCH_MAX_NS)
		return;
	struct gnode *n = PUSH(d->gn, d->ngn, d->capgn);
	if (n)
		*n = (struct gnode){g->graph_id,
		                    g->correlation,
		                    g->node_id,
		                    g->start,
		                    g->start + g->dur,
		                    g->kind == NVLP_K_KERNEL && (g->flags & NVLP_KERNEL_F_NCCL)};
}

void an_graphs_on_kch(struct an_rank *r, const struct nvlp_rec_kch *k)
{
	if (k->flags || !k->gpu_start || k->gpu_stop < k->gpu_start ||
	    k->gpu_stop - k->gpu_start > AN_KCH_MAX_NS)
		return; /* dropped as kernelch.c drops them */
	struct an_graph_file *d = gfile(r);
	struct stamp *s = d ? PUSH(d->k, d->nk, d->capk) : NULL;
	if (s)
		*s = (struct stamp){k->comm, k->seq, k->gpu_start, k->gpu_stop, an_nccl_func((uint8_t)k->fn)};
}

void an_graphs_file_io(struct an_pio *io, struct an_rank *r)
{
	uint8_t have = r->graph_file != NULL;
	an_pio_bytes(io, &have, 1);
	if (io->rd)
		r->graph_file = have && !io->err ? malloc(sizeof *r->graph_file) : NULL;
	struct an_graph_file *d = r->graph_file;
	if (!d)
		return;
	an_pio_bytes(io, d, sizeof *d);
	PIO_ARRC(io, d->gn, d->ngn, d->capgn);
	PIO_ARRC(io, d->call, d->ncall, d->capcall);
	size_t nring = d->ring ? GRAPH_RING : 0; /* a ring holds GRAPH_RING calls or none */
	PIO_ARR(io, d->ring, nring);
	if (nring && nring != GRAPH_RING)
		io->err = 1;
	PIO_ARRC(io, d->capt, d->ncapt, d->capcapt);
	PIO_ARRC(io, d->end, d->nend, d->capend);
	PIO_ARRC(io, d->inst, d->ninst, d->capinst);
	PIO_ARRC(io, d->launch, d->nlaunch, d->caplaunch);
	PIO_ARRC(io, d->k, d->nk, d->capk);
}

void an_graphs_file_free(struct an_rank *r)
{
	struct an_graph_file *d = r->graph_file;
	if (d) {
		free(d->call), free(d->ring), free(d->capt), free(d->end), free(d->inst);
		free(d->launch), free(d->k), free(d->gn);
	}
	free(d);
	r->graph_file = NULL;
}

static int cmp_call(const void *a, const void *b)
{
	const struct call *x = a, *y = b;
	return x->call_id < y->call_id ? -1 : x->call_id > y->call_id;
}
static int cmp_stamp(const void *a, const void *b)
{
	const struct stamp *x = a, *y = b;
	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	if (x->fn != y->fn)
		return x->fn < y->fn ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->s < y->s ? -1 : x->s > y->s;
}

/* The a of the pair whose b is b (graph of an exec), or 0. */
static uint64_t lookup_rev(const struct pair *v, size_t n, uint64_t b)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].b == b)
			return v[i].a;
	return 0;
}

static uint64_t lookup(const struct pair *v, size_t n, uint64_t a)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].a == a)
			return v[i].b;
	return 0;
}

/* Index of the first stamp of (comm, fn, seq) in the sorted stamps, d->nk if none. */
static size_t first_stamp(const struct an_graph_file *d, uint64_t comm, uint64_t fn, uint64_t seq)
{
	struct stamp key = {comm, seq, 0, 0, fn};
	size_t lo = 0, hi = d->nk;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cmp_stamp(&d->k[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < d->nk && d->k[lo].comm == comm && d->k[lo].fn == fn && d->k[lo].seq == seq ? lo
	                                                                                    : d->nk;
}

/* A call's number under NCCL's per-function numbering (per_fn) or the shim's + dd */
static uint64_t call_num(const struct call *c, int per_fn, int64_t dd)
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
	const struct gnode *x = a, *y = b;
	if (x->graph_id != y->graph_id)
		return x->graph_id < y->graph_id ? -1 : 1;
	if (x->corr != y->corr)
		return x->corr < y->corr ? -1 : 1;
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
static struct pair *execs_by_first_launch(const struct an_graph_file *d, size_t *nex)
{
	struct pair *ex = NULL; /* exec, first launch */
	size_t capex = 0;
	*nex = 0;
	for (size_t l = 0; l < d->nlaunch; l++) {
		size_t k = 0;
		while (k < *nex && ex[k].a != d->launch[l].a)
			k++;
		if (k == *nex)
			add_pair(&ex, nex, &capex, d->launch[l].a, d->launch[l].b);
		else if (d->launch[l].b < ex[k].b)
			ex[k].b = d->launch[l].b;
	}
	for (size_t i = 1; i < *nex; i++) /* insertion sort by first launch: few execs */
		for (size_t j = i; j > 0 && ex[j].b < ex[j - 1].b; j--) {
			struct pair t = ex[j];
			ex[j] = ex[j - 1], ex[j - 1] = t;
		}
	return ex;
}

/* A captured collective takes an NCCL kernel node's time unless KernelCh timed it. */
static void time_by_node(struct an_gcoll *c, const struct gnode *n)
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
		const struct gnode *n = &d->gn[b];
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
	struct pair *ex = execs_by_first_launch(d, &nex);
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
		struct call key = {.call_id = d->capt[i].a};
		struct call *c =
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

void an_graphs_report_text(FILE *o, const struct an_job *job)
{
	const struct an_graphs *g = job->graphs;
	if (!g)
		return;
	fprintf(
	    o,
	    "CUDA graphs: %llu captures, %llu graphs, %llu execs, %llu launches; %llu collective "
	    "calls captured (recorded at capture, not executed) ran %llu times in graph replays "
	    "(%llu of them timed), beside %llu executed when called",
	    (unsigned long long)g->captures, (unsigned long long)g->graphs,
	    (unsigned long long)g->execs, (unsigned long long)g->launches,
	    (unsigned long long)g->captured_colls, (unsigned long long)g->executions,
	    (unsigned long long)g->timed, (unsigned long long)g->eager_colls);
	if (g->captured_copies)
		fprintf(o, "; %llu copies captured", (unsigned long long)g->captured_copies);
	fputc('\n', o);
	for (size_t i = 0; i < g->n && i < 20; i++) {
		const struct an_gcoll *c = &g->c[i];
		fprintf(o, "  rank %d %s seq %llu (%llu B, comm %016llx): %llu executions", c->rank,
		        nvlp_nccl_fn_name(c->fn), (unsigned long long)c->seq,
		        (unsigned long long)c->bytes, (unsigned long long)c->comm,
		        (unsigned long long)c->executions);
		if (c->timed)
			fprintf(o, ", %llu timed (%s): %.1f us mean (%.1f-%.1f)",
			        (unsigned long long)c->timed,
			        c->source == 1 ? "KernelCh" : "CUPTI kernels",
			        (double)c->gpu_ns / (double)c->timed / 1e3, c->gpu_min_ns / 1e3,
			        c->gpu_max_ns / 1e3);
		else
			fprintf(o,
			        ", no per-execution GPU time (no NCCL kernel in the graph's CUPTI "
			        "records, no KernelCh stamps)");
		fputc('\n', o);
	}
	if (g->n > 20)
		fprintf(o, "  ... %zu more captured collectives\n", g->n - 20);
	for (size_t i = 0; i < g->ngpu && i < 20; i++) {
		const struct an_ggpu *x = &g->gpu[i];
		fprintf(o, "  rank %d graph %llu on the GPU: %llu executions", x->rank,
		        (unsigned long long)x->graph_id, (unsigned long long)x->executions);
		if (x->exec)
			fprintf(o, " (of %llu launches)", (unsigned long long)x->launches);
		else
			fprintf(
			    o,
			    " (no launch intercepted: another runtime or the driver launched it)");
		if (x->executions)
			fprintf(o, ", %.1f us each (%.1f-%.1f), first node start to last node end",
			        (double)x->span_ns / (double)x->executions / 1e3,
			        x->span_min_ns / 1e3, x->span_max_ns / 1e3);
		fputc('\n', o);
	}
}

void an_graphs_json(struct jw *w, const struct an_job *job)
{
	const struct an_graphs *g = job->graphs;
	if (!g) {
		jw_null(w, "graphs");
		return;
	}
	jw_obj(w, "graphs");
	jw_int(w, "captures", (int64_t)g->captures);
	jw_int(w, "graphs", (int64_t)g->graphs);
	jw_int(w, "execs", (int64_t)g->execs);
	jw_int(w, "launches", (int64_t)g->launches);
	jw_int(w, "captured_collectives", (int64_t)g->captured_colls);
	jw_int(w, "captured_copies", (int64_t)g->captured_copies);
	jw_int(w, "replay_executions", (int64_t)g->executions);
	jw_int(w, "replay_executions_timed", (int64_t)g->timed);
	jw_int(w, "eager_executions", (int64_t)g->eager_colls);
	jw_arr(w, "captured");
	for (size_t i = 0; i < g->n; i++) {
		const struct an_gcoll *c = &g->c[i];
		jw_obj(w, NULL);
		jw_int(w, "rank", c->rank);
		jw_str(w, "function", nvlp_nccl_fn_name(c->fn));
		jw_int(w, "seq", (int64_t)c->seq);
		jw_int(w, "bytes", (int64_t)c->bytes);
		jw_int(w, "executions", (int64_t)c->executions);
		jw_int(w, "timed", (int64_t)c->timed);
		jw_num(w, "gpu_mean_us",
		       c->timed ? (double)c->gpu_ns / (double)c->timed / 1e3 : NAN);
		jw_num(w, "gpu_min_us", c->timed ? c->gpu_min_ns / 1e3 : NAN);
		jw_num(w, "gpu_max_us", c->timed ? c->gpu_max_ns / 1e3 : NAN);
		jw_str(w, "time_source",
		       c->source == 1   ? "kernelch"
		       : c->source == 2 ? "cupti"
		                        : "none");
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_arr(w, "gpu");
	for (size_t i = 0; i < g->ngpu; i++) {
		const struct an_ggpu *x = &g->gpu[i];
		jw_obj(w, NULL);
		jw_int(w, "rank", x->rank);
		jw_int(w, "graph_id", (int64_t)x->graph_id);
		jw_bool(w, "launch_seen", x->exec != 0);
		jw_int(w, "launches", (int64_t)x->launches);
		jw_int(w, "executions", (int64_t)x->executions);
		jw_num(w, "span_mean_us",
		       x->executions ? (double)x->span_ns / (double)x->executions / 1e3 : NAN);
		jw_num(w, "span_min_us", x->executions ? x->span_min_ns / 1e3 : NAN);
		jw_num(w, "span_max_us", x->executions ? x->span_max_ns / 1e3 : NAN);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

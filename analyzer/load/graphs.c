/* graphs.c: what CUDA graph attribution keeps of one trace as ingest decodes it (r->graph_file):
 * the NCCL calls (a ring of the latest until the trace shows graphs), captures, graphs, execs,
 * launches, CUPTI's graph nodes and the KCH stamps; model/graphs.c attributes them. */
#include <stdlib.h> /* calloc, malloc */

#include "load/graphs.h"
#include "load/kernelch.h" /* an_nccl_func, AN_KCH_MAX_NS */
#include "load/pio.h"      /* an_pio, PIO_ARRC */
#include "model/model.h"
#include "util/containers.h" /* PUSH */
#include "nvlp_trace.h"

/* Calls kept before a trace shows anything of graphs (the NCCL record of a call comes just
 * before its CAPTURED record, from the same thread): the latest ones, overwritten in turn, so a
 * trace without graphs stores no call at all. */
#define GRAPH_RING 4096

static void add_pair(struct an_gpair **v, size_t *n, size_t *cap, uint64_t a, uint64_t b)
{
	struct an_gpair *p = PUSH(*v, *n, *cap);
	if (p)
		*p = (struct an_gpair){a, b};
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
		struct an_gcall *c = PUSH(d->call, d->ncall, d->capcall);
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
	struct an_gcall c = {n->call_id,      n->comm,    n->seq,    n->bytes,
	                     (unsigned)n->fn, n->rc == 0, UINT32_MAX};
	d->ok_calls += c.ok;
	if (d->live) {
		struct an_gcall *x = PUSH(d->call, d->ncall, d->capcall);
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
	struct an_gnode *n = PUSH(d->gn, d->ngn, d->capgn);
	if (n)
		*n = (struct an_gnode){g->graph_id,
		                       g->correlation,
		                       g->node_id,
		                       g->start,
		                       g->start + g->dur,
		                       g->kind == NVLP_K_KERNEL && (g->flags & NVLP_KERNEL_F_NCCL)};
}

void an_graphs_on_kch(struct an_rank *r, const struct nvlp_rec_kch *k)
{
	if (k->flags || an_kch_stamps(k->gpu_start, k->gpu_stop) != AN_KCH_OK)
		return; /* dropped as kernelch.c drops them */
	struct an_graph_file *d = gfile(r);
	struct an_gstamp *s = d ? PUSH(d->k, d->nk, d->capk) : NULL;
	if (s)
		*s = (struct an_gstamp){k->comm, k->seq, k->gpu_start, k->gpu_stop,
		                        an_nccl_func((uint8_t)k->fn)};
}

void an_graphs_on_kcoll(struct an_rank *r, const struct nvlp_rec_kcoll *k,
                        const struct an_kcoll_split *x)
{
	if (!x->good || an_kch_stamps(k->gpu_start, k->gpu_stop) != AN_KCH_OK)
		return; /* dropped as kernelch.c drops them */
	struct an_graph_file *d = gfile(r);
	struct an_gstamp *s = d ? PUSH(d->k, d->nk, d->capk) : NULL;
	if (s)
		*s = (struct an_gstamp){k->comm, k->seq, k->gpu_start, k->gpu_stop,
		                        an_nccl_func((uint8_t)k->fn)};
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

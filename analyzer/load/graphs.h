/* graphs.h: the load layer's part of CUDA graph attribution: what ingest keeps of one trace's
 * NCCL, CAPTURED, GRAPH, GPUGRAPH and KCH records (r->graph_file), which the attribution stage
 * (model/graphs.h) reads, and the handlers that fill it. */
#ifndef AN_GRAPHS_H
#define AN_GRAPHS_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

struct an_rank;
struct an_pio;
struct nvlp_rec_nccl;
struct nvlp_rec_captured;
struct nvlp_rec_graph;
struct nvlp_rec_gpugraph;
struct nvlp_rec_kch;
struct nvlp_rec_kcoll;
struct an_kcoll_split;

/* One NCCL call (collective or p2p) as its record gave it. */
struct an_gcall {
	uint64_t call_id, comm, seq, bytes;
	unsigned fn;
	int ok;
	uint32_t nseq; /* NCCL's number for it (model/graphs.c), UINT32_MAX unknown */
};
/* Two handles or times tied together (call->capture, capture->graph, graph->exec, exec->time). */
struct an_gpair {
	uint64_t a, b;
};
/* One KCH channel's stamps (fn: an_nccl_func of the record's). */
struct an_gstamp {
	uint64_t comm, seq, s, e, fn;
};
/* One node of a graph as CUPTI saw it run (GPUGRAPH); nccl: an NCCL kernel. */
struct an_gnode {
	uint64_t graph_id, corr, node, s, e;
	int nccl;
};
/* What graphs.c keeps of one trace, filled by ingest's handlers as the file is decoded once
 * (r->graph_file), used and freed by an_graphs_apply. */
struct an_graph_file {
	struct an_gnode *gn;
	size_t ngn, capgn;
	struct an_gcall *call; /* NCCL calls from the first graph record on (and the ring's then) */
	size_t ncall, capcall;
	struct an_gcall *ring; /* before that: the latest GRAPH_RING (load/graphs.c) */
	uint64_t nring;        /* calls written to it */
	uint64_t ok_calls;     /* collective and p2p calls that returned success, all of them */
	int live;              /* a GRAPH, CAPTURED or GPUGRAPH record was seen */
	struct an_gpair *capt, *end, *inst,
	    *launch; /* call->capture, capture->graph, graph->exec, exec */
	size_t ncapt, capcapt, nend, capend, ninst, capinst, nlaunch, caplaunch;
	struct an_gstamp *k;
	size_t nk, capk;
	uint64_t copies, captures;
};

/* ---- ingest's handlers: what one trace's NCCL (collective and p2p calls), CAPTURED, GRAPH,
 * GPUGRAPH and KCH records tell graphs.c, kept in r->graph_file (the file is decoded once) ---- */
/*! An NCCL call record: kept (in the ring until the trace shows graphs), successes counted. */
void an_graphs_on_nccl(struct an_rank *r, const struct nvlp_rec_nccl *n);
/*! A CAPTURED record: an NCCL call tied to its capture, or one more captured copy. */
void an_graphs_on_captured(struct an_rank *r, const struct nvlp_rec_captured *c);
/*! A GRAPH record: a capture begun, the graph it made, an exec instantiated, a launch. */
void an_graphs_on_graph(struct an_rank *r, const struct nvlp_rec_graph *g);
/*! A GPUGRAPH record: one graph node as CUPTI saw it run. */
void an_graphs_on_gpugraph(struct an_rank *r, const struct nvlp_rec_gpugraph *g);
/*! A KCH record: its stamps, for per-execution times (dropped as kernelch.c drops them). */
void an_graphs_on_kch(struct an_rank *r, const struct nvlp_rec_kch *k);
/*! A KCOLL record (x: its split, load/kernelch.h): one execution's span of the channels it
 * folds (their stamps overlap). */
void an_graphs_on_kcoll(struct an_rank *r, const struct nvlp_rec_kcoll *k,
                        const struct an_kcoll_split *x);
/*! r->graph_file freed (NULL after). */
void an_graphs_file_free(struct an_rank *r);
/*! r's graph records' state written to or read from a partial (partial.h) */
void an_graphs_file_io(struct an_pio *io, struct an_rank *r);

#endif /* AN_GRAPHS_H */

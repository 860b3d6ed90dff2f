/* graphs.h: CUDA graph attribution (GRAPH/CAPTURED records): captured calls executed once per
 * replay of their graph. */
#ifndef AN_GRAPHS_H
#define AN_GRAPHS_H

#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */

struct an_job;
struct an_rank;
struct jw;
struct nvlp_rec_nccl;
struct nvlp_rec_captured;
struct nvlp_rec_graph;
struct nvlp_rec_gpugraph;
struct nvlp_rec_kch;

/* One collective call captured into a graph, with its executions (replays of that graph). */
struct an_gcoll {
	uint64_t comm, seq, bytes; /* the shim's communicator hash, its sequence, nccl-tests S */
	unsigned fn;               /* enum nvlp_nccl_fn */
	int rank;                  /* process index in the job */
	uint64_t graph;            /* the graph it was captured into (trace's handle) */
	uint64_t executions;       /* launches of execs instantiated from that graph */
	uint64_t timed, gpu_ns, gpu_min_ns, gpu_max_ns; /* executions with a GPU time */
	int source; /* of the times: 0 none, 1 KernelCh stamps, 2 CUPTI kernels of the graph */
};

/* One CUDA graph as CUPTI saw it run (GPUGRAPH records), tied to an exec of the trace. */
struct an_ggpu {
	int rank;
	uint64_t graph_id;   /* CUPTI's */
	uint64_t exec;       /* the exec it was matched to (order of first use), 0 none */
	uint64_t launches;   /* of that exec */
	uint64_t executions; /* distinct launch correlations seen on the GPU */
	uint64_t span_ns, span_min_ns, span_max_ns; /* first node start to last node end */
};

struct an_graphs {
	uint64_t captures, graphs, execs, launches; /* across the job */
	uint64_t captured_colls, captured_copies;   /* calls recorded at capture, not executed */
	uint64_t executions, timed;                 /* of captured collectives, by replays */
	uint64_t eager_colls;                       /* collective calls executed when issued */
	struct an_gcoll *c;
	size_t n, cap;
	struct an_ggpu *gpu; /* graphs CUPTI saw executed */
	size_t ngpu, capgpu;
};

/* ---- ingest's handlers: what one trace's NCCL (collective and p2p calls), CAPTURED, GRAPH,
 * GPUGRAPH and KCH records tell graphs.c, kept in r->graph_file (the file is decoded once) ---- */
void an_graphs_on_nccl(struct an_rank *r, const struct nvlp_rec_nccl *n);
void an_graphs_on_captured(struct an_rank *r, const struct nvlp_rec_captured *c);
void an_graphs_on_graph(struct an_rank *r, const struct nvlp_rec_graph *g);
void an_graphs_on_gpugraph(struct an_rank *r, const struct nvlp_rec_gpugraph *g);
void an_graphs_on_kch(struct an_rank *r, const struct nvlp_rec_kch *k);
void an_graphs_file_free(struct an_rank *r);
struct an_pio;
/*! r's graph records' state written to or read from a partial (partial.h) */
void an_graphs_file_io(struct an_pio *io, struct an_rank *r);

/*! From the GRAPH/CAPTURED records (and KCH, for per-execution times) of every trace that has
 * GRAPH or GPUGRAPH records: results in job->graphs (NULL when no trace has any); each trace's
 * r->graph_file is freed. */
int an_graphs_apply(struct an_job *job); /* @return 0, -1 out of memory */
void an_graphs_free(struct an_job *job);
/*! Report lines (nothing without graphs) and the JSON object "graphs" (null without graphs). */
void an_graphs_report_text(FILE *o, const struct an_job *job);
void an_graphs_json(struct jw *w, const struct an_job *job);

#endif /* AN_GRAPHS_H */

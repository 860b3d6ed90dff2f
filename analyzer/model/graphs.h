/* graphs.h: the CUDA graph attribution stage (GRAPH/CAPTURED records, from load/graphs.h):
 * captured calls executed once per replay of their graph; its results (job->graphs). */
#ifndef NVLP_AN_MODEL_GRAPHS_H
#define NVLP_AN_MODEL_GRAPHS_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

struct an_job;

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

/*! From the GRAPH/CAPTURED records (and KCH, for per-execution times) of every trace that has
 * GRAPH or GPUGRAPH records: results in job->graphs (NULL when no trace has any); each trace's
 * r->graph_file is freed. */
int an_graphs_apply(struct an_job *job); /* @return 0, -1 out of memory */
/*! job->graphs freed (NULL after). */
void an_graphs_free(struct an_job *job);

#endif /* NVLP_AN_MODEL_GRAPHS_H */

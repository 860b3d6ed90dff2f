/* mkgraph.c: writes a synthetic one-rank trace of a CUDA graph whose replays CUPTI traced (GPUGRAPH
 * records) and NCCL gave no KernelCh stamps, for the graph attribution tests. */
#include <stdio.h>  /* perror */
#include <string.h> /* strlen */

#include "nvlp_trace.h"

/*
 * Two eager all-reduces, a capture holding all-reduce (seq 2) then all-gather (seq 3), and
 * REPLAYS launches. In replay i CUPTI ran: a compute kernel (node 1), the all-reduce's NCCL kernel
 * (node 2, 10 + i us), the all-gather's (node 3, 20 us); all with the launch's correlation.
 * A second CUPTI graph (id 9) ran twice with no launch in the trace (another runtime's).
 */
#define REPLAYS 4
int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	char hdr[256];
	snprintf(hdr, sizeof hdr,
	         "format=%u\nversion=0.1.0\nhost=node-a\npid=7\nppid=1\nrank=0\n"
	         "local_rank=0\nworld_size=1\ncmdline=graph\nt_real=1764439857000000000\n"
	         "t_mono=1000000000\n",
	         NVLP_FORMAT_VERSION);
	const uint64_t t0 = 1000000000ull;
	nvlp_writer *w = nvlp_writer_open(argv[1], hdr, t0, 1764439857000000000ull);
	if (!w) {
		perror(argv[1]);
		return 1;
	}
	struct nvlp_rec_string s = {.id = 1};
	nvlp_writer_add(w, NVLP_K_STRING, &s, "ncclDevKernel_AllReduce", 23);
	uint64_t t = t0 + 1000, id = 1;
	struct nvlp_rec_nccl c = {.fn = NVLP_NCCL_ALL_REDUCE,
	                          .tid = 5,
	                          .device = 0,
	                          .stream = 0x77,
	                          .count = 256,
	                          .dtype = 7,
	                          .bytes = 1024,
	                          .op = 0,
	                          .peer = (uint64_t)-1,
	                          .comm = 0xc0ffee00,
	                          .rank = 0,
	                          .nranks = 1};
	for (int i = 0; i < 2; i++) { /* eager */
		c.t_enter = t += 1000, c.dur = 500, c.seq = (uint64_t)i + 1, c.call_id = id++;
		nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
	}
	struct nvlp_rec_graph g = {
	    .op = NVLP_GRAPH_BEGIN_CAPTURE, .tid = 5, .stream = 0x77, .capture_id = 3};
	g.t_enter = t += 1000, g.call_id = id++;
	nvlp_writer_add(w, NVLP_K_GRAPH, &g, NULL, 0);
	for (int i = 0; i < 2; i++) {
		c.fn = i ? NVLP_NCCL_ALL_GATHER : NVLP_NCCL_ALL_REDUCE;
		c.t_enter = t += 1000, c.seq = (uint64_t)i + 3, c.call_id = id++;
		nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
		struct nvlp_rec_captured cp = {
		    .call_id = c.call_id, .capture_id = 3, .stream = 0x77, .kind = NVLP_K_NCCL};
		nvlp_writer_add(w, NVLP_K_CAPTURED, &cp, NULL, 0);
	}
	g.op = NVLP_GRAPH_END_CAPTURE, g.graph = 0x6a00, g.t_enter = t += 1000, g.call_id = id++;
	nvlp_writer_add(w, NVLP_K_GRAPH, &g, NULL, 0);
	g.op = NVLP_GRAPH_INSTANTIATE, g.stream = 0, g.capture_id = 0, g.exec = 0xe000;
	g.t_enter = t += 1000, g.call_id = id++;
	nvlp_writer_add(w, NVLP_K_GRAPH, &g, NULL, 0);
	for (int i = 0; i < REPLAYS; i++) {
		g.op = NVLP_GRAPH_LAUNCH, g.graph = 0, g.stream = 0x77, g.t_enter = t += 100000;
		g.call_id = id++;
		nvlp_writer_add(w, NVLP_K_GRAPH, &g, NULL, 0);
		uint64_t s0 = t + 5000, corr = 500 + (uint64_t)i;
		struct nvlp_rec_gpugraph n[3] = {
		    {NVLP_K_KERNEL, 4, 1, corr, s0, 3000, 0, 13, 0},
		    {NVLP_K_KERNEL, 4, 2, corr, s0 + 3000, 10000 + 1000 * (uint64_t)i, 0, 13, 1},
		    {NVLP_K_KERNEL, 4, 3, corr, s0 + 20000, 20000, 0, 13, 1}};
		for (int k = 2; k >= 0; k--) /* CUPTI's order is not the nodes' */
			nvlp_writer_add(w, NVLP_K_GPUGRAPH, &n[k], NULL, 0);
	}
	for (int i = 0; i < 2; i++) {
		struct nvlp_rec_gpugraph o = {
		    NVLP_K_GPUCOPY, 9, 1, 900 + (uint64_t)i, t += 50000, 7000, 0, 14, 0};
		nvlp_writer_add(w, NVLP_K_GPUGRAPH, &o, NULL, 0);
	}
	struct nvlp_rec_end e = {.t = t + 1000, .records = 0, .reason = NVLP_END_EXIT};
	nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
	return nvlp_writer_close(w) != 0;
}

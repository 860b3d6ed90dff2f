/* graphs_print.c: the CUDA graph attribution (model/graphs.c's job->graphs) in the text report
 * and as report --json's "graphs" object. */
#include <math.h>  /* NAN */
#include <stdio.h> /* fprintf */

#include "model/graphs.h"
#include "model/model.h"
#include "out/graphs_print.h"
#include "util/json.h"
#include "nvlp_trace.h" /* nvlp_nccl_fn_name */

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

/* report_json.c: the JSON report (analyzer/REPORT_JSON.md): one object, printed from the figures
 * model/summary.c computed, in the order the text report shows them. */
#include <math.h>   /* NAN */
#include <stdint.h> /* int64_t */

#include "findings/story.h"
#include "model/cost.h"     /* an_cost_json */
#include "model/kernelch.h" /* struct an_kch: the kernel windows */
#include "model/rankview.h" /* an_skew_json */
#include "model/summary.h"
#include "nvlp_trace.h"
#include "out/graphs_print.h"   /* an_graphs_json */
#include "out/kernelch_print.h" /* an_kch_json */
#include "out/report.h"
#include "util/diag.h"
#include "util/json.h"

/* The "job" object: the summary, with what data the traces hold. */
static void json_job(struct jw *w, const struct an_job *job, const struct an_tables *t)
{
	const struct an_summary *s = &t->s;
	jw_obj(w, "job");
	jw_int(w, "processes", (int64_t)job->nok);
	jw_int(w, "hosts", s->hosts);
	jw_num(w, "wall_ms", s->wall_ms);
	jw_int(w, "steps", (int64_t)job->steps);
	jw_num(w, "step_ms", s->step_ms);
	jw_str(w, "step_source", job->step_source ? job->step_source : "none");
	jw_str(w, "steps_why", job->steps_why);
	jw_bool(w, "gpu_data", job->have_gpu);
	jw_bool(w, "link_counters", job->have_links);
	jw_bool(w, "topology", job->have_topo);
	if (job->cupti_detached) { /* NVLPROF_CUPTI=startup; absent otherwise */
		jw_obj(w, "cupti_detached");
		jw_int(w, "processes", job->cupti_detached);
		jw_num(w, "latest_after_s", (double)job->cupti_detach_ms / 1e3);
		jw_int(w, "attached_again", job->cupti_reattached);
		jw_obj_end(w);
	}
	if (job->cupti_kept_unsafe) /* NVLPROF_CUPTI=startup refused on CUPTI 13.0 */
		jw_int(w, "cupti_kept_attached_unsafe_finalize", job->cupti_kept_unsafe);
	if (job->cupti_lazy || job->cupti_lazy_needed) { /* NVLPROF_CUPTI=lazy; absent otherwise */
		jw_obj(w, "cupti_lazy");
		jw_int(w, "not_attached", job->cupti_lazy);
		jw_int(w, "attached_for_managed", job->cupti_reattached);
		jw_int(w, "managed_not_measured", job->cupti_lazy_um);
		jw_int(w, "attached_from_start", job->cupti_lazy_needed);
		jw_obj_end(w);
	}
	double pk = t->peak;
	jw_num(w, "nvlink_peak_gbps", pk > 0 ? pk / 1e9 : NAN);
	if (pk > 0)
		jw_str(w, "peak_basis", an_peak_basis());
	jw_num(w, "comm_ms_per_rank", s->comm_ms);
	jw_num(w, "comm_in_steps_ms_per_rank", s->comm_win_ms);
	jw_num(w, "comm_host_ms_per_rank", s->comm_host_ms);
	jw_str(w, "collective_gpu_times", job->have_gpu && job->have_kch_gpu ? "cupti+kernel_channels"
	                                  : job->have_gpu                   ? "cupti"
	                                  : job->have_kch_gpu ? "kernel_channels"
	                                                      : "none");
	jw_str(w, "comm_time_source", !(job->have_gpu || job->have_kch_gpu) || s->comm_host ? "host"
	                              : s->comm_host_ms > 0          ? "gpu+host"
	                                                             : "gpu");
	jw_num(w, "exposed_ms_per_rank", s->exposed_ms);
	jw_num(w, "exposed_share", s->exposed_share);
	jw_str(w, "exposed_over", job->kch && job->kch->windows && job->have_gpu ? "kernel_windows"
	                          : job->win1                                   ? "steps"
	                                                                        : "trace");
	jw_int(w, "matched_collectives", (int64_t)job->matched_colls);
	an_skew_json(w, job, t->nranks);
	jw_num(w, "first_collective_skew_ms", job->first_comm >= 0 ? job->first_skew_ns / 1e6 : NAN);
	jw_num(w, "clock_correction_ms", job->max_refine_ns / 1e6);
	an_cost_json(w, job);
	jw_obj_end(w);
}

static void json_collectives(struct jw *w, const struct an_job *job, const struct an_tables *t)
{
	jw_arr(w, "collectives");
	for (size_t i = 0; i < job->naggs; i++) {
		const struct an_arow r = t->coll[i];
		char h[32];
		snprintf(h, sizeof h, "%016llx", (unsigned long long)r.c->hash);
		jw_obj(w, NULL);
		jw_str(w, "comm", h);
		jw_str(w, "comm_name", r.c->name);
		jw_str(w, "collective", nvlp_nccl_fn_name(r.a->fn));
		jw_int(w, "nranks", r.c->nranks);
		jw_int(w, "calls", (int64_t)r.a->calls);
		jw_num(w, "calls_per_rank", r.calls_per_rank);
		jw_num(w, "bytes", (double)r.a->bytes);
		jw_num(w, "bytes_per_call", r.bytes_per_call);
		jw_num(w, "time_ms_per_rank", r.time_ms_per_rank);
		jw_str(w, "time_source", r.host_time ? "host" : "gpu");
		jw_num(w, "algbw_gbps", r.algbw);
		jw_num(w, "busbw_gbps", r.busbw);
		jw_num(w, "peak_share", r.peak_share);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_ranks(struct jw *w, const struct an_tables *t)
{
	jw_arr(w, "ranks");
	for (size_t i = 0; i < t->nranks; i++) {
		const struct an_rrow *rw = &t->ranks[i];
		const struct an_rank *r = rw->r;
		const struct an_rank_x *x = rw->x;
		int gpu = rw->gpu;
		double wall = rw->wall_ns, ex = rw->exposed_ns, span = rw->span_ns;
		jw_obj(w, NULL);
		jw_int(w, "rank", rw->rank);
		jw_str(w, "host", r->host);
		jw_int(w, "pid", r->pid);
		jw_bool(w, "complete", r->complete);
		jw_num(w, "wall_ms", wall / 1e6);
		jw_num(w, "comm_ms", rw->comm.ns / 1e6);
		jw_num(w, "comm_host_ms", rw->comm.host / 1e6);
		jw_str(w, "comm_time_source", rw->comm.host_only ? "host"
		                              : rw->comm.host > 0 ? "gpu+host"
		                                                  : "gpu");
		jw_num(w, "exposed_ms", gpu ? ex / 1e6 : NAN);
		jw_num(w, "exposed_share", gpu && span > 0 ? ex / span : NAN);
		jw_int(w, "collectives", (int64_t)x->colls);
		jw_int(w, "arrived_last", (int64_t)x->last_count);
		jw_num(w, "median_lead_ms", x->median_lead_ns / 1e6);
		jw_num(w, "mean_lead_ms",
		       x->last_count ? x->lead_ns_sum / x->last_count / 1e6 : 0);
		jw_num(w, "waited_ms", x->wait_ns / 1e6);
		jw_num(w, "waited_first_collective_ms", x->first_wait_ns / 1e6);
		jw_num(w, "wait_caused_ms", x->caused_wait_ns / 1e6);
		jw_num(w, "clock_correction_ms", (double)r->refine / 1e6);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_others(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "other_processes");
	for (size_t i = job->nranks; i < job->nranks + job->nothers; i++) {
		const struct an_rank *r = &job->ranks[i];
		char cmd[256];
		const char *c = an_header_get(r, NVLP_HDR_CMDLINE, cmd, sizeof cmd);
		jw_obj(w, NULL);
		jw_str(w, "host", r->host);
		jw_int(w, "pid", r->pid);
		jw_str(w, "cmdline", c ? c : "");
		jw_str(w, "role", "not a rank: no GPU work, no NCCL call");
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

/* per rank x communicator x function: the attribution behind the "collectives" table */
static void json_by_rank(struct jw *w, const struct an_job *job, const struct an_tables *t)
{
	jw_arr(w, "collectives_by_rank");
	for (size_t i = 0; i < t->nby_rank; i++) {
		const struct an_crow *x = &t->by_rank[i];
		char h[32];
		snprintf(h, sizeof h, "%016llx", (unsigned long long)job->comms[x->comm].hash);
		jw_obj(w, NULL);
		jw_int(w, "rank", x->rank);
		jw_str(w, "comm", h);
		jw_str(w, "collective", nvlp_nccl_fn_name(x->fn));
		jw_int(w, "calls", (int64_t)x->calls);
		jw_num(w, "bytes", x->bytes);
		jw_num(w, "time_ms", (x->gcalls ? x->gns : x->hns) / 1e6);
		jw_str(w, "time_source", x->gcalls ? "gpu" : "host");
		jw_num(w, "algbw_gbps", x->algbw);
		jw_num(w, "busbw_gbps", x->busbw);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_choices(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "nccl_choices");
	for (size_t i = 0; i < job->nchoices; i++) {
		const struct an_jchoice *x = &job->choices[i];
		char h[20];
		snprintf(h, sizeof h, "%016llx",
		         x->comm >= 0 ? (unsigned long long)job->comms[x->comm].hash : 0ull);
		jw_obj(w, NULL);
		if (x->comm >= 0)
			jw_str(w, "comm", h);
		else
			jw_null(w, "comm");
		jw_str(w, "collective", an_choice_fn_name(job, x));
		jw_str(w, "algorithm", x->algo);
		jw_str(w, "protocol", x->proto);
		jw_int(w, "calls", (int64_t)x->calls);
		jw_int(w, "channels_min", x->ch_min);
		jw_int(w, "channels_max", x->ch_max);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_copies(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "copies");
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t k = 0; k < job->ranks[i].npairs; k++) {
			const struct an_pair *p = &job->ranks[i].pairs[k];
			jw_obj(w, NULL);
			jw_int(w, "rank", an_rank_id(job, i));
			jw_int(w, "src_device", p->src);
			jw_int(w, "dst_device", p->dst);
			jw_str(w, "path", an_pair_path(p));
			jw_int(w, "copies",
			       (int64_t)(p->api_copies ? p->api_copies : p->p2p_copies));
			jw_num(w, "bytes", (double)(p->api_bytes ? p->api_bytes : p->p2p_bytes));
			jw_num(w, "gbps", an_pair_gbps(p));
			jw_obj_end(w);
		}
	jw_arr_end(w);
}

static void json_links(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "links");
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t d = 0; d < job->ranks[i].ndevs; d++) {
			const struct an_dev *v = &job->ranks[i].devs[d];
			if (!v->nsamples)
				continue;
			jw_obj(w, NULL);
			jw_int(w, "rank", an_rank_id(job, i));
			jw_int(w, "device", v->device);
			jw_num(w, "nvlink_bytes", (double)(v->nvl_tx + v->nvl_rx));
			jw_num(w, "nvlink_bytes_in_collectives", (double)v->nvl_coll);
			jw_num(w, "pcie_bytes", (double)(v->pcie_rd + v->pcie_wr));
			jw_num(w, "pcie_bytes_in_collectives", (double)v->pcie_coll);
			jw_obj_end(w);
		}
	jw_arr_end(w);
}

static void json_managed(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "managed");
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t k = 0; k < job->ranks[i].nallocs; k++) {
			const struct an_alloc *a = &job->ranks[i].allocs[k];
			char h[32];
			snprintf(h, sizeof h, "0x%llx", (unsigned long long)a->ptr);
			jw_obj(w, NULL);
			jw_int(w, "rank", an_rank_id(job, i));
			jw_int(w, "device", a->device);
			jw_str(w, "address", h);
			jw_num(w, "size", (double)a->bytes);
			jw_num(w, "bytes_migrated", (double)(a->htod + a->dtoh + a->dtod));
			jw_int(w, "direction_changes", (int64_t)a->flips);
			jw_int(w, "gpu_page_faults", (int64_t)a->gpu_faults);
			jw_num(w, "time_lost_ms", (double)a->migrate_ns / 1e6);
			jw_obj_end(w);
		}
	jw_arr_end(w);
}

static void json_files(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "files");
	for (size_t i = 0; i < job->nranks; i++) {
		const struct an_rank *r = &job->ranks[i];
		jw_obj(w, NULL);
		jw_str(w, "path", r->path);
		jw_bool(w, "ok", r->ok);
		jw_bool(w, "complete", r->ok && r->complete);
		jw_int(w, "records", (int64_t)r->records);
		if (!r->ok || r->truncated)
			jw_str(w, "error", r->err);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

void an_report_json(FILE *o, const struct an_job *job, const struct an_findings *f)
{
	struct an_tables t;
	if (an_tables_build(job, &t) < 0) {
		an_tables_free(&t);
		an_diag("nvlprof: out of memory\n");
		return;
	}
	struct jw w;
	jw_init(&w, o);
	jw_obj(&w, NULL);
	jw_str(&w, "tool", "nvlprof");
	jw_str(&w, "kind", "report");
	jw_int(&w, "schema", 1);
	json_job(&w, job, &t);
	struct an_story st;
	if (an_story_build(job, f, &st) == 0) {
		an_story_json(&w, &st);
		an_story_free(&st);
	}
	an_findings_json(&w, "findings", f);
	an_graphs_json(&w, job);
	an_kch_json(&w, job);
	json_collectives(&w, job, &t);
	json_ranks(&w, &t);
	json_others(&w, job);
	json_by_rank(&w, job, &t);
	json_choices(&w, job);
	json_copies(&w, job);
	json_links(&w, job);
	json_managed(&w, job);
	json_files(&w, job);
	jw_obj_end(&w);
	an_tables_free(&t);
}

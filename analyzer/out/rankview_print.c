/* rankview_print.c: RANKS as the text report prints it (every rank, or a large job's ranks that
 * matter and the others' distribution), the arrival skew per communicator kind in text and JSON. */
#include <stdio.h> /* fprintf */

#include "util/json.h"
#include "nvlp_trace.h" /* nvlp_nccl_fn_name */
#include "model/rankview.h"

/* One RANKS row; tail: what follows it ("  (cut short)", why a large job shows it) */
static void text_rank_row(FILE *o, const struct an_rrow *w, const char *tail)
{
	const struct an_rank *r = w->r;
	const struct an_rank_x *x = w->x;
	double wall = w->wall_ns, ex = w->exposed_ns, span = w->span_ns;
	char exs[16], exp_[16];
	if (w->gpu) {
		snprintf(exs, sizeof exs, "%.2f", ex / 1e6);
		snprintf(exp_, sizeof exp_, "%.1f", span > 0 ? ex / span * 100 : 0);
	} else {
		snprintf(exs, sizeof exs, "-");
		snprintf(exp_, sizeof exp_, "-");
	}
	fprintf(o, "  %4d %-12.12s %8d %9.1f %9.2f%c%10s %8s %7.0f %8.2f %9.2f%s%s\n", w->rank,
	        r->host, r->pid, wall / 1e6, w->comm.ns / 1e6, w->comm.host > 0 ? 'h' : ' ', exs,
	        exp_, x->colls ? 100.0 * x->last_count / x->colls : 0.0, x->median_lead_ns / 1e6,
	        x->wait_ns / 1e6, r->truncated ? "  (cut short)" : "", tail);
}

/* A large job's rows past the ranks kept: min, p50, p90, max of each column over the others */
static void text_rank_dist(FILE *o, const struct an_rank_view *v)
{
	static const char *const q[4] = {"min", "p50", "p90", "max"};
	fprintf(o, "  the other %zu rank%s (min, p50, p90, max of each column):\n", v->nrest,
	        v->nrest == 1 ? "" : "s");
	for (int k = 0; v->nrest && k < 4; k++) {
		char exs[16] = "-", exp_[16] = "-";
		if (v->rest_gpu) {
			snprintf(exs, sizeof exs, "%.2f", v->dist[AN_RV_EXPOSED][k]);
			snprintf(exp_, sizeof exp_, "%.1f", v->dist[AN_RV_EXPOSED_SHARE][k]);
		}
		fprintf(o, "  %4s %-12s %8s %9.1f %9.2f %10s %8s %7.0f %8.2f %9.2f\n", "", q[k], "",
		        v->dist[AN_RV_WALL][k], v->dist[AN_RV_COMM][k], exs, exp_,
		        v->dist[AN_RV_LAST][k], v->dist[AN_RV_LEAD][k], v->dist[AN_RV_WAITED][k]);
	}
	if (v->named_more)
		fprintf(o, "  (%zu more rank%s named by the findings are in the distribution: see "
		           "FINDINGS)\n",
		        v->named_more, v->named_more == 1 ? "" : "s");
}

static void text_ranks(FILE *o, const struct an_tables *t, const struct an_rank_view *v)
{
	if (v->all)
		fprintf(o, "\nRANKS\n");
	else
		fprintf(o,
		        "\nRANKS (%zu ranks: the %zu that matter, then the others' distribution; "
		        "--all-ranks prints every one)\n",
		        t->nranks, v->nshown);
	fprintf(o, "  %4s %-12s %8s %9s %9s %10s %8s %7s %8s %9s%s\n", "rank", "host", "pid",
	        "wall ms", "comm ms", "exposed ms", "exposed%", "last%", "lead ms", "waited ms",
	        v->all ? "" : "  why shown");
	for (size_t k = 0; k < (v->all ? t->nranks : v->nshown); k++) {
		char tail[64] = "";
		if (!v->all)
			snprintf(tail, sizeof tail, "  %s", v->what[k]);
		text_rank_row(o, &t->ranks[v->all ? k : v->shown[k]], tail);
	}
	if (!v->all)
		text_rank_dist(o, v);
}

/* The arrival skew: one figure per communicator kind (world, per host, groups) that has matched
 * collectives, never one averaged across kinds; a job of one kind reads as it always has */
static void text_skew(FILE *o, const struct an_job *job, size_t nranks)
{
	struct an_skew_kinds sk;
	an_skew_kinds(job, nranks, &sk);
	if (sk.nkinds <= 1) {
		fprintf(o, "arrival skew mean %.3f ms, max %.3f ms", job->mean_skew_ns / 1e6,
		        job->max_skew_ns / 1e6);
		return;
	}
	fprintf(o, "arrival skew per communicator kind:");
	for (int i = 0, n = 0; i < AN_CK_COUNT; i++) {
		const struct an_skew_kind *k = &sk.k[i];
		if (!k->n)
			continue;
		char sz[32];
		if (k->min_ranks == k->max_ranks)
			snprintf(sz, sizeof sz, "%d", k->min_ranks);
		else
			snprintf(sz, sizeof sz, "%d-%d", k->min_ranks, k->max_ranks);
		fprintf(o, "%s %s (%zu communicator%s of %s ranks) mean %.3f ms, max %.3f ms",
		        n++ ? ";" : "", an_ckind_name(i), k->ncomms, k->ncomms == 1 ? "" : "s", sz,
		        k->mean_ns / 1e6, k->max_ns / 1e6);
	}
}

/* The hosts' clocks where some were not corrected from GPU completions: how many each way. */
static void text_clock_hosts(FILE *o, const struct an_job *job)
{
	size_t other = job->hosts_by_gpu + job->hosts_by_exit + job->hosts_uncorrected;
	fprintf(o, "  hosts aligned by realtime anchors");
	if (job->hosts_by_gpu)
		fprintf(o, ", %zu of %zu corrected by collective completions", job->hosts_by_gpu,
		        other);
	if (job->hosts_by_exit)
		fprintf(o, ", %zu of %zu by the exits of blocking calls", job->hosts_by_exit, other);
	if (job->hosts_by_gpu || job->hosts_by_exit)
		fprintf(o, " (max %.3f ms)", job->max_refine_ns / 1e6);
	if (job->hosts_uncorrected)
		fprintf(o, "; %zu of %zu not corrected (no collective completion shared with the "
		           "first host: no GPU time, calls that return at once)",
		        job->hosts_uncorrected, other);
	fputc('\n', o);
}

/* Under RANKS: what its columns mean, the arrival skew, the clock alignment. */
static void text_ranks_notes(FILE *o, const struct an_job *job, size_t nranks)
{
	if (job->ncomms)
		fprintf(
		    o,
		    "  (comm ms: NCCL GPU time (ending in h, as 1.26h: includes host call time, "
		    "as COLLECTIVES' h rows; h is for host, not hours); exposed: not overlapped by "
		    "compute%s; last%%: share of collectives it "
		    "arrived last at; lead ms: median lead over the next-latest rank then; waited "
		    "ms: its waits for the last rank)\n",
		    job->win1 ? ", in the steps" : "");
	if (job->matched_colls) {
		fprintf(o, "  %llu collectives matched across ranks; ",
		        (unsigned long long)job->matched_colls);
		text_skew(o, job, nranks);
		if (job->first_comm >= 0)
			fprintf(o,
			        "; skew and waits exclude each communicator's first collective (the "
			        "ranks' startup: %s #%u arrived %.3f ms apart)",
			        nvlp_nccl_fn_name(job->first_fn), job->first_seq,
			        job->first_skew_ns / 1e6);
		fputc('\n', o);
	}
	if (job->multi_host && !job->hosts_by_exit && !job->hosts_uncorrected)
		fprintf(o,
		        "  hosts aligned by realtime anchors, corrected by collective completions "
		        "(max %.3f ms)\n",
		        job->max_refine_ns / 1e6);
	else if (job->multi_host)
		text_clock_hosts(o, job);
}

void an_ranks_print(FILE *o, const struct an_job *job, const struct an_tables *t,
                    const struct an_rank_view *v)
{
	text_ranks(o, t, v);
	text_ranks_notes(o, job, t->nranks);
}

/* skew_mean_ms, skew_max_ms: over the job's one communicator kind, else the widest kind's (world,
 * else groups, else per host), with every kind's in skew_by_kind: never averaged across kinds */
void an_skew_json(struct jw *w, const struct an_job *job, size_t nranks)
{
	struct an_skew_kinds sk;
	an_skew_kinds(job, nranks, &sk);
	if (sk.nkinds <= 1) {
		jw_num(w, "skew_mean_ms", job->mean_skew_ns / 1e6);
		jw_num(w, "skew_max_ms", job->max_skew_ns / 1e6);
		return;
	}
	jw_num(w, "skew_mean_ms", sk.k[sk.head].mean_ns / 1e6);
	jw_num(w, "skew_max_ms", sk.k[sk.head].max_ns / 1e6);
	jw_str(w, "skew_kind", an_ckind_id(sk.head));
	jw_arr(w, "skew_by_kind");
	for (int i = 0; i < AN_CK_COUNT; i++) {
		const struct an_skew_kind *k = &sk.k[i];
		if (!k->n)
			continue;
		jw_obj(w, NULL);
		jw_str(w, "kind", an_ckind_id(i));
		jw_int(w, "communicators", (int64_t)k->ncomms);
		jw_int(w, "ranks_min", k->min_ranks);
		jw_int(w, "ranks_max", k->max_ranks);
		jw_int(w, "collectives", (int64_t)k->n);
		jw_num(w, "skew_mean_ms", k->mean_ns / 1e6);
		jw_num(w, "skew_max_ms", k->max_ns / 1e6);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

/* det_straggler.c: the straggler finding: a rank the others wait for in most collectives, what it
 * cost and where its main thread was. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "model/places.h" /* an_places_top */

/* The share of [t0, t1] the main thread of r spent in chain id (the chain's id is a hash of its
 * text: the same in every process). @return -1 when r has no samples there */
static double place_share(const struct an_rank *r, uint64_t id, uint64_t t0, uint64_t t1)
{
	struct an_place_top top[16];
	uint64_t total = 0;
	size_t n = an_places_top(r, AN_PLACE_MAIN, t0, t1, top, 16, &total);
	if (!total)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (top[i].pystack == id)
			return (double)top[i].ns / (double)total;
	return 0;
}

/* What the late rank's main thread did over the steps (the whole trace without steps), from the
 * Python sampler: its top locations by time, each against the other ranks' share of it */
static void straggler_places(struct an_finding *y, const struct an_job *job, size_t f)
{
	uint64_t t0 = job->win1 > job->win0 ? job->win0 : job->t0;
	uint64_t t1 = job->win1 > job->win0 ? job->win1 : job->t1;
	struct an_place_top top[3];
	uint64_t total = 0;
	size_t n = an_places_top(&job->ranks[f], AN_PLACE_MAIN, t0, t1, top, 3, &total);
	for (size_t i = 0; i < n && total; i++) {
		double others = 0;
		int no = 0;
		for (size_t g = 0; g < job->nranks; g++) {
			double sh = g == f || !job->ranks[g].ok ? -1 : place_share(&job->ranks[g],
			                                                           top[i].pystack, t0, t1);
			if (sh >= 0)
				others += sh, no++;
		}
		struct an_place p = {.pystack = top[i].pystack, .text = top[i].text};
		char key[32], buf[256], oth[48] = "";
		an_place_text(&p, buf, sizeof buf);
		if (no)
			snprintf(oth, sizeof oth, "; other ranks %.0f%%", others / no * 100);
		snprintf(key, sizeof key, "place_%zu", i + 1);
		/* an_place_text starts with the time held since the sample: the share says it here */
		const char *in = strstr(buf, " in ");
		an_f_str(y, key, "%.0f%% of its time in%s%s",
		       (double)top[i].ns / (double)total * 100, in ? in + 3 : buf, oth);
	}
}

/* 1 when a lead of lead ms is a straggler's against the step time: DDP's own asymmetry reaches
 * ~12% of a fast step (shipped ddp_killed: 0.56 ms of 4.9 ms); milliseconds lost in every longer
 * step are a straggler too */
static int lead_counts(const struct an_job *job, const double *th, double lead)
{
	int share_ok = lead * 1e6 >= th[AN_TH_straggler_step_share] * job->step_ns;
	int long_ok = lead >= th[AN_TH_straggler_long_ms] &&
	              lead * 1e6 >= th[AN_TH_straggler_long_share] * job->step_ns;
	return job->step_ns <= 0 || share_ok || long_ok;
}

int an_detect_straggler(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank_x *x = &job->rx[f];
		if (!x->colls || !x->last_count)
			continue;
		double share = (double)x->last_count / (double)x->colls;
		double lead = x->median_lead_ns / 1e6;
		if (share < th[AN_TH_straggler_share] || lead < th[AN_TH_straggler_min_ms])
			continue;
		if (!lead_counts(job, th, lead))
			continue;
		struct an_finding *y = an_f_add(out, AN_F_straggler, AN_SEV_WARNING,
		                           "Rank %d arrives last at %.0f%% of collectives, "
		                           "typically %.2f ms after the others",
		                           an_f_rank_id(job, f), share * 100, lead);
		if (!y)
			return -1;
		y->rank = an_f_rank_id(job, f);
		an_f_num(y, AN_EV_RANK, an_f_rank_id(job, f), NULL);
		an_f_str(y, "host", "%s", job->ranks[f].host);
		an_f_num(y, "collectives", (double)x->colls, NULL);
		an_f_num(y, "last_arrivals", (double)x->last_count, NULL);
		an_f_num(y, "median_lead_ms", lead, "ms");
		an_f_num(y, "mean_lead_ms", x->lead_ns_sum / (double)x->last_count / 1e6, "ms");
		/* What the job lost, not a sum over collectives: once the others have waited for
		 * the late rank in a step, its later collectives in that step find them in step
		 * with it, so a step loses about one lead. Never more than the waiting the rank
		 * caused any one other rank, nor the wall time. */
		int others = 0;
		for (size_t g = 0; g < job->nranks; g++)
			others += g != f && job->rx[g].colls;
		double caused_each = others ? x->caused_wait_ns / others / 1e6 : 0;
		double wall = (double)(job->t1 - job->t0) / 1e6;
		double lost;
		if (job->step_ns > 0) {
			double per = lead < job->step_ns / 1e6 ? lead : job->step_ns / 1e6;
			lost = per * (double)job->steps;
			an_f_num(y, "lost_per_step_ms", per, "ms");
		} else {
			lost = caused_each;
		}
		if (lost > caused_each)
			lost = caused_each;
		if (lost > wall)
			lost = wall;
		an_f_num(y, "wait_caused_ms", lost, "ms");
		if (job->step_ns > 0)
			an_f_num(y, "lead_step_share", lead * 1e6 / job->step_ns, NULL);
		straggler_places(y, job, f);
		an_f_advice(y, AN_ADV_PLAIN);
	}
	return 0;
}

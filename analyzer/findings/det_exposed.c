/* det_exposed.c: the exposed_communication finding: communication not hidden behind compute. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "model/stages.h" /* an_rank_exposure */

int an_detect_exposed_communication(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	if (!job->have_gpu)
		return 0;
	double e = 0, w = 0, c = 0;
	int worst = -1, win = 0, n = 0;
	double worst_share = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok || !r->kind_count[NVLP_K_KERNEL])
			continue;
		double re, rw, rc;
		win = an_rank_exposure(job, r, &re, &rw, &rc);
		e += re;
		w += rw;
		c += rc;
		n++;
		if (rw > 0 && re / rw > worst_share) {
			worst_share = re / rw;
			worst = an_f_rank_id(job, f);
		}
	}
	double share = w > 0 ? e / w : 0;
	if (share < th[AN_TH_exposed_share] || !n)
		return 0;
	struct an_finding *x =
	    an_f_add(out, AN_F_exposed_communication,
	        share >= th[AN_TH_exposed_critical] ? AN_SEV_CRITICAL : AN_SEV_WARNING,
	        "%.0f%% of %s is communication not hidden behind compute", share * 100,
	        win ? "the training steps' time" : "wall time");
	if (!x)
		return -1;
	an_f_num(x, "exposed_share", share, NULL);
	an_f_str(x, "measured_over", "%s", win ? "steps" : "whole trace");
	an_f_num(x, "exposed_ms_per_rank", e / 1e6 / n, "ms");
	/* the same communication time the summary line gives for the span measured over */
	an_f_num(x, win ? "comm_in_steps_ms_per_rank" : "communication_ms_per_rank",
	       c / 1e6 / n, "ms");
	an_f_num(x, "hidden_share_of_communication", c > 0 ? 1 - e / c : 0, NULL);
	/* its cost: the exposed time itself (time the GPUs waited on communication, part of the
	 * wall time by construction), per step and over the run */
	if (win && job->steps)
		an_f_num(x, "lost_per_step_ms", e / 1e6 / n / (double)job->steps, "ms");
	an_f_num(x, "lost_ms", e / 1e6 / n, "ms");
	if (worst >= 0)
		an_f_num(x, "worst_rank", worst, NULL);
	/* explain() replaces this when a root cause explains the finding */
	an_f_advice(x, AN_ADV_PLAIN);
	return 0;
}

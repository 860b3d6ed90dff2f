/* det_lowbw.c: the low_bus_bandwidth finding: large collectives far below the NVLink peak. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"

int an_detect_low_bus_bandwidth(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	const struct an_big *big = ctx->big;
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		const struct an_comm *c = &job->comms[ci];
		if (c->peak_Bps <= 0 || c->nranks < 2)
			continue;
		/* one finding per communicator: the collective losing the most GPU time, others
		 * named */
		int worst = -1;
		char others[160] = "";
		for (int fn = 0; fn < NVLP_NCCL_FN_COUNT; fn++) {
			const struct an_big *b = &big[ci * NVLP_NCCL_FN_COUNT + fn];
			if (!b->calls || b->ns <= 0 ||
			    b->sbus / b->ns * 1e9 >= th[AN_TH_low_busbw_share] * c->peak_Bps ||
			    (double)b->calls <
			        th[AN_TH_low_busbw_min_calls] * (c->nmembers ? c->nmembers : 1))
				continue;
			if (worst < 0 || b->ns > big[ci * NVLP_NCCL_FN_COUNT + worst].ns) {
				if (worst >= 0)
					snprintf(others + strlen(others),
					         sizeof others - strlen(others), "%s%s",
					         others[0] ? "," : "",
					         nvlp_nccl_fn_name((unsigned)worst));
				worst = fn;
			} else
				snprintf(others + strlen(others), sizeof others - strlen(others),
				         "%s%s", others[0] ? "," : "",
				         nvlp_nccl_fn_name((unsigned)fn));
		}
		if (worst < 0)
			continue;
		const struct an_big *b = &big[ci * NVLP_NCCL_FN_COUNT + worst];
		double busbw = b->sbus / b->ns;
		struct an_finding *x = an_f_add(out, AN_F_low_bus_bandwidth, AN_SEV_WARNING,
		                           "%s on %d ranks reaches %.1f GB/s bus bandwidth, %.0f%% "
		                           "of the %.0f GB/s NVLink peak",
		                           nvlp_nccl_fn_name((unsigned)worst), c->nranks, busbw,
		                           busbw * 1e11 / c->peak_Bps, c->peak_Bps / 1e9);
		if (!x)
			return -1;
		x->comm = (int)ci;
		an_f_str(x, "comm", "%016llx", (unsigned long long)c->hash);
		an_f_str(x, AN_EV_COLLECTIVE, "%s", nvlp_nccl_fn_name((unsigned)worst));
		an_f_num(x, "calls", (double)b->calls, NULL);
		an_f_num(x, "min_message_mib", th[AN_TH_low_busbw_min_mib], "MiB");
		an_f_num(x, "algbw_gbps", b->salg / b->ns, "GB/s");
		an_f_num(x, "busbw_gbps", busbw, "GB/s");
		an_f_peak(x, c->peak_Bps / 1e9);
		if (others[0])
			an_f_str(x, "also_low", "%s", others);
		/* no straggler advice: bandwidths use transfer time, not waiting; explain() gives
		 * the pcie_fallback advice when the fallback is on this communicator */
		an_f_advice(x, AN_ADV_PLAIN);
	}
	return 0;
}

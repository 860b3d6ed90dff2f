/* fmt.c: small formatting shared by the report's text, its views and the exports: a bandwidth
 * figure, the name of an NCCL choice's function as the job called it. */
#include <math.h>
#include <stdio.h>

#include "model/model.h"
#include "nvlp_trace.h"
#include "out/report.h"

void an_fmt_gbps(char *b, size_t n, double v)
{
	if (isnan(v))
		snprintf(b, n, "-");
	else
		snprintf(b, n, "%.1f", v);
}

/* The function of an NCCL choice as the job called it: NCCL's profiler says Broadcast for
 * ncclBcast too, so a communicator the job broadcast on only with ncclBcast shows ncclBcast, as
 * COLLECTIVES does. */
const char *an_choice_fn_name(const struct an_job *job, const struct an_jchoice *x)
{
	if (x->fn == NVLP_NCCL_BROADCAST && x->comm >= 0) {
		int bcast = 0, broadcast = 0;
		for (size_t i = 0; i < job->naggs; i++)
			if (job->aggs[i].comm == x->comm) {
				bcast |= job->aggs[i].fn == NVLP_NCCL_BCAST;
				broadcast |= job->aggs[i].fn == NVLP_NCCL_BROADCAST;
			}
		if (bcast && !broadcast)
			return nvlp_nccl_fn_name(NVLP_NCCL_BCAST);
	}
	return nvlp_nccl_fn_name(x->fn);
}

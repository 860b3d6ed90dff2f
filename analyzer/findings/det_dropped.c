/* det_dropped.c: the dropped_records finding: a process lost records because its buffers were
 * full. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"

/* Records lost in a burst (a full per-thread buffer): that process's figures are partial. */
int an_detect_dropped_records(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok || !r->dropped)
			continue;
		struct an_finding *x =
		    an_f_add(out, AN_F_dropped_records, AN_SEV_WARNING,
		        "Rank %d (pid %d on %s) lost %llu records: its trace buffers were full",
		        an_f_rank_id(job, f), r->pid, r->host, (unsigned long long)r->dropped);
		if (!x)
			return -1;
		x->rank = an_f_rank_id(job, f);
		an_f_num(x, AN_EV_RANK, an_f_rank_id(job, f), NULL);
		an_f_num(x, "pid", r->pid, NULL);
		an_f_str(x, "host", "%s", r->host);
		an_f_num(x, "dropped_records", (double)r->dropped, NULL);
		an_f_num(x, "recorded", (double)r->records, NULL);
		an_f_advice(x, AN_ADV_PLAIN);
	}
	return 0;
}

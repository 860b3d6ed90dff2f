/* det_staged.c: the peer_access_disabled finding: cross-device copies staged through host memory
 * between GPUs that share NVLink (or can likely reach each other). */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "model/stages.h" /* an_dev_peak */


/* NVLink between two GPUs of r's host: any process on that host may have recorded the topology. */
static int nvlink_pair(const struct an_job *job, const struct an_rank *r, int a, int b, int *known)
{
	*known = 0;
	for (size_t p = job->host_at[r->host_ix]; p < job->host_at[r->host_ix + 1]; p++) {
		const struct an_rank *x = &job->ranks[job->by_host[p]];
		if (job->by_host[p] >= job->nranks || !x->ok || !x->nlinks)
			continue;
		*known = 1;
		if (an_nvlink_between(x, a, b))
			return 1;
	}
	return 0;
}

/* What the staged copies of pair p cost against a peer copy: at the NVLink rate measured in
 * this job (its peer copies), else at the NVLink peak */
static void staged_cost(struct an_finding *x, const struct an_job *job, const struct an_rank *r,
                        const struct an_pair *p, int nvl)
{
	double peak = nvl ? an_dev_peak(job, r, p->src) / 1e9 : 0, rate = 0;
	const char *rate_src = "";
	for (size_t k = 0; k < r->npairs; k++)
		if (r->pairs[k].p2p_gpu_ns && r->pairs[k].p2p_bytes) {
			rate = (double)r->pairs[k].p2p_bytes / (double)r->pairs[k].p2p_gpu_ns;
			rate_src = "measured";
		}
	if (rate <= 0 && peak > 0) {
		rate = peak;
		rate_src = "nvlink_peak";
	}
	if (nvl)
		an_f_peak(x, peak);
	if (rate > 0 && p->staged_ns) {
		double peer_ms = (double)p->staged_bytes / rate / 1e6;
		double took_ms = (double)p->staged_ns / 1e6;
		an_f_num(x, "staged_ms", took_ms, "ms");
		an_f_num(x, "peer_copy_ms", peer_ms, "ms");
		an_f_str(x, "peer_copy_rate", "%s %.0f GB/s", rate_src, rate);
		an_f_num(x, "lost_ms", took_ms > peer_ms ? took_ms - peer_ms : 0, "ms");
	}
}

/* peer_access_disabled for pair p of trace f, whose copies went through host memory */
static int staged_pair(const struct an_job *job, size_t f, const struct an_pair *p, int nvl,
                        double gbps, struct an_findings *out)
{
	const struct an_rank *r = &job->ranks[f];
	struct an_finding *x = an_f_add(
	    out, AN_F_peer_access_disabled, AN_SEV_WARNING,
	    "Copies GPU%d->GPU%d staged through host memory although the GPUs %s",
	    p->src, p->dst, nvl ? "share NVLink" : "can likely reach each other");
	if (!x)
		return -1;
	x->rank = an_f_rank_id(job, f);
	x->device = p->src;
	an_f_num(x, AN_EV_RANK, an_f_rank_id(job, f), NULL);
	an_f_num(x, "device", p->src, NULL);
	an_f_num(x, "dst_device", p->dst, NULL);
	an_f_num(x, "copies", (double)p->staged_copies, NULL);
	an_f_num(x, "bytes", (double)p->staged_bytes, "B");
	/* achieved: the staged bytes over the host time in those calls (their GPU records are
	 * only the chunks' first pieces) */
	double sg = p->staged_ns ? (double)p->staged_bytes / (double)p->staged_ns : 0;
	if (sg > 0)
		an_f_num(x, "achieved_gbps", sg, "GB/s");
	else if (gbps > 0)
		an_f_num(x, "achieved_gbps", gbps, "GB/s");
	staged_cost(x, job, r, p, nvl);
	if (r->peer_enable_fail)
		an_f_num(x, "peer_enable_failures", (double)r->peer_enable_fail, NULL);
	/* the first of the pair's first staged copies that has one */
	uint64_t py = 0;
	for (int k = 0; k < 4 && !py && p->staged_call[k]; k++)
		py = an_f_py_of_record(r, NVLP_K_COPY, 0, p->staged_call[k]);
	an_f_python(x, AN_EV_PYTHON, "copied at", r, py);
	an_f_native(x, "copied_at", r, p->staged_stack);
	an_f_advice(x, AN_ADV_PLAIN);
	return 0;
}

int an_detect_peer_access_disabled(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->npairs; i++) {
			const struct an_pair *p = &r->pairs[i];
			int known, nvl = nvlink_pair(job, r, p->src, p->dst, &known);
			double gbps = p->p2p_gpu_ns ? (double)p->p2p_bytes / (double)p->p2p_gpu_ns
			              : p->sync_ns  ? (double)p->sync_bytes / (double)p->sync_ns
			                            : 0;
			int slow = gbps > 0 && gbps < th[AN_TH_staged_max_gbps];
			if ((double)p->staged_bytes < th[AN_TH_staged_min_mib] * MIB)
				continue;
			if (!nvl && !(!known && slow))
				continue;
			if (staged_pair(job, f, p, nvl, gbps, out))
				return -1;
		}
	}
	return 0;
}

/* det_fallback.c: the pcie_fallback finding: NCCL traffic between NVLink-connected GPUs that went
 * over PCIe or host memory (environment settings, link counters, bus bandwidth). */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "model/stages.h" /* an_peak_basis */


/* Environment settings that push NCCL off NVLink. */
static void env_causes(const struct an_job *job, char *out, size_t len)
{
	static const char *const keys[] = {"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE",
	                                   "NCCL_P2P_USE_CUDA_MEMCPY"};
	out[0] = 0;
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		char key[64], buf[64];
		snprintf(key, sizeof key, "%s%s", NVLP_HDR_ENV_PREFIX, keys[k]);
		for (size_t f = 0; f < job->nranks; f++) {
			const char *v = job->ranks[f].ok
			                    ? an_header_get(&job->ranks[f], key, buf, sizeof buf)
			                    : NULL;
			if (!v)
				continue;
			int bad =
			    k == 1 ? (!strcmp(v, "LOC") || !strcmp(v, "0")) : strcmp(v, "0") != 0;
			/* SHM_DISABLE alone keeps NVLink P2P; it matters only together with P2P
			 * off */
			if (bad && k == 2 && !strstr(out, "NCCL_P2P"))
				bad = 0;
			if (bad) {
				size_t l = strlen(out);
				snprintf(out + l, len - l, "%s%s=%s", l ? " " : "", keys[k], v);
			}
			break;
		}
	}
}

/* The busiest single-host multi-rank communicator (collective bytes in *bytes); -1 if none */
static int busiest_local_comm(const struct an_job *job, double *bytes)
{
	int best = -1;
	*bytes = 0;
	for (size_t a = 0; a < job->naggs; a++) {
		const struct an_agg *g = &job->aggs[a];
		const struct an_comm *c = &job->comms[g->comm];
		if (c->nranks < 2 || !c->single_host || an_coll_of_fn(g->fn) == AN_C_NONE)
			continue;
		if ((double)g->bytes > *bytes) {
			*bytes = (double)g->bytes;
			best = g->comm;
		}
	}
	return best;
}

/* NVLink and PCIe bytes of every device while collectives ran */
static void coll_link_bytes(const struct an_job *job, uint64_t *nvl, uint64_t *pcie)
{
	*nvl = *pcie = 0;
	for (size_t f = 0; f < job->nranks; f++)
		for (size_t d = 0; d < job->ranks[f].ndevs; d++) {
			*nvl += job->ranks[f].devs[d].nvl_coll;
			*pcie += job->ranks[f].devs[d].pcie_coll;
		}
}

/* Bus bandwidth of communicator comm over all its collective types, GB/s (0: no time) */
static double comm_busbw(const struct an_big *big, int comm)
{
	double sbus = 0, ns = 0;
	for (int fn = 0; fn < NVLP_NCCL_FN_COUNT; fn++) {
		sbus += big[comm * NVLP_NCCL_FN_COUNT + fn].sbus;
		ns += big[comm * NVLP_NCCL_FN_COUNT + fn].ns;
	}
	return ns > 0 ? sbus / ns : 0; /* bytes per ns = GB/s */
}

/* The pcie_fallback finding's evidence and advice */
static void fallback_evidence(struct an_finding *x, const struct an_job *job,
                              const struct an_comm *c, uint64_t nvl, uint64_t pcie, double busbw,
                              const char *cause)
{
	if (cause[0])
		an_f_str(x, AN_EV_ENV, "%s", cause);
	an_f_str(x, "comm", "%016llx", (unsigned long long)c->hash);
	an_f_num(x, "nranks", c->nranks, NULL);
	if (job->have_links) {
		an_f_num(x, "nvlink_bytes_during_collectives", (double)nvl, "B");
		an_f_num(x, "pcie_bytes_during_collectives", (double)pcie, "B");
	}
	if (busbw > 0)
		an_f_num(x, "busbw_gbps", busbw, "GB/s");
	if (c->peak_Bps > 0) {
		an_f_peak(x, c->peak_Bps / 1e9);
		if (busbw > 0)
			an_f_num(x, "share_of_peak", busbw * 1e9 / c->peak_Bps, NULL);
	} else
		an_f_str(x, "topology", "no NVLink topology records: NVLink presence not confirmed");
	an_f_advice(x, cause[0] ? AN_ADV_FALLBACK_ENV : AN_ADV_PLAIN);
}

int an_detect_pcie_fallback(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	char cause[256];
	ctx->left->fb_comm = -1;
	env_causes(job, cause, sizeof cause);
	/* the busiest single-host multi-rank communicator with NVLink */
	double best_bytes;
	int best = busiest_local_comm(job, &best_bytes);
	if (best < 0)
		return 0;
	const struct an_comm *c = &job->comms[best];
	double per_rank = best_bytes / (c->nmembers ? c->nmembers : 1);
	uint64_t nvl, pcie;
	coll_link_bytes(job, &nvl, &pcie);
	double busbw = comm_busbw(ctx->big, best);
	int counters = job->have_links && pcie > 0 &&
	               (double)pcie > th[AN_TH_fallback_pcie_ratio] * (double)nvl &&
	               (double)pcie >= th[AN_TH_fallback_min_mib] * MIB;
	int low =
	    c->peak_Bps > 0 && busbw > 0 && busbw * 1e9 < th[AN_TH_low_busbw_share] * c->peak_Bps;
	int has_nvl = c->peak_Bps > 0;
	if (per_rank < th[AN_TH_fallback_min_mib] * MIB)
		return 0;
	if (!(has_nvl && counters) && !(cause[0] && (has_nvl || !job->have_topo)))
		return 0;
	int sev = (counters || low) ? AN_SEV_CRITICAL : AN_SEV_WARNING;
	struct an_finding *x =
	    an_f_add(out, AN_F_pcie_fallback, sev,
	        "NCCL traffic between NVLink-connected GPUs went over PCIe/host memory%s%s%s",
	        cause[0] ? " (" : "", cause, cause[0] ? ")" : "");
	if (!x)
		return -1;
	x->comm = best;
	fallback_evidence(x, job, c, nvl, pcie, busbw, cause);
	ctx->left->fb_comm = best;
	return 0;
}

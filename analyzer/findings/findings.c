/* findings.c: turns an analyzed job into findings (stable id, severity, title, evidence,
 * advice). */
#include "findings/findings.h"
#include "model/ending.h"   /* how each rank ended */
#include "findings/findings_int.h"
#include "load/kernelch.h" /* window coverage */
#include "model/places.h"   /* where a rank's threads were (the Python sampler) */
#include "model/stages.h"   /* an_job_time */
#include "util/util.h"     /* an_fmt_value */

#include <math.h>   /* fabs */
#include <stdarg.h> /* va_list */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "nvlp_trace.h"

#define MIB (1024.0 * 1024.0)

/* Large-message GPU bandwidth per (comm, fn): sum of S x busbw factor and of transfer time (a
 * matched collective's shortest GPU time across ranks: see an_call_xfer_ns). */
struct big {
	double sbus, salg, ns;
	uint64_t calls;
};

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

/* @return the index of the communicator judged to fall back, -1 if none */
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
static double comm_busbw(const struct big *big, int comm)
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
		an_f_str(x, "env", "%s", cause);
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
	an_f_advise(
	    x,
	    cause[0]
	        ? "Unset the variables above (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL=LOC, "
	          "NCCL_SHM_DISABLE) so NCCL uses "
	          "P2P over NVLink; check with NCCL_DEBUG=INFO that channels say P2P/CUMEM or NVLS."
	        : "NCCL did not use P2P over NVLink: check NCCL_DEBUG=INFO transport lines, "
	          "container IPC/"
	          "peer-access limits (--ipc=host), CUDA_VISIBLE_DEVICES and NCCL_P2P_LEVEL.");
}

static int fallback(const struct an_job *job, const double *th, struct big *big,
                    struct an_findings *out)
{
	char cause[256];
	env_causes(job, cause, sizeof cause);
	/* the busiest single-host multi-rank communicator with NVLink */
	double best_bytes;
	int best = busiest_local_comm(job, &best_bytes);
	if (best < 0)
		return -1;
	const struct an_comm *c = &job->comms[best];
	double per_rank = best_bytes / (c->nmembers ? c->nmembers : 1);
	uint64_t nvl, pcie;
	coll_link_bytes(job, &nvl, &pcie);
	double busbw = comm_busbw(big, best);
	int counters = job->have_links && pcie > 0 &&
	               (double)pcie > th[AN_TH_fallback_pcie_ratio] * (double)nvl &&
	               (double)pcie >= th[AN_TH_fallback_min_mib] * MIB;
	int low =
	    c->peak_Bps > 0 && busbw > 0 && busbw * 1e9 < th[AN_TH_low_busbw_share] * c->peak_Bps;
	int has_nvl = c->peak_Bps > 0;
	if (per_rank < th[AN_TH_fallback_min_mib] * MIB)
		return -1;
	if (!(has_nvl && counters) && !(cause[0] && (has_nvl || !job->have_topo)))
		return -1;
	int sev = (counters || low) ? AN_SEV_CRITICAL : AN_SEV_WARNING;
	struct an_finding *x =
	    an_f_add(out, AN_F_pcie_fallback, sev,
	        "NCCL traffic between NVLink-connected GPUs went over PCIe/host memory%s%s%s",
	        cause[0] ? " (" : "", cause, cause[0] ? ")" : "");
	x->comm = best;
	fallback_evidence(x, job, c, nvl, pcie, busbw, cause);
	return x ? best : -1;
}

static void thrashing(const struct an_job *job, const double *th, struct an_findings *out)
{
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->nallocs; i++) {
			const struct an_alloc *a = &r->allocs[i];
			double moved = (double)(a->htod + a->dtoh + a->dtod);
			if (moved < th[AN_TH_thrash_min_mib] * MIB ||
			    ((double)a->flips < th[AN_TH_thrash_min_flips] && !a->thrash_events))
				continue;
			char size[32];
			struct an_finding *x =
			    an_f_add(out, AN_F_uma_thrashing, AN_SEV_WARNING,
			        "Managed allocation of %s migrates back and forth (%llu "
			        "direction changes)",
			        an_fmt_value(size, sizeof size, (double)a->bytes, "B"),
			        (unsigned long long)a->flips);
			x->rank = an_f_rank_id(job, f);
			x->device = a->device;
			an_f_num(x, "rank", an_f_rank_id(job, f), NULL);
			an_f_num(x, "device", a->device, NULL);
			an_f_str(x, "address", "0x%llx", (unsigned long long)a->ptr);
			an_f_num(x, "size", (double)a->bytes, "B");
			an_f_num(x, "bytes_migrated", moved, "B");
			an_f_num(x, "htod_bytes", (double)a->htod, "B");
			an_f_num(x, "dtoh_bytes", (double)a->dtoh, "B");
			an_f_num(x, "dtod_bytes", (double)a->dtod, "B");
			an_f_num(x, "migrations", (double)a->migrations, NULL);
			an_f_num(x, "direction_changes", (double)a->flips, NULL);
			an_f_num(x, "gpu_page_faults", (double)a->gpu_faults, NULL);
			an_f_num(x, "cpu_page_faults", (double)a->cpu_faults, NULL);
			an_f_num(x, "time_lost_ms", (double)a->migrate_ns / 1e6, "ms");
			an_f_python(x, "python", "allocated at", r,
			          an_f_py_of_record(r, NVLP_K_MANAGED, a->t, 0));
			an_f_native(x, "allocated_at", r, a->stack);
			an_f_advise(x, a->advised || a->prefetched
			              ? "Advice/prefetch is present but pages still bounce: give "
			                "each phase its own buffer or "
			                "use cudaMemAdviseSetReadMostly for shared read-only data."
			              : "Prefetch before each phase (cudaMemPrefetchAsync to the "
			                "GPU that uses it next) or set "
			                "cudaMemAdviseSetPreferredLocation + "
			                "cudaMemAdviseSetAccessedBy; avoid touching it "
			                "from the CPU between GPU kernels.");
		}
	}
}

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

static void stragglers(const struct an_job *job, const double *th, struct an_findings *out)
{
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank_x *x = &job->rx[f];
		if (!x->colls || !x->last_count)
			continue;
		double share = (double)x->last_count / (double)x->colls;
		double lead = x->median_lead_ns / 1e6;
		if (share < th[AN_TH_straggler_share] || lead < th[AN_TH_straggler_min_ms])
			continue;
		/* DDP's own asymmetry reaches ~12% of a fast step (shipped ddp_killed: 0.56 ms of
		 * 4.9 ms); milliseconds lost in every longer step are a straggler too */
		int share_ok = lead * 1e6 >= th[AN_TH_straggler_step_share] * job->step_ns;
		int long_ok = lead >= th[AN_TH_straggler_long_ms] &&
		              lead * 1e6 >= th[AN_TH_straggler_long_share] * job->step_ns;
		if (job->step_ns > 0 && !share_ok && !long_ok)
			continue;
		struct an_finding *y = an_f_add(out, AN_F_straggler, AN_SEV_WARNING,
		                           "Rank %d arrives last at %.0f%% of collectives, "
		                           "typically %.2f ms after the others",
		                           an_f_rank_id(job, f), share * 100, lead);
		y->rank = an_f_rank_id(job, f);
		an_f_num(y, "rank", an_f_rank_id(job, f), NULL);
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
		an_f_advise(y, "Others wait for this rank in every collective: look at what it does "
		          "before them "
		          "(data loading, uneven batch or shard sizes, CPU contention, a slower "
		          "GPU or host).");
	}
}

static void exposed(const struct an_job *job, const double *th, struct an_findings *out)
{
	if (!job->have_gpu)
		return;
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
		return;
	struct an_finding *x =
	    an_f_add(out, AN_F_exposed_communication,
	        share >= th[AN_TH_exposed_critical] ? AN_SEV_CRITICAL : AN_SEV_WARNING,
	        "%.0f%% of %s is communication not hidden behind compute", share * 100,
	        win ? "the training steps' time" : "wall time");
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
	an_f_advise(x, "Overlap communication with compute: DDP bucket_cap_mb / "
	          "gradient_as_bucket_view, FSDP "
	          "prefetch, fewer and larger collectives; or make it cheaper (check "
	          "pcie_fallback and "
	          "low_bus_bandwidth first).");
}

static void low_bw(const struct an_job *job, const double *th, struct big *big,
                   struct an_findings *out)
{
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		const struct an_comm *c = &job->comms[ci];
		if (c->peak_Bps <= 0 || c->nranks < 2)
			continue;
		/* one finding per communicator: the collective losing the most GPU time, others
		 * named */
		int worst = -1;
		char others[160] = "";
		for (int fn = 0; fn < NVLP_NCCL_FN_COUNT; fn++) {
			struct big *b = &big[ci * NVLP_NCCL_FN_COUNT + fn];
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
		struct big *b = &big[ci * NVLP_NCCL_FN_COUNT + worst];
		double busbw = b->sbus / b->ns;
		struct an_finding *x = an_f_add(out, AN_F_low_bus_bandwidth, AN_SEV_WARNING,
		                           "%s on %d ranks reaches %.1f GB/s bus bandwidth, %.0f%% "
		                           "of the %.0f GB/s NVLink peak",
		                           nvlp_nccl_fn_name((unsigned)worst), c->nranks, busbw,
		                           busbw * 1e11 / c->peak_Bps, c->peak_Bps / 1e9);
		x->comm = (int)ci;
		an_f_str(x, "comm", "%016llx", (unsigned long long)c->hash);
		an_f_str(x, "collective", "%s", nvlp_nccl_fn_name((unsigned)worst));
		an_f_num(x, "calls", (double)b->calls, NULL);
		an_f_num(x, "min_message_mib", th[AN_TH_low_busbw_min_mib], "MiB");
		an_f_num(x, "algbw_gbps", b->salg / b->ns, "GB/s");
		an_f_num(x, "busbw_gbps", busbw, "GB/s");
		an_f_peak(x, c->peak_Bps / 1e9);
		if (others[0])
			an_f_str(x, "also_low", "%s", others);
		/* no straggler advice: bandwidths use transfer time, not waiting; explain() gives
		 * the pcie_fallback advice when the fallback is on this communicator */
		an_f_advise(x, "Large messages should reach 60-80% of the link: check "
		          "NCCL_ALGO/NCCL_PROTO "
		          "overrides, channel counts (NCCL_MIN_NCHANNELS) and "
		          "NCCL_DEBUG=INFO transports.");
	}
}

/* Records lost in a burst (a full per-thread buffer): that process's figures are partial. */
static void dropped(const struct an_job *job, struct an_findings *out)
{
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok || !r->dropped)
			continue;
		struct an_finding *x =
		    an_f_add(out, AN_F_dropped_records, AN_SEV_WARNING,
		        "Rank %d (pid %d on %s) lost %llu records: its trace buffers were full",
		        an_f_rank_id(job, f), r->pid, r->host, (unsigned long long)r->dropped);
		x->rank = an_f_rank_id(job, f);
		an_f_num(x, "rank", an_f_rank_id(job, f), NULL);
		an_f_num(x, "pid", r->pid, NULL);
		an_f_str(x, "host", "%s", r->host);
		an_f_num(x, "dropped_records", (double)r->dropped, NULL);
		an_f_num(x, "recorded", (double)r->records, NULL);
		an_f_advise(x, "This process's figures are partial. Give each thread a larger buffer "
		          "(NVLPROF_BUFFER_KB) or record fewer kinds.");
	}
}

/* Mark y as a consequence of root x: y drops to info (its own severity kept in evidence), x rises
 * to y's former severity (the root cause carries the cost of what it explains), and y's advice
 * points at x. share < 0: not a measured share. */
static void demote(struct an_finding *x, struct an_finding *y, double share, const char *advice)
{
	y->explained_by = x->id;
	y->sev_before = y->sev;
	an_f_str(y, "explained_by", "%s", x->id);
	if (share >= 0)
		an_f_num(y, "explained_share", share > 1 ? 1 : share, NULL);
	an_f_str(y, "severity_alone", "%s", an_sev_name(y->sev));
	int k = 0;
	while (k < x->nev && strcmp(x->ev[k].key, "explains"))
		k++;
	if (k < x->nev) {
		size_t l = strlen(x->ev[k].str);
		snprintf(x->ev[k].str + l, sizeof x->ev[k].str - l, ",%s", y->id);
	} else
		an_f_str(x, "explains", "%s", y->id);
	if (y->sev > x->sev)
		x->sev = y->sev;
	y->sev = AN_SEV_INFO;
	an_f_advise(y, advice);
}

/* Root causes and the findings they explain (see REPORT_JSON.md "explained findings"):
 * - pcie_fallback explains low_bus_bandwidth on the same communicator;
 * - straggler explains exposed_communication when the others' waiting for it is at least
 *   explained_share of the exposed time: the straggler arrives last and barely waits, so the other
 *   ranks' exposed time beyond its own is time their NCCL kernels sat waiting for it
 *   (sum over ranks r != s of max(0, exposed_r - exposed_s) / sum of exposed_r, same window as
 *   exposed_share);
 * - otherwise pcie_fallback explains exposed_communication when the fallback communicator's calls
 *   hold at least explained_share of the exposed time (an_comm_exposed_ns).
 * The straggler is tried first: waiting is measured directly, and a fallback communicator is
 * often the only one, which would claim every exposed nanosecond. */
static void explain_exposed(const struct an_job *job, const double *th, int fb_comm,
                            struct an_findings *out, struct an_finding *fb, struct an_finding *exp);
static void explain(const struct an_job *job, const double *th, int fb_comm,
                    struct an_findings *out)
{
	struct an_finding *fb = NULL, *exp = NULL;
	for (size_t i = 0; i < out->n; i++) {
		if (out->v[i].fid == AN_F_pcie_fallback)
			fb = &out->v[i];
		else if (out->v[i].fid == AN_F_exposed_communication)
			exp = &out->v[i];
	}
	explain_exposed(job, th, fb_comm, out, fb, exp); /* first: its root lists it first */
	if (fb && fb_comm >= 0) {
		for (size_t i = 0; i < out->n; i++) {
			struct an_finding *y = &out->v[i];
			if (y->fid == AN_F_low_bus_bandwidth && !y->explained_by && y->comm == fb_comm)
				demote(fb, y, -1,
				       "See pcie_fallback: the traffic is not on NVLink; fix that "
				       "first.");
		}
	}
}

static void explain_exposed(const struct an_job *job, const double *th, int fb_comm,
                            struct an_findings *out, struct an_finding *fb, struct an_finding *exp)
{
	if (!exp)
		return;
	/* straggler: the others' exposed time beyond the straggler's own */
	struct an_finding *best = NULL;
	double best_share = 0;
	for (size_t i = 0; i < out->n; i++) {
		struct an_finding *x = &out->v[i];
		if (x->fid != AN_F_straggler)
			continue;
		int rk = x->rank;
		double es = -1, tot = 0, excess = 0;
		for (size_t f = 0; f < job->nranks; f++)
			if (an_f_rank_id(job, f) == rk && job->ranks[f].ok) {
				double sp;
				an_rank_exposure(job, &job->ranks[f], &es, &sp, NULL);
			}
		if (es < 0)
			continue;
		for (size_t f = 0; f < job->nranks; f++) {
			const struct an_rank *r = &job->ranks[f];
			if (!r->ok || !r->kind_count[NVLP_K_KERNEL])
				continue;
			double e, sp;
			an_rank_exposure(job, r, &e, &sp, NULL);
			tot += e;
			if (an_f_rank_id(job, f) != rk && e > es)
				excess += e - es;
		}
		double share = tot > 0 ? excess / tot : 0;
		if (share > best_share) {
			best_share = share;
			best = x;
		}
	}
	if (best && best_share >= th[AN_TH_explained_share]) {
		exp->root_rank = best->rank;
		demote(
		    best, exp, best_share,
		    "See straggler: the other ranks' NCCL kernels wait for the late rank and that "
		    "waiting counts as exposed communication; fix the straggler first.");
		return;
	}
	if (fb && fb_comm >= 0) {
		double all = 0, mine = an_comm_exposed_ns(job, fb_comm, &all);
		double share = all > 0 ? mine / all : 0;
		if (share >= th[AN_TH_explained_share])
			demote(
			    fb, exp, share,
			    "See pcie_fallback: collectives over PCIe/host memory are too slow to "
			    "hide; fix that first.");
	}
}

/* Within a severity, causes before their consequences: a fallback or a straggler explains low
 * bandwidth and exposed communication, so it is read first. */
static int cmp_find(const void *a, const void *b)
{
	const struct an_finding *x = a, *y = b;
	if (x->sev != y->sev)
		return y->sev - x->sev;
	if (x->fid != y->fid) /* the list's order: causes first */
		return x->fid < y->fid ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* Bytes, bus bytes and transfer time of the large GPU-timed calls per (communicator, NCCL
 * function); NULL if out of memory */
static struct big *big_calls(const struct an_job *job, const double *th)
{
	size_t nb = job->ncomms * NVLP_NCCL_FN_COUNT;
	struct big *big = calloc(nb ? nb : 1, sizeof *big);
	if (!big || job->calls_gpu_none)
		return big;
	double minb = th[AN_TH_low_busbw_min_mib] * MIB;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t k = 0; k < r->ncalls; k++) {
			const struct an_call *c = &r->calls[k];
			if (!c->gpu_start || !c->gpu_dur || (double)c->bytes < minb)
				continue;
			struct big *b = &big[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
			b->salg += (double)c->bytes;
			b->sbus +=
			    (double)c->bytes * an_busbw_factor(c->fn, job->comms[c->comm].nranks);
			b->ns += an_call_xfer_ns(job, c);
			b->calls++;
		}
	}
	return big;
}

/* Stable order: severity, then id (qsort is not stable: ties broken by id only, and same-id
 * findings were added in rank order, kept by this insertion sort) */
static void sort_findings(struct an_findings *out)
{
	for (size_t i = 1; i < out->n; i++) {
		struct an_finding t = out->v[i];
		size_t j = i;
		while (j > 0 && cmp_find(&out->v[j - 1], &t) > 0) {
			out->v[j] = out->v[j - 1];
			j--;
		}
		out->v[j] = t;
	}
}

/* Each explained finding right after its root (diagnosis order: cause, then what it
 * explains); out of memory keeps the plain order */
static void group_explained(struct an_findings *out)
{
	struct an_finding *v = malloc((out->n ? out->n : 1) * sizeof *v);
	char *used = calloc(out->n ? out->n : 1, 1);
	if (!v || !used) {
		free(v);
		free(used);
		return;
	}
	size_t n = 0;
	for (size_t i = 0; i < out->n; i++) {
		const struct an_finding *x = &out->v[i];
		if (x->explained_by)
			continue;
		v[n++] = *x;
		used[i] = 1;
		for (size_t k = 0; k < out->n; k++) {
			const struct an_finding *y = &out->v[k];
			if (!used[k] && y->explained_by && !strcmp(y->explained_by, x->id) &&
			    (y->root_rank < 0 || y->root_rank == x->rank)) {
				v[n++] = *y;
				used[k] = 1;
			}
		}
	}
	for (size_t k = 0; k < out->n; k++) /* a root not found: keep the finding anyway */
		if (!used[k])
			v[n++] = out->v[k];
	free(used);
	free(out->v);
	out->v = v;
}

int an_findings_compute(const struct an_job *job, const double *th, struct an_findings *out)
{
	memset(out, 0, sizeof *out);
	struct big *big = big_calls(job, th);
	if (!big)
		return -1;
	int fb_comm = fallback(job, th, big, out);
	if (an_detect_nccl_split_host(job, th, out))
		goto oom;
	if (an_detect_peer_access_disabled(job, th, out))
		goto oom;
	thrashing(job, th, out);
	stragglers(job, th, out);
	if (an_detect_hang_suspect(job, th, out))
		goto oom;
	an_mismatch_findings(job, out);
	if (an_detect_rank_ended(job, th, out))
		goto oom;
	exposed(job, th, out);
	low_bw(job, th, big, out);
	dropped(job, out);
	an_detect_collection_gaps(job, out);
	free(big);
	explain(job, th, fb_comm, out);
	sort_findings(out);
	group_explained(out);
	return 0;
oom: /* out empty, as the callers expect of -1 */
	free(big);
	an_findings_free(out);
	return -1;
}

void an_findings_free(struct an_findings *f)
{
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

const struct an_finding *an_findings_find(const struct an_findings *f, enum an_fid fid)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].fid == fid)
			return &f->v[i];
	return NULL;
}

const struct an_finding *an_findings_get(const struct an_findings *f, const char *id)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->v[i].id, id))
			return &f->v[i];
	return NULL;
}

const char *an_findings_env_cause(const struct an_findings *f)
{
	const struct an_finding *x = an_findings_find(f, AN_F_pcie_fallback);
	if (!x)
		return "";
	for (int i = 0; i < x->nev; i++)
		if (!strcmp(x->ev[i].key, "env"))
			return x->ev[i].str;
	return "link counters";
}

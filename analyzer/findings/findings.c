/* findings.c: turns an analyzed job into findings: runs the detectors (det_*.c, mismatch.c), then
 * marks what a root cause explains (severity, explained_by), sorts by severity and puts each
 * explained finding after its root. The detectors: a table by finding id, run in one order. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "model/stages.h" /* an_rank_exposure, an_comm_exposed_ns */
#include "nvlp_trace.h"
#include "util/containers.h" /* AN_CMP_KEY */

/* Mark y as a consequence of root x: y drops to info (its own severity kept in evidence), x rises
 * to y's former severity (the root cause carries the cost of what it explains), and y's advice
 * points at x (wording.c's text for the pair). share < 0: not a measured share. */
static void demote(struct an_finding *x, struct an_finding *y, double share)
{
	y->explained_by = x->id;
	y->sev_before = y->sev;
	an_f_str(y, AN_EV_EXPLAINED_BY, "%s", x->id);
	if (share >= 0)
		an_f_num(y, "explained_share", share > 1 ? 1 : share, NULL);
	an_f_str(y, AN_EV_SEVERITY_ALONE, "%s", an_sev_name(y->sev));
	const struct an_ev *e = an_ev_find(x, AN_EV_EXPLAINS, 1);
	if (e) {
		struct an_ev *w = &x->ev[e - x->ev];
		size_t l = strlen(w->str);
		snprintf(w->str + l, sizeof w->str - l, ",%s", y->id);
	} else
		an_f_str(x, AN_EV_EXPLAINS, "%s", y->id);
	if (y->sev > x->sev)
		x->sev = y->sev;
	y->sev = AN_SEV_INFO;
	an_f_advise(y, an_f_explained_advice(x->fid, y->fid));
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
				demote(fb, y, -1);
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
		demote(best, exp, best_share);
		return;
	}
	if (fb && fb_comm >= 0) {
		double all = 0, mine = an_comm_exposed_ns(job, fb_comm, &all);
		double share = all > 0 ? mine / all : 0;
		if (share >= th[AN_TH_explained_share])
			demote(fb, exp, share);
	}
}

/* Within a severity, causes before their consequences: a fallback or a straggler explains low
 * bandwidth and exposed communication, so it is read first. */
static int cmp_find(const void *a, const void *b)
{
	const struct an_finding *x = a, *y = b;
	if (x->sev != y->sev)
		return y->sev - x->sev;
	AN_CMP_KEY(x, y, fid); /* the list's order: causes first */
	return strcmp(x->id, y->id);
}

/* Bytes, bus bytes and transfer time of the large GPU-timed calls per (communicator, NCCL
 * function); NULL if out of memory */
static struct an_big *big_calls(const struct an_job *job, const double *th)
{
	size_t nb = job->ncomms * NVLP_NCCL_FN_COUNT;
	struct an_big *big = calloc(nb ? nb : 1, sizeof *big);
	if (!big || job->calls_gpu_none)
		return big;
	double minb = th[AN_TH_low_busbw_min_mib] * MIB;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t k = 0; k < r->ncalls; k++) {
			const struct an_call *c = &r->calls[k];
			if (!c->gpu_start || !c->gpu_dur || (double)c->bytes < minb)
				continue;
			struct an_big *b = &big[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
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

/* Every finding's detector, by id: a finding of AN_FINDINGS without its an_detect_<id> does not
 * link */
static an_detect_fn *const detectors[AN_F_COUNT] = {
#define AN_DETECT_ENTRY(id, what) [AN_F_##id] = an_detect_##id,
    AN_FINDINGS(AN_DETECT_ENTRY)
#undef AN_DETECT_ENTRY
};

/* The order the detectors run in. It is not the list's order (the reading order): the findings
 * are sorted afterwards by severity and the list's order, same-id findings keeping the order
 * they were added in, so only one dependency sets it: collective_mismatch runs after
 * hang_suspect, whose findings it reads (the hang that follows a mismatch on its communicator
 * gains it as its cause). rank_ended asks det_hang.c which hangs are told (an_f_hang_shown), not
 * their findings; pcie_fallback's communicator (left.fb_comm) is read by explain(), after all of
 * them. The rest is the order they were written in. */
#define AN_RUN_ORDER(X)                                                                            \
	X(pcie_fallback)                                                                           \
	X(nccl_split_host)                                                                         \
	X(peer_access_disabled)                                                                    \
	X(uma_thrashing)                                                                           \
	X(straggler)                                                                               \
	X(hang_suspect)                                                                            \
	X(collective_mismatch)                                                                     \
	X(rank_ended)                                                                              \
	X(exposed_communication)                                                                   \
	X(low_bus_bandwidth)                                                                       \
	X(dropped_records)                                                                         \
	X(collection_gaps)
#define AN_RUN_ENTRY(id) AN_F_##id,
static const enum an_fid run_order[] = {AN_RUN_ORDER(AN_RUN_ENTRY)};
#undef AN_RUN_ENTRY
/* every finding runs exactly once: AN_F_COUNT entries that together name every id */
#define AN_RUN_BIT(id) | (1ull << AN_F_##id)
_Static_assert(AN_F_COUNT < 64 && sizeof run_order / sizeof run_order[0] == AN_F_COUNT &&
                   (0 AN_RUN_ORDER(AN_RUN_BIT)) == (1ull << AN_F_COUNT) - 1,
               "AN_RUN_ORDER must name every finding of AN_FINDINGS exactly once");
#undef AN_RUN_BIT

int an_findings_compute(const struct an_job *job, const double *th, struct an_findings *out)
{
	memset(out, 0, sizeof *out);
	struct an_big *big = big_calls(job, th);
	if (!big)
		return -1;
	struct an_detect_left left = {.fb_comm = -1};
	const struct an_detect_ctx ctx = {.job = job, .th = th, .big = big, .left = &left};
	for (size_t i = 0; i < AN_F_COUNT; i++)
		if (detectors[run_order[i]](&ctx, out)) { /* out empty, as the callers expect */
			free(big);
			an_findings_free(out);
			return -1;
		}
	free(big);
	explain(job, th, left.fb_comm, out);
	sort_findings(out);
	group_explained(out);
	return 0;
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
	const char *env = an_ev_str(x, AN_EV_ENV);
	return env ? env : "link counters";
}

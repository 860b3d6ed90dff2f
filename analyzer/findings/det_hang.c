/* det_hang.c: the hang_suspect finding: a collective some ranks never entered while the others
 * waited in it; who, where each rank was and how it ended. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "model/ending.h" /* an_end_inflight */
#include "model/stages.h" /* an_job_time */
#include "util/util.h" /* an_fmt_value */

/* ncclResult_t as NCCL names it */
static const char *nccl_result_name(int rc)
{
	static const char *const n[] = {"ncclSuccess",        "ncclUnhandledCudaError",
	                                "ncclSystemError",    "ncclInternalError",
	                                "ncclInvalidArgument", "ncclInvalidUsage",
	                                "ncclRemoteError",    "ncclInProgress"};
	return rc >= 0 && rc < (int)(sizeof n / sizeof n[0]) ? n[rc] : "an NCCL error";
}

/* The ranks (ascending) as "0,2,3"; past AN_LIST_PLAIN of them, runs as ranges
 * ("0-699,701-1023"); what does not fit in len ends the list as "... and N more". */
#define AN_LIST_PLAIN 16
static void rank_list(char *buf, size_t len, const int *ranks, int n)
{
	size_t at = 0;
	buf[0] = 0;
	for (int k = 0; k < n;) {
		int e = k;
		while (n > AN_LIST_PLAIN && e + 1 < n && ranks[e + 1] == ranks[e] + 1)
			e++;
		char item[32], more[32];
		if (e - k >= 2)
			snprintf(item, sizeof item, "%s%d-%d", k ? "," : "", ranks[k], ranks[e]);
		else
			snprintf(item, sizeof item, "%s%d", k ? "," : "", ranks[k]), e = k;
		int left = n - e - 1;
		snprintf(more, sizeof more, " and %d more", n - k);
		if (at + strlen(item) + (left ? strlen(more) : 0) >= len) {
			snprintf(buf + at, len - at, "%s", more);
			return;
		}
		at += (size_t)snprintf(buf + at, len - at, "%s", item);
		k = e + 1;
	}
}

/* The hang_suspect finding of h with its title: who never entered and who waited */
static struct an_finding *hang_add(const struct an_job *job, const struct an_hang *h,
                                   const char *miss, struct an_findings *out)
{
	char failed[96] = "", cname[80] = "", waited[32];
	an_fmt_value(waited, sizeof waited, h->wait_ms, "ms");
	if (h->failed_rank >= 0 && h->failed_seq != h->seq)
		snprintf(failed, sizeof failed, " (rank %d's next call, #%u, failed: %s)",
		         h->failed_rank, h->failed_seq, nccl_result_name(h->failed_rc));
	else if (h->failed_rank >= 0)
		snprintf(failed, sizeof failed, " (rank %d's call failed: %s)", h->failed_rank,
		         nccl_result_name(h->failed_rc));
	if (job->comms[h->comm].name[0])
		snprintf(cname, sizeof cname, " (\"%s\")", job->comms[h->comm].name);
	char count[24] = "", list[128];
	if (h->nmissing > AN_LIST_PLAIN) { /* the title names them in short: ranges, a count */
		snprintf(count, sizeof count, " (%d)", h->nmissing);
		rank_list(list, 72, h->missing, h->nmissing);
		miss = list;
	}
	return an_f_add(out, AN_F_hang_suspect, AN_SEV_CRITICAL,
	           "%s #%u on comm %016llx%s never entered by rank%s %s%s; others waited %s%s",
	           nvlp_nccl_fn_name(h->fn), h->seq, (unsigned long long)job->comms[h->comm].hash,
	           cname, h->nmissing > 1 ? "s" : "", miss, count, waited, failed);
}

/* Where each rank's last NCCL call came from: the missing ones stopped after it (all named),
 * the waiting ones are blocked in it (the first two) */
static void hang_python(struct an_finding *x, const struct an_job *job, const struct an_hang *h)
{
	for (int pass = 0, waiting = 0; pass < 2; pass++)
		for (size_t f = 0; f < job->nranks; f++) {
			const struct an_rank *r = &job->ranks[f];
			int id = an_f_rank_id(job, f);
			int in = an_hang_member(h, id) == (pass ? AN_HANG_PRESENT : AN_HANG_MISSING);
			if (!in || !r->ok || !r->npyrefs || (pass && waiting >= 2))
				continue;
			char key[32];
			snprintf(key, sizeof key, AN_EV_PYTHON_RANK, id);
			int n = x ? x->nev : 0;
			an_f_python(x, key, pass ? "waits in NCCL at" : "last NCCL call at", r,
			          an_f_py_last_nccl(r));
			waiting += pass && x && x->nev > n;
		}
}

/* Where the main thread of each missing rank (all) and waiting rank (the first two) was at its
 * end, from the Python sampler: "31.2 s in load_next_batch (train.py:23) <- main (train.py:40)" */
static void hang_samples(struct an_finding *x, const struct an_job *job, const struct an_hang *h)
{
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < (pass ? h->npresent : h->nmissing) && k < (pass ? 2 : AN_LIST_PLAIN);
		     k++) {
			int id = pass ? h->present[k] : h->missing[k], fi = an_f_file_of(job, id);
			if (fi < 0 || !job->ranks[fi].ok)
				continue;
			char key[32];
			snprintf(key, sizeof key, AN_EV_PLACE_RANK, id);
			an_f_place_at_end(x, key, &job->ranks[fi]);
		}
}

/* Where rank id was when it ended (the call in flight) and what its GPU still ran (kernel
 * channels that never stopped: the collective was running there) */
static void hang_place(struct an_finding *x, const struct an_job *job, const struct an_rank *r,
                       int id)
{
	char key[32], buf[192];
	const struct an_inflight *fl = an_end_inflight(r);
	if (fl) {
		an_inflight_text(job, r, fl, buf, sizeof buf);
		snprintf(key, sizeof key, "rank_%d_in_flight", id);
		an_f_str(x, key, "%s", buf);
	}
	if (r->kch_nostop) {
		snprintf(key, sizeof key, "rank_%d_gpu", id);
		an_f_str(x, key,
		       "%llu NCCL kernel channel(s) of %s (NCCL's #%u) started and never stopped: the "
		       "collective was still running on the GPU",
		       (unsigned long long)r->kch_nostop, nvlp_nccl_fn_name(r->kch_nostop_fn),
		       r->kch_nostop_seq);
	}
}

/* How the missing ranks ended, and then the waiting ones (stopped while waiting) */
static void hang_endings(struct an_finding *x, const struct an_job *job, const struct an_hang *h,
                         const struct an_oom_rise *rises, size_t nrises)
{
	for (int pass = 0; pass < 2; pass++) /* each list's first ranks (the evidence is bounded) */
		for (int k = 0; k < (pass ? h->npresent : h->nmissing) && k < AN_LIST_PLAIN; k++) {
			int id = pass ? h->present[k] : h->missing[k], fi = an_f_file_of(job, id);
			char how[160], step[120], key[32];
			uint64_t in;
			if (fi < 0 || !job->ranks[fi].ok)
				continue;
			hang_place(x, job, &job->ranks[fi], id);
			if (!an_f_end_of(job, &job->ranks[fi], rises, nrises, how, sizeof how, step,
			            sizeof step, &in))
				continue;
			snprintf(key, sizeof key, "rank_%d_ended", id);
			an_f_str(x, key, "%s%s", how, step);
			snprintf(key, sizeof key, "rank_%d_stack", id); /* a fatal signal's, if any */
			an_f_fatal_stack(x, key, &job->ranks[fi]);
		}
}

/* A hang is told when the ranks waited long enough for it to be more than the job stopping as
 * a whole, and always when a member's trace ended abnormally (a rank killed before a collective
 * the others entered is the hang's cause however short their traces run after), unless every
 * member ended so within hang_min_ms of the others, or every member's trace was cut short (no END
 * record) within killed_together_ms of the others after a wait shorter than that: a job killed as
 * a whole (a time limit's SIGKILL of the tree finds some ranks one collective ahead of the rest,
 * and each trace loses what it had not written yet: up to a frame period, 500 ms) */
int an_f_hang_shown(const struct an_job *job, const double *th, const struct an_hang *h)
{
	int abnormal = 0, all = 1, cut = 1;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < (pass ? h->npresent : h->nmissing); k++) {
			int fi = an_f_file_of(job, pass ? h->present[k] : h->missing[k]);
			if (fi < 0 || !job->ranks[fi].ok)
				continue;
			const struct an_rank *r = &job->ranks[fi];
			int a = an_end_abnormal(r);
			abnormal |= a;
			all &= a;
			cut &= r->end_reason < 0 && !r->fatal.signal;
			uint64_t e = an_job_time(r, r->t_alive);
			lo = e < lo ? e : lo;
			hi = e > hi ? e : hi;
		}
	double spread_ms = lo <= hi ? (double)(hi - lo) / 1e6 : 0;
	if (cut && spread_ms < th[AN_TH_killed_together_ms] && h->wait_ms < th[AN_TH_killed_together_ms])
		return 0;
	if (h->wait_ms >= th[AN_TH_hang_min_ms])
		return 1;
	return abnormal && !(all && spread_ms < th[AN_TH_hang_min_ms]);
}

int an_detect_hang_suspect(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	size_t nrises = 0;
	struct an_oom_rise *rises = job->nhangs ? an_oom_rises(job, &nrises) : NULL;
	for (size_t i = 0; i < job->nhangs; i++) {
		const struct an_hang *h = &job->hangs[i];
		if (!an_f_hang_shown(job, th, h))
			continue;
		char miss[200], pres[200];
		rank_list(miss, sizeof miss, h->missing, h->nmissing);
		rank_list(pres, sizeof pres, h->present, h->npresent);
		struct an_finding *x = hang_add(job, h, miss, out);
		if (!x) {
			free(rises);
			return -1;
		}
		if (h->failed_rank >= 0) {
			an_f_num(x, AN_EV_FAILED_RANK, h->failed_rank, NULL);
			an_f_str(x, AN_EV_FAILED_WITH, "%s", nccl_result_name(h->failed_rc));
			if (h->failed_seq != h->seq)
				an_f_num(x, AN_EV_FAILED_SEQ, h->failed_seq, NULL);
		}
		x->comm = h->comm;
		if (h->nmissing == 1) {
			x->rank = h->missing[0];
			an_f_num(x, AN_EV_RANK, h->missing[0], NULL);
		}
		an_f_str(x, "missing_ranks", "%s", miss);
		an_f_str(x, AN_EV_WAITING_RANKS, "%s", pres);
		an_f_str(x, "comm", "%016llx", (unsigned long long)job->comms[h->comm].hash);
		if (job->comms[h->comm].name[0])
			an_f_str(x, "comm_name", "%s", job->comms[h->comm].name);
		an_f_num(x, AN_EV_SEQ, h->seq, NULL);
		an_f_str(x, AN_EV_COLLECTIVE, "%s", nvlp_nccl_fn_name(h->fn));
		an_f_num(x, "wait_ms", h->wait_ms, "ms");
		hang_python(x, job, h);
		hang_samples(x, job, h);
		hang_endings(x, job, h, rises, nrises);
		an_f_advice(x, AN_ADV_PLAIN);
	}
	free(rises);
	return 0;
}

/* det_ended.c: the rank_ended finding: a rank that ended by a signal, a failing exit status or
 * without an END record, unless a hang that is told explains it. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "model/ending.h" /* an_end_inflight */

/* Ranks a hang explains: missing from a hang (its root) or waiting in one (stopped while
 * waiting, usually by the launcher): their end is told by the hang_suspect finding, when that
 * is printed. */
static int in_hang(const struct an_job *job, const uint8_t *shown, int id, int *missing)
{
	for (size_t h = 0; h < job->nhangs; h++) {
		int m = shown && shown[h] ? an_hang_member(&job->hangs[h], id) : 0;
		if (m)
			return *missing = m == AN_HANG_MISSING, 1;
	}
	return 0;
}

/* The thread a fatal signal hit, and the call the process was in when it ended */
static void ended_fatal(struct an_finding *x, const struct an_job *job, const struct an_rank *r)
{
	if (r->fatal.signal) {
		an_f_num(x, "thread", (double)r->fatal.tid, NULL);
		if (r->fatal.thread[0])
			an_f_str(x, "thread_name", "%s", r->fatal.thread);
		an_f_num(x, "main_thread", r->fatal.main, NULL);
		an_f_fatal_stack(x, "stack", r);
	}
	const struct an_inflight *fl = an_end_inflight(r);
	if (fl) {
		char buf[192];
		an_inflight_text(job, r, fl, buf, sizeof buf);
		an_f_str(x, "in_flight", "%s", buf);
	}
}

/* Abnormal ends only (a signal, no END record, or an exit status > 0), and then the step it was
 * in: a finding of their own, unless a printed hang explains them. */
int an_detect_rank_ended(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	size_t nrises = 0;
	struct an_oom_rise *rises = an_oom_rises(job, &nrises);
	uint8_t *shown = malloc(job->nhangs ? job->nhangs : 1); /* once, not per rank */
	if (!shown) {
		free(rises);
		return -1;
	}
	for (size_t h = 0; h < job->nhangs; h++)
		shown[h] = (uint8_t)an_f_hang_shown(job, th, &job->hangs[h]);
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		char how[160], step[120];
		uint64_t in;
		int missing;
		if (!r->ok || !an_f_end_of(job, r, rises, nrises, how, sizeof how, step, sizeof step, &in) ||
		    in_hang(job, shown, an_f_rank_id(job, f), &missing))
			continue;
		struct an_finding *x = an_f_add(out, AN_F_rank_ended, AN_SEV_WARNING, "Rank %d (pid %d on %s) %s%s",
		                           an_f_rank_id(job, f), r->pid, r->host, how, step);
		if (!x) {
			free(rises);
			free(shown);
			return -1;
		}
		x->rank = an_f_rank_id(job, f);
		an_f_num(x, AN_EV_RANK, an_f_rank_id(job, f), NULL);
		an_f_num(x, "pid", r->pid, NULL);
		an_f_str(x, "ended", "%s", r->fatal.signal                    ? "signal"
		                         : r->end_reason < 0                ? "no END record"
		                         : r->end_reason == NVLP_END_SIGNAL ? "signal"
		                                                            : "exit status");
		if (r->fatal.signal || r->end_signal)
			an_f_num(x, "signal", r->fatal.signal ? r->fatal.signal : r->end_signal, NULL);
		ended_fatal(x, job, r);
		if (r->have_exitinfo && r->end_reason != NVLP_END_SIGNAL && r->end_status >= 0)
			an_f_num(x, "exit_status", r->end_status, NULL);
		if (in)
			an_f_num(x, AN_EV_STEP, (double)in, NULL);
		if (r->end_step)
			an_f_num(x, "steps_completed", (double)r->steps_done, NULL);
		an_f_num(x, "last_record_ms", an_end_ms(job, r), "ms");
		if (r->npyrefs)
			an_f_python(x, AN_EV_PYTHON, "last NCCL call at", r, an_f_py_last_nccl(r));
		/* where the Python sampler last saw its main thread: a process stuck outside any call
		 * (run 17: 27 s in CuPy's compile, whose NVRTC was blocked in cuInit) says where */
		an_f_place_at_end(x, AN_EV_PLACE, r);
		an_f_advice(x, r->fatal.signal                      ? AN_ADV_ENDED_FATAL
		               : r->end_reason == NVLP_END_SIGNAL ? AN_ADV_ENDED_SIGNAL
		                                                  : AN_ADV_PLAIN);
	}
	free(rises);
	free(shown);
	return 0;
}

/* ending.c: how each process of a job ended and where it was, told from its END, EXITINFO, FATAL,
 * INFLIGHT and NOTE OOM_KILL records and the cgroup keys of its header. */
#include "model/ending.h"

#include <signal.h> /* SIGABRT */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc */
#include <string.h> /* strcmp, strsignal */

#include "nvlp_trace.h"
#include "model/stages.h" /* an_job_time, PUSH */

/* The writers read memory.events at least once a second: a rise noted by another process of
 * the cgroup within this of a process's end happened by the time it ended. */
#define OOM_NOTE_SLACK_NS 2000000000ull

struct an_oom_rise *an_oom_rises(const struct an_job *job, size_t *n)
{
	struct an_oom_rise *v = NULL;
	size_t cap = 0;
	*n = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok || r->oom_start < 0 || r->oom_last <= r->oom_start)
			continue;
		uint64_t t = 0; /* the first note that saw the count above its start */
		for (size_t k = 0; k < r->nnotes && !t; k++)
			if (r->notes[k].code == NVLP_NOTE_OOM_KILL &&
			    (int64_t)r->notes[k].value > r->oom_start)
				t = r->notes[k].t;
		struct an_oom_rise *x = PUSH(v, *n, cap);
		if (x)
			*x = (struct an_oom_rise){r, an_job_time(r, t ? t : r->t_alive), r->oom_start,
			                          r->oom_last};
	}
	return v;
}

int an_end_abnormal(const struct an_rank *r)
{
	return r->end_reason < 0 || r->fatal.signal || r->end_reason == NVLP_END_SIGNAL ||
	       ((r->end_reason == NVLP_END_EXIT || r->end_reason == NVLP_END_UEXIT) &&
	        r->have_exitinfo && r->end_status > 0);
}

/* "SIGABRT (abort)" */
static void signal_name(int sig, char *buf, size_t len)
{
	static const struct {
		int sig;
		const char *name, *what;
	} t[] = {{SIGABRT, "SIGABRT", "abort"},          {SIGSEGV, "SIGSEGV", "segmentation fault"},
	         {SIGBUS, "SIGBUS", "bus error"},        {SIGFPE, "SIGFPE", "arithmetic exception"},
	         {SIGILL, "SIGILL", "illegal instruction"}, {SIGTRAP, "SIGTRAP", "trap"},
	         {SIGSYS, "SIGSYS", "bad system call"}};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (t[i].sig == sig) {
			snprintf(buf, len, "%s (%s)", t[i].name, t[i].what);
			return;
		}
	snprintf(buf, len, "signal %d (%s)", sig, strsignal(sig));
}

/* A rise of r's cgroup's oom_kill count by the time r ended: its own notes, or another process
 * of the same cgroup on the same boot. @return the rise, or NULL */
static const struct an_oom_rise *oom_of(const struct an_rank *r, const struct an_oom_rise *v,
                                        size_t n, char *cg, size_t cgl)
{
	char b1[64], b2[64], c2[256];
	const char *boot = n ? an_header_get(r, NVLP_HDR_BOOT_ID, b1, sizeof b1) : NULL;
	const char *cgroup = n ? an_header_get(r, NVLP_HDR_CGROUP, cg, cgl) : NULL;
	if (!cgroup || !*cgroup)
		return NULL;
	uint64_t end = an_job_time(r, r->t_alive), start = an_job_time(r, r->t_mono0);
	for (size_t i = 0; i < n; i++) {
		const struct an_rank *o = v[i].r;
		if (o == r)
			return &v[i];
		const char *ob = an_header_get(o, NVLP_HDR_BOOT_ID, b2, sizeof b2);
		const char *oc = an_header_get(o, NVLP_HDR_CGROUP, c2, sizeof c2);
		if (boot && ob && !strcmp(boot, ob) && oc && !strcmp(cgroup, oc) &&
		    v[i].t <= end + OOM_NOTE_SLACK_NS && v[i].t >= start)
			return &v[i];
	}
	return NULL;
}

/* No END record: SIGKILL or the OOM killer, told apart where the cgroup's count says so */
static void killed_how(const struct an_rank *r, const struct an_oom_rise *rises, size_t nrises,
                       char *how, size_t hl)
{
	char cg[256];
	const struct an_oom_rise *o = oom_of(r, rises, nrises, cg, sizeof cg);
	if (o)
		snprintf(how, hl, "killed by the OOM killer (oom_kill %lld -> %lld in cgroup %s)",
		         (long long)o->from, (long long)o->to, cg);
	else
		snprintf(how, hl, "ended without an END record (killed by SIGKILL or the OOM killer, "
		                  "or a crash the shim could not catch)");
}

int an_end_how(const struct an_job *job, const struct an_rank *r, const struct an_oom_rise *rises,
               size_t nrises, char *how, size_t hl)
{
	(void)job;
	*how = 0;
	if (r->fatal.signal) {
		char sig[64];
		signal_name(r->fatal.signal, sig, sizeof sig);
		snprintf(how, hl, "ended by %s in %sthread %llu%s%s%s", sig, r->fatal.main ? "the main " : "",
		         (unsigned long long)r->fatal.tid, r->fatal.thread[0] ? " (" : "",
		         r->fatal.thread, r->fatal.thread[0] ? ")" : "");
	} else if (r->end_reason < 0)
		killed_how(r, rises, nrises, how, hl);
	else if (r->end_reason == NVLP_END_SIGNAL && r->end_signal > 0)
		snprintf(how, hl, "ended by signal %d (%s)", r->end_signal, strsignal(r->end_signal));
	else if (r->end_reason == NVLP_END_SIGNAL) /* a trace older than EXITINFO */
		snprintf(how, hl, "ended by a signal (SIGTERM or SIGINT)");
	else if ((r->end_reason == NVLP_END_EXIT || r->end_reason == NVLP_END_UEXIT) &&
	         r->have_exitinfo && r->end_status > 0)
		snprintf(how, hl, "exited with status %d%s", r->end_status,
		         r->end_reason == NVLP_END_UEXIT ? " (_exit)" : "");
	else
		return 0;
	return 1;
}

const struct an_inflight *an_end_inflight(const struct an_rank *r)
{
	const struct an_inflight *best = NULL;
	for (size_t i = 0; i < r->ninflight; i++) {
		const struct an_inflight *x = &r->inflight[i];
		if ((uint64_t)r->pid == x->tid)
			return x; /* where the program itself was */
		if (!best || x->t_enter < best->t_enter)
			best = x;
	}
	return best;
}

void an_inflight_text(const struct an_job *job, const struct an_rank *r,
                      const struct an_inflight *x, char *buf, size_t len)
{
	const char *fn = x->kind == NVLP_K_NCCL ? nvlp_nccl_fn_name(x->fn) : nvlp_cuda_fn_name(x->fn);
	char cls = x->kind == NVLP_K_NCCL ? nvlp_nccl_fn_class(x->fn) : 0;
	char what[96] = "", thr[40] = "";
	if (cls == 'C' || cls == 'P') {
		const struct an_call *c = x->call >= 0 ? &r->calls[x->call] : NULL;
		uint64_t hash = c && (size_t)c->comm < job->ncomms ? job->comms[c->comm].hash : x->comm;
		snprintf(what, sizeof what, " #%u on comm %016llx", x->seq, (unsigned long long)hash);
	}
	if (x->tid != (uint64_t)r->pid)
		snprintf(thr, sizeof thr, " (thread %llu)", (unsigned long long)x->tid);
	uint64_t end = r->t_alive > x->t ? r->t_alive : x->t;
	snprintf(buf, len, "%s%s, %.1f s in%s", fn ? fn : "?", what,
	         (double)(end - x->t_enter) / 1e9, thr);
}

double an_end_ms(const struct an_job *job, const struct an_rank *r)
{
	uint64_t t = an_job_time(r, r->t_alive);
	if (!job->t1 || t < job->t0) /* before the job's first record: its start at most */
		return 0;
	if (t > job->t_alive1)
		t = job->t_alive1;
	return (double)(t - job->t0) / 1e6;
}

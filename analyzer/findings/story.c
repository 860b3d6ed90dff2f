/* story.c: the story of a job that failed (story.h): events taken from the findings
 * (collective_mismatch, hang_suspect) and the job model (calls, each rank's end as findings.c's
 * end_of tells it), sorted by time, then told as one paragraph with the time between them. */
#include <stdarg.h> /* va_list */
#include <stdint.h> /* INT32_MAX */
#include <stdlib.h> /* qsort */
#include <string.h> /* strcmp */

#include "model/ending.h" /* an_end_ms: when a rank was last alive */
#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "model/stages.h" /* an_job_time */
#include "findings/story.h"
#include "util/containers.h" /* AN_CMP_KEY */

/* The job's oom_kill rises, read once for every end the story tells (an_f_end_of) */
struct ends {
	struct an_oom_rise *rises;
	size_t n;
};

static double job_ms(const struct an_job *job, const struct an_rank *r, uint64_t t)
{
	return (double)(int64_t)(an_job_time(r, t) - job->t0) / 1e6;
}

/* "812.4 ms", "31.2 s" */
static void dur(char *b, size_t n, double ms)
{
	if (ms < 1000)
		snprintf(b, n, "%.1f ms", ms < 0 ? 0 : ms);
	else
		snprintf(b, n, "%.1f s", ms / 1e3);
}

static struct an_story_ev *ev_add(struct an_story *s, size_t *cap, double t, int rank,
                                  const char *what)
{
	if (s->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct an_story_ev *v = realloc(s->v, nc * sizeof *v);
		if (!v)
			return NULL;
		s->v = v;
		*cap = nc;
	}
	struct an_story_ev *e = &s->v[s->n++];
	*e = (struct an_story_ev){.t_ms = t, .rank = rank, .what = what};
	return e;
}

/* A collective_mismatch: when its first side entered, and what differed (the title's tail) */
static int ev_mismatch(const struct an_job *job, const struct an_finding *x, struct an_story *s,
                       size_t *cap)
{
	uint32_t seq = (uint32_t)an_ev_num(x, AN_EV_SEQ, 0);
	for (size_t i = 0; i < job->nmismatches; i++) {
		const struct an_mismatch *m = &job->mismatches[i];
		if (m->comm != x->comm || m->seq != seq)
			continue;
		double t = -1;
		for (int k = 0; k < m->nsides; k++) {
			const struct an_rank *r = &job->ranks[m->side[k].file];
			double tk = job_ms(job, r, r->calls[m->side[k].k].t_enter);
			t = t < 0 || tk < t ? tk : t;
		}
		const char *d = strstr(x->title, "called differently: ");
		struct an_story_ev *e = ev_add(s, cap, t, m->side[m->nsides - 1].ranks[0], "mismatch");
		if (!e)
			return -1;
		snprintf(e->detail, sizeof e->detail, "%s #%u was called differently",
		         nvlp_nccl_fn_name(m->side[0].fn), seq);
		e->at = strlen(e->detail);
		snprintf(e->detail + e->at, sizeof e->detail - e->at, " (%s)",
		         d ? d + strlen("called differently: ") : "see collective_mismatch");
	}
	return 0;
}

/* The latest call of file f on comm (seq: that one's when seq is UINT32_MAX), or NULL */
static const struct an_call *call_on(const struct an_rank *r, int comm, uint32_t seq)
{
	const struct an_call *c = NULL;
	for (size_t k = r->ncalls; k-- > 0;) {
		const struct an_call *x = &r->calls[k];
		if (x->comm != comm || (seq != UINT32_MAX && x->seq != seq))
			continue;
		if (!c || x->t_enter > c->t_enter)
			c = x;
		if (seq != UINT32_MAX)
			break;
	}
	return c;
}

/* A hang_suspect: each missing rank's last call on the communicator (and where it came from),
 * each waiting rank's entry into the collective */
static int ev_hang(const struct an_job *job, const struct an_finding *x, struct an_story *s,
                   size_t *cap)
{
	uint32_t seq = (uint32_t)an_ev_num(x, AN_EV_SEQ, 0);
	const char *fn = an_ev_str(x, AN_EV_COLLECTIVE);
	for (size_t i = 0; i < job->nhangs; i++) {
		const struct an_hang *h = &job->hangs[i];
		if (h->comm != x->comm || h->seq != seq)
			continue;
		for (int pass = 0; pass < 2; pass++)
			for (int k = 0; k < (pass ? h->npresent : h->nmissing); k++) {
				int id = pass ? h->present[k] : h->missing[k];
				int fi = an_f_file_of(job, id);
				if (fi < 0 || !job->ranks[fi].ok)
					continue;
				const struct an_rank *r = &job->ranks[fi];
				const struct an_call *c = call_on(r, h->comm, pass ? seq : UINT32_MAX);
				if (!c)
					continue;
				struct an_story_ev *e = ev_add(s, cap, job_ms(job, r, c->t_enter), id,
				                               pass ? "entered" : "last_call");
				if (!e)
					return -1;
				char key[32];
				snprintf(key, sizeof key, AN_EV_PYTHON_RANK, id);
				const char *py = an_ev_str(x, key);
				snprintf(key, sizeof key, AN_EV_PLACE_RANK, id);
				const char *place = an_ev_str(x, key);
				if (pass) {
					snprintf(e->detail, sizeof e->detail, "entered %s #%u",
					         fn ? fn : "?", seq);
					e->at = strlen(e->detail);
					const char *fw = an_ev_str(x, AN_EV_FAILED_WITH);
					unsigned fs = (unsigned)an_ev_num(x, AN_EV_FAILED_SEQ, seq);
					if (fw && (int)an_ev_num(x, AN_EV_FAILED_RANK, -1) == id)
						snprintf(e->detail + e->at,
						         sizeof e->detail - e->at,
						         " (its call #%u failed: %s)", fs, fw);
				} else {
					e->at = strlen("made its last call");
					snprintf(e->detail, sizeof e->detail,
					         "made its last call, %s #%u, and never entered #%u%s%s%s%s%s",
					         nvlp_nccl_fn_name(c->fn), c->seq, seq, py ? " (" : "",
					         py ? py : "", py ? ")" : "",
					         place ? "; at its end it had been " : "", place ? place : "");
				}
			}
	}
	return 0;
}

#define STORY_STACK_FRAMES 4 /* of a fatal signal's stack, after the time (rank_ended has 8) */

/* Every rank that ended abnormally, when it was last alive (its last record of any kind: the
 * heartbeats run on while a rank waits in a call; what the waits are measured to); one killed
 * by a fatal signal with its stack's first frames (format 2.2 traces) after the time */
static int ev_ends(const struct an_job *job, const struct ends *ends, struct an_story *s,
                   size_t *cap)
{
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		char how[160], step[120];
		uint64_t in;
		if (!r->ok || !r->t_last || !an_f_end_of(job, r, ends->rises, ends->n, how, sizeof how, step, sizeof step, &in))
			continue;
		struct an_story_ev *e = ev_add(s, cap, an_end_ms(job, r), an_f_rank_id(job, f), "ended");
		if (!e)
			return -1;
		snprintf(e->detail, sizeof e->detail, "%s", how);
		e->at = strlen(e->detail);
		const struct an_stack *st = r->fatal.stack ? an_find_stack(r, r->fatal.stack) : NULL;
		if (st && st->n) {
			char frames[240];
			an_stack_fatal(r, st, STORY_STACK_FRAMES, frames, sizeof frames);
			size_t o = strlen(e->detail);
			snprintf(e->detail + o, sizeof e->detail - o, " (stack: %s)", frames);
		}
	}
	return 0;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct an_story_ev *x = a, *y = b;
	AN_CMP_KEY(x, y, t_ms);
	return x->rank - y->rank;
}

static void cat(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cat(char *buf, size_t len, const char *fmt, ...)
{
	size_t o = strlen(buf);
	if (o + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + o, len - o, fmt, ap);
	va_end(ap);
}

/* The step the job failed in: the first hang's missing rank's, else the mismatch's, else the
 * first abnormal end's (0: steps unknown) */
static uint64_t failed_step(const struct an_job *job, const struct ends *ends,
                            const struct an_findings *f)
{
	const struct an_finding *h = an_findings_find(f, AN_F_hang_suspect);
	const struct an_finding *m = an_findings_find(f, AN_F_collective_mismatch);
	for (size_t i = 0; h && i < job->nhangs; i++)
		if (job->hangs[i].comm == h->comm && job->hangs[i].nmissing &&
		    job->hangs[i].seq == (uint32_t)an_ev_num(h, AN_EV_SEQ, 0)) {
			int fi = an_f_file_of(job, job->hangs[i].missing[0]);
			char how[160], step[120];
			uint64_t in = 0;
			if (fi >= 0 && an_f_end_of(job, &job->ranks[fi], ends->rises, ends->n, how,
			                           sizeof how, step, sizeof step, &in))
				return in;
			return fi >= 0 ? job->ranks[fi].end_step : 0;
		}
	if (m)
		return (uint64_t)an_ev_num(m, AN_EV_STEP, 0);
	for (size_t fi = 0; fi < job->nranks; fi++) {
		char how[160], step[120];
		uint64_t in = 0;
		if (job->ranks[fi].ok &&
		    an_f_end_of(job, &job->ranks[fi], ends->rises, ends->n, how, sizeof how, step,
		                sizeof step, &in))
			return in;
	}
	return 0;
}

/* The time of event e in the paragraph: "at 8.1 s" for the first, else the time since prev */
static void when(char *buf, size_t len, const struct an_story_ev *e, const struct an_story_ev *prev)
{
	char d[32];
	dur(d, sizeof d, prev ? e->t_ms - prev->t_ms : e->t_ms);
	snprintf(buf, len, prev ? " %s later" : " at %s", d);
}

/* The end event of rank id after event i, or -1 */
static long end_after(const struct an_story *s, size_t i, int id)
{
	for (size_t k = i + 1; k < s->n; k++)
		if (!strcmp(s->v[k].what, "ended") && s->v[k].rank == id)
			return (long)k;
	return -1;
}

/* "ranks 0,2,5 " for events i .. j-1, their ranks in order (the events are in time order) */
static void tell_ranks(char *t, size_t len, const struct an_story *s, size_t i, size_t j)
{
	cat(t, len, "ranks");
	for (int last = INT32_MIN, n = 0; n < (int)(j - i); n++) {
		int next = INT32_MAX;
		for (size_t k = i; k < j; k++)
			if (s->v[k].rank > last && s->v[k].rank < next)
				next = s->v[k].rank;
		if (next == INT32_MAX)
			break;
		cat(t, len, "%s%d", n ? "," : " ", next);
		last = next;
	}
	cat(t, len, " ");
}

/* The paragraph: a heading, then the events in time order, each with the time since the
 * previous; a waiting rank's end told with its wait; ranks in a row that ended alike told once */
static void tell(const struct an_job *job, const struct ends *ends, const struct an_findings *f,
                 struct an_story *s)
{
	char *t = s->text, w[48];
	size_t len = sizeof s->text;
	int hung = an_findings_find(f, AN_F_hang_suspect) != NULL;
	int mism = an_findings_find(f, AN_F_collective_mismatch) != NULL;
	uint64_t step = failed_step(job, ends, f);
	char *told = calloc(s->n ? s->n : 1, 1);
	if (!told)
		return;
	t[0] = 0;
	cat(t, len, "%s", hung ? "Hung" : mism ? "Collective mismatch" : "Failed");
	if (step)
		cat(t, len, " at step %llu", (unsigned long long)step);
	cat(t, len, ": ");
	const struct an_story_ev *prev = NULL;
	for (size_t i = 0; i < s->n; i++) {
		const struct an_story_ev *e = &s->v[i];
		if (told[i])
			continue;
		told[i] = 1;
		size_t j = i + 1; /* ranks ending (or entering) alike right after: one clause */
		while ((!strcmp(e->what, "ended") || !strcmp(e->what, "entered")) && j < s->n &&
		       !told[j] && !strcmp(s->v[j].what, e->what) && !strcmp(s->v[j].detail, e->detail))
			told[j++] = 1;
		cat(t, len, "%s", prev ? "; " : "");
		if (j - i > 1)
			tell_ranks(t, len, s, i, j);
		else if (strcmp(e->what, "mismatch"))
			cat(t, len, "rank %d ", e->rank);
		when(w, sizeof w, e, prev);
		cat(t, len, "%.*s%s", (int)e->at, e->detail, w);
		prev = &s->v[j - 1];
		/* the waiting ranks' ends, told with their wait when they ended alike */
		long k = -1;
		int alike = !strcmp(e->what, "entered");
		for (size_t q = i; alike && q < j; q++) {
			long kq = end_after(s, q, s->v[q].rank);
			alike = kq >= 0 && !told[kq] &&
			        (k < 0 || !strcmp(s->v[kq].detail, s->v[k].detail));
			if (alike && (k < 0 || s->v[kq].t_ms > s->v[k].t_ms))
				k = kq;
		}
		if (alike && k >= 0) {
			when(w, sizeof w, &s->v[k], prev);
			cat(t, len, " and waited in it until %s %s%s", j - i > 1 ? "they" : "it",
			    s->v[k].detail, w);
			for (size_t q = i; q < j; q++)
				told[end_after(s, q, s->v[q].rank)] = 1;
			prev = &s->v[k];
		} else if (!strcmp(e->what, "entered"))
			cat(t, len, " and waited in it");
		cat(t, len, "%s", e->detail + e->at);
	}
	cat(t, len, ".");
	free(told);
}

int an_story_build(const struct an_job *job, const struct an_findings *f, struct an_story *s)
{
	memset(s, 0, sizeof *s);
	size_t cap = 0;
	int rc = 0;
	for (size_t i = 0; !rc && i < f->n; i++)
		if (f->v[i].fid == AN_F_collective_mismatch)
			rc = ev_mismatch(job, &f->v[i], s, &cap);
		else if (f->v[i].fid == AN_F_hang_suspect)
			rc = ev_hang(job, &f->v[i], s, &cap);
	struct ends ends = {0};
	ends.rises = rc ? NULL : an_oom_rises(job, &ends.n);
	if (!rc)
		rc = ev_ends(job, &ends, s, &cap);
	if (!rc && s->n) { /* none: nothing to tell (a rank_ended of a trace without times tells
	                    * itself) */
		qsort(s->v, s->n, sizeof *s->v, cmp_ev);
		tell(job, &ends, f, s);
	}
	free(ends.rises);
	if (rc) {
		an_story_free(s);
		return -1;
	}
	return 0;
}

void an_story_free(struct an_story *s)
{
	free(s->v);
	memset(s, 0, sizeof *s);
}

void an_story_print(FILE *o, const struct an_story *s)
{
	if (!s->text[0])
		return;
	const char *p = s->text;
	while (*p) { /* words to 100 columns */
		size_t n = strlen(p);
		if (n > 100) {
			n = 100;
			while (n > 0 && p[n] != ' ')
				n--;
			if (!n)
				n = strcspn(p, " ");
		}
		fprintf(o, "%.*s\n", (int)n, p);
		p += n;
		while (*p == ' ')
			p++;
	}
	fputc('\n', o);
}

void an_story_json(struct jw *w, const struct an_story *s)
{
	if (!s->text[0])
		return;
	jw_str(w, "story", s->text);
	jw_arr(w, "timeline");
	for (size_t i = 0; i < s->n; i++) {
		jw_obj(w, NULL);
		jw_num(w, "time_ms", s->v[i].t_ms);
		jw_int(w, "rank", s->v[i].rank);
		jw_str(w, "what", s->v[i].what);
		jw_str(w, "detail", s->v[i].detail);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

/* evidence.c: what every detector uses to tell a finding: adding it with its title, its evidence
 * (numbers with units, strings), its advice; rank numbers; where a call came from (native and
 * Python stacks); how a rank ended. Below the detectors: it calls none of them. And an evidence
 * item found by its key (an_ev_find), for whatever reads findings. */
#include <stdarg.h> /* va_list */
#include <stdlib.h> /* realloc */
#include <string.h> /* memset, strcmp */

#include "findings/findings_int.h"
#include "model/ending.h" /* an_end_how: how each rank ended */
#include "model/places.h" /* an_user_frame, an_place_at */
#include "model/stages.h" /* an_job_time */
#include "nvlp_trace.h"

const char *an_sev_name(int sev)
{
	return sev == AN_SEV_CRITICAL ? "critical" : sev == AN_SEV_WARNING ? "warning" : "info";
}

static const char *const fid_names[AN_F_COUNT] = {
#define AN_F_NAME(id, doc) #id,
    AN_FINDINGS(AN_F_NAME)
#undef AN_F_NAME
};

const char *an_fid_name(enum an_fid fid)
{
	return (unsigned)fid < AN_F_COUNT ? fid_names[fid] : "?";
}

struct an_finding *an_f_add(struct an_findings *f, enum an_fid fid, int sev, const char *fmt,
                              ...)
{
	struct an_finding *x = realloc(f->v, (f->n + 1) * sizeof *x);
	if (!x)
		return NULL;
	f->v = x;
	x = &f->v[f->n++];
	memset(x, 0, sizeof *x);
	x->fid = fid;
	x->id = an_fid_name(fid);
	x->sev = sev;
	x->root_rank = -1;
	x->comm = x->rank = x->device = -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->title, sizeof x->title, fmt, ap);
	va_end(ap);
	return x;
}

const struct an_ev *an_ev_find(const struct an_finding *x, const char *key, int is_str)
{
	for (int k = 0; k < x->nev; k++)
		if (x->ev[k].is_str == is_str && !strcmp(x->ev[k].key, key))
			return &x->ev[k];
	return NULL;
}

const char *an_ev_str(const struct an_finding *x, const char *key)
{
	const struct an_ev *e = an_ev_find(x, key, 1);
	return e ? e->str : NULL;
}

double an_ev_num(const struct an_finding *x, const char *key, double dflt)
{
	const struct an_ev *e = an_ev_find(x, key, 0);
	return e ? e->num : dflt;
}

void an_f_num(struct an_finding *x, const char *key, double v, const char *unit)
{
	if (!x || x->nev >= AN_MAX_EV)
		return;
	struct an_ev *e = &x->ev[x->nev++];
	snprintf(e->key, sizeof e->key, "%s", key);
	e->num = v;
	snprintf(e->unit, sizeof e->unit, "%s", unit ? unit : "");
}

void an_f_str(struct an_finding *x, const char *key, const char *fmt, ...)
{
	if (!x || x->nev >= AN_MAX_EV)
		return;
	struct an_ev *e = &x->ev[x->nev++];
	snprintf(e->key, sizeof e->key, "%s", key);
	e->is_str = 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->str, sizeof e->str, fmt, ap);
	va_end(ap);
}

/* The NVLink peak a finding judged by, and which figure that is (an_nvlink_link_Bps) */
void an_f_peak(struct an_finding *x, double gbps)
{
	an_f_num(x, "nvlink_peak_gbps", gbps, "GB/s");
	an_f_str(x, "peak_basis", "%s", an_peak_basis());
}

void an_f_advise(struct an_finding *x, const char *s)
{
	if (x)
		snprintf(x->advice, sizeof x->advice, "%s", s);
}

int an_f_rank_id(const struct an_job *job, size_t f)
{
	return job->ranks[f].rank >= 0 ? job->ranks[f].rank : (int)f;
}

/* Evidence key: the innermost native frames of a STACK, "main+0x11d <- ..." */
void an_f_native(struct an_finding *x, const char *key, const struct an_rank *r,
                      uint64_t stack)
{
	const struct an_stack *s = stack ? an_find_stack(r, stack) : NULL;
	if (!s || !s->n)
		return;
	char buf[240];
	an_stack_chain(r, s, 3, buf, sizeof buf);
	an_f_str(x, key, "%s", buf);
}

/* Evidence key: the stack of the thread a fatal signal hit (FATAL's STACK), "f+0x1c (lib+0x..)
 * <- ..." from the interrupted instruction */
void an_f_fatal_stack(struct an_finding *x, const char *key, const struct an_rank *r)
{
	const struct an_stack *s = r->fatal.stack ? an_find_stack(r, r->fatal.stack) : NULL;
	if (!s || !s->n)
		return;
	char buf[240];
	an_stack_fatal(r, s, 8, buf, sizeof buf);
	an_f_str(x, key, "%s", buf);
}

/* ---- Python locations (PYSTACK/PYREF records) ---- */

#define PY_SHOWN 3 /* frames in a location line: the innermost user frame and its callers */

/* "train.py:41 in build_cache <- train.py:88 in main" from a PYSTACK's text ("file:line:function"
 * per line, innermost first): user frames only, or the innermost frames when there is none.
 * @return 1 when something was written */
static int py_chain_text(const char *text, char *out, size_t len)
{
	out[0] = 0;
	for (int pass = 0; pass < 2 && !out[0]; pass++) {
		int shown = 0;
		for (const char *l = text; *l && shown < PY_SHOWN;) {
			const char *e = strchr(l, '\n');
			size_t n = e ? (size_t)(e - l) : strlen(l);
			const char *next = e ? e + 1 : l + n;
			/* from the right: function, then line; the file may hold ':' */
			const char *fc = memrchr(l, ':', n);
			const char *lc = fc ? memrchr(l, ':', (size_t)(fc - l)) : NULL;
			if (lc && (pass || an_user_frame(l, (size_t)(lc - l)))) {
				const char *base = memrchr(l, '/', (size_t)(lc - l));
				base = base ? base + 1 : l;
				size_t o = strlen(out);
				snprintf(out + o, len - o, "%s%.*s:%.*s in %.*s",
				         shown ? " <- " : "", (int)(lc - base), base,
				         (int)(fc - lc - 1), lc + 1, (int)(l + n - fc - 1), fc + 1);
				shown++;
			}
			l = next;
		}
	}
	return out[0] != 0;
}

static const char *py_text(const struct an_rank *r, uint64_t id)
{
	for (size_t i = 0; id && i < r->npystacks; i++)
		if (r->pystacks[i].id == id)
			return r->pystacks[i].text;
	return NULL;
}

/* The PYSTACK of the one record a PYREF names (COPY by call_id, MANAGED by thread-less time). */
uint64_t an_f_py_of_record(const struct an_rank *r, unsigned kind, uint64_t t, uint64_t call_id)
{
	for (size_t i = 0; i < r->npyrefs; i++) {
		const struct an_pyref *p = &r->pyrefs[i];
		if (p->kind == kind && (call_id ? p->call_id == call_id : p->t == t))
			return p->pystack;
	}
	return 0;
}

/* The chain of the process's last NCCL call: an NCCL PYREF holds for its thread's later calls
 * until the next one, so the latest in time is the one in force at the end (pystack 0: none).
 * With several threads calling NCCL it is the thread whose chain changed last. */
uint64_t an_f_py_last_nccl(const struct an_rank *r)
{
	const struct an_pyref *last = NULL;
	for (size_t i = 0; i < r->npyrefs; i++) {
		const struct an_pyref *p = &r->pyrefs[i];
		if (p->kind == NVLP_K_NCCL && (!last || p->t >= last->t))
			last = p;
	}
	return last ? last->pystack : 0;
}

int an_f_place_at_end(struct an_finding *x, const char *key, const struct an_rank *r)
{
	struct an_place p;
	if (!an_place_at(r, AN_PLACE_MAIN, an_job_time(r, r->t_alive), &p) || !p.pystack)
		return 0;
	char buf[256];
	an_place_text(&p, buf, sizeof buf);
	an_f_str(x, key, "%s", buf);
	return 1;
}

/* Evidence key "python...": "allocated at train.py:41 in build_cache <- ..." */
void an_f_python(struct an_finding *x, const char *key, const char *what,
                      const struct an_rank *r, uint64_t pystack)
{
	const char *t = py_text(r, pystack);
	char chain[200];
	if (t && py_chain_text(t, chain, sizeof chain))
		an_f_str(x, key, "%s %s", what, chain);
}

/* How rank r ended, when not normally (a signal, no END record, or an exit status > 0: -1
 * means main returned; ending.c tells which), and the step it was in. @return 1 if abnormal */
int an_f_end_of(const struct an_job *job, const struct an_rank *r, const struct an_oom_rise *rises,
                  size_t nrises, char *how, size_t hl, char *step, size_t sl, uint64_t *in)
{
	if (!an_end_how(job, r, rises, nrises, how, hl))
		return 0;
	/* a rank that completed every step the job completed, in a job that hung, was in the step
	 * nobody completed */
	*in = !r->end_step                  ? 0
	      : r->steps_done < job->steps ? r->steps_done + 1
	      : job->nhangs                ? job->steps + 1
	                                   : 0;
	*step = 0;
	if (*in && *in <= job->steps)
		snprintf(step, sl, " in step %llu of %llu (%llu completed)", (unsigned long long)*in,
		         (unsigned long long)job->steps, (unsigned long long)r->steps_done);
	else if (*in)
		snprintf(step, sl, " in step %llu, which no rank completed (%llu completed)",
		         (unsigned long long)*in, (unsigned long long)r->steps_done);
	else if (r->end_step)
		snprintf(step, sl, " after the last of the %llu steps", (unsigned long long)job->steps);
	else if (r->ncalls) { /* no steps recognised: where it was in its collectives */
		const struct an_call *c = &r->calls[0];
		for (size_t k = 1; k < r->ncalls; k++)
			if (r->calls[k].t_enter > c->t_enter)
				c = &r->calls[k];
		snprintf(step, sl, " after %zu NCCL calls (the last %s #%u)", r->ncalls,
		         nvlp_nccl_fn_name(c->fn), c->seq);
	}
	return 1;
}

/* The job-file index of the rank printed as id, or -1. */
int an_f_file_of(const struct an_job *job, int id)
{
	return an_file_of_rank(job, id);
}


/* diff_view.c: what `nvlprof diff` compares (diff_view.h): the metrics, bus bandwidth and host
 * time cells, the verdict, findings new / resolved / still, environment and NCCL choices; and
 * diff --html's view of them, formatted as the text prints them. */
#include <math.h>   /* isnan */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc */
#include <string.h> /* strcmp */

#include "findings/diff_view.h"
#include "nvlp_trace.h"

#define MIB (1024.0 * 1024.0)

double an_diff_pct(double b, double a)
{
	return (isnan(a) || isnan(b) || b == 0) ? NAN : (a / b - 1) * 100;
}

/* env.* keys of the first readable process of a job. */
const struct an_rank *an_diff_first_ok(const struct an_job *j)
{
	for (size_t i = 0; i < j->nranks; i++)
		if (j->ranks[i].ok)
			return &j->ranks[i];
	return NULL;
}

/* Variables whose value differs (or that exist on one side only). */
static size_t env_diff(const struct an_rank *rb, const struct an_rank *ra, struct an_denv *out,
                       size_t max)
{
	size_t n = 0;
	const struct an_rank *sides[2] = {rb, ra};
	for (int s = 0; s < 2; s++) {
		if (!sides[s] || !sides[s]->header)
			continue;
		for (const char *p = sides[s]->header; *p && n < max;) {
			const char *nl = strchr(p, '\n'), *eq = strchr(p, '=');
			size_t ll = nl ? (size_t)(nl - p) : strlen(p);
			if (eq && (size_t)(eq - p) < ll &&
			    !strncmp(p, NVLP_HDR_ENV_PREFIX, strlen(NVLP_HDR_ENV_PREFIX))) {
				char key[96], vb[96], va[96];
				snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
				const char *x = rb ? an_header_get(rb, key, vb, sizeof vb) : NULL;
				const char *y = ra ? an_header_get(ra, key, va, sizeof va) : NULL;
				/* nvlprof's own settings (the trace directory above all) are not
				 * a difference between the jobs */
				int ours =
				    !strncmp(key + strlen(NVLP_HDR_ENV_PREFIX), "NVLPROF_", 8);
				int differ = !ours && ((!x) != (!y) || (x && y && strcmp(x, y)));
				int dup = 0;
				for (size_t k = 0; k < n; k++)
					dup |=
					    !strcmp(out[k].name, key + strlen(NVLP_HDR_ENV_PREFIX));
				if (differ && !dup) {
					snprintf(out[n].name, sizeof out[n].name, "%s",
					         key + strlen(NVLP_HDR_ENV_PREFIX));
					snprintf(out[n].b, sizeof out[n].b, "%s",
					         x ? x : "(unset)");
					snprintf(out[n].a, sizeof out[n].a, "%s",
					         y ? y : "(unset)");
					n++;
				}
			}
			p += ll + (nl ? 1 : 0);
		}
	}
	return n;
}

/* The verdict (diff_view.h) of B and A */
static void judge(struct an_dside *B, struct an_dside *A, struct an_dverdict *v)
{
	int steps = !isnan(B->s.step_ms) && !isnan(A->s.step_ms);
	v->metric = steps ? "step_ms" : "wall_ms";
	v->b = steps ? B->s.step_ms : B->s.wall_ms;
	v->a = steps ? A->s.step_ms : A->s.wall_ms;
	v->slower_pct = an_diff_pct(v->b, v->a);
	v->cause[0] = 0;
	int fb = an_findings_find(&B->f, AN_F_pcie_fallback) != NULL,
	    fa = an_findings_find(&A->f, AN_F_pcie_fallback) != NULL;
	double ratio = v->b > 0 ? v->a / v->b : NAN;
	if (!fb && fa)
		snprintf(v->cause, sizeof v->cause,
		         "AFTER falls back from NVLink to PCIe/host memory (%s): %.2fx %s per %s",
		         an_findings_env_cause(&A->f), ratio >= 1 ? ratio : 1 / ratio,
		         ratio >= 1 ? "slower" : "faster", steps ? "step" : "run");
	else if (fb && !fa)
		snprintf(
		    v->cause, sizeof v->cause,
		    "BEFORE fell back to PCIe/host memory (%s), AFTER uses NVLink: %.2fx %s per %s",
		    an_findings_env_cause(&B->f), ratio <= 1 ? 1 / ratio : ratio,
		    ratio <= 1 ? "faster" : "slower", steps ? "step" : "run");
	else {
		static const enum an_fid ids[] = {AN_F_peer_access_disabled, AN_F_uma_thrashing,
		                                  AN_F_straggler, AN_F_hang_suspect};
		for (size_t i = 0; i < sizeof ids / sizeof ids[0] && !v->cause[0]; i++) {
			int b = an_findings_find(&B->f, ids[i]) != NULL,
			    a = an_findings_find(&A->f, ids[i]) != NULL;
			if (a != b)
				snprintf(v->cause, sizeof v->cause, "%s %s in AFTER",
				         an_fid_name(ids[i]), a ? "appears" : "is gone");
		}
	}
}

void an_diff_fmt(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else if (fabs(v) >= 100)
		snprintf(buf, n, "%.1f", v);
	else if (v != 0 && fabs(v) < 1e-4) /* three significant digits, never "7.31e-05" */
		snprintf(buf, n, "%.*f", 2 - (int)floor(log10(fabs(v))), v);
	else
		snprintf(buf, n, "%.3g", v);
}

int an_diff_has(const struct an_findings *f, const char *id)
{
	return an_findings_get(f, id) != NULL;
}

/* Each finding id once, in the order of f. */
static void ids_where(const struct an_findings *f, const struct an_findings *other,
                      int want_in_other, const char **out, size_t *n)
{
	*n = 0;
	for (size_t i = 0; i < f->n; i++) {
		int dup = 0;
		for (size_t k = 0; k < *n; k++)
			dup |= !strcmp(out[k], f->v[i].id);
		if (!dup && an_diff_has(other, f->v[i].id) == want_in_other)
			out[(*n)++] = f->v[i].id;
	}
}

/* Calls of fn with x's algorithm and protocol, summed over the job's communicators. */
static uint64_t choice_calls(const struct an_job *j, unsigned fn, const struct an_jchoice *x)
{
	uint64_t n = 0;
	for (size_t k = 0; k < j->nchoices; k++)
		if (j->choices[k].fn == fn && !strcmp(j->choices[k].algo, x->algo) &&
		    !strcmp(j->choices[k].proto, x->proto))
			n += j->choices[k].calls;
	return n;
}

/* NCCL's usual choice for one collective over a job (most calls), "" if none. */
static void main_choice(const struct an_job *j, unsigned fn, char *out, size_t n)
{
	const struct an_jchoice *best = NULL;
	uint64_t best_calls = 0;
	for (size_t i = 0; i < j->nchoices; i++) {
		const struct an_jchoice *x = &j->choices[i];
		uint64_t c = x->fn == fn ? choice_calls(j, fn, x) : 0;
		if (c > best_calls)
			best = x, best_calls = c;
	}
	out[0] = 0;
	char ch[24];
	if (best)
		snprintf(out, n, "%s/%s %sch", best->algo, best->proto,
		         an_choice_channels(best, ch, sizeof ch));
}

/* A (collective, size) cell diff compares by host time: both sides called it, one has no GPU
 * time for it. */
static int host_cell(const struct an_dside *B, const struct an_dside *A, int c, int sc)
{
	return !isnan(B->s.host_ms_per_call[c][sc]) && !isnan(A->s.host_ms_per_call[c][sc]) &&
	       (isnan(B->s.busbw[c][sc]) || isnan(A->s.busbw[c][sc]));
}

void an_diff_compute(struct an_dside *B, struct an_dside *A, double fail_pct,
                     struct an_diff_rows *d)
{
	memset(d, 0, sizeof *d);
	const struct an_dmetric m[] = {
	    {"wall_ms", B->s.wall_ms, A->s.wall_ms},
	    {"step_ms", B->s.step_ms, A->s.step_ms},
	    {"steps", B->s.steps, A->s.steps},
	    {"comm_ms_per_rank", B->s.comm_ms, A->s.comm_ms},
	    /* the host-timed part of it (report's rank_comm): a change here is no GPU change */
	    {"comm_host_ms_per_rank", B->s.comm_host_ms, A->s.comm_host_ms},
	    {"exposed_ms_per_rank", B->s.exposed_ms, A->s.exposed_ms},
	    {"exposed_share", B->s.exposed_share, A->s.exposed_share},
	    {"nvlink_mib", B->s.nvlink_bytes / MIB, A->s.nvlink_bytes / MIB},
	    {"pcie_mib", B->s.pcie_bytes / MIB, A->s.pcie_bytes / MIB},
	    {"copy_p2p_mib", B->s.copy_p2p_bytes / MIB, A->s.copy_p2p_bytes / MIB},
	    {"copy_staged_mib", B->s.copy_staged_bytes / MIB, A->s.copy_staged_bytes / MIB},
	};
	_Static_assert(sizeof m == sizeof d->m, "diff_rows.m holds every metric");
	memcpy(d->m, m, sizeof m);
	d->nm = sizeof m / sizeof m[0];
	for (int c = 1; c < AN_C_COUNT; c++)
		for (int sc = 0; sc < AN_SIZE_CLASSES; sc++) {
			if (!isnan(B->s.busbw[c][sc]) || !isnan(A->s.busbw[c][sc]))
				d->busbw[d->nbusbw++] =
				    (struct an_dcell){c, sc, B->s.busbw[c][sc], A->s.busbw[c][sc]};
			if (host_cell(B, A, c, sc))
				d->host[d->nhost++] =
				    (struct an_dcell){c, sc, B->s.host_ms_per_call[c][sc],
				                      A->s.host_ms_per_call[c][sc]};
		}
	judge(B, A, &d->v);
	d->ne = env_diff(an_diff_first_ok(&B->job), an_diff_first_ok(&A->job), d->env, 64);
	for (unsigned fn = 1; fn < NVLP_NCCL_FN_COUNT; fn++) {
		struct an_dchoice *x = &d->ch[d->nch];
		main_choice(&B->job, fn, x->b, sizeof x->b);
		main_choice(&A->job, fn, x->a, sizeof x->a);
		if ((x->b[0] || x->a[0]) && strcmp(x->b, x->a))
			d->ch[d->nch++].fn = fn;
	}
	ids_where(&A->f, &B->f, 0, d->fnew, &d->nnew);
	ids_where(&B->f, &A->f, 0, d->fres, &d->nres);
	ids_where(&A->f, &B->f, 1, d->fstill, &d->nstill);
	d->fail_pct = fail_pct;
	d->failed = !isnan(fail_pct) && !isnan(d->v.slower_pct) && d->v.slower_pct > fail_pct;
}

/* A change in percent for a table: "-" when there is none to show. */
void an_diff_fmt_pct(char *buf, size_t n, double b, double a)
{
	double p = an_diff_pct(b, a);
	if (isnan(p))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%+.1f%%", p);
}

/* The VERDICT line, as text prints it and the HTML page shows it first */
void an_diff_verdict_line(const struct an_dverdict *v, char *buf, size_t n)
{
	if (isnan(v->slower_pct))
		snprintf(buf, n, "VERDICT: no comparable time");
	else
		snprintf(buf, n, "VERDICT: AFTER is %.1f%% %s (%s %.3f -> %.3f)%s%s",
		         fabs(v->slower_pct), v->slower_pct >= 0 ? "slower" : "faster", v->metric,
		         v->b, v->a, v->cause[0] ? "; " : "", v->cause);
}

/* The tagged list of findings ids, as text's FINDINGS lines print them */
static void tagged_list(char *buf, size_t n, const struct an_findings *f, const char *const *ids,
                        size_t nids)
{
	size_t k = 0;
	buf[0] = 0;
	for (size_t i = 0; i < nids && k < n; i++) {
		const struct an_finding *x = an_findings_get(f, ids[i]);
		k += (size_t)snprintf(buf + k, n - k, "%s%s [%s%s%s]", i ? ", " : "", ids[i],
		                      x ? an_sev_name(x->sev) : "?",
		                      x && x->explained_by ? ", explained by " : "",
		                      x && x->explained_by ? x->explained_by : "");
	}
	if (!nids)
		snprintf(buf, n, "none");
}

int an_diff_view(const struct an_job *jb, const struct an_findings *fb, const struct an_summary *sb,
                 const struct an_job *ja, const struct an_findings *fa, const struct an_summary *sa,
                 struct an_diff_view *v)
{
	struct an_dside *S =
	    calloc(2, sizeof *S); /* shallow copies: nothing of them is freed here */
	struct an_diff_rows *d = malloc(sizeof *d);
	if (!S || !d) {
		free(S);
		free(d);
		return -1;
	}
	S[0].job = *jb, S[0].f = *fb, S[1].job = *ja, S[1].f = *fa;
	S[0].s = *sb, S[1].s = *sa;
	an_diff_compute(&S[0], &S[1], NAN, d);
	memset(v, 0, sizeof *v);
	an_diff_verdict_line(&d->v, v->verdict, sizeof v->verdict);
	_Static_assert(sizeof v->m / sizeof v->m[0] >= sizeof d->m / sizeof d->m[0],
	               "every metric");
	for (size_t i = 0; i < d->nm; i++) {
		v->m[i].name = d->m[i].name;
		an_diff_fmt(v->m[i].b, sizeof v->m[i].b, d->m[i].b);
		an_diff_fmt(v->m[i].a, sizeof v->m[i].a, d->m[i].a);
		an_diff_fmt_pct(v->m[i].change, sizeof v->m[i].change, d->m[i].b, d->m[i].a);
	}
	v->nm = d->nm;
	for (size_t i = 0; i < d->nbusbw && i < sizeof v->bw / sizeof v->bw[0]; i++) {
		const struct an_dcell *x = &d->busbw[i];
		snprintf(v->bw[i].name, sizeof v->bw[i].name, "%s %s", an_coll_name(x->c),
		         an_size_class_name(x->sc));
		an_diff_fmt(v->bw[i].b, sizeof v->bw[i].b, x->b);
		an_diff_fmt(v->bw[i].a, sizeof v->bw[i].a, x->a);
		an_diff_fmt_pct(v->bw[i].change, sizeof v->bw[i].change, x->b, x->a);
		v->nbw++;
	}
	tagged_list(v->fnew, sizeof v->fnew, fa, d->fnew, d->nnew);
	tagged_list(v->fres, sizeof v->fres, fb, d->fres, d->nres);
	tagged_list(v->fstill, sizeof v->fstill, fa, d->fstill, d->nstill);
	free(d);
	free(S);
	return 0;
}
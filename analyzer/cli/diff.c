/* diff.c: `nvlprof diff BEFORE AFTER`: side-by-side figures, findings resolved/new/still, env
 * changes, verdict. */
#include <math.h>   /* isnan */
#include <stdlib.h> /* strtod */
#include <string.h> /* strcmp */

#include "cli/commands.h"
#include "model/cost.h"
#include "util/json.h"
#include "nvlp_trace.h"
#include "out/export.h" /* xh_wanted, xh_cmd */
#include "out/report.h"
#include "util/util.h"

#define MIB (1024.0 * 1024.0)

struct side {
	const char *path;
	struct an_job job;
	struct an_findings f;
	struct an_summary s;
};

struct metric {
	const char *name;
	double b, a;
};

static double pct(double b, double a)
{
	return (isnan(a) || isnan(b) || b == 0) ? NAN : (a / b - 1) * 100;
}

/* env.* keys of the first readable process of a job. */
static const struct an_rank *first_ok(const struct an_job *j)
{
	for (size_t i = 0; i < j->nranks; i++)
		if (j->ranks[i].ok)
			return &j->ranks[i];
	return NULL;
}

struct envd {
	char name[96], b[96], a[96];
};

/* Variables whose value differs (or that exist on one side only). */
static size_t env_diff(const struct an_rank *rb, const struct an_rank *ra, struct envd *out,
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
				int ours = !strncmp(key + strlen(NVLP_HDR_ENV_PREFIX), "NVLPROF_", 8);
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

/* The verdict: how much slower/faster, on which metric, and the cause when a fallback appeared or
 * went. */
struct verdict {
	const char *metric;
	double b, a, slower_pct;
	char cause[320];
};

static void judge(struct side *B, struct side *A, struct verdict *v)
{
	int steps = !isnan(B->s.step_ms) && !isnan(A->s.step_ms);
	v->metric = steps ? "step_ms" : "wall_ms";
	v->b = steps ? B->s.step_ms : B->s.wall_ms;
	v->a = steps ? A->s.step_ms : A->s.wall_ms;
	v->slower_pct = pct(v->b, v->a);
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

static void fmt(char *buf, size_t n, double v)
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

static int finding_in(const struct an_findings *f, const char *id)
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
		if (!dup && finding_in(other, f->v[i].id) == want_in_other)
			out[(*n)++] = f->v[i].id;
	}
}

/* "id [severity]", or "id [info, explained by ROOT]" for a consequence of another finding: the
 * severity in f (AFTER for new and still, BEFORE for resolved). */
static void print_tagged(size_t i, const struct an_findings *f, const char *id)
{
	const struct an_finding *x = an_findings_get(f, id);
	printf("%s%s [%s", i ? ", " : "", id, x ? an_sev_name(x->sev) : "?");
	if (x && x->explained_by)
		printf(", explained by %s", x->explained_by);
	printf("]");
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

static void usage(FILE *o)
{
	fprintf(
	    o,
	    "usage: nvlprof diff [--json] [--fail-if-slower PCT] [--threshold NAME=VALUE]... "
	    "BEFORE AFTER\n"
	    "       nvlprof diff --html FILE BEFORE AFTER  (one HTML page, the two runs side by "
	    "side)\n"
	    "Compares two runs (each a trace directory or file): wall and step time, "
	    "communication, exposed\n"
	    "communication, bus bandwidth per collective and size class, bytes per link type, "
	    "findings\n"
	    "resolved/new/still there, and environment variables that differ.\n"
	    "  --json                JSON output (analyzer/REPORT_JSON.md)\n"
	    "  --fail-if-slower PCT  exit 1 when AFTER is slower than BEFORE by more than PCT "
	    "percent\n"
	    "                        (per step when steps are recognised in both, else wall time)\n"
	    "  --threshold N=V, --symbols DIR, -j N as for `nvlprof report` (see nvlprof report "
	    "--help)\n"
	    "Exit status: 0 done, 1 --fail-if-slower tripped, 2 usage error or unreadable "
	    "input.\n");
}

/* A (collective, size) cell diff compares by host time: both sides called it, one has no GPU
 * time for it. */
static int host_cell(const struct side *B, const struct side *A, int c, int sc)
{
	return !isnan(B->s.host_ms_per_call[c][sc]) && !isnan(A->s.host_ms_per_call[c][sc]) &&
	       (isnan(B->s.busbw[c][sc]) || isnan(A->s.busbw[c][sc]));
}

/* ---- the diff's rows: computed once, printed as text or JSON ---- */
/* One (collective, size class) cell present on a side. */
struct cell {
	int c, sc;
	double b, a;
};
struct choice_row {
	unsigned fn;
	char b[64], a[64];
};
struct diff_rows {
	struct metric m[11];
	size_t nm;
	struct cell busbw[AN_C_COUNT * AN_SIZE_CLASSES]; /* GPU transfer time on either side */
	size_t nbusbw;
	struct cell host[AN_C_COUNT * AN_SIZE_CLASSES]; /* compared by host time (host_cell) */
	size_t nhost;
	struct verdict v;
	struct envd env[64];
	size_t ne;
	struct choice_row ch[NVLP_NCCL_FN_COUNT]; /* NCCL's usual choice differs */
	size_t nch;
	const char *fnew[64], *fres[64], *fstill[64];
	size_t nnew, nres, nstill;
	double fail_pct;
	int failed; /* --fail-if-slower tripped */
};

static void diff_compute(struct side *B, struct side *A, double fail_pct, struct diff_rows *d)
{
	memset(d, 0, sizeof *d);
	const struct metric m[] = {
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
				    (struct cell){c, sc, B->s.busbw[c][sc], A->s.busbw[c][sc]};
			if (host_cell(B, A, c, sc))
				d->host[d->nhost++] = (struct cell){c, sc, B->s.host_ms_per_call[c][sc],
				                                    A->s.host_ms_per_call[c][sc]};
		}
	judge(B, A, &d->v);
	d->ne = env_diff(first_ok(&B->job), first_ok(&A->job), d->env, 64);
	for (unsigned fn = 1; fn < NVLP_NCCL_FN_COUNT; fn++) {
		struct choice_row *x = &d->ch[d->nch];
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

static void jw_ids(struct jw *w, const char *key, const char *const *ids, size_t n)
{
	jw_arr(w, key);
	for (size_t i = 0; i < n; i++)
		jw_str(w, NULL, ids[i]);
	jw_arr_end(w);
}

static void json_metrics(struct jw *w, const struct diff_rows *d)
{
	jw_arr(w, "metrics");
	for (size_t i = 0; i < d->nm; i++) {
		jw_obj(w, NULL);
		jw_str(w, "name", d->m[i].name);
		jw_num(w, "before", d->m[i].b);
		jw_num(w, "after", d->m[i].a);
		jw_num(w, "change_pct", pct(d->m[i].b, d->m[i].a));
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

/* A per-collective table of before/after cells: "before_UNIT", "after_UNIT", the change, and
 * the time source when there is one. */
static void json_cells(struct jw *w, const char *name, const struct cell *v, size_t n,
                       const char *before, const char *after, const char *source)
{
	jw_arr(w, name);
	for (size_t i = 0; i < n; i++) {
		const struct cell *x = &v[i];
		jw_obj(w, NULL);
		jw_str(w, "collective", an_coll_name(x->c));
		jw_str(w, "size_class", an_size_class_name(x->sc));
		jw_num(w, before, x->b);
		jw_num(w, after, x->a);
		jw_num(w, "change_pct", pct(x->b, x->a));
		if (source)
			jw_str(w, "time_source", source);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_busbw(struct jw *w, const struct diff_rows *d)
{
	json_cells(w, "busbw", d->busbw, d->nbusbw, "before_gbps", "after_gbps", NULL);
}

static void json_host_time(struct jw *w, const struct diff_rows *d)
{
	json_cells(w, "host_time", d->host, d->nhost, "before_ms_per_call", "after_ms_per_call",
	           "host");
}

static void json_findings(struct jw *w, const struct diff_rows *d, const struct side *B,
                          const struct side *A)
{
	jw_obj(w, "findings");
	jw_ids(w, "new", d->fnew, d->nnew);
	jw_ids(w, "resolved", d->fres, d->nres);
	jw_ids(w, "still", d->fstill, d->nstill);
	an_findings_json(w, "before_findings", &B->f);
	an_findings_json(w, "after_findings", &A->f);
	jw_obj_end(w);
}

static void json_env(struct jw *w, const struct diff_rows *d)
{
	jw_arr(w, "env");
	for (size_t i = 0; i < d->ne; i++) {
		jw_obj(w, NULL);
		jw_str(w, "name", d->env[i].name);
		jw_str(w, "before", d->env[i].b);
		jw_str(w, "after", d->env[i].a);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

/* A side without a choice for the collective is null, not "". */
static void json_choices(struct jw *w, const struct diff_rows *d)
{
	jw_arr(w, "nccl_choices");
	for (size_t i = 0; i < d->nch; i++) {
		const struct choice_row *x = &d->ch[i];
		jw_obj(w, NULL);
		jw_str(w, "collective", nvlp_nccl_fn_name(x->fn));
		if (x->b[0])
			jw_str(w, "before", x->b);
		else
			jw_null(w, "before");
		if (x->a[0])
			jw_str(w, "after", x->a);
		else
			jw_null(w, "after");
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_verdict(struct jw *w, const struct diff_rows *d)
{
	jw_obj(w, "verdict");
	jw_str(w, "metric", d->v.metric);
	jw_num(w, "before", d->v.b);
	jw_num(w, "after", d->v.a);
	jw_num(w, "slower_pct", d->v.slower_pct);
	jw_str(w, "cause", d->v.cause);
	jw_num(w, "fail_if_slower_pct", d->fail_pct);
	jw_bool(w, "failed", d->failed);
	jw_obj_end(w);
}

static void diff_print_json(const struct diff_rows *d, const struct side *B, const struct side *A)
{
	struct jw w;
	jw_init(&w, stdout);
	jw_obj(&w, NULL);
	jw_str(&w, "tool", "nvlprof");
	jw_str(&w, "kind", "diff");
	jw_int(&w, "schema", 1);
	jw_str(&w, "before", B->path);
	jw_str(&w, "after", A->path);
	json_metrics(&w, d);
	json_busbw(&w, d);
	json_host_time(&w, d);
	json_findings(&w, d, B, A);
	json_env(&w, d);
	json_choices(&w, d);
	json_verdict(&w, d);
	jw_obj_end(&w);
}

/* A change in percent for a table: "-" when there is none to show. */
static void fmt_pct(char *buf, size_t n, double b, double a)
{
	double p = pct(b, a);
	if (isnan(p))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%+.1f%%", p);
}

/* The VERDICT line, as text prints it and the HTML page shows it first */
static void verdict_line(const struct verdict *v, char *buf, size_t n)
{
	if (isnan(v->slower_pct))
		snprintf(buf, n, "VERDICT: no comparable time");
	else
		snprintf(buf, n, "VERDICT: AFTER is %.1f%% %s (%s %.3f -> %.3f)%s%s",
		         fabs(v->slower_pct), v->slower_pct >= 0 ? "slower" : "faster", v->metric,
		         v->b, v->a, v->cause[0] ? "; " : "", v->cause);
}

static void text_header(const struct diff_rows *d, const struct side *B, const struct side *A)
{
	const struct verdict *v = &d->v;
	printf("nvlprof diff\n  BEFORE %s (%d processes)\n  AFTER  %s (%d processes)\n\n", B->path,
	       B->s.processes, A->path, A->s.processes);
	char line[512];
	verdict_line(v, line, sizeof line);
	printf("%s\n", line);
}

static void text_metrics(const struct diff_rows *d)
{
	printf("\n  %-22s %12s %12s %9s\n", "metric", "before", "after", "change");
	for (size_t i = 0; i < d->nm; i++) {
		char b[32], a[32], c[32];
		fmt(b, sizeof b, d->m[i].b);
		fmt(a, sizeof a, d->m[i].a);
		fmt_pct(c, sizeof c, d->m[i].b, d->m[i].a);
		printf("  %-22s %12s %12s %9s\n", d->m[i].name, b, a, c);
	}
}

static void text_busbw(const struct diff_rows *d)
{
	printf("\n  bus bandwidth GB/s (GPU transfer time)\n  %-14s %-9s %10s %10s %9s\n",
	       "collective", "size", "before", "after", "change");
	for (size_t i = 0; i < d->nbusbw; i++) {
		const struct cell *x = &d->busbw[i];
		char b[32], a[32], ch[32];
		fmt(b, sizeof b, x->b);
		fmt(a, sizeof a, x->a);
		fmt_pct(ch, sizeof ch, x->b, x->a);
		printf("  %-14s %-9s %10s %10s %9s\n", an_coll_name(x->c), an_size_class_name(x->sc),
		       b, a, ch);
	}
}

/* Only when a side has no GPU time: no table at all otherwise. */
static void text_host_time(const struct diff_rows *d)
{
	for (size_t i = 0; i < d->nhost; i++) {
		const struct cell *x = &d->host[i];
		if (!i)
			printf("\n  host time per call, ms (no GPU time on a side: NCCL calls "
			       "timed on the host, waiting included)\n  %-14s %-9s %10s "
			       "%10s %9s\n",
			       "collective", "size", "before", "after", "change");
		char b[32], a[32], ch[32];
		snprintf(b, sizeof b, "%.3f", x->b);
		snprintf(a, sizeof a, "%.3f", x->a);
		snprintf(ch, sizeof ch, "%+.1f%%", pct(x->b, x->a));
		printf("  %-14s %-9s %10s %10s %9s\n", an_coll_name(x->c), an_size_class_name(x->sc),
		       b, a, ch);
	}
}

static void text_findings(const struct diff_rows *d, const struct side *B, const struct side *A)
{
	printf("\nFINDINGS\n");
	printf("  new:      ");
	for (size_t i = 0; i < d->nnew; i++)
		print_tagged(i, &A->f, d->fnew[i]);
	printf("%s\n  resolved: ", d->nnew ? "" : "none");
	for (size_t i = 0; i < d->nres; i++)
		print_tagged(i, &B->f, d->fres[i]);
	printf("%s\n  still:    ", d->nres ? "" : "none");
	for (size_t i = 0; i < d->nstill; i++)
		print_tagged(i, &A->f, d->fstill[i]);
	printf("%s\n", d->nstill ? "" : "none");
	for (size_t i = 0; i < A->f.n; i++)
		if (!finding_in(&B->f, A->f.v[i].id) && A->f.v[i].sev > AN_SEV_INFO)
			printf("    AFTER %s: %s\n", A->f.v[i].id, A->f.v[i].title);
}

static void text_choices_env(const struct diff_rows *d)
{
	if (d->nch) {
		printf("\nNCCL CHOICES (differs; usual algorithm/protocol and channels, from "
		       "NCCL's profiler plugin)\n");
		for (size_t i = 0; i < d->nch; i++)
			printf("  %-18s %-22s -> %s\n", nvlp_nccl_fn_name(d->ch[i].fn),
			       d->ch[i].b[0] ? d->ch[i].b : "(none)",
			       d->ch[i].a[0] ? d->ch[i].a : "(none)");
	}
	printf("\nENVIRONMENT (differs)\n");
	if (!d->ne)
		printf("  none\n");
	for (size_t i = 0; i < d->ne; i++)
		printf("  %-28s %s -> %s\n", d->env[i].name, d->env[i].b, d->env[i].a);
}

static void diff_print_text(const struct diff_rows *d, const struct side *B, const struct side *A)
{
	text_header(d, B, A);
	text_metrics(d);
	text_busbw(d);
	text_host_time(d);
	text_findings(d, B, A);
	text_choices_env(d);
	if (d->failed)
		printf("\nFAILED: AFTER is %.1f%% slower than BEFORE (limit %.1f%%)\n",
		       d->v.slower_pct, d->fail_pct);
}

/* Options and the two inputs. @return 0, 1 --help printed (exit 0), -1 usage error said */
static int diff_args(int argc, char **argv, double *th, int *threads, int *json,
                     double *fail_pct, char **paths)
{
	int np = 0;
	for (int i = 1; i < argc; i++) {
		int c = an_common_opt(argc, argv, &i, th, threads);
		if (c < 0)
			return -1;
		if (c)
			continue;
		if (!strcmp(argv[i], "--json"))
			*json = 1;
		else if (!strcmp(argv[i], "--fail-if-slower") && i + 1 >= argc) {
			fprintf(stderr,
			        "nvlprof: diff: --fail-if-slower needs a percentage (as 5 or "
			        "5%%)\n");
			return -1;
		} else if (!strcmp(argv[i], "--fail-if-slower")) {
			char *end;
			*fail_pct = strtod(argv[++i], &end);
			if (*end == '%')
				end++;
			if (end == argv[i] || *end) {
				fprintf(
				    stderr,
				    "nvlprof: diff: bad percentage '%s' for --fail-if-slower (a "
				    "number, as 5 or 5%%)\n",
				    argv[i]);
				return -1;
			}
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr,
			        "nvlprof: diff: unknown option %s (--json, --html FILE, "
			        "--fail-if-slower PCT, --threshold NAME=VALUE, -j N, --symbols "
			        "DIR; see "
			        "--help)\n",
			        argv[i]);
			usage(stderr);
			return -1;
		} else if (np < 2)
			paths[np++] = argv[i];
		else {
			fprintf(
			    stderr,
			    "nvlprof: diff: expected two inputs (BEFORE AFTER), '%s' is a third\n",
			    argv[i]);
			return -1;
		}
	}
	if (np != 2) {
		fprintf(stderr, "nvlprof: diff: expected two inputs (BEFORE AFTER), got %d\n", np);
		usage(stderr);
		return -1;
	}
	return 0;
}

/* Two runs of different programs are compared anyway, with a warning. */
static void warn_programs(const struct side *B, const struct side *A)
{
	char pb[256], pa[256];
	const struct an_rank *rb = first_ok(&B->job), *ra = first_ok(&A->job);
	const char *xb = rb ? an_header_get(rb, NVLP_HDR_CMDLINE, pb, sizeof pb) : NULL;
	const char *xa = ra ? an_header_get(ra, NVLP_HDR_CMDLINE, pa, sizeof pa) : NULL;
	if (xb && xa && strcmp(xb, xa))
		fprintf(stderr,
		        "nvlprof: diff: warning: the two sides ran different programs: '%s' and "
		        "'%s'\n",
		        xb, xa);
}

int nvlp_cmd_diff(int argc, char **argv)
{
	if (xh_wanted(argc, argv)) /* the HTML report: html.c */
		return xh_cmd(argc, argv, 1);
	double th[AN_TH_COUNT];
	memcpy(th, an_threshold_defaults, sizeof th);
	int json = 0, threads = 0;
	double fail_pct = NAN;
	char *paths[2];
	int rc = diff_args(argc, argv, th, &threads, &json, &fail_pct, paths);
	if (rc)
		return rc > 0 ? 0 : 2;
	struct side S[2];
	memset(S, 0, sizeof S);
	for (int k = 0; k < 2; k++) {
		S[k].path = paths[k];
		if (an_open_job(&paths[k], 1, threads, th, &S[k].job, &S[k].f) != 0) {
			if (k)
				an_findings_free(&S[0].f), an_job_free(&S[0].job);
			return 2;
		}
		an_summarize(&S[k].job, &S[k].s);
	}
	struct side *B = &S[0], *A = &S[1];
	warn_programs(B, A);
	an_cost_warn_capture(&B->job, &A->job);
	struct diff_rows *d = malloc(sizeof *d);
	if (d) {
		diff_compute(B, A, fail_pct, d);
		if (json)
			diff_print_json(d, B, A);
		else
			diff_print_text(d, B, A);
	} else
		fprintf(stderr, "nvlprof: diff: out of memory\n");
	int failed = d ? d->failed : 0, oom = !d;
	free(d);
	for (int k = 0; k < 2; k++) {
		an_findings_free(&S[k].f);
		an_job_free(&S[k].job);
	}
	if (oom || nvlp_out_finish(stdout, "standard output") < 0)
		return 2;
	return failed ? 1 : 0;
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

int an_diff_view(const struct an_job *jb, const struct an_findings *fb, const struct an_job *ja,
                 const struct an_findings *fa, struct an_diff_view *v)
{
	struct side *S = calloc(2, sizeof *S); /* shallow copies: nothing of them is freed here */
	struct diff_rows *d = malloc(sizeof *d);
	if (!S || !d) {
		free(S);
		free(d);
		return -1;
	}
	S[0].job = *jb, S[0].f = *fb, S[1].job = *ja, S[1].f = *fa;
	an_summarize(jb, &S[0].s);
	an_summarize(ja, &S[1].s);
	diff_compute(&S[0], &S[1], NAN, d);
	memset(v, 0, sizeof *v);
	verdict_line(&d->v, v->verdict, sizeof v->verdict);
	_Static_assert(sizeof v->m / sizeof v->m[0] >= sizeof d->m / sizeof d->m[0],
	               "every metric");
	for (size_t i = 0; i < d->nm; i++) {
		v->m[i].name = d->m[i].name;
		fmt(v->m[i].b, sizeof v->m[i].b, d->m[i].b);
		fmt(v->m[i].a, sizeof v->m[i].a, d->m[i].a);
		fmt_pct(v->m[i].change, sizeof v->m[i].change, d->m[i].b, d->m[i].a);
	}
	v->nm = d->nm;
	for (size_t i = 0; i < d->nbusbw && i < sizeof v->bw / sizeof v->bw[0]; i++) {
		const struct cell *x = &d->busbw[i];
		snprintf(v->bw[i].name, sizeof v->bw[i].name, "%s %s", an_coll_name(x->c),
		         an_size_class_name(x->sc));
		fmt(v->bw[i].b, sizeof v->bw[i].b, x->b);
		fmt(v->bw[i].a, sizeof v->bw[i].a, x->a);
		fmt_pct(v->bw[i].change, sizeof v->bw[i].change, x->b, x->a);
		v->nbw++;
	}
	tagged_list(v->fnew, sizeof v->fnew, fa, d->fnew, d->nnew);
	tagged_list(v->fres, sizeof v->fres, fb, d->fres, d->nres);
	tagged_list(v->fstill, sizeof v->fstill, fa, d->fstill, d->nstill);
	free(d);
	free(S);
	return 0;
}

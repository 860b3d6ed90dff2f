/* diff.c: `nvlprof diff BEFORE AFTER`: side-by-side figures, findings resolved/new/still, env
 * changes, verdict. */
#include <math.h>   /* isnan */
#include <stdlib.h> /* strtod */
#include <string.h> /* strcmp */

#include "cli/argparse.h"
#include "cli/commands.h"
#include "model/cost.h"
#include "util/json.h"
#include "nvlp_trace.h"
#include "out/report.h"
#include "util/util.h"

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

static void jw_ids(struct jw *w, const char *key, const char *const *ids, size_t n)
{
	jw_arr(w, key);
	for (size_t i = 0; i < n; i++)
		jw_str(w, NULL, ids[i]);
	jw_arr_end(w);
}

static void json_metrics(struct jw *w, const struct an_diff_rows *d)
{
	jw_arr(w, "metrics");
	for (size_t i = 0; i < d->nm; i++) {
		jw_obj(w, NULL);
		jw_str(w, "name", d->m[i].name);
		jw_num(w, "before", d->m[i].b);
		jw_num(w, "after", d->m[i].a);
		jw_num(w, "change_pct", an_diff_pct(d->m[i].b, d->m[i].a));
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

/* A per-collective table of before/after cells: "before_UNIT", "after_UNIT", the change, and
 * the time source when there is one. */
static void json_cells(struct jw *w, const char *name, const struct an_dcell *v, size_t n,
                       const char *before, const char *after, const char *source)
{
	jw_arr(w, name);
	for (size_t i = 0; i < n; i++) {
		const struct an_dcell *x = &v[i];
		jw_obj(w, NULL);
		jw_str(w, "collective", an_coll_name(x->c));
		jw_str(w, "size_class", an_size_class_name(x->sc));
		jw_num(w, before, x->b);
		jw_num(w, after, x->a);
		jw_num(w, "change_pct", an_diff_pct(x->b, x->a));
		if (source)
			jw_str(w, "time_source", source);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_busbw(struct jw *w, const struct an_diff_rows *d)
{
	json_cells(w, "busbw", d->busbw, d->nbusbw, "before_gbps", "after_gbps", NULL);
}

static void json_host_time(struct jw *w, const struct an_diff_rows *d)
{
	json_cells(w, "host_time", d->host, d->nhost, "before_ms_per_call", "after_ms_per_call",
	           "host");
}

static void json_findings(struct jw *w, const struct an_diff_rows *d, const struct an_dside *B,
                          const struct an_dside *A)
{
	jw_obj(w, "findings");
	jw_ids(w, "new", d->fnew, d->nnew);
	jw_ids(w, "resolved", d->fres, d->nres);
	jw_ids(w, "still", d->fstill, d->nstill);
	an_findings_json(w, "before_findings", &B->f);
	an_findings_json(w, "after_findings", &A->f);
	jw_obj_end(w);
}

static void json_env(struct jw *w, const struct an_diff_rows *d)
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
static void json_choices(struct jw *w, const struct an_diff_rows *d)
{
	jw_arr(w, "nccl_choices");
	for (size_t i = 0; i < d->nch; i++) {
		const struct an_dchoice *x = &d->ch[i];
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

static void json_verdict(struct jw *w, const struct an_diff_rows *d)
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

static void diff_print_json(const struct an_diff_rows *d, const struct an_dside *B, const struct an_dside *A)
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

static void text_header(const struct an_diff_rows *d, const struct an_dside *B, const struct an_dside *A)
{
	const struct an_dverdict *v = &d->v;
	printf("nvlprof diff\n  BEFORE %s (%d processes)\n  AFTER  %s (%d processes)\n\n", B->path,
	       B->s.processes, A->path, A->s.processes);
	char line[512];
	an_diff_verdict_line(v, line, sizeof line);
	printf("%s\n", line);
}

static void text_metrics(const struct an_diff_rows *d)
{
	printf("\n  %-22s %12s %12s %9s\n", "metric", "before", "after", "change");
	for (size_t i = 0; i < d->nm; i++) {
		char b[32], a[32], c[32];
		an_diff_fmt(b, sizeof b, d->m[i].b);
		an_diff_fmt(a, sizeof a, d->m[i].a);
		an_diff_fmt_pct(c, sizeof c, d->m[i].b, d->m[i].a);
		printf("  %-22s %12s %12s %9s\n", d->m[i].name, b, a, c);
	}
}

static void text_busbw(const struct an_diff_rows *d)
{
	printf("\n  bus bandwidth GB/s (GPU transfer time)\n  %-14s %-9s %10s %10s %9s\n",
	       "collective", "size", "before", "after", "change");
	for (size_t i = 0; i < d->nbusbw; i++) {
		const struct an_dcell *x = &d->busbw[i];
		char b[32], a[32], ch[32];
		an_diff_fmt(b, sizeof b, x->b);
		an_diff_fmt(a, sizeof a, x->a);
		an_diff_fmt_pct(ch, sizeof ch, x->b, x->a);
		printf("  %-14s %-9s %10s %10s %9s\n", an_coll_name(x->c), an_size_class_name(x->sc),
		       b, a, ch);
	}
}

/* Only when a side has no GPU time: no table at all otherwise. */
static void text_host_time(const struct an_diff_rows *d)
{
	for (size_t i = 0; i < d->nhost; i++) {
		const struct an_dcell *x = &d->host[i];
		if (!i)
			printf("\n  host time per call, ms (no GPU time on a side: NCCL calls "
			       "timed on the host, waiting included)\n  %-14s %-9s %10s "
			       "%10s %9s\n",
			       "collective", "size", "before", "after", "change");
		char b[32], a[32], ch[32];
		snprintf(b, sizeof b, "%.3f", x->b);
		snprintf(a, sizeof a, "%.3f", x->a);
		snprintf(ch, sizeof ch, "%+.1f%%", an_diff_pct(x->b, x->a));
		printf("  %-14s %-9s %10s %10s %9s\n", an_coll_name(x->c), an_size_class_name(x->sc),
		       b, a, ch);
	}
}

static void text_findings(const struct an_diff_rows *d, const struct an_dside *B, const struct an_dside *A)
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
		if (!an_diff_has(&B->f, A->f.v[i].id) && A->f.v[i].sev > AN_SEV_INFO)
			printf("    AFTER %s: %s\n", A->f.v[i].id, A->f.v[i].title);
}

static void text_choices_env(const struct an_diff_rows *d)
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

static void diff_print_text(const struct an_diff_rows *d, const struct an_dside *B, const struct an_dside *A)
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

/* --fail-if-slower PCT into *pct (a double): "5" or "5%" */
static int set_fail_pct(void *pct, const char *v)
{
	char *end;
	*(double *)pct = strtod(v, &end);
	if (*end == '%')
		end++;
	if (end != v && !*end)
		return -1;
	fprintf(stderr,
	        "nvlprof: diff: bad percentage '%s' for --fail-if-slower (a number, as 5 or 5%%)\n",
	        v);
	return 2;
}

/* diff's options and its two inputs */
struct diff_args {
	double th[AN_TH_COUNT];
	int threads, json;
	double fail_pct; /* NAN: none */
	char *paths[2];
};

/* Parse the options and the two inputs into a. @return -1 to go on, else the exit status */
static int diff_args(int argc, char **argv, struct diff_args *a)
{
	memcpy(a->th, an_threshold_defaults, sizeof a->th);
	a->threads = a->json = 0;
	a->fail_pct = NAN;
	const struct an_opt opts[] = {
	    {"--json", NULL, AN_OPT_FLAG, &a->json},
	    {"--fail-if-slower", NULL, AN_OPT_VALUE, &a->fail_pct, 0, "a percentage (as 5 or 5%)",
	     set_fail_pct},
	    {NULL},
	};
	struct an_cmdline c = {
	    .opts = opts,
	    .prefix = "nvlprof: diff: ",
	    .th = a->th,
	    .threads = &a->threads,
	    .maxargs = 2,
	    .help = usage,
	    .usage = usage,
	    .unknown =
	        {"nvlprof: diff: unknown option ",
	         " (--json, --html FILE, --fail-if-slower PCT, --threshold NAME=VALUE, -j N, "
	         "--symbols DIR; see --help)",
	         1},
	    .extra = {"nvlprof: diff: expected two inputs (BEFORE AFTER), '", "' is a third"},
	};
	int rc = an_parse_args(&c, argc, argv);
	if (rc < 0 && c.nargs != 2) {
		fprintf(stderr, "nvlprof: diff: expected two inputs (BEFORE AFTER), got %d\n",
		        c.nargs);
		usage(stderr);
		rc = 2;
	}
	if (rc < 0)
		memcpy(a->paths, c.args, sizeof a->paths);
	return rc;
}

/* Two runs of different programs are compared anyway, with a warning. */
static void warn_programs(const struct an_dside *B, const struct an_dside *A)
{
	char pb[256], pa[256];
	const struct an_rank *rb = an_diff_first_ok(&B->job), *ra = an_diff_first_ok(&A->job);
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
	struct diff_args a;
	int rc = diff_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	struct an_dside S[2];
	memset(S, 0, sizeof S);
	for (int k = 0; k < 2; k++) {
		S[k].path = a.paths[k];
		if (an_open_job(&a.paths[k], 1, a.threads, a.th, &S[k].job, &S[k].f) != 0) {
			if (k)
				an_findings_free(&S[0].f), an_job_free(&S[0].job);
			return 2;
		}
		an_summarize(&S[k].job, &S[k].s);
	}
	struct an_dside *B = &S[0], *A = &S[1];
	warn_programs(B, A);
	an_cost_warn_capture(&B->job, &A->job);
	struct an_diff_rows *d = malloc(sizeof *d);
	if (d) {
		an_diff_compute(B, A, a.fail_pct, d);
		if (a.json)
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

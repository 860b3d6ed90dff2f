/* cmd_export.c: `nvlprof export`: the command's options and output, handing the opened job to the
 * writer of the format chosen in out/formats.c's table (export_chrome.c, export_perfetto.c,
 * export_sqlite.c); the record stream they read is export_stream.c's. */
#include <stdio.h>  /* fprintf, snprintf */
#include <string.h> /* strcmp */
#include <time.h>   /* clock_gettime */

#include "cli/argparse.h"
#include "cli/commands.h"
#include "out/export.h"
#include "out/formats.h"
#include "out/report.h" /* an_open_job */

struct xm_job *xm_open(char **paths, int npaths, const struct xm_opts *o)
{
	struct xm_opts def;
	if (!o) {
		xm_opts_init(&def);
		o = &def;
	}
	double *th;
	struct an_job *job;
	struct an_findings *f;
	struct xm_job *x = xm_new(o, &th, &job, &f);
	if (!x)
		return NULL;
	if (an_open_job(paths, npaths, o->threads, th, job, f) != 0) {
		xm_discard(x);
		return NULL;
	}
	return xm_ready(x);
}

/* The formats' names for the usage and messages: "perfetto, chrome or sqlite" */
static const char *names(char *b, size_t n)
{
	return xe_format_names(b, n, 0, ", ", " or ");
}

static void usage(FILE *o)
{
	char all[256], out[256];
	fprintf(o,
	        "usage: nvlprof export --format %s [-o FILE] [options] FILE|DIR...\n"
	        "  Writes the job's timeline, hosts aligned as in `report`:\n",
	        xe_format_names(all, sizeof all, 0, "|", "|"));
	for (const struct xe_format *f = xe_formats; f->name; f++)
		fprintf(o, "    %-8s  %sdefault %s\n", f->name, f->what, f->default_out);
	fprintf(o,
	        "  -o -  writes %s to stdout.\n"
	        "  --threshold NAME=VALUE, -j N: as for report (the findings become events).\n"
	        "Exit status: 0 written, 2 usage error, no readable trace or write error.\n",
	        xe_format_names(out, sizeof out, XE_FMT_STDOUT, "/", "/"));
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct export_args {
	struct xm_opts opts;
	int quiet;
	const struct xe_format *fmt; /* NULL: none or unknown */
	const char *out;
	char **paths;
	int np;
};

/* Parse the options and inputs into a; -1 to go on, else the exit status. */
static int export_args(int argc, char **argv, struct export_args *a)
{
	const char *fmt = NULL;
	char list[256], needs[300];
	snprintf(needs, sizeof needs, "a format: %s", names(list, sizeof list));
	const struct an_opt opts[] = {
	    {"--format", "-f", AN_OPT_VALUE, &fmt, AN_OPT_EQ, needs},
	    {"-o", NULL, AN_OPT_VALUE, &a->out, 0, "a file name (or - for standard output)"},
	    {"--quiet", "-q", AN_OPT_FLAG, &a->quiet},
	    {NULL},
	};
	struct an_cmdline c = {
	    .opts = opts,
	    .prefix = "nvlprof: export: ",
	    .th = a->opts.th,
	    .threads = &a->opts.threads,
	    .help = usage,
	    .usage = usage,
	    .unknown = {"nvlprof: export: unknown option ",
	                " (--format FMT, -o OUT, -q, --threshold NAME=VALUE, -j N, --symbols DIR; "
	                "see --help)",
	                1},
	};
	int rc = an_parse_args(&c, argc, argv);
	if (rc >= 0)
		return rc;
	a->paths = c.args;
	a->np = c.nargs;
	a->fmt = fmt ? xe_format_find(fmt) : NULL;
	if (fmt && !a->fmt) {
		fprintf(stderr, "nvlprof: export: unknown format '%s' (%s)\n", fmt, list);
		return 2;
	}
	return -1;
}

/* The format and output are usable (the default output filled in); else the exit status */
static int export_check(struct export_args *a)
{
	char list[256];
	if (!a->fmt)
		fprintf(stderr, "nvlprof: export: no format: --format %s is needed\n",
		        names(list, sizeof list));
	else if (!a->np)
		fputs("nvlprof: export: no input: give a trace directory or .nvlp files\n", stderr);
	if (!a->fmt || !a->np) {
		usage(stderr);
		return 2;
	}
	if (!a->out)
		a->out = a->fmt->default_out;
	if (!(a->fmt->flags & XE_FMT_STDOUT) && !strcmp(a->out, "-")) {
		fprintf(stderr, "nvlprof: export: %s needs a file (-o FILE), not stdout\n",
		        a->fmt->name);
		return 2;
	}
	return -1;
}

int nvlp_cmd_export(int argc, char **argv)
{
	struct export_args a = {0};
	xm_opts_init(&a.opts);
	int rc = export_args(argc, argv, &a);
	if (rc < 0)
		rc = export_check(&a);
	if (rc >= 0)
		return rc;
	double t = now_s();
	struct xm_job *x = xm_open(a.paths, a.np, &a.opts);
	if (!x)
		return 2;
	double tload = now_s() - t;
	uint64_t recs = 0;
	struct xe_write_opts wo = {.threads = a.opts.threads};
	rc = a.fmt->write(x, a.out, &wo, &recs);
	double tall = now_s() - t;
	if (!rc && !a.quiet && strcmp(a.out, "-"))
		fprintf(stderr,
		        "nvlprof: export: %s written: %llu records in %.2f s (load and analysis "
		        "%.2f s)\n",
		        a.out, (unsigned long long)recs, tall, tload);
	xm_close(x);
	return rc ? 2 : 0;
}

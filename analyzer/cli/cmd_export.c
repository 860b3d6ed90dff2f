/* cmd_export.c: `nvlprof export`: the command's options and output, handing the opened job to one
 * format's writer (export_chrome.c, export_perfetto.c, export_sqlite.c); the record stream they
 * read is export_stream.c's. */
#include <errno.h>    /* errno */
#include <string.h>   /* strcmp */
#include <sys/stat.h> /* stat */
#include <time.h>     /* clock_gettime */

#include "cli/argparse.h"
#include "cli/commands.h"
#include "out/export.h"
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

static void usage(FILE *o)
{
	fprintf(
	    o,
	    "usage: nvlprof export --format perfetto|chrome|sqlite [-o FILE] [options] "
	    "FILE|DIR...\n"
	    "  Writes the job's timeline, hosts aligned as in `report`:\n"
	    "    perfetto  Perfetto protobuf (open in https://ui.perfetto.dev); default "
	    "nvlprof.pftrace\n"
	    "    chrome    Chrome/Kineto JSON (Perfetto, chrome://tracing, HTA); -o DIR/ writes\n"
	    "              one file per rank (rank<N>.json), the layout HTA's TraceAnalysis "
	    "reads;\n"
	    "              default nvlprof.json\n"
	    "    sqlite    SQLite database (schema: docs/EXPORTS.md); default nvlprof.sqlite\n"
	    "  -o -  writes perfetto/chrome to stdout.\n"
	    "  --threshold NAME=VALUE, -j N: as for report (the findings become events).\n"
	    "Exit status: 0 written, 2 usage error, no readable trace or write error.\n");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

enum { F_PERFETTO, F_CHROME, F_SQLITE };

struct export_args {
	struct xm_opts opts;
	int quiet, fmt; /* F_*, -1 unknown */
	const char *out;
	char **paths;
	int np;
};

/* Parse the options and inputs into a; -1 to go on, else the exit status. */
static int export_args(int argc, char **argv, struct export_args *a)
{
	const char *fmt = NULL;
	const struct an_opt opts[] = {
	    {"--format", "-f", AN_OPT_VALUE, &fmt, AN_OPT_EQ,
	     "a format: perfetto, chrome or sqlite"},
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
	a->fmt = !fmt                       ? -1
	         : !strcmp(fmt, "perfetto") ? F_PERFETTO
	         : !strcmp(fmt, "chrome")   ? F_CHROME
	         : !strcmp(fmt, "sqlite")   ? F_SQLITE
	                                    : -1;
	if (fmt && a->fmt < 0) {
		fprintf(stderr,
		        "nvlprof: export: unknown format '%s' (perfetto, chrome or sqlite)\n", fmt);
		return 2;
	}
	return -1;
}

/* The format and output are usable (the default output filled in); else the exit status */
static int export_check(struct export_args *a)
{
	if (a->fmt < 0 || !a->np) {
		fprintf(stderr, a->fmt < 0
		                    ? "nvlprof: export: no format: --format perfetto, chrome or "
		                      "sqlite is needed\n"
		                    : "nvlprof: export: no input: give a trace directory or .nvlp "
		                      "files\n");
		usage(stderr);
		return 2;
	}
	static const char *const defaults[] = {"nvlprof.pftrace", "nvlprof.json", "nvlprof.sqlite"};
	if (!a->out)
		a->out = defaults[a->fmt];
	if (a->fmt == F_SQLITE && !strcmp(a->out, "-")) {
		fprintf(stderr, "nvlprof: export: sqlite needs a file (-o FILE), not stdout\n");
		return 2;
	}
	return -1;
}

/* Perfetto or Chrome JSON to out (a file, "-" for stdout, or for chrome a directory of one
 * file per rank); 0 written */
static int export_stream(const struct xm_job *x, int fmt, const char *out, uint64_t *recs)
{
	size_t ol = strlen(out);
	struct stat st;
	int dir =
	    fmt == F_CHROME && (out[ol - 1] == '/' || (!stat(out, &st) && S_ISDIR(st.st_mode)));
	if (dir && mkdir(out, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "nvlprof: export: %s: cannot create directory: %s\n", out,
		        strerror(errno));
		return -1;
	}
	FILE *o = stdout;
	if (!dir && strcmp(out, "-") && !(o = fopen(out, "wb"))) {
		fprintf(stderr, "nvlprof: export: %s: cannot write: %s\n", out, strerror(errno));
		return -1;
	}
	errno = 0; /* the writers say errno's reason for a failed write: none stale from above */
	int rc = fmt == F_PERFETTO ? xe_perfetto(x, o, recs)
	                           : xe_chrome(x, dir ? NULL : o, dir ? out : NULL, recs);
	if (o != stdout && fclose(o) != 0 && !rc) {
		fprintf(stderr, "nvlprof: export: %s: write error: %s\n", out, strerror(errno));
		rc = -1;
	}
	return rc;
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
	rc = a.fmt == F_SQLITE ? xe_sqlite(x, a.out, a.opts.threads, &recs) : export_stream(x, a.fmt, a.out, &recs);
	double tall = now_s() - t;
	if (!rc && !a.quiet && strcmp(a.out, "-"))
		fprintf(stderr,
		        "nvlprof: export: %s written: %llu records in %.2f s (load and analysis "
		        "%.2f s)\n",
		        a.out, (unsigned long long)recs, tall, tload);
	xm_close(x);
	return rc ? 2 : 0;
}

/* cmd_html.c: the --html variants of `nvlprof report` and `nvlprof diff`: their options, opening
 * the job(s) and writing the page out/html.c draws (xh_report, xh_diff). */
#include <errno.h>  /* errno */
#include <string.h> /* strcmp */

#include "cli/argparse.h"
#include "cli/commands.h"
#include "out/export.h"
#include "util/util.h" /* nvlp_out_finish */

int xh_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--html") || !strncmp(argv[i], "--html=", 7))
			return 1;
	return 0;
}

static void help_tail(FILE *o)
{
	fprintf(o,
	        "One self-contained HTML file (no script, no network): findings first, each with "
	        "its plot.\nOptions: --threshold NAME=VALUE, -j N (as without --html). See "
	        "docs/EXPORTS.md.\n");
}

static void help_report(FILE *o)
{
	fprintf(o, "usage: nvlprof report --html FILE [options] FILE|DIR...\n");
	help_tail(o);
}

static void help_diff(FILE *o)
{
	fprintf(o, "usage: nvlprof diff --html FILE [options] BEFORE AFTER\n");
	help_tail(o);
}

/* Parse the HTML command's arguments into opts, *out and *paths (*np of them); -1 to go on, else
 * the exit status. */
static int html_args(int argc, char **argv, int diff, struct xm_opts *opts, const char **out,
                     char ***paths, int *np)
{
	const struct an_opt t[] = {
	    {"--html", NULL, AN_OPT_VALUE, out, AN_OPT_EQ,
	     "a file name (or - for standard output)"},
	    {NULL},
	};
	struct an_cmdline c = {
	    .opts = t,
	    .prefix = diff ? "nvlprof: diff: " : "nvlprof: report: ",
	    .th = opts->th,
	    .threads = &opts->threads,
	    .help = diff ? help_diff : help_report,
	    .unknown = {diff ? "nvlprof: diff --html: option " : "nvlprof: report --html: option ",
	                " is not for the HTML report"},
	};
	int rc = an_parse_args(&c, argc, argv);
	if (rc >= 0)
		return rc;
	*paths = c.args;
	*np = c.nargs;
	if (!*out || !**out || !*np || (diff && *np != 2)) {
		fprintf(stderr, diff ? "usage: nvlprof diff --html FILE BEFORE AFTER\n"
		                     : "usage: nvlprof report --html FILE FILE|DIR...\n");
		return 2;
	}
	return -1;
}

/* Write the page of the opened job(s) x (and y, the after run of a diff) to out */
static int html_write(const char *out, int diff, const struct xm_job *x, const struct xm_job *y,
                      char **paths, int np)
{
	const char *cmd = diff ? "diff" : "report";
	FILE *o = strcmp(out, "-") ? fopen(out, "w") : stdout;
	if (!o) {
		fprintf(stderr, "nvlprof: %s: cannot write %s: %s\n", cmd, out, strerror(errno));
		return 2;
	}
	char title[512] = "";
	size_t n = 0;
	for (int i = 0; i < (diff ? 1 : np) && n < sizeof title - 1; i++)
		n += (size_t)snprintf(title + n, sizeof title - n, "%s%s", i ? " " : "", paths[i]);
	int rc = diff ? xh_diff(o, x, y, paths[0], paths[1]) : xh_report(o, x, title);
	if (nvlp_out_finish(o, strcmp(out, "-") ? out : "standard output") < 0) /* says why */
		rc = 2;
	else if (rc)
		fprintf(stderr, "nvlprof: %s: write error on %s\n", cmd, out);
	return rc ? 2 : 0;
}

int xh_cmd(int argc, char **argv, int diff)
{
	struct xm_opts opts;
	xm_opts_init(&opts);
	int np = 0;
	const char *out = NULL;
	char **paths = NULL;
	int rc = html_args(argc, argv, diff, &opts, &out, &paths, &np);
	if (rc >= 0)
		return rc;
	struct xm_job *x = xm_open(paths, diff ? 1 : np, &opts), *y = NULL;
	if (x && diff)
		y = xm_open(paths + 1, 1, &opts);
	if (!x || (diff && !y)) {
		xm_close(x);
		return 2;
	}
	rc = html_write(out, diff, x, y, paths, np);
	xm_close(x);
	xm_close(y);
	return rc;
}

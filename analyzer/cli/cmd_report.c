/* cmd_report.c: `nvlprof report`: its options, then the report of the job (text or --json, from
 * out/report_formats.c's table), the HTML page (--html) or the partial of the traces for merge
 * (--partial). */
#include <errno.h>  /* errno */
#include <stdio.h>  /* fprintf */
#include <string.h> /* strcmp */

#include "cli/argparse.h"
#include "cli/commands.h"
#include "out/partial.h" /* an_partial_write */
#include "out/report.h"
#include "out/report_formats.h"
#include "pipeline.h" /* an_open_job */
#include "util/util.h" /* nvlp_out_finish */

static void usage(FILE *o)
{
	fprintf(
	    o,
	    "usage: nvlprof report [--json] [-o FILE] [-j THREADS] [--all-ranks] [--threshold NAME=VALUE]... "
	    "TRACE_DIR|FILE...\n"
	    "       nvlprof report --html FILE TRACE_DIR|FILE...  (one self-contained HTML page, "
	    "plots included)\n"
	    "Explains where the communication time of a multi-GPU job went: findings first, then "
	    "tables.\n"
	    "A finding explained by a root cause is listed right after it as \"[info] ID "
	    "(explained "
	    "by ROOT)\":\n"
	    "pcie_fallback explains low_bus_bandwidth on its communicator, and "
	    "exposed_communication "
	    "when\n"
	    "its communicator holds >= explained_share of the exposed time; straggler explains "
	    "exposed_communication\n"
	    "when the others' wait for it is >= explained_share of the exposed time (tried "
	    "first).\n"
	    "  --json               JSON output (documented in analyzer/REPORT_JSON.md)\n"
	    "  -o FILE              write the report to FILE\n"
	    "  --partial OUT        write the traces as loaded to OUT instead, for `nvlprof merge`\n"
	    "                       (one partial per node; docs/DISTRIBUTED.md)\n"
	    "  --symbols DIR        also look for the recorded modules' files under DIR (DIR/path,\n"
	    "                       DIR/basename, DIR/.build-id/xx/rest.debug), like perf --symfs;\n"
	    "                       a file is used only if its build-id is the one in the trace\n"
	    "  --all-ranks          every rank a row in RANKS and the page's rank table (a job of "
	    "more than\n"
	    "                       ranks_shown ranks shows the ranks that matter and a "
	    "distribution)\n"
	    "  -j N                 reader threads (default: one per file, up to the number of "
	    "CPUs)\n"
	    "  --threshold N=V      change a threshold (repeatable); thresholds and defaults:\n");
	for (int i = 0; i < AN_TH_COUNT; i++)
		fprintf(o, "      %-22s %-8g %s\n", an_threshold_names[i], an_threshold_defaults[i],
		        an_threshold_docs[i]);
	fprintf(o, "Exit status: 0 report written, 2 usage error, no readable trace, or the report could "
	           "not be written.\n");
}


int an_report_write(const char *cmd, const char *outpath, int json, struct an_job *job,
                    struct an_findings *f)
{
	FILE *o = stdout;
	int rc = 0;
	if (outpath && !(o = fopen(outpath, "w"))) {
		fprintf(stderr, "nvlprof: %s: cannot write %s: %s\n", cmd, outpath, strerror(errno));
		rc = 2;
	} else {
		an_report_formats[json ? AN_REPORT_JSON : AN_REPORT_TEXT].write(o, job, f);
		if (nvlp_out_finish(o, outpath ? outpath : "standard output") < 0)
			rc = 2;
	}
	an_findings_free(f);
	an_job_free(job);
	return rc;
}

/* The report of the np traces in paths, or their partial for merge. @return the exit status */
static int report_run(char **paths, int np, int threads, const double *th, int json,
                      const char *outpath, const char *partial)
{
	if (partial) /* the loaded traces only, for merge (partial.c) */
		return an_partial_write(paths, np, threads, partial, json || outpath);
	struct an_job job;
	struct an_findings f;
	if (an_open_job(paths, np, threads, th, &job, &f) != 0)
		return 2;
	return an_report_write("report", outpath, json, &job, &f);
}

int nvlp_cmd_report(int argc, char **argv)
{
	if (xh_wanted(argc, argv)) /* the HTML report: html.c */
		return xh_cmd(argc, argv, 0);
	double th[AN_TH_COUNT];
	memcpy(th, an_threshold_defaults, sizeof th);
	int json = 0, threads = 0;
	const char *outpath = NULL, *partial = NULL;
	const struct an_opt opts[] = {
	    {"--json", NULL, AN_OPT_FLAG, &json},
	    {"--partial", NULL, AN_OPT_VALUE, &partial}, /* no value: an unknown option */
	    {"-o", NULL, AN_OPT_VALUE, &outpath, 0, "a file name"},
	    {NULL},
	};
	struct an_cmdline c = {
	    .opts = opts,
	    .prefix = "nvlprof: report: ",
	    .th = th,
	    .threads = &threads,
	    .help = usage,
	    .usage = usage,
	    .unknown = {"nvlprof: report: unknown option ",
	                " (--json, -o FILE, --html FILE, --threshold NAME=VALUE, -j N, --symbols "
	                "DIR; see --help)",
	                1},
	    .none = {"nvlprof: report: no input: give a trace directory or .nvlp files", NULL, 1},
	};
	int rc = an_parse_args(&c, argc, argv);
	if (rc >= 0)
		return rc;
	return report_run(c.args, c.nargs, threads, th, json, outpath, partial);
}

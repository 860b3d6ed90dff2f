/* opts.c: the options report, diff, merge and export share: --threshold NAME=VALUE, --all-ranks,
 * --symbols DIR and -j N, as a table for an_parse_args (argparse.c), with their error messages. */
#include <math.h>   /* INFINITY */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* strtol */
#include <string.h> /* strcmp */

#include "cli/argparse.h"
#include "model/model.h"
#include "out/report.h"
#include "util/util.h"

/* Why --threshold v was refused: no '=', a name we do not have, or a value that is no number */
static void threshold_error(const char *v)
{
	const char *eq = strchr(v, '=');
	if (!eq) {
		fprintf(stderr,
		        "nvlprof: bad threshold '%s': NAME=VALUE is needed (the names: --help)\n",
		        v);
		return;
	}
	for (int k = 0; k < AN_TH_COUNT; k++)
		if ((size_t)(eq - v) == strlen(an_threshold_names[k]) &&
		    !strncmp(v, an_threshold_names[k], (size_t)(eq - v))) {
			fprintf(stderr,
			        "nvlprof: bad threshold '%s': the value of %s must be a number\n",
			        v, an_threshold_names[k]);
			return;
		}
	fprintf(stderr, "nvlprof: unknown threshold '%.*s' in '%s' (the names: --help)\n",
	        (int)(eq - v), v, v);
}

/* --threshold NAME=VALUE into th */
static int set_threshold(void *th, const char *v)
{
	if (an_threshold_set(th, v) == 0)
		return -1;
	threshold_error(v);
	return 2;
}

/* --all-ranks: every rank a row, however many */
static int set_all_ranks(void *th, const char *v)
{
	(void)v;
	((double *)th)[AN_TH_ranks_shown] = INFINITY;
	return -1;
}

static int set_symbols(void *unused, const char *v)
{
	(void)unused;
	an_symbols_dir(v);
	return -1;
}

/* -j N, 0 to 256, into *threads */
static int set_threads(void *threads, const char *v)
{
	char *end = NULL;
	long n = strtol(v, &end, 10);
	if (end == v || *end || n < 0 || n > 256) {
		fprintf(stderr,
		        "nvlprof: -j needs a thread count, 0 to 256 (0: the default), not '%s'\n",
		        v);
		return 2;
	}
	*(int *)threads = (int)n;
	return -1;
}

void an_shared_opts(struct an_opt t[5], double *th, int *threads)
{
	const struct an_opt v[5] = {
	    {"--threshold", "-t", AN_OPT_VALUE, th, AN_OPT_EQ, "NAME=VALUE (the names: --help)",
	     set_threshold},
	    {"--all-ranks", NULL, AN_OPT_FLAG, th, 0, NULL, set_all_ranks},
	    {"--symbols", NULL, AN_OPT_VALUE, NULL, AN_OPT_EQ, "a directory", set_symbols},
	    {"-j", NULL, AN_OPT_VALUE, threads, 0, "a thread count, 0 to 256 (0: the default)",
	     set_threads},
	    {NULL},
	};
	memcpy(t, v, sizeof v);
}

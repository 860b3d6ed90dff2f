/* opts.c: the options report, diff, merge and export share: --threshold NAME=VALUE, --all-ranks,
 * --symbols DIR and -j N, with their error messages. */
#include <math.h>   /* INFINITY */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* strtol */
#include <string.h> /* strcmp */

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

int an_common_opt(int argc, char **argv, int *i, double *th, int *threads)
{
	const char *a = argv[*i], *v = NULL;
	if (!strcmp(a, "--threshold") || !strcmp(a, "-t")) {
		if (*i + 1 >= argc) {
			fprintf(stderr, "nvlprof: %s needs NAME=VALUE (the names: --help)\n", a);
			return -1;
		}
		v = argv[++*i];
	} else if (!strncmp(a, "--threshold=", 12))
		v = a + 12;
	if (v) {
		if (an_threshold_set(th, v) != 0) {
			threshold_error(v);
			return -1;
		}
		return 1;
	}
	if (!strcmp(a, "--all-ranks")) { /* every rank a row, however many */
		th[AN_TH_ranks_shown] = INFINITY;
		return 1;
	}
	if (!strcmp(a, "--symbols") || !strncmp(a, "--symbols=", 10)) {
		if (a[9] == '=')
			an_symbols_dir(a + 10);
		else if (*i + 1 >= argc) {
			fprintf(stderr, "nvlprof: --symbols needs a directory\n");
			return -1;
		} else
			an_symbols_dir(argv[++*i]);
		return 1;
	}
	if (!strcmp(a, "-j")) {
		char *end = NULL;
		long n = *i + 1 < argc ? strtol(argv[*i + 1], &end, 10) : -1;
		if (*i + 1 >= argc || end == argv[*i + 1] || *end || n < 0 || n > 256) {
			fprintf(
			    stderr,
			    "nvlprof: -j needs a thread count, 0 to 256 (0: the default)%s%s%s\n",
			    *i + 1 < argc ? ", not '" : "", *i + 1 < argc ? argv[*i + 1] : "",
			    *i + 1 < argc ? "'" : "");
			return -1;
		}
		*threads = (int)n;
		++*i;
		return 1;
	}
	return 0;
}

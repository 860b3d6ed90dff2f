/* dask.c: `nvlprof dask`: runs the Python driver installed beside this binary (nvlprof-dask, from
 * analyzer/nvlprof_dask.py), which makes the partials on a Dask cluster and merges them. */
#include <errno.h>  /* errno */
#include <limits.h> /* PATH_MAX */
#include <stdio.h>  /* fprintf */
#include <string.h> /* strrchr */
#include <unistd.h> /* execv, readlink */

#include "cli/commands.h"

int nvlp_cmd_dask(int argc, char **argv)
{
	(void)argc;
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
	char *slash = n > 0 ? memrchr(path, '/', (size_t)n) : NULL;
	if (!slash) {
		fprintf(stderr, "nvlprof: dask: cannot tell where nvlprof is installed\n");
		return 2;
	}
	strcpy(slash + 1, "nvlprof-dask");
	argv[0] = path;
	execv(path, argv);
	fprintf(stderr,
	        "nvlprof: dask: cannot run the Dask driver %s: %s (make builds it beside nvlprof; "
	        "without Dask: report --partial per node, then merge, docs/DISTRIBUTED.md)\n",
	        path, strerror(errno));
	return 2;
}

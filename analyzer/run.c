/* run.c: `nvlprof run`: executes a command with libnvlprof.so (found next to this binary or in ../lib) preloaded. */
#include <errno.h>    /* errno */
#include <limits.h>   /* PATH_MAX */
#include <stdio.h>    /* fprintf */
#include <stdlib.h>   /* getenv, setenv, realpath */
#include <string.h>   /* strcmp, strncmp */
#include <sys/stat.h> /* mkdir */
#include <unistd.h>   /* execvp, readlink, access */

#include "commands.h"

#define LIB_NAME "libnvlprof.so"

static void run_usage(FILE *f)
{
	fprintf(f, "usage: nvlprof run [-o DIR] [--] CMD [ARGS...]\n"
		   "  -o, --output DIR   write traces to DIR (sets NVLPROF_DIR; default ./nvlprof-traces)\n");
}

/* The library lives next to the real nvlprof binary (symlinks resolved), as make builds it, or in
 * ../lib, as `make install` puts it (PREFIX/bin/nvlprof, PREFIX/lib/libnvlprof.so).
 * tried[0], tried[1]: the two places, for the message when neither has it. */
static int find_library(char *out, char tried[2][PATH_MAX])
{
	char exe[PATH_MAX], real[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	if (!realpath(exe, real))
		return -1;
	char *slash = strrchr(real, '/');
	if (!slash)
		return -1;
	*slash = 0;
	static const char *const dirs[] = {"", "/../lib"};
	for (size_t i = 0; i < 2; i++) {
		if ((size_t)snprintf(tried[i], PATH_MAX, "%s%s/%s", real, dirs[i], LIB_NAME) >= PATH_MAX)
			return -1;
		if (access(tried[i], R_OK) == 0 && realpath(tried[i], out))
			return 0;
	}
	return -1;
}

/* ld.so splits LD_PRELOAD on ':' and ' '. */
static int preload_has(const char *list, const char *lib)
{
	size_t n = strlen(lib);
	for (const char *p = list; *p;) {
		size_t k = strcspn(p, ": ");
		if (k == n && strncmp(p, lib, n) == 0)
			return 1;
		p += k;
		if (*p)
			p++;
	}
	return 0;
}

/* Length of the leading sanitizer runtimes in an LD_PRELOAD list (without the separator after
 * them): ASan and TSan refuse to start unless their runtime is the first library loaded, so a
 * sanitizer build of the shim goes right after them rather than in front. */
static size_t sanitizer_prefix(const char *list)
{
	static const char *const rts[] = {"libasan.so", "libtsan.so", "libubsan.so", "liblsan.so"};
	size_t end = 0;
	for (const char *p = list; *p;) {
		size_t k = strcspn(p, ": ");
		const char *base = p;
		for (const char *q = p; q < p + k; q++)
			if (*q == '/')
				base = q + 1;
		int rt = 0;
		for (size_t i = 0; i < sizeof(rts) / sizeof(rts[0]); i++)
			rt |= !strncmp(base, rts[i], strlen(rts[i]));
		if (!rt)
			break;
		end = (size_t)(p - list) + k;
		p += k;
		if (*p)
			p++;
	}
	return end;
}

static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0777) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0777) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

int nvlp_cmd_run(int argc, char **argv)
{
	const char *outdir = NULL;
	int i = 1;
	while (i < argc) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			run_usage(stdout);
			return 0;
		}
		if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (i + 1 >= argc || !argv[i + 1][0]) {
				fprintf(stderr, "nvlprof run: %s needs a directory\n", a);
				run_usage(stderr);
				return 2;
			}
			outdir = argv[i + 1];
			i += 2;
			continue;
		}
		if (!strncmp(a, "--output=", 9)) {
			outdir = a + 9;
			i++;
			continue;
		}
		if (a[0] == '-') {
			fprintf(stderr, "nvlprof run: unknown option '%s'\n", a);
			run_usage(stderr);
			return 2;
		}
		break; /* the command starts here */
	}
	if (i >= argc) {
		fprintf(stderr, "nvlprof run: no command given\n");
		run_usage(stderr);
		return 2;
	}

	char lib[PATH_MAX], tried[2][PATH_MAX] = {"(the nvlprof binary could not be located)", "-"};
	if (find_library(lib, tried) < 0) {
		fprintf(stderr,
			"nvlprof run: %s not found next to the nvlprof binary (looked for %s) nor in "
			"../lib (looked for %s)\n",
			LIB_NAME, tried[0], tried[1]);
		return 1;
	}
	const char *old = getenv("LD_PRELOAD");
	if (!old || !*old) {
		setenv("LD_PRELOAD", lib, 1);
	} else if (!preload_has(old, lib)) {
		size_t len = strlen(lib) + 1 + strlen(old) + 2;
		char *v = malloc(len);
		if (!v) {
			fprintf(stderr, "nvlprof run: out of memory\n");
			return 1;
		}
		size_t keep = sanitizer_prefix(old);
		const char *rest = old + keep + (keep && old[keep] ? 1 : 0);
		snprintf(v, len, "%.*s%s%s%s%s", (int)keep, old, keep ? ":" : "", lib,
			 *rest ? ":" : "", rest);
		setenv("LD_PRELOAD", v, 1);
		free(v);
	}
	if (outdir) {
		char abs[PATH_MAX];
		/* absolute, so that a job which changes directory still writes where it was asked */
		if (mkdir_p(outdir) < 0 || !realpath(outdir, abs)) {
			fprintf(stderr, "nvlprof run: cannot create output directory '%s': %s\n", outdir,
				strerror(errno));
			return 1;
		}
		setenv("NVLPROF_DIR", abs, 1);
	}
	/* exec, not fork: the job keeps our pid, its signals and its exit status */
	execvp(argv[i], argv + i);
	int e = errno;
	fprintf(stderr, "nvlprof run: cannot run '%s': %s\n", argv[i], strerror(e));
	return e == ENOENT ? 127 : 126;
}

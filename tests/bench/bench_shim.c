/* bench_shim.c: the shim's added cost per ncclAllReduce and its trace bytes per record, on the fake NCCL. */
#include <dirent.h>   /* opendir */
#include <limits.h>   /* PATH_MAX */
#include <stdio.h>    /* printf, popen */
#include <stdlib.h>   /* qsort, setenv */
#include <string.h>   /* strrchr */
#include <sys/stat.h> /* stat, mkdir */
#include <time.h>     /* clock_gettime */
#include <unistd.h>   /* readlink */

#include <nccl.h>

#include "nvlp_trace.h"

/*
 * The parent runs the same binary as a child, alternately without and with LD_PRELOAD of the shim
 * (ROUNDS times each, so that machine noise hits both alike), and takes the median of each side.
 * CUPTI collection is switched off in the child: without a GPU driver there is no CUPTI, and this
 * measures the interposition and recording path itself; a third run per round adds NCCL's profiler
 * plugin (the fake NCCL calls it per collective, as NCCL does).
 */
#define ROUNDS 5
#define DEFAULT_CALLS 400000

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int child(long calls)
{
	ncclUniqueId id;
	ncclComm_t comm;
	if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
		return 1;
	long bad = 0;
	for (long i = 0; i < 10000; i++) /* warm up: resolve, first ring, page faults */
		bad += ncclAllReduce(NULL, NULL, 1024, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess;
	double t0 = now_ns();
	for (long i = 0; i < calls; i++)
		bad += ncclAllReduce(NULL, NULL, 1024 + (i & 7), ncclFloat32, ncclSum, comm, NULL) !=
		       ncclSuccess;
	double t1 = now_ns();
	ncclCommDestroy(comm);
	printf("%.3f\n", (t1 - t0) / (double)calls);
	return bad != 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Run ourselves as a child; @return ns per call, or -1. */
static double run_child(const char *self, long calls, const char *preload, const char *dir,
                        int plugin)
{
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof cmd,
	         "env -u NCCL_PROFILER_PLUGIN %s%s NVLPROF_DIR='%s' NVLPROF_CUPTI=0 "
	         "NVLPROF_NCCL_PLUGIN=%d '%s' --child %ld",
		 preload ? "LD_PRELOAD=" : "", preload ? preload : "", dir, plugin, self, calls);
	FILE *p = popen(cmd, "r");
	double ns = -1;
	if (!p || fscanf(p, "%lf", &ns) != 1)
		ns = -1;
	if (p && pclose(p) != 0)
		ns = -1;
	return ns;
}

/* Size of the one trace in dir and its record count. */
static int trace_stats(const char *dir, double *bytes, double *records, double *dropped)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX + 320];
	int found = 0;
	while (d && (e = readdir(d)))
		if (strstr(e->d_name, ".nvlp")) {
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			found = 1;
		}
	if (d)
		closedir(d);
	struct stat st;
	char err[512];
	nvlp_reader *r = found && stat(path, &st) == 0 ? nvlp_reader_open(path, err, sizeof err) : NULL;
	if (!r)
		return -1;
	struct nvlp_record rec;
	*records = 0;
	*dropped = 0;
	while (nvlp_reader_next(r, &rec) == 1) {
		*records += 1;
		if (rec.kind == NVLP_K_END)
			*dropped = (double)((const struct nvlp_rec_end *)rec.f)->dropped;
	}
	nvlp_reader_close(r);
	*bytes = (double)st.st_size;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "--child"))
		return child(atol(argv[2]));
	long calls = argc >= 2 ? atol(argv[1]) : DEFAULT_CALLS;
	char self[PATH_MAX - 64], lib[PATH_MAX], tmpl[] = "/tmp/nvlp-bench.XXXXXX";
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0 || !mkdtemp(tmpl))
		return 1;
	self[n] = 0;
	/* $BUILD/bench/bench_shim -> $BUILD/libnvlprof.so */
	snprintf(lib, sizeof lib, "%s", self);
	char *slash = strrchr(lib, '/');
	*slash = 0;
	slash = strrchr(lib, '/');
	snprintf(slash + 1, sizeof lib - (size_t)(slash + 1 - lib), "libnvlprof.so");
	const char *env_lib = getenv("NVLPROF_LIB");
	const char *preload = env_lib ? env_lib : lib;

	/* traced: the interception alone (NCCL's profiler plugin off); plugged: with the plugin,
	 * which the fake NCCL then calls once per collective, as NCCL 2.27+ does */
	double plain[ROUNDS], traced[ROUNDS], plugged[ROUNDS];
	char dir[PATH_MAX + 32], pdir[PATH_MAX + 32];
	for (int i = 0; i < ROUNDS; i++) {
		snprintf(dir, sizeof dir, "%s/r%d", tmpl, i);
		snprintf(pdir, sizeof pdir, "%s/p%d", tmpl, i);
		mkdir(dir, 0755);
		mkdir(pdir, 0755);
		plain[i] = run_child(self, calls, NULL, dir, 0);
		traced[i] = run_child(self, calls, preload, dir, 0);
		plugged[i] = run_child(self, calls, preload, pdir, 1);
		if (plain[i] < 0 || traced[i] < 0 || plugged[i] < 0) {
			printf("bench_shim: a child run failed (shim %s)\n", preload);
			return 1;
		}
	}
	double bytes = 0, records = 0, dropped = 0;
	int stats = trace_stats(dir, &bytes, &records, &dropped);
	qsort(plain, ROUNDS, sizeof plain[0], cmp_double);
	qsort(traced, ROUNDS, sizeof traced[0], cmp_double);
	qsort(plugged, ROUNDS, sizeof plugged[0], cmp_double);
	double added = traced[ROUNDS / 2] - plain[ROUNDS / 2];
	printf("bench_shim: %ld ncclAllReduce calls x %d rounds: %.1f ns/call without, %.1f with: "
	       "added %.1f ns/call (target <= 100)\n",
	       calls, ROUNDS, plain[ROUNDS / 2], traced[ROUNDS / 2], added);
	printf("bench_shim: with NCCL's profiler plugin served too (one more record per "
	       "collective): %.1f ns/call, %.1f more\n",
	       plugged[ROUNDS / 2], plugged[ROUNDS / 2] - traced[ROUNDS / 2]);
	if (stats == 0)
		printf("bench_shim: trace %.0f bytes, %.0f records, %.0f dropped: %.2f bytes/record "
		       "(target <= 8)\n",
		       bytes, records, dropped, bytes / (records > 0 ? records : 1));
	else
		printf("bench_shim: no readable trace in %s\n", dir);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
	return system(cmd) != 0 || stats != 0;
}

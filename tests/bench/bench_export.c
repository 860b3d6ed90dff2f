/* bench_export.c: export throughput: a large synthetic job (8 ranks x 1M records), exported to
 * perfetto, chrome and sqlite; records/s of the export pass (best of 3), CPU ns per record (what
 * a loaded machine blurs least), with loading; sqlite at the default -j (its writer thread's CPU
 * too: the bound on many cores) and on one thread (-j 1). */
#define AN_GEN_NO_MAIN 1
#include "../progs/an_gen.c"

#include <string.h>  /* strcmp */
#include <time.h>    /* clock_gettime */
#include <unistd.h>  /* sysconf */

#include "out/export.h"

static void null_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	(void)x;
	*(uint64_t *)ctx += e->ts;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
static double cpu(void) /* every thread of the process */
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
static double cpu_self(void) /* this thread: sqlite's writer */
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int ranks = argc > 1 ? atoi(argv[1]) : 8;
	uint64_t per_rank = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	char dir[64], out[128];
	snprintf(dir, sizeof dir, "/tmp/nvlp-bench-export.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	struct an_gen_opts o;
	an_gen_defaults(&o);
	o.dir = dir;
	o.ranks = ranks;
	o.target_records = per_rank;
	if (an_gen_run(&o) != 0)
		return 1;
	char *p = dir;
	double t = now();
	struct xm_job *x = xm_open(&p, 1, NULL);
	if (!x)
		return 1;
	double tload = now() - t;
	/* the floor: reading the traces into events, no output */
	double best0 = 1e30;
	uint64_t recs0 = 0, sink0 = 0;
	double cbest0 = 1e30;
	for (int rep = 0; rep < 3; rep++) {
		struct xe_sink ns = {.ctx = &sink0, .ev = null_ev};
		t = now();
		double c = cpu();
		xe_stream(x, &ns, &recs0);
		double dt = now() - t;
		c = cpu() - c;
		if (dt < best0)
			best0 = dt;
		if (c < cbest0)
			cbest0 = c;
	}
	printf("bench_export: read only %llu records in %.3f s: %.2f M records/s, %.0f CPU "
	       "ns/record (the floor of every format, one thread)\n",
	       (unsigned long long)recs0, best0, recs0 / best0 / 1e6, cbest0 * 1e9 / recs0);
	const char *only = getenv("BENCH_EXPORT_ONLY"); /* one format by name */
	/* sqlite twice: the default -j, then -j 1 ("sqlite-j1", one thread) */
	static const char *const names[4] = {"perfetto", "chrome", "sqlite", "sqlite-j1"};
	int rc = 0;
	for (int f = 0;
	     f < (getenv("BENCH_EXPORT_FORMATS") ? atoi(getenv("BENCH_EXPORT_FORMATS")) : 4); f++) {
		if (only && strncmp(names[f], only, strlen(only)))
			continue;
		double best = 1e30, cbest = 1e30, worst = 0, wbest = 1e30;
		uint64_t recs = 0;
		long size = 0;
		for (int rep = 0; rep < 3; rep++) {
			snprintf(out, sizeof out, "%s/out.%s", dir, names[f]);
			t = now();
			double c = cpu(), cw = cpu_self();
			int r;
			if (f >= 2)
				r = xe_sqlite(x, out, f == 2 ? 0 : 1, &recs);
			else {
				FILE *fo = fopen(out, "wb");
				if (!fo)
					return 1;
				r = f == 0 ? xe_perfetto(x, fo, &recs)
				           : xe_chrome(x, fo, NULL, &recs);
				fclose(fo);
			}
			double dt = now() - t;
			c = cpu() - c;
			cw = cpu_self() - cw;
			if (cw < wbest)
				wbest = cw;
			rc |= r != 0;
			if (dt < best)
				best = dt;
			if (dt > worst)
				worst = dt;
			if (c < cbest)
				cbest = c;
			FILE *fs = fopen(out, "rb");
			if (fs) {
				fseek(fs, 0, SEEK_END);
				size = ftell(fs);
				fclose(fs);
			}
			remove(out);
		}
		printf("bench_export: %-8s %llu records in %.3f s: %.2f M records/s export pass "
		       "(best of 3; worst %.2f), %.0f CPU ns/record (%.2f M records/s per core), "
		       "%.2f M records/s with load + analysis (%.3f s); %.0f MB written\n",
		       names[f], (unsigned long long)recs, best, recs / best / 1e6,
		       recs / worst / 1e6, cbest * 1e9 / recs, recs / cbest / 1e6,
		       recs / (best + tload) / 1e6, tload, size / 1e6);
		if (f == 2) /* the writer thread bounds the wall time where every encoder has a core */
			printf("bench_export: sqlite   threads: %ld CPUs, writer thread %.0f CPU ns/record "
			       "(at most %.2f M records/s export pass with a core per encoder)\n",
			       sysconf(_SC_NPROCESSORS_ONLN), wbest * 1e9 / recs, recs / wbest / 1e6);
	}
	xm_close(x);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? rc : 1;
}

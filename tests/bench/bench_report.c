/* bench_report.c: analyzer throughput on two shapes: a synthetic 8-rank DDP-like job (8 ranks x 1M
 * records of NCCL, kernels, link samples) and a plain NCCL-only trace (2 ranks x 2M small
 * AllReduce, as the shim writes them from the fake NCCL); times load and the whole report. */
#define AN_GEN_NO_MAIN 1
#include "../progs/an_gen.c"

#include <time.h> /* clock_gettime */

#include "findings/findings.h"
#include "model/model.h"
#include "pipeline.h" /* an_job_analyze */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU seconds of all threads: records/s/core stays meaningful on a busy machine. */
static double cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Load, analyze and diagnose dir: best of 3 with one reader thread (per-core throughput; the
 * build machine is shared), then one thread per file up to the CPUs (what `nvlprof report` does).
 * @return findings of the last run, or -1 on error */
static int measure(const char *shape, char *dir, int ranks)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double th[AN_TH_COUNT];
	memcpy(th, an_threshold_defaults, sizeof th);
	int modes[2] = {1, ncpu < ranks ? (int)ncpu : ranks};
	int nf = 0;
	for (int m = 0; m < 2; m++) {
		double best_wall = 1e30, best_cpu = 1e30, best_all = 1e30, best_all_cpu = 1e30;
		uint64_t recs = 0, calls = 0;
		for (int rep = 0; rep < (m ? 1 : 3); rep++) {
			char err[256], *p = dir;
			struct an_job job;
			double t = now(), c0 = cpu();
			if (an_job_load(&job, &p, 1, modes[m], err, sizeof err) != 0) {
				fprintf(stderr, "bench: %s\n", err);
				return -1;
			}
			double tload = now() - t, cload = cpu() - c0;
			an_job_analyze(&job);
			struct an_findings f;
			an_findings_compute(&job, th, &f);
			double tall = now() - t, call = cpu() - c0;
			recs = calls = 0;
			for (size_t i = 0; i < job.nranks; i++) {
				recs += job.ranks[i].records;
				calls += job.ranks[i].ncalls;
			}
			nf = (int)f.n;
			if (tload < best_wall)
				best_wall = tload;
			if (cload < best_cpu)
				best_cpu = cload;
			if (tall < best_all)
				best_all = tall;
			if (call < best_all_cpu)
				best_all_cpu = call;
			an_findings_free(&f);
			an_job_free(&job);
		}
		printf("bench_report: %s, %d thread(s): %llu records (%llu NCCL calls): load %.3f s "
		       "wall (%.1f M records/s), %.3f s CPU (%.1f M records/s/core); with analysis + "
		       "findings %.3f s (%.1f M records/s), %.3f s CPU (%.1f M records/s/core); %d "
		       "findings\n",
		       shape, modes[m], (unsigned long long)recs, (unsigned long long)calls, best_wall,
		       recs / best_wall / 1e6, best_cpu, recs / best_cpu / 1e6, best_all,
		       recs / best_all / 1e6, best_all_cpu, recs / best_all_cpu / 1e6, nf);
	}
	return nf;
}

int main(int argc, char **argv)
{
	int ranks = argc > 1 ? atoi(argv[1]) : 8;
	uint64_t per_rank = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	char dir[64];
	snprintf(dir, sizeof dir, "/tmp/nvlp-bench.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	struct an_gen_opts o;
	an_gen_defaults(&o);
	o.dir = dir;
	o.ranks = ranks;
	o.target_records = per_rank;
	double t = now();
	if (an_gen_run(&o) != 0)
		return 1;
	double tgen = now() - t;
	printf("bench_report: %d ranks, target %llu records per rank, generated in %.2f s\n", ranks,
	       (unsigned long long)per_rank, tgen);
	/* the synthetic job is healthy: a finding would be a false positive */
	int rc = measure("8-rank job", dir, ranks) != 0;
	/* NCCL-only: 2 ranks of 2M small AllReduce each (the shape issue 13 measured at 2.8 M/s) */
	char dir2[96];
	snprintf(dir2, sizeof dir2, "%s/small", dir);
	an_gen_defaults(&o);
	o.dir = dir2;
	o.ranks = 2;
	o.small_calls = argc > 3 ? strtoull(argv[3], NULL, 10) : 2000000;
	t = now();
	if (an_gen_run(&o) != 0)
		return 1;
	printf("bench_report: 2 ranks x %llu small AllReduce (NCCL only), generated in %.2f s\n",
	       (unsigned long long)o.small_calls, now() - t);
	rc |= measure("NCCL-only", dir2, 2) < 0;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? rc : 1;
}

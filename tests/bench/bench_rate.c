/* bench_rate.c: a default trace's bytes per collective and per hour at DDP-like rates (bursts of buckets, then compute), on the fake NCCL under the shim. */
/*
 * Bytes per record fall as the rate rises (the deltas between records shrink), so a figure taken
 * at one rate does not carry to another. A child runs under LD_PRELOAD of the shim (CUPTI and
 * link counters off: no driver here) and makes steps of B AllReduces of 1-8 MiB, ~1 ms apart at
 * the start of each step (a DDP backward's buckets; each call 0-300 us late, as a Python job's
 * calls are), one step every S ms, for SECONDS; the fake NCCL
 * reports each collective's 24 kernel channels (stamps scattered inside the span, as on NVLink
 * H200s) to the shim's profiler plugin, so the trace holds what a default trace holds per
 * collective: the call, NCCL's choice and the folded channels. An idle child (no collectives)
 * gives the rest of a trace over the same time; the difference over the collectives is the bytes
 * a collective costs at that rate. The host clocks are real; the GPU stamps are the fake's (its
 * kernel spans 2 us + 1 ns per 64 bytes, at the wall clock's pace), more regular than a GPU's.
 * At 50 a second it gave 29.5 bytes a collective where run 7's real two-rank traces (NCCL
 * 2.28.9, 25 a second) give 31 (without the late calls it gave 25.5): close, but a model, not a
 * measurement of a GPU job. Link samples (~2 MB an hour a GPU) and Python stacks are not in it.
 */
#include <limits.h> /* PATH_MAX */
#include <nccl.h>   /* ncclAllReduce */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* atoi, mkdtemp */
#include <string.h> /* strcmp */
#include <time.h>   /* clock_gettime */

#include "shim_child.h"

#define SECONDS 10

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	double d = t - now_s();
	if (d > 0) {
		struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
		nanosleep(&ts, NULL);
	}
}

/* child B S: B collectives every S ms (B 0: idle) */
static int child(int per_step, int step_ms)
{
	ncclUniqueId id;
	ncclComm_t comm;
	memset(&id, 0, sizeof id);
	if (ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess)
		return 3;
	static float buf[2u << 20]; /* 8 MiB */
	unsigned long long x = 88172645463325252ull; /* xorshift: the calls' lateness */
	double t0 = now_s(), t = t0;
	while (t < t0 + SECONDS) {
		for (int k = 0; k < per_step; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			sleep_until(t + k * 1e-3 + (double)(x % 300) * 1e-6);
			size_t n = (1u + (unsigned)(k * 5) % 8) << 18; /* 1-8 MiB of floats */
			ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, NULL);
		}
		t += step_ms / 1e3;
		sleep_until(t);
	}
	ncclCommDestroy(comm);
	return 0;
}

/* The trace bytes of one child run (-1 on failure) */
static long long run(const char *self, const char *lib, int per_step, int step_ms)
{
	char dir[] = "/tmp/nvlp-rate.XXXXXX", a[32];
	if (!mkdtemp(dir))
		return -1;
	snprintf(a, sizeof a, "%d:%d", per_step, step_ms);
	const char *env[] = {"NVLPROF_CUPTI=0",           "FAKE_NCCL_KCH=1",
	                     "FAKE_NCCL_KCH_CHANNELS=24", "FAKE_NCCL_KCH_JITTER=1",
	                     "FAKE_NCCL_KCH_BAD",         "NVLPROF_PYSAMPLE_HZ=0",
	                     NULL};
	int rc = shim_run_child(self, lib, dir, "0", env, a);
	long long b = rc == 0 ? trace_dir_bytes(dir) : -1;
	char cmd[PATH_MAX];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("bench_rate: could not remove %s\n", dir);
	return b;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child")) {
		int b = 0, s = 1000;
		sscanf(argv[2], "%d:%d", &b, &s);
		return child(b, s);
	}
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	static const struct {
		int per_step, step_ms;
	} pat[] = {{4, 80}, {14, 70}, {14, 35}, {14, 25}, {25, 25}};
	long long idle = run(self, lib, 0, 1000);
	if (idle < 0) {
		printf("bench_rate: the idle child failed\n");
		return 1;
	}
	printf("bench_rate: an idle trace: %lld bytes in %d s (%.2f MB an hour)\n", idle, SECONDS,
	       (double)idle / SECONDS * 3600 / 1e6);
	for (size_t i = 0; i < sizeof pat / sizeof *pat; i++) {
		long long b = run(self, lib, pat[i].per_step, pat[i].step_ms);
		if (b < 0) {
			printf("bench_rate: the child of %d every %d ms failed\n", pat[i].per_step,
			       pat[i].step_ms);
			return 1;
		}
		double colls = (double)pat[i].per_step * (SECONDS * 1000.0 / pat[i].step_ms);
		printf("bench_rate: %2d AllReduces every %2d ms (%4.0f a second, 24 channels): %7lld "
		       "bytes, %5.1f a collective beyond the idle trace; %5.1f MB an hour\n",
		       pat[i].per_step, pat[i].step_ms, colls / SECONDS, b, (double)(b - idle) / colls,
		       (double)b / SECONDS * 3600 / 1e6);
	}
	return 0;
}

/* test_analyzer_steps.c: steps.c on its own: step marks (an_steps_mark) win over the pattern, a
 * regular pattern is taken, an irregular one (sizes and times growing) or a too short one is not;
 * calls all alike in bursts are steps of a burst, a gapless loop or two gaps a period are not. */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* mkdtemp, system */
#include <string.h>   /* strcmp */

#include "check.h"
#include "model/model.h"
#include "pipeline.h" /* an_job_analyze */
#include "nvlp_trace.h"
#include "model/stages.h"

#define MS 1000000ull
#define T0 (1000ull * MS)
static char dir[64];

/* Two ranks, n AllReduce each; call i at T0 + at(i) with bytes(i). */
static void job(const char *name, int n, uint64_t (*at)(int), uint64_t (*bytes)(int))
{
	for (int rk = 0; rk < 2; rk++) {
		char path[160], hdr[128];
		snprintf(path, sizeof path, "%s/%s-%d.nvlp", dir, name, rk);
		snprintf(hdr, sizeof hdr, "host=h\npid=%d\nppid=1\nrank=%d\nworld_size=2\n", 100 + rk, rk);
		nvlp_writer *w = nvlp_writer_open(path, hdr, T0, 1700000000000000000ull);
		for (int i = 0; i < n; i++) {
			struct nvlp_rec_nccl c = {.fn = NVLP_NCCL_ALL_REDUCE, .t_enter = T0 + at(i),
			                          .dur = 2000, .tid = 1, .bytes = bytes(i), .comm = 0x77,
			                          .rank = (uint64_t)rk, .nranks = 2, .seq = (uint64_t)i};
			nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
		}
		struct nvlp_rec_end e = {.t = T0 + at(n - 1) + 10 * MS};
		nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
		nvlp_writer_close(w);
	}
}
static uint64_t at_regular(int i) { return (uint64_t)i * 10 * MS; }
static uint64_t at_growing(int i) { return (uint64_t)i * (uint64_t)i * MS; }
static uint64_t at_tight(int i) { return (uint64_t)i * 50000; }
static uint64_t b_same(int i) { (void)i; return 4096; }
/* 7 calls 0.3 ms apart, then 20 ms to the next 7 (DDP's buckets of one size): steps of 22 ms */
static uint64_t at_burst(int i) { return (uint64_t)(i / 7) * 22 * MS + (uint64_t)(i % 7) * 300000; }
/* the same with each gap 19-21 ms and the bursts' calls 0.2-0.4 ms apart */
static uint64_t at_burst_jitter(int i)
{
	uint64_t t = 0;
	for (int k = 1; k <= i; k++)
		t += k % 7 ? 200000 + (uint64_t)(k * 7919 % 200001) : 19 * MS + (uint64_t)(k * 104729 % 2000001);
	return t;
}
/* two gaps a period of 7 (after calls 3 and 7): no one place for the step to end */
static uint64_t at_two_gaps(int i)
{
	return (uint64_t)(i / 7) * 40 * MS + (uint64_t)(i % 7) * 300000 + (i % 7 >= 3 ? 18 * MS : 0);
}

static int load(struct an_job *j, const char *name)
{
	char p0[160], p1[160], err[256];
	snprintf(p0, sizeof p0, "%s/%s-0.nvlp", dir, name);
	snprintf(p1, sizeof p1, "%s/%s-1.nvlp", dir, name);
	char *paths[2] = {p0, p1};
	return an_job_load(j, paths, 2, 1, err, sizeof err);
}

#ifdef NVLP_FIELDS_MARK
/* One process (pid) of a single-rank communicator with 30 growing AllReduce (no pattern: the
 * steps can come only from its marks), open for the marks a case adds; the path in path. */
static nvlp_writer *growing_open(char *path, size_t size, const char *name, int pid)
{
	char hdr[64];
	snprintf(path, size, "%s/%s-0.nvlp", dir, name);
	snprintf(hdr, sizeof hdr, "host=h\npid=%d\nppid=1\nrank=0\n", pid);
	nvlp_writer *w = nvlp_writer_open(path, hdr, T0, 1700000000000000000ull);
	for (int i = 0; i < 30; i++) {
		struct nvlp_rec_nccl c = {.fn = NVLP_NCCL_ALL_REDUCE, .t_enter = T0 + at_growing(i),
		                          .dur = 2000, .tid = 1, .bytes = 4096, .comm = 0x78,
		                          .rank = 0, .nranks = 1, .seq = (uint64_t)i};
		nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
	}
	return w;
}

/* Its END, then the trace loaded into j and analysed. @return an_job_load's */
static int growing_load(struct an_job *j, nvlp_writer *w, char *path)
{
	struct nvlp_rec_end e = {.t = T0 + 1000 * MS};
	nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
	nvlp_writer_close(w);
	char err[256];
	char *paths[1] = {path};
	int rc = an_job_load(j, paths, 1, 1, err, sizeof err);
	an_job_analyze(j);
	return rc;
}
#endif

int main(void)
{
	snprintf(dir, sizeof dir, "/tmp/nvlp-an-steps.XXXXXX");
	if (!mkdtemp(dir)) {
		printf("FAIL: mkdtemp\n");
		return 1;
	}
	job("regular", 30, at_regular, b_same);
	job("growing", 30, at_growing, b_same);
	job("tight", 200, at_tight, b_same);
	job("short", 4, at_regular, b_same);
	job("burst", 203, at_burst, b_same); /* the first 20 skipped: call 20 ends a burst */
	job("burstj", 210, at_burst_jitter, b_same);
	job("twogaps", 210, at_two_gaps, b_same);
	struct an_job j;

	CHECK(load(&j, "regular") == 0, "regular job loads");
	an_job_analyze(&j);
	CHECK(!strcmp(j.step_source, "pattern") && j.step_ns > 9.9 * MS && j.step_ns < 10.1 * MS,
	      "a regular 10 ms pattern is steps (%s, %.3f ms)", j.step_source, j.step_ns / 1e6);
	an_job_free(&j);

	CHECK(load(&j, "growing") == 0, "growing job loads");
	an_job_analyze(&j);
	CHECK(!strcmp(j.step_source, "none") && j.steps == 0 && !j.win1 &&
	          strstr(j.steps_why, "vary in length"),
	      "repetitions growing in length are not steps (%s)", j.steps_why);
	an_job_free(&j);

	CHECK(load(&j, "tight") == 0, "tight job loads");
	an_job_analyze(&j);
	CHECK(!strcmp(j.step_source, "none") && strstr(j.steps_why, "below step_min_ms"),
	      "a 0.05 ms loop is not steps (%s)", j.steps_why);
	an_job_free(&j);

	CHECK(load(&j, "burst") == 0, "burst job loads");
	an_job_analyze(&j);
	CHECK(!strcmp(j.step_source, "pattern") && j.step_calls == 7 && j.step_ns > 21.9 * MS &&
	          j.step_ns < 22.1 * MS && j.steps == 29,
	      "bursts of 7 calls alike are steps of 7 calls, 22 ms (%s, %d calls, %.3f ms, %llu)",
	      j.steps_why, j.step_calls, j.step_ns / 1e6, (unsigned long long)j.steps);
	CHECK(j.win0 == an_job_time(&j.ranks[0], T0 + at_burst(21)),
	      "the step window starts at a burst's first call (call 21; call 20, the first after skip, "
	      "ends a burst)");
	an_job_free(&j);

	CHECK(load(&j, "burstj") == 0, "jittered burst job loads");
	an_job_analyze(&j);
	CHECK(!strcmp(j.step_source, "pattern") && j.step_calls == 7 && j.step_ns > 20 * MS &&
	          j.step_ns < 23 * MS,
	      "jittered bursts of 7 are steps of 7 (%s, %d calls, %.3f ms)", j.steps_why,
	      j.step_calls, j.step_ns / 1e6);
	an_job_free(&j);

	CHECK(load(&j, "twogaps") == 0, "two-gap job loads");
	an_job_analyze(&j);
	CHECK(!strcmp(j.step_source, "none") && strstr(j.steps_why, "below step_min_ms"),
	      "two gaps a period: still a loop of single calls (%s)", j.steps_why);
	an_job_free(&j);

	CHECK(load(&j, "short") == 0, "short job loads");
	an_job_analyze(&j);
	CHECK(!strcmp(j.step_source, "none") && strstr(j.steps_why, "step_min_count"),
	      "4 calls are too few to prove steps (%s)", j.steps_why);
	an_job_free(&j);

	/* marks: 8 steps of 25 ms marked by the job win over the growing (unproven) pattern */
	CHECK(load(&j, "growing") == 0, "growing job loads again");
	int ok = 1;
	for (int i = 0; i <= 8; i++)
		ok &= an_steps_mark(&j.ranks[0], T0 + 50 * MS + (uint64_t)i * 25 * MS, "ProfilerStep") == 0;
	an_job_analyze(&j);
	CHECK(ok && !strcmp(j.step_source, "marks") && j.steps == 8 && j.step_ns == 25.0 * MS &&
	          j.win0 == an_job_time(&j.ranks[0], T0 + 50 * MS) &&
	          j.win1 == an_job_time(&j.ranks[0], T0 + 250 * MS) &&
	          strstr(j.steps_why, "ProfilerStep"),
	      "marks give 8 steps of 25 ms and the window between the first and last mark (%s, "
	      "%llu, %.3f ms)",
	      j.step_source, (unsigned long long)j.steps, j.step_ns / 1e6);
	an_job_free(&j);

	/* marks out of file order (threads) are sorted; one mark alone gives no steps */
	CHECK(load(&j, "regular") == 0, "regular job loads again");
	an_steps_mark(&j.ranks[1], T0 + 30 * MS, "ProfilerStep");
	an_job_analyze(&j);
	CHECK(!strcmp(j.step_source, "pattern"), "a single mark is not steps: the pattern stands (%s)",
	      j.step_source);
	an_job_free(&j);

#ifdef NVLP_FIELDS_MARK
	/* the same through the trace: torch.profiler's ProfilerStep#N ranges as MARK records (once
	 * the shim writes the kind; until then this part is not compiled) */
	{
		char path[160];
		nvlp_writer *w = growing_open(path, sizeof path, "marked", 300);
		for (int i = 0; i <= 8; i++) {
			char name[32];
			int n = snprintf(name, sizeof name, "ProfilerStep#%d", i);
			struct nvlp_rec_string st = {.id = 1 + (uint64_t)i};
			nvlp_writer_add(w, NVLP_K_STRING, &st, name, (size_t)n);
			struct nvlp_rec_mark mk = {.t = T0 + 50 * MS + (uint64_t)i * 25 * MS,
			                           .kind = NVLP_MARK_RANGE_PUSH, .name = 1 + (uint64_t)i,
			                           .tid = 1};
			nvlp_writer_add(w, NVLP_K_MARK, &mk, NULL, 0);
			struct nvlp_rec_mark pop = {.t = mk.t + 20 * MS, .kind = NVLP_MARK_RANGE_POP,
			                            .tid = 1};
			nvlp_writer_add(w, NVLP_K_MARK, &pop, NULL, 0);
		}
		CHECK(growing_load(&j, w, path) == 0, "marked job loads");
		CHECK(!strcmp(j.step_source, "marks") && j.steps == 8 && j.step_ns == 25.0 * MS,
		      "ProfilerStep#N MARK records give 8 steps of 25 ms (%s, %llu, %.3f ms)",
		      j.step_source, (unsigned long long)j.steps, j.step_ns / 1e6);
		an_job_free(&j);
	}
	/* torch.profiler's steps through CUPTI (USER_RANGE marks, no name): those of the thread that
	 * made the earliest (tid 1: 9 marks 30 ms apart, from 40 ms) are the steps, not those of a
	 * thread with more, written first in the file (tid 2: 24 marks 10 ms apart from 45 ms, as
	 * DDP's bucket all-reduces on the autograd thread); with NVTX ProfilerStep#N ranges in the
	 * same trace (tid 1, 25 ms apart), the named ones win, whichever comes first in the file */
	for (int nvtx = 0; nvtx < 3; nvtx++) {
		char path[160], name[16];
		snprintf(name, sizeof name, "xc%d", nvtx);
		nvlp_writer *w = growing_open(path, sizeof path, name, 301);
		for (int pass = 0; pass < 2; pass++) {
			if (pass == (nvtx == 2))
				for (int i = 0; i < 24; i++) {
					struct nvlp_rec_mark mk = {.t = T0 + 45 * MS + (uint64_t)i * 10 * MS,
					                           .kind = NVLP_MARK_USER_RANGE, .tid = 2};
					nvlp_writer_add(w, NVLP_K_MARK, &mk, NULL, 0);
				}
			for (int i = 0; pass == (nvtx == 2) && i <= 8; i++) {
				struct nvlp_rec_mark mk = {.t = T0 + 40 * MS + (uint64_t)i * 30 * MS,
				                           .kind = NVLP_MARK_USER_RANGE, .tid = 1};
				nvlp_writer_add(w, NVLP_K_MARK, &mk, NULL, 0);
			}
			for (int i = 0; nvtx && pass == (nvtx != 2) && i <= 8; i++) {
				static const char nm[] = "ProfilerStep#3";
				struct nvlp_rec_string st = {.id = 50};
				if (i == 0)
					nvlp_writer_add(w, NVLP_K_STRING, &st, nm, sizeof nm - 1);
				struct nvlp_rec_mark mk = {.t = T0 + 50 * MS + (uint64_t)i * 25 * MS,
				                           .kind = NVLP_MARK_RANGE_PUSH, .name = 50,
				                           .tid = 1};
				nvlp_writer_add(w, NVLP_K_MARK, &mk, NULL, 0);
			}
		}
		CHECK(growing_load(&j, w, path) == 0, "USER_RANGE job %d loads", nvtx);
		double want = nvtx ? 25.0 * MS : 30.0 * MS;
		CHECK(!strcmp(j.step_source, "marks") && j.steps == 8 && j.step_ns == want &&
		          strstr(j.steps_why, nvtx ? "(ProfilerStep)" : "(ProfilerStep via CUPTI)"),
		      "USER_RANGE marks%s: 8 steps of %.0f ms (%s, %llu, %.3f ms, %s)",
		      nvtx == 1 ? " + NVTX after" : nvtx == 2 ? " + NVTX before" : "", want / 1e6,
		      j.step_source, (unsigned long long)j.steps, j.step_ns / 1e6, j.steps_why);
		an_job_free(&j);
	}
#endif

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("warning: could not remove %s\n", dir);
	return CHECK_DONE();
}

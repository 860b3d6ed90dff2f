/* test_analyzer.c: unit tests of the analyzer model: kernel-to-call matching, group split,
 * exposure, helpers. */
#include <math.h>     /* fabs */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* mkdtemp */
#include <string.h>   /* strcmp */
#include <sys/stat.h> /* mkdir */
#include <unistd.h>   /* unlink */

#include "check.h"
#include "findings/findings.h"
#include "model/model.h"
#include "pipeline.h" /* an_job_analyze */
#include "nvlp_trace.h"
#include "util/util.h" /* an_fmt_value */

#define US 1000ull
#define MS 1000000ull
#define T0 5000000000ull

static char dir[64];

static nvlp_writer *open_trace(const char *name, int rank)
{
	char path[128], hdr[256];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(hdr, sizeof hdr, "host=h\npid=%d\nrank=%d\nworld_size=2\n", 100 + rank, rank);
	return nvlp_writer_open(path, hdr, T0, 1700000000000000000ull);
}

static void str(nvlp_writer *w, unsigned id, const char *s)
{
	struct nvlp_rec_string r = {.id = id};
	nvlp_writer_add(w, NVLP_K_STRING, &r, s, strlen(s));
}

static void call(nvlp_writer *w, unsigned fn, uint64_t t, uint64_t bytes, uint64_t cs, uint64_t seq,
                 int depth)
{
	struct nvlp_rec_nccl n = {.fn = fn,
	                          .t_enter = t,
	                          .dur = 2 * US,
	                          .tid = 1,
	                          .device = 0,
	                          .cupti_stream = cs,
	                          .bytes = bytes,
	                          .comm = 0xabc,
	                          .rank = 0,
	                          .nranks = 2,
	                          .seq = seq,
	                          .group_depth = (uint64_t)depth};
	nvlp_writer_add(w, NVLP_K_NCCL, &n, NULL, 0);
}

static void kern(nvlp_writer *w, uint64_t s, uint64_t d, uint64_t stream, unsigned name, int nccl)
{
	struct nvlp_rec_kernel k = {.start = s,
	                            .dur = d,
	                            .device = 0,
	                            .stream = stream,
	                            .name = name,
	                            .flags = nccl ? 1u : 0u};
	nvlp_writer_add(w, NVLP_K_KERNEL, &k, NULL, 0);
}

static void end(nvlp_writer *w, uint64_t t)
{
	struct nvlp_rec_end e = {.t = t};
	nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
	nvlp_writer_close(w);
}

static int load(struct an_job *job, const char *name)
{
	char path[128], err[256];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	char *p = path;
	if (an_job_load(job, &p, 1, 1, err, sizeof err) != 0) {
		printf("load failed: %s\n", err);
		return -1;
	}
	an_job_analyze(job);
	return 0;
}

static void test_helpers(void)
{
	CHECK(an_coll_of_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == AN_C_ALLREDUCE,
	      "kernel name AllReduce");
	CHECK(an_coll_of_kernel("ncclKernel_ReduceScatter_Sum_bf16_RING_SIMPLE") ==
	          AN_C_REDUCESCATTER,
	      "kernel name ReduceScatter is not Reduce");
	CHECK(an_coll_of_kernel("ncclDevKernel_Reduce_Sum_f32_RING_LL") == AN_C_REDUCE,
	      "kernel name Reduce");
	CHECK(an_coll_of_kernel("ncclDevKernel_SendRecv") == AN_C_SENDRECV, "kernel name SendRecv");
	CHECK(an_coll_of_kernel("sm90_gemm") == 0, "compute kernel is not NCCL");
	CHECK(
	    an_coll_of_kernel(
	        "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE") ==
	        AN_C_ALLREDUCE,
	    "mangled kernel name (as CUPTI reports it) AllReduce");
	CHECK(an_coll_of_kernel("ncclDevKernel_Generic") == -1, "unknown NCCL kernel");
	CHECK(fabs(an_busbw_factor(NVLP_NCCL_ALL_REDUCE, 8) - 1.75) < 1e-9,
	      "AllReduce busbw factor 2(n-1)/n");
	CHECK(fabs(an_busbw_factor(NVLP_NCCL_ALL_GATHER, 4) - 0.75) < 1e-9,
	      "AllGather busbw factor (n-1)/n");
	CHECK(an_busbw_factor(NVLP_NCCL_BROADCAST, 8) == 1 &&
	          an_busbw_factor(NVLP_NCCL_SEND, 2) == 1,
	      "Broadcast/Send factor 1");
	double th[AN_TH_COUNT];
	memcpy(th, an_threshold_defaults, sizeof th);
	CHECK(an_threshold_set(th, "exposed_share=0.2") == 0 && th[AN_TH_exposed_share] == 0.2,
	      "threshold set");
	CHECK(an_threshold_set(th, "nosuch=1") == -1 &&
	          an_threshold_set(th, "exposed_share=abc") == -1,
	      "bad threshold rejected");
	CHECK(an_size_class(1000) == 0 && an_size_class(64 << 20) == 3 &&
	          an_size_class(1ull << 30) == 4,
	      "size classes");
}

/* Calls then kernels (CUPTI late), a group of two calls sharing one kernel, a mismatching kernel
 * that forces a resync, and an overlap that makes part of the communication exposed. */
static void test_matching(void)
{
	nvlp_writer *w = open_trace("m.nvlp", 0);
	str(w, 1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
	str(w, 2, "ncclDevKernel_AllGather_RING_LL");
	str(w, 3, "gemm");
	uint64_t t = T0 + 1 * MS;
	call(w, NVLP_NCCL_ALL_REDUCE, t, 1000, 13, 0, 0); /* call 0: kernel 100 us */
	call(w, NVLP_NCCL_GROUP_START, t + 10 * US, 0, 0, 0, 0);
	call(w, NVLP_NCCL_ALL_REDUCE, t + 11 * US, 3000, 13, 1, 1); /* call 1: 3/4 of 200 us */
	call(w, NVLP_NCCL_ALL_REDUCE, t + 12 * US, 1000, 13, 2, 1); /* call 2: 1/4 */
	call(w, NVLP_NCCL_GROUP_END, t + 13 * US, 0, 0, 0, 0);
	call(w, NVLP_NCCL_ALL_REDUCE, t + 20 * US, 1000, 13, 3,
	     0); /* call 3: its kernel never came */
	call(w, NVLP_NCCL_ALL_GATHER, t + 30 * US, 1000, 13, 4,
	     0); /* call 4: AllGather kernel 50 us */
	kern(w, t + 100 * US, 100 * US, 13, 1, 1);
	kern(w, t + 300 * US, 200 * US, 13, 1, 1);
	kern(w, t + 600 * US, 50 * US, 13, 2, 1); /* AllGather: skips call 3 */
	/* compute on another stream covering [t+100, t+400): of the 350 us of NCCL kernels, 150
	 * exposed */
	kern(w, t + 100 * US, 300 * US, 7, 3, 0);
	end(w, t + 1 * MS);

	struct an_job job;
	if (load(&job, "m.nvlp") != 0) {
		CHECK(0, "matching trace loads");
		return;
	}
	struct an_rank *r = &job.ranks[0];
	CHECK(r->ncalls == 5, "5 collective calls kept (group start/end are not calls): %zu",
	      r->ncalls);
	CHECK(r->calls[0].gpu_dur == 100 * US, "single call gets its kernel time (%u)",
	      r->calls[0].gpu_dur);
	CHECK(r->calls[1].gpu_dur == 150 * US && r->calls[2].gpu_dur == 50 * US,
	      "group kernel split by bytes 3:1 (%u, %u)", r->calls[1].gpu_dur, r->calls[2].gpu_dur);
	CHECK(r->calls[2].gpu_start == r->calls[1].gpu_start + 150 * US,
	      "group shares laid end to end");
	CHECK(r->calls[3].gpu_start == 0, "call whose kernel never came has no GPU time");
	CHECK(r->calls[4].gpu_dur == 50 * US,
	      "resync: AllGather kernel matched to the AllGather call");
	CHECK(r->gpu_resync == 1, "one call skipped to resynchronise (%llu)",
	      (unsigned long long)r->gpu_resync);
	CHECK(r->devs[0].union_nccl_ns == 350 * US, "NCCL GPU time 350 us (%llu)",
	      (unsigned long long)r->devs[0].union_nccl_ns);
	CHECK(r->devs[0].exposed_ns == 150 * US,
	      "exposed = NCCL time not under compute: 150 us (%llu)",
	      (unsigned long long)r->devs[0].exposed_ns);
	an_job_free(&job);
}

/* Kernels written before the calls, and calls without a CUPTI stream id (device order fallback). */
static void test_order_and_stream0(void)
{
	nvlp_writer *w = open_trace("o.nvlp", 0);
	str(w, 1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
	uint64_t t = T0 + 1 * MS;
	kern(w, t + 100 * US, 40 * US, 13, 1, 1);
	kern(w, t + 200 * US, 60 * US, 13, 1, 1);
	call(w, NVLP_NCCL_ALL_REDUCE, t, 1000, 13, 0, 0);
	call(w, NVLP_NCCL_ALL_REDUCE, t + 150 * US, 1000, 13, 1, 0);
	/* stream id 0 on the calls: matched by device order to kernels on stream 21 */
	call(w, NVLP_NCCL_ALL_REDUCE, t + 300 * US, 1000, 0, 2, 0);
	kern(w, t + 400 * US, 70 * US, 21, 1, 1);
	end(w, t + 1 * MS);
	struct an_job job;
	if (load(&job, "o.nvlp") != 0) {
		CHECK(0, "order trace loads");
		return;
	}
	struct an_rank *r = &job.ranks[0];
	CHECK(r->ncalls == 3 && r->calls[0].gpu_dur == 40 * US && r->calls[1].gpu_dur == 60 * US,
	      "kernels that arrived first are matched in stream order");
	CHECK(r->calls[2].gpu_dur == 70 * US, "cupti_stream 0: matched by device order (%u)",
	      r->calls[2].gpu_dur);
	CHECK(r->gpu_unmatched_kernels == 0, "no kernel left unmatched");
	an_job_free(&job);
}

/* Two ranks, rank 1 enters each collective 3 ms late: straggler; no trace at all: error. */
static void test_straggler_and_errors(void)
{
	for (int rk = 0; rk < 2; rk++) {
		char name[32];
		snprintf(name, sizeof name, "s%d.nvlp", rk);
		nvlp_writer *w = open_trace(name, rk);
		for (int i = 0; i < 20; i++) {
			struct nvlp_rec_nccl n = {.fn = NVLP_NCCL_ALL_REDUCE,
			                          .t_enter = T0 + i * 10 * MS + (rk ? 3 * MS : 0),
			                          .dur = US,
			                          .tid = 1,
			                          .bytes = 4096,
			                          .comm = 0x77,
			                          .rank = (uint64_t)rk,
			                          .nranks = 2,
			                          .seq = (uint64_t)i};
			nvlp_writer_add(w, NVLP_K_NCCL, &n, NULL, 0);
		}
		end(w, T0 + 300 * MS);
	}
	char p0[128], p1[128], err[256];
	snprintf(p0, sizeof p0, "%s/s0.nvlp", dir);
	snprintf(p1, sizeof p1, "%s/s1.nvlp", dir);
	char *paths[2] = {p0, p1};
	struct an_job job;
	CHECK(an_job_load(&job, paths, 2, 2, err, sizeof err) == 0, "two traces load in parallel");
	an_job_analyze(&job);
	CHECK(job.matched_colls == 20, "20 collectives matched by (comm, seq) (%llu)",
	      (unsigned long long)job.matched_colls);
	CHECK(job.rx[1].last_count == 19 && fabs(job.rx[1].lead_ns_sum / 19 - 3e6) < 1,
	      "rank 1 last by 3 ms each time (the first collective, startup, not counted)");
	CHECK(job.first_comm == 0 && job.first_seq == 0 && fabs(job.first_skew_ns - 3e6) < 1 &&
	          fabs(job.rx[0].first_wait_ns - 3e6) < 1 && fabs(job.rx[0].wait_ns - 19 * 3e6) < 1,
	      "the first collective's skew and wait are kept apart");
	double th[AN_TH_COUNT];
	memcpy(th, an_threshold_defaults, sizeof th);
	struct an_findings f;
	an_findings_compute(&job, th, &f);
	const struct an_finding *s = an_findings_get(&f, "straggler");
	CHECK(s && s->ev[0].num == 1, "straggler finding names rank 1");
	CHECK(an_findings_get(&f, "collection_gaps") != NULL,
	      "host-only traces give a collection_gaps note");
	an_findings_free(&f);
	an_job_free(&job);
	char empty[128];
	snprintf(empty, sizeof empty, "%s/empty", dir);
	mkdir(empty, 0755);
	char *pe = empty;
	CHECK(an_job_load(&job, &pe, 1, 1, err, sizeof err) == -1 && strstr(err, "nvlp"),
	      "empty dir: clear error (%s)", err);
	an_job_free(&job);
}

/* One formatter for people (text, cards): each number in its unit, the same value */
static void test_format(void)
{
	static const struct {
		double v;
		const char *unit, *want;
	} t[] = {{5.102e10, "B", "47.5 GiB"},  {6.711e7, "B", "64.0 MiB"},
	         {512, "B", "512 B"},          {248525, "B", "243 KiB"},
	         {8, "MiB", "8.00 MiB"},       {69161.3, "ms", "69.2 s"},
	         {335.2, "ms", "335 ms"},      {8.17, "ms", "8.17 ms"},
	         {0.2, "ms", "200 us"},        {0.0001, "ms", "100 ns"},
	         {-1.5, "ms", "-1.50 ms"},     {478, "GB/s", "478 GB/s"},
	         {26.94, "GB/s", "26.9 GB/s"}, {45472, NULL, "45472"},
	         {0.0597, NULL, "0.0597"},     {1, "", "1"}};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		char b[64];
		an_fmt_value(b, sizeof b, t[i].v, t[i].unit);
		CHECK(!strcmp(b, t[i].want), "an_fmt_value(%g, %s) = '%s' (want '%s')", t[i].v,
		      t[i].unit ? t[i].unit : "NULL", b, t[i].want);
	}
	struct an_ev one = {.key = "missing_ranks", .is_str = 1, .str = "1"};
	struct an_ev many = {.key = "waiting_ranks", .is_str = 1, .str = "0,2,3"};
	struct an_ev other = {.key = "host_ranks", .is_str = 1, .str = "vm: 0,1"};
	struct an_ev alone = {.key = "severity_alone", .is_str = 1, .str = "critical"};
	char b[300];
	CHECK(!strcmp(an_ev_value(&one, b, sizeof b), "rank 1"), "a rank list of one: 'rank 1'");
	CHECK(!strcmp(an_ev_value(&many, b, sizeof b), "ranks 0,2,3"),
	      "a rank list: 'ranks 0,2,3'");
	CHECK(!strcmp(an_ev_value(&other, b, sizeof b), "vm: 0,1"), "not a bare list: as it is");
	CHECK(!an_ev_card(&alone, b, sizeof b) && an_ev_card(&one, b, sizeof b) &&
	          !strcmp(b, "missing_ranks: rank 1"),
	      "cards: severity_alone left out, a rank list named");
	CHECK(
	    an_nvlink_link_Bps(4) == 25e9 && an_nvlink_link_Bps(4) * 18 == 450e9 &&
	        an_nvlink_link_Bps(99) == 0,
	    "NVLink 4 peak: NVIDIA's 25 GB/s per link each way (18 links: 450), unknown version 0");
}

int main(void)
{
	test_format();
	snprintf(dir, sizeof dir, "/tmp/nvlp-an-unit.XXXXXX");
	if (!mkdtemp(dir)) {
		printf("FAIL: mkdtemp\n");
		return 1;
	}
	test_helpers();
	test_matching();
	test_order_and_stream0();
	test_straggler_and_errors();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("warning: could not remove %s\n", dir);
	return CHECK_DONE();
}

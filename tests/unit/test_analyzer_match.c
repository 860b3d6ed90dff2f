/* test_analyzer_match.c: match.c on its own: NCCL kernels given to the calls that launched them
 * when CUPTI delivers kernels late, early or out of order, groups split by bytes, lost kernels. */
#include <stdlib.h> /* free */
#include <string.h> /* memset */

#include "check.h"
#include "model/model.h"
#include "nvlp_format.h"
#include "model/stages.h"

static struct an_rank R;
static size_t capcalls;
static struct an_match *M;

static void reset(void)
{
	if (M)
		an_match_close(M);
	free(R.calls);
	memset(&R, 0, sizeof R);
	capcalls = 0;
	M = an_match_open(&R);
}

/* A call of fn with bytes at t (us) on CUPTI stream 13 of device 0, thread 1. @return its index */
static uint32_t call(unsigned fn, uint64_t bytes, uint64_t t_us, uint64_t depth)
{
	struct an_call *c = PUSH(R.calls, R.ncalls, capcalls);
	if (!c)
		abort();
	memset(c, 0, sizeof *c);
	c->fn = (uint8_t)fn;
	c->bytes = bytes;
	c->t_enter = t_us * 1000;
	uint32_t idx = (uint32_t)(R.ncalls - 1);
	an_match_call(M, idx, 1, depth, 13);
	return idx;
}

/* A kernel of collective kc on stream 13 of device 0, [s, s + d) us. */
static void kernel(int kc, uint64_t s_us, uint64_t d_us)
{
	an_match_kernel(M, 0, 13, s_us * 1000, (s_us + d_us) * 1000, kc);
}

static uint64_t start_us(uint32_t i)
{
	return R.calls[i].gpu_start / 1000;
}

int main(void)
{
	/* calls first, kernels in order */
	reset();
	uint32_t a = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 10, 0);
	uint32_t b = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 20, 0);
	kernel(AN_C_ALLREDUCE, 100, 50);
	kernel(AN_C_ALLREDUCE, 200, 50);
	CHECK(start_us(a) == 100 && start_us(b) == 200 && R.calls[a].gpu_dur == 50000,
	      "in order: each call its own kernel (%llu, %llu us)", (unsigned long long)start_us(a),
	      (unsigned long long)start_us(b));

	/* kernels first (CUPTI's buffer flushed before the API records were written) */
	reset();
	kernel(AN_C_ALLREDUCE, 100, 50);
	kernel(AN_C_BROADCAST, 200, 30);
	a = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 10, 0);
	b = call(NVLP_NCCL_BROADCAST, 1 << 20, 20, 0);
	CHECK(start_us(a) == 100 && start_us(b) == 200, "kernels before their calls: matched when the calls come");

	/* out of order within the stream: the AllReduce's kernel after the two Broadcasts that
	 * followed it (seen on H200) */
	reset();
	a = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 10, 0);
	b = call(NVLP_NCCL_BROADCAST, 1 << 20, 20, 0);
	uint32_t c = call(NVLP_NCCL_BROADCAST, 1 << 20, 30, 0);
	kernel(AN_C_BROADCAST, 200, 30);
	kernel(AN_C_BROADCAST, 300, 30);
	kernel(AN_C_ALLREDUCE, 100, 50);
	CHECK(start_us(a) == 100 && start_us(b) == 200 && start_us(c) == 300,
	      "late AllReduce kernel: each collective keeps its own (%llu %llu %llu)",
	      (unsigned long long)start_us(a), (unsigned long long)start_us(b),
	      (unsigned long long)start_us(c));

	/* a thread's records written late: its call is put back in launch order */
	reset();
	b = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 20, 0);
	a = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 10, 0); /* launched first, written second */
	kernel(AN_C_ALLREDUCE, 100, 50);
	kernel(AN_C_ALLREDUCE, 200, 50);
	CHECK(start_us(a) == 100 && start_us(b) == 200, "a call written late takes the earlier kernel");

	/* a group: one kernel for its calls, split by bytes, laid end to end */
	reset();
	an_match_group(M, 1, 1);
	a = call(NVLP_NCCL_SEND, 3 << 20, 10, 1);
	b = call(NVLP_NCCL_RECV, 1 << 20, 11, 1);
	kernel(AN_C_SENDRECV, 100, 40); /* before the group ends: it waits */
	CHECK(R.calls[a].gpu_start == 0, "a group's kernel waits for its ncclGroupEnd");
	an_match_group(M, 1, 0);
	CHECK(start_us(a) == 100 && R.calls[a].gpu_dur == 30000 && start_us(b) == 130 &&
	          R.calls[b].gpu_dur == 10000,
	      "group: one kernel split 3:1 by bytes (%u, %u ns)", R.calls[a].gpu_dur, R.calls[b].gpu_dur);

	/* a kernel that never finished: its call keeps no GPU time, the next call its own */
	reset();
	a = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 10, 0);
	b = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 20, 0);
	an_match_kernel(M, 0, 13, 0, 0, AN_C_ALLREDUCE);
	kernel(AN_C_ALLREDUCE, 200, 50);
	CHECK(R.calls[a].gpu_start == 0 && R.gpu_unfinished == 1 && start_us(b) == 200,
	      "unfinished kernel: its call has no GPU time, counted once");

	/* a call whose kernel is never seen: passed over by the others' kernels, it is given up
	 * and counted, and the calls after it keep theirs */
	reset();
	a = call(NVLP_NCCL_BROADCAST, 1 << 20, 1, 0);
	uint32_t first = 0;
	for (int i = 0; i < 300; i++) {
		uint32_t x = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 10 + (uint64_t)i, 0);
		if (!i)
			first = x;
	}
	for (int i = 0; i < 300; i++)
		kernel(AN_C_ALLREDUCE, 1000 + (uint64_t)i * 10, 5);
	an_match_close(M);
	M = NULL;
	CHECK(R.calls[a].gpu_start == 0 && start_us(first) == 1000 && start_us(first + 299) == 3990 &&
	          R.gpu_resync == 1 && R.gpu_unmatched_kernels == 0,
	      "a call without a kernel: given up after being passed over (resync %llu), the others "
	      "matched in order",
	      (unsigned long long)R.gpu_resync);

	/* kernels without calls at the end are counted, not given to anything */
	reset();
	kernel(AN_C_ALLREDUCE, 100, 50);
	kernel(AN_C_ALLREDUCE, 200, 50);
	a = call(NVLP_NCCL_ALL_REDUCE, 1 << 20, 10, 0);
	an_match_close(M);
	M = NULL;
	CHECK(start_us(a) == 100 && R.gpu_unmatched_kernels == 1, "a kernel left without a call: counted (%llu)",
	      (unsigned long long)R.gpu_unmatched_kernels);
	free(R.calls);
	return CHECK_DONE();
}

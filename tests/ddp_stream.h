/* ddp_stream.h: the synthetic DDP-like NCCL record stream shared by the trace size test and benchmark. */
#ifndef NVLP_DDP_STREAM_H
#define NVLP_DDP_STREAM_H
#include <stdint.h> /* uint64_t */
#include <time.h>   /* clock_gettime */

#include "nvlp_format.h"

static uint64_t ddp_rng = 0x2545f4914f6cdd1dull;
static inline uint64_t ddp_rand(void)
{
	ddp_rng ^= ddp_rng << 13;
	ddp_rng ^= ddp_rng >> 7;
	ddp_rng ^= ddp_rng << 17;
	return ddp_rng;
}

/* CPU time: figures per core, even on a busy machine. */
static inline double ddp_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One comm, four gradient buckets per step, seq+1, ~1 ms apart with +-100 us of ns-resolution
 * jitter, 20-80 us call durations. */
static inline struct nvlp_rec_nccl ddp_first(void)
{
	struct nvlp_rec_nccl r = {.fn = NVLP_NCCL_ALL_REDUCE, .tid = 12345, .stream = 0x7f00deadbe00,
				  .cupti_stream = 13, .dtype = 9, .peer = (uint64_t)-1,
				  .comm = 0x55d0c0ffee00, .nranks = 2, .t_enter = 1000000000000ull};
	return r;
}
static inline void ddp_next(struct nvlp_rec_nccl *r, unsigned long i)
{
	static const uint64_t buckets[4] = {6553600, 6553600, 6553600, 1048576};
	r->t_enter += 1000000 + ddp_rand() % 200000 - 100000;
	r->dur = 20000 + ddp_rand() % 60000;
	r->count = buckets[i % 4];
	r->bytes = r->count * 2;
	r->seq++;
	r->call_id += 1 + ddp_rand() % 4;
}
#endif

/* bench_trace.c: trace format speed and size on 2M DDP-like NCCL records: bytes/record, encode ns, decode rate. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "nvlp_trace.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: figures per core, even on a busy machine */
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	char path[] = "/tmp/nvlp-bench.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	nvlp_writer *w = nvlp_writer_open_fd(fd, "pid=1\nrank=0\n", 0, 0);
	if (!w) {
		perror("nvlp_writer_open_fd");
		return 1;
	}
	/* Same stream as tests/unit/test_trace_perf.c: one comm, four buckets per step, seq+1,
	 * ~1 ms apart with +-100 us of ns-resolution jitter, 20-80 us call durations. */
	static const uint64_t buckets[4] = {6553600, 6553600, 6553600, 1048576};
	struct nvlp_rec_nccl r = {.fn = NVLP_NCCL_ALL_REDUCE, .tid = 12345, .stream = 0x7f00deadbe00,
				  .cupti_stream = 13, .dtype = 9, .peer = (uint64_t)-1,
				  .comm = 0x55d0c0ffee00, .nranks = 2, .t_enter = 1000000000000ull};
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		r.t_enter += 1000000 + next_rand() % 200000 - 100000;
		r.dur = 20000 + next_rand() % 60000;
		r.count = buckets[i % 4];
		r.bytes = r.count * 2;
		r.seq++;
		r.call_id += 1 + next_rand() % 4;
		if (nvlp_writer_add(w, NVLP_K_NCCL, &r, NULL, 0) != 0) {
			perror("nvlp_writer_add");
			return 1;
		}
	}
	nvlp_writer_flush(w);
	double t1 = now_s();
	uint64_t recs = 0, raw = 0, file = 0;
	nvlp_writer_stats(w, &recs, &raw, &file);
	nvlp_writer_close(w);
	printf("bench_trace: %ld NCCL records: %.2f compressed bytes/record (%.1f raw), encode %.1f ns/record\n",
	       n, (double)file / (double)recs, (double)raw / (double)recs, (t1 - t0) * 1e9 / (double)n);

	char err[512];
	double best = 1e30;
	for (int rep = 0; rep < 3; rep++) {
		nvlp_reader *rd = nvlp_reader_open(path, err, sizeof(err));
		if (!rd) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		struct nvlp_record rec;
		uint64_t got = 0, sum = 0;
		double s0 = now_s();
		while (nvlp_reader_next(rd, &rec) == 1) {
			got++;
			sum += rec.f[0];
		}
		double s1 = now_s();
		nvlp_reader_close(rd);
		if (got != recs) {
			fprintf(stderr, "bench_trace: decoded %llu of %llu records\n",
				(unsigned long long)got, (unsigned long long)recs);
			return 1;
		}
		if (s1 - s0 < best)
			best = s1 - s0;
		(void)sum;
	}
	printf("bench_trace: decode %.1f M records/s (%.1f ns/record, best of 3, one core)\n",
	       (double)recs / best / 1e6, best * 1e9 / (double)recs);
	unlink(path);
	return 0;
}

/* bench_trace.c: trace format speed and size on 2M DDP-like NCCL records: bytes/record, encode ns, decode rate. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "ddp_stream.h"
#include "nvlp_trace.h"

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
	/* the stream of tests/ddp_stream.h, as in tests/unit/test_trace_perf.c */
	struct nvlp_rec_nccl r = ddp_first();
	double t0 = ddp_cpu_s();
	for (long i = 0; i < n; i++) {
		ddp_next(&r, (unsigned long)i);
		if (nvlp_writer_add(w, NVLP_K_NCCL, &r, NULL, 0) != 0) {
			perror("nvlp_writer_add");
			return 1;
		}
	}
	nvlp_writer_flush(w);
	double t1 = ddp_cpu_s();
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
		double s0 = ddp_cpu_s();
		while (nvlp_reader_next(rd, &rec) == 1) {
			got++;
			sum += rec.f[0];
		}
		double s1 = ddp_cpu_s();
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

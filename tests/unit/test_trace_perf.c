/* test_trace_perf.c: compressed size of a DDP-like NCCL stream (asserted) and encode/decode speed (printed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ddp_stream.h"
#include "nvlp_trace.h"

int main(void)
{
	char path[] = "/tmp/nvlp-test-perf.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	enum { N = 100000 };
	nvlp_writer *w = nvlp_writer_open_fd(fd, "pid=1\nrank=0\n", 0, 0);
	CHECK(w != NULL, "writer opens");
	if (!w)
		return 1;
	struct nvlp_rec_nccl r = ddp_first(); /* tests/ddp_stream.h, also used by bench_trace */
	double t0 = ddp_cpu_s();
	for (unsigned i = 0; i < N; i++) {
		ddp_next(&r, i);
		nvlp_writer_add(w, NVLP_K_NCCL, &r, NULL, 0);
	}
	struct nvlp_rec_end e = {.records = N + 2};
	nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
	uint64_t file = 0;
	nvlp_writer_flush(w);
	double t1 = ddp_cpu_s();
	nvlp_writer_stats(w, NULL, NULL, &file);
	nvlp_writer_close(w);
	double per = (double)(file - NVLP_PREAMBLE_SIZE) / N;
	printf("encode: %.1f ns/record, %.2f compressed bytes/record\n", (t1 - t0) * 1e9 / N, per);
	CHECK(per <= 8.0, "DDP-like NCCL stream: %.2f bytes/record <= 8", per);

	char err[512];
	double best = 0;
	unsigned long long got = 0, seq_ok = 1;
	for (int rep = 0; rep < 5; rep++) {
		nvlp_reader *rd = nvlp_reader_open(path, err, sizeof(err));
		if (!rd) {
			CHECK(0, "reader opens: %s", err);
			break;
		}
		struct nvlp_record rec;
		got = 0;
		uint64_t expect_seq = 1;
		double s0 = ddp_cpu_s();
		while (nvlp_reader_next(rd, &rec) == 1) {
			got++;
			if (rec.kind == NVLP_K_NCCL)
				seq_ok &= rec.f[17] == expect_seq++;
		}
		double s1 = ddp_cpu_s();
		if (got / (s1 - s0) > best)
			best = got / (s1 - s0);
		nvlp_reader_close(rd);
	}
	CHECK(got == N + 2 && seq_ok, "decoded all %llu records in order", got);
	printf("decode: %.1f M records/s (best of 5, not asserted)\n", best / 1e6);
	if (!getenv("KEEP")) unlink(path); else printf("kept %s\n", path);
	return CHECK_DONE();
}

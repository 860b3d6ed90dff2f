/* mktrace.c: writes a synthetic trace holding every record kind, for the CLI tests (no GPU needed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvlp_trace.h"

static void usage(void)
{
	fprintf(stderr, "usage: mktrace -o FILE [-n NCCL_CALLS] [-r RANK] [-p PID] [--no-end] [--cut BYTES]\n"
			"               [--evil NAME [--count N]]\n"
			"  --cut BYTES: drop the last BYTES bytes of the file (a job killed mid-write)\n"
			"  --evil NAME: add hostile but well-formed records (what a fuzzer found), before END:\n"
			"    seqwrap  one communicator holding seq 0 and 0xffffffff on two devices\n"
			"    bigseq   N collectives whose seq numbers are spread over 32 bits\n"
			"    times    times near 2^64 and a realtime anchor that overflows the clock offset\n"
			"    comms    N communicators (default 70000), one collective each\n"
			"    flood    N identical NCCL records (default 15000000): a small file, many records\n"
			"    baddev   records naming devices 70000 and -5, between good ones\n"
			"    group    one ncclGroup of N calls on N streams\n"
			"    allocs   N managed allocations at decreasing addresses\n"
			"    stacks   N stacks, and one whose blob is not whole addresses\n");
}

/* Hostile but well-formed records (see usage). */
static void evil(nvlp_writer *w, const char *name, long count, uint64_t t)
{
	struct nvlp_rec_nccl c = {.fn = NVLP_NCCL_ALL_REDUCE, .tid = 778, .stream = 0x5600,
				  .cupti_stream = 21, .count = 256, .dtype = 7, .bytes = 1024,
				  .peer = (uint64_t)-1, .comm = 0xbad0c0ffee, .nranks = 2,
				  .t_enter = t, .dur = 5000};
	if (!strcmp(name, "seqwrap") || !strcmp(name, "bigseq")) {
		long n = !strcmp(name, "seqwrap") ? 2 : (count ? count : 1000);
		for (long i = 0; i < n; i++)
			for (int d = 0; d < 2; d++) {
				c.device = (uint64_t)d;
				c.rank = (uint64_t)d;
				c.seq = n == 2 ? (i ? 0xffffffffull : 0) : (uint64_t)i * 0x10000001ull % (1ull << 32);
				c.t_enter = t + (uint64_t)i * 1000;
				nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
			}
	} else if (!strcmp(name, "times")) {
		for (int i = 0; i < 4; i++)
			for (int d = 0; d < 2; d++) {
				c.device = c.rank = (uint64_t)d;
				c.seq = (uint64_t)i;
				c.t_enter = d ? UINT64_MAX - (uint64_t)i : (uint64_t)i;
				c.dur = UINT64_MAX;
				nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
				struct nvlp_rec_kernel k = {.start = (1ull << 62) - 1, .dur = 86400000000000ull,
							    .device = (uint64_t)d, .stream = 21, .name = 1};
				nvlp_writer_add(w, NVLP_K_KERNEL, &k, NULL, 0);
			}
	} else if (!strcmp(name, "comms")) {
		long n = count ? count : 70000;
		for (long i = 0; i < n; i++)
			for (int d = 0; d < 2; d++) {
				c.comm = 0x100000000ull + (uint64_t)i;
				c.device = c.rank = (uint64_t)d;
				c.seq = 1;
				nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
			}
	} else if (!strcmp(name, "flood")) {
		long n = count ? count : 15000000;
		c.seq = 7;
		for (long i = 0; i < n; i++) {
			nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
			if (i % 1000000 == 999999)
				nvlp_writer_flush(w);
		}
	} else if (!strcmp(name, "baddev")) {
		for (int i = 0; i < 3; i++) {
			c.seq = 100 + (uint64_t)i;
			c.device = i == 1 ? 70000 : 0;
			nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
		}
		struct nvlp_rec_kernel k = {.start = t, .dur = 1000, .device = (uint64_t)-5, .stream = 21,
					    .name = 1};
		nvlp_writer_add(w, NVLP_K_KERNEL, &k, NULL, 0);
	} else if (!strcmp(name, "group")) {
		long n = count ? count : 100000;
		struct nvlp_rec_nccl g = c;
		g.fn = NVLP_NCCL_GROUP_START;
		nvlp_writer_add(w, NVLP_K_NCCL, &g, NULL, 0);
		c.fn = NVLP_NCCL_SEND;
		for (long i = 0; i < n; i++) {
			c.cupti_stream = 1000 + (uint64_t)i;
			c.group_depth = 1;
			nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
		}
		g.fn = NVLP_NCCL_GROUP_END;
		nvlp_writer_add(w, NVLP_K_NCCL, &g, NULL, 0);
	} else if (!strcmp(name, "allocs")) {
		long n = count ? count : 100000;
		struct nvlp_rec_managed mg = {.fn = NVLP_CUDA_MALLOC_MANAGED, .t_enter = t, .dur = 100,
					      .tid = 777, .bytes = 4096, .flags = 1,
					      .target = (uint64_t)-1};
		for (long i = 0; i < n; i++) {
			mg.ptr = 0x7f0000000000ull - (uint64_t)i * 8192;
			nvlp_writer_add(w, NVLP_K_MANAGED, &mg, NULL, 0);
		}
	} else if (!strcmp(name, "stacks")) {
		long n = count ? count : 100000;
		uint64_t pcs[2] = {0x400100, 0x400200};
		for (long i = 0; i < n; i++) {
			struct nvlp_rec_stack st = {.id = 1000 + (uint64_t)i};
			nvlp_writer_add(w, NVLP_K_STACK, &st, pcs, sizeof pcs);
		}
		struct nvlp_rec_stack st = {.id = 5};
		nvlp_writer_add(w, NVLP_K_STACK, &st, pcs, 7);
	}
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	long n = 10, rank = 0, pid = 4242, cut = 0, count = 0;
	int end = 1;
	const char *evil_name = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atol(argv[++i]);
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			rank = atol(argv[++i]);
		else if (!strcmp(argv[i], "-p") && i + 1 < argc)
			pid = atol(argv[++i]);
		else if (!strcmp(argv[i], "--cut") && i + 1 < argc)
			cut = atol(argv[++i]);
		else if (!strcmp(argv[i], "--no-end"))
			end = 0;
		else if (!strcmp(argv[i], "--evil") && i + 1 < argc)
			evil_name = argv[++i];
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			count = atol(argv[++i]);
		else {
			usage();
			return 2;
		}
	}
	if (!out) {
		usage();
		return 2;
	}
	char hdr[1024];
	snprintf(hdr, sizeof(hdr),
		 "format=%u\nversion=0.1.0\nhost=node-a\npid=%ld\nppid=1\nrank=%ld\nlocal_rank=%ld\n"
		 "world_size=2\ncmdline=python3 train.py --name \"x\\y\" caf\xc3\xa9 \xff\n"
		 "t_real=%s\nt_mono=1000000000\nenv.NCCL_P2P_DISABLE=1\n"
		 "env.NCCL_DEBUG=WARN\n",
		 NVLP_FORMAT_VERSION, pid, rank, rank,
		 evil_name && !strcmp(evil_name, "times") ? "18446744073709551615" : "1764439857000000000");
	const uint64_t t0 = 1000000000ull;
	nvlp_writer *w = nvlp_writer_open(out, hdr, t0, 1764439857000000000ull);
	if (!w) {
		perror(out);
		return 1;
	}
	const char *kname = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(\"quoted\"\\)\t\x01";
	struct nvlp_rec_string s = {.id = 1};
	nvlp_writer_add(w, NVLP_K_STRING, &s, kname, strlen(kname));
	s.id = 2;
	nvlp_writer_add(w, NVLP_K_STRING, &s, "Ring", 4);
	s.id = 3;
	nvlp_writer_add(w, NVLP_K_STRING, &s, "LL", 2);

	struct nvlp_rec_device dev = {.device = 0, .pci_bus = 0x19, .sm_count = 132, .cc_major = 9,
				      .global_mem = 150ull << 30, .uuid_hi = 0x1234};
	nvlp_writer_add(w, NVLP_K_DEVICE, &dev, "NVIDIA H200", 11);
	struct nvlp_rec_nvlink nl = {.version = 4, .type0 = 1, .type1 = 1, .dev0 = 0, .dev1 = 1,
				     .bandwidth = 26562, .links = 18, .ports0 = 0x3ffff};
	nvlp_writer_add(w, NVLP_K_NVLINK, &nl, NULL, 0);
	struct nvlp_rec_clock ck = {.source = 1, .mono = t0, .other = 5000};
	nvlp_writer_add(w, NVLP_K_CLOCK, &ck, NULL, 0);
	struct nvlp_rec_note note = {.code = NVLP_NOTE_ACTIVITY_ON, .t = t0 + 10, .device = -1};
	const char *msg = "CUPTI activity on: \"kernel\", memcpy\nsecond line";
	nvlp_writer_add(w, NVLP_K_NOTE, &note, msg, strlen(msg));
	uint64_t frames[3] = {0x400123, 0x7f0000001000, 0x7f0000002000};
	struct nvlp_rec_stack st = {.id = 1};
	nvlp_writer_add(w, NVLP_K_STACK, &st, frames, sizeof(frames));
	struct nvlp_rec_module mod = {.base = 0x7f0000000000, .start = 0x7f0000000000, .end = 0x7f0000100000};
	nvlp_writer_add(w, NVLP_K_MODULE, &mod, "/usr/lib/libtorch_cuda.so", 25);

	struct nvlp_rec_nccl c = {.fn = NVLP_NCCL_ALL_REDUCE, .tid = 777, .device = (uint64_t)rank,
				  .stream = 0x5500, .count = 1 << 20, .dtype = 9, .bytes = 2 << 20,
				  .op = 0, .peer = (uint64_t)-1, .comm = 0xc0ffee00, .rank = (uint64_t)rank,
				  .nranks = 2};
	uint64_t t = t0 + 1000;
	for (long i = 0; i < n; i++) {
		c.t_enter = t;
		c.dur = 20000 + (uint64_t)i * 13;
		c.seq = (uint64_t)i + 1;
		c.call_id = (uint64_t)i + 1;
		nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
		struct nvlp_rec_kernel k = {.start = t + 5000, .dur = 300000, .device = (uint64_t)rank,
					    .stream = 13, .correlation = (uint64_t)i, .name = 1,
					    .grid_x = 32, .grid_y = 1, .grid_z = 1, .block_x = 512,
					    .block_y = 1, .block_z = 1, .nccl_call = (uint64_t)i + 1};
		nvlp_writer_add(w, NVLP_K_KERNEL, &k, NULL, 0);
		struct nvlp_rec_ncclprof np = {.comm = c.comm, .seq = c.seq, .fn = c.fn, .algo = 2,
					       .proto = 3, .channels = 16, .start = t + 5000, .dur = 290000};
		nvlp_writer_add(w, NVLP_K_NCCLPROF, &np, NULL, 0);
		t += 1000000;
		if (i % 4 == 3)
			nvlp_writer_flush(w); /* several frames, so --cut leaves some whole */
	}
	struct nvlp_rec_nccl send = c;
	send.fn = NVLP_NCCL_SEND;
	send.peer = 1;
	send.t_enter = t;
	send.seq = (uint64_t)n + 1;
	nvlp_writer_add(w, NVLP_K_NCCL, &send, NULL, 0);
	struct nvlp_rec_copy cp = {.fn = NVLP_CUDA_MEMCPY_ASYNC, .t_enter = t + 10, .dur = 500,
				   .tid = 777, .device = 0, .src_device = 0, .dst_device = 1,
				   .bytes = 256 << 20, .copy_kind = 3, .stream = 0x5500,
				   .peer_enabled = 1, .stack = 1, .dst = 0x7f1000000000,
				   .src = 0x7f2000000000, .call_id = 1000};
	nvlp_writer_add(w, NVLP_K_COPY, &cp, NULL, 0);
	struct nvlp_rec_gpucopy gc = {.start = t + 100, .dur = 650000, .copy_kind = 10, .device = 0,
				      .src_device = 0, .dst_device = 1, .bytes = 256 << 20,
				      .correlation = 5, .call_id = 1000};
	nvlp_writer_add(w, NVLP_K_GPUCOPY, &gc, NULL, 0);
	struct nvlp_rec_managed mg = {.fn = NVLP_CUDA_MALLOC_MANAGED, .t_enter = t + 20, .dur = 100,
				      .tid = 777, .ptr = 0x7f3000000000, .bytes = 64 << 20,
				      .flags = 1, .target = (uint64_t)-1, .stack = 1};
	nvlp_writer_add(w, NVLP_K_MANAGED, &mg, NULL, 0);
	struct nvlp_rec_um um = {.counter = 4, .start = t + 30, .dur = 10, .address = 0x7f3000000000,
				 .value = 12, .src = 0, .dst = 1};
	nvlp_writer_add(w, NVLP_K_UM, &um, NULL, 0);
	struct nvlp_rec_peer pe = {.fn = NVLP_CUDA_ENABLE_PEER_ACCESS, .t_enter = t0 + 500, .dur = 50,
				   .tid = 777, .device = 0, .peer_device = 1};
	nvlp_writer_add(w, NVLP_K_PEER, &pe, NULL, 0);
	struct nvlp_rec_linksample ls = {.device = 0, .source = 1, .start = t0, .dur = 1000000,
					 .nvl_tx = 5000000, .nvl_rx = 4000000, .nvl_tx_user = 4900000,
					 .nvl_rx_user = 3900000, .pcie_rd = 1000, .pcie_wr = 2000};
	nvlp_writer_add(w, NVLP_K_LINKSAMPLE, &ls, NULL, 0);
	struct nvlp_rec_drops dr = {.tid = 777, .dropped = 3, .t = t + 40};
	nvlp_writer_add(w, NVLP_K_DROPS, &dr, NULL, 0);
	dr.dropped = 5;
	nvlp_writer_add(w, NVLP_K_DROPS, &dr, NULL, 0);
	if (evil_name)
		evil(w, evil_name, count, t + 50);
	if (end) {
		uint64_t recs = 0;
		nvlp_writer_stats(w, &recs, NULL, NULL);
		struct nvlp_rec_end e = {.t = t + 100000, .records = recs + 1, .dropped = 5,
					 .reason = NVLP_END_EXIT};
		nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
	}
	if (nvlp_writer_close(w) != 0) {
		perror(out);
		return 1;
	}
	if (cut > 0) {
		FILE *f = fopen(out, "rb");
		long size = 0;
		if (f && fseek(f, 0, SEEK_END) == 0)
			size = ftell(f);
		if (f)
			fclose(f);
		if (truncate(out, size > cut ? size - cut : 0) != 0) {
			perror(out);
			return 1;
		}
	}
	return 0;
}

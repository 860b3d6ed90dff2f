/* bench_bytes.c: what each kind of record costs in real traces, what folding NCCL's kernel channels per collective (KCOLL) saves over one KCH record per channel, and what a collective's stamps cost. */
/*
 * For each trace named (default: the real two-rank traces in tests/analyzer/traces/fail2_*, NCCL
 * 2.28.3 on one H200, per-channel KCH records) the records are encoded again with the trace
 * writer: all of them, then without one kind at a time (what that kind costs: the bytes the file
 * loses without it, compression included), then with the KCH records of each collective folded
 * into one KCOLL record as the shim writes it (written where the collective's last channel was).
 * Figures per record, per collective and per channel, summed over the traces. Then, for the
 * traces named if they have KCOLL records (the shim's default since format 2.1), else for the
 * real ones kept in tests/analyzer/traces/bytes2_ddp, the five stamps of a collective are each
 * zeroed in turn (the bytes each costs), then written in microseconds instead of nanoseconds (the
 * host's three, then all five): what a coarser clock would save.
 */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* calloc */
#include <string.h> /* memset */
#include <unistd.h> /* unlink */

#include "nvlp_trace.h"
#include "kcoll_fold.h" /* kf_add, kf_record */

static const char *out_path(void)
{
	static char p[64];
	if (!p[0])
		snprintf(p, sizeof p, "/tmp/nvlp-bench-bytes.%d.nvlp", (int)getpid());
	return p;
}

/* A collective's stamps: NCCL's t_enter and dur, KCOLL's host, gpu_start and gpu_stop. */
enum { ST_ENTER, ST_DUR, ST_HOST, ST_GSTART, ST_GSTOP, ST_N };
static const char *const st_name[ST_N] = {"call entry", "call length", "host heard",
                                          "GPU start", "GPU stop"};

/* IN written again to OUT (its frames as they were) with stamp ZERO (< ST_N) zeroed, or every
 * host stamp (and the GPU's too with ALL) divided by 1000; the bytes written, 0 on an error.
 * nkcoll (may be NULL) gets the KCOLL records read added. */
static uint64_t stamps_copy(const char *in, const char *out, int zero, int us, int all,
                            uint64_t *nkcoll)
{
	char err[512];
	nvlp_reader *r;
	nvlp_writer *w;
	if (kf_open(in, out, &r, &w, err, sizeof err) < 0)
		return 0;
	struct nvlp_record rec;
	unsigned frame = 1, fr;
	uint64_t at;
	while (nvlp_reader_next(r, &rec) == 1) {
		nvlp_reader_position(r, &fr, &at);
		if (fr != frame)
			nvlp_writer_flush(w), frame = fr;
		if (rec.kind == NVLP_K_NCCL) {
			struct nvlp_rec_nccl n = *(const struct nvlp_rec_nccl *)rec.f;
			uint64_t *v[] = {&n.t_enter, &n.dur};
			for (int i = 0; i < 2; i++)
				*v[i] = zero == i ? 0 : us ? *v[i] / 1000 : *v[i];
			nvlp_writer_add(w, rec.kind, &n, rec.blob, rec.blob_len);
		} else if (rec.kind == NVLP_K_KCOLL) {
			if (nkcoll)
				++*nkcoll;
			struct nvlp_rec_kcoll k = *(const struct nvlp_rec_kcoll *)rec.f;
			uint64_t *v[] = {&k.host, &k.gpu_start, &k.gpu_stop};
			for (int i = 0; i < 3; i++)
				*v[i] = zero == ST_HOST + i ? 0
				        : us && (i == 0 || all) ? *v[i] / 1000
				                                : *v[i];
			nvlp_writer_add(w, rec.kind, &k, rec.blob, rec.blob_len);
		} else {
			nvlp_writer_add(w, rec.kind, rec.f, rec.blob, rec.blob_len);
		}
	}
	return kf_close(r, w);
}

/* What each stamp of the files' collectives costs, and what microseconds would save. */
static void stamps(const char *const *files, int nfiles)
{
	uint64_t all = 0, stamp[ST_N] = {0}, host_us = 0, all_us = 0, n = 0;
	for (int i = 0; i < nfiles; i++) {
		uint64_t b = stamps_copy(files[i], out_path(), ST_N, 0, 0, &n);
		if (!b) {
			printf("bench_bytes: %s: not read\n", files[i]);
			return;
		}
		all += b;
		for (int z = 0; z < ST_N; z++)
			stamp[z] += b - stamps_copy(files[i], out_path(), z, 0, 0, NULL);
		host_us += b - stamps_copy(files[i], out_path(), ST_N, 1, 0, NULL);
		all_us += b - stamps_copy(files[i], out_path(), ST_N, 1, 1, NULL);
	}
	unlink(out_path());
	if (!n)
		return;
	printf("bench_bytes: a collective's stamps (%d traces, %llu KCOLL records), the bytes each "
	       "costs:", nfiles, (unsigned long long)n);
	for (int z = 0; z < ST_N; z++)
		printf(" %s %.2f%s", st_name[z], (double)stamp[z] / (double)n, z + 1 < ST_N ? ";" : "\n");
	printf("bench_bytes: in microseconds instead of nanoseconds: the host's three %.2f bytes a "
	       "collective fewer (%.1f%% of the traces), all five %.2f (%.1f%%)\n",
	       (double)host_us / (double)n, 100.0 * (double)host_us / (double)all,
	       (double)all_us / (double)n, 100.0 * (double)all_us / (double)all);
}

int main(int argc, char **argv)
{
	static const char *const def[] = {
	    "tests/analyzer/traces/fail2_killtree/vm-13101.nvlp",
	    "tests/analyzer/traces/fail2_killtree/vm-13102.nvlp",
	    "tests/analyzer/traces/fail2_healthy/vm-2841.nvlp",
	    "tests/analyzer/traces/fail2_healthy/vm-2842.nvlp",
	    "tests/analyzer/traces/fail2_op/vm-13475.nvlp",
	    "tests/analyzer/traces/fail2_op/vm-13476.nvlp",
	};
	const char *const *files = argc > 1 ? (const char *const *)argv + 1 : def;
	int nfiles = argc > 1 ? argc - 1 : (int)(sizeof def / sizeof *def);
	uint64_t count[NVLP_K_COUNT] = {0}, cost[NVLP_K_COUNT] = {0}, all = 0, folded = 0;
	uint64_t colls = 0, chans = 0;
	struct kf_state st = {NULL, 0, 0};
	size_t *of = NULL, nof = 0;
	char err[512];
	for (int i = 0; i < nfiles; i++) {
		uint64_t c[NVLP_K_COUNT] = {0};
		uint64_t b = kf_copy(files[i], out_path(), 0, NULL, NULL, 0, c, err, sizeof err);
		if (!b) {
			printf("bench_bytes: %s\n", err);
			return 1;
		}
		all += b;
		/* every kind but the header, which a trace always has */
		for (unsigned k = NVLP_K_HEADER + 1; k < NVLP_K_COUNT; k++) {
			count[k] += c[k];
			if (c[k])
				cost[k] += b - kf_copy(files[i], out_path(), k, NULL, NULL, 0, NULL, err,
				                       sizeof err);
		}
		st.n = 0;
		if (kf_fold_file(files[i], &st, &of, &nof, err, sizeof err) != 0) {
			printf("bench_bytes: %s\n", err);
			return 1;
		}
		folded += kf_copy(files[i], out_path(), 0, &st, of, nof, NULL, err, sizeof err);
		colls += st.n;
		for (size_t k = 0; k < st.n; k++)
			chans += st.c[k].chans;
	}
	unlink(out_path());
	printf("bench_bytes: %d traces, %llu bytes written again (their frames as they were); each "
	       "kind's cost (the bytes the traces lose without it):\n",
	       nfiles, (unsigned long long)all);
	for (unsigned k = 1; k < NVLP_K_COUNT; k++)
		if (count[k])
			printf("  %-12s %8llu records %9llu bytes %7.2f bytes a record\n",
			       nvlp_kind_info(k)->name, (unsigned long long)count[k],
			       (unsigned long long)cost[k], (double)cost[k] / (double)count[k]);
	if (colls) {
		double per_ch = (double)cost[NVLP_K_KCH] / (double)chans;
		double saved = (double)(all - folded) / (double)colls;
		printf("bench_bytes: %llu collectives of %.2f channels: one KCH a channel %.2f bytes a "
		       "channel; one KCOLL a collective %.2f bytes a collective (the traces %.1f%% "
		       "smaller); at 24 channels a collective: %.0f bytes of KCH, %.1f of KCOLL\n",
		       (unsigned long long)colls, (double)chans / (double)colls, per_ch,
		       per_ch * (double)chans / (double)colls - saved,
		       100.0 * (double)(all - folded) / (double)all, per_ch * 24,
		       per_ch * (double)chans / (double)colls - saved);
	}
	/* the stamps: of the files named, else of the real traces kept with KCOLL records */
	static const char *const kdef[] = {"tests/analyzer/traces/bytes2_ddp/vm-789.nvlp",
	                                   "tests/analyzer/traces/bytes2_ddp/vm-790.nvlp"};
	if (argc <= 1)
		stamps(kdef, 2);
	else if (count[NVLP_K_KCOLL])
		stamps(files, nfiles);
	free(st.c);
	free(of);
	return 0;
}

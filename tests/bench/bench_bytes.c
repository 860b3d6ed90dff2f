/* bench_bytes.c: what each kind of record costs in real traces, and what folding NCCL's kernel channels per collective (KCOLL) saves over one KCH record per channel. */
/*
 * For each trace named (default: the real two-rank traces in tests/analyzer/traces/fail2_*, NCCL
 * 2.28.3 on one H200, per-channel KCH records) the records are encoded again with the trace
 * writer: all of them, then without one kind at a time (what that kind costs: the bytes the file
 * loses without it, compression included), then with the KCH records of each collective folded
 * into one KCOLL record as the shim writes it (written where the collective's last channel was).
 * Figures per record, per collective and per channel, summed over the traces.
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
	free(st.c);
	free(of);
	return 0;
}

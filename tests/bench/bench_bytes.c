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

#define MAX_COLLS (1u << 18)

/* One collective's channels (comm, fn, seq), folded */
struct coll {
	uint64_t comm, seq, fn, nccl_comm, gs, ge, host;
	uint64_t chans, zero, reversed, nostop, last; /* last: index of its last KCH record */
};

struct folded {
	struct coll *c;
	size_t n;
	uint32_t *of; /* per record: 1 + its collective, 0 for other kinds */
	size_t nrec, caprec;
};

static const char *out_path(void)
{
	static char p[64];
	if (!p[0])
		snprintf(p, sizeof p, "/tmp/nvlp-bench-bytes.%d.nvlp", (int)getpid());
	return p;
}

/* The collective of k among the last 64 (a collective's channels come together), or a new one */
static size_t coll_of(struct folded *f, const struct nvlp_rec_kch *k)
{
	for (size_t i = f->n; i-- > 0 && f->n - i <= 64;)
		if (f->c[i].comm == k->comm && f->c[i].seq == k->seq && f->c[i].fn == k->fn)
			return i;
	if (f->n == MAX_COLLS)
		return SIZE_MAX;
	f->c[f->n] = (struct coll){.comm = k->comm, .seq = k->seq, .fn = k->fn,
	                           .nccl_comm = k->nccl_comm};
	return f->n++;
}

/* As the shim folds a channel (preload/ncclprof.c: kcoll_add) */
static void fold(struct coll *c, const struct nvlp_rec_kch *k)
{
	c->chans++;
	if (k->flags & NVLP_KCH_NOSTOP)
		c->nostop++;
	else if ((k->flags & NVLP_KCH_ZERO) || !k->gpu_start || !k->gpu_stop)
		c->zero++;
	else if ((k->flags & NVLP_KCH_REVERSED) || k->gpu_stop < k->gpu_start ||
	         k->gpu_stop - k->gpu_start > NVLP_KCH_MAX_NS)
		c->reversed++;
	else {
		if (!c->gs || k->gpu_start < c->gs)
			c->gs = k->gpu_start;
		if (k->gpu_stop > c->ge)
			c->ge = k->gpu_stop;
		if (k->host > c->host)
			c->host = k->host;
	}
}

/* Encode path's records again: drop = a kind left out (0: none); f: KCH folded into KCOLL.
 * Returns the bytes written, counts records by kind into count (may be NULL). */
static uint64_t encode(const char *path, unsigned drop, const struct folded *f, uint64_t *count)
{
	char err[512];
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof err);
	if (!r) {
		printf("bench_bytes: %s\n", err);
		return 0;
	}
	nvlp_writer *w = nvlp_writer_open(out_path(), NULL, 0, 0);
	if (!w) {
		nvlp_reader_close(r);
		return 0;
	}
	struct nvlp_record rec;
	for (size_t i = 0; nvlp_reader_next(r, &rec) == 1; i++) {
		if (count && rec.kind < NVLP_K_COUNT)
			count[rec.kind]++;
		if (rec.kind == drop)
			continue;
		if (f && rec.kind == NVLP_K_KCH && i < f->nrec && f->of[i]) {
			const struct coll *c = &f->c[f->of[i] - 1];
			if (c->last != i)
				continue;
			struct nvlp_rec_kcoll k = {.comm = c->comm,
			                           .seq = c->seq,
			                           .fn = c->fn,
			                           .chans = c->chans,
			                           .gpu_start = c->gs,
			                           .gpu_stop = c->ge,
			                           .host = c->host,
			                           .zero = c->zero,
			                           .reversed = c->reversed,
			                           .nostop = c->nostop,
			                           .nccl_comm = c->nccl_comm};
			nvlp_writer_add(w, NVLP_K_KCOLL, &k, NULL, 0);
		} else {
			nvlp_writer_add(w, rec.kind, rec.f, rec.blob, rec.blob_len);
		}
		if (nvlp_writer_pending(w) >= (1u << 20)) /* the shim's frames: 1 MiB at most */
			nvlp_writer_flush(w);
	}
	nvlp_reader_close(r);
	nvlp_writer_flush(w);
	uint64_t recs, raw, bytes;
	nvlp_writer_stats(w, &recs, &raw, &bytes);
	nvlp_writer_close(w);
	return bytes;
}

/* The KCH records of path, folded per collective */
static int fold_file(const char *path, struct folded *f)
{
	char err[512];
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof err);
	if (!r)
		return -1;
	struct nvlp_record rec;
	for (size_t i = 0; nvlp_reader_next(r, &rec) == 1; i++) {
		if (i >= f->caprec) {
			size_t cap = f->caprec ? 2 * f->caprec : 4096;
			uint32_t *v = realloc(f->of, cap * sizeof *v);
			if (!v)
				break;
			f->of = v, f->caprec = cap;
		}
		f->of[i] = 0;
		f->nrec = i + 1;
		if (rec.kind != NVLP_K_KCH)
			continue;
		const struct nvlp_rec_kch *k = (const void *)rec.f;
		if (k->flags & NVLP_KCH_NOPARENT)
			continue; /* the shim writes these as KCH still */
		size_t c = coll_of(f, k);
		if (c == SIZE_MAX)
			continue;
		fold(&f->c[c], k);
		f->c[c].last = i;
		f->of[i] = (uint32_t)(c + 1);
	}
	nvlp_reader_close(r);
	return 0;
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
	struct folded f = {calloc(MAX_COLLS, sizeof(struct coll)), 0, NULL, 0, 0};
	if (!f.c)
		return 1;
	for (int i = 0; i < nfiles; i++) {
		uint64_t c[NVLP_K_COUNT] = {0};
		uint64_t b = encode(files[i], 0, NULL, c);
		if (!b)
			return 1;
		all += b;
		for (unsigned k = 1; k < NVLP_K_COUNT; k++) {
			count[k] += c[k];
			if (c[k])
				cost[k] += b - encode(files[i], k, NULL, NULL);
		}
		f.n = 0;
		if (fold_file(files[i], &f) != 0)
			return 1;
		folded += encode(files[i], 0, &f, NULL);
		colls += f.n;
		for (size_t k = 0; k < f.n; k++)
			chans += f.c[k].chans;
	}
	unlink(out_path());
	printf("bench_bytes: %d traces, %llu bytes as the shim wrote them again; each kind's cost "
	       "(the bytes the traces lose without it):\n",
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
	free(f.c);
	free(f.of);
	return 0;
}

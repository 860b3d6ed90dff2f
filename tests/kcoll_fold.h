/* kcoll_fold.h: per-channel KCH records folded into per-collective KCOLL records as the shim folds them (preload/ncclprof.c), for tests and benchmarks that turn real per-channel traces into what the shim writes now. */
#ifndef NVLP_KCOLL_FOLD_H
#define NVLP_KCOLL_FOLD_H

#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* realloc */

#include "load/kernelch.h" /* an_kch_stamps: the analyzer's reading of a channel's stamps */
#include "nvlp_trace.h"

/* One collective's channels (comm, fn, seq), folded */
struct kf_coll {
	uint64_t comm, seq, fn, nccl_comm, gs, ge, host;
	uint64_t chans, zero, reversed, nostop;
	uint64_t host_any; /* the latest report of any of its channels */
	size_t last; /* the caller's index of its last KCH record */
};
struct kf_state {
	struct kf_coll *c;
	size_t n, cap;
};
/* kf_add's answer for a channel without a parent collective: counted, 4096 to a record */
#define KF_ORPHAN ((size_t)-1)

/* Fold k (the caller's record number at) into its collective, found among the last 64 (a
 * collective's channels come together). @return 1 + the collective's index; KF_ORPHAN for a
 * channel without a parent (counted); 0: not folded (one without a parent that never stopped stays
 * a KCH record, as the shim writes it) */
static inline size_t kf_add(struct kf_state *s, const struct nvlp_rec_kch *k, size_t at)
{
	if (k->flags & NVLP_KCH_NOPARENT)
		return k->flags & NVLP_KCH_NOSTOP ? 0 : KF_ORPHAN;
	size_t i = s->n;
	while (i-- > 0 && s->n - i <= 64)
		if (s->c[i].comm == k->comm && s->c[i].seq == k->seq && s->c[i].fn == k->fn)
			break;
	if (i == (size_t)-1 || s->n - i > 64) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 1024;
			struct kf_coll *v = realloc(s->c, cap * sizeof *v);
			if (!v)
				return 0;
			s->c = v, s->cap = cap;
		}
		i = s->n++;
		s->c[i] = (struct kf_coll){.comm = k->comm, .seq = k->seq, .fn = k->fn,
		                           .nccl_comm = k->nccl_comm};
	}
	struct kf_coll *c = &s->c[i];
	c->chans++;
	c->last = at;
	if (k->host > c->host_any)
		c->host_any = k->host;
	enum an_kch_stamps st = an_kch_stamps(k->gpu_start, k->gpu_stop);
	if (k->flags & NVLP_KCH_NOSTOP)
		c->nostop++;
	else if ((k->flags & NVLP_KCH_ZERO) || st == AN_KCH_ZERO)
		c->zero++;
	else if ((k->flags & NVLP_KCH_REVERSED) || st == AN_KCH_REVERSED)
		c->reversed++;
	else {
		if (!c->gs || k->gpu_start < c->gs)
			c->gs = k->gpu_start;
		if (k->gpu_stop > c->ge)
			c->ge = k->gpu_stop;
		if (k->host > c->host)
			c->host = k->host;
	}
	return i + 1;
}

/* The KCOLL record of c (written where its last channel was) */
static inline struct nvlp_rec_kcoll kf_record(const struct kf_coll *c)
{
	return (struct nvlp_rec_kcoll){.comm = c->comm,
	                               .seq = c->seq,
	                               .fn = c->fn,
	                               .chans = c->chans,
	                               .gpu_start = c->gs,
	                               .gpu_stop = c->ge,
	                               .host = c->host ? c->host : c->host_any,
	                               .zero = c->zero,
	                               .reversed = c->reversed,
	                               .nostop = c->nostop,
	                               .nccl_comm = c->nccl_comm};
}

/* The KCH records of path folded into st; of[i] = 1 + the collective of record i (0 for other
 * kinds), *nof records. @return 0, or -1 (err says why) */
static inline int kf_fold_file(const char *path, struct kf_state *st, size_t **of, size_t *nof,
                               char *err, size_t errlen)
{
	nvlp_reader *r = nvlp_reader_open(path, err, errlen);
	if (!r)
		return -1;
	size_t cap = 0;
	*nof = 0;
	struct nvlp_record rec;
	for (size_t i = 0; nvlp_reader_next(r, &rec) == 1; i++) {
		if (i >= cap) {
			size_t *v = realloc(*of, (cap ? 2 * cap : 4096) * sizeof *v);
			if (!v) {
				nvlp_reader_close(r);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			*of = v, cap = cap ? 2 * cap : 4096;
		}
		(*of)[i] = rec.kind == NVLP_K_KCH ? kf_add(st, (const void *)rec.f, i) : 0;
		*nof = i + 1;
	}
	nvlp_reader_close(r);
	return 0;
}

/* IN opened past its header and OUT opened with the same header, for a copy record by record;
 * 0, or -1 with err set (nothing left open). */
static inline int kf_open(const char *in, const char *out, nvlp_reader **r, nvlp_writer **w,
                          char *err, size_t errlen)
{
	*r = nvlp_reader_open(in, err, errlen);
	if (!*r)
		return -1;
	struct nvlp_record rec;
	if (nvlp_reader_next(*r, &rec) != 1 || rec.kind != NVLP_K_HEADER) {
		nvlp_reader_close(*r);
		snprintf(err, errlen, "%s: no header record", in);
		return -1;
	}
	const struct nvlp_rec_header *h = (const void *)rec.f;
	*w = nvlp_writer_open(out, nvlp_reader_header_text(*r), h->t_mono, h->t_real);
	if (!*w) {
		nvlp_reader_close(*r);
		snprintf(err, errlen, "%s: cannot write", out);
		return -1;
	}
	return 0;
}

/* Closes both; the bytes the copy wrote, 0 on an error. */
static inline uint64_t kf_close(nvlp_reader *r, nvlp_writer *w)
{
	nvlp_reader_close(r);
	nvlp_writer_flush(w);
	uint64_t recs, raw, bytes;
	nvlp_writer_stats(w, &recs, &raw, &bytes);
	return nvlp_writer_close(w) < 0 ? 0 : bytes;
}

/* Copy the trace in to out as the shim would have written it: its header, its frames as they
 * were, without the records of kind drop (0: none), and with st given the KCH records of each
 * collective as one KCOLL where its last channel was (of, nof: kf_fold_file's). count (may be
 * NULL) gets the records of each kind read. @return the bytes written, 0 on error (err says) */
static inline uint64_t kf_copy(const char *in, const char *out, unsigned drop,
                               const struct kf_state *st, const size_t *of, size_t nof,
                               uint64_t *count, char *err, size_t errlen)
{
	nvlp_reader *r;
	nvlp_writer *w;
	if (kf_open(in, out, &r, &w, err, errlen) < 0)
		return 0;
	if (count)
		count[NVLP_K_HEADER]++;
	struct nvlp_record rec;
	unsigned frame = 1, fr;
	uint64_t at, orphans = 0, last_orphan = 0;
	for (size_t i = 0; i < nof; i++)
		last_orphan = of[i] == KF_ORPHAN ? i : last_orphan;
	for (size_t i = 1; nvlp_reader_next(r, &rec) == 1; i++) {
		nvlp_reader_position(r, &fr, &at);
		if (fr != frame) /* the original's frames: the same delta and compression windows */
			nvlp_writer_flush(w), frame = fr;
		if (count && rec.kind < NVLP_K_COUNT)
			count[rec.kind]++;
		if (rec.kind == drop)
			continue;
		if (st && rec.kind == NVLP_K_KCH && i < nof && of[i] == KF_ORPHAN) {
			if (++orphans < 4096 && i != last_orphan)
				continue;
			const struct nvlp_rec_kch *k = (const void *)rec.f;
			struct nvlp_rec_kcoll x = {.comm = k->comm,
			                           .chans = orphans,
			                           .host = k->host,
			                           .nccl_comm = k->nccl_comm,
			                           .noparent = orphans};
			nvlp_writer_add(w, NVLP_K_KCOLL, &x, NULL, 0);
			orphans = 0;
		} else if (st && rec.kind == NVLP_K_KCH && i < nof && of[i]) {
			const struct kf_coll *c = &st->c[of[i] - 1];
			if (c->last != i)
				continue;
			struct nvlp_rec_kcoll k = kf_record(c);
			nvlp_writer_add(w, NVLP_K_KCOLL, &k, NULL, 0);
		} else {
			nvlp_writer_add(w, rec.kind, rec.f, rec.blob, rec.blob_len);
		}
	}
	return kf_close(r, w);
}

#endif

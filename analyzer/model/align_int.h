/* align_int.h: internal to the align stage's files (align.c, ctab.c, clocks.c, waits.c, hangs.c):
 * each communicator's collective table and its row iterator (ctab.c; the iterator's steps are
 * inlined here, the walks over millions of rows call them), and what each file gives the others.
 * Calls go one way: align.c -> clocks.c, waits.c -> hangs.c, and all of them -> ctab.c. */
#ifndef NVLP_AN_ALIGN_INT_H
#define NVLP_AN_ALIGN_INT_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint32_t, uint64_t */
#include <stdlib.h> /* free */

#include "model/model.h"

/* ---- the collective table of one communicator ---- */
/* One call of the comm in a table of entries: its row is its seq, its column its (process,
 * device). */
struct centry {
	uint32_t seq, col, k; /* k: call index in its process */
};
/* A column: one (process, device) of the comm, and where its calls lie among the process's. */
struct ccol {
	const struct an_call *calls; /* the process's */
	const uint16_t *csig;        /* ... and their signatures (NULL: none kept) */
	const struct an_csig *csigs;
	int file, dev;
	size_t lo, hi;        /* its calls are among calls[lo, hi) */
	size_t n;             /* how many */
	uint32_t maxseq;      /* highest seq it entered */
	int sorted;           /* its seq numbers never go down in file order */
	int dense;            /* every call in [lo, hi) is its own */
	int64_t offset;       /* the process's clock offset, once refined */
	struct an_rank_x *rx; /* the process's cross-rank figures */
};
/* Rows are the sequence numbers present (memory and time in proportion to the calls, whatever
 * the numbers); columns are (process, device): a process driving several GPUs holds several
 * ranks of one comm. The usual table (each column's calls in seq order, a few columns) is
 * streamed: rows are merged from the columns' calls as they are walked, nothing is copied or
 * sorted (building and merging entries took a quarter of report's instructions on 2 ranks x 2M
 * calls, and 96 MB of fresh memory). Any other is a sorted array of entries, one per cell. */
struct ctab {
	uint32_t comm;
	int stream;
	struct centry *e; /* entry form: sorted by (seq, col) */
	size_t ne;        /* entries (streamed: the comm's calls in the table) */
	uint32_t nrow;    /* rows, in entry form */
	int ncol;
	size_t capcol;
	struct ccol *col;
	struct centry *own; /* e once merged into an array of its own (freed with the table) */
};

/*! Every comm's table (tabs[job->ncomms], zeroed), streamed or as entries, the entries in *all
 * (freed by the caller; NULL: none needed); aggregates the calls into job->agg_host on the way
 * while none has GPU time. @return 0, or -1 out of memory (job->agg_host freed) */
int an_ctab_build_all(struct an_job *job, struct ctab *tabs, struct centry **all);
/*! Free a table's own memory (not *all's entries). */
void an_ctab_free(struct ctab *t);

/* Row iterator: one seq at a time, and each column's call in it. */
#define CROW_NONE UINT32_MAX
#define CROW_END UINT64_MAX /* a streamed column's head once its calls are done */
struct crow {
	uint32_t seq, index; /* index: row number */
	int present;         /* columns that entered it */
	int started;
	uint32_t *k;    /* per column: its call in the row, CROW_NONE if it did not enter it */
	size_t *pos;    /* streamed: per column, its next call */
	uint64_t *head; /* streamed: per column, that call's seq (CROW_END: none left) */
	size_t at, end; /* entry form: the row's entries */
};
static inline void crow_free(struct crow *w)
{
	free(w->k);
	free(w->pos);
	free(w->head);
}
/*! Start the walk over t's rows (crow_next gives each in turn; crow_free ends it).
 * @return 0, or -1 out of memory */
int an_crow_init(const struct ctab *t, struct crow *w);
/* The column's next call after call k (hi if none). */
static inline size_t col_next(const struct ctab *t, const struct ccol *c, size_t k)
{
	if (c->dense)
		return k + 1;
	for (k++; k < c->hi; k++) {
		const struct an_call *x = &c->calls[k];
		if ((uint32_t)x->comm == t->comm && x->device == c->dev &&
		    an_coll_of_fn(x->fn) != AN_C_SENDRECV)
			break;
	}
	return k;
}
/* inlined in both walks: the call was ~15% of its cost per row (cachegrind, 2M rows) */
static inline __attribute__((always_inline)) int crow_next_stream(const struct ctab *t,
                                                                  struct crow *w)
{
	const int nc = t->ncol;
	uint64_t *head = w->head, s = CROW_END;
	for (int col = 0; col < nc; col++)
		s = head[col] < s ? head[col] : s;
	if (s == CROW_END)
		return 0;
	int present = 0;
	size_t *pos = w->pos;
	uint32_t *kk = w->k;
	for (int col = 0; col < nc; col++) {
		if (head[col] != s) {
			kk[col] = CROW_NONE;
			continue;
		}
		const struct ccol *c = &t->col[col];
		const struct an_call *calls = c->calls;
		size_t p = pos[col], k, hi = c->hi;
		uint64_t h;
		do { /* a seq entered twice on one column: its later call */
			k = p;
			p = col_next(t, c, p);
			h = p < hi ? calls[p].seq : CROW_END;
		} while (h == s);
		pos[col] = p;
		head[col] = h;
		kk[col] = (uint32_t)k;
		present++;
	}
	w->seq = (uint32_t)s;
	w->present = present;
	return 1;
}
static inline int crow_next_entries(const struct ctab *t, struct crow *w)
{
	for (size_t i = w->at; i < w->end; i++)
		w->k[t->e[i].col] = CROW_NONE;
	if (w->end >= t->ne)
		return 0;
	w->at = w->end;
	w->seq = t->e[w->at].seq;
	for (w->end = w->at; w->end < t->ne && t->e[w->end].seq == w->seq; w->end++)
		w->k[t->e[w->end].col] = t->e[w->end].k;
	w->present = (int)(w->end - w->at);
	return 1;
}
static inline __attribute__((always_inline)) int crow_next(const struct ctab *t, struct crow *w)
{
	if (!(t->stream ? crow_next_stream(t, w) : crow_next_entries(t, w)))
		return 0;
	if (w->started) /* not the first row */
		w->index++;
	w->started = 1;
	return 1;
}
/* The call of column col in a row it entered. */
static inline const struct an_call *crow_call(const struct ctab *t, const struct crow *w, int col)
{
	return &t->col[col].calls[w->k[col]];
}

/* ---- clocks.c ---- */
/*! Each process's offset from its realtime anchor (t_real0 - t_mono0; 0 without one). */
void an_clock_anchors(struct an_job *job);
/*! Hosts with different clocks: correct each host by the median difference of collective
 * completions (GPU kernel ends of the same (comm, seq) finish together on all ranks; so do the
 * exits of calls that block), pairs taken in one pass over each communicator's rows, the offsets
 * solved once (hosts.c). */
void an_clock_refine(struct an_job *job, struct ctab *tabs);

/* ---- waits.c ---- */
/*! Skew, waits, leads and transfer times over every comm's rows, the first hang and mismatch of
 * each (job->comms_unmatched counts the comms left out for want of memory). */
void an_cross_rank(struct an_job *job, struct ctab *tabs);

/* ---- hangs.c ---- */
/*! Some ranks entered a collective, some never did: only ranks whose trace stops before this seq
 * hung it. @return 1 if it is a hang (added to job->hangs) */
int an_row_hang(struct an_job *job, const struct ctab *t, const struct crow *w, uint32_t ci);
/*! The row's calls alike (function, count, dtype, op, root) wherever both sides are known: the
 * usual row, checked with a compare per column. */
int an_row_alike(const struct ctab *t, const struct crow *w);
/*! A row whose calls differ: to mismatch.c with its cells. @return 1 noted (the comm's first), -1 out
 * of memory (the comm's walk stops: its figures are missing, said in the report) */
int an_row_mismatch(struct an_job *job, const struct ctab *t, const struct crow *w, uint32_t ci);
#endif

/* ctab.c: each communicator's table of the collectives present (rows: the sequence numbers
 * actually seen, columns: (process, device); struct ctab in align_int.h), laid out in one pass over
 * every process's calls (which also sums the calls per (communicator, function) while no call has
 * GPU time), then streamed or filled with entries sorted into rows; the row iterator's start. */
#include <stdlib.h> /* malloc, qsort */
#include <string.h> /* memcpy */

#include "model/align_int.h"
#include "model/model.h"
#include "model/stages.h"
#include "util/containers.h" /* AN_CMP_KEY */

/* Streamed only while a row's merge over the columns stays short, and a column's walk over its
 * process's calls (passing those of other comms and devices) stays in proportion to its own. */
#define CTAB_STREAM_MAXCOL 32
#define CTAB_STREAM_SCAN 4

static int cmp_centry(const void *a, const void *b)
{
	const struct centry *x = a, *y = b;
	AN_CMP_KEY(x, y, seq);
	AN_CMP_KEY(x, y, col);
	return x->k < y->k ? -1 : x->k > y->k;
}

/* Entries are added file by file: each file's are a run, sorted itself when its calls came in seq
 * order. A few sorted runs are merged. @return 1 done, 0 not this case */
#define MERGE_MAXRUNS 16
static int merge_runs(struct ctab *t)
{
	size_t at[MERGE_MAXRUNS + 1], end[MERGE_MAXRUNS];
	int nr = 0;
	for (size_t i = 0; i < t->ne; i++) {
		if (!i || t->col[t->e[i].col].file != t->col[t->e[i - 1].col].file) {
			if (nr == MERGE_MAXRUNS)
				return 0;
			at[nr++] = i;
		} else if (cmp_centry(&t->e[i - 1], &t->e[i]) > 0)
			return 0;
	}
	if (nr == 1) /* sorted already */
		return 1;
	for (int r = 0; r < nr; r++)
		end[r] = r + 1 < nr ? at[r + 1] : t->ne;
	struct centry *tmp = malloc(t->ne * sizeof *tmp);
	if (!tmp)
		return 0;
	/* (seq, col) orders the entries: a column belongs to one file, so two runs never tie */
#define CKEY(x) ((uint64_t)(x)->seq << 32 | (x)->col)
	for (size_t o = 0; o < t->ne; o++) {
		int best = -1;
		uint64_t bk = UINT64_MAX;
		for (int r = 0; r < nr; r++)
			if (at[r] < end[r]) {
				const struct centry *x = &t->e[at[r]];
				uint64_t key = CKEY(x);
				if (best < 0 || key < bk) {
					best = r;
					bk = key;
				}
			}
		tmp[o] = t->e[at[best]++];
	}
#undef CKEY
	t->e = t->own = tmp; /* no copy back */
	return 1;
}

/* Entries in (seq, col, k) order. Each file's calls come in seq order, so the usual table (seq
 * numbers dense, a few columns) is sorted by counting its seq numbers, in time linear in the
 * calls; a sparse one (seq numbers far apart) by qsort. */
static void sort_entries(struct ctab *t)
{
	size_t n = t->ne;
	if (n < 2 || merge_runs(t))
		return;
	uint32_t lo = UINT32_MAX, hi = 0;
	for (size_t i = 0; i < n; i++) {
		if (t->e[i].seq < lo)
			lo = t->e[i].seq;
		if (t->e[i].seq > hi)
			hi = t->e[i].seq;
	}
	uint64_t span = (uint64_t)hi - lo + 1;
	uint32_t *cnt = span <= 4 * (uint64_t)n + 1024 ? calloc(span + 1, sizeof *cnt) : NULL;
	struct centry *tmp = cnt ? malloc(n * sizeof *tmp) : NULL;
	if (!tmp) {
		free(cnt);
		qsort(t->e, n, sizeof *t->e, cmp_centry);
		return;
	}
	for (size_t i = 0; i < n; i++)
		cnt[t->e[i].seq - lo + 1]++;
	for (uint64_t i = 1; i <= span; i++)
		cnt[i] += cnt[i - 1];
	for (size_t i = 0; i < n; i++) /* stable: file order within a seq */
		tmp[cnt[t->e[i].seq - lo]++] = t->e[i];
	/* within a row, (col, k) order: rows are short (one entry per rank) */
	for (size_t i = 1; i < n; i++) {
		struct centry x = tmp[i];
		size_t j = i;
		while (j > 0 && cmp_centry(&tmp[j - 1], &x) > 0) {
			tmp[j] = tmp[j - 1];
			j--;
		}
		tmp[j] = x;
	}
	memcpy(t->e, tmp, n * sizeof *tmp);
	free(tmp);
	free(cnt);
}

/* Sort an entry table into rows; one entry per cell (a seq entered twice on one column keeps its
 * later call). */
static void ctab_rows(struct ctab *t)
{
	sort_entries(t);
	size_t o = 0;
	for (size_t i = 0; i < t->ne; i++) {
		const struct centry x = t->e[i];
		if (o && t->e[o - 1].seq == x.seq && t->e[o - 1].col == x.col)
			o--;
		else if (!o || t->e[o - 1].seq != x.seq)
			t->nrow++;
		/* written only where a duplicate moved it: the usual table is read, not rewritten */
		if (o != i)
			t->e[o] = x;
		o++;
	}
	t->ne = o;
}

/* The column of (file f, device dev) in t, added if new; the file's columns start at first.
 * @return its index, or -1 out of memory */
static int ctab_col(struct ctab *t, int first, const struct an_rank *r, int f, int dev)
{
	int col;
	for (col = first; col < t->ncol && t->col[col].dev != dev; col++)
		;
	if (col < t->ncol)
		return col;
	size_t n = (size_t)t->ncol;
	struct ccol *c = PUSH(t->col, n, t->capcol);
	if (!c)
		return -1;
	*c = (struct ccol){
	    .calls = r->calls, .csig = r->csig, .csigs = r->csigs, .file = f, .dev = dev, .sorted = 1};
	return t->ncol++;
}

/* model.c's aggregate() while no call has GPU time (the layout pass reads the calls anyway); one
 * that has: aggregate() makes its own pass, for all. @return 0 go on, 1 stop aggregating */
static inline int agg_call(struct an_job *job, struct an_agg *ag, const struct an_call *c)
{
	if (c->gpu_start) {
		free(job->agg_host);
		job->agg_host = NULL;
		job->agg_gpu = 1;
		return 1;
	}
	struct an_agg *a = &ag[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
	a->calls++;
	a->bytes += c->bytes;
	a->host_ns += c->host_dur;
	return 0;
}

/* One file's calls into their columns; last_f, first: per comm scratch. @return 0, or -1 out of
 * memory */
static int layout_file(struct an_job *job, struct ctab *tabs, size_t f, int *last_f, int *first)
{
	struct an_rank *r = &job->ranks[f];
	int lcomm = -1, ldev = 0, lcol = 0; /* the last call's: the next is mostly on the same */
	for (size_t k = 0; k < r->ncalls; k++) {
		const struct an_call *c = &r->calls[k];
		if (job->agg_host && agg_call(job, job->agg_host, c))
			job->agg_host = NULL;
		if (an_coll_of_fn(c->fn) == AN_C_SENDRECV)
			continue;
		struct ctab *t = &tabs[c->comm];
		if (c->comm != lcomm || c->device != ldev) {
			if (last_f[c->comm] != (int)f) { /* this file's columns start here */
				last_f[c->comm] = (int)f;
				first[c->comm] = t->ncol;
			}
			lcol = ctab_col(t, first[c->comm], r, (int)f, c->device);
			if (lcol < 0)
				return -1;
			lcomm = c->comm;
			ldev = c->device;
		}
		struct ccol *x = &t->col[lcol];
		if (!x->n)
			x->lo = k;
		if (c->seq < x->maxseq)
			x->sorted = 0;
		else
			x->maxseq = c->seq;
		x->hi = k + 1;
		x->n++;
		t->ne++;
	}
	return 0;
}

/* Every communicator's columns, and where each column's calls lie, in one pass over the calls;
 * last_f, first: per comm scratch. @return 0, or -1 out of memory */
static int ctab_layout(struct an_job *job, struct ctab *tabs, int *last_f, int *first)
{
	size_t na = job->ncomms * NVLP_NCCL_FN_COUNT;
	free(job->agg_host);
	job->agg_host = calloc(na ? na : 1, sizeof *job->agg_host);
	job->agg_gpu = 0;
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		tabs[ci].comm = (uint32_t)ci;
		last_f[ci] = -1;
	}
	for (size_t f = 0; f < job->nranks; f++)
		if (layout_file(job, tabs, f, last_f, first) < 0)
			return -1;
	return 0;
}

/* Streamed, or entries: see struct ctab. */
static void ctab_choose(struct ctab *t)
{
	size_t scan = 0;
	int ok = t->ncol <= CTAB_STREAM_MAXCOL;
	for (int col = 0; ok && col < t->ncol; col++) {
		ok = t->col[col].sorted;
		scan += t->col[col].hi - t->col[col].lo;
	}
	t->stream = ok && scan <= CTAB_STREAM_SCAN * t->ne + 64;
	for (int col = 0; col < t->ncol; col++)
		t->col[col].dense = t->col[col].n == t->col[col].hi - t->col[col].lo;
}

/* The entries of the tables not streamed, in one pass over the calls; last_f, cur: per comm
 * scratch. @return the array they live in (freed by the caller; NULL: none needed), 0 or -1 out
 * of memory in *rc */
static struct centry *ctab_fill(struct an_job *job, struct ctab *tabs, int *last_f, int *cur,
                                int *rc)
{
	size_t total = 0;
	*rc = 0;
	for (size_t ci = 0; ci < job->ncomms; ci++)
		total += tabs[ci].stream ? 0 : tabs[ci].ne;
	if (!total)
		return NULL;
	struct centry *all = malloc(total * sizeof *all);
	if (!all) {
		*rc = -1;
		return NULL;
	}
	for (size_t ci = 0, at = 0; ci < job->ncomms; ci++) {
		if (tabs[ci].stream)
			continue;
		tabs[ci].e = all + at;
		at += tabs[ci].ne;
		tabs[ci].ne = 0;
		last_f[ci] = -1;
		cur[ci] = 0;
	}
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t k = 0; k < r->ncalls; k++) {
			const struct an_call *c = &r->calls[k];
			struct ctab *t = &tabs[c->comm];
			if (t->stream || an_coll_of_fn(c->fn) == AN_C_SENDRECV)
				continue;
			if (last_f[c->comm] != (int)f) { /* files' columns come in file order */
				last_f[c->comm] = (int)f;
				while (t->col[cur[c->comm]].file != (int)f)
					cur[c->comm]++;
			}
			int col = cur[c->comm];
			while (t->col[col].dev != c->device)
				col++;
			t->e[t->ne++] = (struct centry){c->seq, (uint32_t)col, (uint32_t)k};
		}
	}
	for (size_t ci = 0; ci < job->ncomms; ci++)
		if (!tabs[ci].stream)
			ctab_rows(&tabs[ci]);
	return all;
}

void an_ctab_free(struct ctab *t)
{
	free(t->own);
	free(t->col);
}

int an_crow_init(const struct ctab *t, struct crow *w)
{
	size_t n = (size_t)(t->ncol ? t->ncol : 1);
	memset(w, 0, sizeof *w);
	w->k = malloc(n * sizeof *w->k);
	if (t->stream) {
		w->pos = malloc(n * sizeof *w->pos);
		w->head = malloc(n * sizeof *w->head);
	}
	if (!w->k || (t->stream && (!w->pos || !w->head))) {
		crow_free(w);
		return -1;
	}
	for (int col = 0; col < t->ncol; col++) {
		w->k[col] = CROW_NONE;
		if (t->stream) {
			const struct ccol *c = &t->col[col];
			w->pos[col] = c->lo;
			w->head[col] = c->lo < c->hi ? c->calls[c->lo].seq : CROW_END;
		}
	}
	return 0;
}

int an_ctab_build_all(struct an_job *job, struct ctab *tabs, struct centry **all)
{
	size_t n = job->ncomms ? job->ncomms : 1;
	int *last_f = malloc(n * sizeof *last_f), *aux = malloc(n * sizeof *aux);
	int rc = last_f && aux ? ctab_layout(job, tabs, last_f, aux) : -1;
	for (size_t ci = 0; !rc && ci < job->ncomms; ci++)
		ctab_choose(&tabs[ci]);
	if (!rc)
		*all = ctab_fill(job, tabs, last_f, aux, &rc);
	free(last_f);
	free(aux);
	if (rc < 0) {
		free(job->agg_host);
		job->agg_host = NULL;
	}
	return rc;
}

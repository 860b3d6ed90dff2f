/* align.c: the job's communicators, clocks and cross-rank figures: a per-communicator table of the
 * collectives present (rows: the sequence numbers actually seen, columns: member ranks), clock
 * refinement between hosts, then skew, lead, transfer time and hangs, each computed per row. */
#include <stdlib.h> /* calloc, qsort */
#include <string.h> /* strcmp */

#include "model/model.h"
#include "model/stages.h"

/* ---- the job's communicators ---- */
/* A process's calls renumbered to the job's comms and counted; dropped: some of its comms are
 * beyond AN_MAX_COMMS, their calls go. */
static void renumber_calls(struct an_job *job, struct an_rank *r, int dropped)
{
	size_t o = 0;
	int valid = r->host_sum_n == r->ncalls;
	for (size_t k = 0; k < r->ncalls; k++) {
		struct an_call *c = &r->calls[k];
		uint32_t jc = r->comms[c->comm].job_comm;
		if (jc == AN_COMM_NONE) { /* beyond AN_MAX_COMMS in the job */
			job->calls_dropped++;
			if (valid) /* the sum stays that of the calls kept */
				r->host_sum -= c->host_dur;
			continue;
		}
		c->comm = jc;
		job->comms[jc].ncalls++;
		if (dropped) {
			r->calls[o] = *c;
			if (r->csig)
				r->csig[o] = r->csig[k];
		}
		o++;
	}
	r->ncalls = o;
	if (valid)
		r->host_sum_n = o;
}

/* The job's comm table from every process's comms; calls renumbered to it (those beyond
 * AN_MAX_COMMS dropped and counted) and counted per comm. @return 0, or -1 out of memory */
static int comm_table(struct an_job *job)
{
	size_t capc = 0;
	struct an_index ix = {0};
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (r->kind_count[NVLP_K_KERNEL])
			job->have_gpu = 1;
		if (r->kind_count[NVLP_K_KERNEL] || r->kind_count[NVLP_K_GPUCOPY] ||
		    r->kind_count[NVLP_K_UM])
			job->have_gpu_any = 1;
		if (r->kind_count[NVLP_K_LINKSAMPLE])
			job->have_links = 1;
		if (r->nlinks)
			job->have_topo = 1;
		int dropped = 0;
		for (size_t i = 0; i < r->ncomms; i++) {
			long j = an_index_get(&ix, r->comms[i].hash, 0);
			if (j < 0 && job->ncomms < AN_MAX_COMMS) {
				struct an_comm *c = PUSH(job->comms, job->ncomms, capc);
				if (!c || an_index_put(&ix, r->comms[i].hash, 0,
				                       (uint32_t)(job->ncomms - 1))) {
					an_index_free(&ix);
					return -1;
				}
				memset(c, 0, sizeof *c);
				c->hash = r->comms[i].hash;
				c->nranks = r->comms[i].nranks;
				c->single_host = 1;
				c->peak_Bps = -1;
				j = (long)(job->ncomms - 1);
			}
			if (j < 0)
				dropped = 1;
			r->comms[i].job_comm = j < 0 ? AN_COMM_NONE : (uint32_t)j;
		}
		/* a pass over every call is dear on a trace of millions: none when the process's
		 * comm numbers are the job's already (one comm, the first) */
		int same = !dropped;
		for (size_t i = 0; same && i < r->ncomms; i++)
			same = r->comms[i].job_comm == i;
		if (same && r->ncomms == 1) {
			job->comms[0].ncalls += r->ncalls;
			continue;
		}
		renumber_calls(job, r, dropped);
	}
	an_index_free(&ix);
	return 0;
}

/* Comm membership, host locality and NVLink peak, in one pass over the processes' comms.
 * @return 0, or -1 out of memory */
static int comm_members(struct an_job *job)
{
	const char **host0 = calloc(job->ncomms ? job->ncomms : 1, sizeof *host0);
	double *peak = malloc((AN_MAX_DEVICE + 2) * sizeof *peak);
	if (!host0 || !peak) {
		free(host0);
		free(peak);
		return -1;
	}
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		for (int d = 0; d < AN_MAX_DEVICE + 2; d++)
			peak[d] = -1;
		for (size_t i = 0; i < r->ncomms; i++) {
			if (r->comms[i].job_comm == AN_COMM_NONE)
				continue;
			struct an_comm *c = &job->comms[r->comms[i].job_comm];
			c->nmembers++;
			if (!host0[r->comms[i].job_comm])
				host0[r->comms[i].job_comm] = r->host;
			else if (strcmp(host0[r->comms[i].job_comm], r->host))
				c->single_host = 0;
			int d = r->comms[i].device; /* -1 .. AN_MAX_DEVICE (ingest checked) */
			if (peak[d + 1] < 0)
				peak[d + 1] = an_dev_peak(job, r, d);
			double pk = peak[d + 1];
			if (c->peak_Bps < 0 || pk < c->peak_Bps)
				c->peak_Bps = pk;
		}
	}
	free(host0);
	free(peak);
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		struct an_comm *c = &job->comms[ci];
		if (!c->single_host || c->peak_Bps < 0)
			c->peak_Bps = 0;
	}
	return 0;
}

/* Names the job gave its communicators: the first process naming one names it (its first
 * record for it), in one pass over the names. @return 0, or -1 out of memory */
static int comm_names(struct an_job *job)
{
	struct an_index ix = {0};
	size_t *by = NULL; /* per comm: the process that named it, + 1 */
	int rc = 0;
	for (size_t f = 0; f < job->nranks && !rc; f++)
		for (size_t i = 0; i < job->ranks[f].ncnames && !rc; i++) {
			if (!by) { /* only when some process names one */
				by = calloc(job->ncomms + 1, sizeof *by);
				for (size_t ci = 0; by && !rc && ci < job->ncomms; ci++)
					rc = an_index_put(&ix, job->comms[ci].hash, 0, (uint32_t)ci);
				if (!by || rc) {
					rc = -1;
					break;
				}
			}
			long ci = an_index_get(&ix, job->ranks[f].cnames[i].hash, 0);
			struct an_comm *c = ci >= 0 ? &job->comms[ci] : NULL;
			if (!c || c->name[0] || by[ci] == f + 1)
				continue;
			memcpy(c->name, job->ranks[f].cnames[i].name, sizeof c->name);
			by[ci] = f + 1;
		}
	an_index_free(&ix);
	free(by);
	return rc;
}

int an_align_comms(struct an_job *job)
{
	if (comm_table(job) < 0 || comm_members(job) < 0)
		return -1;
	if (comm_names(job) < 0)
		return -1;
	/* clocks: realtime anchors first */
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		r->offset = (r->t_real0 && r->t_mono0)
		                ? an_sub_i64((int64_t)r->t_real0, (int64_t)r->t_mono0)
		                : 0;
	}
	return 0;
}

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
/* Streamed only while a row's merge over the columns stays short, and a column's walk over its
 * process's calls (passing those of other comms and devices) stays in proportion to its own. */
#define CTAB_STREAM_MAXCOL 32
#define CTAB_STREAM_SCAN 4

static int cmp_centry(const void *a, const void *b)
{
	const struct centry *x = a, *y = b;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
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

static void ctab_free(struct ctab *t)
{
	free(t->own);
	free(t->col);
}

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
static void crow_free(struct crow *w)
{
	free(w->k);
	free(w->pos);
	free(w->head);
}
/* @return 0, or -1 out of memory */
static int crow_init(const struct ctab *t, struct crow *w)
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
static int crow_next_entries(const struct ctab *t, struct crow *w)
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

/* ---- clock refinement: one pass over each communicator's rows ---- */
/* A cell's completion on its host's clock plus the process's offset: the GPU kernel's end; without
 * GPU time, the call's exit where its host's calls of the row blocked until the collective was
 * done (see exits_blocked). @return 0 none, 1 GPU, 2 exit */
static inline int cell_done(const struct an_call *c, int64_t off, int exit_ok, int64_t *t)
{
	if (c->gpu_start) {
		*t = an_add_i64((int64_t)(c->gpu_start + c->gpu_dur), off);
		return 1;
	}
	if (!exit_ok)
		return 0;
	*t = an_add_i64((int64_t)(c->t_enter + c->host_dur), off);
	return 2;
}

/* Blocking calls leave together when the last rank arrives: on one host (one clock) a row's
 * calls without GPU time blocked when they entered at least 10 us apart and left within a
 * quarter of that. Calls that return at once (NCCL's own) leave as far apart as they came. */
#define EXIT_MIN_SPREAD_NS 10000
static void exits_blocked(const struct ctab *t, const struct crow *w, const int *hcol,
                          const int *hnext, int nh, uint8_t *blocked)
{
	for (int i = 0; i < nh; i++) {
		uint64_t e0 = UINT64_MAX, e1 = 0, x0 = UINT64_MAX, x1 = 0;
		int n = 0;
		for (int col = hcol[i]; col >= 0; col = hnext[col]) {
			if (w->k[col] == CROW_NONE)
				continue;
			const struct an_call *c = crow_call(t, w, col);
			uint64_t x = c->t_enter + c->host_dur;
			e0 = c->t_enter < e0 ? c->t_enter : e0;
			e1 = c->t_enter > e1 ? c->t_enter : e1;
			x0 = x < x0 ? x : x0;
			x1 = x > x1 ? x : x1;
			n++;
		}
		blocked[i] = n >= 2 && e1 - e0 >= EXIT_MIN_SPREAD_NS && 4 * (x1 - x0) <= e1 - e0;
	}
}

/* The hosts of a comm's columns: hcol[i] the first column of its i-th host (in column order),
 * hnext[col] the next column of the same host (-1: none); hid[i] the host's number, slot: per
 * host scratch (-1 between calls). @return the hosts' count; *anchor the index of the reference
 * host (ref) if present, else 0 */
static int comm_hosts(const struct an_job *job, const struct ctab *t, uint32_t ref, int *slot,
                      int *hcol, int *hlast, int *hnext, uint32_t *hid, int *anchor)
{
	int nh = 0;
	*anchor = 0;
	for (int col = 0; col < t->ncol; col++) {
		uint32_t h = job->ranks[t->col[col].file].host_ix;
		hnext[col] = -1;
		if (slot[h] < 0) {
			slot[h] = nh;
			hid[nh] = h;
			hcol[nh] = hlast[nh] = col;
			if (h == ref)
				*anchor = nh;
			nh++;
		} else {
			hnext[hlast[slot[h]]] = col;
			hlast[slot[h]] = col;
		}
	}
	for (int i = 0; i < nh; i++)
		slot[hid[i]] = -1;
	return nh;
}

/* One comm's rows: each host's first column against the anchor host's (the reference host when
 * it is a member: the differences it always gave), one difference per row both completed. */
static int comm_clock_pairs(const struct an_job *job, const struct ctab *t, uint32_t ref,
                            int *slot, struct an_clock_pairs *p)
{
	size_t nc = (size_t)t->ncol;
	int *hcol = malloc(nc * sizeof *hcol), *hlast = malloc(nc * sizeof *hlast);
	int *hnext = malloc(nc * sizeof *hnext), anchor, rc = -1;
	uint32_t *hid = malloc(nc * sizeof *hid);
	uint8_t *blocked = malloc(nc);
	struct crow w;
	if (!hcol || !hlast || !hnext || !hid || !blocked)
		goto out;
	int nh = comm_hosts(job, t, ref, slot, hcol, hlast, hnext, hid, &anchor);
	rc = 0;
	if (nh < 2 || crow_init(t, &w) < 0)
		goto out;
	int exits = !job->have_gpu; /* exits only where no call has GPU time */
	const struct ccol *ca = &t->col[hcol[anchor]];
	while (crow_next(t, &w) && !rc) {
		if (w.k[hcol[anchor]] == CROW_NONE)
			continue;
		if (exits)
			exits_blocked(t, &w, hcol, hnext, nh, blocked);
		int64_t ta, tx;
		int ka = cell_done(crow_call(t, &w, hcol[anchor]), ca->offset,
		                   exits && blocked[anchor], &ta);
		for (int i = 0; ka && i < nh && !rc; i++) {
			const struct ccol *cx = &t->col[hcol[i]];
			if (i == anchor || w.k[hcol[i]] == CROW_NONE)
				continue;
			int kx = cell_done(crow_call(t, &w, hcol[i]), cx->offset, exits && blocked[i],
			                   &tx);
			if (kx)
				rc = an_clock_pair_add(p, hid[anchor], hid[i], an_sub_i64(tx, ta),
				                       ka == 2 || kx == 2);
		}
	}
	crow_free(&w);
out:
	free(hcol);
	free(hlast);
	free(hnext);
	free(hid);
	free(blocked);
	return rc;
}

/* Hosts with different clocks: correct each host by the median difference of collective
 * completions (GPU kernel ends of the same (comm, seq) finish together on all ranks; so do the
 * exits of calls that block), pairs taken in one pass over each communicator's rows, the offsets
 * solved once (hosts.c). */
static void refine_clocks(struct an_job *job, struct ctab *tabs)
{
	uint32_t ref = job->ranks[0].host_ix;
	for (size_t f = 0; f < job->nranks && !job->multi_host; f++)
		job->multi_host = job->ranks[f].ok && job->ranks[f].host_ix != ref;
	if (!job->multi_host)
		return;
	struct an_clock_pairs p = {0};
	int *slot = malloc((job->nhosts ? job->nhosts : 1) * sizeof *slot);
	for (size_t h = 0; slot && h < job->nhosts; h++)
		slot[h] = -1;
	for (size_t ci = 0; slot && ci < job->ncomms; ci++) {
		for (int col = 0; col < tabs[ci].ncol; col++)
			tabs[ci].col[col].offset = job->ranks[tabs[ci].col[col].file].offset;
		if (tabs[ci].ncol >= 2 && comm_clock_pairs(job, &tabs[ci], ref, slot, &p) < 0)
			break; /* out of memory: what was found so far */
	}
	free(slot);
	an_clock_solve(job, &p, ref);
}

/* ---- cross-rank figures of one collective every member entered ---- */
/* Arrivals (job time) of a full row: each column's (te), the latest, the next latest, the
 * earliest, who was last. Computed once per row: the figures below read them several times. */
struct arrivals {
	int64_t *te;
	int64_t mx, mx2, mn;
	int last;
	uint32_t xfer; /* transfer time: the shortest GPU time among the ranks (the last to arrive
	                * barely waits) */
};
static void row_arrivals(const struct ctab *t, const struct crow *w, struct arrivals *a)
{
	int64_t mx = INT64_MIN, mx2 = INT64_MIN, mn = INT64_MAX, *te = a->te;
	int last = -1;
	uint32_t xmin = 0;
	for (int col = 0; col < t->ncol; col++) {
		const struct an_call *c = crow_call(t, w, col);
		int64_t e = an_add_i64((int64_t)c->t_enter, t->col[col].offset);
		te[col] = e;
		if (e > mx) {
			mx2 = mx;
			mx = e;
			last = col;
		} else if (e > mx2)
			mx2 = e;
		if (e < mn)
			mn = e;
		if (c->gpu_start && c->gpu_dur && (!xmin || c->gpu_dur < xmin))
			xmin = c->gpu_dur;
	}
	a->mx = mx;
	a->mx2 = mx2;
	a->mn = mn;
	a->last = last;
	a->xfer = xmin;
}

/* Who waited for whom: each rank's wait, the last one's lead and the wait it caused. */
static void row_waits(const struct ctab *t, const struct arrivals *a, int first)
{
	const int64_t mx = a->mx, *te = a->te;
	if (first) { /* startup: ranks reach their first collective seconds apart */
		for (int col = 0; col < t->ncol; col++)
			t->col[col].rx->first_wait_ns += (double)an_sub_i64(mx, te[col]);
		return;
	}
	/* a wrapped difference of untrusted times stays a number; no overflow trap */
	double lead = (double)an_sub_i64(mx, a->mx2);
	struct an_rank_x *lx = t->col[a->last].rx;
	for (int col = 0; col < t->ncol; col++) {
		struct an_rank_x *x = t->col[col].rx;
		double wt = (double)an_sub_i64(mx, te[col]);
		x->colls++;
		x->wait_ns += wt;
		if (col == a->last) {
			x->last_count++;
			x->lead_ns_sum += lead;
			float *l = PUSH(x->leads, x->nleads, x->capleads);
			if (l)
				*l = (float)an_sub_i64(mx, a->mx2);
		}
		lx->caused_wait_ns += wt; /* each sum in the order it always had: same figures */
	}
}

/* None failed in hang h: the first later call on this communicator that did (a waiting rank
 * whose collective NCCL left hanging when it saw the peer die fails its next call). */
static void hang_next_failure(const struct an_job *job, const struct ctab *t, const struct crow *w,
                              uint32_t ci, struct an_hang *h)
{
	for (int col = 0; col < t->ncol && h->failed_rank < 0; col++) {
		const struct an_rank *r = &job->ranks[t->col[col].file];
		if (w->k[col] == CROW_NONE)
			continue;
		uint32_t best = UINT32_MAX;
		int rc = 0;
		for (size_t q = 0; q < r->nfailed; q++)
			if (r->failed[q].hash == job->comms[ci].hash && r->failed[q].seq > w->seq &&
			    r->failed[q].seq < best)
				best = r->failed[q].seq, rc = r->failed[q].rc;
		if (best != UINT32_MAX) {
			h->failed_rank = r->rank >= 0 ? r->rank : t->col[col].file;
			h->failed_rc = rc;
			h->failed_seq = best;
		}
	}
}

/* Some ranks entered a collective, some never did: only ranks whose trace stops before this seq
 * hung it. @return 1 if it is a hang (added to job->hangs) */
static int row_hang(struct an_job *job, const struct ctab *t, const struct crow *w, uint32_t ci)
{
	struct an_hang h = {.comm = ci, .seq = w->seq, .failed_rank = -1};
	h.missing = malloc((size_t)t->ncol * sizeof *h.missing);
	h.present = malloc((size_t)t->ncol * sizeof *h.present);
	if (!h.missing || !h.present) {
		free(h.missing);
		free(h.present);
		return 0;
	}
	for (int col = 0; col < t->ncol; col++) {
		struct an_rank *r = &job->ranks[t->col[col].file];
		int gr = r->rank >= 0 ? r->rank : t->col[col].file;
		if (w->k[col] != CROW_NONE) {
			const struct an_call *c = crow_call(t, w, col);
			h.fn = c->fn;
			/* it waited from its entry to its end: its last record of any kind (a call
			 * that returns before the collective ran, as NCCL's do, leaves the wait to
			 * the next call or a sync, which wrote no record when the rank was killed) */
			double wt = (double)(r->t_alive > c->t_enter ? r->t_alive - c->t_enter : 0);
			if (c->gpu_start && (double)c->gpu_dur > wt)
				wt = (double)c->gpu_dur;
			if (wt / 1e6 > h.wait_ms)
				h.wait_ms = wt / 1e6;
			h.present[h.npresent++] = gr;
			for (size_t q = 0; q < r->nfailed && h.failed_rank < 0; q++)
				if (r->failed[q].seq == w->seq &&
				    r->failed[q].hash == job->comms[ci].hash) {
					h.failed_rank = gr;
					h.failed_rc = r->failed[q].rc;
					h.failed_seq = w->seq;
					if ((double)r->failed[q].host_ns / 1e6 > h.wait_ms)
						h.wait_ms = (double)r->failed[q].host_ns / 1e6;
				}
		} else if (t->col[col].maxseq < w->seq)
			h.missing[h.nmissing++] = gr;
	}
	if (!h.nmissing) {
		free(h.missing);
		free(h.present);
		return 0;
	}
	an_hang_sort(&h);
	if (h.failed_rank < 0)
		hang_next_failure(job, t, w, ci, &h);
	struct an_hang *x = realloc(job->hangs, (job->nhangs + 1) * sizeof *x);
	if (x) {
		job->hangs = x;
		x[job->nhangs++] = h;
	} else {
		free(h.missing);
		free(h.present);
	}
	return 1;
}

/* The row's calls alike (function, count, dtype, op, root) wherever both sides are known: the
 * usual row, checked with a compare per column. */
static int row_alike(const struct ctab *t, const struct crow *w)
{
	int fn = -1;
	const struct an_csig *s0 = NULL;
	for (int col = 0; col < t->ncol; col++) {
		if (w->k[col] == CROW_NONE)
			continue;
		const struct ccol *c = &t->col[col];
		int f = an_fn_collective(crow_call(t, w, col)->fn);
		if (fn < 0)
			fn = f;
		else if (f != fn)
			return 0;
		uint16_t g = c->csig ? c->csig[w->k[col]] : AN_CSIG_NONE;
		if (g == AN_CSIG_NONE)
			continue;
		const struct an_csig *s = &c->csigs[g];
		if (!s0)
			s0 = s;
		else if (s->count != s0->count || s->dtype != s0->dtype || s->op != s0->op ||
		         s->root != s0->root)
			return 0;
	}
	return 1;
}

/* A row whose calls differ: to mismatch.c with its cells. @return 1 noted (the comm's first) */
static int row_mismatch(struct an_job *job, const struct ctab *t, const struct crow *w,
                        uint32_t ci)
{
	int *file = malloc((size_t)t->ncol * sizeof *file), n = 0;
	uint32_t *k = malloc((size_t)t->ncol * sizeof *k);
	for (int col = 0; file && k && col < t->ncol; col++)
		if (w->k[col] != CROW_NONE) {
			file[n] = t->col[col].file;
			k[n++] = w->k[col];
		}
	int done = file && k && an_mismatch_note(job, ci, w->seq, file, k, n) == 0;
	free(file);
	free(k);
	return done;
}

AN_DEFINE_NTH(nth_float, float)


/* The comm's transfer table, filled as its rows are walked: every row's seq, so calls find
 * their row, and the transfer time of the full ones (rows <= entries: the walk stays inside). */
static size_t xfer_begin(const struct ctab *t, struct an_comm *m)
{
	size_t cap = t->stream ? t->ne : t->nrow;
	m->xfer_seq = malloc((cap ? cap : 1) * sizeof *m->xfer_seq);
	m->xfer = m->xfer_seq ? calloc(cap ? cap : 1, sizeof *m->xfer) : NULL;
	if (!m->xfer) { /* without it, only the transfer times are missing */
		free(m->xfer_seq);
		m->xfer_seq = NULL;
	}
	return cap;
}
/* Kept only when some row was full; n: the rows. */
static void xfer_end(struct an_comm *m, size_t n, uint64_t full)
{
	if (!m->xfer || !n || !full) {
		free(m->xfer);
		free(m->xfer_seq);
		m->xfer = m->xfer_seq = NULL;
		return;
	}
	uint32_t *fit = realloc(m->xfer, n * sizeof *fit);
	if (fit)
		m->xfer = fit;
	fit = realloc(m->xfer_seq, n * sizeof *fit);
	if (fit)
		m->xfer_seq = fit;
	m->nxfer = (uint32_t)n;
	m->xfer_dense = m->xfer_seq[n - 1] - m->xfer_seq[0] == (uint32_t)(n - 1);
	uint64_t span = (uint64_t)m->xfer_seq[n - 1] - m->xfer_seq[0] + 1;
	uint32_t *x = NULL;
	if (!m->xfer_dense && span <= 2 * (uint64_t)n + 1024 && span <= UINT32_MAX &&
	    (x = calloc(span, sizeof *x))) { /* else the sorted table stays, searched */
		for (size_t i = 0; i < n; i++)
			x[m->xfer_seq[i] - m->xfer_seq[0]] = m->xfer[i];
		free(m->xfer);
		m->xfer = x;
		m->nxfer = (uint32_t)span;
		m->xfer_dense = 1;
	}
	if (m->xfer_dense && (fit = realloc(m->xfer_seq, sizeof *fit))) /* only [0] is read */
		m->xfer_seq = fit;
}

/* Skew over the job's collectives, each comm's first excluded. */
struct skew_sum {
	double sum;
	uint64_t n;
};

/* The figures of a row every column entered; first: the comm's first such row. */
static void row_full(struct an_job *job, size_t ci, const struct ctab *t, const struct crow *w,
                     struct arrivals *a, int first, struct skew_sum *sk)
{
	struct an_comm *m = &job->comms[ci];
	row_arrivals(t, w, a);
	if (m->xfer)
		m->xfer[w->index] = a->xfer;
	double skew = (double)an_sub_i64(a->mx, a->mn);
	job->matched_colls++;
	if (first) {
		if (job->first_comm < 0 || skew > job->first_skew_ns) {
			job->first_skew_ns = skew;
			job->first_comm = (int)ci;
			job->first_seq = w->seq;
			job->first_fn = crow_call(t, w, 0)->fn;
		}
	} else {
		sk->sum += skew;
		sk->n++;
		if (skew > job->max_skew_ns)
			job->max_skew_ns = skew;
		m->skew_sum_ns += skew;
		m->skew_n++;
		if (skew > m->skew_max_ns)
			m->skew_max_ns = skew;
	}
	row_waits(t, a, first);
}

/* One comm's rows: full ones, and the first hang. @return 0, or -1 out of memory */
static int cross_rank_comm(struct an_job *job, size_t ci, const struct ctab *t, struct skew_sum *sk)
{
	struct an_comm *m = &job->comms[ci];
	int hang_done = 0, mismatch_done = 0;
	uint64_t seen_full = 0;
	struct arrivals a = {.te = malloc((size_t)t->ncol * sizeof *a.te)};
	struct crow w;
	if (!a.te || crow_init(t, &w) < 0) {
		free(a.te);
		return -1;
	}
	size_t cap = xfer_begin(t, m), nrow = 0;
	while (crow_next(t, &w)) {
		if (m->xfer_seq && w.index >= cap) { /* cannot be (rows <= entries): no table */
			free(m->xfer);
			free(m->xfer_seq);
			m->xfer = m->xfer_seq = NULL;
		}
		if (m->xfer_seq)
			m->xfer_seq[w.index] = w.seq;
		nrow++;
		if (!mismatch_done && w.present > 1 && !row_alike(t, &w))
			mismatch_done = row_mismatch(job, t, &w, (uint32_t)ci);
		if (w.present == t->ncol)
			row_full(job, ci, t, &w, &a, !seen_full++, sk);
		else if (!hang_done && w.present)
			hang_done = row_hang(job, t, &w, (uint32_t)ci);
	}
	xfer_end(m, nrow, seen_full);
	crow_free(&w);
	free(a.te);
	return 0;
}

static void cross_rank(struct an_job *job, struct ctab *tabs)
{
	struct skew_sum sk = {0};
	job->first_comm = -1;
	for (size_t ci = 0; ci < job->ncomms; ci++)
		for (int col = 0; col < tabs[ci].ncol; col++) {
			tabs[ci].col[col].offset = job->ranks[tabs[ci].col[col].file].offset;
			tabs[ci].col[col].rx = &job->rx[tabs[ci].col[col].file];
		}
	for (size_t ci = 0; ci < job->ncomms; ci++)
		if (tabs[ci].ncol >= 2 && cross_rank_comm(job, ci, &tabs[ci], &sk) < 0)
			job->comms_unmatched++; /* said in the report: its figures are missing */
	job->mean_skew_ns = sk.n ? sk.sum / (double)sk.n : 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank_x *x = &job->rx[f];
		if (x->nleads)
			x->median_lead_ns = nth_float(x->leads, x->nleads, x->nleads / 2);
		free(x->leads);
		x->leads = NULL;
		x->nleads = x->capleads = 0;
	}
}

/* Every comm's table, streamed or as entries. @return 0, or -1 out of memory */
static int ctab_build_all(struct an_job *job, struct ctab *tabs, struct centry **all)
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

int an_align_cross_rank(struct an_job *job)
{
	job->rx = calloc(job->nranks, sizeof *job->rx);
	struct ctab *tabs = calloc(job->ncomms ? job->ncomms : 1, sizeof *tabs);
	struct centry *all = NULL;
	int rc = -1;
	if (tabs && job->rx && ctab_build_all(job, tabs, &all) == 0) {
		refine_clocks(job, tabs);
		cross_rank(job, tabs);
		rc = 0;
	} else if (job->ncomms)
		job->comms_unmatched = job->ncomms;
	for (size_t ci = 0; tabs && ci < job->ncomms; ci++)
		ctab_free(&tabs[ci]);
	free(all);
	free(tabs);
	return rc;
}

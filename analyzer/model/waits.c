/* waits.c: the cross-rank figures, in one walk over each communicator's rows: of a row every
 * member entered, the arrivals, skew, who waited for whom (each rank's wait, the last one's lead)
 * and the transfer time (the communicator's transfer table); the first hang and the first
 * mismatch among the other rows go to hangs.c. */
#include <stdlib.h> /* malloc, calloc, realloc */

#include "model/align_int.h"
#include "model/model.h"
#include "model/stages.h"

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
	if (!a.te || an_crow_init(t, &w) < 0) {
		free(a.te);
		return -1;
	}
	size_t cap = xfer_begin(t, m), nrow = 0;
	while (mismatch_done >= 0 && crow_next(t, &w)) {
		if (m->xfer_seq && w.index >= cap) { /* cannot be (rows <= entries): no table */
			free(m->xfer);
			free(m->xfer_seq);
			m->xfer = m->xfer_seq = NULL;
		}
		if (m->xfer_seq)
			m->xfer_seq[w.index] = w.seq;
		nrow++;
		if (!mismatch_done && w.present > 1 && !an_row_alike(t, &w))
			mismatch_done = an_row_mismatch(job, t, &w, (uint32_t)ci);
		if (w.present == t->ncol)
			row_full(job, ci, t, &w, &a, !seen_full++, sk);
		else if (!hang_done && w.present)
			hang_done = an_row_hang(job, t, &w, (uint32_t)ci);
	}
	xfer_end(m, nrow, seen_full);
	crow_free(&w);
	free(a.te);
	return mismatch_done < 0 ? -1 : 0;
}

void an_cross_rank(struct an_job *job, struct ctab *tabs)
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

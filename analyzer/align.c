/* align.c: the job's communicators, clocks and cross-rank figures: a per-communicator table of the
 * collectives present (rows: the sequence numbers actually seen, columns: member ranks), clock
 * refinement between hosts, then skew, lead, transfer time and hangs, each computed per row. */
#include <stdlib.h> /* calloc, qsort */
#include <string.h> /* strcmp */

#include "model.h"
#include "stages.h"

/* ---- the job's communicators ---- */
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
			r->comms[i].job_comm = j < 0 ? UINT16_MAX : (uint16_t)j;
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
		size_t o = 0;
		for (size_t k = 0; k < r->ncalls; k++) {
			struct an_call *c = &r->calls[k];
			uint16_t jc = r->comms[c->comm].job_comm;
			if (jc == UINT16_MAX) { /* beyond AN_MAX_COMMS in the job */
				job->calls_dropped++;
				continue;
			}
			c->comm = jc;
			job->comms[jc].ncalls++;
			if (dropped)
				r->calls[o] = *c;
			o++;
		}
		r->ncalls = o;
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
			if (r->comms[i].job_comm == UINT16_MAX)
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

int an_align_comms(struct an_job *job)
{
	if (comm_table(job) < 0 || comm_members(job) < 0)
		return -1;
	/* names the job gave its communicators: the first process naming one names it */
	for (size_t ci = 0; ci < job->ncomms; ci++)
		for (size_t f = 0; f < job->nranks && !job->comms[ci].name[0]; f++)
			for (size_t i = 0; i < job->ranks[f].ncnames; i++)
				if (job->ranks[f].cnames[i].hash == job->comms[ci].hash) {
					memcpy(job->comms[ci].name, job->ranks[f].cnames[i].name,
					       sizeof job->comms[ci].name);
					break;
				}
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
/* One call of the comm: its row is its seq, its column its (process, device). */
struct centry {
	uint32_t seq, col, k; /* k: call index in its process */
};
/* Rows are the sequence numbers present (memory and time in proportion to the calls, whatever
 * the numbers); columns are (process, device): a process driving several GPUs holds several
 * ranks of one comm. */
struct ctab {
	struct centry *e; /* sorted by (seq, col); one entry per cell */
	size_t ne;
	uint32_t nrow;
	int ncol;
	int *col_file;    /* column -> index in job->ranks */
	int *col_dev;     /* column -> device */
	uint32_t *maxseq; /* per column: highest seq it entered */
	struct centry *own; /* e once merged into an array of its own (freed with the table) */
};

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
 * order (the usual case). A few sorted runs are merged (a tenth of report's CPU went to the
 * counting sort below on a 2-rank trace of 2M calls each). @return 1 done, 0 not this case */
#define MERGE_MAXRUNS 16
static int merge_runs(struct ctab *t)
{
	size_t at[MERGE_MAXRUNS + 1], end[MERGE_MAXRUNS];
	int nr = 0;
	for (size_t i = 0; i < t->ne; i++) {
		if (!i || t->col_file[t->e[i].col] != t->col_file[t->e[i - 1].col]) {
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
	if (nr == 2) { /* the usual pair of ranks: a plain two-way merge */
		size_t i = at[0], j = at[1], o = 0;
		while (i < end[0] && j < end[1])
			tmp[o++] = CKEY(&t->e[i]) < CKEY(&t->e[j]) ? t->e[i++] : t->e[j++];
		while (i < end[0])
			tmp[o++] = t->e[i++];
		while (j < end[1])
			tmp[o++] = t->e[j++];
	}
	for (size_t o = 0; nr > 2 && o < t->ne; o++) {
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

/* Add a column (file f, device dev) to t. @return its index, or -1 out of memory */
static int ctab_col(struct ctab *t, size_t *capcol, int f, int dev)
{
	if ((size_t)t->ncol + 1 > *capcol) {
		size_t nc = *capcol ? *capcol * 2 : 4;
		int *a = realloc(t->col_file, nc * sizeof *a);
		if (a)
			t->col_file = a;
		int *b = realloc(t->col_dev, nc * sizeof *b);
		if (b)
			t->col_dev = b;
		if (!a || !b)
			return -1;
		*capcol = nc;
	}
	t->col_file[t->ncol] = f;
	t->col_dev[t->ncol] = dev;
	return t->ncol++;
}

/* Sort one table's entries into rows; one entry per cell (a seq entered twice on one column keeps
 * its later call). @return 0, or -1 out of memory */
static int ctab_rows(struct ctab *t)
{
	if (!t->ncol)
		return 0;
	t->maxseq = calloc((size_t)t->ncol, sizeof *t->maxseq);
	if (!t->maxseq)
		return -1;
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
		if (x.seq > t->maxseq[x.col])
			t->maxseq[x.col] = x.seq;
	}
	t->ne = o;
	return 0;
}

/* All communicators' tables in one pass over the calls: entries go to their comm's slice of one
 * array (ncalls[ci] calls each). @return the array (freed by the caller), NULL out of memory */
static struct centry *ctab_build_all(struct an_job *job, const size_t *ncalls, struct ctab *tabs)
{
	size_t total = 0;
	for (size_t ci = 0; ci < job->ncomms; ci++)
		total += ncalls[ci];
	struct centry *all = malloc((total ? total : 1) * sizeof *all);
	size_t *capcol = calloc(job->ncomms ? job->ncomms : 1, sizeof *capcol);
	int *first = malloc((job->ncomms ? job->ncomms : 1) * sizeof *first);
	int *last_f = malloc((job->ncomms ? job->ncomms : 1) * sizeof *last_f);
	if (!all || !capcol || !first || !last_f)
		goto fail;
	size_t at = 0;
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		tabs[ci].e = all + at;
		at += ncalls[ci];
		last_f[ci] = -1;
	}
	size_t na = job->ncomms * NVLP_NCCL_FN_COUNT;
	free(job->agg_host);
	job->agg_host = calloc(na ? na : 1, sizeof *job->agg_host);
	job->agg_gpu = 0;
	struct an_agg *ag = job->agg_host;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		for (size_t k = 0; k < r->ncalls; k++) {
			struct an_call *c = &r->calls[k];
			/* model.c's aggregate() while no call has GPU time (this pass reads the calls
			 * anyway); one that has: aggregate() makes its own pass, for all */
			if (ag && c->gpu_start) {
				free(ag);
				ag = job->agg_host = NULL;
				job->agg_gpu = 1;
			} else if (ag) {
				struct an_agg *a = &ag[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
				a->calls++;
				a->bytes += c->bytes;
				a->host_ns += c->host_dur;
			}
			if (an_coll_of_fn(c->fn) == AN_C_SENDRECV)
				continue;
			struct ctab *t = &tabs[c->comm];
			if (last_f[c->comm] != (int)f) { /* this file's columns start here */
				last_f[c->comm] = (int)f;
				first[c->comm] = t->ncol;
			}
			int col;
			for (col = first[c->comm]; col < t->ncol && t->col_dev[col] != c->device; col++)
				;
			if (col == t->ncol && ctab_col(t, &capcol[c->comm], (int)f, c->device) < 0)
				goto fail;
			t->e[t->ne++] = (struct centry){c->seq, (uint32_t)col, (uint32_t)k};
		}
	}
	free(capcol);
	free(first);
	free(last_f);
	return all;
fail:
	free(job->agg_host);
	job->agg_host = NULL;
	free(all);
	free(capcol);
	free(first);
	free(last_f);
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		free(tabs[ci].col_file);
		free(tabs[ci].col_dev);
		memset(&tabs[ci], 0, sizeof tabs[ci]);
	}
	return NULL;
}

static void ctab_free(struct ctab *t)
{
	free(t->own);
	free(t->col_file);
	free(t->col_dev);
	free(t->maxseq);
}

/* Row iterator: the entries [at, end) of one seq. */
struct crow {
	size_t at, end;
	uint32_t seq, index; /* index: row number */
	int present;         /* columns that entered it */
};
static inline int crow_next(const struct ctab *t, struct crow *w)
{
	if (w->end >= t->ne)
		return 0;
	if (w->end) /* not the first row */
		w->index++;
	w->at = w->end;
	w->seq = t->e[w->at].seq;
	for (w->end = w->at; w->end < t->ne && t->e[w->end].seq == w->seq; w->end++)
		;
	w->present = (int)(w->end - w->at);
	return 1;
}
/* The call of column col in a full row (entries are in column order). */
static inline const struct an_call *crow_call(const struct an_job *job, const struct ctab *t,
                                              const struct crow *w, int col)
{
	return &job->ranks[t->col_file[col]].calls[t->e[w->at + (size_t)col].k];
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Hosts with different clocks: correct each host by the median difference of collective
 * completions (GPU kernel ends of the same (comm, seq) finish together on all ranks). */
static void refine_clocks(struct an_job *job, struct ctab *tabs)
{
	const char *ref = job->ranks[0].host;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (!r->ok || !strcmp(r->host, ref))
			continue;
		int done = 0;
		for (size_t g = 0; g < f && !done; g++)
			if (!strcmp(job->ranks[g].host, r->host))
				done = 1;
		if (done)
			continue;
		job->multi_host = 1;
		int64_t *d = NULL;
		size_t nd = 0, capd = 0;
		for (size_t ci = 0; ci < job->ncomms; ci++) {
			struct ctab *t = &tabs[ci];
			int cr = -1, cx = -1;
			for (int col = 0; col < t->ncol; col++) {
				const char *h = job->ranks[t->col_file[col]].host;
				if (cr < 0 && !strcmp(h, ref))
					cr = col;
				if (cx < 0 && !strcmp(h, r->host))
					cx = col;
			}
			if (cr < 0 || cx < 0)
				continue;
			struct an_rank *a = &job->ranks[t->col_file[cr]],
			               *b = &job->ranks[t->col_file[cx]];
			struct crow w = {0};
			while (crow_next(t, &w)) {
				const struct an_call *x = NULL, *y = NULL;
				for (size_t i = w.at; i < w.end; i++) {
					if ((int)t->e[i].col == cr)
						x = &a->calls[t->e[i].k];
					if ((int)t->e[i].col == cx)
						y = &b->calls[t->e[i].k];
				}
				if (!x || !y || !x->gpu_start || !y->gpu_start)
					continue;
				int64_t ex = an_add_i64((int64_t)(x->gpu_start + x->gpu_dur), a->offset);
				int64_t ey = an_add_i64((int64_t)(y->gpu_start + y->gpu_dur), b->offset);
				int64_t *p = PUSH(d, nd, capd);
				if (p)
					*p = an_sub_i64(ey, ex);
			}
		}
		if (nd >= 3) {
			qsort(d, nd, sizeof *d, cmp_i64);
			int64_t med = d[nd / 2];
			for (size_t g = 0; g < job->nranks; g++)
				if (!strcmp(job->ranks[g].host, r->host)) {
					job->ranks[g].offset = an_sub_i64(job->ranks[g].offset, med);
					job->ranks[g].refine = an_sub_i64(0, med);
				}
			double a = med < 0 ? -(double)med : (double)med;
			if (a > job->max_refine_ns)
				job->max_refine_ns = a;
		}
		free(d);
	}
}

/* ---- cross-rank figures of one collective every member entered ---- */
/* Arrivals (job time) of a full row: each column's (te), the latest, the next latest, the
 * earliest, who was last. Computed once per row: the figures below read them several times. */
struct arrivals {
	int64_t *te;
	int64_t mx, mx2, mn;
	int last;
};
static void row_arrivals(const struct an_job *job, const struct ctab *t, const struct crow *w,
                         struct arrivals *a)
{
	a->mx = a->mx2 = INT64_MIN;
	a->mn = INT64_MAX;
	a->last = -1;
	const struct centry *e = &t->e[w->at];
	for (int col = 0; col < t->ncol; col++) {
		const struct an_rank *r = &job->ranks[t->col_file[col]];
		int64_t te = an_add_i64((int64_t)r->calls[e[col].k].t_enter, r->offset);
		a->te[col] = te;
		if (te > a->mx) {
			a->mx2 = a->mx;
			a->mx = te;
			a->last = col;
		} else if (te > a->mx2)
			a->mx2 = te;
		if (te < a->mn)
			a->mn = te;
	}
}

/* Transfer time: the shortest GPU time among the ranks (the last to arrive barely waits). */
static uint32_t row_xfer(const struct an_job *job, const struct ctab *t, const struct crow *w)
{
	uint32_t xmin = 0;
	for (int col = 0; col < t->ncol; col++) {
		const struct an_call *c = crow_call(job, t, w, col);
		if (c->gpu_start && c->gpu_dur && (!xmin || c->gpu_dur < xmin))
			xmin = c->gpu_dur;
	}
	return xmin;
}

/* Who waited for whom: each rank's wait, the last one's lead and the wait it caused. */
static void row_waits(struct an_job *job, const struct ctab *t, const struct crow *w,
                      const struct arrivals *a, int first)
{
	(void)w;
	if (first) { /* startup: ranks reach their first collective seconds apart */
		for (int col = 0; col < t->ncol; col++)
			job->rx[t->col_file[col]].first_wait_ns += (double)an_sub_i64(a->mx, a->te[col]);
		return;
	}
	/* a wrapped difference of untrusted times stays a number; no overflow trap */
	double lead = (double)an_sub_i64(a->mx, a->mx2);
	for (int col = 0; col < t->ncol; col++) {
		int64_t te = a->te[col];
		struct an_rank_x *x = &job->rx[t->col_file[col]];
		x->colls++;
		x->wait_ns += (double)an_sub_i64(a->mx, te);
		if (col == a->last) {
			x->last_count++;
			x->lead_ns_sum += lead;
			float *l = PUSH(x->leads, x->nleads, x->capleads);
			if (l)
				*l = (float)an_sub_i64(a->mx, a->mx2);
		}
	}
	struct an_rank_x *lx = &job->rx[t->col_file[a->last]];
	for (int col = 0; col < t->ncol; col++)
		lx->caused_wait_ns += (double)an_sub_i64(a->mx, a->te[col]);
}

/* Some ranks entered a collective, some never did: only ranks whose trace stops before this seq
 * hung it. @return 1 if it is a hang (added to job->hangs) */
static int row_hang(struct an_job *job, const struct ctab *t, const struct crow *w, uint16_t ci)
{
	struct an_hang h = {.comm = ci, .seq = w->seq, .failed_rank = -1};
	size_t i = w->at;
	for (int col = 0; col < t->ncol; col++) {
		struct an_rank *r = &job->ranks[t->col_file[col]];
		int gr = r->rank >= 0 ? r->rank : t->col_file[col];
		if (i < w->end && (int)t->e[i].col == col) {
			struct an_call *c = &r->calls[t->e[i++].k];
			h.fn = c->fn;
			double wt = c->gpu_start ? (double)c->gpu_dur
			                         : (double)(r->t_last > c->t_enter ? r->t_last - c->t_enter
			                                                           : 0);
			if (wt / 1e6 > h.wait_ms)
				h.wait_ms = wt / 1e6;
			if (h.npresent < 16)
				h.present[h.npresent++] = gr;
			for (size_t q = 0; q < r->nfailed && h.failed_rank < 0; q++)
				if (r->failed[q].seq == w->seq &&
				    r->failed[q].hash == job->comms[ci].hash) {
					h.failed_rank = gr;
					h.failed_rc = r->failed[q].rc;
					if ((double)r->failed[q].host_ns / 1e6 > h.wait_ms)
						h.wait_ms = (double)r->failed[q].host_ns / 1e6;
				}
		} else if (t->maxseq[col] < w->seq) {
			if (h.nmissing < 16)
				h.missing[h.nmissing++] = gr;
		}
	}
	if (!h.nmissing)
		return 0;
	struct an_hang *x = realloc(job->hangs, (job->nhangs + 1) * sizeof *x);
	if (x) {
		job->hangs = x;
		x[job->nhangs++] = h;
	}
	return 1;
}

AN_DEFINE_NTH(nth_float, float)

static void cross_rank(struct an_job *job, struct ctab *tabs)
{
	double skew_sum = 0;
	uint64_t nskew = 0;
	job->first_comm = -1;
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		struct ctab *t = &tabs[ci];
		struct an_comm *m = &job->comms[ci];
		int hang_done = 0;
		uint64_t seen_full = 0;
		if (t->ncol < 2)
			continue;
		struct arrivals a = {.te = malloc((size_t)t->ncol * sizeof *a.te)};
		if (!a.te) {
			job->comms_unmatched++; /* said in the report: its cross-rank figures are missing */
			continue;
		}
		struct crow w = {0};
		while (crow_next(t, &w)) {
			if (w.present == t->ncol) {
				if (!m->xfer) {
					m->xfer = calloc(t->nrow, sizeof *m->xfer);
					m->xfer_seq = m->xfer ? calloc(t->nrow, sizeof *m->xfer_seq) : NULL;
					if (!m->xfer_seq) {
						free(m->xfer);
						m->xfer = NULL;
					}
					m->nxfer = m->xfer ? t->nrow : 0;
					if (m->xfer) { /* every row's seq, so calls find their row */
						struct crow v = {0};
						while (crow_next(t, &v))
							m->xfer_seq[v.index] = v.seq;
						m->xfer_dense = m->xfer_seq[t->nrow - 1] - m->xfer_seq[0] ==
						                t->nrow - 1;
					}
				}
				row_arrivals(job, t, &w, &a);
				if (m->xfer)
					m->xfer[w.index] = row_xfer(job, t, &w);
				double skew = (double)an_sub_i64(a.mx, a.mn);
				job->matched_colls++;
				int first = !seen_full++;
				if (first) {
					if (job->first_comm < 0 || skew > job->first_skew_ns) {
						job->first_skew_ns = skew;
						job->first_comm = (int)ci;
						job->first_seq = w.seq;
						job->first_fn = crow_call(job, t, &w, 0)->fn;
					}
				} else {
					skew_sum += skew;
					nskew++;
					if (skew > job->max_skew_ns)
						job->max_skew_ns = skew;
				}
				row_waits(job, t, &w, &a, first);
				continue;
			}
			if (!hang_done && w.present)
				hang_done = row_hang(job, t, &w, (uint16_t)ci);
		}
		free(a.te);
	}
	job->mean_skew_ns = nskew ? skew_sum / (double)nskew : 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank_x *x = &job->rx[f];
		if (x->nleads)
			x->median_lead_ns = nth_float(x->leads, x->nleads, x->nleads / 2);
		free(x->leads);
		x->leads = NULL;
		x->nleads = x->capleads = 0;
	}
}

void an_align_cross_rank(struct an_job *job)
{
	job->rx = calloc(job->nranks, sizeof *job->rx);
	struct ctab *tabs = calloc(job->ncomms ? job->ncomms : 1, sizeof *tabs);
	size_t *ncalls = calloc(job->ncomms ? job->ncomms : 1, sizeof *ncalls);
	struct centry *all = NULL;
	int ok = tabs && job->rx && ncalls;
	for (size_t ci = 0; ok && ci < job->ncomms; ci++)
		ncalls[ci] = job->comms[ci].ncalls;
	if (ok && !(all = ctab_build_all(job, ncalls, tabs)))
		ok = 0;
	for (size_t ci = 0; ok && ci < job->ncomms; ci++)
		if (ctab_rows(&tabs[ci]) < 0) {
			ctab_free(&tabs[ci]);
			memset(&tabs[ci], 0, sizeof tabs[ci]);
			job->comms_unmatched++; /* said in the report: its cross-rank figures are missing */
		}
	if (ok) {
		refine_clocks(job, tabs);
		cross_rank(job, tabs);
	} else if (job->ncomms)
		job->comms_unmatched = job->ncomms;
	for (size_t ci = 0; tabs && ci < job->ncomms; ci++)
		ctab_free(&tabs[ci]);
	free(all);
	free(tabs);
	free(ncalls);
}

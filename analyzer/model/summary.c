/* summary.c: the figures of a job computed once for every printer (summary.h): the summary diff
 * compares, the report's tables, each rank's communication time. Nothing here prints. */
#include "model/summary.h"

#include <math.h>   /* NAN */
#include <stdlib.h> /* calloc */
#include <string.h> /* memset */

#include "load/load.h"   /* an_hosts_of_ok */
#include "model/model.h"
#include "nvlp_trace.h"
#include "out/report.h"  /* the types: struct an_summary, an_tables (to move into summary.h) */
#include "util/containers.h" /* an_grow */

int an_rank_id(const struct an_job *job, size_t f)
{
	return job->ranks[f].rank >= 0 ? job->ranks[f].rank : (int)f;
}

/* Which (comm, fn) aggregates have no GPU execution anywhere in the job: COLLECTIVES' "h" rows
 * (a single-rank in-place AllReduce, which NCCL runs as nothing; calls outside every kernel
 * window). calloc'd, NULL when there is none or no memory (then no host part is added). */
static uint8_t *host_aggs(const struct an_job *job)
{
	size_t n = 0;
	for (size_t i = 0; i < job->naggs; i++)
		n += job->aggs[i].calls_gpu == 0;
	uint8_t *m = n ? calloc((size_t)job->ncomms * NVLP_NCCL_FN_COUNT, 1) : NULL;
	for (size_t i = 0; m && i < job->naggs; i++)
		if (job->aggs[i].calls_gpu == 0)
			m[(size_t)job->aggs[i].comm * NVLP_NCCL_FN_COUNT + job->aggs[i].fn] = 1;
	return m;
}

/* A rank's communication time, the one definition behind the summary line, RANKS, the JSON and
 * diff: its NCCL GPU time (an_rank_comm_ns: the union of NCCL's kernels and copies per device)
 * plus the host call time of its calls in collectives that have no GPU execution (host_aggs), so
 * that it adds up with COLLECTIVES. Without NCCL GPU time it is all host time. host: the host
 * part; win_host: the host part of calls entered inside the step window. */
static struct an_rank_comm rank_comm(const struct an_job *job, const struct an_rank *r,
                              const uint8_t *hagg)
{
	struct an_rank_comm c = {0};
	c.ns = (double)an_rank_comm_ns(r, &c.host_only);
	if (c.host_only) {
		c.host = c.ns;
		return c;
	}
	int win = job->win1 > job->win0;
	uint64_t a = win ? (uint64_t)((int64_t)job->win0 - r->offset) : 0,
	         b = win ? (uint64_t)((int64_t)job->win1 - r->offset) : UINT64_MAX;
	for (size_t k = 0; hagg && k < r->ncalls; k++) {
		const struct an_call *cl = &r->calls[k];
		if (!hagg[(size_t)cl->comm * NVLP_NCCL_FN_COUNT + cl->fn])
			continue;
		c.host += (double)cl->host_dur;
		if (cl->t_enter >= a && cl->t_enter < b)
			c.win_host += (double)cl->host_dur;
	}
	c.ns += c.host;
	return c;
}

/* Per collective class and size class: bus bytes and transfer time of the calls with GPU time,
 * number and host time of every call. */
struct class_sums {
	double sb[AN_C_COUNT][AN_SIZE_CLASSES], st[AN_C_COUNT][AN_SIZE_CLASSES];
	double hn[AN_C_COUNT][AN_SIZE_CLASSES], ht[AN_C_COUNT][AN_SIZE_CLASSES];
};

/* A rank's calls into k, and their bytes by class into s */
static void add_calls(const struct an_job *job, const struct an_rank *r, struct class_sums *k,
                      struct an_summary *s)
{
	for (size_t i = 0; i < r->ncalls; i++) {
		const struct an_call *cl = &r->calls[i];
		int cc = an_coll_of_fn(cl->fn), sc = an_size_class(cl->bytes);
		if (cc > 0) {
			k->hn[cc][sc]++;
			k->ht[cc][sc] += cl->host_dur;
		}
		if (!cl->gpu_start || !cl->gpu_dur || cc <= 0)
			continue;
		k->sb[cc][sc] += (double)cl->bytes * an_busbw_factor(cl->fn, job->comms[cl->comm].nranks);
		k->st[cc][sc] += an_call_xfer_ns(job, cl);
		s->bw_bytes[cc][sc] += (double)cl->bytes;
	}
}

/* A rank's link and copy bytes into s */
static void add_bytes(const struct an_rank *r, struct an_summary *s)
{
	for (size_t d = 0; d < r->ndevs; d++) {
		s->nvlink_bytes += (double)(r->devs[d].nvl_tx + r->devs[d].nvl_rx);
		s->pcie_bytes += (double)(r->devs[d].pcie_rd + r->devs[d].pcie_wr);
	}
	for (size_t p = 0; p < r->npairs; p++) {
		s->copy_staged_bytes += (double)r->pairs[p].staged_bytes;
		s->copy_p2p_bytes += (double)(r->pairs[p].api_bytes - r->pairs[p].staged_bytes);
	}
}

/* an_summarize, and each process's rank_comm into rcs[file index] when rcs is not NULL (RANKS
 * and the JSON's ranks show the figures the summary adds up, computed once) */
static void summarize(const struct an_job *job, struct an_summary *s, struct an_rank_comm *rcs)
{
	memset(s, 0, sizeof *s);
	s->processes = (int)job->nok;
	s->hosts = (int)an_hosts_of_ok(job);
	s->gpu_data = job->have_gpu;
	s->wall_ms = (double)(job->t1 - job->t0) / 1e6;
	s->step_ms = job->step_ns > 0 ? job->step_ns / 1e6 : NAN;
	s->steps = (int)job->steps;
	double e = 0, w = 0, c = 0, cw = 0, ch = 0;
	size_t nh = 0;
	uint8_t *hagg = host_aggs(job);
	struct class_sums k;
	memset(&k, 0, sizeof k);
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok)
			continue;
		double re, rw, rwc;
		an_rank_exposure(job, r, &re, &rw, &rwc);
		e += re;
		w += rw;
		struct an_rank_comm rc = rank_comm(job, r, hagg);
		if (rcs)
			rcs[f] = rc;
		c += rc.ns;
		ch += rc.host;
		cw += rwc + rc.win_host;
		nh += rc.host_only;
		add_calls(job, r, &k, s);
		add_bytes(r, s);
	}
	for (int cc = 0; cc < AN_C_COUNT; cc++)
		for (int sc = 0; sc < AN_SIZE_CLASSES; sc++) {
			s->busbw[cc][sc] = k.st[cc][sc] > 0 ? k.sb[cc][sc] / k.st[cc][sc] : NAN;
			s->host_ms_per_call[cc][sc] =
			    k.hn[cc][sc] > 0 ? k.ht[cc][sc] / k.hn[cc][sc] / 1e6 : NAN;
		}
	int n = job->nok ? (int)job->nok : 1;
	free(hagg);
	s->comm_ms = c / 1e6 / n;
	s->comm_host_ms = ch / 1e6 / n;
	s->comm_host = job->nok && nh == job->nok;
	s->comm_win_ms =
	    (job->have_gpu || job->have_kch_gpu) && job->win1 && !s->comm_host ? cw / 1e6 / n : NAN;
	s->exposed_ms = job->have_gpu ? e / 1e6 / n : NAN;
	s->exposed_share = job->have_gpu && w > 0 ? e / w : NAN;
}

void an_summarize(const struct an_job *job, struct an_summary *s)
{
	summarize(job, s, NULL);
}

static double max_peak(const struct an_job *job)
{
	double p = 0;
	for (size_t i = 0; i < job->ncomms; i++)
		if (job->comms[i].peak_Bps > p)
			p = job->comms[i].peak_Bps;
	for (size_t f = 0; f < job->nranks && !p; f++)
		for (size_t d = 0; d < job->ranks[f].ndevs; d++) {
			double x = an_dev_peak(job, &job->ranks[f], job->ranks[f].devs[d].device);
			if (x > p)
				p = x;
		}
	return p;
}

/* Append to a row array (an_grow, see stages.h): the row, or NULL with the array unchanged. */
#define PUSH_ROW(arr, n, cap)                                                                      \
	({                                                                                         \
		__typeof__(arr) q_ = an_grow((arr), &(cap), (n) + 1, sizeof *(arr));               \
		q_ ? ((arr) = q_, &q_[(n)++]) : NULL;                                              \
	})

static void arow_of(const struct an_job *job, const struct an_agg *a, struct an_arow *r)
{
	r->a = a;
	r->c = &job->comms[a->comm];
	int m = r->c->nmembers ? r->c->nmembers : 1;
	r->host_time = a->calls_gpu == 0;
	r->calls_per_rank = (double)a->calls / m;
	r->bytes_per_call = a->calls ? (double)a->bytes / a->calls : 0;
	double ns = r->host_time ? (double)a->host_ns : (double)a->gpu_ns;
	r->time_ms_per_rank = ns / 1e6 / m;
	r->algbw = r->busbw = r->peak_share = NAN;
	if (!r->host_time && a->xfer_ns) { /* transfer time: see an_call_xfer_ns */
		r->algbw = an_algbw_gbps((double)a->bytes_gpu, (double)a->xfer_ns);
		r->busbw = an_busbw_gbps((double)a->bytes_gpu, (double)a->xfer_ns, a->fn, r->c->nranks);
		if (r->c->peak_Bps > 0)
			r->peak_share = r->busbw * 1e9 / r->c->peak_Bps;
	}
}

static void by_rank_rows(const struct an_job *job, struct an_tables *t)
{
	size_t ncell = job->ncomms * NVLP_NCCL_FN_COUNT, cap = 0;
	struct an_crow *cells = calloc(ncell ? ncell : 1, sizeof *cells);
	for (size_t i = 0; cells && i < job->nranks; i++) {
		const struct an_rank *r = &job->ranks[i];
		memset(cells, 0, (ncell ? ncell : 1) * sizeof *cells);
		for (size_t k = 0; k < r->ncalls; k++) { /* one pass per rank */
			const struct an_call *c = &r->calls[k];
			struct an_crow *x = &cells[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
			x->calls++;
			x->bytes += (double)c->bytes;
			x->hns += c->host_dur;
			if (c->gpu_start) {
				x->gcalls++;
				x->gbytes += (double)c->bytes;
				x->gns += c->gpu_dur;
				x->xns += an_call_xfer_ns(job, c);
			}
		}
		for (size_t ci = 0; ci < job->ncomms; ci++)
			for (unsigned fn = 0; fn < NVLP_NCCL_FN_COUNT; fn++) {
				struct an_crow *x = &cells[ci * NVLP_NCCL_FN_COUNT + fn];
				if (!x->calls)
					continue;
				struct an_crow *y = PUSH_ROW(t->by_rank, t->nby_rank, cap);
				if (!y)
					break;
				*y = *x;
				y->rank = an_rank_id(job, i);
				y->comm = ci;
				y->fn = fn;
				y->algbw = an_algbw_gbps(x->gbytes, x->xns);
				y->busbw = y->algbw * an_busbw_factor(fn, job->comms[ci].nranks);
			}
	}
	free(cells);
}

int an_tables_build(const struct an_job *job, struct an_tables *t)
{
	memset(t, 0, sizeof *t);
	struct an_rank_comm *rc = calloc(job->nranks ? job->nranks : 1, sizeof *rc);
	if (!rc)
		return -1;
	summarize(job, &t->s, rc);
	t->peak = max_peak(job);
	t->coll = calloc(job->naggs ? job->naggs : 1, sizeof *t->coll);
	t->ranks = calloc(job->nranks ? job->nranks : 1, sizeof *t->ranks);
	if (!t->coll || !t->ranks) {
		free(rc);
		return -1;
	}
	for (size_t i = 0; i < job->naggs; i++)
		arow_of(job, &job->aggs[i], &t->coll[i]);
	for (size_t i = 0; i < job->nranks; i++) {
		const struct an_rank *r = &job->ranks[i];
		if (!r->ok)
			continue;
		struct an_rrow *w = &t->ranks[t->nranks++];
		w->r = r;
		w->x = &job->rx[i];
		w->rank = an_rank_id(job, i);
		w->gpu = r->kind_count[NVLP_K_KERNEL] != 0;
		w->wall_ns = (double)an_rank_wall(r);
		w->comm = rc[i];
		an_rank_exposure(job, r, &w->exposed_ns, &w->span_ns, NULL);
	}
	free(rc);
	by_rank_rows(job, t);
	return 0;
}

void an_tables_free(struct an_tables *t)
{
	free(t->coll);
	free(t->ranks);
	free(t->by_rank);
}

const char *an_pair_path(const struct an_pair *p)
{
	if (p->staged_copies && p->staged_copies < p->api_copies)
		return "mixed";
	if (p->staged_copies)
		return "staged-host";
	return "nvlink-p2p";
}

double an_pair_gbps(const struct an_pair *p)
{
	if (p->p2p_gpu_ns && !p->staged_copies)
		return (double)p->p2p_bytes / (double)p->p2p_gpu_ns;
	if (p->staged_copies == p->api_copies && p->staged_ns)
		return (double)p->staged_bytes / (double)p->staged_ns; /* host time in the calls */
	if (p->sync_ns)
		return (double)p->sync_bytes / (double)p->sync_ns;
	return NAN;
}

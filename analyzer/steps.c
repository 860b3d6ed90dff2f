/* steps.c: the training step: the period of the repeating collective pattern, the step window
 * (steady-state steps, setup excluded) and the exposed communication inside it. */
#include <stdlib.h> /* calloc, qsort */

#include "model.h"
#include "stages.h"

static const struct an_call
    *seq_calls; /* qsort has no context argument; analysis is single-threaded here */
static int cmp_by_seq(const void *a, const void *b)
{
	uint32_t x = seq_calls[*(const uint32_t *)a].seq, y = seq_calls[*(const uint32_t *)b].seq;
	return x < y ? -1 : x > y;
}

/* The period of the repeating collective pattern on the busiest comm of the first rank. */
static void find_period(struct an_job *job)
{
	struct an_rank *r = &job->ranks[0];
	if (!r->ok || !r->ncalls)
		return;
	size_t *cnt = calloc(job->ncomms + 1, sizeof *cnt);
	if (!cnt)
		return;
	for (size_t k = 0; k < r->ncalls; k++)
		cnt[r->calls[k].comm]++;
	uint16_t main = 0;
	for (size_t c = 1; c < job->ncomms; c++)
		if (cnt[c] > cnt[main])
			main = (uint16_t)c;
	size_t n = cnt[main];
	free(cnt);
	uint32_t *ix = malloc(n * sizeof *ix);
	if (!ix)
		return;
	size_t m = 0;
	for (size_t k = 0; k < r->ncalls; k++)
		if (r->calls[k].comm == main)
			ix[m++] = (uint32_t)k;
	/* calls from several threads are in file order, not issue order: order them by seq */
	seq_calls = r->calls;
	size_t unsorted = 0;
	for (size_t i = 1; i < m && !unsorted; i++)
		unsorted = r->calls[ix[i]].seq < r->calls[ix[i - 1]].seq;
	if (unsorted) /* one thread's calls are in order already: no sort (glibc's is stable) */
		qsort(ix, m, sizeof *ix, cmp_by_seq);
	/* skip the first calls (setup broadcasts); the steady pattern must repeat >= 3 times */
	size_t skip = m / 10;
	for (int p = 1; p <= 256 && (size_t)p * 3 <= m - skip; p++) {
		size_t same = 0, tot = 0;
		for (size_t i = skip; i + p < m; i++) {
			struct an_call *a = &r->calls[ix[i]], *b = &r->calls[ix[i + p]];
			tot++;
			same += a->fn == b->fn && a->bytes == b->bytes;
		}
		if (tot && same >= tot * 95 / 100) {
			size_t k = (m - 1 - skip) / p;
			if (k >= 2) {
				uint64_t t0 = r->calls[ix[skip]].t_enter;
				double ta = (double)t0, tb = (double)r->calls[ix[skip + k * p]].t_enter;
				job->step_ns = tb > ta ? (tb - ta) / k : 0;
				job->steps = m / p;
				/* the step window: from the first steady-state step to the end of
				 * the last call */
				const struct an_call *last = &r->calls[ix[m - 1]];
				uint64_t e = last->t_enter + last->host_dur;
				if (last->gpu_start && last->gpu_start + last->gpu_dur > e)
					e = last->gpu_start + last->gpu_dur;
				if (job->step_ns > 0 && e > t0) {
					job->win0 = an_job_time(r, t0);
					job->win1 = an_job_time(r, e);
				}
			}
			break;
		}
	}
	free(ix);
}

void an_steps_find(struct an_job *job)
{
	find_period(job);
	/* exposure inside the step window, per GPU (intervals are already merged and sorted) */
	for (size_t f = 0; job->win1 && f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		uint64_t a = job->win0 - (uint64_t)r->offset, b = job->win1 - (uint64_t)r->offset;
		for (size_t d = 0; d < r->ndevs; d++) {
			struct an_dev *v = &r->devs[d];
			size_t pos = 0;
			for (size_t i = 0; i < v->nccl.n; i++) {
				uint64_t s = v->nccl.v[i].s > a ? v->nccl.v[i].s : a;
				uint64_t e = v->nccl.v[i].e < b ? v->nccl.v[i].e : b;
				if (e <= s)
					continue;
				v->win_nccl_ns += e - s;
				v->win_exposed_ns += (e - s) - an_ivals_covered(&v->compute, &pos, s, e);
			}
		}
	}
}

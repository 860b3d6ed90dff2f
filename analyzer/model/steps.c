/* steps.c: the training step: from the job's step marks or a repeating collective pattern that
 * its regularity proves, the step window (steady-state steps, setup excluded) and the exposed
 * communication inside it. */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* calloc, qsort */
#include <string.h> /* strcmp */

#include "model/model.h"
#include "model/stages.h"

static const struct an_call
    *seq_calls; /* qsort has no context argument; analysis is single-threaded here */
static int cmp_by_seq(const void *a, const void *b)
{
	uint32_t x = seq_calls[*(const uint32_t *)a].seq, y = seq_calls[*(const uint32_t *)b].seq;
	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* torch.profiler's steps seen through CUPTI (an_rank.umarks): the outermost user ranges of the
 * thread that made the earliest one become the step marks. That is the thread calling
 * prof.step(): the profiler starts pushing ids there, with ProfilerStep#N, and every other
 * range of the step nests inside it or comes later. Other threads have outermost ranges of
 * their own, often more: DDP's bucket all-reduces run on the autograd thread, 3 per step against
 * 1 ProfilerStep in HF GPT-2 on one H200 (tests/gpu/results/run9.txt). */
static void umarks_resolve(struct an_rank *r)
{
	if (r->mark_src != 2 || r->nmarks || !r->numarks)
		return;
	size_t first = 0;
	for (size_t i = 1; i < r->numarks; i++)
		if (r->umarks[i].t < r->umarks[first].t)
			first = i;
	uint64_t tid = r->umarks[first].tid;
	for (size_t i = 0; i < r->numarks; i++)
		if (r->umarks[i].tid == tid &&
		    an_steps_mark(r, r->umarks[i].t, "ProfilerStep via CUPTI") < 0)
			return; /* out of memory: the marks so far */
}

/* Steps from marks: the first process with at least two (ranks mark the same steps); a step is
 * the time from one mark to the next. @return 1 if found */
static int from_marks(struct an_job *job)
{
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (r->ok)
			umarks_resolve(r);
		if (!r->ok || r->nmarks < 2)
			continue;
		qsort(r->marks, r->nmarks, sizeof *r->marks, cmp_u64);
		uint64_t a = r->marks[0], b = r->marks[r->nmarks - 1];
		if (b <= a)
			continue;
		job->steps = r->nmarks - 1;
		job->step_ns = (double)(b - a) / (double)job->steps;
		job->win0 = an_job_time(r, a);
		job->win1 = an_job_time(r, b);
		job->step_source = "marks";
		snprintf(job->steps_why, sizeof job->steps_why, "marked by the job (%s)",
		         r->mark_name[0] ? r->mark_name : "step marks");
		return 1;
	}
	return 0;
}

AN_DEFINE_NTH(nth_double, double)

/* Is a pattern of k repetitions starting at st[0..k] regular enough to be steps? 0 = yes, else
 * steps_why says which test failed. */
static int irregular(struct an_job *job, const double *th, const uint64_t *st, size_t k, int *brief)
{
	if ((double)k < th[AN_TH_step_min_count]) {
		snprintf(job->steps_why, sizeof job->steps_why,
		         "a pattern of %d collective(s) repeats only %zu times (step_min_count %g)",
		         job->step_calls, k, th[AN_TH_step_min_count]);
		return 1;
	}
	double *d = k ? malloc(k * sizeof *d) : NULL;
	if (!d)
		return 1;
	for (size_t j = 0; j < k; j++)
		d[j] = (double)(st[j + 1] - st[j]);
	double med = nth_double(d, k, k / 2);
	/* the usual answer on millions of small calls: no pass for the share below */
	if (med < th[AN_TH_step_min_ms] * 1e6) {
		free(d);
		*brief = 1;
		snprintf(job->steps_why, sizeof job->steps_why,
		         "%zu repetitions of %d collective(s) last %.3f ms each (median), below "
		         "step_min_ms %g: a loop, not training steps",
		         k, job->step_calls, med / 1e6, th[AN_TH_step_min_ms]);
		return 1;
	}
	size_t near = 0;
	for (size_t j = 0; j < k; j++)
		near += d[j] >= 0.75 * med && d[j] <= 1.25 * med;
	free(d);
	if ((double)near < th[AN_TH_step_regular_share] * (double)k) {
		snprintf(job->steps_why, sizeof job->steps_why,
		         "%zu repetitions of %d collective(s) vary in length: %.0f%% within 25%% of the "
		         "median %.3f ms (step_regular_share %g)",
		         k, job->step_calls, 100.0 * (double)near / (double)k, med / 1e6,
		         th[AN_TH_step_regular_share]);
		return 1;
	}
	return 0;
}

/* A call that returned an error ends no step (kept in calls for hang matching only). */
static int failed_call(const struct an_job *job, const struct an_rank *r, const struct an_call *c)
{
	for (size_t i = 0; i < r->nfailed; i++)
		if (r->failed[i].seq == c->seq && r->failed[i].hash == job->comms[c->comm].hash)
			return 1;
	return 0;
}

/* The communicator with the most calls on rank 0 and its call count; 0 when out of memory. Each
 * pass over the calls counts on a trace of millions of small calls: one comm needs no counting. */
static int busiest_comm(const struct an_job *job, const struct an_rank *r, uint32_t *main,
                        size_t *n)
{
	*main = 0;
	*n = r->ncalls;
	if (job->ncomms <= 1)
		return 1;
	size_t *cnt = calloc(job->ncomms + 1, sizeof *cnt);
	if (!cnt)
		return 0;
	for (size_t k = 0; k < r->ncalls; k++)
		cnt[r->calls[k].comm]++;
	for (size_t c = 1; c < job->ncomms; c++)
		if (cnt[c] > cnt[*main])
			*main = (uint32_t)c;
	*n = cnt[*main];
	free(cnt);
	return 1;
}

/* Rank 0's calls of one communicator, in issue order, with what the gathering pass learnt. */
struct gathered {
	uint32_t *ix; /* indexes into r->calls, ordered by seq */
	size_t m;
	uint64_t *te;       /* their t_enter when gathered in order, else NULL */
	size_t same1, tot1; /* the period-1 test, valid while te is set */
};

/* Gathers the calls of comm `main` that did not fail; 0 when out of memory. The order check
 * rides on the gathering. */
static int gather_calls(const struct an_job *job, const struct an_rank *r, uint32_t main, size_t n,
                        struct gathered *g)
{
	g->ix = malloc((n ? n : 1) * sizeof *g->ix);
	if (!g->ix)
		return 0;
	g->m = 0;
	int unsorted = 0;
	/* No failed call: all n are gathered, so the skip below is known now and the gathering
	 * pass also tests period 1 and keeps the times it would read (the usual answer on a
	 * trace of many small calls: two fewer passes over the calls). */
	g->te = !r->nfailed ? malloc((n ? n : 1) * sizeof *g->te) : NULL;
	size_t skip0 = n / 10;
	g->same1 = g->tot1 = 0;
	const struct an_call *pc = NULL;
	for (size_t k = 0; k < r->ncalls; k++)
		if (r->calls[k].comm == (int32_t)main &&
		    (!r->nfailed || !failed_call(job, r, &r->calls[k]))) {
			const struct an_call *c = &r->calls[k];
			/* calls from several threads are in file order, not issue order */
			unsorted |= g->m && c->seq < pc->seq;
			if (g->te) {
				g->te[g->m] = c->t_enter;
				if (g->m > skip0) {
					g->tot1++;
					g->same1 += pc->fn == c->fn && pc->bytes == c->bytes;
				}
			}
			pc = c;
			g->ix[g->m++] = (uint32_t)k;
		}
	/* order them by seq */
	seq_calls = r->calls;
	if (unsorted) { /* one thread's calls are in order already: no sort (glibc's is stable) */
		qsort(g->ix, g->m, sizeof *g->ix, cmp_by_seq);
		free(g->te); /* in file order: of no use */
		g->te = NULL;
	}
	return 1;
}

/* Whether the calls repeat with period p: >= 95% of calls match the call p later in function
 * and size. */
static int repeats_with(const struct an_rank *r, const struct gathered *g, size_t skip, int p)
{
	size_t same = 0, tot = 0;
	if (p == 1 && g->te) {
		same = g->same1;
		tot = g->tot1;
	} else
		for (size_t i = skip; i + p < g->m; i++) {
			struct an_call *a = &r->calls[g->ix[i]], *b = &r->calls[g->ix[i + p]];
			tot++;
			same += a->fn == b->fn && a->bytes == b->bytes;
		}
	return tot && same >= tot * 95 / 100;
}

/* Whether the k steps of p calls from `skip` on start in time order and regularly. */
static int steps_regular(struct an_job *job, const double *th, const struct an_rank *r,
                         const struct gathered *g, size_t skip, int p, size_t k, int *brief)
{
	int own = !(p == 1 && g->te); /* else the times gathered above */
	uint64_t *st = own ? malloc((k + 1) * sizeof *st) : g->te + skip;
	int bad = !st;
	for (size_t j = 0; st && own && j <= k; j++)
		st[j] = r->calls[g->ix[skip + j * p]].t_enter;
	for (size_t j = 0; st && j < k && !bad; j++)
		bad = st[j + 1] < st[j]; /* seq order is not time order: no steps */
	if (!bad)
		bad = irregular(job, th, st, k, brief);
	if (own)
		free(st);
	return !bad;
}

/* Whether repetitions of p calls too brief to be steps come in bursts: every call alike (DDP's
 * buckets of one size, FSDP's layers of one size) and the step the gap between bursts. The
 * smallest multiple q of p (<= 256, >= 3 repetitions) whose calls leave one long gap a period, at
 * the same place in each: on the mean at least 4 times the median gap between calls and twice
 * the next place's, and 90% of the gaps there at least twice that median. Returns q, with
 * *phase the index after `skip` of the first call after such a gap; 0 when none (a loop with no
 * gaps, as nccl-tests). */
static int burst_period(const struct an_rank *r, const struct gathered *g, size_t skip, int p,
                        size_t *phase)
{
	size_t n = g->m > skip + 1 ? g->m - skip - 1 : 0; /* gaps */
	if (n < 6)
		return 0;
	double *gap = malloc(n * sizeof *gap), *tmp = malloc(n * sizeof *tmp);
	double *sum = calloc(256, sizeof *sum);
	int q = 0;
	for (size_t i = 0; gap && tmp && sum && i < n; i++) {
		uint64_t a = r->calls[g->ix[skip + i]].t_enter, b = r->calls[g->ix[skip + i + 1]].t_enter;
		if (b < a) /* seq order is not time order: no steps */
			goto out;
		gap[i] = tmp[i] = (double)(b - a);
	}
	if (!gap || !tmp || !sum)
		goto out;
	double med = nth_double(tmp, n, n / 2);
	if (med < 1)
		med = 1;
	for (int c = 2 * p; c <= 256 && (size_t)c * 3 <= n; c += p) {
		memset(sum, 0, (size_t)c * sizeof *sum);
		for (size_t i = 0; i < n; i++)
			sum[i % (size_t)c] += gap[i];
		int top = 0;
		for (int f = 1; f < c; f++)
			top = sum[f] > sum[top] ? f : top;
		double second = 0;
		for (int f = 0; f < c; f++)
			second = f != top && sum[f] > second ? sum[f] : second;
		size_t cnt = (n - (size_t)top + (size_t)c - 1) / (size_t)c, wide = 0;
		if (sum[top] / (double)cnt < 4 * med || sum[top] < 2 * second)
			continue;
		for (size_t i = (size_t)top; i < n; i += (size_t)c)
			wide += gap[i] >= 2 * med;
		if (wide * 10 >= cnt * 9) {
			q = c;
			*phase = ((size_t)top + 1) % (size_t)c;
			break;
		}
	}
out:
	free(gap);
	free(tmp);
	free(sum);
	return q;
}

/* Records steps of p calls of comm `main`: their length, count and the step window. */
static void set_pattern_steps(struct an_job *job, const struct an_rank *r, const struct gathered *g,
                              uint32_t main, size_t skip, int p, size_t k)
{
	job->step_comm = main;
	uint64_t t0 = r->calls[g->ix[skip]].t_enter;
	double ta = (double)t0, tb = (double)r->calls[g->ix[skip + k * p]].t_enter;
	job->step_ns = tb > ta ? (tb - ta) / k : 0;
	job->steps = g->m / p;
	/* the step window: from the first steady-state step to the end of the last call */
	const struct an_call *last = &r->calls[g->ix[g->m - 1]];
	/* a last call that hung or failed after seconds ends no step: its host time counts up
	 * to one step */
	uint64_t hd = last->host_dur;
	if (job->step_ns > 0 && hd > job->step_ns)
		hd = (uint64_t)job->step_ns;
	uint64_t e = last->t_enter + hd;
	if (last->gpu_start && last->gpu_start + last->gpu_dur > e)
		e = last->gpu_start + last->gpu_dur;
	if (job->step_ns > 0 && e > t0) {
		job->win0 = an_job_time(r, t0);
		job->win1 = an_job_time(r, e);
	}
	job->step_source = "pattern";
	snprintf(job->steps_why, sizeof job->steps_why, "a repeating pattern of %d collective(s)",
	         p);
}

/* The period of the repeating collective pattern on the busiest comm of the first rank, accepted
 * only when regular (irregular()). */
static void find_period(struct an_job *job, const double *th)
{
	struct an_rank *r = &job->ranks[0];
	if (!r->ok || !r->ncalls)
		return;
	uint32_t main;
	size_t n;
	struct gathered g;
	if (!busiest_comm(job, r, &main, &n) || !gather_calls(job, r, main, n, &g))
		return;
	/* skip the first calls (setup broadcasts); the steady pattern must repeat >= 3 times */
	size_t skip = g.m / 10;
	for (int p = 1; p <= 256 && (size_t)p * 3 <= g.m - skip; p++)
		if (repeats_with(r, &g, skip, p)) {
			size_t k = (g.m - 1 - skip) / p, ph = 0;
			int brief = 0, q;
			job->step_calls = p;
			if (steps_regular(job, th, r, &g, skip, p, k, &brief))
				set_pattern_steps(job, r, &g, main, skip, p, k);
			else if (brief && (q = burst_period(r, &g, skip, p, &ph)) > 0) {
				/* steps of q calls, from the first call after a gap */
				k = (g.m - 1 - skip - ph) / (size_t)q;
				job->step_calls = q;
				if (steps_regular(job, th, r, &g, skip + ph, q, k, &brief))
					set_pattern_steps(job, r, &g, main, skip + ph, q, k);
			}
			break;
		}
	free(g.ix);
	free(g.te);
}

/* The step each process was in at its last record (1-based), and the steps it completed: its
 * marks before then, or its calls of the pattern's communicator over the calls per step. A
 * process that completed every step "was in" the last one. */
static void end_steps(struct an_job *job)
{
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		r->end_step = r->steps_done = 0;
		if (!r->ok || !job->steps)
			continue;
		uint64_t done = 0;
		if (job->step_comm < 0) {
			uint64_t last = an_job_time(r, r->t_last);
			for (size_t i = 0; i < r->nmarks; i++)
				done += an_job_time(r, r->marks[i]) <= last;
			done = done ? done - 1 : 0; /* a step is the time from one mark to the next */
		} else if (job->step_calls > 0) {
			/* a rank waiting in a hang on the steps' communicator did not complete the
			 * step of the collective it waits in (its call returned: NCCL is async) */
			uint32_t upto = UINT32_MAX;
			int id = r->rank >= 0 ? r->rank : (int)f;
			for (size_t h = 0; h < job->nhangs; h++)
				if (job->hangs[h].comm == job->step_comm && job->hangs[h].seq < upto &&
				    an_hang_member(&job->hangs[h], id) == AN_HANG_PRESENT)
					upto = job->hangs[h].seq;
			uint64_t n = 0;
			for (size_t k = 0; k < r->ncalls; k++)
				n += r->calls[k].comm == job->step_comm && r->calls[k].seq < upto &&
				     !failed_call(job, r, &r->calls[k]);
			done = n / (uint64_t)job->step_calls;
		}
		if (done > job->steps)
			done = job->steps;
		r->steps_done = done;
		r->end_step = done < job->steps ? done + 1 : job->steps;
	}
}

int an_steps_find(struct an_job *job)
{
	const double *th = job->th ? job->th : an_threshold_defaults;
	job->step_comm = -1;
	job->step_source = "none";
	snprintf(job->steps_why, sizeof job->steps_why, "no repeating pattern of collectives");
	if (!from_marks(job)) {
		find_period(job, th);
		if (!job->win1) { /* a pattern that failed its tests leaves no steps at all */
			job->step_ns = 0;
			job->steps = 0;
			job->step_source = "none";
		}
	}
	end_steps(job);
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
			v->win_comm_ns = v->win_nccl_ns;
			if (v->comm.n) {
				pos = 0;
				v->win_comm_ns = an_ivals_covered(&v->comm, &pos, a, b);
			}
		}
	}
	return 0;
}

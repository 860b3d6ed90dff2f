/* totals.c: what the job adds up to once its clocks are aligned: its time span, the aggregates per
 * (communicator, function) over all ranks, and NCCL's choices over the job. */
#include <stdlib.h> /* calloc, qsort */
#include <string.h> /* memset, strcmp */

#include "model/model.h"
#include "model/stages.h" /* an_job_time, PUSH */
#include "nvlp_trace.h"
#include "util/containers.h" /* AN_CMP_KEY */

/* The job's time span (t0, t1) and the latest instant a rank was alive (t_alive1). */
int an_job_span(struct an_job *job)
{
	job->t0 = UINT64_MAX;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (!r->ok || !r->t_last)
			continue;
		uint64_t a = an_job_time(r, r->t_first), b = an_job_time(r, r->t_last);
		if (a < job->t0)
			job->t0 = a;
		if (b > job->t1)
			job->t1 = b;
	}
	if (job->t0 == UINT64_MAX)
		job->t0 = job->t1 = 0;
	job->t_alive1 = job->t1; /* ends told ms after t0 stay inside [t0, t_alive1] */
	for (size_t f = 0; job->t1 && f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		uint64_t b = r->ok && r->t_last ? an_job_time(r, r->t_alive) : 0;
		if (b > job->t_alive1 && b - job->t1 <= AN_MAX_LIFE_NS)
			job->t_alive1 = b;
	}
	return 0;
}

static int choice_cmp(const void *a, const void *b)
{
	const struct an_jchoice *x = a, *y = b;
	AN_CMP_KEY(x, y, comm);
	AN_CMP_KEY(x, y, fn);
	return x->calls > y->calls ? -1 : x->calls < y->calls;
}

/* NCCL's choices over the job: communicators identified through the shim's hash (records made
 * before it was known take it from the others of the same NCCL communicator). */
int an_choices_build(struct an_job *job)
{
	size_t cap = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->nchoices; i++)
			for (size_t k = 0; !r->choices[i].comm && k < r->nchoices; k++)
				if (r->choices[k].comm && r->choices[k].nccl_comm == r->choices[i].nccl_comm)
					r->choices[i].comm = r->choices[k].comm;
		for (size_t i = 0; i < r->nchoices; i++) {
			const struct an_choice *x = &r->choices[i];
			int ci = -1;
			for (size_t k = 0; x->comm && k < job->ncomms; k++)
				if (job->comms[k].hash == x->comm)
					ci = (int)k;
			struct an_jchoice *j = NULL;
			for (size_t k = 0; k < job->nchoices && !j; k++)
				if (job->choices[k].comm == ci && job->choices[k].fn == x->fn &&
				    !strcmp(job->choices[k].algo, x->algo) &&
				    !strcmp(job->choices[k].proto, x->proto))
					j = &job->choices[k];
			if (!j) {
				j = PUSH(job->choices, job->nchoices, cap);
				if (!j)
					return -1;
				memset(j, 0, sizeof *j);
				j->comm = ci;
				j->fn = x->fn;
				memcpy(j->algo, x->algo, sizeof j->algo);
				memcpy(j->proto, x->proto, sizeof j->proto);
				j->ch_min = j->ch_max = x->channels;
			}
			j->calls += x->calls;
			if (x->channels < j->ch_min)
				j->ch_min = x->channels;
			if (x->channels > j->ch_max)
				j->ch_max = x->channels;
		}
	}
	if (job->nchoices > 1)
		qsort(job->choices, job->nchoices, sizeof *job->choices, choice_cmp);
	return 0;
}

/* Aggregates per (comm, fn) over all ranks. */
int an_aggregate(struct an_job *job)
{
	size_t na = job->ncomms * NVLP_NCCL_FN_COUNT;
	struct an_agg *all = job->agg_host; /* the sums, if ctab.c made them */
	job->agg_host = NULL;
	int pass = !all || job->agg_gpu; /* no sums yet, or GPU times to add: all in one pass */
	if (all && pass)
		memset(all, 0, (na ? na : 1) * sizeof *all);
	if (!all && !(all = calloc(na ? na : 1, sizeof *all)))
		return -1;
	for (size_t f = 0; pass && f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		for (size_t k = 0; k < r->ncalls; k++) {
			struct an_call *c = &r->calls[k];
			struct an_agg *a = &all[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
			a->calls++;
			a->bytes += c->bytes;
			a->host_ns += c->host_dur;
			if (c->gpu_start) {
				a->calls_gpu++;
				a->gpu_ns += c->gpu_dur;
				a->xfer_ns += an_call_xfer_ns(job, c);
				a->bytes_gpu += c->bytes;
			}
		}
	}
	uint64_t gpu_calls = 0;
	for (size_t i = 0; i < na; i++)
		gpu_calls += all[i].calls_gpu;
	job->calls_gpu_none = !gpu_calls; /* without a pass: ctab.c's sums were of such calls */
	for (size_t i = 0; i < na; i++)
		if (all[i].calls) {
			all[i].comm = (int32_t)(i / NVLP_NCCL_FN_COUNT);
			all[i].fn = (uint8_t)(i % NVLP_NCCL_FN_COUNT);
			all[job->naggs++] = all[i];
		}
	job->aggs = all;
	return 0;
}


/* gpu.c: the per-GPU time split of every process, in parallel: compute, NCCL and communication
 * intervals merged, exposed communication (NCCL time not hidden under compute) and the link bytes
 * during collectives. */
#include <stdatomic.h> /* atomic_fetch_add */
#include <stdlib.h>    /* qsort, free */
#include <unistd.h>    /* sysconf */

#include "model/model.h"
#include "model/stages.h"
#include "util/containers.h"
#include "util/util.h" /* nvlp_run_parallel */

static int cmp_sample(const void *a, const void *b)
{
	const struct an_sample *x = a, *y = b;
	return x->s < y->s ? -1 : x->s > y->s;
}

/* The GPU intervals of r's calls on device dev (those NCCL's kernel channels timed, and CUPTI's,
 * already in nccl: a union takes them once) appended to iv (out of memory: fewer) */
static void push_calls(struct an_ivals *iv, const struct an_rank *r, int dev)
{
	for (size_t k = 0; k < r->ncalls; k++) {
		const struct an_call *c = &r->calls[k];
		if (c->gpu_start && c->gpu_dur && c->device == dev)
			an_ivals_push(iv, c->gpu_start, c->gpu_start + c->gpu_dur);
	}
}

static void analyze_dev(const struct an_rank *r, struct an_dev *d)
{
	an_ivals_union(&d->compute);
	d->union_nccl_ns = an_ivals_union(&d->nccl);
	d->union_comm_ns = d->union_nccl_ns;
	if (r->kch_timed) {
		/* the calls' intervals (in call order: a sort only when streams interleave), merged
		 * with the kernels' in one pass */
		struct an_ivals c = {0};
		push_calls(&c, r, d->device);
		an_ivals_union(&c);
		size_t i = 0, j = 0;
		while (i < c.n || j < d->nccl.n) {
			const struct an_ival *x =
			    j >= d->nccl.n || (i < c.n && c.v[i].s < d->nccl.v[j].s) ? &c.v[i++]
			                                                             : &d->nccl.v[j++];
			an_ivals_push(&d->comm, x->s, x->e);
		}
		free(c.v);
		if (d->comm.n)
			d->union_comm_ns = an_ivals_union(&d->comm);
	}
	size_t pos = 0;
	uint64_t hidden = 0;
	for (size_t i = 0; i < d->nccl.n; i++)
		hidden += an_ivals_cover(&d->compute, &pos, d->nccl.v[i].s, d->nccl.v[i].e);
	d->exposed_ns = d->union_nccl_ns - hidden;
	for (size_t i = 1; i < d->nsamples; i++)
		if (d->samples[i].s < d->samples[i - 1].s) {
			qsort(d->samples, d->nsamples, sizeof *d->samples, cmp_sample);
			break;
		}
	pos = 0;
	for (size_t i = 0; i < d->nsamples; i++) {
		struct an_sample *s = &d->samples[i];
		if (s->e <= s->s)
			continue;
		/* Samples (1-20 ms; NVML's every 100 ms) are coarser than most collectives (0.1-1
		 * ms), so a time-weighted split would hide collective traffic: a sample that overlaps
		 * a collective counts whole (test_link_coarse: the findings of real jobs stay the
		 * same with 100 ms samples). */
		if (an_ivals_cover(d->comm.n ? &d->comm : &d->nccl, &pos, s->s, s->e)) {
			d->nvl_coll += s->nvl;
			d->pcie_coll += s->pcie;
		}
	}
}

struct dev_worker_arg {
	struct an_job *job;
	atomic_size_t next;
};
static void *dev_worker(void *arg)
{
	struct dev_worker_arg *a = arg;
	size_t i;
	while ((i = atomic_fetch_add(&a->next, 1)) < a->job->nranks) {
		struct an_rank *r = &a->job->ranks[i];
		for (size_t d = 0; d < r->ndevs; d++)
			analyze_dev(r, &r->devs[d]);
	}
	return NULL;
}


int an_devs_analyze(struct an_job *job)
{
	struct dev_worker_arg a = {.job = job};
	atomic_init(&a.next, 0);
	long np = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = np > 1 ? (size_t)np : 1;
	nt = nt < 64 ? nt : 64;
	nvlp_run_parallel(dev_worker, &a, nt < job->nranks ? nt : job->nranks);
	return 0;
}

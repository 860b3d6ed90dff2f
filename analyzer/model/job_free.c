/* job_free.c: everything a job holds freed, the model's and each stage's tables (the one function
 * that knows them all; no stage calls it). */
#include <stdlib.h> /* free */
#include <string.h> /* memset */

#include "load/graphs.h"    /* an_graphs_file_free */
#include "load/kernelch.h"  /* an_kch_file_free */
#include "model/graphs.h"   /* an_graphs_free */
#include "model/kernelch.h" /* an_kch_free */
#include "model/model.h"
#include "model/stages.h" /* an_index_free, an_sym_free */

/* The hangs' rank lists, the host and rank-number tables (hosts.c's) */
static void free_hosts_hangs(struct an_job *job)
{
	for (size_t i = 0; i < job->nhangs; i++) {
		free(job->hangs[i].missing);
		free(job->hangs[i].present);
	}
	free(job->hangs);
	an_index_free(&job->rank_ix);
	free(job->by_host);
	free(job->host_at);
}

void an_job_free(struct an_job *job)
{
	free(job->agg_host);
	an_kch_free(job);
	an_graphs_free(job);
	for (size_t f = 0; f < job->nranks + job->nothers; f++) {
		struct an_rank *r = &job->ranks[f];
		free(r->path);
		free(r->header);
		free(r->calls);
		free(r->csig);
		free(r->csigs);
		free(r->comms);
		for (size_t d = 0; d < r->ndevs; d++) {
			free(r->devs[d].compute.v);
			free(r->devs[d].nccl.v);
			free(r->devs[d].comm.v);
			free(r->devs[d].samples);
		}
		free(r->devs);
		free(r->pairs);
		free(r->allocs);
		free(r->notes);
		free(r->inflight);
		free(r->links);
		for (size_t i = 0; i < r->nmodules; i++)
			free(r->modules[i].path);
		free(r->modules);
		for (size_t i = 0; i < r->nstacks; i++)
			free(r->stacks[i].pc);
		free(r->stacks);
		an_sym_free(r);
		free(r->choices);
		an_kch_file_free(r);
		an_graphs_file_free(r);
		free(r->marks);
		free(r->umarks);
		free(r->cnames);
		free(r->failed);
		for (size_t i = 0; i < r->npystacks; i++)
			free(r->pystacks[i].text);
		free(r->pystacks);
		free(r->pyrefs);
	}
	free(job->ranks);
	free(job->choices);
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		free(job->comms[ci].xfer);
		free(job->comms[ci].xfer_seq);
	}
	free(job->comms);
	free(job->aggs);
	free_hosts_hangs(job);
	free(job->mismatches);
	free(job->rx);
	memset(job, 0, sizeof *job);
}

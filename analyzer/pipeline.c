/* pipeline.c: the order of the analyzer's stages, in one place. A job is
 *   loaded      load/ingest.c: every file in parallel, one handler per record; each NCCL call
 *               matched to its kernels as the file is read (load/match.c); the processes
 *               ordered, hosts numbered and ranks indexed (load/order.c);
 *   checked     the files' warnings, and whether the traces hold several jobs (model/hosts.c);
 *   analysed    the stages of `analysis` below, in that order;
 *   diagnosed   the findings (findings/).
 * A stage returns a status and never prints: what is to be said goes through util/diag.h. */
#include "pipeline.h"

#include <stdio.h> /* snprintf */

#include "findings/findings.h"
#include "model/graphs.h"   /* an_graphs_apply */
#include "model/kernelch.h" /* an_kch_apply */
#include "model/model.h"
#include "model/stages.h"
#include "util/diag.h"

/* One stage of the analysis: needed, when the stages after it cannot run without it. */
struct stage {
	const char *what;
	int (*run)(struct an_job *job);
	int needed;
};
static const struct stage analysis[] = {
    {"communicators: calls renumbered to the job's table, clock anchors", an_align_comms, 1},
    {"kernel channels: collectives' GPU times from NCCL's stamps", an_kch_apply, 0},
    {"CUDA graphs: captured calls executed per replay", an_graphs_apply, 0},
    {"per-GPU split: compute, NCCL and exposed time, link bytes", an_devs_analyze, 0},
    {"cross-rank: clocks refined, skew, waits, transfer times, hangs", an_align_cross_rank, 0},
    {"span: the job's first and last instants", an_job_span, 0},
    {"aggregates per (communicator, function)", an_aggregate, 0},
    {"steps: from marks or a proven pattern, and the step window", an_steps_find, 0},
    {"NCCL's choices over the job", an_choices_build, 0},
};

int an_job_analyze(struct an_job *job)
{
	for (size_t i = 0; i < sizeof analysis / sizeof analysis[0]; i++)
		if (analysis[i].run(job) < 0 && analysis[i].needed)
			return -1;
	return 0;
}

/* The several-jobs check's warning (hosts.c finds the pair). */
static void job_mix_warn(struct an_job *job)
{
	size_t j, i;
	char why[320];
	if (!an_job_mix(job, &j, &i, why, sizeof why))
		return;
	const struct an_rank *a = &job->ranks[j], *r = &job->ranks[i];
	an_diag("nvlprof: warning: %s and %s: these traces hold several jobs: %s (give each run its "
	        "own directory)\n",
	        a->path ? a->path : "?", r->path ? r->path : "?", why);
	snprintf(job->several_jobs, sizeof job->several_jobs, "%s", why);
}

int an_open_job(char **paths, int npaths, int threads, const double *th, struct an_job *job,
                struct an_findings *f)
{
	char err[512];
	if (an_job_load(job, paths, npaths, threads, err, sizeof err) != 0) {
		an_diag("nvlprof: %s\n", err);
		an_job_free(job);
		return -1;
	}
	return an_open_loaded(th, job, f);
}

/* What loading said of each file: unreadable, damaged, cut short, records skipped. */
static void load_warnings(const struct an_job *job)
{
	for (size_t i = 0; i < job->nranks; i++) {
		const struct an_rank *r = &job->ranks[i];
		if (!r->ok)
			an_diag("nvlprof: skipping unreadable trace: %s\n", r->err);
		else if (r->frames_skipped)
			an_diag("nvlprof: warning: trace damaged, %u frame(s) skipped: %s\n",
			        r->frames_skipped, r->err);
		else if (r->truncated)
			an_diag("nvlprof: warning: trace cut short, used up to its end: %s\n", r->err);
		if (r->ok && r->nbad)
			an_diag("nvlprof: warning: %s: skipped (%llu bad record(s) in all)\n", r->bad,
			        (unsigned long long)r->nbad);
	}
}

/* What the analysis left out. */
static void analysis_warnings(const struct an_job *job)
{
	if (job->calls_dropped)
		an_diag("nvlprof: warning: more than %d communicators in the job: %llu calls of the "
		        "others skipped\n",
		        AN_MAX_COMMS, (unsigned long long)job->calls_dropped);
	if (job->comms_unmatched)
		an_diag("nvlprof: warning: out of memory: %llu communicator(s) not matched across "
		        "ranks\n",
		        (unsigned long long)job->comms_unmatched);
}

int an_open_loaded(const double *th, struct an_job *job, struct an_findings *f)
{
	load_warnings(job);
	job_mix_warn(job);
	job->th = th;
	an_job_analyze(job); /* out of memory in a stage: the findings of what was analysed */
	analysis_warnings(job);
	if (an_findings_compute(job, th, f) != 0) {
		an_diag("nvlprof: out of memory\n");
		an_job_free(job);
		return -1;
	}
	return 0;
}

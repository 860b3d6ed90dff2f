/* stages.h: the interfaces between the model's stages, in the order pipeline.c runs them: align
 * (communicators, clocks, cross-rank figures), the per-GPU work, the job's span, aggregates, steps
 * and NCCL's choices. It includes the generic containers (util/containers.h) and the load layer's
 * interface (load/load.h), which files written before the split take from here. Internal to
 * analyzer/. */
#ifndef NVLP_AN_STAGES_H
#define NVLP_AN_STAGES_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "load/load.h"
#include "model/model.h"
#include "util/containers.h"

/* job time of a local time t of process r */
static inline uint64_t an_job_time(const struct an_rank *r, uint64_t t)
{
	return t + (uint64_t)r->offset;
}

/* ---- align.c: communicators, clocks and cross-rank figures of the job ---- */
/*! The job's communicator table (calls' comm fields become job indices) and clock anchors.
 * @return 0, or -1 out of memory */
int an_align_comms(struct an_job *job);

/* hosts.c */
/* Completion differences (host h's clock minus anchor a's) of collectives both entered: one
 * edge per (anchor, host) pair. */
struct an_clock_edge {
	uint32_t a, h;
	int64_t *v;
	size_t n, cap;
	size_t nexit; /* differences from blocking calls' exits (no GPU time) */
	int ok;       /* 3 or more: med is their median */
	int64_t med;
};
struct an_clock_pairs {
	struct an_clock_edge *e;
	size_t n, cap;
	struct an_index ix;
};
/*! Add one difference. @return 0, or -1 out of memory */
int an_clock_pair_add(struct an_clock_pairs *p, uint32_t anchor, uint32_t host, int64_t d,
                      int by_exit);
void an_clock_pairs_free(struct an_clock_pairs *p);
/*! Sort a hang's rank lists (an_hang_member searches them) */
void an_hang_sort(struct an_hang *h);
/*! Each host's offset from the reference host's (host number ref), through the edges, applied
 * to its ranks (offset, refine; job->max_refine_ns and the hosts_by_* counts); frees p. */
void an_clock_solve(struct an_job *job, struct an_clock_pairs *p, uint32_t ref);
/* Several jobs in one directory (a trace directory reused across runs) mix their ranks into one
 * report: ranks that ran different programs (the executable), ranks on one host with different
 * parents (torchrun, mp.spawn and mpirun start a host's ranks from one process), or that started
 * far apart. */
#define AN_MIX_START_S 600
/*! The first pair (by the later rank, then the earlier) that looks like two jobs, and why.
 * @return 1 found, 0 none */
int an_job_mix(const struct an_job *job, size_t *a, size_t *r, char *why, size_t len);
/*! Clock refinement across hosts, then skew, lead, transfer time and hangs per collective.
 * @return 0, or -1 out of memory (job->comms_unmatched counts the communicators left out) */
int an_align_cross_rank(struct an_job *job);

/* ---- mismatch.c: collectives the ranks of a communicator called differently ---- */
/*! Row seq of communicator comm holds calls that differ (an_fn_collective or struct an_csig):
 * its n cells, each a file and its call index, become job->mismatches' entry for comm (hangs.c
 * notes the first row per communicator). @return 0, or -1 out of memory */
int an_mismatch_note(struct an_job *job, uint32_t comm, uint32_t seq, const int *file,
                     const uint32_t *k, int n);

/* ---- steps.c ---- */
/*! The job's steps and the step window with exposure in it: from step marks when a process has
 * them (an_steps_mark), else from the repeating collective pattern when its regularity proves it
 * (at least step_min_count repetitions of one sequence of collectives, step_min_ms long on the
 * median, step_regular_share of them within 25% of the median), else none (steps_why says why). */
int an_steps_find(struct an_job *job); /* @return 0 */

/* ---- gpu.c ---- */
/*! Every process's per-GPU split (compute, NCCL and communication unions, exposed time, link
 * bytes during collectives), the processes in parallel. @return 0 */
int an_devs_analyze(struct an_job *job);

/* ---- totals.c ---- */
/*! The job's time span (t0, t1, t_alive1) in job time. @return 0 */
int an_job_span(struct an_job *job);
/*! job->aggs: per (communicator, function) over all ranks. @return 0, -1 out of memory (none) */
int an_aggregate(struct an_job *job);
/*! job->choices: NCCL's choices over the job. @return 0, -1 out of memory (those so far) */
int an_choices_build(struct an_job *job);
#endif

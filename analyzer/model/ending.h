/* ending.h: how each process of a job ended (signal and thread, the OOM killer, no END record)
 * and where it was (the call in flight), as text the findings and the story print. */
#ifndef NVLP_AN_ENDING_H
#define NVLP_AN_ENDING_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "model/model.h"

/* An oom_kill count that rose in a cgroup, as one process's trace saw it (NOTE OOM_KILL). */
struct an_oom_rise {
	const struct an_rank *r; /* the process that noted it */
	uint64_t t;              /* job time of the note */
	int64_t from, to;        /* the count at its start, and noted */
};
/*! The rises the job's traces noted (ranks and others), one pass. @return a malloc'd array
 * (NULL when none: *n = 0) */
struct an_oom_rise *an_oom_rises(const struct an_job *job, size_t *n);

/*! 1 when r ended abnormally: no END record, a signal (FATAL or END's reason) or an exit
 * status > 0 */
int an_end_abnormal(const struct an_rank *r);
/*! How r ended, into how: "ended by SIGABRT (abort) in thread 4242 (pt_nccl_watchdg)", "killed
 * by the OOM killer (oom_kill 0 -> 1 in cgroup /x)", "ended without an END record (...)". rises:
 * from an_oom_rises. @return 1 if abnormal (how set), 0 (how empty) */
int an_end_how(const struct an_job *job, const struct an_rank *r, const struct an_oom_rise *rises,
               size_t nrises, char *how, size_t hl);
/*! The call r was in when it ended: its main thread's in-flight call, else the one entered
 * first; NULL none. */
const struct an_inflight *an_end_inflight(const struct an_rank *r);
/*! "ncclCommInitRank, 12.0 s in" / "ncclAllReduce #51 on comm 1234..., 3.2 s in (thread 77)" */
void an_inflight_text(const struct an_job *job, const struct an_rank *r,
                      const struct an_inflight *x, char *buf, size_t len);
/*! When r was last alive, ms after the job's start, inside [0, the job's span]. */
double an_end_ms(const struct an_job *job, const struct an_rank *r);

#endif /* NVLP_AN_ENDING_H */

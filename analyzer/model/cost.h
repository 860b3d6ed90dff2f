/* cost.h: what recording cost the job (COST records), and whether two runs were recorded alike. */
#ifndef AN_COST_H
#define AN_COST_H

#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */

struct an_job;
struct jw;

/* The job's cost, summed over the processes that have a COST record. */
struct an_cost {
	size_t ranks;        /* processes with a COST record (0: none, nothing to say) */
	uint64_t proc_cpu;   /* their CPU time, ns */
	uint64_t own_cpu;    /* of it, nvlprof's threads */
	uint64_t role_cpu[4]; /* by role: writer, CUPTI flush, link sampler, Python sampler */
	uint64_t hook_ns;    /* and nvlprof's code on the job's threads (estimated) */
	uint64_t mem_peak;   /* the largest process's peak, bytes */
	double bytes_per_s;  /* trace bytes per second per process (mean) */
	double share;        /* (own_cpu + hook_ns) / proc_cpu */
	uint64_t um_migrations; /* managed memory's migrations CUPTI counted (all processes) */
};
/*! Sum the job's COST records. @return the number of processes that had one. */
size_t an_cost_sum(const struct an_job *job, struct an_cost *c);
/*! The report's line ("nvlprof cost: ..."), nothing for traces without COST records. */
void an_cost_text(FILE *o, const struct an_job *job);
/*! The JSON "cost" object, nothing for traces without COST records. */
void an_cost_json(struct jw *w, const struct an_job *job);
/*! The value of capture setting NAME (header key NVLP_HDR_CAPTURE, e.g. "cupti") of the job's
 * first process that recorded the settings, into v; NULL when none did or it lacks NAME. */
const char *an_capture_setting(const struct an_job *j, const char *name, char *v, size_t len);
/*! diff: warn on stderr when the two runs were recorded with different capture settings. */
void an_cost_warn_capture(const struct an_job *before, const struct an_job *after);

#endif

/* load.h: the interfaces inside the load layer: ingest (records into per-process tables) calls
 * match (kernels to calls), symbols, the step marks and, once every file is read, the job's host
 * and rank numbering (order.c). Internal to analyzer/. */
#ifndef NVLP_AN_LOAD_H
#define NVLP_AN_LOAD_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "model/model.h" /* the job's tables */
#include "util/containers.h"

/* GPU records of work that never ran or never finished (job hung or killed) come with start
 * 0 or ~0 (-1 converted), or an end before the start: they carry no time. */
static inline int an_bad_gpu_time(uint64_t s, uint64_t d)
{
	return s == 0 || s > (1ull << 62) || d > 86400ull * 1000000000ull;
}

/* ---- match.c: NCCL kernels and calls of one process ---- */
struct an_match;
/*! Matching state for process r (its calls array is read and given GPU times). NULL: no memory. */
struct an_match *an_match_open(struct an_rank *r);
/*! ncclGroupStart (start = 1) / ncclGroupEnd (start = 0) on thread tid. */
void an_match_group(struct an_match *m, uint64_t tid, int start);
/*! Call r->calls[idx] (just added) was issued by tid at group depth group_depth on CUPTI stream
 * cs (0 = unknown): it waits for its kernel, or for the end of its group. */
void an_match_call(struct an_match *m, uint32_t idx, uint64_t tid, uint64_t group_depth,
                   uint64_t cs);
/*! An NCCL kernel [s, e) of collective kcoll (an_coll_of_kernel; -1 unknown) ran on (dev, stream);
 * s == 0: it never finished (its call keeps no GPU time). */
void an_match_kernel(struct an_match *m, int dev, uint64_t stream, uint64_t s, uint64_t e,
                     int kcoll);
/*! End of the file: open groups are flushed, units and kernels left over counted; frees m. */
void an_match_close(struct an_match *m);

/* ---- order.c: the loaded processes in report order, numbered by host and rank ---- */
/*! Number the job's hosts (an_rank.host_ix, job->nhosts) and index its rank numbers
 * (an_file_of_rank). @return 0, or -1 out of memory */
int an_hosts_number(struct an_job *job);
/*! @return how many hosts have a readable rank */
size_t an_hosts_of_ok(const struct an_job *job);

/* ---- ingest_meta.c ---- */
/*! A step began at local time t in process r (a ProfilerStep#N range, cudaProfilerStart, a named
 * NVTX range the job marks its steps with); name says which. @return 0, -1 out of memory */
int an_steps_mark(struct an_rank *r, uint64_t t, const char *name);

/* ---- symbols.c ---- */
/*! A BUILDID record of process r (blob = build-id bytes of the MODULE at base). */
void an_sym_buildid(struct an_rank *r, uint64_t base, const uint8_t *id, size_t len);
/*! Once a file is read: symbols sorted for lookup. */
void an_sym_finish(struct an_rank *r);
void an_sym_free(struct an_rank *r);

#endif

/* kernelch.h: the kernel-channel analysis stage: collectives' GPU times from NCCL's kernel-channel
 * timestamps (what load/kernelch.h kept of the KCH records), its results (job->kch) and NCCL's
 * numbering of a rank's collective calls. */
#ifndef NVLP_AN_MODEL_KERNELCH_H
#define NVLP_AN_MODEL_KERNELCH_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

struct an_job;
struct an_rank;

/* CUPTI's and KernelCh's start of one collective farther apart than this (and than its duration)
 * are two collectives: the clock fit is off by up to ~2 ms (corrections seen on H200). */
#define AN_KCH_SAME_NS 5000000ull

/* What kernelch found in a job. */
struct an_kch {
	uint64_t channels;        /* KCH records read */
	uint64_t collectives;     /* collective instances built from them (first of each seq) */
	uint64_t matched;         /* instances matched to an intercepted call */
	uint64_t timed, timed_ns; /* calls that had no CUPTI GPU time and got it from KCH */
	uint64_t
	    retimed;     /* of those, calls whose CUPTI kernel started elsewhere (match.c's miss) */
	uint64_t xcheck; /* calls timed by both: CUPTI kept, difference measured */
	int64_t xcheck_median_ns; /* KCH duration - CUPTI duration, median */
	uint64_t xcheck_max_ns, xcheck_max_start_ns;
	uint64_t calls,
	    untimed; /* collective calls of traces with KCH; those still without GPU time */
	uint64_t zero, reversed, nostop, noparent; /* dropped channels */
	uint64_t shared_channels;    /* channels whose stamps several fused collectives share */
	uint64_t replays, replay_ns; /* graph replays (a seq's channels seen again) */
	uint64_t unmatched, before_call;
	uint64_t fit_pairs, fit_corrections, fit_max_corr_ns;
	int fit_bound_only;
	uint64_t windows, window_ns, span_ns; /* KWINDOW coverage */
};

/* NCCL's own number of a collective call: NCCL's profiler numbers a communicator's collectives
 * per function from 0 (comm->seqNumber[func]), the shim per communicator from 1. */
struct an_ncclnum {
	uint64_t comm; /* the communicator's hash */
	uint32_t seq;  /* the shim's */
	uint32_t nseq; /* NCCL's: the calls of fn before it on comm, in shim seq order */
	uint32_t call; /* index into r->calls */
	uint8_t fn;    /* an_nccl_func of the call's */
};
/*! r's collective calls with NCCL's numbers, sorted by (comm, seq) (an_ncclnum_cmp) into a
 * malloc'd *out; returns how many (0 and *out NULL when none or out of memory). */
size_t an_nccl_numbers(const struct an_job *job, const struct an_rank *r, struct an_ncclnum **out);
/*! qsort/bsearch order of struct an_ncclnum: by communicator hash, then the shim's seq. */
int an_ncclnum_cmp(const void *a, const void *b);

/*! From the KCH/CLOCK/NCCLPROF/KWINDOW records of every trace that has KCH or KWINDOW records,
 * give collective calls without CUPTI GPU time their KernelCh time (local clock, as model.c keeps
 * calls before alignment), cross-check the others; results in job->kch. Call after the job's
 * communicator table is built and before clocks are aligned. */
int an_kch_apply(struct an_job *job); /* @return 0, -1 out of memory */
/*! job->kch freed (NULL after). */
void an_kch_free(struct an_job *job);

#endif /* NVLP_AN_MODEL_KERNELCH_H */

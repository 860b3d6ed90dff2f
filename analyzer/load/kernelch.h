/* kernelch.h: collectives' GPU times from NCCL's kernel-channel timestamps (KCH records): the interface the analyzer calls. */
#ifndef AN_KERNELCH_H
#define AN_KERNELCH_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */

struct an_job;
struct an_rank;
struct nvlp_rec_kch;
struct nvlp_rec_clock;
struct nvlp_rec_ncclprof;
struct nvlp_rec_kwindow;

/* CUPTI's and KernelCh's start of one collective farther apart than this (and than its duration)
 * are two collectives: the clock fit is off by up to ~2 ms (corrections seen on H200). */
#define AN_KCH_SAME_NS 5000000ull
/* A channel longer than this is not a real stamp pair. */
#define AN_KCH_MAX_NS 60000000000ull

/* What kernelch found in a job. */
struct an_kch {
	uint64_t channels;    /* KCH records read */
	uint64_t collectives; /* collective instances built from them (first of each seq) */
	uint64_t matched;     /* instances matched to an intercepted call */
	uint64_t timed, timed_ns; /* calls that had no CUPTI GPU time and got it from KCH */
	uint64_t retimed; /* of those, calls whose CUPTI kernel started elsewhere (match.c's miss) */
	uint64_t xcheck;      /* calls timed by both: CUPTI kept, difference measured */
	int64_t xcheck_median_ns; /* KCH duration - CUPTI duration, median */
	uint64_t xcheck_max_ns, xcheck_max_start_ns;
	uint64_t calls, untimed; /* collective calls of traces with KCH; those still without GPU time */
	uint64_t zero, reversed, nostop, noparent; /* dropped channels */
	uint64_t shared_channels; /* channels whose stamps several fused collectives share */
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
/*! The function as NCCL counts it (ncclBcast is its Broadcast). */
uint8_t an_nccl_func(uint8_t fn);
/*! r's collective calls with NCCL's numbers, sorted by (comm, seq) (an_ncclnum_cmp) into a
 * malloc'd *out; returns how many (0 and *out NULL when none or out of memory). */
size_t an_nccl_numbers(const struct an_job *job, const struct an_rank *r, struct an_ncclnum **out);
int an_ncclnum_cmp(const void *a, const void *b);

/* ---- ingest's handlers: what one trace's KCH, CLOCK, NCCLPROF and KWINDOW records tell
 * kernelch, kept in r->kch_file (the file is decoded once, by ingest) ---- */
void an_kch_on_kch(struct an_rank *r, const struct nvlp_rec_kch *k);
void an_kch_on_clock(struct an_rank *r, const struct nvlp_rec_clock *c);
void an_kch_on_ncclprof(struct an_rank *r, const struct nvlp_rec_ncclprof *n);
void an_kch_on_kwindow(struct an_rank *r, const struct nvlp_rec_kwindow *w);
/*! End of r's file: channels named by NCCL's communicator get the shim's (NCCLPROF map). */
void an_kch_file_end(struct an_rank *r);
void an_kch_file_free(struct an_rank *r);
struct an_pio;
/*! r's KCH state written to or read from a partial (partial.h) */
void an_kch_file_io(struct an_pio *io, struct an_rank *r);

/*! From the KCH/CLOCK/NCCLPROF/KWINDOW records of every trace that has KCH or KWINDOW records,
 * give collective calls without CUPTI GPU time their KernelCh time (local clock, as model.c keeps
 * calls before alignment), cross-check the others; results in job->kch. Call after the job's
 * communicator table is built and before clocks are aligned. */
int an_kch_apply(struct an_job *job); /* @return 0, -1 out of memory */
void an_kch_free(struct an_job *job);
struct jw;
/*! The same as report --json's "kernel_channels" object (null without KCH/KWINDOW records). */
void an_kch_json(struct jw *w, const struct an_job *job);
/*! A few report lines (nothing when the job has no KCH or KWINDOW records). */
void an_kch_report_text(FILE *o, const struct an_job *job);

#endif /* AN_KERNELCH_H */

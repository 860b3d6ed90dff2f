/* export.h: the record stream that `nvlprof export` and the HTML report share: each trace's
 * records in job time, with the analyzer's matches attached, fed to a sink (one per format). */
#ifndef NVLP_AN_EXPORT_H
#define NVLP_AN_EXPORT_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */

#include "out/export_model.h"
#include "nvlp_format.h"

/* XE_DEVICE: a GPU's properties (struct nvlp_rec_device, name its name; no time), before the
 * GPU's activity */
enum xe_type {
	XE_NCCL,
	XE_COPY,
	XE_MANAGED,
	XE_PEER,
	XE_KERNEL,
	XE_GPUCOPY,
	XE_UM,
	XE_SAMPLE,
	XE_DEVICE
};

struct xe_ev {
	int type;          /* enum xe_type */
	size_t rank;       /* index of the process (xm_rank) */
	uint64_t ts, dur;  /* job time, ns */
	const void *f;     /* the record's fields: struct nvlp_rec_nccl, _copy, ... by type */
	const char *name;  /* kernel name / API function name ("" if unknown) */
	int comm;          /* XE_NCCL: job communicator index, -1 unknown */
	long call;         /* XE_NCCL: index of the call in xm_call order, -1 not one */
	int has_gpu;       /* XE_NCCL: the analyzer matched GPU time to the call */
	const long *calls; /* XE_KERNEL: the NCCL calls (xm_call indices) this kernel ran */
	size_t ncalls;
	long alloc; /* XE_UM: allocation index (xm_alloc), -1 none */
};

/*! splitmix64's finaliser: the exports' ids (flows, tracks) and the perfetto map's hash */
static inline uint64_t xe_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/*! A UM record the timelines show: bytes migrated (HtoD, DtoH, DtoD), not fault or
 * thrashing counts. */
static inline int xe_um_migration(uint64_t counter)
{
	return counter == NVLP_UM_BYTES_TRANSFER_HTOD || counter == NVLP_UM_BYTES_TRANSFER_DTOH ||
	       counter == NVLP_UM_BYTES_TRANSFER_DTOD;
}

struct xe_sink {
	void *ctx;
	void (*rank)(void *ctx, const struct xm_job *x, size_t r); /* before a process's events */
	void (*ev)(void *ctx, const struct xm_job *x, const struct xe_ev *e);
	/* after a process's events: may be NULL */
	void (*rank_end)(void *ctx, const struct xm_job *x, size_t r);
};

/*! Stream every readable trace of the job through sink. *records: records read.
 * @return 0, or -1 (a trace could not be reopened: message printed) */
int xe_stream(const struct xm_job *x, struct xe_sink *s, uint64_t *records);
/*! The same for process r only (adds to *records); callable from several threads at once for
 * different r, each with its own sink. */
int xe_stream_rank(const struct xm_job *x, struct xe_sink *s, size_t r, uint64_t *records);

/*! Flow ids shared by the formats: NCCL call k of process r -> its kernel; one collective
 * (communicator hash, seq) across ranks. */
uint64_t xe_flow_call(size_t r, long k);
uint64_t xe_flow_coll(uint64_t comm_hash, uint64_t seq);

/* The parallel writer the formats share (export_io.c): fn(ctx, r, o, &records) encodes readable
 * process r on one of up to one thread per CPU and hands its bytes to xo_write(o, r, ...); they
 * land in out in process order. fn returns 0, 1 (a trace failed: message printed) or 2 (a write
 * failed). @return the OR of what fn returned, 2 also for a failed write to out, or -1 (no
 * temporary file or memory: message printed) */
struct xo;
typedef int (*xo_fn)(void *ctx, size_t r, struct xo *o, uint64_t *records);
int xo_run(const struct xm_job *x, FILE *out, xo_fn fn, void *ctx, uint64_t *records);
/*! @return 0, or -1 (a write failed: xo_run reports it) */
int xo_write(struct xo *o, size_t r, const void *buf, size_t len);

/* The formats' encoders (their table, which opens the output for them: out/formats.h). Each
 * returns 0, or -1 after saying an error naming the output. */
int xe_perfetto(const struct xm_job *x, FILE *o, uint64_t *records);
/* out_dir != NULL: one file per process in out_dir (rank<N>.json, HTA's layout), else one file */
int xe_chrome(const struct xm_job *x, FILE *o, const char *out_dir, uint64_t *records);
/* sqlite: threads encoding processes (-j; 0 one per CPU, 1 all on the calling thread) */
int xe_sqlite(const struct xm_job *x, const char *path, int threads, uint64_t *records);

/*! The HTML report (diff: b and a both set, side by side). @return 0 or -1 */
int xh_report(FILE *o, const struct xm_job *x, const char *title);
int xh_diff(FILE *o, const struct xm_job *b, const struct xm_job *a, const char *tb,
            const char *ta);

#endif

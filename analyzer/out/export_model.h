/* export_model.h: the one adapter between the analyzed job (model.h, findings.h, report.h) and the
 * exporters / HTML report: every read of the model goes through these functions. */
#ifndef NVLP_AN_EXPORT_MODEL_H
#define NVLP_AN_EXPORT_MODEL_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */

struct xm_job; /* opaque: the loaded, analyzed and diagnosed job */

struct xm_rank {
	int ok;        /* 0: unreadable, skipped */
	int rank, pid; /* rank: -1 unknown */
	const char *host, *path;
	int64_t offset;   /* job time = local time + offset (ns) */
	uint64_t t_real0; /* CLOCK_REALTIME ns at the job time of the trace's start (0 unknown) */
	uint64_t t_mono0; /* local clock at the same instant */
	char label[48];   /* "rank 0", or "pid 123" when the rank is unknown */
};

struct xm_call { /* one NCCL collective or point-to-point call, job time */
	uint64_t t, host_dur, gpu_start, gpu_dur; /* gpu_start 0: no GPU time */
	uint64_t bytes;
	uint32_t seq;
	int comm, fn, device;
};

struct xm_finding {
	const char *id, *sev, *title, *advice, *explained_by; /* explained_by NULL if none */
	int sev_level;                                        /* 0 info, 1 warning, 2 critical */
	int root_rank; /* rank index the finding points at, -1 the job */
	int nev;
};

struct xm_hang {
	int comm, fn;
	uint32_t seq;
	int nmissing; /* rank numbers: all of them */
	const int *missing;
	int npresent;
	const int *present;
	double wait_ms;
};

struct xm_sample { /* link counters over [s, e), job time */
	uint64_t s, e, nvl, pcie;
	int gap; /* samples were lost before this one (the trace says so) */
};

struct xm_alloc {
	uint64_t ptr, bytes, migrations, flips, htod, dtoh;
	int device;
};

/* The options report and diff share (--threshold NAME=VALUE, -j N), for export and --html */
struct xm_opts {
	double th[64]; /* thresholds, the model's order */
	int threads;   /* loader threads, 0 = one per CPU */
};
void xm_opts_init(struct xm_opts *o);

/* A job handle, filled by the command that opens the job (cli/cmd_export.c xm_open): xm_new gives
 * the places an_open_job loads into (thresholds o's); then xm_ready, or xm_discard when the
 * open failed. @return NULL out of memory (said) */
struct an_job;
struct an_findings;
struct xm_job *xm_new(const struct xm_opts *o, double **th, struct an_job **job,
                      struct an_findings **f);
void xm_discard(struct xm_job *x);
/*! The tables and views of the opened job. @return x, or NULL out of memory (said; x closed) */
struct xm_job *xm_ready(struct xm_job *x);
void xm_close(struct xm_job *x);

size_t xm_nranks(const struct xm_job *x);
const struct xm_rank *xm_rank(const struct xm_job *x, size_t i);
/*! Job time span (ns) */
void xm_span(const struct xm_job *x, uint64_t *t0, uint64_t *t1);

size_t xm_ncomms(const struct xm_job *x);
/*! @return the job's index of a communicator hash, -1 unknown */
int xm_comm_of_hash(const struct xm_job *x, uint64_t hash);
uint64_t xm_comm_hash(const struct xm_job *x, int comm);
int xm_comm_nranks(const struct xm_job *x, int comm);
/*! The communicator with the most calls (the training loop's), -1 none */
int xm_main_comm(const struct xm_job *x);

/*! Recognised steps: n steps, step k over [s0 + k*len, s0 + (k+1)*len), job time. @return n */
int xm_steps(const struct xm_job *x, uint64_t *s0, uint64_t *len);

size_t xm_ncalls(const struct xm_job *x, size_t rank);
void xm_call(const struct xm_job *x, size_t rank, size_t k, struct xm_call *c);

size_t xm_nfindings(const struct xm_job *x);
void xm_finding(const struct xm_job *x, size_t i, struct xm_finding *f);
/*! Evidence item k of finding i as "key: value" into buf, value in its unit (an_ev_value). */
void xm_finding_ev(const struct xm_job *x, size_t i, int k, char *buf, size_t len);
/*! The same for a card: @return 0 (nothing written) for evidence the heading carries */
int xm_finding_card(const struct xm_job *x, size_t i, int k, char *buf, size_t len);
/*! @return 1 if the job has a finding with this id */
int xm_has_finding(const struct xm_job *x, const char *id);

/*! The story of a job that failed, one paragraph (story.h), into buf ("" when it did not fail) */
void xm_story(const struct xm_job *x, char *buf, size_t len);

size_t xm_nhangs(const struct xm_job *x);
void xm_hang(const struct xm_job *x, size_t i, struct xm_hang *h);

/*! Devices of a process (count) and the device number of index d. */
size_t xm_ndevs(const struct xm_job *x, size_t rank);
int xm_dev(const struct xm_job *x, size_t rank, size_t d);
size_t xm_nsamples(const struct xm_job *x, size_t rank, size_t d);
void xm_sample(const struct xm_job *x, size_t rank, size_t d, size_t k, struct xm_sample *s);
/*! NCCL kernel intervals of a device (job time): count, then each. */
size_t xm_ncoll_ivals(const struct xm_job *x, size_t rank, size_t d);
void xm_coll_ival(const struct xm_job *x, size_t rank, size_t d, size_t k, uint64_t *s,
                  uint64_t *e);
/*! NVLink peak per direction of a device, bytes/s (0 unknown). */
double xm_dev_peak(const struct xm_job *x, size_t rank, int device);

size_t xm_nallocs(const struct xm_job *x, size_t rank);
void xm_alloc(const struct xm_job *x, size_t rank, size_t k, struct xm_alloc *a);
/*! The allocation holding addr, -1 none */
long xm_alloc_of(const struct xm_job *x, size_t rank, uint64_t addr);

/*! Straggler view: times rank i arrived last, collectives matched. */
void xm_rank_last(const struct xm_job *x, size_t rank, uint64_t *last, uint64_t *colls);

/*! The text report, as `nvlprof report` prints it. */
void xm_report_text(FILE *o, const struct xm_job *x);

/*! The report's first lines (processes, steps, data, communication), as `nvlprof report` prints
 * them: the page's header shows these, never its own arithmetic. */
void xm_head_text(FILE *o, const struct xm_job *x);
struct an_diff_view; /* report.h */
/*! diff's verdict and tables for BEFORE b and AFTER a, as `nvlprof diff` prints them. @return 0,
 * -1 out of memory */
int xm_diff_view(const struct xm_job *b, const struct xm_job *a, struct an_diff_view *v);

/* The report's tables (COLLECTIVES, RANKS, LINKS, NCCL CHOICES) row by row: the figures the text
 * report prints, from the same computation; NaN where text prints "-". */
struct xm_coll_row {
	uint64_t comm_hash;
	const char *comm_name, *fn;
	int nranks, host_time; /* host_time: the time is host call time ("h") */
	double calls_per_rank, bytes_per_call, ms_per_rank, algbw, busbw, peak_share;
};
/*! "GPU kernel time" or "host call time": what COLLECTIVES' times are */
const char *xm_coll_time_kind(const struct xm_job *x);
size_t xm_ncoll_rows(const struct xm_job *x);
void xm_coll_row(const struct xm_job *x, size_t i, struct xm_coll_row *r);
struct xm_rank_row {
	int rank, pid, gpu, truncated, comm_host;
	const char *host;
	double wall_ms, comm_ms, exposed_ms, exposed_share, last_share, lead_ms, waited_ms;
};
size_t xm_nrank_rows(const struct xm_job *x);
void xm_rank_row(const struct xm_job *x, size_t i, struct xm_rank_row *r);
/* The rows a job of many ranks keeps (the ranks that matter) and the others' distribution,
 * as the text report's RANKS shows them */
struct xm_rank_view {
	int all; /* every rank a row (at most ranks_shown ranks, or --all-ranks) */
	size_t nshown, nrest, named_more;
	int rest_gpu;      /* the others have exposure figures */
	double dist[7][4]; /* min, p50, p90, max of wall, comm, exposed ms, exposed share, last
	                    * share, lead, waited over the others (shares as fractions) */
	double heat_rows;  /* heatmaps draw a row per rank up to this many */
};
void xm_rank_view(const struct xm_job *x, struct xm_rank_view *v);
/*! Row k (< nshown) of the view: its xm_rank_row index; *why: what makes it matter ("" all) */
size_t xm_rank_view_row(const struct xm_job *x, size_t k, const char **why);
/*! 1 if process r (xm_rank index) is a row of the view (every process when all) */
int xm_rank_kept(const struct xm_job *x, size_t r);
struct xm_link_row { /* bytes per GPU: total and during collectives */
	int rank, device;
	double nvl, nvl_coll, pcie, pcie_coll;
	size_t proc; /* the process (xm_rank index) */
};
/*! Up to cap rows into v. @return the number of rows (0: no link counters) */
size_t xm_link_rows(const struct xm_job *x, struct xm_link_row *v, size_t cap);
struct xm_choice_row {
	uint64_t comm_hash;
	int comm_known;
	const char *fn;
	char algo_proto[40];
	uint64_t calls;
	char channels[24];
};
size_t xm_nchoice_rows(const struct xm_job *x);
void xm_choice_row(const struct xm_job *x, size_t i, struct xm_choice_row *r);

/* Figures for diff's side-by-side table. */
struct xm_summary {
	double wall_ms, step_ms, comm_ms, exposed_ms, exposed_share;
	double nvlink_mib, pcie_mib, copy_p2p_mib, copy_staged_mib;
	int steps, processes;
};
void xm_summary(const struct xm_job *x, struct xm_summary *s);

/*! @return 1 if a kernel name is an NCCL kernel's (mangled or not) */
int xm_is_nccl_kernel(const char *name);
/*! Name of an NCCL function ("ncclAllReduce"), of a collective kind for Kineto ("allreduce") */
const char *xm_fn_name(int fn);
const char *xm_fn_coll(int fn);

/* Kernel names as nsys writes them (demangled with libstdc++'s __cxa_demangle), each distinct name
 * demangled once. One cache per thread. */
struct xm_names;
struct xm_names *xm_names_new(void); /* NULL: out of memory (names are then given as they are) */
void xm_names_free(struct xm_names *c);
/*! *full: the demangled name, *shortn: the function's name alone ("ncclDevKernel_AllReduce_Sum_
 * f32_RING_LL"); both the name itself when it is not mangled (or memory ran out). Valid until
 * xm_names_free. @return 0, -1 out of memory (c NULL included) */
int xm_kernel_names(struct xm_names *c, const char *name, const char **full, const char **shortn);

#endif

/* report.h: what report and diff share: loading + analysing a job, and a compact per-job
 * summary. */
#ifndef NVLP_AN_REPORT_H
#define NVLP_AN_REPORT_H

#include <stdio.h> /* FILE */

#include "findings/findings.h"
#include "model/model.h"
#include "findings/diff_view.h" /* struct an_diff_view, an_diff_view */
#include "model/summary.h"   /* struct an_summary */

/*! Load, analyze and diagnose the traces in paths. Warnings (truncated, skipped files) go to
 * stderr as "nvlprof: ..." lines. @return 0, or -1 after printing the error */
int an_open_job(char **paths, int npaths, int threads, const double *th, struct an_job *job,
                struct an_findings *f);

/*! The same from a job already loaded (an_job_load, or merge's partials): the load's warnings,
 * then analysis and diagnosis. @return 0, or -1 after printing the error (job freed) */
int an_open_loaded(const double *th, struct an_job *job, struct an_findings *f);

void an_summarize(const struct an_job *job, struct an_summary *s);

/* ---- the report's tables: computed once (an_tables_build), rendered by text, JSON, HTML ---- */
/* A rank's communication time (model/summary.c's rank_comm): ns, its host part, the host part inside
 * the step window */
struct an_rank_comm {
	double ns, host, win_host;
	int host_only;
};

/* Per (comm, fn) derived figures shared by text and JSON. */
struct an_arow {
	const struct an_agg *a;
	const struct an_comm *c;
	int host_time;
	double calls_per_rank, bytes_per_call, time_ms_per_rank, algbw, busbw, peak_share;
};

/* Per process derived figures shared by text and JSON. */
struct an_rrow {
	const struct an_rank *r;
	const struct an_rank_x *x;
	int rank, gpu;
	struct an_rank_comm comm;
	double wall_ns, exposed_ns, span_ns;
};
/* One (rank, comm, fn) of the JSON's collectives_by_rank. */
struct an_crow {
	int rank;
	size_t comm;
	unsigned fn;
	uint64_t calls, gcalls;
	double bytes, gbytes, gns, hns, xns; /* xns: transfer time, for bandwidth */
	double algbw, busbw;
};
/* The report's tables, computed once from the job; the text and JSON printers only format them. */
struct an_tables {
	struct an_summary s;
	double peak;
	struct an_arow *coll; /* one per job->aggs */
	struct an_rrow *ranks;
	size_t nranks;
	struct an_crow *by_rank;
	size_t nby_rank;
};
/*! Fill t from the job (summary, COLLECTIVES, RANKS, by-rank rows). @return 0, -1 out of memory
 * (free t all the same) */
int an_tables_build(const struct an_job *job, struct an_tables *t);
void an_tables_free(struct an_tables *t);

/*! The report's first lines (processes, steps, data, the communication summary line), as the
 * text report prints them */
void an_report_head(FILE *o, const struct an_job *job, const struct an_tables *t);
/*! A GB/s figure as the tables print it ("-" for NaN) */
void an_fmt_gbps(char *b, size_t n, double v);
/*! The function name of an NCCL CHOICES row, as the job called it */
const char *an_choice_fn_name(const struct an_job *job, const struct an_jchoice *x);

/*! The report of job (text, or JSON) to outpath (NULL: standard output); job and f are freed.
 * cmd names the command in an error. @return 0, or 2 after printing why it was not written */
int an_report_write(const char *cmd, const char *outpath, int json, struct an_job *job,
                    struct an_findings *f);
/*! The text report. */
void an_report_text(FILE *o, const struct an_job *job, const struct an_findings *f);
/*! The JSON report (one object). */
void an_report_json(FILE *o, const struct an_job *job, const struct an_findings *f);
#endif

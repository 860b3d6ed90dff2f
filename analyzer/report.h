/* report.h: what report and diff share: loading + analysing a job, and a compact per-job
 * summary. */
#ifndef NVLP_AN_REPORT_H
#define NVLP_AN_REPORT_H

#include <stdio.h> /* FILE */

#include "findings.h"
#include "model.h"

/*! Load, analyze and diagnose the traces in paths. Warnings (truncated, skipped files) go to
 * stderr as "nvlprof: ..." lines. @return 0, or -1 after printing the error */
int an_open_job(char **paths, int npaths, int threads, const double *th, struct an_job *job,
                struct an_findings *f);

/* Figures compared by diff; times in ms, bandwidth in GB/s, NaN where unknown. */
struct an_summary {
	double wall_ms, step_ms, comm_ms, exposed_ms, exposed_share;
	double comm_win_ms; /* communication inside the step window (NaN without steps or GPU) */
	int comm_host;      /* comm_ms is host call time on every rank (no NCCL GPU time) */
	double comm_host_ms; /* the part of comm_ms that is host call time: all of it with
	                      * comm_host, else the calls of collectives with no GPU execution */
	int steps, gpu_data, processes, hosts;
	/* bus bandwidth per collective class and size class (GPU time only) */
	double busbw[AN_C_COUNT][AN_SIZE_CLASSES];
	double bw_bytes[AN_C_COUNT][AN_SIZE_CLASSES];
	/* host time per call, ms, per collective class and size class (every call): what diff
	 * compares where a side has no GPU time */
	double host_ms_per_call[AN_C_COUNT][AN_SIZE_CLASSES];
	/* bytes per link type */
	double nvlink_bytes, pcie_bytes, copy_p2p_bytes, copy_staged_bytes;
};
void an_summarize(const struct an_job *job, struct an_summary *s);

/*! The text report. */
void an_report_text(FILE *o, const struct an_job *job, const struct an_findings *f);
/*! The JSON report (one object). */
void an_report_json(FILE *o, const struct an_job *job, const struct an_findings *f);
/*! Options shared by report and diff: --threshold/-t NAME=VALUE, -j N.
 * @return 1 consumed (advances *i), 0 not one of these, -1 error (printed) */
int an_common_opt(int argc, char **argv, int *i, double *th, int *threads);
#endif

/* summary.h: the figures of a job that report, diff and the page show, computed once and printed
 * by out/ (summary.c): the summary diff compares and the report's tables (COLLECTIVES, RANKS,
 * the by-rank rows), with the small derived figures the printers share. Nothing here prints. */
#ifndef NVLP_AN_SUMMARY_H
#define NVLP_AN_SUMMARY_H

#include <stddef.h> /* size_t */

#include "model/model.h"

/* Figures compared by diff; times in ms, bandwidth in GB/s, NaN where unknown. */
struct an_summary {
	double wall_ms, step_ms, comm_ms, exposed_ms, exposed_share;
	double comm_win_ms;  /* communication inside the step window (NaN without steps or GPU) */
	int comm_host;       /* comm_ms is host call time on every rank (no NCCL GPU time) */
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

/* The table types (struct an_tables and its rows) are defined in out/report.h. */
struct an_pair;
struct an_tables;
/*! The summary of job: wall and step time, communication and exposed time per rank, bus bandwidth
 * and host time per call by collective and size class, link bytes */
void an_summarize(const struct an_job *job, struct an_summary *s);
/*! Fill t from the job (summary, COLLECTIVES, RANKS, by-rank rows). @return 0, -1 out of memory
 * (free t all the same) */
int an_tables_build(const struct an_job *job, struct an_tables *t);
void an_tables_free(struct an_tables *t);

/*! The rank a process is shown as: its rank, or its file index f when it has none */
int an_rank_id(const struct an_job *job, size_t f);
/*! How a device pair's copies went: "nvlink-p2p", "staged-host" or "mixed" */
const char *an_pair_path(const struct an_pair *p);
/*! A device pair's copy bandwidth, GB/s: over the copies' GPU time (nvlink-p2p), else the host
 * time in the calls (staged-host), else the synchronous copies'; NaN when none is known */
double an_pair_gbps(const struct an_pair *p);
#endif

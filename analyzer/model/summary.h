/* summary.h: the figures of a job that report, diff and the page show, computed once and printed
 * by out/ (summary.c): the summary diff compares and the report's tables (COLLECTIVES, RANKS,
 * the by-rank rows), with the small derived figures the printers share. Nothing here prints. */
#ifndef NVLP_AN_SUMMARY_H
#define NVLP_AN_SUMMARY_H

#include <stddef.h> /* size_t */

/* The types (struct an_summary, an_tables and their rows) are still defined in out/report.h,
 * whose owner moves them here; declared here so that these prototypes need no header above. */
struct an_job;
struct an_pair;
struct an_summary;
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

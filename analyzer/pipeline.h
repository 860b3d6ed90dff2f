/* pipeline.h: the analyzer's stages run in their order (pipeline.c): a job loaded, analysed and
 * diagnosed. The commands (cli/) call it; no stage does. */
#ifndef NVLP_AN_PIPELINE_H
#define NVLP_AN_PIPELINE_H

struct an_job;
struct an_findings;

/*! Load, analyze and diagnose the traces in paths. Warnings (truncated, skipped files) are said
 * through util/diag.h as "nvlprof: ..." lines. @return 0, or -1 after saying the error */
int an_open_job(char **paths, int npaths, int threads, const double *th, struct an_job *job,
                struct an_findings *f);
/*! The same from a job already loaded (an_job_load, or merge's partials): the load's warnings,
 * then analysis and diagnosis. @return 0, or -1 after saying the error (job freed) */
int an_open_loaded(const double *th, struct an_job *job, struct an_findings *f);
/*! The model's stages over a loaded job, in order (communicators, kernel channels, graphs, the
 * per-GPU split, cross-rank figures, span, aggregates, steps, NCCL's choices).
 * @return 0, or -1 when a stage the others need failed (out of memory: the job is left loaded
 * but not analysed) */
int an_job_analyze(struct an_job *job);

#endif

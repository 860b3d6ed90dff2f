/* kernelch_print.h: the kernel-channel results (job->kch, model/kernelch.h) in the text report and
 * report --json. */
#ifndef NVLP_AN_KERNELCH_PRINT_H
#define NVLP_AN_KERNELCH_PRINT_H

#include <stdio.h> /* FILE */

struct an_job;
struct jw;

/*! The same as report --json's "kernel_channels" object (null without KCH/KWINDOW records). */
void an_kch_json(struct jw *w, const struct an_job *job);
/*! A few report lines (nothing when the job has no KCH or KWINDOW records). */
void an_kch_report_text(FILE *o, const struct an_job *job);

#endif /* NVLP_AN_KERNELCH_PRINT_H */

/* graphs_print.h: the CUDA graph attribution (job->graphs, model/graphs.h) in the text report and
 * report --json. */
#ifndef NVLP_AN_GRAPHS_PRINT_H
#define NVLP_AN_GRAPHS_PRINT_H

#include <stdio.h> /* FILE */

struct an_job;
struct jw;

/*! Report lines (nothing without graphs). */
void an_graphs_report_text(FILE *o, const struct an_job *job);
/*! The JSON object "graphs" (null without graphs). */
void an_graphs_json(struct jw *w, const struct an_job *job);

#endif /* NVLP_AN_GRAPHS_PRINT_H */

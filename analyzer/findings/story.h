/* story.h: the story of a job that failed, told first: its events in time order (a collective
 * called differently, the last call of a rank that stopped, the entry of the ranks that waited,
 * how each rank ended) and one paragraph made of them. Told from the findings and the job model,
 * never by detecting anything itself; a job that did not fail has no story. */
#ifndef NVLP_AN_STORY_H
#define NVLP_AN_STORY_H

#include <stdio.h> /* FILE */

#include "findings/findings.h"
#include "util/json.h"

struct an_story_ev {
	double t_ms;      /* job-relative */
	int rank;         /* as printed */
	const char *what; /* "mismatch", "last_call", "entered", "ended" */
	char detail[480]; /* the clause without its subject: what, then where the time goes, then
	                   * the rest (from `at`) */
	size_t at;
};
struct an_story {
	struct an_story_ev *v; /* time order */
	size_t n;
	char text[1600]; /* the paragraph ("" when the job did not fail) */
};

/*! The story of an analyzed, diagnosed job (s->n == 0 and text "" when it did not fail).
 * @return 0, or -1 out of memory (s empty) */
int an_story_build(const struct an_job *job, const struct an_findings *f, struct an_story *s);
void an_story_free(struct an_story *s);
/*! Text: the paragraph wrapped at 100 columns and a blank line; nothing without a story. */
void an_story_print(FILE *o, const struct an_story *s);
/*! JSON members "story" (the paragraph) and "timeline" (the events) into an open object;
 * nothing without a story. */
void an_story_json(struct jw *w, const struct an_story *s);

#endif

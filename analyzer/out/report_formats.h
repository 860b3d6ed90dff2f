/* report_formats.h: the report's formats (text, JSON) behind one interface, a table of their
 * writers that `report` and `merge` pick from; the HTML page is its own entry point (xh_report,
 * out/export.h): its options, job and writer differ. */
#ifndef NVLP_AN_REPORT_FORMATS_H
#define NVLP_AN_REPORT_FORMATS_H

#include <stdio.h> /* FILE */

#include "findings/findings.h" /* struct an_findings */
#include "model/model.h"       /* struct an_job */

enum { AN_REPORT_TEXT, AN_REPORT_JSON }; /* an_report_formats' indices */

struct an_report_format {
	const char *name; /* "text", "json" */
	/* The report of job and its findings f to o */
	void (*write)(FILE *o, const struct an_job *job, const struct an_findings *f);
};

/*! The report's formats, indexed by AN_REPORT_* */
extern const struct an_report_format an_report_formats[];

#endif

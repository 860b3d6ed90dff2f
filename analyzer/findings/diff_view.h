/* diff_view.h: the comparison of two runs that `nvlprof diff` prints (cli/diff.c) and
 * `diff --html` shows (diff_view.c). */
#ifndef NVLP_AN_DIFF_VIEW_H
#define NVLP_AN_DIFF_VIEW_H

#include <stddef.h> /* size_t */

#include "findings/findings.h"
#include "model/model.h"
#include "model/summary.h"

/* One side of the comparison: the opened job, its findings and summary. */
struct an_dside {
	const char *path;
	struct an_job job;
	struct an_findings f;
	struct an_summary s;
};

struct an_dmetric {
	const char *name;
	double b, a;
};

struct an_denv {
	char name[96], b[96], a[96];
};

/* The verdict: how much slower/faster, on which metric, and the cause when a fallback appeared or
 * went. */
struct an_dverdict {
	const char *metric;
	double b, a, slower_pct;
	char cause[320];
};

/* ---- the diff's rows: computed once, printed as text or JSON ---- */
/* One (collective, size class) cell present on a side. */
struct an_dcell {
	int c, sc;
	double b, a;
};

struct an_dchoice {
	unsigned fn;
	char b[64], a[64];
};

struct an_diff_rows {
	struct an_dmetric m[11];
	size_t nm;
	struct an_dcell busbw[AN_C_COUNT * AN_SIZE_CLASSES]; /* GPU transfer time on either side */
	size_t nbusbw;
	struct an_dcell host[AN_C_COUNT * AN_SIZE_CLASSES]; /* compared by host time (host_cell) */
	size_t nhost;
	struct an_dverdict v;
	struct an_denv env[64];
	size_t ne;
	struct an_dchoice ch[NVLP_NCCL_FN_COUNT]; /* NCCL's usual choice differs */
	size_t nch;
	const char *fnew[64], *fres[64], *fstill[64];
	size_t nnew, nres, nstill;
	double fail_pct;
	int failed; /* --fail-if-slower tripped */
};

/*! The change from b to a in percent (NaN when either is unknown or b is 0) */
double an_diff_pct(double b, double a);
/*! The first readable process of a job, NULL none */
const struct an_rank *an_diff_first_ok(const struct an_job *j);
/*! A figure as diff's tables print it ("-" for NaN, three significant digits) */
void an_diff_fmt(char *buf, size_t n, double v);
/*! A change in percent for a table: "-" when there is none to show */
void an_diff_fmt_pct(char *buf, size_t n, double b, double a);
/*! @return 1 if f has a finding with this id */
int an_diff_has(const struct an_findings *f, const char *id);
/*! Every row of the comparison of B and A (fail_pct: --fail-if-slower, NaN none) into d */
void an_diff_compute(struct an_dside *B, struct an_dside *A, double fail_pct,
                     struct an_diff_rows *d);
/*! The VERDICT line, as text prints it and the HTML page shows it first */
void an_diff_verdict_line(const struct an_dverdict *v, char *buf, size_t n);

/* What `diff --html` shows first, formatted as `nvlprof diff` prints it: the VERDICT line, the
 * metric and bus bandwidth tables, the findings new / resolved / still. */
struct an_diff_row {
	char name[40];
	char b[32], a[32], change[32];
};
struct an_diff_view {
	char verdict[512];
	struct {
		const char *name;
		char b[32], a[32], change[32];
	} m[16];
	size_t nm;
	struct an_diff_row bw[AN_C_COUNT * AN_SIZE_CLASSES];
	size_t nbw;
	char fnew[1024], fres[1024], fstill[1024];
};
/*! diff's view of BEFORE (jb, fb, sb) and AFTER (ja, fa, sa). @return 0, -1 out of memory */
int an_diff_view(const struct an_job *jb, const struct an_findings *fb, const struct an_summary *sb,
                 const struct an_job *ja, const struct an_findings *fa, const struct an_summary *sa,
                 struct an_diff_view *v);

#endif

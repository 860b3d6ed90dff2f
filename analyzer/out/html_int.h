/* html_int.h: what the HTML page (html.c, html_fig.c) and its plots (html_plots_bw.c: link
 * bandwidth and arrival skew; html_plots_hang.c: hang and unified memory) share: the page's drawing
 * context. */
#ifndef NVLP_AN_HTML_INT_H
#define NVLP_AN_HTML_INT_H

#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */

#include "out/export.h"
#include "out/svg.h"

enum { P_BW, P_SKEW, P_HANG, P_UM, P_COUNT };
/* A large job's rows of their own in the heatmaps and bandwidth plots of their own (each the width
 * of the page; plot_bw's caption says 24) */
enum { HEAT_OWN_ROWS = 24 };

struct umev {
	uint64_t t, bytes;
	long alloc;
	int dir; /* 0 to a GPU, 1 to the CPU */
	size_t rank;
};
struct umc {
	struct umev *v;
	size_t n, cap;
};
struct ctx {
	FILE *o;
	const struct xm_job *x;
	int W;
	const char *pfx;
	int done[P_COUNT]; /* 1 drawn (anchor exists), -1 nothing to draw */
	struct umc um;
	uint64_t t0, t1;
	double xa, xb; /* time range of the page's plots over time (the hang's zoom aside), ms */
	double ymax;   /* top of every bandwidth plot, GB/s: diff's two sides share it (0: own) */
};

/* The plots' names: their anchors and CSS classes (html_fig.c) */
extern const char *const xh_plot_names[P_COUNT];
/*! Job time t in ms from the page's start */
double xh_ms(const struct ctx *c, uint64_t t);
/*! Opens the figure of plot kind (P_*) with its caption */
void xh_figure_begin(struct ctx *c, int kind, const char *caption);

/* The plots: each draws its figure into c->o. @return 1 drawn, 0 nothing to draw */
int xh_plot_bw(struct ctx *c);
int xh_plot_skew(struct ctx *c);
int xh_plot_hang(struct ctx *c);
int xh_plot_um(struct ctx *c);
/*! The top of the bandwidth plots of c's job, GB/s */
double xh_bw_max(struct ctx *c);
/*! 1 when every GPU of the job gets a bandwidth plot of its own */
int xh_bw_all(const struct xm_job *x);

#endif

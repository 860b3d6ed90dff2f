/* html_plots_hang.c: the HTML page's hang plot (the missing rank) and unified-memory
 * migrations by allocation. */
#include <math.h>   /* sqrt */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "out/heatband.h" /* hb_merge */
#include "out/html_int.h"
#include "util/util.h" /* an_fmt_value */

/* When the first rank entered the collective the others wait in (0: not recorded) */
static uint64_t hang_entry(const struct xm_job *x, const struct xm_hang *h)
{
	uint64_t hang_t = 0;
	for (size_t r = 0; r < xm_nranks(x); r++)
		for (size_t k = 0; k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm == h->comm && cl.seq == h->seq && (!hang_t || cl.t < hang_t))
				hang_t = cl.t;
		}
	return hang_t;
}

/* Zoom on the end: from the 40th-last call on the communicator of the rank that stopped first
 * (earlier calls look the same on every rank); ms */
static double hang_zoom_start(const struct ctx *c, int comm)
{
	const struct xm_job *x = c->x;
	double xa = xh_ms(c, c->t1);
	for (size_t r = 0; r < xm_nranks(x); r++) {
		uint64_t ring[40] = {0};
		size_t m = 0;
		for (size_t k = 0; k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm == comm)
				ring[m++ % 40] = cl.t;
		}
		if (m && xh_ms(c, ring[m >= 40 ? m % 40 : 0]) < xa)
			xa = xh_ms(c, ring[m >= 40 ? m % 40 : 0]);
	}
	return xa;
}

/* The last call on comm of any rank, or the hang's entry if later; ms */
static double hang_last_event(const struct ctx *c, int comm, uint64_t hang_t)
{
	const struct xm_job *x = c->x;
	uint64_t last = hang_t;
	for (size_t r = 0; r < xm_nranks(x); r++)
		for (size_t k = 0; xm_rank(x, r)->ok && k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm == comm && cl.t > last)
				last = cl.t;
		}
	return last ? xh_ms(c, last) : xh_ms(c, c->t1);
}

/* A tick per pixel column for each of rank r's calls on comm; returns the last call's time */
static uint64_t hang_ticks(const struct ctx *c, struct svg *s, size_t r, int comm, double y,
                           int missing, unsigned char *shared)
{
	const struct xm_job *x = c->x;
	int cols = c->W - s->ml - s->mr;
	unsigned char *hit = shared ? shared : calloc((size_t)cols + 1, 1);
	uint64_t lastt = 0;
	for (size_t k = 0; hit && k < xm_ncalls(x, r); k++) {
		struct xm_call cl;
		xm_call(x, r, k, &cl);
		if (cl.comm != comm)
			continue;
		if (cl.t > lastt)
			lastt = cl.t;
		int px = svg_col(s, xh_ms(c, cl.t));
		if (px < 0 || px > cols || hit[px])
			continue;
		hit[px] = 1;
		svg_cell(s, xh_ms(c, cl.t), y + 0.2, 0, 0.6, missing ? "#c62828" : "#1565c0", NULL);
	}
	if (!shared)
		free(hit);
	return lastt;
}

/* Row y of the hang plot: rank r's ticks, its label, and for a missing rank its last call */
static void hang_row(const struct ctx *c, struct svg *s, size_t r, double y,
                     const struct xm_hang *h)
{
	const struct xm_rank *R = xm_rank(c->x, r);
	int missing = 0;
	for (int i = 0; i < h->nmissing; i++)
		missing |= h->missing[i] == R->rank;
	uint64_t lastt = hang_ticks(c, s, r, h->comm, y, missing, NULL);
	char lab[96];
	snprintf(lab, sizeof lab, "%s%s", R->label, missing ? ": MISSING" : "");
	svg_text(s, s->ml - 6, svg_py(s, y + 0.5) + 4, "end", missing ? "al strag" : "al", lab);
	if (missing && lastt) {
		char note[96];
		snprintf(note, sizeof note, "last call at %.0f ms; never entered #%u",
		         xh_ms(c, lastt), h->seq);
		double px = svg_px(s, xh_ms(c, lastt));
		int right = px < s->w - s->mr - 260; /* room for the note on the right */
		svg_text(s, px + (right ? 6 : -6), svg_py(s, y + 0.5) + 4, right ? "start" : "end",
		         "al strag", note);
	}
}

static int hang_missing(const struct xm_job *x, const struct xm_hang *h, size_t r)
{
	for (int i = 0; i < h->nmissing; i++)
		if (h->missing[i] == xm_rank(x, r)->rank)
			return 1;
	return 0;
}

/* The plot's rows: one per rank (NULL), or past heatmap_rows ranks own[r] = 1 for the first
 * HEAT_OWN_ROWS missing ranks and ranks that matter (missing first), one row for the others
 * (*merged: how many); *rows: the plot's rows */
static uint8_t *hang_own_rows(const struct xm_job *x, const struct xm_hang *h, size_t *rows,
                              size_t *merged)
{
	struct xm_rank_view v;
	xm_rank_view(x, &v);
	size_t n = xm_nranks(x), ok = 0, own = 0;
	for (size_t r = 0; r < n; r++)
		ok += xm_rank(x, r)->ok != 0;
	*rows = ok;
	*merged = 0;
	uint8_t *o = (double)ok > v.heat_rows ? calloc(n, 1) : NULL;
	for (int pass = 0; o && pass < 2; pass++) /* the missing ranks, then those that matter */
		for (size_t r = 0; r < n && own < HEAT_OWN_ROWS; r++)
			if (xm_rank(x, r)->ok && !o[r] &&
			    (pass ? !v.all && xm_rank_kept(x, r) : hang_missing(x, h, r))) {
				o[r] = 1;
				own++;
			}
	if (o) {
		*merged = ok - own;
		*rows = own + 1;
	}
	return o;
}

/* The bottom row of a large job's hang plot: the other ranks' calls, one tick per pixel column */
static void hang_merged_row(const struct ctx *c, struct svg *s, const struct xm_hang *h,
                            const uint8_t *own, size_t merged)
{
	const struct xm_job *x = c->x;
	unsigned char *hit = calloc((size_t)(c->W - s->ml - s->mr) + 1, 1);
	for (size_t r = 0; hit && r < xm_nranks(x); r++)
		if (xm_rank(x, r)->ok && !own[r])
			hang_ticks(c, s, r, h->comm, 0, 0, hit);
	free(hit);
	char lab[64];
	snprintf(lab, sizeof lab, "the other %zu ranks", merged);
	svg_text(s, s->ml - 6, svg_py(s, 0.5) + 4, "end", "al", lab);
}

/* A hang: each rank's calls on the communicator over time; the missing ranks never reach the
 * collective the others wait in */
int xh_plot_hang(struct ctx *c)
{
	const struct xm_job *x = c->x;
	if (!xm_nhangs(x))
		return 0;
	struct xm_hang h;
	xm_hang(x, 0, &h);
	size_t nr = xm_nranks(x);
	uint64_t hang_t = hang_entry(x, &h);
	double xa = hang_zoom_start(c, h.comm);
	double xb = hang_last_event(c, h.comm, hang_t);
	/* zoomed on the calls, room on the right for the missing rank's note: the wait runs on */
	double pad = (xb - xa) * 0.04 + 0.01;
	xa -= pad;
	xb += (xb - xa) * 0.5;
	char cap[400];
	snprintf(cap, sizeof cap,
	         "Hang: %s #%u on communicator %d: entered by %d rank(s) that waited %.0f ms, "
	         "never by %d; ticks: each rank's last calls on it (zoomed on them: the trace "
	         "runs on to %.0f ms)",
	         xm_fn_name(h.fn), h.seq, h.comm, h.npresent, h.wait_ms, h.nmissing,
	         xh_ms(c, c->t1));
	xh_figure_begin(c, P_HANG, cap);
	size_t merged, rows;
	uint8_t *own = hang_own_rows(x, &h, &rows, &merged);
	struct svg s;
	svg_begin(&s, c->o, c->W, 50 + 26 * (int)rows, "hang", cap);
	s.ml = own ? 150 : 124; /* merged: "the other 16,370 ranks" fits */
	svg_range(&s, xa, xb, 0, (double)rows);
	svg_axes(&s, "time since start (ms)", NULL, 0);
	size_t row = 0;
	for (size_t r = 0; r < nr; r++)
		if (xm_rank(x, r)->ok && (!own || own[r]))
			hang_row(c, &s, r, (double)(rows - 1 - row++), &h);
	if (own)
		hang_merged_row(c, &s, &h, own, merged);
	free(own);
	if (hang_t) {
		double px = svg_px(&s, xh_ms(c, hang_t));
		fprintf(c->o,
		        "<line class=\"hangline\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>",
		        px, s.mt, px, s.h - s.mb);
		svg_text(&s, px - 4, s.mt - 4, "end", "al strag", "the others wait here");
	}
	svg_end(&s);
	fputs("</figure>\n", c->o);
	return 1;
}

enum { UM_MAXROWS = 8 };
struct um_top { /* an allocation with a row in the UM plot */
	size_t rank;
	long alloc;
	uint64_t migr;
};

/* The UM_MAXROWS most migrated allocations, most first; returns how many */
static int um_top_allocs(const struct xm_job *x, struct um_top top[UM_MAXROWS])
{
	int nt = 0;
	for (size_t r = 0; r < xm_nranks(x); r++)
		for (size_t k = 0; k < xm_nallocs(x, r); k++) {
			struct xm_alloc a;
			xm_alloc(x, r, k, &a);
			if (!a.migrations)
				continue;
			int at = nt < UM_MAXROWS ? nt++ : UM_MAXROWS;
			if (at == UM_MAXROWS && a.migrations <= top[UM_MAXROWS - 1].migr)
				continue;
			if (at == UM_MAXROWS)
				at = UM_MAXROWS - 1;
			while (at > 0 && top[at - 1].migr < a.migrations) {
				top[at] = top[at - 1];
				at--;
			}
			top[at].rank = r, top[at].alloc = (long)k, top[at].migr = a.migrations;
		}
	return nt;
}

/* Bytes migrated per row, direction and pixel column (b: nt * 2 * (cols + 1)); returns the
 * largest bin (at least 1) */
static uint64_t um_bin(const struct ctx *c, const struct svg *s, const struct um_top *top, int nt,
                       int cols, uint64_t *b)
{
	uint64_t bmax = 1;
	for (size_t i = 0; i < c->um.n; i++) {
		const struct umev *e = &c->um.v[i];
		for (int k = 0; k < nt; k++)
			if (top[k].rank == e->rank && top[k].alloc == e->alloc) {
				int px = svg_col(s, xh_ms(c, e->t));
				if (px < 0 || px > cols)
					break;
				uint64_t *v =
				    &b[((size_t)k * 2 + (size_t)e->dir) * ((size_t)cols + 1) +
				       (size_t)px];
				*v += e->bytes;
				if (*v > bmax)
					bmax = *v;
				break;
			}
	}
	return bmax;
}

/* One dot per non-empty bin, its area in proportion to the bytes */
static void um_dots(const struct ctx *c, struct svg *s, const struct um_top *top, int nt)
{
	int cols = c->W - s->ml - s->mr;
	uint64_t *b = calloc((size_t)nt * 2 * ((size_t)cols + 1), sizeof *b);
	if (!b)
		return;
	uint64_t bmax = um_bin(c, s, top, nt, cols, b);
	for (int k = 0; k < nt; k++)
		for (int dir = 0; dir < 2; dir++)
			for (int px = 0; px <= cols; px++) {
				uint64_t v = b[((size_t)k * 2 + (size_t)dir) * ((size_t)cols + 1) +
				               (size_t)px];
				if (!v)
					continue;
				double y = nt - 1 - k + (dir ? 0.35 : 0.65);
				double xv = s->x0 + (px + 0.5) / cols * (s->x1 - s->x0);
				char tip[64];
				snprintf(tip, sizeof tip, "%.2f MiB %s", (double)v / 1048576.0,
				         dir ? "to CPU" : "to GPU");
				svg_dot(s, xv, y, 1 + 3.5 * sqrt((double)v / (double)bmax),
				        dir ? "dtoh" : "htod", tip);
			}
	free(b);
}

/* Each row's label: the allocation's size and address, its migrations and flips */
static void um_labels(const struct ctx *c, struct svg *s, const struct um_top *top, int nt)
{
	for (int k = 0; k < nt; k++) {
		struct xm_alloc a;
		xm_alloc(c->x, top[k].rank, (size_t)top[k].alloc, &a);
		char lab[128];
		double y = svg_py(s, nt - 1 - k + 0.5);
		snprintf(lab, sizeof lab, "%.0f MiB at 0x%llx", (double)a.bytes / 1048576.0,
		         (unsigned long long)a.ptr);
		svg_text(s, s->ml - 6, y - 2, "end", "al", lab);
		snprintf(lab, sizeof lab, "%llu migrations, %llu flips",
		         (unsigned long long)a.migrations, (unsigned long long)a.flips);
		svg_text(s, s->ml - 6, y + 11, "end", "tl", lab);
	}
}

/* Unified-memory migrations over time, one row per allocation (most migrated first) */
int xh_plot_um(struct ctx *c)
{
	if (!c->um.n)
		return 0;
	struct um_top top[UM_MAXROWS];
	int nt = um_top_allocs(c->x, top);
	if (!nt)
		return 0;
	xh_figure_begin(
	    c, P_UM,
	    "Unified-memory migrations over time by allocation (blue: to a GPU, orange: to "
	    "the CPU; dot area ~ bytes per pixel)");
	struct svg s;
	svg_begin(&s, c->o, c->W, 50 + 40 * nt, "um", "UM migrations by allocation");
	s.ml = 200;
	svg_range(&s, c->xa, c->xb, 0, nt); /* the page's time range (render_meta) */
	svg_axes(&s, "time since start (ms)", NULL, 0);
	um_dots(c, &s, top, nt);
	um_labels(c, &s, top, nt);
	svg_legend(&s, 0, "htod", "to a GPU");
	svg_legend(&s, 1, "dtoh", "to the CPU");
	svg_end(&s);
	fputs("</figure>\n", c->o);
	return 1;
}

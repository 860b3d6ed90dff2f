/* html.c: `nvlprof report --html FILE` and `diff --html FILE`: one self-contained HTML file (no
 * script, no network, no external font) with the findings first, each with its inline SVG plot:
 * link bandwidth per GPU with collectives shaded, arrival skew by rank and collective, the
 * missing rank of a hang, unified-memory migrations by allocation; diff puts two runs side by
 * side. */
#include <math.h>   /* sqrt */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "export.h"
#include "svg.h"

enum { P_BW, P_SKEW, P_HANG, P_UM, P_COUNT };
static const char *const plot_names[P_COUNT] = {"bandwidth", "skew", "hang", "um"};

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

static void um_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	(void)x;
	struct umc *c = ctx;
	if (e->type != XE_UM || e->alloc < 0)
		return;
	const struct nvlp_rec_um *u = e->f;
	if (u->counter != 1 && u->counter != 2 && u->counter != 8) /* bytes HtoD, DtoH, DtoD */
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		struct umev *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct umev){e->ts, u->value, e->alloc, u->counter == 2, e->rank};
}

struct ctx {
	FILE *o;
	const struct xm_job *x;
	int W;
	const char *pfx;
	int done[P_COUNT]; /* 1 drawn (anchor exists), -1 nothing to draw */
	struct umc um;
	uint64_t t0, t1;
	double xa, xb; /* time range of the bandwidth plots, ms */
};

static double ms(const struct ctx *c, uint64_t t)
{
	return ((double)t - (double)c->t0) / 1e6;
}

static void figure_begin(struct ctx *c, int kind, const char *caption)
{
	fprintf(c->o, "<figure class=\"plot plot-%s\" id=\"%s-%s\"><figcaption>", plot_names[kind],
	        c->pfx, plot_names[kind]);
	svg_esc(c->o, caption);
	fputs("</figcaption>\n", c->o);
}

/* NVLink and PCIe GB/s per GPU over time, NCCL kernels shaded */
static int plot_bw(struct ctx *c)
{
	const struct xm_job *x = c->x;
	int drawn = 0;
	for (size_t r = 0; r < xm_nranks(x); r++) {
		if (!xm_rank(x, r)->ok)
			continue;
		for (size_t d = 0; d < xm_ndevs(x, r); d++) {
			size_t n = xm_nsamples(x, r, d);
			if (!n)
				continue;
			double *xs = malloc(n * 3 * sizeof *xs), *yn = xs ? xs + n : NULL,
			       *yp = xs ? xs + 2 * n : NULL;
			if (!xs)
				continue;
			double ymax = 1;
			for (size_t k = 0; k < n; k++) {
				struct xm_sample s;
				xm_sample(x, r, d, k, &s);
				double dur = s.e > s.s ? (double)(s.e - s.s) : 1;
				xs[k] = ms(c, s.s + (s.e - s.s) / 2);
				yn[k] = (double)s.nvl / dur;
				yp[k] = (double)s.pcie / dur;
				if (yn[k] > ymax)
					ymax = yn[k];
				if (yp[k] > ymax)
					ymax = yp[k];
			}
			if (!drawn)
				figure_begin(
				    c, P_BW,
				    "Link bandwidth per GPU over time (GB/s, tx+rx; over the "
				    "recognised training steps when there are some); shaded: NCCL "
				    "kernels running");
			char title[160];
			snprintf(title, sizeof title, "%s GPU %d: NVLink and PCIe GB/s",
			         xm_rank(x, r)->label, xm_dev(x, r, d));
			struct svg s;
			svg_begin(&s, c->o, c->W, 200, "bw", title);
			svg_range(&s, c->xa, c->xb, 0, ymax * 1.05);
			svg_axes(&s, "time since start (ms)", "GB/s", 1);
			/* collectives, merged where closer than a pixel */
			double px_ms = (s.x1 - s.x0) / (c->W - s.ml - s.mr);
			double a = -1, b = -1;
			for (size_t k = 0; k < xm_ncoll_ivals(x, r, d); k++) {
				uint64_t is, ie;
				xm_coll_ival(x, r, d, k, &is, &ie);
				double u = ms(c, is), v = ms(c, ie);
				if (v < s.x0 || u > s.x1)
					continue;
				if (u < s.x0)
					u = s.x0;
				if (v > s.x1)
					v = s.x1;
				if (a >= 0 && u <= b + px_ms) {
					if (v > b)
						b = v;
					continue;
				}
				if (a >= 0)
					svg_band(&s, a, b, "coll");
				a = u, b = v;
			}
			if (a >= 0)
				svg_band(&s, a, b, "coll");
			svg_series(&s, xs, yp, n, "pcie");
			svg_series(&s, xs, yn, n, "nvl");
			svg_legend(&s, 0, "nvl", "NVLink");
			svg_legend(&s, 1, "pcie", "PCIe");
			svg_legend(&s, 2, "coll", "NCCL kernels");
			char shortt[64]; /* in narrow plots the legend leaves room for less */
			snprintf(shortt, sizeof shortt, "%s GPU %d", xm_rank(x, r)->label,
			         xm_dev(x, r, d));
			svg_text(&s, c->W - s.mr, 16, "end", "al", c->W < 700 ? shortt : title);
			svg_end(&s);
			free(xs);
			drawn++;
		}
	}
	if (drawn)
		fputs("</figure>\n", c->o);
	return drawn;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Arrival skew by rank and collective on the main communicator: how long after the first rank
 * each rank entered the call */
static int plot_skew(struct ctx *c)
{
	const struct xm_job *x = c->x;
	int comm = xm_main_comm(x);
	if (comm < 0)
		return 0;
	size_t nr = xm_nranks(x), rows = 0;
	size_t *row_of = calloc(nr, sizeof *row_of), *rank_of = calloc(nr, sizeof *rank_of);
	uint32_t smin = UINT32_MAX, smax = 0;
	int ok = row_of && rank_of;
	for (size_t r = 0; ok && r < nr; r++) {
		int has = 0;
		for (size_t k = 0; k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm != comm)
				continue;
			has = 1;
			if (cl.seq < smin)
				smin = cl.seq;
			if (cl.seq > smax)
				smax = cl.seq;
		}
		if (has) {
			row_of[r] = rows + 1;
			rank_of[rows++] = r;
		}
	}
	if (!ok || rows < 2 || smax < smin || smax - smin > 1000000) {
		free(row_of);
		free(rank_of);
		return 0;
	}
	size_t ns = (size_t)(smax - smin) + 1;
	uint64_t *t = calloc(ns * rows, sizeof *t);
	if (!t) {
		free(row_of);
		free(rank_of);
		return 0;
	}
	for (size_t r = 0; r < nr; r++) {
		if (!row_of[r])
			continue;
		for (size_t k = 0; k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm == comm && !t[(cl.seq - smin) * rows + row_of[r] - 1])
				t[(cl.seq - smin) * rows + row_of[r] - 1] = cl.t ? cl.t : 1;
		}
	}
	/* the collectives every row entered; skew = arrival - first arrival */
	size_t ncol = 0;
	double maxskew = 0;
	for (size_t q = 0; q < ns; q++) {
		uint64_t mn = UINT64_MAX;
		int all = 1;
		for (size_t i = 0; i < rows; i++) {
			uint64_t v = t[q * rows + i];
			all &= v != 0;
			if (v && v < mn)
				mn = v;
		}
		if (!all)
			continue;
		for (size_t i = 0; i < rows; i++) {
			double sk = (double)(t[q * rows + i] - mn) / 1e6;
			t[ncol * rows + i] = t[q * rows + i] - mn; /* compact in place: ncol <= q */
			if (sk > maxskew)
				maxskew = sk;
		}
		ncol++;
	}
	if (!ncol) {
		free(t);
		free(row_of);
		free(rank_of);
		return 0;
	}
	/* colours saturate at the 95th percentile: one startup outlier must not wash out the
	 * steady pattern */
	double *all = malloc(ncol * rows * sizeof *all), sat = maxskew;
	if (all) {
		for (size_t i = 0; i < ncol * rows; i++)
			all[i] = (double)t[i] / 1e6;
		qsort(all, ncol * rows, sizeof *all, cmp_double);
		sat = all[(ncol * rows - 1) * 95 / 100];
		free(all);
	}
	if (sat < 0.01)
		sat = maxskew > 0.01 ? 0.01 : maxskew;
	int plotw = c->W - 64 - 16 - 60;
	size_t per =
	    (ncol + (size_t)plotw / 3 - 1) / ((size_t)plotw / 3); /* collectives per cell */
	if (per < 1)
		per = 1;
	size_t cells = (ncol + per - 1) / per;
	char cap[300];
	snprintf(cap, sizeof cap,
	         "Arrival skew on the main communicator: how late each rank entered each of %zu "
	         "collectives (ms after the first rank; darker = later, full colour at the 95th "
	         "percentile, %.2f ms; %zu per cell, the latest shown); max %.2f ms",
	         ncol, sat, per, maxskew);
	figure_begin(c, P_SKEW, cap);
	int strag_rank = -2; /* the rank of the straggler finding, if any */
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		if (!strcmp(f.id, "straggler"))
			strag_rank = f.root_rank;
	}
	struct svg s;
	int h = 60 + 26 * (int)rows;
	svg_begin(&s, c->o, c->W, h, "skew", "arrival skew by rank and collective");
	s.ml = 124;
	svg_range(&s, 0, (double)ncol, 0, (double)rows);
	svg_axes(&s, "collective (in sequence order)", NULL, 0);
	for (size_t i = 0; i < rows; i++) {
		double y = (double)(rows - 1 - i);
		for (size_t cell = 0; cell < cells; cell++) {
			double mx = 0;
			for (size_t q = cell * per; q < (cell + 1) * per && q < ncol; q++) {
				double v = (double)t[q * rows + i] / 1e6;
				if (v > mx)
					mx = v;
			}
			char fill[8], tip[96];
			svg_heat(sat > 0 ? mx / sat : 0, fill);
			snprintf(tip, sizeof tip, "%s, collectives %zu-%zu: +%.3f ms",
			         xm_rank(x, rank_of[i])->label, cell * per,
			         (cell + 1) * per - 1 < ncol ? (cell + 1) * per - 1 : ncol - 1, mx);
			svg_cell(&s, (double)(cell * per), y + 0.08,
			         (double)((cell + 1) * per < ncol ? per : ncol - cell * per), 0.84,
			         fill, tip);
		}
		uint64_t last, colls;
		xm_rank_last(x, rank_of[i], &last, &colls);
		char lab[96];
		snprintf(lab, sizeof lab, "%s: last %.0f%%", xm_rank(x, rank_of[i])->label,
		         colls ? 100.0 * (double)last / (double)colls : 0.0);
		int strag = xm_rank(x, rank_of[i])->rank == strag_rank;
		svg_text(&s, s.ml - 6, svg_py(&s, y + 0.5) + 4, "end", strag ? "al strag" : "al",
		         lab);
	}
	svg_end(&s);
	fputs("</figure>\n", c->o);
	free(t);
	free(row_of);
	free(rank_of);
	return 1;
}

/* A hang: each rank's calls on the communicator over time; the missing ranks never reach the
 * collective the others wait in */
static int plot_hang(struct ctx *c)
{
	const struct xm_job *x = c->x;
	if (!xm_nhangs(x))
		return 0;
	struct xm_hang h;
	xm_hang(x, 0, &h);
	size_t nr = xm_nranks(x);
	uint64_t hang_t = 0;
	for (size_t r = 0; r < nr; r++)
		for (size_t k = 0; k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm == h.comm && cl.seq == h.seq && (!hang_t || cl.t < hang_t))
				hang_t = cl.t;
		}
	/* zoom on the end: from the 40th-last call on the communicator of the rank that stopped
	 * first (earlier calls look the same on every rank) */
	double xa = ms(c, c->t1);
	for (size_t r = 0; r < nr; r++) {
		uint64_t ring[40] = {0};
		size_t m = 0;
		for (size_t k = 0; k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm == h.comm)
				ring[m++ % 40] = cl.t;
		}
		if (m && ms(c, ring[m >= 40 ? m % 40 : 0]) < xa)
			xa = ms(c, ring[m >= 40 ? m % 40 : 0]);
	}
	double xb = ms(c, c->t1);
	xa -= (xb - xa) * 0.02;
	char cap[300];
	snprintf(cap, sizeof cap,
	         "Hang: %s #%u on communicator %d: entered by %d rank(s) that waited %.0f ms, "
	         "never by %d; ticks: each rank's last calls on it",
	         xm_fn_name(h.fn), h.seq, h.comm, h.npresent, h.wait_ms, h.nmissing);
	figure_begin(c, P_HANG, cap);
	size_t rows = 0;
	for (size_t r = 0; r < nr; r++)
		rows += xm_rank(x, r)->ok;
	struct svg s;
	svg_begin(&s, c->o, c->W, 50 + 26 * (int)rows, "hang", cap);
	s.ml = 124;
	svg_range(&s, xa, xb, 0, (double)rows);
	svg_axes(&s, "time since start (ms)", NULL, 0);
	size_t row = 0;
	for (size_t r = 0; r < nr; r++) {
		const struct xm_rank *R = xm_rank(x, r);
		if (!R->ok)
			continue;
		double y = (double)(rows - 1 - row++);
		int missing = 0;
		for (int i = 0; i < h.nmissing; i++)
			missing |= h.missing[i] == R->rank;
		int cols = c->W - s.ml - s.mr;
		unsigned char *hit = calloc((size_t)cols + 1, 1);
		uint64_t lastt = 0;
		for (size_t k = 0; hit && k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm != h.comm)
				continue;
			if (cl.t > lastt)
				lastt = cl.t;
			int px = svg_col(&s, ms(c, cl.t));
			if (px < 0 || px > cols || hit[px])
				continue;
			hit[px] = 1;
			svg_cell(&s, ms(c, cl.t), y + 0.2, 0, 0.6, missing ? "#c62828" : "#1565c0",
			         NULL);
		}
		free(hit);
		char lab[96];
		snprintf(lab, sizeof lab, "%s%s", R->label, missing ? ": MISSING" : "");
		svg_text(&s, s.ml - 6, svg_py(&s, y + 0.5) + 4, "end", missing ? "al strag" : "al",
		         lab);
		if (missing && lastt) {
			char note[96];
			snprintf(note, sizeof note, "last call at %.0f ms; never entered #%u",
			         ms(c, lastt), h.seq);
			double px = svg_px(&s, ms(c, lastt));
			int right = px < s.w - s.mr - 260; /* room for the note on the right */
			svg_text(&s, px + (right ? 6 : -6), svg_py(&s, y + 0.5) + 4,
			         right ? "start" : "end", "al strag", note);
		}
	}
	if (hang_t) {
		double px = svg_px(&s, ms(c, hang_t));
		fprintf(c->o,
		        "<line class=\"hangline\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>",
		        px, s.mt, px, s.h - s.mb);
		svg_text(&s, px - 4, s.mt - 4, "end", "al strag", "the others wait here");
	}
	svg_end(&s);
	fputs("</figure>\n", c->o);
	return 1;
}

/* Unified-memory migrations over time, one row per allocation (most migrated first) */
static int plot_um(struct ctx *c)
{
	const struct xm_job *x = c->x;
	if (!c->um.n)
		return 0;
	enum { MAXROWS = 8 };
	struct {
		size_t rank;
		long alloc;
		uint64_t migr;
	} top[MAXROWS];
	int nt = 0;
	for (size_t r = 0; r < xm_nranks(x); r++)
		for (size_t k = 0; k < xm_nallocs(x, r); k++) {
			struct xm_alloc a;
			xm_alloc(x, r, k, &a);
			if (!a.migrations)
				continue;
			int at = nt < MAXROWS ? nt++ : MAXROWS;
			if (at == MAXROWS && a.migrations <= top[MAXROWS - 1].migr)
				continue;
			if (at == MAXROWS)
				at = MAXROWS - 1;
			while (at > 0 && top[at - 1].migr < a.migrations) {
				top[at] = top[at - 1];
				at--;
			}
			top[at].rank = r, top[at].alloc = (long)k, top[at].migr = a.migrations;
		}
	if (!nt)
		return 0;
	figure_begin(
	    c, P_UM,
	    "Unified-memory migrations over time by allocation (blue: to a GPU, orange: to "
	    "the CPU; dot area ~ bytes per pixel)");
	double ua = 1e300, ub = -1e300;
	for (size_t i = 0; i < c->um.n; i++) {
		double t = ms(c, c->um.v[i].t);
		ua = t < ua ? t : ua;
		ub = t > ub ? t : ub;
	}
	double pad = (ub - ua) * 0.02 + 0.01;
	struct svg s;
	svg_begin(&s, c->o, c->W, 50 + 40 * nt, "um", "UM migrations by allocation");
	s.ml = 200;
	svg_range(&s, ua - pad, ub + pad, 0, nt);
	svg_axes(&s, "time since start (ms)", NULL, 0);
	int cols = c->W - s.ml - s.mr;
	uint64_t *b = calloc((size_t)nt * 2 * ((size_t)cols + 1), sizeof *b);
	if (b) {
		uint64_t bmax = 1;
		for (size_t i = 0; i < c->um.n; i++) {
			const struct umev *e = &c->um.v[i];
			for (int k = 0; k < nt; k++)
				if (top[k].rank == e->rank && top[k].alloc == e->alloc) {
					int px = svg_col(&s, ms(c, e->t));
					if (px < 0 || px > cols)
						break;
					uint64_t *v = &b[((size_t)k * 2 + (size_t)e->dir) *
					                     ((size_t)cols + 1) +
					                 (size_t)px];
					*v += e->bytes;
					if (*v > bmax)
						bmax = *v;
					break;
				}
		}
		for (int k = 0; k < nt; k++)
			for (int dir = 0; dir < 2; dir++)
				for (int px = 0; px <= cols; px++) {
					uint64_t v =
					    b[((size_t)k * 2 + (size_t)dir) * ((size_t)cols + 1) +
					      (size_t)px];
					if (!v)
						continue;
					double y = nt - 1 - k + (dir ? 0.35 : 0.65);
					double xv = s.x0 + (px + 0.5) / cols * (s.x1 - s.x0);
					char tip[64];
					snprintf(tip, sizeof tip, "%.2f MiB %s",
					         (double)v / 1048576.0, dir ? "to CPU" : "to GPU");
					svg_dot(&s, xv, y, 1 + 3.5 * sqrt((double)v / (double)bmax),
					        dir ? "dtoh" : "htod", tip);
				}
		free(b);
	}
	for (int k = 0; k < nt; k++) {
		struct xm_alloc a;
		xm_alloc(x, top[k].rank, (size_t)top[k].alloc, &a);
		char lab[128];
		double y = svg_py(&s, nt - 1 - k + 0.5);
		snprintf(lab, sizeof lab, "%.0f MiB at 0x%llx", (double)a.bytes / 1048576.0,
		         (unsigned long long)a.ptr);
		svg_text(&s, s.ml - 6, y - 2, "end", "al", lab);
		snprintf(lab, sizeof lab, "%llu migrations, %llu flips",
		         (unsigned long long)a.migrations, (unsigned long long)a.flips);
		svg_text(&s, s.ml - 6, y + 11, "end", "tl", lab);
	}
	svg_legend(&s, 0, "htod", "to a GPU");
	svg_legend(&s, 1, "dtoh", "to the CPU");
	svg_end(&s);
	fputs("</figure>\n", c->o);
	return 1;
}

static int (*const plots[P_COUNT])(struct ctx *) = {plot_bw, plot_skew, plot_hang, plot_um};

static int plot_for(const char *id)
{
	if (!strcmp(id, "straggler"))
		return P_SKEW;
	if (!strcmp(id, "hang_suspect"))
		return P_HANG;
	if (!strcmp(id, "uma_thrashing"))
		return P_UM;
	if (!strcmp(id, "pcie_fallback") || !strcmp(id, "low_bus_bandwidth") ||
	    !strcmp(id, "exposed_communication") || !strcmp(id, "peer_access_disabled") ||
	    !strcmp(id, "collection_gaps"))
		return P_BW;
	return -1;
}

/* Draw plot k once; later findings that want it link to it. */
static void place(struct ctx *c, int k)
{
	if (c->done[k] == 0)
		c->done[k] = plots[k](c) ? 1 : -1;
	else if (c->done[k] == 1)
		fprintf(c->o, "<p class=\"see\"><a href=\"#%s-%s\">see the %s plot above</a></p>\n",
		        c->pfx, plot_names[k], plot_names[k]);
}

static void render(FILE *o, const struct xm_job *x, int W, const char *pfx)
{
	struct ctx c = {.o = o, .x = x, .W = W, .pfx = pfx};
	xm_span(x, &c.t0, &c.t1);
	struct xe_sink sink = {.ctx = &c.um, .ev = um_ev};
	uint64_t recs;
	xe_stream(x, &sink, &recs); /* the UM migrations, with their times */
	size_t nok = 0;
	for (size_t r = 0; r < xm_nranks(x); r++)
		nok += xm_rank(x, r)->ok;
	uint64_t s0, len;
	int steps = xm_steps(x, &s0, &len);
	/* bandwidth over the training steps when they were recognised: the whole job would
	 * squeeze a step into a pixel */
	c.xa = 0;
	c.xb = ms(&c, c.t1);
	if (steps) {
		c.xa = ms(&c, s0);
		c.xb = ms(&c, s0 + (uint64_t)steps * len);
	}
	fprintf(o, "<p class=\"meta\">%zu process(es), %.1f ms", nok, ms(&c, c.t1));
	if (steps)
		fprintf(o, ", %d steps of %.2f ms", steps, (double)len / 1e6);
	fputs("</p>\n", o);
	fprintf(o, "<section class=\"findings\" id=\"%s-findings\"><h2>Findings</h2>\n", pfx);
	if (!xm_nfindings(x))
		fputs("<p class=\"none\">No finding: nothing to explain.</p>\n", o);
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		fprintf(o,
		        "<article class=\"finding sev-%s\" id=\"%s-f-%s\"><h3><span class=\"sev\">",
		        f.sev, pfx, f.id);
		svg_esc(o, f.sev);
		fputs("</span> <code>", o);
		svg_esc(o, f.id);
		fputs("</code> ", o);
		svg_esc(o, f.title);
		fputs("</h3>\n", o);
		if (f.explained_by) {
			fputs("<p class=\"expl\">explained by <code>", o);
			svg_esc(o, f.explained_by);
			fputs("</code></p>\n", o);
		}
		fputs("<ul class=\"ev\">", o);
		for (int k = 0; k < f.nev; k++) {
			char ev[400];
			xm_finding_ev(x, i, k, ev, sizeof ev);
			/* a Python code location: its own line, as in the text report */
			fputs(strncmp(ev, "python", 6) ? "<li>" : "<li class=\"loc\">", o);
			svg_esc(o, ev);
			fputs("</li>", o);
		}
		fputs("</ul>\n<p class=\"advice\">", o);
		svg_esc(o, f.advice);
		fputs("</p>\n", o);
		int k = plot_for(f.id);
		if (k >= 0)
			place(&c, k);
		fputs("</article>\n", o);
	}
	fputs("</section>\n", o);
	fprintf(o, "<section class=\"more\" id=\"%s-more\"><h2>More plots</h2>\n", pfx);
	for (int k = 0; k < P_COUNT; k++)
		if (!c.done[k])
			c.done[k] = plots[k](&c) ? 1 : -1;
	fputs("</section>\n", o);
	fprintf(o,
	        "<details class=\"text\" id=\"%s-text\"><summary>Full text report</summary><pre>",
	        pfx);
	char *buf = NULL;
	size_t blen = 0;
	FILE *m = open_memstream(&buf, &blen);
	if (m) {
		xm_report_text(m, x);
		fclose(m);
		svg_esc(o, buf);
		free(buf);
	}
	fputs("</pre></details>\n", o);
	free(c.um.v);
}

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;"
    "margin:0 auto;padding:16px 20px;color:#1d1d1d;background:#fff}"
    "h1{font-size:22px;margin:4px 0}h2{font-size:18px;border-bottom:1px solid #ddd;"
    "padding-bottom:2px}h3{font-size:15px;margin:2px 0 6px}"
    ".meta{color:#555;margin:2px 0 10px}code{font-family:ui-monospace,monospace;font-size:13px}"
    ".finding{border-left:6px solid #888;background:#f7f7f7;padding:8px 14px;margin:14px 0}"
    ".sev-critical{border-color:#c62828}.sev-warning{border-color:#ef6c00}"
    ".sev-info{border-color:#1565c0}.sev{text-transform:uppercase;font-size:12px;"
    "letter-spacing:.05em;color:#fff;background:#888;padding:1px 6px;border-radius:3px}"
    ".sev-critical .sev{background:#c62828}.sev-warning .sev{background:#ef6c00}"
    ".sev-info .sev{background:#1565c0}.ev{margin:4px 0;padding-left:18px;columns:2;"
    "font-size:13px;color:#333;overflow-wrap:anywhere}.ev li.loc{column-span:all;font-family:"
    "monospace}.advice{margin:6px 0}.expl{margin:2px "
    "0;color:#555}"
    "figure{margin:8px 0}figcaption{font-size:13px;color:#444;margin-bottom:4px}"
    "svg{display:block;max-width:100%;height:auto;margin:4px 0;background:#fff}"
    "svg .area{fill:#fff;stroke:#999}svg .tick{stroke:#888}svg .grid{stroke:#eee}"
    "svg .tl{font-size:10px;fill:#444}svg .al{font-size:11px;fill:#222}"
    "svg .strag{fill:#c62828;font-weight:600}"
    "svg .nvl{fill:none;stroke:#2e7d32;stroke-width:1.3}"
    "svg .pcie{fill:none;stroke:#c62828;stroke-width:1.3}"
    "svg .coll{fill:#1565c0;fill-opacity:.13}svg .sw{stroke:none}svg .sw.nvl{fill:#2e7d32}"
    "svg .sw.pcie{fill:#c62828}svg .htod{fill:#1565c0;fill-opacity:.75}"
    "svg .dtoh{fill:#ef6c00;fill-opacity:.75}svg .hangline{stroke:#c62828;"
    "stroke-dasharray:4 3;stroke-width:1.5}"
    "pre{font-size:12px;background:#f7f7f7;padding:8px;overflow-x:auto}"
    ".diff{display:grid;grid-template-columns:1fr 1fr;gap:18px}.diff>div{min-width:0}"
    "table.sum{border-collapse:collapse;font-size:13px}table.sum td,table.sum th{"
    "border-bottom:1px solid #e4e4e4;padding:2px 10px;text-align:right}"
    "table.sum td:first-child{text-align:left}";

static void page_begin(FILE *o, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
	      "<title>",
	      o);
	svg_esc(o, title);
	fprintf(o, "</title>\n<style>%s</style>\n</head><body>\n<h1>", css);
	svg_esc(o, title);
	fputs("</h1>\n", o);
}

static void page_end(FILE *o)
{
	fputs("<p class=\"meta\">Written by nvlprof: self-contained (no script, no network).</p>\n"
	      "</body></html>\n",
	      o);
}

int xh_report(FILE *o, const struct xm_job *x, const char *title)
{
	char t[600];
	snprintf(t, sizeof t, "nvlprof report: %s", title);
	page_begin(o, t);
	render(o, x, 900, "r");
	page_end(o);
	return ferror(o) ? -1 : 0;
}

int xh_diff(FILE *o, const struct xm_job *b, const struct xm_job *a, const char *tb, const char *ta)
{
	char t[600];
	snprintf(t, sizeof t, "nvlprof diff: %s vs %s", tb, ta);
	page_begin(o, t);
	struct xm_summary sb, sa;
	xm_summary(b, &sb);
	xm_summary(a, &sa);
	fputs("<table class=\"sum\" id=\"summary\"><tr><th></th><th>before</th><th>after</th>"
	      "<th>change</th></tr>\n",
	      o);
	struct {
		const char *name;
		double b, a;
	} m[] = {{"wall ms", sb.wall_ms, sa.wall_ms},
	         {"step ms", sb.step_ms, sa.step_ms},
	         {"communication ms per rank", sb.comm_ms, sa.comm_ms},
	         {"exposed ms per rank", sb.exposed_ms, sa.exposed_ms},
	         {"exposed share", sb.exposed_share, sa.exposed_share},
	         {"NVLink MiB", sb.nvlink_mib, sa.nvlink_mib},
	         {"PCIe MiB", sb.pcie_mib, sa.pcie_mib},
	         {"P2P copy MiB", sb.copy_p2p_mib, sa.copy_p2p_mib},
	         {"staged copy MiB", sb.copy_staged_mib, sa.copy_staged_mib}};
	for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
		fprintf(o, "<tr><td>%s</td>", m[i].name);
		for (int k = 0; k < 2; k++) {
			double v = k ? m[i].a : m[i].b;
			if (isnan(v))
				fputs("<td>-</td>", o);
			else
				fprintf(o, "<td>%.3g</td>", v);
		}
		if (!isnan(m[i].a) && !isnan(m[i].b) && m[i].b != 0)
			fprintf(o, "<td>%+.0f%%</td></tr>\n", (m[i].a / m[i].b - 1) * 100);
		else
			fputs("<td></td></tr>\n", o);
	}
	fputs("</table>\n<div class=\"diff\">\n<div class=\"side\" id=\"before\"><h2>before: ", o);
	svg_esc(o, tb);
	fputs("</h2>\n", o);
	render(o, b, 540, "b");
	fputs("</div>\n<div class=\"side\" id=\"after\"><h2>after: ", o);
	svg_esc(o, ta);
	fputs("</h2>\n", o);
	render(o, a, 540, "a");
	fputs("</div>\n</div>\n", o);
	page_end(o);
	return ferror(o) ? -1 : 0;
}

int xh_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--html") || !strncmp(argv[i], "--html=", 7))
			return 1;
	return 0;
}

int xh_cmd(int argc, char **argv, int diff)
{
	struct xm_opts opts;
	xm_opts_init(&opts);
	int np = 0;
	const char *out = NULL;
	char **paths = calloc((size_t)argc + 1, sizeof *paths);
	if (!paths)
		return 2;
	const char *cmd = diff ? "diff" : "report";
	for (int i = 1; i < argc; i++) {
		int c = xm_opt(argc, argv, &i, &opts);
		if (c < 0) {
			free(paths);
			return 2;
		}
		if (c)
			continue;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf(diff ? "usage: nvlprof diff --html FILE [options] BEFORE AFTER\n"
			            : "usage: nvlprof report --html FILE [options] FILE|DIR...\n");
			printf(
			    "One self-contained HTML file (no script, no network): findings first, "
			    "each with its plot.\nOptions: --threshold NAME=VALUE, -j N (as "
			    "without "
			    "--html). See analyzer/EXPORT.md.\n");
			free(paths);
			return 0;
		}
		if (!strcmp(argv[i], "--html") && i + 1 < argc)
			out = argv[++i];
		else if (!strncmp(argv[i], "--html=", 7))
			out = argv[i] + 7;
		else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr,
			        "nvlprof: %s --html: option %s is not for the HTML report\n", cmd,
			        argv[i]);
			free(paths);
			return 2;
		} else
			paths[np++] = argv[i];
	}
	if (!out || !*out || !np || (diff && np != 2)) {
		fprintf(stderr, diff ? "usage: nvlprof diff --html FILE BEFORE AFTER\n"
		                     : "usage: nvlprof report --html FILE FILE|DIR...\n");
		free(paths);
		return 2;
	}
	struct xm_job *x = xm_open(paths, diff ? 1 : np, &opts), *y = NULL;
	if (x && diff)
		y = xm_open(paths + 1, 1, &opts);
	if (!x || (diff && !y)) {
		xm_close(x);
		free(paths);
		return 2;
	}
	FILE *o = strcmp(out, "-") ? fopen(out, "w") : stdout;
	if (!o) {
		fprintf(stderr, "nvlprof: %s: cannot write %s\n", cmd, out);
		xm_close(x);
		xm_close(y);
		free(paths);
		return 2;
	}
	char title[512] = "";
	size_t n = 0;
	for (int i = 0; i < (diff ? 1 : np) && n < sizeof title - 1; i++)
		n += (size_t)snprintf(title + n, sizeof title - n, "%s%s", i ? " " : "", paths[i]);
	int rc = diff ? xh_diff(o, x, y, paths[0], paths[1]) : xh_report(o, x, title);
	if (o != stdout && fclose(o) != 0)
		rc = -1;
	if (rc)
		fprintf(stderr, "nvlprof: %s: write error on %s\n", cmd, out);
	xm_close(x);
	xm_close(y);
	free(paths);
	return rc ? 2 : 0;
}

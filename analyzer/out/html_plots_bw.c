/* html_plots_bw.c: the HTML page's link bandwidth plots (per GPU, collectives shaded) and
 * arrival skew heatmaps (by rank and collective). */
#include <math.h>   /* sqrt */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "out/heatband.h" /* hb_merge */
#include "out/html_int.h"
#include "util/util.h" /* an_fmt_value */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* One GPU's link samples as GB/s at each sample's midpoint, with a NaN point (a gap, svg_series)
 * where samples are missing: flagged lost (NVLP_LINKSAMPLE_F_GAP), a sample much longer than the
 * usual one, or time between two samples. xs, yn, yp hold 2n; *m gets the points written. Returns
 * the largest rate (>= 1). */
static double bw_rates(const struct ctx *c, size_t r, size_t d, size_t n, double *xs, double *yn,
                       double *yp, size_t *m)
{
	double ymax = 1;
	uint64_t *dur = malloc(n * sizeof *dur), usual = 0;
	if (dur) { /* the median sample length */
		for (size_t k = 0; k < n; k++) {
			struct xm_sample s;
			xm_sample(c->x, r, d, k, &s);
			dur[k] = s.e > s.s ? s.e - s.s : 0;
		}
		qsort(dur, n, sizeof *dur, cmp_u64);
		usual = dur[n / 2];
		free(dur);
	}
	uint64_t prev_e = 0;
	size_t j = 0;
	for (size_t k = 0; k < n; k++) {
		struct xm_sample s;
		xm_sample(c->x, r, d, k, &s);
		uint64_t len = s.e > s.s ? s.e - s.s : 1;
		int gap = (s.gap && k) ||
		          (usual && (len > 3 * usual || (prev_e && s.s > prev_e + 2 * usual)));
		prev_e = s.e;
		int long_one = usual && len > 3 * usual; /* a sample over the missing time */
		if (gap) { /* no samples over this time: no line across it */
			xs[j] = xh_ms(c, long_one ? s.s + len / 2 : s.s);
			yn[j] = yp[j] = NAN;
			j++;
			if (long_one)
				continue;
		}
		xs[j] = xh_ms(c, s.s + len / 2);
		yn[j] = (double)s.nvl / (double)len;
		yp[j] = (double)s.pcie / (double)len;
		if (yn[j] > ymax)
			ymax = yn[j];
		if (yp[j] > ymax)
			ymax = yp[j];
		j++;
	}
	*m = j;
	return ymax;
}

/* The largest link rate of any GPU of the job, GB/s (diff: both sides on one scale) */
double xh_bw_max(struct ctx *c)
{
	double mx = 0;
	for (size_t r = 0; r < xm_nranks(c->x); r++)
		for (size_t d = 0; xm_rank(c->x, r)->ok && d < xm_ndevs(c->x, r); d++) {
			size_t n = xm_nsamples(c->x, r, d), m;
			double *xs = n ? malloc(n * 6 * sizeof *xs) : NULL;
			if (!xs)
				continue;
			double y = bw_rates(c, r, d, n, xs, xs + 2 * n, xs + 4 * n, &m);
			mx = y > mx ? y : mx;
			free(xs);
		}
	return mx;
}

/* Shade the GPU's NCCL kernels, merged where closer than a pixel */
static void bw_coll_bands(const struct ctx *c, struct svg *s, size_t r, size_t d)
{
	const struct xm_job *x = c->x;
	double px_ms = (s->x1 - s->x0) / (c->W - s->ml - s->mr);
	double a = -1, b = -1;
	for (size_t k = 0; k < xm_ncoll_ivals(x, r, d); k++) {
		uint64_t is, ie;
		xm_coll_ival(x, r, d, k, &is, &ie);
		double u = xh_ms(c, is), v = xh_ms(c, ie);
		if (v < s->x0 || u > s->x1)
			continue;
		if (u < s->x0)
			u = s->x0;
		if (v > s->x1)
			v = s->x1;
		if (a >= 0 && u <= b + px_ms) {
			if (v > b)
				b = v;
			continue;
		}
		if (a >= 0)
			svg_band(s, a, b, "coll");
		a = u, b = v;
	}
	if (a >= 0)
		svg_band(s, a, b, "coll");
}

/* The bandwidth plot of one GPU from its rates (bw_rates) */
static void bw_gpu_plot(const struct ctx *c, size_t r, size_t d, const double *xs, const double *yn,
                        const double *yp, size_t n, double ymax)
{
	const struct xm_job *x = c->x;
	char title[160];
	snprintf(title, sizeof title, "%s GPU %d: NVLink and PCIe GB/s", xm_rank(x, r)->label,
	         xm_dev(x, r, d));
	struct svg s;
	svg_begin(&s, c->o, c->W, 200, "bw", title);
	svg_range(&s, c->xa, c->xb, 0, (c->ymax > 0 ? c->ymax : ymax) * 1.05);
	svg_axes(&s, "time since start (ms)", "GB/s", 1);
	bw_coll_bands(c, &s, r, d);
	svg_series(&s, xs, yp, n, "pcie");
	svg_series(&s, xs, yn, n, "nvl");
	svg_legend(&s, 0, "nvl", "NVLink");
	svg_legend(&s, 1, "pcie", "PCIe");
	svg_legend(&s, 2, "coll", "NCCL kernels");
	char shortt[64]; /* in narrow plots the legend leaves room for less */
	snprintf(shortt, sizeof shortt, "%s GPU %d", xm_rank(x, r)->label, xm_dev(x, r, d));
	svg_text(&s, c->W - s.mr, 16, "end", "al", c->W < 700 ? shortt : title);
	svg_end(&s);
}

/* 1 when every rank is a row of the rank view (a job that is not large, or --all-ranks) */
int xh_bw_all(const struct xm_job *x)
{
	struct xm_rank_view v;
	xm_rank_view(x, &v);
	return v.all;
}

/* NVLink and PCIe GB/s per GPU over time, NCCL kernels shaded */
int xh_plot_bw(struct ctx *c)
{
	const struct xm_job *x = c->x;
	int drawn = 0, all = xh_bw_all(x);
	for (size_t r = 0; r < xm_nranks(x); r++) {
		/* a large job: the GPUs of the first ranks that matter */
		if (!xm_rank(x, r)->ok || !xm_rank_kept(x, r) || (!all && drawn >= HEAT_OWN_ROWS))
			continue;
		for (size_t d = 0; d < xm_ndevs(x, r); d++) {
			size_t n = xm_nsamples(x, r, d);
			if (!n)
				continue;
			double *xs = malloc(n * 6 * sizeof *xs);
			if (!xs)
				continue;
			double *yn = xs + 2 * n, *yp = xs + 4 * n;
			size_t m;
			double ymax = bw_rates(c, r, d, n, xs, yn, yp, &m);
			if (!drawn)
				xh_figure_begin(
				    c, P_BW,
				    !all
				        ? "Link bandwidth over time of the GPUs of the first 24 "
				          "ranks that matter (a large job: the ranks table's rows; "
				          "GB/s, tx+rx; over the recognised training steps when "
				          "there are some); shaded: NCCL kernels running; a break "
				          "in a line: no samples"
				    : c->ymax > 0
				        ? "Link bandwidth per GPU over time (GB/s, tx+rx; over "
				          "the recognised training steps when there are some; "
				          "one y scale for both runs); shaded: NCCL kernels "
				          "running; a break in a line: no samples"
				        : "Link bandwidth per GPU over time (GB/s, tx+rx; over "
				          "the recognised training steps when there are some); "
				          "shaded: NCCL kernels running; a break in a line: no "
				          "samples");
			bw_gpu_plot(c, r, d, xs, yn, yp, m, ymax);
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

/* The arrival table of the skew plot: one row per rank that called on the communicator */
struct skew {
	size_t rows, ncol;
	size_t *row_of;  /* per rank: its row + 1, 0 if it has none */
	size_t *rank_of; /* per row: its rank */
	uint64_t *t;     /* t[q * rows + row]: arrival at collective q, then lateness (ns) */
	double maxskew;  /* ms */
	double sat;      /* ms at which the colour is full */
	struct hb_rows
	    hb;        /* past heatmap_rows ranks: what each row is (rank_of SIZE_MAX: merged) */
	size_t nranks; /* rows before the merge */
};

static void skew_free(struct skew *k)
{
	hb_free(&k->hb);
	free(k->t);
	free(k->row_of);
	free(k->rank_of);
}

/* Give a row to each rank with a call on comm and find the range of their sequence numbers;
 * 0 if out of memory. */
static int skew_rows(const struct xm_job *x, int comm, struct skew *k, uint32_t *smin,
                     uint32_t *smax)
{
	size_t nr = xm_nranks(x);
	k->row_of = calloc(nr, sizeof *k->row_of);
	k->rank_of = calloc(nr, sizeof *k->rank_of);
	*smin = UINT32_MAX;
	*smax = 0;
	if (!k->row_of || !k->rank_of)
		return 0;
	for (size_t r = 0; r < nr; r++) {
		int has = 0;
		for (size_t q = 0; q < xm_ncalls(x, r); q++) {
			struct xm_call cl;
			xm_call(x, r, q, &cl);
			if (cl.comm != comm)
				continue;
			has = 1;
			if (cl.seq < *smin)
				*smin = cl.seq;
			if (cl.seq > *smax)
				*smax = cl.seq;
		}
		if (has) {
			k->row_of[r] = k->rows + 1;
			k->rank_of[k->rows++] = r;
		}
	}
	return 1;
}

/* Each row's first arrival at each of ns sequence numbers from smin (0: never); 0 if out of
 * memory. */
static int skew_arrivals(const struct xm_job *x, int comm, struct skew *k, uint32_t smin, size_t ns)
{
	k->t = calloc(ns * k->rows, sizeof *k->t);
	if (!k->t)
		return 0;
	size_t rows = k->rows;
	for (size_t r = 0; r < xm_nranks(x); r++) {
		if (!k->row_of[r])
			continue;
		for (size_t q = 0; q < xm_ncalls(x, r); q++) {
			struct xm_call cl;
			xm_call(x, r, q, &cl);
			if (cl.comm == comm && !k->t[(cl.seq - smin) * rows + k->row_of[r] - 1])
				k->t[(cl.seq - smin) * rows + k->row_of[r] - 1] = cl.t ? cl.t : 1;
		}
	}
	return 1;
}

/* Keep the collectives every row entered, as lateness after the first arrival */
static void skew_lateness(struct skew *k, size_t ns)
{
	size_t rows = k->rows;
	uint64_t *t = k->t;
	k->ncol = 0;
	k->maxskew = 0;
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
			t[k->ncol * rows + i] =
			    t[q * rows + i] - mn; /* compact in place: ncol <= q */
			if (sk > k->maxskew)
				k->maxskew = sk;
		}
		k->ncol++;
	}
}

/* Colours saturate at the 95th percentile: one startup outlier must not wash out the steady
 * pattern */
static void skew_saturation(struct skew *k)
{
	/* merged rows (a large job): the 95th percentile of the collectives' skew (each column's
	 * latest); of the cells, it is jitter when the late rows are under 5% of the rows (a
	 * straggler among 23 rows would look no later than a host of 32 ranks' jitter) */
	int merged = k->rows < k->nranks;
	size_t n = merged ? k->ncol : k->ncol * k->rows;
	double *all = malloc(n * sizeof *all);
	k->sat = k->maxskew;
	if (all) {
		for (size_t i = 0; i < n; i++) {
			uint64_t v = merged ? 0 : k->t[i];
			for (size_t r = 0; merged && r < k->rows; r++)
				v = k->t[i * k->rows + r] > v ? k->t[i * k->rows + r] : v;
			all[i] = (double)v / 1e6;
		}
		qsort(all, n, sizeof *all, cmp_double);
		k->sat = all[(n - 1) * 95 / 100];
		free(all);
	}
	if (k->sat < 0.01)
		k->sat = k->maxskew > 0.01 ? 0.01 : k->maxskew;
}

/* The rank the straggler finding names; -2 if there is none */
static int straggler_rank(const struct xm_job *x)
{
	int rank = -2;
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		if (!strcmp(f.id, "straggler"))
			rank = f.root_rank;
	}
	return rank;
}

/* Past heatmap_rows ranks: the straggler and the first HEAT_OWN_ROWS - 1 ranks that matter stay
 * rows, the others are merged (heatband.h); 0 if out of memory */
static int skew_merge(const struct xm_job *x, struct skew *k)
{
	struct xm_rank_view v;
	xm_rank_view(x, &v);
	k->nranks = k->rows;
	if (!((double)k->rows > v.heat_rows))
		return 1;
	uint8_t *keep = calloc(k->rows, 1);
	const char **host = malloc(k->rows * sizeof *host);
	int strag = straggler_rank(x);
	for (size_t i = 0, nk = 0; keep && host && i < k->rows; i++) {
		const struct xm_rank *R = xm_rank(x, k->rank_of[i]);
		keep[i] = R->rank == strag ||
		          (!v.all && xm_rank_kept(x, k->rank_of[i]) && nk < HEAT_OWN_ROWS - 1);
		nk += keep[i];
		host[i] = R->host;
	}
	uint64_t *o = NULL;
	int ok = keep && host && hb_merge(k->t, k->ncol, k->rows, keep, host, &o, &k->hb) == 0;
	if (ok) {
		free(k->t);
		k->t = o;
		for (size_t i = 0; i < k->hb.rows; i++) /* kept rows first: src[i] >= i */
			k->rank_of[i] =
			    k->hb.src[i] != SIZE_MAX ? k->rank_of[k->hb.src[i]] : SIZE_MAX;
		k->rows = k->hb.rows;
	}
	free(keep);
	free(host);
	return ok;
}

/* Row i's name: its rank's label, or what a merged row holds */
static const char *skew_label(const struct xm_job *x, const struct skew *k, size_t i)
{
	return k->rank_of[i] == SIZE_MAX ? k->hb.label[i] : xm_rank(x, k->rank_of[i])->label;
}

/* Row i of the skew plot: one cell per `per` collectives (the latest arrival shown), and the
 * rank's label with how often it was last */
static void skew_row(const struct ctx *c, struct svg *s, const struct skew *k, size_t i, size_t per,
                     int strag_rank)
{
	const struct xm_job *x = c->x;
	size_t ncol = k->ncol, cells = (ncol + per - 1) / per;
	double y = (double)(k->rows - 1 - i);
	for (size_t cell = 0; cell < cells; cell++) {
		double mx = 0;
		for (size_t q = cell * per; q < (cell + 1) * per && q < ncol; q++) {
			double v = (double)k->t[q * k->rows + i] / 1e6;
			if (v > mx)
				mx = v;
		}
		char fill[8], tip[96];
		svg_heat(k->sat > 0 ? mx / k->sat : 0, fill);
		snprintf(tip, sizeof tip, "%s, collectives %zu-%zu: +%.3f ms", skew_label(x, k, i),
		         cell * per, (cell + 1) * per - 1 < ncol ? (cell + 1) * per - 1 : ncol - 1,
		         mx);
		svg_cell(s, (double)(cell * per), y + 0.08,
		         (double)((cell + 1) * per < ncol ? per : ncol - cell * per), 0.84, fill,
		         tip);
	}
	if (k->rank_of[i] == SIZE_MAX) { /* merged: no last share of its own */
		svg_text(s, s->ml - 6, svg_py(s, y + 0.5) + 4, "end", "al", k->hb.label[i]);
		return;
	}
	uint64_t last, colls;
	xm_rank_last(x, k->rank_of[i], &last, &colls);
	char lab[96];
	snprintf(lab, sizeof lab, "%s: last %.0f%%", xm_rank(x, k->rank_of[i])->label,
	         colls ? 100.0 * (double)last / (double)colls : 0.0);
	int strag = xm_rank(x, k->rank_of[i])->rank == strag_rank;
	svg_text(s, s->ml - 6, svg_py(s, y + 0.5) + 4, "end", strag ? "al strag" : "al", lab);
}

/* The colour scale of a heatmap in the top margin, right: 0 to full (sat, in unit) */
static void heat_scale(struct svg *s, double sat, const char *unit)
{
	enum { STEPS = 10, SW = 12 };
	double x = s->w - s->mr - STEPS * SW - 70, y = 6;
	svg_text(s, x - 4, y + 9, "end", "tl", "0");
	for (int i = 0; i < STEPS; i++) {
		char fill[8];
		svg_heat((i + 0.5) / STEPS, fill);
		fprintf(s->o,
		        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"10\" fill=\"%s\"/>",
		        x + i * SW, y, SW, fill);
	}
	char lab[48];
	snprintf(lab, sizeof lab, "%.2f %s", sat, unit);
	svg_text(s, x + STEPS * SW + 4, y + 9, "start", "tl", lab);
}

/* The skew figure from a filled table */
static void skew_draw(struct ctx *c, const struct skew *k)
{
	int plotw = c->W - 64 - 16 - 60;
	size_t per =
	    (k->ncol + (size_t)plotw / 3 - 1) / ((size_t)plotw / 3); /* collectives per cell */
	if (per < 1)
		per = 1;
	char cap[520], merged[200] = "";
	size_t nk = 0;
	for (size_t i = 0; i < k->rows; i++)
		nk += k->rank_of[i] != SIZE_MAX;
	if (k->rows < k->nranks)
		snprintf(
		    merged, sizeof merged,
		    "; of %zu ranks, the %zu that matter are rows and the other %zu are merged "
		    "%s, a merged cell the latest of its ranks",
		    k->nranks, nk, k->nranks - nk,
		    k->hb.bands ? "into tenths by their mean lateness" : "by host");
	snprintf(cap, sizeof cap,
	         "Arrival skew on the main communicator: how late each rank entered each of %zu "
	         "collectives (ms after the first rank; darker = later, full colour at the 95th "
	         "percentile%s, %.2f ms; %zu per cell, the latest shown); max %.2f ms%s",
	         k->ncol, merged[0] ? " of the collectives' skew" : "", k->sat, per, k->maxskew,
	         merged);
	xh_figure_begin(c, P_SKEW, cap);
	int strag_rank = straggler_rank(c->x);
	struct svg s;
	int h = 60 + 26 * (int)k->rows;
	svg_begin(&s, c->o, c->W, h, "skew", "arrival skew by rank and collective");
	s.ml = k->rows < k->nranks ? 150 : 124; /* merged: "rank 12345: last 100%" in bold fits */
	svg_range(&s, 0, (double)k->ncol, 0, (double)k->rows);
	svg_axes(&s, "collective (in sequence order)", NULL, 0);
	for (size_t i = 0; i < k->rows; i++)
		skew_row(c, &s, k, i, per, strag_rank);
	heat_scale(&s, k->sat, "ms late");
	svg_end(&s);
	fputs("</figure>\n", c->o);
}

/* Arrival skew by rank and collective on the main communicator: how long after the first rank
 * each rank entered the call */
int xh_plot_skew(struct ctx *c)
{
	const struct xm_job *x = c->x;
	int comm = xm_main_comm(x);
	if (comm < 0)
		return 0;
	struct skew k = {0};
	uint32_t smin, smax;
	int ok = skew_rows(x, comm, &k, &smin, &smax) && k.rows >= 2 && smax >= smin &&
	         smax - smin <= 1000000;
	size_t ns = ok ? (size_t)(smax - smin) + 1 : 0;
	ok = ok && skew_arrivals(x, comm, &k, smin, ns);
	if (ok) {
		skew_lateness(&k, ns);
		ok = k.ncol > 0 && skew_merge(x, &k);
	}
	if (ok) {
		skew_saturation(&k);
		skew_draw(c, &k);
	}
	skew_free(&k);
	return ok;
}

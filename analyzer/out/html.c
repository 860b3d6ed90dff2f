/* html.c: `nvlprof report --html FILE` and `diff --html FILE`: one self-contained HTML file (no
 * script, no network, no external font) with the findings first, each with its inline SVG plot:
 * link bandwidth per GPU with collectives shaded, arrival skew by rank and collective, the
 * missing rank of a hang, unified-memory migrations by allocation; diff puts two runs side by
 * side. */
#include <errno.h> /* errno */
#include <math.h>   /* sqrt */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "out/export.h"
#include "out/heatband.h" /* hb_merge */
#include "out/report.h" /* struct an_diff_view */
#include "out/svg.h"
#include "util/util.h" /* an_fmt_value, nvlp_out_finish */

enum { P_BW, P_SKEW, P_HANG, P_UM, P_COUNT };
/* A large job's rows of their own in the heatmaps and bandwidth plots of their own (each the width
 * of the page; plot_bw's caption says 24) */
enum { HEAT_OWN_ROWS = 24 };
static const char *const plot_names[P_COUNT] = {"bandwidth", "skew", "hang", "um"};
/* The heading of a plot no finding explains, in its own named section */
static const char *const plot_titles[P_COUNT] = {"Link bandwidth", "Arrival skew", "Hang",
                                                 "Unified memory"};

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
	if (!xe_um_migration(u->counter))
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		struct umev *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct umev){e->ts, u->value, e->alloc,
	                             u->counter == NVLP_UM_BYTES_TRANSFER_DTOH, e->rank};
}

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
			xs[j] = ms(c, long_one ? s.s + len / 2 : s.s);
			yn[j] = yp[j] = NAN;
			j++;
			if (long_one)
				continue;
		}
		xs[j] = ms(c, s.s + len / 2);
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
static double bw_max(struct ctx *c)
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
		double u = ms(c, is), v = ms(c, ie);
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
static int bw_all(const struct xm_job *x)
{
	struct xm_rank_view v;
	xm_rank_view(x, &v);
	return v.all;
}

/* NVLink and PCIe GB/s per GPU over time, NCCL kernels shaded */
static int plot_bw(struct ctx *c)
{
	const struct xm_job *x = c->x;
	int drawn = 0, all = bw_all(x);
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
				figure_begin(
				    c, P_BW,
				    !all ? "Link bandwidth over time of the GPUs of the first 24 "
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
	struct hb_rows hb; /* past heatmap_rows ranks: what each row is (rank_of SIZE_MAX: merged) */
	size_t nranks;     /* rows before the merge */
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
			k->rank_of[i] = k->hb.src[i] != SIZE_MAX ? k->rank_of[k->hb.src[i]] : SIZE_MAX;
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
		         cell * per,
		         (cell + 1) * per - 1 < ncol ? (cell + 1) * per - 1 : ncol - 1, mx);
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
		snprintf(merged, sizeof merged,
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
	figure_begin(c, P_SKEW, cap);
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
static int plot_skew(struct ctx *c)
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
	double xa = ms(c, c->t1);
	for (size_t r = 0; r < xm_nranks(x); r++) {
		uint64_t ring[40] = {0};
		size_t m = 0;
		for (size_t k = 0; k < xm_ncalls(x, r); k++) {
			struct xm_call cl;
			xm_call(x, r, k, &cl);
			if (cl.comm == comm)
				ring[m++ % 40] = cl.t;
		}
		if (m && ms(c, ring[m >= 40 ? m % 40 : 0]) < xa)
			xa = ms(c, ring[m >= 40 ? m % 40 : 0]);
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
	return last ? ms(c, last) : ms(c, c->t1);
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
		int px = svg_col(s, ms(c, cl.t));
		if (px < 0 || px > cols || hit[px])
			continue;
		hit[px] = 1;
		svg_cell(s, ms(c, cl.t), y + 0.2, 0, 0.6, missing ? "#c62828" : "#1565c0", NULL);
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
		snprintf(note, sizeof note, "last call at %.0f ms; never entered #%u", ms(c, lastt),
		         h->seq);
		double px = svg_px(s, ms(c, lastt));
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
static int plot_hang(struct ctx *c)
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
	         xm_fn_name(h.fn), h.seq, h.comm, h.npresent, h.wait_ms, h.nmissing, ms(c, c->t1));
	figure_begin(c, P_HANG, cap);
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
				int px = svg_col(s, ms(c, e->t));
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
static int plot_um(struct ctx *c)
{
	if (!c->um.n)
		return 0;
	struct um_top top[UM_MAXROWS];
	int nt = um_top_allocs(c->x, top);
	if (!nt)
		return 0;
	figure_begin(
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
	    !strcmp(id, "exposed_communication") || !strcmp(id, "peer_access_disabled"))
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

/* The time range of the page's plots over time (the training steps when recognised, widened to
 * the UM migrations), and under the title the report's own first lines: processes, steps, data,
 * the communication summary, as `nvlprof report` prints them (xm_head_text) */
static void render_meta(struct ctx *c)
{
	const struct xm_job *x = c->x;
	uint64_t s0, len;
	int steps = xm_steps(x, &s0, &len);
	/* bandwidth over the training steps when they were recognised: the whole job would
	 * squeeze a step into a pixel */
	c->xa = 0;
	c->xb = ms(c, c->t1);
	if (steps) {
		c->xa = ms(c, s0);
		c->xb = ms(c, s0 + (uint64_t)steps * len);
	}
	for (size_t i = 0; i < c->um.n; i++) {
		double t = ms(c, c->um.v[i].t);
		c->xa = t < c->xa ? t : c->xa;
		c->xb = t > c->xb ? t : c->xb;
	}
	char *buf = NULL;
	size_t blen = 0;
	FILE *m = open_memstream(&buf, &blen);
	if (!m)
		return;
	xm_head_text(m, x);
	fclose(m);
	fprintf(c->o, "<div class=\"head\" id=\"%s-head\">", c->pfx);
	for (char *l = buf, *e; l && *l; l = e ? e + 1 : NULL) {
		e = strchr(l, '\n');
		if (e)
			*e = 0;
		/* the communication line is the summary the reader looks for first */
		fputs(strncmp(l, "communication:", 14) ? "<p class=\"meta\">"
		                                       : "<p class=\"sumline\">",
		      c->o);
		svg_esc(c->o, l);
		fputs("</p>", c->o);
	}
	fputs("</div>\n", c->o);
	free(buf);
}

/* Finding i as an article: severity, id, title, evidence, advice, and its plot */
static void render_finding(struct ctx *c, size_t i)
{
	FILE *o = c->o;
	struct xm_finding f;
	xm_finding(c->x, i, &f);
	fprintf(o, "<article class=\"finding sev-%s\" id=\"%s-f-%s\"><h3><span class=\"sev\">",
	        f.sev, c->pfx, f.id);
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
		if (!xm_finding_card(c->x, i, k, ev, sizeof ev))
			continue; /* explained_by, severity_alone: the heading says them */
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
		place(c, k);
	fputs("</article>\n", o);
}

/* The text report, escaped, folded under the plots */
static void render_text(FILE *o, const struct xm_job *x, const char *pfx)
{
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
}

/* A number cell as text prints it ("-" for NaN) */
static void td_num(FILE *o, const char *fmt, double v)
{
	if (isnan(v)) {
		fputs("<td>-</td>", o);
		return;
	}
	fputs("<td>", o);
	fprintf(o, fmt, v);
	fputs("</td>", o);
}

/* The header row; a name starting with '<' heads a column of text (left-aligned) */
static void th_row(FILE *o, const char *const *h, size_t n)
{
	fputs("<thead><tr>", o);
	for (size_t i = 0; i < n; i++)
		fprintf(o, h[i][0] == '<' ? "<th class=\"l\">%s</th>" : "<th>%s</th>",
		        h[i] + (h[i][0] == '<'));
	fputs("</tr></thead><tbody>\n", o);
}

static void table_begin(const struct ctx *c, const char *id, const char *title, const char *note)
{
	fprintf(c->o, "<h3 id=\"%s-%s\">", c->pfx, id);
	svg_esc(c->o, title);
	fputs("</h3>\n", c->o);
	if (note) {
		fputs("<p class=\"note\">", c->o);
		svg_esc(c->o, note);
		fputs("</p>\n", c->o);
	}
	fprintf(c->o, "<div class=\"tw\"><table class=\"t\" id=\"%s-t-%s\">", c->pfx, id);
}

static void table_end(const struct ctx *c)
{
	fputs("</tbody></table></div>\n", c->o);
}

/* COLLECTIVES: the text report's rows (xm_coll_row), one table row each */
static void table_collectives(const struct ctx *c)
{
	FILE *o = c->o;
	size_t n = xm_ncoll_rows(c->x);
	if (!n)
		return;
	char note[200];
	snprintf(note, sizeof note,
	         "Per communicator; time is %s; algbw/busbw in GB/s as nccl-tests, over transfer "
	         "time; h: host time, no GPU data.",
	         xm_coll_time_kind(c->x));
	table_begin(c, "collectives", "Collectives", note);
	static const char *const h[] = {"<comm",   "<call", "ranks", "calls/rank", "MiB/call",
	                                "ms/rank", "algbw", "busbw", "%peak"};
	th_row(o, h, sizeof h / sizeof h[0]);
	for (size_t i = 0; i < n; i++) {
		struct xm_coll_row r;
		xm_coll_row(c->x, i, &r);
		fprintf(o, "<tr><td><code>%016llx</code>", (unsigned long long)r.comm_hash);
		if (r.comm_name && r.comm_name[0]) {
			fputs(" ", o);
			svg_esc(o, r.comm_name);
		}
		fprintf(o, "</td><td class=\"l\"><code>%s</code></td><td>%d</td>", r.fn, r.nranks);
		td_num(o, "%.1f", r.calls_per_rank);
		td_num(o, "%.3f", r.bytes_per_call / 1048576.0);
		fprintf(o, "<td>%.2f%s</td>", r.ms_per_rank, r.host_time ? " h" : "");
		td_num(o, "%.1f", r.algbw);
		td_num(o, "%.1f", r.busbw);
		td_num(o, "%.0f", r.peak_share * 100);
		fputs("</tr>\n", o);
	}
	table_end(c);
}

static void table_choices(const struct ctx *c)
{
	FILE *o = c->o;
	size_t n = xm_nchoice_rows(c->x);
	if (!n)
		return;
	table_begin(c, "choices", "NCCL choices",
	            "From NCCL's profiler plugin; calls summed over ranks.");
	static const char *const h[] = {"<comm", "<call", "<algorithm/protocol", "calls",
	                                "channels"};
	th_row(o, h, sizeof h / sizeof h[0]);
	for (size_t i = 0; i < n; i++) {
		struct xm_choice_row r;
		xm_choice_row(c->x, i, &r);
		if (r.comm_known)
			fprintf(o, "<tr><td><code>%016llx</code></td>",
			        (unsigned long long)r.comm_hash);
		else
			fputs("<tr><td>?</td>", o);
		fprintf(o, "<td class=\"l\"><code>%s</code></td><td class=\"l\"><code>", r.fn);
		svg_esc(o, r.algo_proto);
		fprintf(o, "</code></td><td>%llu</td><td>", (unsigned long long)r.calls);
		svg_esc(o, r.channels);
		fputs("</td></tr>\n", o);
	}
	table_end(c);
}

/* One row of the ranks table; why: what makes it matter in a large job ("" in a small one) */
static void rank_tr(FILE *o, const struct xm_rank_row *r, const char *why, int whycol)
{
	fprintf(o, "<tr><td>%d</td><td class=\"l\">", r->rank);
	svg_esc(o, r->host);
	fprintf(o, "</td><td>%d</td><td>%.1f%s</td><td>%.2f%s</td>", r->pid, r->wall_ms,
	        r->truncated ? " (cut short)" : "", r->comm_ms, r->comm_host ? " h" : "");
	td_num(o, "%.2f", r->exposed_ms);
	td_num(o, "%.1f", r->exposed_share * 100);
	td_num(o, "%.0f", r->last_share * 100);
	td_num(o, "%.2f", r->lead_ms);
	td_num(o, "%.2f", r->waited_ms);
	if (whycol) {
		fputs("<td class=\"l\">", o);
		svg_esc(o, why);
		fputs("</td>", o);
	}
	fputs("</tr>\n", o);
}

/* A large job's others: min, p50, p90, max of each column, under the rows kept */
static void rank_dist_trs(FILE *o, const struct xm_rank_view *v)
{
	static const char *const q[4] = {"min", "p50", "p90", "max"};
	fprintf(o, "<tr class=\"same\"><td class=\"l\" colspan=\"11\">the other %zu ranks: "
	           "min, p50, p90, max of each column</td></tr>\n",
	        v->nrest);
	for (int k = 0; v->nrest && k < 4; k++) {
		fprintf(o, "<tr class=\"same\"><td></td><td class=\"l\">%s</td><td></td>", q[k]);
		td_num(o, "%.1f", v->dist[0][k]);
		td_num(o, "%.2f", v->dist[1][k]);
		td_num(o, "%.2f", v->rest_gpu ? v->dist[2][k] : NAN);
		td_num(o, "%.1f", v->rest_gpu ? v->dist[3][k] * 100 : NAN);
		td_num(o, "%.0f", v->dist[4][k] * 100);
		td_num(o, "%.2f", v->dist[5][k]);
		td_num(o, "%.2f", v->dist[6][k]);
		fputs("<td></td></tr>\n", o);
	}
}

static void table_ranks(const struct ctx *c)
{
	FILE *o = c->o;
	size_t n = xm_nrank_rows(c->x);
	if (!n)
		return;
	struct xm_rank_view v;
	xm_rank_view(c->x, &v);
	char note[600];
	snprintf(note, sizeof note,
	         "%scomm ms: NCCL GPU time (h: includes host call time); exposed: not overlapped "
	         "by compute; last%%: share of collectives it arrived last at; lead ms: median "
	         "lead over the next-latest rank then; waited ms: its waits for the last rank.",
	         v.all ? "" : "The ranks that matter of a large job, then the others' distribution "
	                      "(report --all-ranks: every rank). ");
	table_begin(c, "ranks", "Ranks", note);
	static const char *const h[] = {"rank",    "<host",   "pid",     "wall ms",
	                                "comm ms", "exposed ms", "exposed%", "last%",
	                                "lead ms", "waited ms",  "<why shown"};
	th_row(o, h, sizeof h / sizeof h[0] - (v.all ? 1 : 0));
	for (size_t k = 0; k < v.nshown; k++) {
		const char *why;
		struct xm_rank_row r;
		xm_rank_row(c->x, xm_rank_view_row(c->x, k, &why), &r);
		rank_tr(o, &r, why, !v.all);
	}
	if (!v.all)
		rank_dist_trs(o, &v);
	table_end(c);
}

static void table_links(const struct ctx *c)
{
	FILE *o = c->o;
	size_t n = xm_link_rows(c->x, NULL, 0);
	struct xm_link_row *v = n ? calloc(n, sizeof *v) : NULL;
	if (!v)
		return;
	xm_link_rows(c->x, v, n);
	int all = bw_all(c->x);
	table_begin(c, "links", "Links",
	            all ? "Bytes per GPU: total, and during collectives."
	                : "Bytes per GPU of the ranks that matter (a large job: the ranks table's "
	                  "rows): total, and during collectives.");
	static const char *const h[] = {
	    "rank", "device", "NVLink MiB", "during collectives", "PCIe MiB", "during collectives"};
	th_row(o, h, sizeof h / sizeof h[0]);
	for (size_t i = 0; i < n; i++)
		if (xm_rank_kept(c->x, v[i].proc))
			fprintf(o,
			        "<tr><td>%d</td><td>%d</td><td>%.1f</td><td>%.1f</td><td>%.1f</td>"
			        "<td>%.1f</td></tr>\n",
			        v[i].rank, v[i].device, v[i].nvl / 1048576.0,
			        v[i].nvl_coll / 1048576.0, v[i].pcie / 1048576.0,
			        v[i].pcie_coll / 1048576.0);
	table_end(c);
	free(v);
}

/* The report's tables as HTML tables, the same rows as the text report's */
static void render_tables(const struct ctx *c)
{
	if (!xm_ncoll_rows(c->x) && !xm_nrank_rows(c->x))
		return;
	fprintf(c->o, "<section class=\"tables\" id=\"%s-tables\"><h2>Tables</h2>\n", c->pfx);
	table_collectives(c);
	table_choices(c);
	table_ranks(c);
	table_links(c);
	fputs("</section>\n", c->o);
}

/* Plots no finding placed, each under its own heading; nothing (no heading) when none is left */
static void render_rest(struct ctx *c)
{
	for (int k = 0; k < P_COUNT; k++) {
		if (c->done[k])
			continue;
		char *buf = NULL;
		size_t blen = 0;
		FILE *m = open_memstream(&buf, &blen), *o = c->o;
		if (!m)
			return;
		c->o = m;
		c->done[k] = plots[k](c) ? 1 : -1;
		fclose(m);
		c->o = o;
		if (c->done[k] == 1)
			fprintf(
			    o,
			    "<section class=\"more\" id=\"%s-more-%s\"><h2>%s</h2>\n%s</section>\n",
			    c->pfx, plot_names[k], plot_titles[k], buf);
		free(buf);
	}
}

static void render(FILE *o, const struct xm_job *x, int W, const char *pfx, double ymax)
{
	struct ctx c = {.o = o, .x = x, .W = W, .pfx = pfx, .ymax = ymax};
	xm_span(x, &c.t0, &c.t1);
	struct xe_sink sink = {.ctx = &c.um, .ev = um_ev};
	uint64_t recs;
	xe_stream(x, &sink, &recs); /* the UM migrations, with their times */
	render_meta(&c);
	char story[1600];
	xm_story(x, story, sizeof story);
	if (story[0]) { /* a job that failed: its story above the findings and their plots */
		/* styled in place: the page's style sheet stays that of a job that did not fail */
		fprintf(o,
		        "<p class=\"story\" id=\"%s-story\" style=\"border-left:6px solid "
		        "#c62828;background:#fdf3f3;padding:6px 12px\">",
		        pfx);
		svg_esc(o, story);
		fputs("</p>\n", o);
	}
	fprintf(o, "<section class=\"findings\" id=\"%s-findings\"><h2>Findings</h2>\n", pfx);
	if (!xm_nfindings(x))
		fputs("<p class=\"none\">No finding: nothing to explain.</p>\n", o);
	for (size_t i = 0; i < xm_nfindings(x); i++)
		render_finding(&c, i);
	fputs("</section>\n", o);
	render_rest(&c);
	render_tables(&c);
	render_text(o, x, pfx);
	free(c.um.v);
}

/* The largest link rate of a job's GPUs, GB/s */
static double job_bw_max(const struct xm_job *x)
{
	struct ctx c = {.x = x};
	xm_span(x, &c.t0, &c.t1);
	return bw_max(&c);
}

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;"
    "margin:0 auto;padding:16px 20px;color:#1d1d1d;background:#fff}"
    "h1{font-size:22px;margin:4px 0;overflow-wrap:anywhere}h2{font-size:18px;border-bottom:1px "
    "solid #ddd;padding-bottom:2px;overflow-wrap:anywhere}h3{font-size:15px;margin:2px 0 6px}"
    ".meta{color:#555;margin:2px 0}.head{margin:2px 0 10px}"
    ".sumline{margin:4px 0;font-weight:600}"
    "code{font-family:ui-monospace,monospace;font-size:13px;overflow-wrap:normal;"
    "word-break:keep-all}"
    ".finding{border-left:6px solid #888;background:#f7f7f7;padding:8px 14px;margin:14px 0}"
    ".sev-critical{border-color:#c62828}.sev-warning{border-color:#ef6c00}"
    ".sev-info{border-color:#1565c0}.sev{text-transform:uppercase;font-size:12px;"
    "letter-spacing:.05em;color:#fff;background:#888;padding:1px 6px;border-radius:3px}"
    ".sev-critical .sev{background:#c62828}.sev-warning .sev{background:#ef6c00}"
    ".sev-info .sev{background:#1565c0}.ev{margin:4px 0;padding-left:18px;columns:2;"
    "font-size:13px;color:#333;overflow-wrap:break-word}.ev li{break-inside:avoid}"
    ".ev li.loc{column-span:all;font-family:monospace}.advice{margin:6px 0}.expl{margin:2px "
    "0;color:#555}.diff .ev{columns:1}"
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
    ".tw{max-width:100%;overflow-x:auto;margin:4px 0 12px}"
    "table.t{border-collapse:collapse;font-size:13px}table.t td,table.t th{"
    "border-bottom:1px solid #e4e4e4;padding:2px 8px;text-align:right;white-space:nowrap}"
    "table.t th{background:#f3f3f3;font-weight:600}table.t td:first-child,table.t "
    "th:first-child,table.t .l{text-align:left}table.t tbody tr:nth-child(even){background:#fafafa}"
    "table.t tr.same td{color:#888}.note{font-size:12px;color:#555;margin:0 0 2px}"
    ".diff table.t{font-size:11px}.diff table.t td,.diff table.t th{padding:2px 4px}"
    ".diff table.t th{white-space:normal}"
    ".verdict{font-size:16px;font-weight:600;border-left:6px solid #1565c0;background:#f3f7fc;"
    "padding:6px 12px;overflow-wrap:anywhere}.cols{display:flex;flex-wrap:wrap;gap:24px;"
    "align-items:flex-start}.fl{font-size:13px}";

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
	render(o, x, 900, "r", 0);
	page_end(o);
	return ferror(o) ? -1 : 0;
}

/* A table of diff's rows (name, before, after, change), as `nvlprof diff` formats them */
static void diff_table(FILE *o, const char *id, const char *first, const struct an_diff_row *r,
                       size_t n)
{
	fprintf(o,
	        "<div class=\"tw\"><table class=\"t sum\" id=\"%s\"><thead><tr><th>%s</th>"
	        "<th>before</th><th>after</th><th>change</th></tr></thead><tbody>\n",
	        id, first);
	for (size_t i = 0; i < n; i++) {
		/* unchanged rows dimmed: what changed stands out */
		int same = !strcmp(r[i].change, "-") || !strcmp(r[i].change, "+0.0%") ||
		           !strcmp(r[i].change, "-0.0%");
		fprintf(o, "<tr%s><td><code>", same ? " class=\"same\"" : "");
		svg_esc(o, r[i].name);
		fprintf(o, "</code></td><td>%s</td><td>%s</td><td>%s</td></tr>\n", r[i].b, r[i].a,
		        r[i].change);
	}
	fputs("</tbody></table></div>\n", o);
}

/* The verdict first (diff's VERDICT line), then what changed: metrics, bus bandwidth, findings */
static void diff_head(FILE *o, const struct an_diff_view *v)
{
	fputs("<p class=\"verdict\" id=\"verdict\">", o);
	svg_esc(o, v->verdict);
	fputs("</p>\n<section class=\"changes\" id=\"changes\"><h2>What changed</h2>\n", o);
	fputs("<p class=\"fl\"><b>new findings:</b> ", o);
	svg_esc(o, v->fnew);
	fputs("<br><b>resolved:</b> ", o);
	svg_esc(o, v->fres);
	fputs("<br><b>still:</b> ", o);
	svg_esc(o, v->fstill);
	fputs("</p>\n<div class=\"cols\">", o);
	struct an_diff_row m[sizeof v->m / sizeof v->m[0]];
	for (size_t i = 0; i < v->nm; i++) {
		snprintf(m[i].name, sizeof m[i].name, "%s", v->m[i].name);
		memcpy(m[i].b, v->m[i].b, sizeof m[i].b);
		memcpy(m[i].a, v->m[i].a, sizeof m[i].a);
		memcpy(m[i].change, v->m[i].change, sizeof m[i].change);
	}
	diff_table(o, "summary", "metric", m, v->nm);
	if (v->nbw)
		diff_table(o, "busbw", "bus bandwidth GB/s", v->bw, v->nbw);
	fputs("</div></section>\n", o);
}

int xh_diff(FILE *o, const struct xm_job *b, const struct xm_job *a, const char *tb, const char *ta)
{
	char t[600];
	snprintf(t, sizeof t, "nvlprof diff: %s vs %s", tb, ta);
	page_begin(o, t);
	struct an_diff_view *v = malloc(sizeof *v);
	if (v && xm_diff_view(b, a, v) == 0)
		diff_head(o, v);
	free(v);
	/* one y scale for the two sides' bandwidth plots: side by side, heights compare */
	double yb = job_bw_max(b), ya = job_bw_max(a), ymax = yb > ya ? yb : ya;
	fputs("<div class=\"diff\">\n<div class=\"side\" id=\"before\"><h2>before: ", o);
	svg_esc(o, tb);
	fputs("</h2>\n", o);
	render(o, b, 540, "b", ymax);
	fputs("</div>\n<div class=\"side\" id=\"after\"><h2>after: ", o);
	svg_esc(o, ta);
	fputs("</h2>\n", o);
	render(o, a, 540, "a", ymax);
	fputs("</div>\n</div>\n", o);
	page_end(o);
	return ferror(o) ? -1 : 0;
}

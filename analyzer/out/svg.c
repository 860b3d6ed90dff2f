/* svg.c: the SVG plotting kit of the HTML report (see svg.h); pure output, no allocation beyond
 * a series' pixel buckets. */
#include <math.h>   /* floor */
#include <limits.h> /* INT_MAX */
#include <stdlib.h> /* malloc */

#include "out/svg.h"

void svg_esc(FILE *o, const char *t)
{
	for (; t && *t; t++)
		switch (*t) {
		case '&':
			fputs("&amp;", o);
			break;
		case '<':
			fputs("&lt;", o);
			break;
		case '>':
			fputs("&gt;", o);
			break;
		case '"':
			fputs("&quot;", o);
			break;
		case '\'':
			fputs("&#39;", o);
			break;
		default:
			fputc(*t, o);
		}
}

void svg_begin(struct svg *s, FILE *o, int w, int h, const char *cls, const char *title)
{
	*s = (struct svg){.o = o,
	                  .w = w,
	                  .h = h,
	                  .ml = 64,
	                  .mr = 16,
	                  .mt = 26,
	                  .mb = 36,
	                  .x0 = 0,
	                  .x1 = 1,
	                  .y0 = 0,
	                  .y1 = 1};
	fprintf(o,
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"%s\" viewBox=\"0 0 %d %d\" "
	        "width=\"%d\" height=\"%d\" role=\"img\"><title>",
	        cls, w, h, w, h);
	svg_esc(o, title);
	fputs("</title>\n", o);
}

void svg_end(struct svg *s)
{
	fputs("</svg>\n", s->o);
}

void svg_range(struct svg *s, double x0, double x1, double y0, double y1)
{
	s->x0 = x0;
	s->x1 = x1 > x0 ? x1 : x0 + 1;
	s->y0 = y0;
	s->y1 = y1 > y0 ? y1 : y0 + 1;
}

double svg_px(const struct svg *s, double x)
{
	return s->ml + (x - s->x0) / (s->x1 - s->x0) * (s->w - s->ml - s->mr);
}
int svg_col(const struct svg *s, double x)
{
	/* a time far outside the range (a corrupt trace's) is no column, not an int overflow */
	double d = svg_px(s, x) - s->ml;
	return d > -1.0 && d < (double)INT_MAX ? (int)d : -1;
}
double svg_py(const struct svg *s, double y)
{
	return s->h - s->mb - (y - s->y0) / (s->y1 - s->y0) * (s->h - s->mt - s->mb);
}

double svg_nice_step(double range, int n)
{
	if (!(range > 0) || n < 1)
		return 1;
	double raw = range / n, p = pow(10, floor(log10(raw))), m = raw / p;
	return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void fmt_num(char *buf, size_t len, double v, double step)
{
	if (fabs(v) < fabs(step) * 1e-6)
		v = 0; /* a tick at 0 reached by adding steps: never "-0" */
	if (step >= 1 || v == 0)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.*f", (int)ceil(-log10(step)), v);
}

void svg_axes(struct svg *s, const char *xlabel, const char *ylabel, int yticks)
{
	FILE *o = s->o;
	double l = s->ml, r = s->w - s->mr, t = s->mt, b = s->h - s->mb;
	fprintf(o, "<rect class=\"area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
	        l, t, r - l, b - t);
	double st = svg_nice_step(s->x1 - s->x0, 8);
	char num[32];
	for (double v = ceil(s->x0 / st) * st; v <= s->x1 + st * 1e-9; v += st) {
		double x = svg_px(s, v);
		fprintf(o, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
		        x, b, x, b + 4);
		fmt_num(num, sizeof num, v, st);
		svg_text(s, x, b + 15, "middle", "tl", num);
	}
	if (yticks) {
		st = svg_nice_step(s->y1 - s->y0, 4);
		for (double v = ceil(s->y0 / st) * st; v <= s->y1 + st * 1e-9; v += st) {
			double y = svg_py(s, v);
			fprintf(o,
			        "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
			        "y2=\"%.1f\"/>",
			        l, y, r, y);
			fmt_num(num, sizeof num, v, st);
			svg_text(s, l - 4, y + 4, "end", "tl", num);
		}
	}
	svg_text(s, (l + r) / 2, s->h - 4, "middle", "al", xlabel);
	if (ylabel && *ylabel) {
		fprintf(o,
		        "<text class=\"al\" text-anchor=\"middle\" transform=\"translate(12 %.1f) "
		        "rotate(-90)\">",
		        (t + b) / 2);
		svg_esc(o, ylabel);
		fputs("</text>\n", o);
	}
}

void svg_band(struct svg *s, double xa, double xb, const char *cls)
{
	double a = svg_px(s, xa), b = svg_px(s, xb);
	if (b - a < 0.5)
		b = a + 0.5;
	fprintf(s->o, "<rect class=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", cls,
	        a, s->mt, b - a, s->h - s->mt - s->mb);
}

void svg_series(struct svg *s, const double *xs, const double *ys, size_t n, const char *cls)
{
	if (!n)
		return;
	int cols = s->w - s->ml - s->mr;
	if (cols < 1)
		cols = 1;
	double *mn = malloc(2 * (size_t)cols * sizeof *mn), *mx = mn ? mn + cols : NULL;
	if (!mn)
		return;
	for (int c = 0; c < cols; c++)
		mn[c] = INFINITY, mx[c] = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		int c = svg_col(s, xs[i]);
		if (c < 0 || c >= cols)
			continue;
		if (isnan(ys[i])) {
			mn[c] = NAN; /* a gap: the line stops and starts again after it */
			continue;
		}
		if (isnan(mn[c]))
			continue;
		if (ys[i] < mn[c])
			mn[c] = ys[i];
		if (ys[i] > mx[c])
			mx[c] = ys[i];
	}
	int open = 0;
	for (int c = 0; c < cols; c++) {
		if (isnan(mn[c]) && open) {
			fputs("\"/>\n", s->o);
			open = 0;
		}
		if (isnan(mn[c]) || mx[c] == -INFINITY)
			continue;
		if (!open)
			fprintf(s->o, "<polyline class=\"%s\" points=\"", cls);
		open = 1;
		double x = s->ml + c + 0.5;
		fprintf(s->o, "%.1f,%.1f ", x, svg_py(s, mn[c]));
		if (mx[c] != mn[c])
			fprintf(s->o, "%.1f,%.1f ", x, svg_py(s, mx[c]));
	}
	if (open)
		fputs("\"/>\n", s->o);
	free(mn);
}

void svg_cell(struct svg *s, double x, double y, double w, double h, const char *fill,
              const char *tip)
{
	double px = svg_px(s, x), py = svg_py(s, y + h);
	double pw = svg_px(s, x + w) - px, ph = svg_py(s, y) - py;
	fprintf(s->o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">", px,
	        py, pw < 0.5 ? 0.5 : pw, ph, fill);
	if (tip) {
		fputs("<title>", s->o);
		svg_esc(s->o, tip);
		fputs("</title>", s->o);
	}
	fputs("</rect>", s->o);
}

void svg_dot(struct svg *s, double x, double y, double r, const char *cls, const char *tip)
{
	fprintf(s->o, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\">", cls, svg_px(s, x),
	        svg_py(s, y), r);
	if (tip) {
		fputs("<title>", s->o);
		svg_esc(s->o, tip);
		fputs("</title>", s->o);
	}
	fputs("</circle>", s->o);
}

void svg_text(struct svg *s, double px, double py, const char *anchor, const char *cls,
              const char *text)
{
	fprintf(s->o, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", cls, px, py,
	        anchor);
	svg_esc(s->o, text);
	fputs("</text>", s->o);
}

void svg_legend(struct svg *s, int k, const char *cls, const char *label)
{
	double x = s->ml + (s->w < 700 ? 90.0 : 150.0) * k, y = 8; /* narrow: diff's columns */
	fprintf(s->o, "<rect class=\"%s sw\" x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"8\"/>",
	        cls, x, y);
	svg_text(s, x + 18, y + 8, "start", "tl", label);
}

void svg_heat(double v, char *buf)
{
	if (!(v > 0))
		v = 0;
	if (v > 1)
		v = 1;
	/* white (255,255,255) -> amber (245,166,35) -> red (200,30,30) */
	double r, g, b;
	if (v < 0.5) {
		double t = v / 0.5;
		r = 255 + (245 - 255) * t, g = 255 + (166 - 255) * t, b = 255 + (35 - 255) * t;
	} else {
		double t = (v - 0.5) / 0.5;
		r = 245 + (200 - 245) * t, g = 166 + (30 - 166) * t, b = 35 + (30 - 35) * t;
	}
	snprintf(buf, 8, "#%02x%02x%02x", (int)(r + 0.5), (int)(g + 0.5), (int)(b + 0.5));
}

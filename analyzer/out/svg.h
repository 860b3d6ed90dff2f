/* svg.h: a small SVG plotting kit for the HTML report: a plot area with data-to-pixel mapping,
 * axes with round ticks, shaded bands, min/max-per-pixel line series, cells, markers, labels. */
#ifndef NVLP_AN_SVG_H
#define NVLP_AN_SVG_H

#include <stddef.h> /* size_t */
#include <stdio.h>  /* FILE */

struct svg {
	FILE *o;
	int w, h;              /* pixels */
	int ml, mr, mt, mb;    /* margins around the plot area */
	double x0, x1, y0, y1; /* data range of the plot area */
};

/*! Open an <svg> of w x h pixels (scales to its container) with an accessible title. */
void svg_begin(struct svg *s, FILE *o, int w, int h, const char *cls, const char *title);
void svg_end(struct svg *s);
/*! Set the data range; the plot area is the image less the margins. */
void svg_range(struct svg *s, double x0, double x1, double y0, double y1);
double svg_px(const struct svg *s, double x);
/*! The plot-area column (pixels right of the left margin, truncated) of x; -1 when x is far out of range. */
int svg_col(const struct svg *s, double x);
double svg_py(const struct svg *s, double y);
/*! A round tick step (1, 2 or 5 x 10^k) giving about n ticks over range. */
double svg_nice_step(double range, int n);
/*! Axes, ticks and labels; ylabels = 0 leaves the y axis unticked (rows drawn by the caller). */
void svg_axes(struct svg *s, const char *xlabel, const char *ylabel, int yticks);
/*! A shaded vertical band over [xa, xb) in data units. */
void svg_band(struct svg *s, double xa, double xb, const char *cls);
/*! A line series; points are reduced to the min and max of each pixel column so that the
 * size stays in proportion to the width, not to n. xs must be ascending; a NaN y is a gap
 * (no line is drawn across it). */
void svg_series(struct svg *s, const double *xs, const double *ys, size_t n, const char *cls);
/*! A rectangle in data units (x, y lower-left corner) with a tooltip (NULL: none). */
void svg_cell(struct svg *s, double x, double y, double w, double h, const char *fill,
              const char *tip);
void svg_dot(struct svg *s, double x, double y, double r_px, const char *cls, const char *tip);
/*! Text at pixel position; anchor "start" | "middle" | "end". */
void svg_text(struct svg *s, double px, double py, const char *anchor, const char *cls,
              const char *text);
/*! A legend entry (swatch + label) in the top margin, k-th from the left. */
void svg_legend(struct svg *s, int k, const char *cls, const char *label);
/*! Heat colour of v in [0, 1] (white -> amber -> red) as "#rrggbb" into buf (8 bytes). */
void svg_heat(double v, char *buf);
/*! Write text escaped for HTML/SVG (&, <, >, ", '). */
void svg_esc(FILE *o, const char *text);

#endif

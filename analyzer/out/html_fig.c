/* html_fig.c: what the HTML page and each of its plots share: a plot's figure and the page's time
 * axis (html_int.h). */
#include "out/html_int.h"

const char *const xh_plot_names[P_COUNT] = {"bandwidth", "skew", "hang", "um"};

double xh_ms(const struct ctx *c, uint64_t t)
{
	return ((double)t - (double)c->t0) / 1e6;
}

void xh_figure_begin(struct ctx *c, int kind, const char *caption)
{
	fprintf(c->o, "<figure class=\"plot plot-%s\" id=\"%s-%s\"><figcaption>",
	        xh_plot_names[kind], c->pfx, xh_plot_names[kind]);
	svg_esc(c->o, caption);
	fputs("</figcaption>\n", c->o);
}

/* html.c: `nvlprof report --html FILE` and `diff --html FILE`: one self-contained HTML file (no
 * script, no network, no external font) with the findings first, each with its inline SVG plot:
 * link bandwidth per GPU with collectives shaded, arrival skew by rank and collective, the
 * missing rank of a hang, unified-memory migrations by allocation; diff puts two runs side by
 * side. */
#include <math.h>   /* sqrt */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "out/export.h"
#include "out/html_int.h"
#include "out/report.h" /* struct an_diff_view */
#include "out/svg.h"
#include "util/util.h" /* an_fmt_value */

/* The heading of a plot no finding explains, in its own named section */
static const char *const plot_titles[P_COUNT] = {"Link bandwidth", "Arrival skew", "Hang",
                                                 "Unified memory"};

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

static int (*const plots[P_COUNT])(struct ctx *) = {xh_plot_bw, xh_plot_skew, xh_plot_hang,
                                                    xh_plot_um};

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
		        c->pfx, xh_plot_names[k], xh_plot_names[k]);
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
	c->xb = xh_ms(c, c->t1);
	if (steps) {
		c->xa = xh_ms(c, s0);
		c->xb = xh_ms(c, s0 + (uint64_t)steps * len);
	}
	for (size_t i = 0; i < c->um.n; i++) {
		double t = xh_ms(c, c->um.v[i].t);
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
	fprintf(o,
	        "<tr class=\"same\"><td class=\"l\" colspan=\"11\">the other %zu ranks: "
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
	         v.all ? ""
	               : "The ranks that matter of a large job, then the others' distribution "
	                 "(report --all-ranks: every rank). ");
	table_begin(c, "ranks", "Ranks", note);
	static const char *const h[] = {"rank",    "<host",      "pid",       "wall ms",
	                                "comm ms", "exposed ms", "exposed%",  "last%",
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
	int all = xh_bw_all(c->x);
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
			    c->pfx, xh_plot_names[k], plot_titles[k], buf);
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
	return xh_bw_max(&c);
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

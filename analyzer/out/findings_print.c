/* findings_print.c: prints the findings: text blocks for the report and diff, a JSON array. */
#include <ctype.h> /* isdigit */
#include <stdio.h>  /* fprintf */
#include <string.h> /* strlen */

#include "findings/findings.h"
#include "util/util.h" /* an_fmt_value */

/* A list of rank numbers ("1", "0,2", "0-3"): digits, commas, dashes */
static int rank_list_text(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s) && *s != ',' && *s != '-')
			return 0;
	return 1;
}

const char *an_ev_value(const struct an_ev *e, char *buf, size_t len)
{
	if (an_ev_ranks(e) && rank_list_text(e->str))
		snprintf(buf, len, "%s %s", strpbrk(e->str, ",-") ? "ranks" : "rank", e->str);
	else if (e->is_str)
		snprintf(buf, len, "%s", e->str);
	else
		an_fmt_value(buf, len, e->num, e->unit);
	return buf;
}

int an_ev_hidden(const char *key)
{
	return !strcmp(key, AN_EV_EXPLAINED_BY) || !strcmp(key, AN_EV_SEVERITY_ALONE);
}

int an_ev_card(const struct an_ev *e, char *buf, size_t len)
{
	if (an_ev_hidden(e->key))
		return 0;
	char v[256];
	snprintf(buf, len, "%s: %s", e->key, an_ev_value(e, v, sizeof v));
	return 1;
}

void an_findings_print(FILE *o, const struct an_findings *f)
{
	if (!f->n) {
		fprintf(o, "No findings: nothing wrong was detected.\n");
		return;
	}
	for (size_t i = 0; i < f->n; i++) {
		const struct an_finding *x = &f->v[i];
		const char *alone = an_ev_str(x, AN_EV_SEVERITY_ALONE);
		if (x->explained_by && alone)
			fprintf(o, "[%s] %s (explained by %s; %s on its own): %s\n",
			        an_sev_name(x->sev), x->id, x->explained_by, alone, x->title);
		else if (x->explained_by)
			fprintf(o, "[%s] %s (explained by %s): %s\n", an_sev_name(x->sev), x->id,
			        x->explained_by, x->title);
		else
			fprintf(o, "[%s] %s: %s\n", an_sev_name(x->sev), x->id, x->title);
		int col = 0;
		for (int k = 0; k < x->nev; k++) {
			char v[256];
			if (x->explained_by && an_ev_hidden(x->ev[k].key))
				continue; /* in the heading */
			an_ev_value(&x->ev[k], v, sizeof v);
			int w = (int)(strlen(x->ev[k].key) + strlen(v) + 3);
			/* long strings and code locations get their own line */
			if (x->ev[k].is_str &&
			    (strlen(v) > 40 ||
			     !strncmp(x->ev[k].key, AN_EV_PYTHON, strlen(AN_EV_PYTHON)))) {
				fprintf(o, "%s    %s: %s\n", col ? "\n" : "", x->ev[k].key, v);
				col = 0;
				continue;
			}
			if (col && col + w > 100) {
				fputc('\n', o);
				col = 0;
			}
			col += fprintf(o, "%s%s=%s", col ? "  " : "    ", x->ev[k].key, v);
		}
		if (col)
			fputc('\n', o);
		if (x->advice[0])
			fprintf(o, "    advice: %s\n", x->advice);
	}
}

void an_findings_json(struct jw *w, const char *key, const struct an_findings *f)
{
	jw_arr(w, key);
	for (size_t i = 0; i < f->n; i++) {
		const struct an_finding *x = &f->v[i];
		jw_obj(w, NULL);
		jw_str(w, "id", x->id);
		jw_str(w, "severity", an_sev_name(x->sev));
		jw_str(w, "title", x->title);
		jw_obj(w, "evidence");
		for (int k = 0; k < x->nev; k++) {
			if (x->ev[k].is_str)
				jw_str(w, x->ev[k].key, x->ev[k].str);
			else
				jw_num(w, x->ev[k].key, x->ev[k].num);
		}
		jw_obj_end(w);
		jw_obj(w, "units"); /* the unit of each numeric evidence value that has one */
		for (int k = 0; k < x->nev; k++)
			if (!x->ev[k].is_str && x->ev[k].unit[0])
				jw_str(w, x->ev[k].key, x->ev[k].unit);
		jw_obj_end(w);
		jw_str(w, "advice", x->advice);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

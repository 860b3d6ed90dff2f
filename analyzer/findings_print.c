/* findings_print.c: prints the findings: text blocks for the report and diff, a JSON array. */
#include <math.h>   /* fabs */
#include <stdio.h>  /* fprintf */
#include <string.h> /* strlen */

#include "findings.h"

/* Numbers for people: bytes in binary units, rates and times with 3 significant digits. */
static void fmt_ev(const struct an_ev *e, char *buf, size_t len)
{
	if (e->is_str) {
		snprintf(buf, len, "%s", e->str);
		return;
	}
	double v = e->num;
	if (!strcmp(e->unit, "B")) {
		const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
		int i = 0;
		while (v >= 1024 && i < 4) {
			v /= 1024;
			i++;
		}
		snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", v, u[i]);
	} else if ((fabs(v) < 1e15 && v == (double)(long long)v && !e->unit[0]) || fabs(v) >= 1000)
		snprintf(buf, len, "%.0f%s%s", v, e->unit[0] ? " " : "", e->unit);
	else
		snprintf(buf, len, "%.3g%s%s", v, e->unit[0] ? " " : "", e->unit);
}

void an_findings_print(FILE *o, const struct an_findings *f)
{
	if (!f->n) {
		fprintf(o, "No findings: nothing wrong was detected.\n");
		return;
	}
	for (size_t i = 0; i < f->n; i++) {
		const struct an_finding *x = &f->v[i];
		if (x->explained_by)
			fprintf(o, "[%s] %s (explained by %s): %s\n", an_sev_name(x->sev), x->id,
			        x->explained_by, x->title);
		else
			fprintf(o, "[%s] %s: %s\n", an_sev_name(x->sev), x->id, x->title);
		int col = 0;
		for (int k = 0; k < x->nev; k++) {
			char v[256];
			if (x->explained_by && !strcmp(x->ev[k].key, "explained_by"))
				continue; /* in the heading */
			fmt_ev(&x->ev[k], v, sizeof v);
			int w = (int)(strlen(x->ev[k].key) + strlen(v) + 3);
			/* long strings and code locations get their own line */
			if (x->ev[k].is_str &&
			    (strlen(v) > 40 || !strncmp(x->ev[k].key, "python", 6))) {
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
		jw_str(w, "advice", x->advice);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

/* json.c: the tiny streaming JSON writer used by report --json and diff --json. */
#include "util/json.h"

#include <math.h> /* isfinite */

#include "util/util.h"

void jw_quote(FILE *f, const char *s)
{
	nvlp_json_cstr(f, s ? s : "");
}

void jw_init(struct jw *w, FILE *f)
{
	w->f = f;
	w->depth = 0;
	w->n[0] = 0;
}

/* Separator, indentation and key before a value. */
static void pre(struct jw *w, const char *key)
{
	if (w->n[w->depth]++)
		fputc(',', w->f);
	if (w->depth) {
		fputc('\n', w->f);
		for (int i = 0; i < w->depth; i++)
			fputs("  ", w->f);
	}
	if (key) {
		jw_quote(w->f, key);
		fputs(": ", w->f);
	}
}

static void open_(struct jw *w, const char *key, char c)
{
	pre(w, key);
	fputc(c, w->f);
	if (w->depth < 63)
		w->n[++w->depth] = 0;
}

static void close_(struct jw *w, char c)
{
	int had = w->n[w->depth];
	if (w->depth)
		w->depth--;
	if (had) {
		fputc('\n', w->f);
		for (int i = 0; i < w->depth; i++)
			fputs("  ", w->f);
	}
	fputc(c, w->f);
	if (!w->depth)
		fputc('\n', w->f);
}

void jw_obj(struct jw *w, const char *key)
{
	open_(w, key, '{');
}
void jw_obj_end(struct jw *w)
{
	close_(w, '}');
}
void jw_arr(struct jw *w, const char *key)
{
	open_(w, key, '[');
}
void jw_arr_end(struct jw *w)
{
	close_(w, ']');
}

void jw_str(struct jw *w, const char *key, const char *v)
{
	pre(w, key);
	jw_quote(w->f, v);
}

void jw_num(struct jw *w, const char *key, double v)
{
	pre(w, key);
	if (!isfinite(v))
		fputs("null", w->f);
	else if (fabs(v) < 1e15 && v == (double)(int64_t)v) /* range first: the cast of a larger v is UB */
		fprintf(w->f, "%lld", (long long)v);
	else
		fprintf(w->f, "%.6g", v);
}

void jw_int(struct jw *w, const char *key, int64_t v)
{
	pre(w, key);
	fprintf(w->f, "%lld", (long long)v);
}

void jw_bool(struct jw *w, const char *key, int v)
{
	pre(w, key);
	fputs(v ? "true" : "false", w->f);
}

void jw_null(struct jw *w, const char *key)
{
	pre(w, key);
	fputs("null", w->f);
}

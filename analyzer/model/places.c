/* places.c: where a rank's threads were, from the Python sampler's PYREF kind 0 records (places.h). */
#include <stdarg.h> /* va_list */
#include <stdio.h>  /* vsnprintf */
#include <stdlib.h> /* qsort */
#include <string.h> /* memmem, memrchr, strlen */

#include "model/model.h"
#include "model/places.h"
#include "model/stages.h" /* an_add_i64, an_sub_i64 */

/* printf at out + o, cut at len. @return the new length */
__attribute__((format(printf, 4, 5))) static size_t appendf(char *out, size_t len, size_t o,
                                                            const char *fmt, ...)
{
	if (o >= len)
		return o;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out + o, len - o, fmt, ap);
	va_end(ap);
	if (n < 0)
		return o;
	return o + (size_t)n < len ? o + (size_t)n : len - 1;
}

const char *an_pystack_text(const struct an_rank *r, uint64_t id)
{
	for (size_t i = 0; id && i < r->npystacks; i++)
		if (r->pystacks[i].id == id)
			return r->pystacks[i].text;
	return NULL;
}

static uint64_t thread_of(const struct an_rank *r, uint64_t tid)
{
	return tid == AN_PLACE_MAIN ? (uint64_t)(int64_t)r->pid : tid;
}

/* job time <-> the rank's clock (saturating: a bound beyond the clock's range is its end) */
static uint64_t to_local(const struct an_rank *r, uint64_t job)
{
	int64_t l = an_sub_i64((int64_t)(job > INT64_MAX ? INT64_MAX : job), r->offset);
	return l < 0 ? 0 : (uint64_t)l;
}

static uint64_t to_job(const struct an_rank *r, uint64_t local)
{
	int64_t j = an_add_i64((int64_t)(local > INT64_MAX ? INT64_MAX : local), r->offset);
	return j < 0 ? 0 : (uint64_t)j;
}

static int is_sample(const struct an_pyref *p, uint64_t tid)
{
	return p->kind == NVLP_K_NONE && p->tid == tid;
}

int an_place_at(const struct an_rank *r, uint64_t tid, uint64_t t, struct an_place *p)
{
	tid = thread_of(r, tid);
	uint64_t l1 = to_local(r, t);
	if (r->t_last && l1 > r->t_last)
		l1 = r->t_last;
	const struct an_pyref *best = NULL;
	for (size_t i = 0; i < r->npyrefs; i++) {
		const struct an_pyref *x = &r->pyrefs[i];
		if (is_sample(x, tid) && x->t <= l1 && (!best || x->t >= best->t))
			best = x;
	}
	if (!best)
		return 0;
	*p = (struct an_place){.tid = tid,
	                       .pystack = best->pystack,
	                       .text = an_pystack_text(r, best->pystack),
	                       .since = to_job(r, best->t),
	                       .at = to_job(r, l1)};
	return 1;
}

int an_user_frame(const char *file, size_t n)
{
	static const char *const lib[] = {"/site-packages/", "/dist-packages/", "/lib/python"};
	if (!n || file[0] == '<') /* <frozen runpy>, <string> */
		return 0;
	for (size_t k = 0; k < sizeof lib / sizeof lib[0]; k++)
		if (memmem(file, n, lib[k], strlen(lib[k])))
			return 0;
	return 1;
}

#define PLACE_SHOWN 3 /* frames in a place's line */

/* "load_next_batch (train.py:23) <- main (train.py:40)" into out (at o), from a chain's text. */
static size_t chain_line(const char *text, char *out, size_t len, size_t o)
{
	for (int pass = 0; pass < 2; pass++) {
		int shown = 0;
		size_t start = o;
		for (const char *l = text; *l && shown < PLACE_SHOWN;) {
			const char *e = strchr(l, '\n');
			size_t n = e ? (size_t)(e - l) : strlen(l);
			const char *next = e ? e + 1 : l + n;
			const char *fc = memrchr(l, ':', n); /* function, then line: the file may hold ':' */
			const char *lc = fc ? memrchr(l, ':', (size_t)(fc - l)) : NULL;
			if (lc && (pass || an_user_frame(l, (size_t)(lc - l)))) {
				const char *base = memrchr(l, '/', (size_t)(lc - l));
				base = base ? base + 1 : l;
				o = appendf(out, len, o, "%s%.*s (%.*s:%.*s)", shown ? " <- " : "",
				               (int)(l + n - fc - 1), fc + 1, (int)(lc - base), base,
				               (int)(fc - lc - 1), lc + 1);
				shown++;
			}
			l = next;
		}
		if (shown)
			return o;
		o = start;
	}
	return appendf(out, len, o, "no frame");
}

size_t an_place_text(const struct an_place *p, char *out, size_t len)
{
	if (!len)
		return 0;
	out[0] = 0;
	double s = (double)(p->at > p->since ? p->at - p->since : 0) / 1e9;
	if (!p->pystack || !p->text)
		return appendf(out, len, 0, "no Python location for %.1f s", s);
	return chain_line(p->text, out, len, appendf(out, len, 0, "%.1f s in ", s));
}

static int by_time(const void *a, const void *b)
{
	const struct an_pyref *x = *(const struct an_pyref *const *)a,
	                      *y = *(const struct an_pyref *const *)b;
	return x->t < y->t ? -1 : x->t > y->t;
}

static int by_ns(const void *a, const void *b)
{
	const struct an_place_top *x = a, *y = b;
	return x->ns > y->ns ? -1 : x->ns < y->ns ? 1 : (x->pystack > y->pystack) - (x->pystack < y->pystack);
}

size_t an_places_top(const struct an_rank *r, uint64_t tid, uint64_t t0, uint64_t t1,
                     struct an_place_top *out, size_t max, uint64_t *total_ns)
{
	tid = thread_of(r, tid);
	uint64_t l0 = to_local(r, t0), l1 = to_local(r, t1), total = 0;
	if (r->t_last && l1 > r->t_last)
		l1 = r->t_last;
	size_t n = 0, kept = 0;
	for (size_t i = 0; i < r->npyrefs; i++)
		n += is_sample(&r->pyrefs[i], tid);
	const struct an_pyref **v = n ? malloc(n * sizeof *v) : NULL;
	struct an_place_top *acc = n ? calloc(n, sizeof *acc) : NULL;
	if (total_ns)
		*total_ns = 0;
	if (!v || !acc || l1 <= l0) {
		free(v);
		free(acc);
		return 0;
	}
	n = 0;
	for (size_t i = 0; i < r->npyrefs; i++)
		if (is_sample(&r->pyrefs[i], tid))
			v[n++] = &r->pyrefs[i];
	qsort(v, n, sizeof *v, by_time); /* one thread's samples come in order; be sure */
	size_t nacc = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t a = v[i]->t, b = i + 1 < n ? v[i + 1]->t : l1;
		a = a < l0 ? l0 : a;
		b = b > l1 ? l1 : b;
		if (b <= a)
			continue;
		total += b - a;
		if (!v[i]->pystack)
			continue;
		size_t k = 0;
		while (k < nacc && acc[k].pystack != v[i]->pystack)
			k++;
		if (k == nacc)
			acc[nacc++] = (struct an_place_top){v[i]->pystack,
			                                    an_pystack_text(r, v[i]->pystack), 0, 0};
		acc[k].ns += b - a;
		acc[k].changes++;
	}
	qsort(acc, nacc, sizeof *acc, by_ns);
	for (kept = 0; kept < nacc && kept < max; kept++)
		out[kept] = acc[kept];
	if (total_ns)
		*total_ns = total;
	free(v);
	free(acc);
	return kept;
}

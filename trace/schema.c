/* schema.c: the schema text every trace carries (written from the kind list), and a file's schema mapped onto this build's kinds. */
#include <stdarg.h> /* va_list */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memcmp, memset, strlen */

#include "nvlp_schema.h"
#include "nvlp_trace.h"

/* enum nvlp_ftype as the schema's type letters */
static const char type_letters[] = "UIXTS";

/* Appends the NUL-terminated t at s + *n (the caller sized s). */
static void put(char *s, size_t *n, const char *t)
{
	size_t l = strlen(t);
	memcpy(s + *n, t, l);
	*n += l;
}

/* Written with memcpy, not snprintf: ~350 fields, once per trace (snprintf took 35 us of it). */
char *nvlp_schema_text(size_t *len)
{
	size_t cap = 64;
	for (unsigned k = 1; k < NVLP_K_COUNT; k++) {
		const struct nvlp_kind_info *ki = nvlp_kind_info(k);
		cap += 32 + strlen(ki->name);
		for (unsigned i = 0; i < ki->nfields; i++)
			cap += 4 + strlen(ki->fields[i]);
	}
	char *s = malloc(cap);
	if (!s)
		return NULL;
	size_t n = (size_t)snprintf(s, cap, "nvlp-schema %u.%u\n", NVLP_FORMAT_VERSION,
				    NVLP_FORMAT_MINOR);
	for (unsigned k = 1; k < NVLP_K_COUNT; k++) {
		const struct nvlp_kind_info *ki = nvlp_kind_info(k);
		char code[16];
		snprintf(code, sizeof code, " %u ", k);
		put(s, &n, "kind ");
		put(s, &n, ki->name);
		put(s, &n, code);
		put(s, &n, ki->has_blob ? "blob" : "-");
		for (unsigned i = 0; i < ki->nfields; i++) {
			s[n++] = ' ';
			put(s, &n, ki->fields[i]);
			s[n++] = ':';
			s[n++] = type_letters[ki->types[i]];
		}
		s[n++] = '\n';
	}
	s[n] = 0;
	if (len)
		*len = n;
	return s;
}

/* ---- parsing ---- */

/* A cursor over one line of the text. */
struct line {
	const char *p, *end;
	unsigned no;
};

#define MAX_NAME 31

/* The next blank-separated token of the line. @return its length, 0 at the end of the line */
static size_t token(struct line *l, const char **tok)
{
	while (l->p < l->end && *l->p == ' ')
		l->p++;
	*tok = l->p;
	while (l->p < l->end && *l->p != ' ')
		l->p++;
	return (size_t)(l->p - *tok);
}

static int is_word(const char *t, size_t n, const char *w)
{
	return n == strlen(w) && !memcmp(t, w, n);
}

/* A kind or field name: [a-z0-9_], 1 to MAX_NAME characters. */
static int name_ok(const char *t, size_t n)
{
	if (n == 0 || n > MAX_NAME)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9') || t[i] == '_'))
			return 0;
	return 1;
}

/* A decimal number up to max. @return 0, or -1 */
static int number(const char *t, size_t n, unsigned max, unsigned *out)
{
	unsigned v = 0;
	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (t[i] < '0' || t[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(t[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

static int __attribute__((format(printf, 4, 5)))
fail(const struct line *l, char *why, size_t whylen, const char *fmt, ...)
{
	int n = snprintf(why, whylen, "line %u: ", l->no);
	if (n >= 0 && (size_t)n < whylen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why + n, whylen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Adds "what" to the list of what this build does not know (cut short when it is long). */
static void note_unknown(struct nvlp_schema_map *m, const char *what, size_t n)
{
	size_t l = strlen(m->unknown);
	if (l + n + 3 >= sizeof m->unknown) {
		if (l + 4 < sizeof m->unknown && (l < 3 || strcmp(m->unknown + l - 3, "...")))
			memcpy(m->unknown + l, "...", 4);
		return;
	}
	if (l)
		m->unknown[l++] = ' ';
	memcpy(m->unknown + l, what, n);
	m->unknown[l + n] = 0;
}

/* This build's kind named t, 0 if none. */
static unsigned kind_by_name(const char *t, size_t n)
{
	for (unsigned k = 1; k < NVLP_K_COUNT; k++)
		if (is_word(t, n, nvlp_kind_info(k)->name))
			return k;
	return 0;
}

/* This build's field of kind k named t, -1 if none. */
static int field_by_name(unsigned k, const char *t, size_t n)
{
	const struct nvlp_kind_info *ki = nvlp_kind_info(k);
	for (unsigned i = 0; i < ki->nfields; i++)
		if (is_word(t, n, ki->fields[i]))
			return (int)i;
	return -1;
}

/* The "NAME:T" fields of a kind line: counted into cm->nf, matched onto kind k (0: unknown).
 * @return 0, or -1 (why says it) */
static int kind_fields(struct nvlp_schema_map *m, struct line *l, unsigned k,
		       struct nvlp_code_map *cm, const char *kname, char *why, size_t whylen)
{
	const char *names[NVLP_MAX_FILE_FIELDS];
	size_t lens[NVLP_MAX_FILE_FIELDS];
	const char *t;
	size_t n;
	unsigned nf = 0;
	while ((n = token(l, &t)) > 0) {
		if (nf == NVLP_MAX_FILE_FIELDS)
			return fail(l, why, whylen, "more than %d fields", NVLP_MAX_FILE_FIELDS);
		if (n < 3 || t[n - 2] != ':' || !name_ok(t, n - 2) || t[n - 1] <= ' ' || t[n - 1] > '~')
			return fail(l, why, whylen, "bad field '%.*s'", (int)(n > 40 ? 40 : n), t);
		for (unsigned j = 0; j < nf; j++)
			if (lens[j] == n - 2 && !memcmp(names[j], t, n - 2))
				return fail(l, why, whylen, "field '%.*s' twice", (int)(n - 2), t);
		names[nf] = t;
		lens[nf++] = n - 2;
		int i = k ? field_by_name(k, t, n - 2) : -1;
		if (i >= 0)
			m->from[k][i] = (int8_t)(nf - 1);
		else if (k) {
			char what[2 * MAX_NAME + 2];
			int w = snprintf(what, sizeof what, "%s.%.*s", kname, (int)(n - 2), t);
			note_unknown(m, what, (size_t)w);
		}
	}
	cm->nf = (uint8_t)nf;
	return 0;
}

/* DIRECT when the file's fields of kind k are this build's, in order; else MAPPED. */
static unsigned kind_mode(const struct nvlp_schema_map *m, unsigned k, unsigned nf)
{
	const struct nvlp_kind_info *ki = nvlp_kind_info(k);
	if (nf != ki->nfields)
		return NVLP_CM_MAPPED;
	for (unsigned i = 0; i < nf; i++)
		if (m->from[k][i] != (int)i)
			return NVLP_CM_MAPPED;
	return NVLP_CM_DIRECT;
}

/* "kind NAME CODE BLOB FIELD:T...". @return 0, or -1 (why says it) */
static int kind_line(struct nvlp_schema_map *m, struct line *l, unsigned char seen[NVLP_K_COUNT],
		     char *why, size_t whylen)
{
	const char *name, *t;
	size_t nn = token(l, &name), n;
	unsigned code;
	if (!name_ok(name, nn))
		return fail(l, why, whylen, "bad kind name");
	n = token(l, &t);
	if (number(t, n, NVLP_MAX_FILE_KINDS - 1, &code) < 0 || code == NVLP_SCHEMA_CODE)
		return fail(l, why, whylen, "bad kind code '%.*s'", (int)(n > 20 ? 20 : n), t);
	struct nvlp_code_map *cm = &m->code[code];
	if (cm->mode != NVLP_CM_UNDECLARED)
		return fail(l, why, whylen, "kind code %u twice", code);
	n = token(l, &t);
	if (!is_word(t, n, "blob") && !is_word(t, n, "-"))
		return fail(l, why, whylen, "bad blob mark (blob or -)");
	cm->has_blob = n == 4;
	unsigned k = kind_by_name(name, nn);
	if (k && seen[k])
		return fail(l, why, whylen, "kind '%.*s' twice", (int)nn, name);
	/* a kind whose blob this build reads differently cannot be handed out as that kind */
	if (k && cm->has_blob != (unsigned)nvlp_kind_info(k)->has_blob)
		k = 0;
	if (k) {
		seen[k] = 1;
		memset(m->from[k], -1, sizeof m->from[k]);
	}
	char kname[MAX_NAME + 1];
	snprintf(kname, sizeof kname, "%.*s", (int)nn, name);
	if (kind_fields(m, l, k, cm, kname, why, whylen) < 0)
		return -1;
	if (!k)
		note_unknown(m, kname, nn);
	cm->mode = (uint8_t)(k ? kind_mode(m, k, cm->nf) : NVLP_CM_SKIP);
	cm->kind = (uint8_t)k;
	cm->prev_off = m->pool_n;
	m->pool_n += cm->nf;
	if (code >= m->ncodes)
		m->ncodes = code + 1;
	return 0;
}

/* "nvlp-schema MAJOR.MINOR", MAJOR the preamble's. @return 0, or -1 (why says it) */
static int version_line(struct nvlp_schema_map *m, struct line *l, unsigned major, char *why,
			size_t whylen)
{
	const char *t;
	size_t n = token(l, &t);
	if (!is_word(t, n, "nvlp-schema"))
		return fail(l, why, whylen, "does not start with nvlp-schema");
	n = token(l, &t);
	const char *dot = memchr(t, '.', n);
	unsigned mj, mn;
	if (!dot || number(t, (size_t)(dot - t), 65535, &mj) < 0 ||
	    number(dot + 1, n - (size_t)(dot + 1 - t), 65535, &mn) < 0)
		return fail(l, why, whylen, "bad version '%.*s'", (int)(n > 20 ? 20 : n), t);
	if (mj != major)
		return fail(l, why, whylen, "schema of version %u in a version %u file", mj, major);
	m->major = mj;
	m->minor = mn;
	return 0;
}

int nvlp_schema_map_build(struct nvlp_schema_map *m, unsigned major, const char *text, size_t len,
			  char *why, size_t whylen)
{
	memset(m, 0, sizeof *m);
	unsigned char seen[NVLP_K_COUNT] = {0};
	const char *p = text, *end = text + len;
	for (unsigned no = 1; p < end; no++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct line l = {p, nl ? nl : end, no};
		const char *t;
		size_t n;
		p = nl ? nl + 1 : end;
		int rc = 0;
		if (no == 1)
			rc = version_line(m, &l, major, why, whylen);
		else if ((n = token(&l, &t)) > 0 && is_word(t, n, "kind"))
			rc = kind_line(m, &l, seen, why, whylen);
		/* other lines are for later versions */
		if (rc < 0)
			return -1;
	}
	if (!m->major) {
		snprintf(why, whylen, "empty");
		return -1;
	}
	return 0;
}

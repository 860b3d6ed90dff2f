/* util.c: helpers shared by the nvlprof subcommands (trace file lists, JSON strings, human units). */
#include <pthread.h> /* pthread_create */
#include <dirent.h>   /* opendir, readdir */
#include <errno.h>    /* errno */
#include <math.h>     /* fabs, isfinite */
#include <stdlib.h>   /* malloc, realloc, qsort */
#include <string.h>   /* strlen, strverscmp */
#include <sys/stat.h> /* stat */

#include "util/diag.h" /* an_diag */
#include "util/util.h"

static int paths_push(struct nvlp_paths *p, char *s)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		char **v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return -1;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = s;
	return 0;
}

static int cmp_vers(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

static int has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n > m && strcmp(s + n - m, suf) == 0;
}

int nvlp_paths_add(struct nvlp_paths *p, const char *arg, char *err, size_t errlen)
{
	struct stat st;
	if (stat(arg, &st) < 0) {
		snprintf(err, errlen, "%s: %s", arg, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		char *s = strdup(arg);
		if (!s || paths_push(p, s) < 0) {
			free(s);
			snprintf(err, errlen, "%s: out of memory", arg);
			return -1;
		}
		return 1;
	}
	DIR *d = opendir(arg);
	if (!d) {
		snprintf(err, errlen, "%s: %s", arg, strerror(errno));
		return -1;
	}
	size_t first = p->n;
	size_t alen = strlen(arg);
	int slash = alen > 0 && arg[alen - 1] == '/';
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!has_suffix(e->d_name, ".nvlp"))
			continue;
		size_t len = alen + 1 + strlen(e->d_name) + 1;
		char *s = malloc(len);
		if (!s || paths_push(p, s) < 0) {
			free(s);
			closedir(d);
			snprintf(err, errlen, "%s: out of memory", arg);
			return -1;
		}
		snprintf(s, len, "%s%s%s", arg, slash ? "" : "/", e->d_name);
	}
	closedir(d);
	if (p->n == first) {
		snprintf(err, errlen, "%s: no .nvlp trace files in this directory", arg);
		return -1;
	}
	qsort(p->v + first, p->n - first, sizeof(char *), cmp_vers);
	return (int)(p->n - first);
}

void nvlp_paths_free(struct nvlp_paths *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
	p->v = NULL;
	p->n = p->cap = 0;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if the bytes there are not one. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
	unsigned c = s[0];
	size_t n;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, min = 0x10000;
	else
		return 0;
	if (n > left)
		return 0;
	unsigned cp = c & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and values past U+10FFFF are not valid UTF-8 */
	if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

void nvlp_json_string(FILE *f, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	flockfile(f); /* one lock per string, not per character (dump --json: 4% of a fuzz run) */
	putc_unlocked('"', f);
	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		if (c == '"' || c == '\\') {
			putc_unlocked('\\', f);
			putc_unlocked((int)c, f);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			switch (c) {
			case '\n': fputs("\\n", f); break;
			case '\t': fputs("\\t", f); break;
			case '\r': fputs("\\r", f); break;
			default: fprintf(f, "\\u%04x", c); break;
			}
			i++;
		} else if (c < 0x80) {
			putc_unlocked((int)c, f);
			i++;
		} else {
			size_t n = utf8_len(s + i, len - i);
			if (n == 0) { /* a stray byte: keep it visible as its Latin-1 character */
				fprintf(f, "\\u%04x", c);
				i++;
			} else {
				fwrite(s + i, 1, n, f);
				i += n;
			}
		}
	}
	putc_unlocked('"', f);
	funlockfile(f);
}

void nvlp_json_cstr(FILE *f, const char *s)
{
	if (s)
		nvlp_json_string(f, s, strlen(s));
	else
		fputs("null", f);
}

/* n in the largest unit it reaches (step: the factor between units), with three significant
 * digits and no exponent: 1.23 ms, 12.3 ms, 123 ms; whole numbers below the first step. */
static const char *human(uint64_t n, unsigned step, const char *const *units, unsigned nunits,
			 char *buf, size_t len)
{
	if (n < step) {
		snprintf(buf, len, "%llu %s", (unsigned long long)n, units[0]);
		return buf;
	}
	double v = (double)n;
	unsigned u = 0;
	while (v >= step && u + 1 < nunits) {
		v /= step;
		u++;
	}
	snprintf(buf, len, v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s", v, units[u]);
	return buf;
}

const char *nvlp_human_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	return human(n, 1024, units, 7, buf, len);
}

const char *nvlp_human_ns(uint64_t ns, char *buf, size_t len)
{
	static const char *const units[] = {"ns", "us", "ms", "s"};
	return human(ns, 1000, units, 4, buf, len);
}

/* The unit's scale to its base (bytes or ns), 0 if it has none */
static double unit_scale(const char *unit, int *bytes)
{
	static const struct {
		const char *u;
		double scale;
		int bytes;
	} t[] = {{"B", 1, 1},  {"KiB", 1024.0, 1}, {"MiB", 1048576.0, 1}, {"GiB", 1073741824.0, 1},
	         {"ns", 1, 0}, {"us", 1e3, 0},     {"ms", 1e6, 0},        {"s", 1e9, 0}};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(unit, t[i].u)) {
			*bytes = t[i].bytes;
			return t[i].scale;
		}
	return 0;
}

const char *an_fmt_value(char *buf, size_t len, double v, const char *unit)
{
	if (!unit)
		unit = "";
	int bytes = 0;
	double scale = unit_scale(unit, &bytes);
	double base = fabs(v) * scale;
	if (scale && isfinite(v) && base < 1.8e19) {
		char h[64];
		uint64_t n = (uint64_t)(base + 0.5);
		if (bytes)
			nvlp_human_bytes(n, h, sizeof h);
		else
			nvlp_human_ns(n, h, sizeof h);
		snprintf(buf, len, "%s%s", v < 0 && n ? "-" : "", h);
		return buf;
	}
	const char *sp = unit[0] ? " " : "";
	if (isfinite(v) && (fabs(v) >= 1000 || (fabs(v) < 1e15 && v == (double)(long long)v)))
		snprintf(buf, len, "%.0f%s%s", v, sp, unit);
	else
		snprintf(buf, len, "%.3g%s%s", v, sp, unit);
	return buf;
}

const char *nvlp_basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

int nvlp_out_finish(FILE *f, const char *name)
{
	errno = 0;
	int bad = fflush(f) != 0 || ferror(f);
	int e = errno;
	if (f != stdout && fclose(f) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad && e) /* errno is known only when this flush failed, not an earlier one */
		an_diag("nvlprof: %s: write error: %s\n", name, strerror(e));
	else if (bad)
		an_diag("nvlprof: %s: write error\n", name);
	return bad ? -1 : 0;
}

int nvlp_max_threads;

void nvlp_run_parallel(void *(*fn)(void *), void *arg, size_t nthreads)
{
	if (nvlp_max_threads > 0 && nthreads > (size_t)nvlp_max_threads)
		nthreads = (size_t)nvlp_max_threads;
	pthread_t th[256];
	size_t started = 0;
	for (size_t i = 1; i < nthreads && i < 256; i++)
		if (pthread_create(&th[started], NULL, fn, arg) == 0)
			started++;
	fn(arg);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

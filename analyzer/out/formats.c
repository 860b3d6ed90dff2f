/* formats.c: the table of the export formats (formats.h): each writer opens its output (a file,
 * standard output or a directory of files) around its encoder (export_perfetto.c,
 * export_chrome.c, export_sqlite.c); the lookup by name and the lists of names for the usage. */
#include <errno.h>    /* errno */
#include <stdio.h>    /* FILE, snprintf */
#include <string.h>   /* strcmp */
#include <sys/stat.h> /* stat, mkdir */

#include "out/export.h"
#include "out/formats.h"
#include "util/diag.h"

/* An encoder writing x to the open stream o, or (dir set) one file per process in dir */
typedef int (*enc_fn)(const struct xm_job *x, FILE *o, const char *dir, uint64_t *records);

/* enc's output to out: a file, "-" for stdout, or (flags XE_FMT_DIR) a directory of one file per
 * rank; 0 written */
static int stream_write(const struct xm_job *x, const char *out, unsigned flags, enc_fn enc,
                        uint64_t *recs)
{
	size_t ol = strlen(out);
	struct stat st;
	int dir = (flags & XE_FMT_DIR) &&
	          ((ol && out[ol - 1] == '/') || (!stat(out, &st) && S_ISDIR(st.st_mode)));
	if (dir && mkdir(out, 0777) != 0 && errno != EEXIST) {
		an_diag("nvlprof: export: %s: cannot create directory: %s\n", out, strerror(errno));
		return -1;
	}
	FILE *o = stdout;
	if (!dir && strcmp(out, "-") && !(o = fopen(out, "wb"))) {
		an_diag("nvlprof: export: %s: cannot write: %s\n", out, strerror(errno));
		return -1;
	}
	errno = 0; /* the writers say errno's reason for a failed write: none stale from above */
	int rc = enc(x, dir ? NULL : o, dir ? out : NULL, recs);
	if (o != stdout && fclose(o) != 0 && !rc) {
		an_diag("nvlprof: export: %s: write error: %s\n", out, strerror(errno));
		rc = -1;
	}
	return rc;
}

static int perfetto_enc(const struct xm_job *x, FILE *o, const char *dir, uint64_t *records)
{
	(void)dir;
	return xe_perfetto(x, o, records);
}

static int perfetto_write(const struct xm_job *x, const char *out, const struct xe_write_opts *o,
                          uint64_t *records)
{
	(void)o;
	return stream_write(x, out, 0, perfetto_enc, records);
}

static int chrome_write(const struct xm_job *x, const char *out, const struct xe_write_opts *o,
                        uint64_t *records)
{
	(void)o;
	return stream_write(x, out, XE_FMT_DIR, xe_chrome, records);
}

static int sqlite_write(const struct xm_job *x, const char *out, const struct xe_write_opts *o,
                        uint64_t *records)
{
	return xe_sqlite(x, out, o->threads, records);
}

const struct xe_format xe_formats[] = {
    {"perfetto", "nvlprof.pftrace", XE_FMT_STDOUT, perfetto_write,
     "Perfetto protobuf (open in https://ui.perfetto.dev); "},
    {"chrome", "nvlprof.json", XE_FMT_STDOUT | XE_FMT_DIR, chrome_write,
     "Chrome/Kineto JSON (Perfetto, chrome://tracing, HTA); -o DIR/ writes\n"
     "              one file per rank (rank<N>.json), the layout HTA's TraceAnalysis reads;\n"
     "              "},
    {"sqlite", "nvlprof.sqlite", 0, sqlite_write, "SQLite database (schema: docs/EXPORTS.md); "},
    {NULL},
};

const struct xe_format *xe_format_find(const char *name)
{
	for (const struct xe_format *f = xe_formats; f->name; f++)
		if (!strcmp(f->name, name))
			return f;
	return NULL;
}

char *xe_format_names(char *b, size_t n, unsigned flags, const char *sep, const char *last)
{
	size_t m = 0, k = 0, len = 0;
	for (const struct xe_format *f = xe_formats; f->name; f++)
		m += (f->flags & flags) == flags;
	if (n)
		b[0] = '\0';
	for (const struct xe_format *f = xe_formats; f->name; f++) {
		if ((f->flags & flags) != flags)
			continue;
		k++;
		int w = snprintf(b + len, n - len, "%s%s",
		                 k == 1   ? ""
		                 : k == m ? last
		                          : sep,
		                 f->name);
		if (w < 0 || (size_t)w >= n - len)
			break; /* cut */
		len += (size_t)w;
	}
	return b;
}

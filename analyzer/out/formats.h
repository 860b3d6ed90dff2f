/* formats.h: the export formats of `nvlprof export` behind one interface: a table of them (name,
 * default output, what the output may be, writer, usage text) and the lookup by name. */
#ifndef NVLP_AN_FORMATS_H
#define NVLP_AN_FORMATS_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "out/export_model.h" /* struct xm_job */

enum {
	XE_FMT_STDOUT = 1, /* "-" writes to standard output */
	XE_FMT_DIR = 2,    /* a directory (a name ending in '/', or one that exists) is written */
};

/* What the writers take besides the job and the output. */
struct xe_write_opts {
	int threads; /* -j: 0 one per CPU, 1 all on the calling thread (sqlite) */
};

struct xe_format {
	const char *name;        /* as --format takes it */
	const char *default_out; /* the output without -o */
	unsigned flags;          /* XE_FMT_* */
	/* Write the job to out (a file; "-" or a directory as flags allow). @return 0, or -1 after
	 * saying an error naming the output */
	int (*write)(const struct xm_job *x, const char *out, const struct xe_write_opts *o,
	             uint64_t *records);
	/* the usage's description, up to the default output's name (continuation lines indented
	 * to the description's column) */
	const char *what;
};

/*! The formats, in the usage's order, ended by an entry without a name */
extern const struct xe_format xe_formats[];

/*! The format called name. @return it, or NULL (none) */
const struct xe_format *xe_format_find(const char *name);

/*! The names of the formats with all of flags, joined by sep, the last two by last, into b (n
 * bytes, cut if short): (0, ", ", " or ") -> "perfetto, chrome or sqlite". @return b */
char *xe_format_names(char *b, size_t n, unsigned flags, const char *sep, const char *last);

#endif

/* sqlite_file.h: writes an SQLite 3 database file directly
 * (https://www.sqlite.org/fileformat2.html): rowid tables filled in rowid order, indexes on integer
 * columns, no libsqlite3. */
#ifndef NVLP_AN_SQLITE_FILE_H
#define NVLP_AN_SQLITE_FILE_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* int64_t */
#include <string.h> /* strlen, for SQF_S */

/* One column value of a row. Text is UTF-8 as given (not copied beyond sqf_insert). */
enum { SQF_NULL, SQF_INT, SQF_TEXT };
struct sqf_val {
	int type;   /* SQF_NULL, SQF_INT, SQF_TEXT */
	uint32_t n; /* text bytes */
	union {
		int64_t i;
		const char *s;
	};
};
#define SQF_I(v) ((struct sqf_val){.type = SQF_INT, .i = (int64_t)(v)})
static inline struct sqf_val sqf_text(const char *s) /* s evaluated once */
{
	return (struct sqf_val){.type = SQF_TEXT, .n = (uint32_t)strlen(s), .s = s};
}
#define SQF_S(v) sqf_text(v)
#define SQF_N ((struct sqf_val){.type = SQF_NULL})

enum { SQF_MAX_COLS = 64, SQF_MAX_KEYS = 4 };

struct sqf;

/*! Start a database that replaces path when sqf_close succeeds (written to a temporary file
 * next to it, then renamed). page_size: a power of two, 512..65536. @return NULL (errno set) */
struct sqf *sqf_open(const char *path, unsigned page_size);

/*! A table, in sqlite_schema order. sql: its CREATE TABLE text; ipk: the column that is its
 * INTEGER PRIMARY KEY (the rowid; stored as NULL in the record), -1 none (rowids 1, 2, ...).
 * @return its handle (>= 0), -1 (too many tables, or out of memory: sqf_close fails) */
int sqf_table(struct sqf *f, const char *name, int ncols, int ipk, const char *sql);

/*! An index on integer-or-NULL columns cols[0..nkeys) of a table (sql NULL: the automatic
 * index of a PRIMARY KEY, named sqlite_autoindex_<table>_N). Declared after its table and
 * before its table's first row. @return 0, -1 (as sqf_table) */
int sqf_index(struct sqf *f, int table, const char *name, const char *sql, const int *cols,
              int nkeys);

/*! A row: ncols values. Rows come in increasing rowid order per table (the ipk column's value).
 * Errors (out of order, text in an index key, memory, a write) are kept for sqf_close. */
void sqf_insert(struct sqf *f, int table, const struct sqf_val *v);

/*! Sort and write the indexes, the schema and the header, then rename over the path.
 * Frees f. @return 0, or -1 with a one-line reason in msg (the target untouched) */
int sqf_close(struct sqf *f, char *msg, size_t size);

#endif

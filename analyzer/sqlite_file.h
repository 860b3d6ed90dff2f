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

/* ---- rows encoded away from the writer: an export encodes each process's rows and index
 * entries on its own thread; the one thread that owns f appends them in rowid order ---- */

/*! The record of row v (ncols values, column ipk stored as NULL, -1 none), the bytes
 * sqf_insert would store, into out[0..cap). Any thread. @return its size P: written when
 * cap >= SQF_RECORD_ROOM(P, ncols) (it writes past its end), maybe when cap is less */
size_t sqf_record(uint8_t *out, size_t cap, int ncols, int ipk, const struct sqf_val *v);
#define SQF_RECORD_ROOM(P, ncols) ((P) + 8 * (size_t)(ncols) + 17)

/*! Record rec[0..len) with the values of columns col[0..n) (increasing, n <= 8) set to the
 * integers val, into out (room for len + 9 * n + 9 bytes). @return its size, 0 (rec malformed) */
size_t sqf_record_set(const uint8_t *rec, size_t len, const int *col, const int64_t *val, int n,
                      uint8_t *out);

/*! The same for the record's last column, its serial type one byte (an integer or NULL):
 * out has room for len + 9 bytes. */
size_t sqf_record_set_last(const uint8_t *rec, size_t len, int64_t val, uint8_t *out);

/*! A row given as its record (sqf_record's), its rowid the one after the table's last (1 for
 * the first); the table's index entries are the caller's (sqf_keys_add, sqf_index_add). */
void sqf_insert_record(struct sqf *f, int table, const uint8_t *rec, size_t len);

/* Entries of one index gathered apart from f (one set per index and producer thread) */
struct sqf_keys {
	uint64_t *w;
	size_t n, cap, bytes;
};
/*! Row v's entry of index ix, rowid its rowid counted within this set of rows. Any thread, once
 * the indexes are declared. @return 0, -1 (out of memory, a key that is not an integer) */
int sqf_keys_add(const struct sqf *f, int ix, struct sqf_keys *k, const struct sqf_val *v,
                 int64_t rowid);
void sqf_keys_free(struct sqf_keys *k);
/*! Hand k's entries to index ix, their rowids + base (k emptied; sets come in rowid order);
 * sqf_index_sort sorts them now (else sqf_close does) and, build set, builds the index's B-tree
 * in memory too (its pages then written by sqf_close). Calls for different indexes may run on
 * several threads at once, and alongside sqf_insert* of rows of tables without indexes; errors
 * are kept for sqf_close. @return 0, -1 */
int sqf_index_add(struct sqf *f, int ix, struct sqf_keys *k, int64_t base);
void sqf_index_sort(struct sqf *f, int ix, int build);

/*! The caller's own failure (out of memory): sqf_close fails with why. */
void sqf_fail(struct sqf *f, const char *why);
/*! @return nonzero once something failed (what follows is wasted work) */
int sqf_failed(const struct sqf *f);

/*! Sort and write the indexes, the schema and the header, then rename over the path.
 * Frees f. @return 0, or -1 with a one-line reason in msg (the target untouched) */
int sqf_close(struct sqf *f, char *msg, size_t size);

#endif

/* heatband.h: the rows of a heatmap of many ranks: the ranks that matter kept as rows, the others
 * merged into one row per host (few hosts) or into bands by how late they were on the mean. */
#ifndef NVLP_AN_HEATBAND_H
#define NVLP_AN_HEATBAND_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

enum { HB_BANDS = 10, HB_MAX_HOSTS = 32 };

/* What each row of the merged table is */
struct hb_rows {
	size_t rows;
	size_t *src;  /* per row: the source row it is, SIZE_MAX for a merged row */
	size_t *n;    /* per row: source rows merged into it (1 for a kept row) */
	char (*label)[48]; /* per merged row: "node3: 8 ranks", "p90-p100: 205 ranks" */
	int bands;         /* merged into bands (else by host) */
};

/*! Merge the rows of t (t[q * rows + i]: column q of source row i, ncol columns) that keep[i] does
 * not keep: into one row per host (host[i], the rows' hosts) when they are on at most
 * HB_MAX_HOSTS hosts, else into HB_BANDS bands by their mean over the columns. A merged row's
 * cell is the largest of its rows' (the latest). Kept rows come first, in source order.
 * *out: the merged table (ncol x r->rows, the caller frees it and hb_free(r)).
 * @return 0, -1 out of memory */
int hb_merge(const uint64_t *t, size_t ncol, size_t rows, const uint8_t *keep,
             const char *const *host, uint64_t **out, struct hb_rows *r);
void hb_free(struct hb_rows *r);

#endif

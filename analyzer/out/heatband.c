/* heatband.c: a heatmap of many ranks as the ranks that matter plus merged rows (heatband.h). */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* calloc, qsort */
#include <string.h> /* strcmp */

#include "out/heatband.h"
#include "util/containers.h" /* AN_CMP_KEY */

struct member {
	size_t row;
	double key; /* the band's order: the row's mean; or its host's index */
};
static int cmp_member(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	AN_CMP_KEY(x, y, key);
	return (x->row > y->row) - (x->row < y->row);
}

static const char *const *sort_host; /* qsort has no context argument */
static int cmp_host_row(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int c = strcmp(sort_host[x->row], sort_host[y->row]);
	return c ? c : (x->row > y->row) - (x->row < y->row);
}

/* The rows not kept, ordered into groups; grp[k]: the group of m[k]; @return the groups */
static size_t group_rest(const uint64_t *t, size_t ncol, size_t rows, const char *const *host,
                         struct member *m, size_t nm, size_t *grp, int *bands)
{
	*bands = 0;
	sort_host = host;
	qsort(m, nm, sizeof *m, cmp_host_row);
	size_t nh = 0;
	for (size_t k = 0; k < nm; k++) {
		nh += !k || strcmp(host[m[k].row], host[m[k - 1].row]);
		grp[k] = nh - 1;
	}
	if (nh <= HB_MAX_HOSTS)
		return nh;
	for (size_t k = 0; k < nm; k++) { /* bands by the mean lateness */
		double s = 0;
		for (size_t q = 0; q < ncol; q++)
			s += (double)t[q * rows + m[k].row];
		m[k].key = ncol ? s / (double)ncol : 0;
	}
	qsort(m, nm, sizeof *m, cmp_member);
	*bands = 1;
	size_t nb = nm < HB_BANDS ? nm : HB_BANDS;
	for (size_t k = 0; k < nm; k++)
		grp[k] = k * nb / nm;
	return nb;
}

/* Row labels and sizes of the groups; by host when they are hosts */
static void label_groups(struct hb_rows *r, size_t first, size_t ng, const struct member *m,
                         const size_t *grp, size_t nm, const char *const *host, int bands)
{
	for (size_t k = 0; k < nm; k++)
		r->n[first + grp[k]]++;
	for (size_t g = 0, k = 0; g < ng; g++) {
		size_t n = r->n[first + g];
		if (bands)
			snprintf(r->label[first + g], sizeof r->label[0], "p%zu-p%zu: %zu rank%s",
			         g * 100 / ng, (g + 1) * 100 / ng, n, n == 1 ? "" : "s");
		else
			snprintf(r->label[first + g], sizeof r->label[0], "%.24s: %zu rank%s",
			         host[m[k].row], n, n == 1 ? "" : "s");
		k += n;
	}
}

static int hb_alloc(struct hb_rows *r, size_t rows)
{
	r->src = malloc(rows * sizeof *r->src);
	r->n = calloc(rows, sizeof *r->n);
	r->label = calloc(rows, sizeof *r->label);
	return r->src && r->n && r->label ? 0 : -1;
}

int hb_merge(const uint64_t *t, size_t ncol, size_t rows, const uint8_t *keep,
             const char *const *host, uint64_t **out, struct hb_rows *r)
{
	memset(r, 0, sizeof *r);
	*out = NULL;
	size_t nk = 0, nm = 0;
	for (size_t i = 0; i < rows; i++)
		nk += keep[i] != 0;
	nm = rows - nk;
	struct member *m = malloc((nm ? nm : 1) * sizeof *m);
	size_t *grp = malloc((nm ? nm : 1) * sizeof *grp);
	if (!m || !grp || hb_alloc(r, rows) < 0) {
		free(m);
		free(grp);
		hb_free(r);
		return -1;
	}
	for (size_t i = 0, k = 0; i < rows; i++)
		if (keep[i]) {
			r->src[r->rows] = i;
			r->n[r->rows++] = 1;
		} else
			m[k++] = (struct member){i, 0};
	int bands;
	size_t ng = group_rest(t, ncol, rows, host, m, nm, grp, &bands);
	for (size_t g = 0; g < ng; g++)
		r->src[nk + g] = SIZE_MAX;
	label_groups(r, nk, ng, m, grp, nm, host, bands);
	r->bands = bands;
	r->rows = nk + ng;
	uint64_t *o = calloc((ncol ? ncol : 1) * (r->rows ? r->rows : 1), sizeof *o);
	if (!o) {
		free(m);
		free(grp);
		hb_free(r);
		return -1;
	}
	for (size_t q = 0; q < ncol; q++) {
		for (size_t i = 0; i < nk; i++)
			o[q * r->rows + i] = t[q * rows + r->src[i]];
		for (size_t k = 0; k < nm; k++) {
			uint64_t v = t[q * rows + m[k].row], *c = &o[q * r->rows + nk + grp[k]];
			if (v > *c)
				*c = v;
		}
	}
	free(m);
	free(grp);
	*out = o;
	return 0;
}

void hb_free(struct hb_rows *r)
{
	free(r->src);
	free(r->n);
	free(r->label);
	memset(r, 0, sizeof *r);
}

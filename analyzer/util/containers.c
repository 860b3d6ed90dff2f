/* containers.c: growable arrays, the two-word-key index and GPU interval unions (containers.h). */
#include "util/containers.h"

#include <stdlib.h> /* realloc, calloc, qsort */
#include <string.h> /* memset */

/* ---- small growable arrays ---- */
void *an_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			return NULL;
		nc *= 2;
	}
	if (nc > SIZE_MAX / elem)
		return NULL;
	/* plain realloc, which extends in place when it can (the earlier 2 MiB-aligned copy for
	 * transparent huge pages always copied into fresh pages) */
	void *q = realloc(p, nc * elem);
	if (!q)
		return NULL;
	*cap = nc;
	return q;
}

/* ---- index ---- */
static inline size_t slot_of(uint64_t a, uint64_t b, size_t cap)
{
	uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

long an_index_get(const struct an_index *ix, uint64_t a, uint64_t b)
{
	if (!ix->cap)
		return -1;
	for (size_t i = slot_of(a, b, ix->cap);; i = (i + 1) & (ix->cap - 1)) {
		const struct an_slot *s = &ix->slot[i];
		if (!s->v)
			return -1;
		if (s->a == a && s->b == b)
			return (long)s->v - 1;
	}
}

int an_index_put(struct an_index *ix, uint64_t a, uint64_t b, uint32_t v)
{
	if ((ix->n + 1) * 2 > ix->cap) { /* at most half full */
		size_t nc = ix->cap ? ix->cap * 2 : 64;
		struct an_slot *ns = calloc(nc, sizeof *ns);
		if (!ns)
			return -1;
		for (size_t i = 0; i < ix->cap; i++) {
			struct an_slot *o = &ix->slot[i];
			if (!o->v)
				continue;
			size_t k = slot_of(o->a, o->b, nc);
			while (ns[k].v)
				k = (k + 1) & (nc - 1);
			ns[k] = *o;
		}
		free(ix->slot);
		ix->slot = ns;
		ix->cap = nc;
	}
	size_t k = slot_of(a, b, ix->cap);
	while (ix->slot[k].v)
		k = (k + 1) & (ix->cap - 1);
	ix->slot[k] = (struct an_slot){a, b, v + 1};
	ix->n++;
	return 0;
}

void an_index_free(struct an_index *ix)
{
	free(ix->slot);
	memset(ix, 0, sizeof *ix);
}

/* ---- GPU intervals ---- */
static int cmp_ival(const void *a, const void *b)
{
	const struct an_ival *x = a, *y = b;
	return x->s < y->s ? -1 : x->s > y->s;
}

uint64_t an_ivals_union(struct an_ivals *iv)
{
	size_t n = iv->n;
	for (size_t i = 1; i < n; i++)
		if (iv->v[i].s < iv->v[i - 1].s) {
			qsort(iv->v, n, sizeof *iv->v, cmp_ival);
			break;
		}
	size_t o = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (o && iv->v[i].s <= iv->v[o - 1].e) {
			if (iv->v[i].e > iv->v[o - 1].e)
				iv->v[o - 1].e = iv->v[i].e;
		} else
			iv->v[o++] = iv->v[i];
	}
	iv->n = o;
	for (size_t i = 0; i < o; i++)
		total += iv->v[i].e - iv->v[i].s;
	return total;
}

uint64_t an_ivals_covered(const struct an_ivals *iv, size_t *pos, uint64_t s, uint64_t e)
{
	return an_ivals_cover(iv, pos, s, e);
}

/* containers.h: the analyzer's generic containers, known to no stage: growable arrays (an_grow,
 * PUSH), an index from a two-word key to an entry number, sorted GPU time intervals, wrapping time
 * arithmetic and the k-th smallest element. */
#ifndef NVLP_AN_CONTAINERS_H
#define NVLP_AN_CONTAINERS_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

/* ---- growable arrays ---- */
/*! Room for need elements of elem bytes in p (capacity *cap, doubled as needed).
 * @return the (maybe moved) array, or NULL when the size overflows or memory is short: then p is
 * left as it was, still owned by the caller */
void *an_grow(void *p, size_t *cap, size_t need, size_t elem);
/* One key of a sort comparator: returns from it (-1 or 1) when x's and y's field differ, so a
 * comparator of several keys reads as their list and a last `return a < b ? -1 : a > b;` */
#define AN_CMP_KEY(x, y, field)                                                                    \
	do {                                                                                       \
		if ((x)->field != (y)->field)                                                      \
			return (x)->field < (y)->field ? -1 : 1;                                   \
	} while (0)

/* Index of the first element of the sorted array v (n elements of size bytes, in the order of cmp,
 * a qsort comparator) that is not below *key: n if none. Inline, so that the comparator inlines at
 * each call. */
static inline size_t an_lower_bound(const void *v, size_t n, size_t size, const void *key,
                                    int (*cmp)(const void *, const void *))
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cmp((const char *)v + mid * size, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Append one element: a pointer to it (count advanced), or NULL with array and count unchanged.
 * The room check is inline: ingest pushes once per record or more. */
#define PUSH(arr, n, cap)                                                                          \
	({                                                                                         \
		__typeof__(arr) push_q_ = __builtin_expect((n) < (cap), 1)                         \
		                              ? (arr)                                              \
		                              : an_grow((arr), &(cap), (n) + 1, sizeof *(arr));    \
		push_q_ ? ((arr) = push_q_, &push_q_[(n)++]) : NULL;                               \
	})

/* ---- index ---- */
/* An open-addressing index from a two-word key to an entry number of the caller's array: lookups
 * stay O(1) however many streams, threads or communicators a trace names. */
struct an_index {
	struct an_slot {
		uint64_t a, b;
		uint32_t v; /* entry number + 1, 0 = empty */
	} * slot;
	size_t cap, n;
};
/*! @return the entry number stored for (a, b), or -1 */
long an_index_get(const struct an_index *ix, uint64_t a, uint64_t b);
/*! Store entry v for (a, b) (not present yet). @return 0, or -1 out of memory */
int an_index_put(struct an_index *ix, uint64_t a, uint64_t b, uint32_t v);
void an_index_free(struct an_index *ix);

/* ---- GPU intervals ---- */
/* Half-open time interval [s, e) on one GPU. */
struct an_ival {
	uint64_t s, e;
};
struct an_ivals {
	struct an_ival *v;
	size_t n, cap;
};
/*! Add [s, e); overlapping the last interval widens it. Inline: ingest pushes one per kernel. */
static inline void an_ivals_push(struct an_ivals *iv, uint64_t s, uint64_t e)
{
	/* Only the union is ever used: an interval overlapping the last one (back-to-back kernels,
	 * concurrent streams) widens it instead of taking memory. */
	if (iv->n) {
		struct an_ival *l = &iv->v[iv->n - 1];
		if (s <= l->e && e >= l->s) {
			if (s < l->s)
				l->s = s;
			if (e > l->e)
				l->e = e;
			return;
		}
	}
	struct an_ival *x = PUSH(iv->v, iv->n, iv->cap);
	if (x) {
		x->s = s;
		x->e = e;
	}
}
/*! Sort (only when needed: CUPTI mostly delivers in order) and merge overlapping intervals in
 * place. @return the length of their union */
uint64_t an_ivals_union(struct an_ivals *iv);
/* Length of [s, e) covered by the sorted disjoint intervals iv, scanning from *pos. Inlined in the
 * per-GPU loops (one call per collective and per link sample: perf put 3% of an 8-rank report in
 * the call); an_ivals_covered is the same out of line. */
static inline __attribute__((always_inline)) uint64_t
an_ivals_cover(const struct an_ivals *iv, size_t *pos, uint64_t s, uint64_t e)
{
	uint64_t c = 0;
	size_t i = *pos;
	while (i < iv->n && iv->v[i].e <= s)
		i++;
	*pos = i;
	for (; i < iv->n && iv->v[i].s < e; i++) {
		uint64_t a = iv->v[i].s > s ? iv->v[i].s : s;
		uint64_t b = iv->v[i].e < e ? iv->v[i].e : e;
		if (b > a)
			c += b - a;
	}
	return c;
}
/*! Length of [s, e) covered by the sorted disjoint intervals iv, scanning from *pos. */
uint64_t an_ivals_covered(const struct an_ivals *iv, size_t *pos, uint64_t s, uint64_t e);

/* ---- time arithmetic ---- */
/* Wrapping time arithmetic: trace times are untrusted, and a signed overflow is undefined. */
static inline int64_t an_add_i64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline int64_t an_sub_i64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* static T name(T *v, size_t n, size_t k): the k-th smallest of v[0..n), n > 0 (v is reordered):
 * what v[k] would be once sorted, in linear time (qsort of a million step lengths was a tenth of
 * report's CPU on a 2M-call trace). One body for the float leads (waits.c) and the double step
 * lengths (steps.c). */
#define AN_DEFINE_NTH(name, T)                                                                     \
	static T name(T *v, size_t n, size_t k)                                                    \
	{                                                                                          \
		size_t lo = 0, hi = n - 1;                                                         \
		while (lo < hi) {                                                                  \
			T p = v[lo + (hi - lo) / 2];                                               \
			size_t i = lo, j = hi;                                                     \
			while (i <= j) {                                                           \
				while (v[i] < p)                                                   \
					i++;                                                       \
				while (v[j] > p)                                                   \
					j--;                                                       \
				if (i <= j) {                                                      \
					T t = v[i];                                                \
					v[i] = v[j];                                               \
					v[j] = t;                                                  \
					i++;                                                       \
					if (j == 0)                                                \
						break;                                             \
					j--;                                                       \
				}                                                                  \
			}                                                                          \
			if (k <= j)                                                                \
				hi = j;                                                            \
			else if (k >= i)                                                           \
				lo = i;                                                            \
			else                                                                       \
				return v[k];                                                       \
		}                                                                                  \
		return v[k];                                                                       \
	}

#endif

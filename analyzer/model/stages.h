/* stages.h: the interfaces between the analyzer's stages, in data-flow order: ingest (records into
 * per-process tables) -> match (kernels to calls) -> align (clocks, cross-rank figures) -> steps
 * -> analyze (model.c); symbols and nccl_meta serve them. Internal to analyzer/. */
#ifndef NVLP_AN_STAGES_H
#define NVLP_AN_STAGES_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "model/model.h"

/* ---- growable arrays (model.c) ---- */
/*! Room for need elements of elem bytes in p (capacity *cap, doubled as needed).
 * @return the (maybe moved) array, or NULL when the size overflows or memory is short: then p is
 * left as it was, still owned by the caller */
void *an_grow(void *p, size_t *cap, size_t need, size_t elem);
/* Append one element: a pointer to it (count advanced), or NULL with array and count unchanged.
 * The room check is inline: ingest pushes once per record or more. */
#define PUSH(arr, n, cap)                                                                          \
	({                                                                                         \
		__typeof__(arr) push_q_ = __builtin_expect((n) < (cap), 1)                         \
		                              ? (arr)                                              \
		                              : an_grow((arr), &(cap), (n) + 1, sizeof *(arr));    \
		push_q_ ? ((arr) = push_q_, &push_q_[(n)++]) : NULL;                               \
	})

/* struct an_index (model.h): an open-addressing index from a two-word key to an entry number. */
/*! @return the entry number stored for (a, b), or -1 */
long an_index_get(const struct an_index *ix, uint64_t a, uint64_t b);
/*! Store entry v for (a, b) (not present yet). @return 0, or -1 out of memory */
int an_index_put(struct an_index *ix, uint64_t a, uint64_t b, uint32_t v);
void an_index_free(struct an_index *ix);

/* GPU records of work that never ran or never finished (job hung or killed) come with start
 * 0 or ~0 (-1 converted), or an end before the start: they carry no time. */
static inline int an_bad_gpu_time(uint64_t s, uint64_t d)
{
	return s == 0 || s > (1ull << 62) || d > 86400ull * 1000000000ull;
}

/* Wrapping time arithmetic: trace times are untrusted, and a signed overflow is undefined. */
static inline int64_t an_add_i64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline int64_t an_sub_i64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}
/* job time of a local time t of process r */
static inline uint64_t an_job_time(const struct an_rank *r, uint64_t t)
{
	return t + (uint64_t)r->offset;
}

/* ---- GPU intervals (model.c) ---- */
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
/*! Length of [s, e) covered by the sorted disjoint intervals iv, scanning from *pos. */
uint64_t an_ivals_covered(const struct an_ivals *iv, size_t *pos, uint64_t s, uint64_t e);

/* ---- match.c: NCCL kernels and calls of one process ---- */
struct an_match;
/*! Matching state for process r (its calls array is read and given GPU times). NULL: no memory. */
struct an_match *an_match_open(struct an_rank *r);
/*! ncclGroupStart (start = 1) / ncclGroupEnd (start = 0) on thread tid. */
void an_match_group(struct an_match *m, uint64_t tid, int start);
/*! Call r->calls[idx] (just added) was issued by tid at group depth group_depth on CUPTI stream
 * cs (0 = unknown): it waits for its kernel, or for the end of its group. */
void an_match_call(struct an_match *m, uint32_t idx, uint64_t tid, uint64_t group_depth,
                   uint64_t cs);
/*! An NCCL kernel [s, e) of collective kcoll (an_coll_of_kernel; -1 unknown) ran on (dev, stream);
 * s == 0: it never finished (its call keeps no GPU time). */
void an_match_kernel(struct an_match *m, int dev, uint64_t stream, uint64_t s, uint64_t e,
                     int kcoll);
/*! End of the file: open groups are flushed, units and kernels left over counted; frees m. */
void an_match_close(struct an_match *m);

/* ---- align.c: communicators, clocks and cross-rank figures of the job ---- */
/*! The job's communicator table (calls' comm fields become job indices) and clock anchors.
 * @return 0, or -1 out of memory */
int an_align_comms(struct an_job *job);

/* hosts.c */
/*! Number the job's hosts (an_rank.host_ix, job->nhosts). @return 0, or -1 out of memory */
int an_hosts_number(struct an_job *job);
/*! @return how many hosts have a readable rank */
size_t an_hosts_of_ok(const struct an_job *job);
/* Completion differences (host h's clock minus anchor a's) of collectives both entered: one
 * edge per (anchor, host) pair. */
struct an_clock_edge {
	uint32_t a, h;
	int64_t *v;
	size_t n, cap;
	size_t nexit; /* differences from blocking calls' exits (no GPU time) */
	int ok;       /* 3 or more: med is their median */
	int64_t med;
};
struct an_clock_pairs {
	struct an_clock_edge *e;
	size_t n, cap;
	struct an_index ix;
};
/*! Add one difference. @return 0, or -1 out of memory */
int an_clock_pair_add(struct an_clock_pairs *p, uint32_t anchor, uint32_t host, int64_t d,
                      int by_exit);
void an_clock_pairs_free(struct an_clock_pairs *p);
/*! Sort a hang's rank lists (an_hang_member searches them) */
void an_hang_sort(struct an_hang *h);
/*! Each host's offset from the reference host's (host number ref), through the edges, applied
 * to its ranks (offset, refine; job->max_refine_ns and the hosts_by_* counts); frees p. */
void an_clock_solve(struct an_job *job, struct an_clock_pairs *p, uint32_t ref);
/* Several jobs in one directory (a trace directory reused across runs) mix their ranks into one
 * report: ranks that ran different programs (the executable), ranks on one host with different
 * parents (torchrun, mp.spawn and mpirun start a host's ranks from one process), or that started
 * far apart. */
#define AN_MIX_START_S 600
/*! The first pair (by the later rank, then the earlier) that looks like two jobs, and why.
 * @return 1 found, 0 none */
int an_job_mix(const struct an_job *job, size_t *a, size_t *r, char *why, size_t len);
/*! Clock refinement across hosts, then skew, lead, transfer time and hangs per collective. */
void an_align_cross_rank(struct an_job *job);

/* ---- mismatch.c: collectives the ranks of a communicator called differently ---- */
/*! Row seq of communicator comm holds calls that differ (an_fn_collective or struct an_csig):
 * its n cells, each a file and its call index, become job->mismatches' entry for comm (align.c
 * notes the first row per communicator). @return 0, or -1 out of memory */
int an_mismatch_note(struct an_job *job, uint32_t comm, uint32_t seq, const int *file,
                     const uint32_t *k, int n);

/* ---- steps.c ---- */
/*! The job's steps and the step window with exposure in it: from step marks when a process has
 * them (an_steps_mark), else from the repeating collective pattern when its regularity proves it
 * (at least step_min_count repetitions of one sequence of collectives, step_min_ms long on the
 * median, step_regular_share of them within 25% of the median), else none (steps_why says why). */
void an_steps_find(struct an_job *job);
/*! A step began at local time t in process r (a ProfilerStep#N range, cudaProfilerStart, a named
 * NVTX range the job marks its steps with); name says which. @return 0, -1 out of memory */
int an_steps_mark(struct an_rank *r, uint64_t t, const char *name);

/* ---- symbols.c ---- */
/*! A BUILDID record of process r (blob = build-id bytes of the MODULE at base). */
void an_sym_buildid(struct an_rank *r, uint64_t base, const uint8_t *id, size_t len);
/*! Once a file is read: symbols sorted for lookup. */
void an_sym_finish(struct an_rank *r);
void an_sym_free(struct an_rank *r);

/* static T name(T *v, size_t n, size_t k): the k-th smallest of v[0..n), n > 0 (v is reordered):
 * what v[k] would be once sorted, in linear time (qsort of a million step lengths was a tenth of
 * report's CPU on a 2M-call trace). One body for the float leads (align.c) and the double step
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

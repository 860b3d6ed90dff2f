/* nvlp_clock.h: nvlp_now(), CLOCK_MONOTONIC in ns, read from the TSC where that is safe. */
#ifndef NVLP_CLOCK_H
#define NVLP_CLOCK_H

#include <stdint.h> /* uint64_t */
#include <time.h>   /* clock_gettime */
#if defined(__x86_64__)
#include <x86intrin.h> /* __rdtsc, _mm_lfence */
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * clock_gettime costs ~40 ns in a VM (kvm-clock), twice per intercepted call. With an invariant
 * TSC, nvlp_now() converts the TSC instead: mono0 + (tsc - tsc0) * mult >> 32, from an anchor
 * that nvlp_clock_refresh() replaces (the writer thread at every flush, or the first caller to
 * find it stale). Each new anchor starts where the old one was at that instant and slews towards
 * CLOCK_MONOTONIC, so the clock never steps back and stays within ~1 us of clock_gettime.
 * Anchors live in a few slots reused in turn; a reader checks the slot's generation, so a slot
 * rewritten under it sends it to the slow path instead of making it wait.
 * NVLPROF_CLOCK=gettime (or no invariant TSC, or a TSC that disagrees) uses clock_gettime.
 */
struct nvlp_clock_anchor {
	/* All accessed with __atomic builtins. */
	uint64_t gen; /* odd while the slot is being written */
	uint64_t tsc0, mono0, mult, limit; /* limit: ticks after tsc0 before it is stale */
} __attribute__((aligned(64)));

/* The anchor in use; NULL while calibrating or when the TSC is not used. */
extern struct nvlp_clock_anchor *nvlp_clock_cur __attribute__((visibility("hidden")));

/*! Choose the clock (NVLPROF_CLOCK: auto, tsc or gettime; NULL = auto) and take the first
 * calibration point. @return 0, or -1 for a value it does not know (auto is used). */
int nvlp_clock_init(const char *mode);
/*! Replace the anchor (writer thread, every flush). Never blocks: returns at once when another
 * thread is refreshing. */
void nvlp_clock_refresh(void);
/*! In a fork child: forget a refresh the parent had in progress. */
void nvlp_clock_atfork_child(void);
/*! "tsc" or "gettime": what nvlp_now() reads now. */
const char *nvlp_clock_source(void);
/*! nvlp_now() off the fast path (calibrating, stale anchor, clock_gettime mode). */
uint64_t nvlp_clock_slow(void);

static inline uint64_t nvlp_clock_gettime(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
/* The TSC read after every earlier load has completed, as the vDSO reads it: for calibration. */
static inline uint64_t nvlp_rdtsc_ordered(void)
{
	_mm_lfence();
	return __rdtsc();
}
#endif

/* CLOCK_MONOTONIC in ns: the clock of every record. Non-decreasing on a thread. The TSC is read
 * without a fence (one costs ~13 ns per read in the hooks): the read may execute while earlier
 * loads are still in flight, so against a time just seen from another thread it can be early by
 * that window (well under 1 us); after any ordering operation (a lock, a syscall, clock_gettime)
 * it is not. */
static inline uint64_t nvlp_now(void)
{
#if defined(__x86_64__)
	struct nvlp_clock_anchor *a = __atomic_load_n(&nvlp_clock_cur, __ATOMIC_ACQUIRE);
	if (__builtin_expect(a != NULL, 1)) {
		uint64_t g = __atomic_load_n(&a->gen, __ATOMIC_ACQUIRE);
		/* Acquire loads (plain moves on x86) keep the second gen load after them; no fence,
		 * which ThreadSanitizer would not follow. */
		uint64_t d = __rdtsc() - __atomic_load_n(&a->tsc0, __ATOMIC_ACQUIRE);
		uint64_t mono0 = __atomic_load_n(&a->mono0, __ATOMIC_ACQUIRE);
		uint64_t mult = __atomic_load_n(&a->mult, __ATOMIC_ACQUIRE);
		uint64_t limit = __atomic_load_n(&a->limit, __ATOMIC_ACQUIRE);
		/* d < limit also rejects a TSC read behind tsc0 (d wrapped). */
		if (__builtin_expect(d < limit && __atomic_load_n(&a->gen, __ATOMIC_RELAXED) == g, 1))
			return mono0 + (uint64_t)(((unsigned __int128)d * mult) >> 32);
	}
	return nvlp_clock_slow();
#else
	return nvlp_clock_gettime();
#endif
}

/*! t1 - t0 for two nvlp_now() readings on one thread, never wrapping below 0. */
static inline uint64_t nvlp_elapsed(uint64_t t0, uint64_t t1)
{
	return t1 > t0 ? t1 - t0 : 0;
}

#ifdef __cplusplus
}
#endif
#endif /* NVLP_CLOCK_H */

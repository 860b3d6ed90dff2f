/* nvlp_cost.h: what recording costs the job, measured by the shim itself (COST records).
 *
 * Hooks time one call in NVLP_COST_EVERY per thread: nvlp_cost_begin() at the wrapper's entry
 * (0 when this call is not timed: one increment and a predictable branch), nvlp_cost_end() at its
 * exit with the time the real function took; the difference, times NVLP_COST_EVERY, estimates the
 * time the job's threads spend in nvlprof's code. nvlprof's own threads register so their CPU
 * time can be read; memory holders add and remove what they hold. */
#ifndef NVLP_COST_H
#define NVLP_COST_H

#include <stdint.h> /* uint64_t */

#include "nvlp_clock.h" /* nvlp_now() */

#ifdef __cplusplus
extern "C" {
#endif

#define NVLP_COST_EVERY 16u /* one call in this many is timed (power of two) */

/* Per-thread tick: the one __thread of this header (nvlp_tls() may not exist yet where CUPTI
 * callbacks run). */
extern __thread unsigned nvlp_cost_tick __attribute__((tls_model("initial-exec"), visibility("hidden")));

/*! At a hook's entry: a start time for the one call in NVLP_COST_EVERY that is timed, else 0. */
static inline uint64_t nvlp_cost_begin(void)
{
	if (__builtin_expect(++nvlp_cost_tick & (NVLP_COST_EVERY - 1), 1))
		return 0;
	return nvlp_now();
}
void nvlp_cost_add_hook(uint64_t ns);
/*! At the hook's exit: inner_ns = the part spent in the real function (not nvlprof's). */
static inline void nvlp_cost_end(uint64_t t0, uint64_t inner_ns)
{
	if (__builtin_expect(!t0, 1))
		return;
	uint64_t d = nvlp_now() - t0;
	nvlp_cost_add_hook(d > inner_ns ? d - inner_ns : 0);
}

/* nvlprof's own threads, each counted under its role. */
enum nvlp_cost_who { NVLP_COST_WRITER, NVLP_COST_FLUSH, NVLP_COST_SAMPLER, NVLP_COST_PYSAMPLE,
                     NVLP_COST_WHO_N };
/*! The calling thread is nvlprof's `who` (its CPU clock is read while it lives). */
void nvlp_cost_thread_start(enum nvlp_cost_who who);
/*! The calling thread, registered with nvlp_cost_thread_start, is about to end. */
void nvlp_cost_thread_end(enum nvlp_cost_who who);
/*! Memory nvlprof holds outside the rings (CUPTI buffers): + when taken, - when given back. */
void nvlp_cost_mem(int64_t bytes);

#ifdef __cplusplus
}
#endif
#endif

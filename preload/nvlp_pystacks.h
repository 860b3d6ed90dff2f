/* nvlp_pystacks.h: the Python chains of the hooks' calls (pystacks.c), and the Python sampler's
 * per-thread slots (pysampler.c); its end hook is registered with the core (nvlp_module.h). */
#ifndef NVLP_PYSTACKS_H
#define NVLP_PYSTACKS_H

#include <stdint.h> /* uint64_t */

#include "nvlp_rt.h" /* struct nvlp_tls, NVLP_UNLIKELY */

#ifdef __cplusplus
extern "C" {
#endif

/* Nothing happens outside Python or without the GIL. */
/*! Attach the calling thread's Python chain to the record (kind, tid, t, call_id): a PYREF, and the
 * PYSTACK when new. */
void nvlp_py_attach(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id);
/*! After a collective's record: a PYREF when the thread's Python chain changed since the last. */
void nvlp_py_nccl(struct nvlp_tls *tls, uint64_t t, uint64_t call_id);
/* -1 once the process is known not to run Python: the hooks then skip the call (one load). */
extern int nvlp_py_state __attribute__((visibility("hidden")));
static inline void nvlp_py_nccl_maybe(struct nvlp_tls *tls, uint64_t t, uint64_t call_id)
{
	if (__atomic_load_n(&nvlp_py_state, __ATOMIC_RELAXED) >= 0)
		nvlp_py_nccl(tls, t, call_id);
}

/*
 * The Python sampler (pysampler.c): its own thread reads the chains of the main thread and of every
 * thread inside an intercepted call. A thread entering a call publishes its PyThreadState in a slot
 * of its own (a pointer load from thread-local storage and a store: no syscall, no lock); leaving,
 * it clears it. Nothing happens while no sampler runs (one relaxed load).
 */
struct nvlp_py_slot {
	uint64_t ts;  /* atomic: the thread's PyThreadState while inside a call, else 0 */
	uint64_t tid; /* atomic: the thread owning the slot, 0 free */
} __attribute__((aligned(64)));
extern int nvlp_py_sampling __attribute__((visibility("hidden"))); /* 1 while a sampler runs */
void nvlp_py_enter_slow(struct nvlp_tls *tls);
static inline void nvlp_py_enter(struct nvlp_tls *tls)
{
	if (NVLP_UNLIKELY(__atomic_load_n(&nvlp_py_sampling, __ATOMIC_RELAXED)))
		nvlp_py_enter_slow(tls);
}
static inline void nvlp_py_leave(struct nvlp_tls *tls)
{
	if (NVLP_UNLIKELY(tls->py_slot != NULL))
		__atomic_store_n(&tls->py_slot->ts, 0, __ATOMIC_RELEASE);
}


#ifdef __cplusplus
}
#endif
#endif /* NVLP_PYSTACKS_H */

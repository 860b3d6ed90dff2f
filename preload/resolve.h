/* resolve.h: what every wrapper asks first: the real function (found lazily, fail-soft), and whether to record. */
#ifndef NVLP_RESOLVE_H
#define NVLP_RESOLVE_H

#include <stdatomic.h> /* atomic pointer cache */

#include "nvlp_rt.h"

/* One wrapped (or helper) function. Filled statically by the hook lists; fn is the cache. */
struct nvlp_sym {
	const char *name;    /* symbol the application calls: "ncclAllReduce", "cudaMemcpy" */
	const char *strong;  /* preferred symbol, or NULL: "pncclAllReduce" (ncclX is its weak alias) */
	const char *version; /* symbol version to ask for first, NVLP_VERSION_CUDART, or NULL */
	_Atomic(void *) fn;  /* the real function, NVLP_SYM_MISSING, or NULL (not looked up yet) */
};

/* As a version: the version node of the CUDA runtime the process loaded ("libcudart.so.12",
 * "libcudart.so.13": whichever libcudart.so.N is among the loaded objects). */
#define NVLP_VERSION_CUDART "libcudart.so.N"

/*! Major version of the loaded CUDA runtime (N of libcudart.so.N), 0 if none is loaded. Looked up
 * once, on first use (never from a constructor). */
int nvlp_cudart_major(void);

/* Cached answer for a function no loaded object defines (looked up once, reported once). */
#define NVLP_SYM_MISSING ((void *)1)

/*! Slow path of nvlp_real: look the symbol up (RTLD_NEXT, then every loaded object) and cache it.
 * Never dlopens anything new. Reports a function it cannot find once (warning + NOTE(UNRESOLVED)).
 * @return the real function, or NULL */
void *nvlp_resolve(struct nvlp_sym *s);

/*! The real function behind s, or NULL if it cannot be found (the caller must not call it). */
static inline void *nvlp_real(struct nvlp_sym *s)
{
	void *f = atomic_load_explicit(&s->fn, memory_order_acquire);
	if (__builtin_expect(f != NULL && f != NVLP_SYM_MISSING, 1))
		return f;
	return f == NVLP_SYM_MISSING ? NULL : nvlp_resolve(s);
}

/*! The thread's state to record with, or NULL when the call must only pass through (recording
 * off, or an intercepted call made from inside another one). */
static inline struct nvlp_tls *nvlp_recording_tls(void)
{
	if (!nvlp_is_active())
		return NULL;
	struct nvlp_tls *t = nvlp_tls();
	return t && !t->in_hook ? t : NULL;
}

#endif /* NVLP_RESOLVE_H */

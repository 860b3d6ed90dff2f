/* nvlp_module.h: how a module (cupti/, capture, the NCCL plugin, pystacks) plugs into the shim's core: its hooks, their order, and what the core offers modules besides nvlp_rt.h. */
#ifndef NVLP_MODULE_H
#define NVLP_MODULE_H

#include <sys/types.h> /* pid_t */

#include "nvlp_rt.h" /* struct nvlp_config */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The core (lifecycle.c and the runtime, rt_*.c) decides when recording starts and ends; a module
 * records something (GPU activity, Python chains, ...) and is told of those moments through its
 * hooks, never called by name: the core includes no module's header, and a module registers its
 * table from a constructor of its own file (NVLP_MODULE below), as Darshan's modules register
 * with darshan-core. Every hook may be NULL.
 */
struct nvlp_module {
	const char *name;
	/*! At load, once, inside nvlp_init (the process's environment parsed, recording not on yet);
	 * not called under NVLPROF_DISABLE=1. Cheap: no thread, no file. */
	void (*init)(const struct nvlp_config *cfg);
	/*! At the end of the trace (exit, _exit, exec, signal), while recording is still on: put what
	 * the module holds (buffers, samples) into the trace. Not called when recording was already
	 * off (a failed directory, a fork child that never recorded). */
	void (*flush)(void);
	/*! At the end, after recording was switched off and before the final drain: stop the
	 * module's threads (bounded waits) so that their last records are in the trace. */
	void (*stop)(void);
	/*! In a fork child, before it may record again: forget the parent's state without calling out
	 * (no lock of the parent's threads, no CUDA). */
	void (*atfork_child)(void);
};

/*
 * The modules, in the order every hook walks them (top first). The order is part of the design:
 * - init: cupti first (CUDA_INJECTION64_PATH set before anything may bring CUDA up), then capture
 *   (NVTX_INJECTION64_PATH and the capture range), then the NCCL plugin (NCCL_PROFILER_PLUGIN).
 * - the end: cupti's flush runs first, while recording is on: its records go through the rings
 *   (a CUPTI flush hung at abort was once seen: it must not run after the drain started); then
 *   the NCCL plugin's, which writes the collectives' channel records not yet written (never
 *   waiting more than ~10 ms for a lock); then recording stops; then pystacks' stop ends the
 *   Python sampler, whose last chains are in before the final drain (rt_writer.c).
 * - fork child: cupti forgets CUDA, the NCCL plugin its parent's communicators (the modules with
 *   an atfork hook of the core's; pystacks registers its own pthread_atfork when its sampler
 *   starts).
 * Adding a module: one line here (its place in the order), a table in its file, NVLP_MODULE.
 */
#define NVLP_MODULES(X)                                                                            \
	X(CUPTI)    /* cupti/cupti.c: GPU activity, driver callbacks, link counters */             \
	X(CAPTURE)  /* preload/capture.c: NVLPROF_CAPTURE's range, NVTX marks */                   \
	X(NCCL)     /* preload/ncclchain.c: NCCL's profiler plugin (ours, a chained one) */        \
	X(PYSTACKS) /* preload/pystacks.c: Python chains of calls; pysampler.c: the Python sampler \
	             */

enum nvlp_module_id {
#define NVLP_MOD_ENUM(id) NVLP_MOD_##id,
	NVLP_MODULES(NVLP_MOD_ENUM)
#undef NVLP_MOD_ENUM
	NVLP_MOD_COUNT
};

/*! Register module m at its place id (from a constructor: NVLP_MODULE). Registered after nvlp_init
 * already ran (a constructor of ours that ran late), its init runs at once. */
void nvlp_module_register(enum nvlp_module_id id, const struct nvlp_module *m);
/* In the module's file: register table at load. Priority 101 runs before every constructor of
 * default priority, so the table is complete before lifecycle.c's constructor calls nvlp_init. */
#define NVLP_MODULE(id, table)                                                                     \
	__attribute__((constructor(101))) static void nvlp_module_ctor_##id(void)                  \
	{                                                                                          \
		nvlp_module_register(NVLP_MOD_##id, &(table));                                     \
	}

/* ---- what the core offers modules (besides nvlp_rt.h) ---------------------------------------- */

/* Pid of this process as of init or the last fork. A different answer from the kernel means we are
 * running in a vfork child (or clone(CLONE_VM)) that shares the parent's memory: touch nothing. */
extern volatile pid_t nvlp_rt_pid;
/*! Point the variable var at this library unless it is set (a tool that loads us by path: the
 * CUDA driver's injection, NVTX's). */
void nvlp_env_point_at_self(const char *var);
/*! Register the exit handler again if libraries were loaded since it was last registered:
 * exit() runs handlers last-registered-first, and libraries loaded later (CUPTI, libnvperf_host,
 * torch) register their own destructors; ending the trace needs them still alive (lifecycle.c). */
void nvlp_lc_refresh_atexit(void);
/*! The same after a step of the link sampler's own that may have loaded a library, against a
 * count of loads of its own: a library another thread's tick saw half-loaded (its destructors not
 * yet registered) is not missed. The sampler thread only. */
void nvlp_lc_refresh_atexit_after_load(void);

/* A module that decides which records are written (capture.c: NVLPROF_CAPTURE's range). Set once
 * at init, before any record; the core then asks it for each record. */
struct nvlp_record_filter {
	/*! 1 if the record is kept (inside the range, or a kind that explains the others). */
	int (*keep)(unsigned kind, const void *fields);
	/*! 1 while records pass (a call may register its thread or reserve in place). */
	int (*gate_open)(void);
};
void nvlp_set_record_filter(const struct nvlp_record_filter *f);
/* The filter in effect (NULL: every record is kept); rt_emit.c owns it. */
extern const struct nvlp_record_filter *nvlp_rec_filter __attribute__((visibility("hidden")));
/*! 1 while records pass the filter (always without one: one relaxed load). */
static inline int nvlp_record_gate_open(void)
{
	const struct nvlp_record_filter *f = __atomic_load_n(&nvlp_rec_filter, __ATOMIC_RELAXED);
	return !f || f->gate_open();
}

#ifdef __cplusplus
}
#endif
#endif /* NVLP_MODULE_H */

/* nvlp_rt.h: the shim's core as every hook and module uses it: the switch, the configuration,
 * per-thread state, recording (emit). A module's own functions are in its header (nvlp_cupti.h,
 * nvlp_stacks.h, nvlp_pystacks.h, hooks_cuda.h); how modules plug in: nvlp_module.h. */
#ifndef NVLP_RT_H
#define NVLP_RT_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "../trace/nvlp_format.h"
#include "nvlp_clock.h" /* nvlp_now(): CLOCK_MONOTONIC in ns, the clock of every record */

#ifdef __cplusplus
extern "C" {
#endif

#define NVLP_EXPORT __attribute__((visibility("default")))
#define NVLP_LIKELY(x) __builtin_expect(!!(x), 1)
#define NVLP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Global switch: 0 = every wrapper is a pure pass-through (NVLPROF_DISABLE=1, before init,
 * after the final flush, a fork child before it re-arms, unwritable directory). */
extern volatile int nvlp_active;
/* Read the switch from any thread: a relaxed atomic load compiles to the same plain load, and it
 * is what ThreadSanitizer expects for a flag that another thread flips (shutdown, fork). */
static inline int nvlp_is_active(void)
{
	return __atomic_load_n(&nvlp_active, __ATOMIC_RELAXED);
}

/* NVLPROF_KERNELS, parsed (preload/rt_config_kernels.c; what the modes do: cupti/windows.c). */
enum nvlp_kmode { NVLP_KM_ALL, NVLP_KM_OFF, NVLP_KM_WINDOW };
struct nvlp_kernels_cfg {
	int mode;       /* enum nvlp_kmode */
	long on_ms;     /* window: traced ON ms ... */
	long period_ms; /* ... of every PERIOD ms */
	int anchored;   /* window:ON/PERIOD+FIRST: the first window follows the first collective */
	long first_ms;  /* FIRST (0 when not anchored) */
	int bad;        /* the value was not understood: defaults kept, cupti/ warns at start */
};

/* Configuration from the environment, parsed once at load; bad values warned once, defaults
 * kept. */
struct nvlp_config {
	int disable;       /* NVLPROF_DISABLE=1 */
	int stacks;        /* NVLPROF_STACKS (default 1) */
	int cupti;         /* NVLPROF_CUPTI: 0, 1 (default), 2 = startup[:MS], 3 = lazy (cupti/detach.c) */
	long cupti_detach_ms; /* startup: detach CUPTI this long after it attached (default 2000) */
	int um;            /* NVLPROF_UM: enum nvlp_um_mode (default auto) */
	int verbose;       /* NVLPROF_VERBOSE=1: print what was collected at exit */
	long sample_us;    /* NVLPROF_SAMPLE_US (default 10000, 0 = no link counters) */
	int links_nvml;    /* NVLPROF_LINKS: 0 auto (PM sampling, NVML fallback), 1 nvml only */
	long nvml_us;      /* the NVML fallback's period: 100 ms, or max(10 ms, NVLPROF_SAMPLE_US)
	                    * when that is set (an NVML read costs ~0.4 ms of CPU: MEASUREMENTS.md) */
	int nccl_plugin;   /* NVLPROF_NCCL_PLUGIN (default 1): serve NCCL's profiler plugin */
	long buffer_kb;    /* NVLPROF_BUFFER_KB per thread (default 65536: a 1 MiB ring and a 64 MiB
	                    * spill reservation touched only in bursts; rt_emit.c) */
	long flush_ms;     /* NVLPROF_FLUSH_MS (default 500, max 1000) */
	long gpu_flush_ms; /* NVLPROF_GPU_FLUSH_MS: forced CUPTI flush period (default 10000; 0 =
	                    * only full buffers and exit) */
	char dir[4096];    /* NVLPROF_DIR (default ./nvlprof-traces) */
	int nvtx;          /* NVLPROF_NVTX (default 1): be NVTX's injection library, record marks */
	int capture;       /* NVLPROF_CAPTURE: 0 none, 1 cudaProfilerApi, 2 nvtx:NAME */
	char capture_name[256]; /* the NVTX range's message for capture 2 */
	long pysample_hz;  /* NVLPROF_PYSAMPLE_HZ (default 10, 0 = off): Python chains sampled */
	int driver;        /* NVLPROF_DRIVER (default 1): driver-API callbacks (cupti/callbacks.c) */
	int kch;           /* NVLPROF_KCH: NCCL's kernel-channel events (ncclprof.c), enum nvlp_kch_mode */
	char kernels[128]; /* NVLPROF_KERNELS as set ("" = NVLP_KERNELS_DEFAULT) */
	struct nvlp_kernels_cfg km; /* NVLPROF_KERNELS parsed (preload/rt_config_kernels.c) */
	int pywalk;        /* NVLPROF_PYWALK (default 1; a value starting with 0 turns it off) */
	int pywalk_log;    /* NVLPROF_PYWALK_LOG: a value starting with 1 logs the self-check */
	int pywalk_test;   /* NVLPROF_PYWALK_TEST (tests): enum nvlp_pywalk_test */
	/* NVLPROF_TEST_CGROUP_EVENTS (tests): a stand-in for memory.events ("" = none) */
	char test_cgroup_events[4096];
};
/* NVLPROF_KCH: off (0), one KCOLL record per collective (1, the default), one KCH record per
 * channel (channels; the header's capture key says kch=2) */
/* the NVML link fallback's period unless NVLPROF_SAMPLE_US is set (us) */
#define NVLP_NVML_DEFAULT_US 100000L
enum nvlp_kch_mode { NVLP_KCH_OFF = 0, NVLP_KCH_COLL = 1, NVLP_KCH_CHANNELS = 2 };
/* NVLPROF_UM: unified-memory counters once managed memory is allocated (auto), never, always, or
 * as auto with NVLPROF_CUPTI=lazy attaching CUPTI mid-run for them (attach: cupti/detach.c) */
enum nvlp_um_mode { NVLP_UM_AUTO = -1, NVLP_UM_OFF = 0, NVLP_UM_ON = 1, NVLP_UM_ATTACH = 2 };
/*! The NVLPROF_UM word of a mode ("auto", "0", "1", "attach"), as the variable is written. */
const char *nvlp_cfg_um_word(int um);
enum nvlp_pywalk_test {
	NVLP_PYWALK_TEST_NONE,
	NVLP_PYWALK_SKEW,
	NVLP_PYWALK_PIPE,
	NVLP_PYWALK_REFUSE
};
/* Read live by design, not kept here: CUDA_INJECTION64_PATH and NCCL_PROFILER_PLUGIN (the shim
 * itself sets them at init: their current value is the truth), NVLPROF_NCCL_CHAIN (written by the
 * shim at init for NCCL's plugin load and exec'd children), NCCL_NET_PLUGIN (read when NCCL loads
 * its plugins, as NCCL reads it), CUDA_HOME (where libcupti is, when CUPTI loads), the rank
 * variables and the recorded environment (when the trace opens: a launcher may set them late). */
const struct nvlp_config *nvlp_cfg(void);
/* NVLPROF_KERNELS when unset (parsed in preload/rt_config_kernels.c; recorded in the header's
 * capture key). */
#define NVLP_KERNELS_DEFAULT "off"

/* Per-thread state: one struct, reached through nvlp_tls() (the only __thread of the shim). */
struct nvlp_ring;
struct nvlp_comm;
struct nvlp_py_slot;
struct nvlp_tls {
	int in_hook;            /* recursion guard: only the outermost intercepted call records */
	int group_depth;        /* ncclGroupStart/End nesting on this thread */
	uint64_t tid;           /* gettid() */
	struct nvlp_ring *ring; /* this thread's buffer (NULL until the first record) */
	unsigned epoch;         /* runtime epoch the ring belongs to (changes in a fork child) */
	int is_writer;          /* this is nvlprof's writer thread */
	const void *nccl_comm;  /* ncclComm_t of this thread's latest collective (plugin hint) */
	/* Most threads drive one communicator on one stream (hooks_nccl.c): the last entry (its key
	 * is checked, it may have been removed) and the CUPTI id of the last stream used with it. */
	struct {
		struct nvlp_comm *c;
		void *stream;
		uint64_t cupti_stream;
	} nccl_last;
	struct nvlp_live *live; /* the call this thread is inside, for the writer (NULL until the
	                         * thread has a ring: it lives in the ring's control block) */
	void *stack_scratch; /* stacks.c's module lookup buffer (4 KiB, off the job's stack) */
	/* pystacks.c: the signature of the Python chain of this thread's last collective (0 none),
	 * the PYSTACK last written for its collectives, and the buffer chains are built in
	 * (pyapi.c). */
	uint64_t py_sig;
	uint64_t py_stack;
	void *py_scratch;
	struct nvlp_py_slot *py_slot; /* where this thread publishes its Python state (sampler) */
};
/* Defined in rt_tls.c; inline access so the hot path pays no call for it. */
extern __thread struct nvlp_tls nvlp_tls_state
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern volatile unsigned nvlp_tls_epoch __attribute__((visibility("hidden")));
/*! First use on a thread, or after a fork: (re)initialise the thread's state. */
struct nvlp_tls *nvlp_tls_renew(void);
static inline struct nvlp_tls *nvlp_tls(void)
{
	struct nvlp_tls *t = &nvlp_tls_state;
	return NVLP_LIKELY(t->epoch == nvlp_tls_epoch) ? t : nvlp_tls_renew();
}

/*
 * The call a thread is inside, published for the writer thread (INFLIGHT records: a rank killed
 * inside ncclCommInitRank, a blocking group end or a synchronising copy says where). Only the
 * owner thread writes it: plain stores (release stores compile to plain moves on x86-64), no lock,
 * no syscall. The writer reads it at any time; gen is a sequence lock, odd while the owner rewrites
 * the fields, so a read during which gen changed is discarded. rec.kind 0 = no call. It lives in
 * the thread's ring control block (never unmapped, recycled with the ring), not in TLS, which is
 * freed with the thread while the writer may still be reading. rec.t and rec.tid are the writer's.
 */
struct nvlp_live {
	uint64_t gen;
	struct nvlp_rec_inflight rec;
};
/*! First call of a thread with no ring yet: register it (opens the trace on the process's first
 * record, as nvlp_emit would). @return its slot, or NULL (not recording). */
struct nvlp_live *nvlp_live_slow(struct nvlp_tls *t);
/*! Before the real call: the slot to describe it in (NVLP_LIVE_SET each field, then
 * nvlp_live_publish), or NULL (also inside another published call). reg 0: only when the thread already has a ring (a call that
 * records nothing must not open a trace). */
static inline struct nvlp_live *nvlp_live_begin(struct nvlp_tls *t, int reg)
{
	struct nvlp_live *l = t->live;
	if (NVLP_UNLIKELY(!l) && (!reg || !(l = nvlp_live_slow(t))))
		return NULL;
	if (NVLP_UNLIKELY(__atomic_load_n(&l->rec.kind, __ATOMIC_RELAXED)))
		return NULL; /* nested in a call already published: the outer one stays */
	__atomic_store_n(&l->gen, __atomic_load_n(&l->gen, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	return l;
}
#define NVLP_LIVE_SET(l, field, v) __atomic_store_n(&(l)->rec.field, (uint64_t)(v), __ATOMIC_RELEASE)
static inline void nvlp_live_publish(struct nvlp_live *l)
{
	__atomic_store_n(&l->gen, __atomic_load_n(&l->gen, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}
/*! After the real call returned (l may be NULL). */
static inline void nvlp_live_end(struct nvlp_live *l)
{
	if (l)
		__atomic_store_n(&l->rec.kind, 0, __ATOMIC_RELEASE);
}

/*! Record one event (hot path: no lock, no syscall, no allocation after the thread's first call).
 * fields: the kind's struct (struct nvlp_rec_X). blob: for kinds with a blob.
 * @return 0, or -1 when the record was dropped (and counted). */
int nvlp_emit(unsigned kind, const void *fields, const void *blob, size_t blob_len);
/* A fatal signal's stack: stacks.c lends the core these (the core calls no module by name). */
typedef int (*nvlp_stack_sink)(void *ctx, unsigned kind, const void *fields, const void *blob,
                               size_t blob_len);
struct nvlp_fatal_stacker {
	/*! In the fatal signal's handler (once a process): keep the interrupted thread's return
	 * addresses (innermost first: the interrupted instruction from uc, the ucontext, then its
	 * callers), nothing loaded or allocated; none with NVLPROF_STACKS=0, or when the walk
	 * faults (it keeps them only at its end) */
	void (*capture)(const void *uc);
	/*! On the writer thread: the STACK record of what capture kept and the MODULE/BUILDID
	 * records of the modules it touches not written yet, through sink. @return its id (0: none) */
	uint64_t (*write)(nvlp_stack_sink sink, void *ctx);
};
/*! Register the stacker (stacks.c, from its constructor). */
void nvlp_rt_set_fatal_stacker(const struct nvlp_fatal_stacker *s);
/*! Wake the writer thread now (a write(2): never on the hot path; thread start/exit, waits). */
void nvlp_kick_writer(void);
/*! The hot path's variant of nvlp_emit for a record without blob, built in place: @return where
 * to write the kind's fields (in this thread's buffer; then nvlp_emit_commit(slot)), or NULL: build
 * them elsewhere and call nvlp_emit, which records, or drops and counts, as usual. */
struct nvlp_emit_slot {
	uint64_t *head; /* the ring's head (atomic), and what to store there to publish */
	uint64_t end;
};
void *nvlp_emit_reserve(unsigned kind, struct nvlp_emit_slot *slot);
/*! Publish the record reserved in slot. */
static inline void nvlp_emit_commit(const struct nvlp_emit_slot *slot)
{
	__atomic_store_n(slot->head, slot->end, __ATOMIC_RELEASE);
}
/*! Same for bulk producers off the application's threads (CUPTI buffer callbacks, samplers):
 * waits up to timeout_ms for room instead of dropping at once. */
int nvlp_emit_wait(unsigned kind, const void *fields, const void *blob, size_t blob_len,
                   int timeout_ms);
/*! Emit a NOTE record (code: enum nvlp_note_code) with a printf-style message. */
void nvlp_note(unsigned code, int device, uint64_t value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/*! Print "nvlprof: <message>" once per call site (msg_key: any stable pointer, e.g. a literal). */
void nvlp_warn_once(const void *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*! Print "nvlprof: <message>" (not rate-limited; for startup only). */
void nvlp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*! Intern a string: @return its id (>= 1), emitting a STRING record the first time; 0 on
 * failure. */
uint64_t nvlp_intern(const char *s);
/*! When the process issued its first NCCL collective (nvlp_now(); 0: none yet): the default
 * kernel window opens a little after it, when training is under way (cupti.c). */
extern uint64_t nvlp_first_coll_ns __attribute__((visibility("hidden")));
/*! Per-process unique increasing id for intercepted calls (correlation). */
extern uint64_t nvlp_call_ids __attribute__((visibility("hidden")));
static inline uint64_t nvlp_next_call_id(void)
{
	return __atomic_fetch_add(&nvlp_call_ids, 1, __ATOMIC_RELAXED);
}
/*! Ensure the runtime is initialised (idempotent; safe from any thread). */
void nvlp_init(void);
/*! Flush everything now and write END (reason: enum nvlp_end_reason); recording stops after. */
void nvlp_shutdown(unsigned reason);

#ifdef __cplusplus
}
#endif
#endif /* NVLP_RT_H */

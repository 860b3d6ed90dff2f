/* capture.c: marks the job makes (cudaProfilerStart/Stop, NVTX ranges through NVTX_INJECTION64_PATH, torch.profiler's steps through CUPTI's external correlation) as MARK records, and the NVLPROF_CAPTURE range they open and close. */
#include <errno.h>   /* errno, kept across our work */
#include <pthread.h> /* the interval table's mutex */
#include <stddef.h>  /* offsetof */
#include <stdio.h>   /* snprintf */
#include <stdint.h>  /* uint64_t */
#include <stdlib.h>  /* malloc */
#include <string.h>  /* strcmp */

#include <cuda_profiler_api.h>
#include <cupti_activity.h> /* cuptiActivityPush/PopExternalCorrelationId */
#include <nvtx3/nvToolsExt.h>

#include "nvlp_module.h" /* the module's table, the record filter */
#include "nvlp_rt.h"
#include "resolve.h"

/*
 * NVLPROF_CAPTURE=cudaProfilerApi | nvtx:NAME (like nsys --capture-range): records of what the
 * job does (API calls, GPU activity, link samples) are kept only inside the range; everything
 * that explains them (strings, stacks, modules, devices, clocks, notes, names, marks) always.
 * API capture keeps running outside (sequence numbers stay the same on every rank), its records
 * are only not written. A host record is judged by the gate when it is emitted; a GPU record,
 * which arrives later, by its own start time against the ranges seen so far.
 *
 * nvtx:NAME opens when a range whose message is NAME is pushed (or started) on any thread and
 * closes when the last such range ends. NVTX reaches us through NVTX_INJECTION64_PATH (set to this
 * library at load unless it is set already, e.g. by nsys): NVTX calls InitializeInjectionNvtx2,
 * we fill in its core function table.
 */
static struct {
	int mode; /* 0 none, 1 cudaProfilerApi, 2 nvtx:NAME (set once at init) */
	char name[256];
	volatile int gate; /* records pass (atomic) */
} capture = {.gate = 1};

#define MAX_RANGES 1024
/* The capture ranges seen so far (a GPU record is judged against them). */
static struct {
	struct {
		uint64_t start, stop; /* stop 0: still open */
	} at[MAX_RANGES];
	unsigned n;
	pthread_mutex_t mu;
	int nvtx_open; /* matching NVTX ranges open, under mu */
} range_log = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Set the capture mode once at init (before any record). */
static void capture_config(int mode, const char *name)
{
	capture.mode = mode;
	if (name)
		snprintf(capture.name, sizeof capture.name, "%s", name);
	__atomic_store_n(&capture.gate, mode == 0, __ATOMIC_RELEASE);
}

static void range_open(uint64_t t)
{
	pthread_mutex_lock(&range_log.mu);
	if (!__atomic_load_n(&capture.gate, __ATOMIC_RELAXED)) {
		if (range_log.n == MAX_RANGES) { /* merge the oldest two: coarser, never lost */
			range_log.at[0].stop = range_log.at[1].stop;
			memmove(&range_log.at[1], &range_log.at[2],
			        (MAX_RANGES - 2) * sizeof range_log.at[0]);
			range_log.n--;
		}
		range_log.at[range_log.n].start = t;
		range_log.at[range_log.n].stop = 0;
		range_log.n++;
		__atomic_store_n(&capture.gate, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&range_log.mu);
}

static void range_close(uint64_t t)
{
	pthread_mutex_lock(&range_log.mu);
	if (__atomic_load_n(&capture.gate, __ATOMIC_RELAXED) && range_log.n) {
		range_log.at[range_log.n - 1].stop = t;
		__atomic_store_n(&capture.gate, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&range_log.mu);
}

static int in_ranges(uint64_t t)
{
	int in = 0;
	pthread_mutex_lock(&range_log.mu);
	for (unsigned i = range_log.n; i-- > 0 && !in;)
		in = t >= range_log.at[i].start &&
		     (!range_log.at[i].stop || t <= range_log.at[i].stop);
	pthread_mutex_unlock(&range_log.mu);
	return in;
}

/* The kinds that say what the job did, and the time a GPU one happened at (0: a host kind). */
static int judged(unsigned kind, const void *f, uint64_t *t)
{
	*t = 0;
	switch (kind) {
	case NVLP_K_NCCL:
	case NVLP_K_COPY:
	case NVLP_K_MANAGED:
	case NVLP_K_PEER:
	case NVLP_K_NCCLPROF:
	case NVLP_K_PYREF:
	case NVLP_K_DROPS:
		return 1;
	case NVLP_K_KERNEL:
		*t = ((const struct nvlp_rec_kernel *)f)->start;
		return 1;
	case NVLP_K_GPUCOPY:
		*t = ((const struct nvlp_rec_gpucopy *)f)->start;
		return 1;
	case NVLP_K_UM:
		*t = ((const struct nvlp_rec_um *)f)->start;
		return 1;
	case NVLP_K_LINKSAMPLE:
		*t = ((const struct nvlp_rec_linksample *)f)->start;
		return 1;
	case NVLP_K_KCH:
		*t = ((const struct nvlp_rec_kch *)f)->host;
		return 1;
	case NVLP_K_KCOLL:
		*t = ((const struct nvlp_rec_kcoll *)f)->host;
		return 1;
	default:
		return 0;
	}
}

/* With a capture range: 1 if the record is kept (inside the range, or a kind that explains the
 * others), 0 if it is not written. */
static int capture_keep(unsigned kind, const void *fields)
{
	uint64_t t;
	if (!judged(kind, fields, &t))
		return 1;
	if (!t)
		return __atomic_load_n(&capture.gate, __ATOMIC_ACQUIRE);
	return in_ranges(t);
}

/* 1 while the capture range is open (always without capture). */
static int capture_gate_open(void)
{
	return __atomic_load_n(&capture.gate, __ATOMIC_ACQUIRE);
}

static void mark(unsigned kind, const char *name)
{
	struct nvlp_tls *tls = nvlp_recording_tls();
	if (!tls)
		return;
	tls->in_hook = 1;
	struct nvlp_rec_mark r = {
	    .t = nvlp_now(), .kind = kind, .name = name ? nvlp_intern(name) : 0, .tid = tls->tid};
	nvlp_emit(NVLP_K_MARK, &r, NULL, 0);
	tls->in_hook = 0;
}

/* ---- cudaProfilerStart / Stop ------------------------------------------------------------------ */

typedef cudaError_t (*profiler_fn)(void);
static struct nvlp_sym prof_syms[2] = {{"cudaProfilerStart", NULL, "libcudart.so.13", NULL},
                                       {"cudaProfilerStop", NULL, "libcudart.so.13", NULL}};

NVLP_EXPORT cudaError_t cudaProfilerStart(void)
{
	profiler_fn real = (profiler_fn)nvlp_real(&prof_syms[0]);
	if (NVLP_UNLIKELY(!real))
		return cudaErrorSharedObjectSymbolNotFound;
	cudaError_t rc = real();
	int err = errno;
	if (capture.mode == 1)
		range_open(nvlp_now());
	mark(NVLP_MARK_PROFILER_START, NULL);
	errno = err;
	return rc;
}

NVLP_EXPORT cudaError_t cudaProfilerStop(void)
{
	profiler_fn real = (profiler_fn)nvlp_real(&prof_syms[1]);
	if (NVLP_UNLIKELY(!real))
		return cudaErrorSharedObjectSymbolNotFound;
	int err = errno;
	mark(NVLP_MARK_PROFILER_STOP, NULL);
	if (capture.mode == 1)
		range_close(nvlp_now());
	errno = err;
	return real();
}

/* ---- torch.profiler's steps, through CUPTI's external correlation --------------------------- */

/*
 * While torch.profiler traces CUDA, Kineto pushes a CUPTI external correlation id as each op it
 * records begins and pops it as the op ends: kind CUSTOM0 for ops, CUSTOM1 for user-scope ranges
 * (record_function, and ProfilerStep#N, which prof.step() opens and the next step() closes). So
 * ProfilerStep#N is the outermost CUSTOM1 range of the thread that calls prof.step(). Measured on
 * one H200 (torch 2.11, tests/gpu/results/run9.txt): 10 steps with schedule(wait=1, warmup=1,
 * active=4) and one record_function per step gave 16 CUSTOM1 pushes, 4 outermost (one per active
 * step), and 376 CUSTOM0 ones. No name passes through CUPTI: each outermost push becomes a
 * MARK(USER_RANGE) record, which the analyzer takes as a step mark. Per op: one thread-local
 * counter and the call through; the ids and return codes are the job's.
 */
static __thread int xc_depth; /* open CUSTOM1 ranges on this thread */
typedef CUptiResult (*xc_push_fn)(CUpti_ExternalCorrelationKind, uint64_t);
typedef CUptiResult (*xc_pop_fn)(CUpti_ExternalCorrelationKind, uint64_t *);
static struct nvlp_sym xc_syms[2] = {{"cuptiActivityPushExternalCorrelationId", NULL, NULL, NULL},
                                     {"cuptiActivityPopExternalCorrelationId", NULL, NULL, NULL}};

NVLP_EXPORT CUptiResult CUPTIAPI
cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	xc_push_fn real = (xc_push_fn)nvlp_real(&xc_syms[0]);
	if (NVLP_UNLIKELY(!real))
		return CUPTI_ERROR_NOT_INITIALIZED; /* no libcupti loaded: nothing to push into */
	CUptiResult rc = real(kind, id);
	if (kind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 && rc == CUPTI_SUCCESS &&
	    xc_depth++ == 0 && nvlp_cfg()->nvtx) {
		int err = errno;
		mark(NVLP_MARK_USER_RANGE, NULL);
		errno = err;
	}
	return rc;
}

NVLP_EXPORT CUptiResult CUPTIAPI
cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last_id)
{
	xc_pop_fn real = (xc_pop_fn)nvlp_real(&xc_syms[1]);
	if (NVLP_UNLIKELY(!real))
		return CUPTI_ERROR_NOT_INITIALIZED;
	CUptiResult rc = real(kind, last_id);
	if (kind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 && rc == CUPTI_SUCCESS && xc_depth > 0)
		xc_depth--;
	return rc;
}

/* ---- NVTX ---------------------------------------------------------------------------------------- */

/* Per thread: which of the open pushed ranges (up to 64 deep) is a capture range. */
static __thread uint64_t push_bits;
static __thread int push_depth;
/* Ids we hand out for nvtxRangeStart*, and those of open capture ranges (few at once). */
#define OPEN_STARTS 64
static struct {
	uint64_t next_id;
	uint64_t open[OPEN_STARTS];
} range_starts = {.next_id = 1};

static int is_capture(const char *msg)
{
	return capture.mode == 2 && msg && !strcmp(msg, capture.name);
}

static void capture_begin(void)
{
	pthread_mutex_lock(&range_log.mu);
	int first = range_log.nvtx_open++ == 0;
	pthread_mutex_unlock(&range_log.mu);
	if (first)
		range_open(nvlp_now());
}

static void capture_end(void)
{
	pthread_mutex_lock(&range_log.mu);
	int last = range_log.nvtx_open > 0 && --range_log.nvtx_open == 0;
	pthread_mutex_unlock(&range_log.mu);
	if (last)
		range_close(nvlp_now());
}

/* The message of event attributes as text (registered strings are our own copies). */
static const char *attr_msg(const nvtxEventAttributes_t *a)
{
	if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof a->message)
		return NULL;
	if (a->messageType == NVTX_MESSAGE_TYPE_ASCII ||
	    a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
		return a->message.ascii;
	return NULL; /* wide strings are not recorded */
}

static int push(const char *msg)
{
	int d = push_depth++;
	if (is_capture(msg)) {
		if (d < 64)
			push_bits |= 1ull << d;
		capture_begin();
	} else if (d < 64) {
		push_bits &= ~(1ull << d);
	}
	mark(NVLP_MARK_RANGE_PUSH, msg);
	return d;
}

static int pop(void)
{
	if (push_depth <= 0)
		return -2; /* as NVTX: no range open */
	int d = --push_depth;
	mark(NVLP_MARK_RANGE_POP, NULL);
	if (d < 64 && (push_bits >> d & 1)) {
		push_bits &= ~(1ull << d);
		capture_end();
	}
	return d;
}

static nvtxRangeId_t start(const char *msg)
{
	uint64_t id = __atomic_fetch_add(&range_starts.next_id, 1, __ATOMIC_RELAXED);
	if (is_capture(msg)) {
		for (int i = 0; i < OPEN_STARTS; i++) {
			uint64_t z = 0;
			if (__atomic_compare_exchange_n(&range_starts.open[i], &z, id, 0,
			                                __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				break;
		}
		capture_begin();
	}
	mark(NVLP_MARK_RANGE_START, msg);
	return id;
}

static void end(nvtxRangeId_t id)
{
	mark(NVLP_MARK_RANGE_END, NULL);
	for (int i = 0; i < OPEN_STARTS; i++) {
		uint64_t v = id;
		if (id && __atomic_compare_exchange_n(&range_starts.open[i], &v, 0, 0,
		                                      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			capture_end();
			break;
		}
	}
}

static void NVTX_API x_markA(const char *m) { mark(NVLP_MARK_INSTANT, m); }
static void NVTX_API x_markEx(const nvtxEventAttributes_t *a) { mark(NVLP_MARK_INSTANT, attr_msg(a)); }
static int NVTX_API x_pushA(const char *m) { return push(m); }
static int NVTX_API x_pushEx(const nvtxEventAttributes_t *a) { return push(attr_msg(a)); }
static int NVTX_API x_pop(void) { return pop(); }
static nvtxRangeId_t NVTX_API x_startA(const char *m) { return start(m); }
static nvtxRangeId_t NVTX_API x_startEx(const nvtxEventAttributes_t *a) { return start(attr_msg(a)); }
static void NVTX_API x_end(nvtxRangeId_t id) { end(id); }
static void NVTX_API x_dmarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	(void)d;
	mark(NVLP_MARK_INSTANT, attr_msg(a));
}
static int NVTX_API x_dpushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	(void)d;
	return push(attr_msg(a));
}
static int NVTX_API x_dpop(nvtxDomainHandle_t d)
{
	(void)d;
	return pop();
}
static nvtxRangeId_t NVTX_API x_dstartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	(void)d;
	return start(attr_msg(a));
}
static void NVTX_API x_dend(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	(void)d;
	end(id);
}
/* A registered string's handle is our own copy of it (kept for the process's life, as NVTX's). */
static nvtxStringHandle_t NVTX_API x_dregA(nvtxDomainHandle_t d, const char *s)
{
	(void)d;
	return (nvtxStringHandle_t)(s ? strdup(s) : NULL);
}
/* Domains: a non-NULL handle of our own (NVTX's callers only pass it back). */
static nvtxDomainHandle_t NVTX_API x_dcreateA(const char *name)
{
	return (nvtxDomainHandle_t)(name ? strdup(name) : strdup(""));
}

typedef const void *(NVTX_API *get_export_table_t)(uint32_t id);

static void set_slot(NvtxFunctionTable t, unsigned size, unsigned id, NvtxFunctionPointer f)
{
	if (t && id < size && t[id])
		*t[id] = f;
}

NVLP_EXPORT int InitializeInjectionNvtx2(get_export_table_t get)
{
	if (!get || nvlp_cfg()->disable || !nvlp_cfg()->nvtx)
		return 0;
	const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
	if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
		return 0;
	NvtxFunctionTable t = NULL;
	unsigned n = 0;
	if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) && t) {
		set_slot(t, n, NVTX_CBID_CORE_MarkEx, (NvtxFunctionPointer)x_markEx);
		set_slot(t, n, NVTX_CBID_CORE_MarkA, (NvtxFunctionPointer)x_markA);
		set_slot(t, n, NVTX_CBID_CORE_RangeStartEx, (NvtxFunctionPointer)x_startEx);
		set_slot(t, n, NVTX_CBID_CORE_RangeStartA, (NvtxFunctionPointer)x_startA);
		set_slot(t, n, NVTX_CBID_CORE_RangeEnd, (NvtxFunctionPointer)x_end);
		set_slot(t, n, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)x_pushEx);
		set_slot(t, n, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)x_pushA);
		set_slot(t, n, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)x_pop);
	}
	t = NULL, n = 0;
	if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) && t) {
		set_slot(t, n, NVTX_CBID_CORE2_DomainMarkEx, (NvtxFunctionPointer)x_dmarkEx);
		set_slot(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, (NvtxFunctionPointer)x_dstartEx);
		set_slot(t, n, NVTX_CBID_CORE2_DomainRangeEnd, (NvtxFunctionPointer)x_dend);
		set_slot(t, n, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)x_dpushEx);
		set_slot(t, n, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)x_dpop);
		set_slot(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, (NvtxFunctionPointer)x_dregA);
		set_slot(t, n, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)x_dcreateA);
	}
	return 1;
}

/* ---- the module: at init, NVTX's tool path (us, for the job's marks) and the capture range ---- */

static const struct nvlp_record_filter capture_filter = {
    .keep = capture_keep,
    .gate_open = capture_gate_open,
};

static void capture_init(const struct nvlp_config *cfg)
{
	/* NVTX loads its tool from this path: us, for the job's marks */
	if (cfg->nvtx)
		nvlp_env_point_at_self("NVTX_INJECTION64_PATH");
	capture_config(cfg->capture, cfg->capture_name);
	if (cfg->capture)
		nvlp_set_record_filter(&capture_filter);
}

static const struct nvlp_module capture_module = {.name = "capture", .init = capture_init};
NVLP_MODULE(CAPTURE, capture_module)

/* cupti_int.h: cupti/ internals: the one CUPTI/driver function table, conversion, clocks. */
#ifndef NVLP_CUPTI_INT_H
#define NVLP_CUPTI_INT_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include <cupti.h>                 /* activity API, CUpti_Activity* records */
#include <cupti_pmsampling.h>      /* PM sampling params (C-compatible) */
#include <cupti_target.h>          /* cuptiDeviceGetChipName */
#include <cupti_profiler_target.h> /* cuptiProfilerInitialize */

#include "nvlp_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every profiler-host function takes one params struct; cupti_profiler_host.h is C++ only, so
 * those entries are stored with this generic type and cast in pm_host.cc. */
typedef CUptiResult (*nvlp_cupti_pfn)(void *params);

/*
 * The one list of CUPTI functions we call. T(name): typed from the C headers; G(name): a
 * profiler-host function (generic type). R: required for activity tracing; O: optional.
 * Adding a function is one line here; the resolver fills the table from the handle we found.
 */
#define NVLP_CUPTI_FUNCS(T, G)                                                                     \
	T(cuptiGetVersion, R)                                                                      \
	T(cuptiGetResultString, R)                                                                 \
	T(cuptiActivityRegisterCallbacks, R)                                                       \
	T(cuptiActivityEnable, R)                                                                  \
	T(cuptiActivityDisable, R)                                                                 \
	T(cuptiActivityGetNextRecord, R)                                                           \
	T(cuptiActivityFlushAll, R)                                                                \
	T(cuptiGetTimestamp, R)                                                                    \
	T(cuptiActivityEnableContext, O)                                                           \
	T(cuptiActivityDisableContext, O)                                                          \
	T(cuptiActivityGetNumDroppedRecords, O)                                                    \
	T(cuptiActivityRegisterTimestampCallback, O)                                               \
	T(cuptiActivityConfigureUnifiedMemoryCounter, O)                                           \
	T(cuptiGetStreamIdEx, O)                                                                   \
	T(cuptiGetDeviceId, O)                                                                     \
	T(cuptiFinalize, O)                                                                        \
	T(cuptiSubscribe, O)                                                                       \
	T(cuptiUnsubscribe, O)                                                                     \
	T(cuptiSubscribe_v2, O)                                                                    \
	T(cuptiEnableCallback, O)                                                                  \
	T(cuptiEnableDomain, O)                                                                    \
	T(cuptiEnableAllDomains, O)                                                                \
	T(cuptiGetCallbackState, O)                                                                \
	T(cuptiDeviceGetChipName, O)                                                               \
	T(cuptiProfilerInitialize, O)                                                              \
	T(cuptiPmSamplingSetConfig, O)                                                             \
	T(cuptiPmSamplingEnable, O)                                                                \
	T(cuptiPmSamplingDisable, O)                                                               \
	T(cuptiPmSamplingStart, O)                                                                 \
	T(cuptiPmSamplingStop, O)                                                                  \
	T(cuptiPmSamplingDecodeData, O)                                                            \
	T(cuptiPmSamplingGetCounterAvailability, O)                                                \
	T(cuptiPmSamplingGetCounterDataSize, O)                                                    \
	T(cuptiPmSamplingCounterDataImageInitialize, O)                                            \
	T(cuptiPmSamplingGetCounterDataInfo, O)                                                    \
	T(cuptiPmSamplingCounterDataGetSampleInfo, O)                                              \
	G(cuptiProfilerHostInitialize, O)                                                          \
	G(cuptiProfilerHostDeinitialize, O)                                                        \
	G(cuptiProfilerHostConfigAddMetrics, O)                                                    \
	G(cuptiProfilerHostGetConfigImageSize, O)                                                  \
	G(cuptiProfilerHostGetConfigImage, O)                                                      \
	G(cuptiProfilerHostGetNumOfPasses, O)                                                      \
	G(cuptiProfilerHostEvaluateToGpuValues, O)

struct nvlp_cupti_table {
#define NVLP_T_MEMBER(name, req) __typeof__(&name) name;
#define NVLP_G_MEMBER(name, req) nvlp_cupti_pfn name;
	NVLP_CUPTI_FUNCS(NVLP_T_MEMBER, NVLP_G_MEMBER)
#undef NVLP_T_MEMBER
#undef NVLP_G_MEMBER
};
/* The real CUPTI (never our exported wrappers); members are NULL until nvlp_cupti_load(). */
extern struct nvlp_cupti_table nvlp_cu;

/* Driver functions, resolved from the already-loaded libcuda.so.1 (never linked). Plain C
 * prototypes so the table does not depend on which cuda.h macros rename them. */
typedef int nvlp_cures; /* CUresult */
struct nvlp_driver_table {
	nvlp_cures (*cuInit)(unsigned);
	nvlp_cures (*cuDriverGetVersion)(int *);
	nvlp_cures (*cuCtxGetCurrent)(CUcontext *);
	nvlp_cures (*cuStreamGetCtx)(CUstream, CUcontext *);
	nvlp_cures (*cuCtxGetDevice)(int *);
	nvlp_cures (*cuDeviceGetCount)(int *);
	nvlp_cures (*cuDeviceGetAttribute)(int *, int, int);
	nvlp_cures (*cuDeviceGetUuid)(CUuuid *, int);
	nvlp_cures (*cuDeviceGetPCIBusId)(char *, int, int);
	nvlp_cures (*cuDevicePrimaryCtxGetState)(int, unsigned *, int *);         /* optional */
	nvlp_cures (*cuPointerGetAttributes)(unsigned, int *, void **, uint64_t); /* optional */
	nvlp_cures (*cuDeviceGetName)(char *, int, int);                          /* optional */
	nvlp_cures (*cuDeviceTotalMem_v2)(size_t *, int);                         /* optional */
};
extern struct nvlp_driver_table nvlp_drv;

/*! Find and open the process's libcupti and fill nvlp_cu (idempotent, thread-safe).
 * @return 0 when every required function resolved; -1 otherwise, with a reason in why. */
int nvlp_cupti_load(char *why, size_t whylen);
/*! A handle of a libcupti.so.13 or .12 already in the process (nothing loaded), or NULL. */
void *nvlp_cupti_loaded(void);
/*! Which record layouts a CUPTI API version has: 13 (130001...), 12 (CUDA 12.x: 18..29), or 0
 * (a version nvlprof does not read). */
static inline int nvlp_cupti_layout(uint32_t ver)
{
	if (ver / 10000 == 13)
		return 13;
	return ver >= 18 && ver < 100 ? 12 : 0;
}
/*! Path of the libcupti that was loaded ("" if none). */
const char *nvlp_cupti_path(void);
/*! Resolve nvlp_drv from a loaded libcuda.so.1. @return 0, or -1 with a reason. */
int nvlp_driver_load(char *why, size_t whylen);
/*! CUPTI result as text (works before the table is loaded). */
const char *nvlp_cupti_err(CUptiResult r);
/*! 1 once nvlp_driver_load succeeded (one load, no lock). */
int nvlp_driver_loaded(void);
/*! cuDeviceGetAttribute(attr) of device dev; 0 when the driver does not answer. */
uint64_t nvlp_drv_attr(int dev, int attr);
/*! A DEVICE record's PCI domain, bus and device of r->device, from the driver (CUPTI's DEVICE
 * activity record has none; the topology without CUPTI needs them as well). */
void nvlp_drv_device_pci(struct nvlp_rec_device *r);
/*! 8 bytes big-endian (a UUID's halves, as DEVICE and NVLINK records hold them). */
static inline uint64_t nvlp_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}
void nvlp_driver_atfork_child(void);

/* ---- clock conversion: mono = ts + offset (identity with our timestamp callback) ---- */
struct nvlp_cupti_clock {
	int identity;     /* CUPTI already returns CLOCK_MONOTONIC ns (our timestamp callback) */
	int64_t offset;   /* mono - cupti, from the latest CLOCK pairing */
	int64_t real_off; /* mono - CLOCK_REALTIME, from the latest pairing */
	/* Another client's timestamp callback (torch.profiler's Kineto: TSC ticks, or the system
	 * clock) stamps activity from switch_ts on: mono = f_mono + (ts - f_ts) * f_scale, fitted
	 * from pairs of our clock and that callback taken at its registration and at every flush.
	 * Stamps below switch_ts (or nearer the switch time in our own clock) are from before it. */
	int foreign;
	int foreign_epoch; /* the callback's clock is itself epoch-sized (the system clock) */
	uint64_t f_ts, f_mono, switch_ts, switch_mono;
	double f_scale;
};
/* Timestamps past this are CLOCK_REALTIME ns (since 2001): torch.profiler's timestamp callback
 * (Kineto uses the system clock) or the GPU's PTIMER. Monotonic ns never get there (31 years). */
#define NVLP_EPOCH_SIZED 1000000000000000000ull
/* ts came from the foreign callback (not from before it was installed). */
static inline int nvlp_cupti_ts_foreign(const struct nvlp_cupti_clock *c, uint64_t ts)
{
	if (ts < c->switch_ts)
		return 0;
	if (c->switch_ts >= c->switch_mono)
		return 1;
	return ts - c->switch_ts < c->switch_mono - ts; /* both clocks overlap here: the nearer */
}
static inline uint64_t nvlp_cupti_ts(const struct nvlp_cupti_clock *c, uint64_t ts)
{
	if (ts == 0)
		return ts;
	if (c->foreign && !(ts > NVLP_EPOCH_SIZED && !c->foreign_epoch) &&
	    nvlp_cupti_ts_foreign(c, ts))
		return (uint64_t)((int64_t)c->f_mono +
		                  (int64_t)((double)(int64_t)(ts - c->f_ts) * c->f_scale));
	if (ts > NVLP_EPOCH_SIZED && c->real_off)
		return (uint64_t)((int64_t)ts + c->real_off);
	if (c->identity)
		return ts;
	return (uint64_t)((int64_t)ts + c->offset);
}

/* ---- clock.c: the one owner of the conversion offsets ---- */
/*! Register our CLOCK_MONOTONIC timestamp callback with CUPTI. @return 1 if CUPTI took it. */
int nvlp_cupti_clock_register(void);
/*! 1 if CUPTI stamps activity with our callback's clock. */
int nvlp_cupti_clock_identity(void);
/*! Current conversion. */
void nvlp_cupti_clock_get(struct nvlp_cupti_clock *c);
/*! Emit CLOCK pairs (sources 1 and 2) and refresh the offsets. */
void nvlp_cupti_clock_pair(void);
/*! CUPTI took another client's timestamp callback f (share.c); pre_mono/pre_ts: our clock and f's
 * read just before: fit f's clock to ours from there on. f NULL: CUPTI's own clock again. */
void nvlp_cupti_clock_foreign(CUpti_TimestampCallbackFunc f, uint64_t pre_mono, uint64_t pre_ts);
/*! Our own timestamp callback (a client handing it back is not foreign). */
CUpti_TimestampCallbackFunc nvlp_cupti_clock_ours(void);
/*! Current clock conversion for PM sample timestamps (GPU time, not CUPTI's callback clock). */
uint64_t nvlp_cupti_gpu_ts_to_mono(uint64_t gpu_ts);

/* Converted GPU-side record (one of the nvlp_rec_* structs). */
union nvlp_cupti_rec {
	struct nvlp_rec_kernel kernel;
	struct nvlp_rec_gpucopy gpucopy;
	struct nvlp_rec_um um;
	struct nvlp_rec_nvlink nvlink;
	struct nvlp_rec_device device;
};

/* Map GPU UUIDs (from DEVICE records) to CUPTI device ids, for NVLINK records. */
#define NVLP_CUPTI_MAX_DEV 64
struct nvlp_cupti_devmap {
	int n;
	struct {
		uint8_t uuid[16];
		int id;
	} dev[NVLP_CUPTI_MAX_DEV];
};

/*! Convert one CUPTI activity record. clk: time conversion; map: UUID -> device id (may be NULL;
 * DEVICE records are added to it). text: set to the kernel name (KERNEL: caller interns it into
 * the name field) or the device name (DEVICE: the blob); NULL otherwise.
 * @return the nvlp kind (NVLP_K_KERNEL...), or 0 if this CUPTI kind is not converted. */
unsigned nvlp_cupti_convert(const CUpti_Activity *a, const struct nvlp_cupti_clock *clk,
                            struct nvlp_cupti_devmap *map, union nvlp_cupti_rec *out,
                            const char **text);
/*! For a kernel or copy that a CUDA graph launch ran (CUPTI graphId != 0): its GPUGRAPH record,
 * from the activity a and its converted record rec of kind kind. @return 1, or 0 (not from a
 * graph) */
int nvlp_cupti_graph_node(const CUpti_Activity *a, const union nvlp_cupti_rec *rec, unsigned kind,
                           struct nvlp_rec_gpugraph *out);
/*! 1 if the CUPTI activity kind is one we collect (the others are only relayed to Kineto). */
int nvlp_cupti_kind_is_ours(int kind);

/* ---- activity.c: the one owner of the activity buffers ---- */
enum nvlp_cupti_state {
	NVLP_CS_OFF = 0,      /* not started */
	NVLP_CS_STARTING = 1, /* a thread is in start */
	NVLP_CS_ACTIVE = 2,   /* our callbacks are registered, kinds enabled */
	NVLP_CS_ASIDE = 3,    /* disabled, unavailable, stepped aside, or stopped */
};
int nvlp_cupti_state(void);
void nvlp_act_set_state(int state);
/*! 1 if we collect this activity kind (enabled it, even if a window has it off now). */
int nvlp_cupti_we_enabled(int kind);
/*! Enable a kind for ourselves; appends name to list on success, NOTE on failure.
 * @return 0 or the CUptiResult. */
int nvlp_act_enable(CUpti_ActivityKind kind, const char *name, char *list, size_t listlen);
/*! Record that we collect kind (enabled through another call, e.g. UM counters). */
void nvlp_act_mark_enabled(CUpti_ActivityKind kind);
/* Our buffer callbacks (they forward to Kineto's through the share hooks). */
void CUPTIAPI nvlp_cupti_buf_request(uint8_t **buf, size_t *size, size_t *max_records);
void CUPTIAPI nvlp_cupti_buf_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buf, size_t size,
                                      size_t valid);
/*! Convert the completed buffers the callback queued (after a flush returns). */
void nvlp_cupti_drain(void);
/*! cuptiActivityFlushAll(flag), then convert what it completed (timed for NVLPROF_VERBOSE). */
void nvlp_act_flush(uint32_t flag);
/*! Around a CUPTI call made on an application thread: enter returns 1 (call, then leave) while
 * collecting, else 0 (do not call CUPTI). */
int nvlp_act_enter(void);
void nvlp_act_leave(void);
/*! Stop collecting (ASIDE) and wait up to max_ns for the threads inside enter/leave to leave.
 * @return 0, or -1 (state ACTIVE again) if one was still inside. */
int nvlp_act_quiesce(uint64_t max_ns);
/*! Disable every activity kind we enabled (none is collected any more). */
void nvlp_act_disable_ours(void);
/*! 1 while another client (Kineto) has activity callbacks registered with us. */
int nvlp_act_client(void);
void nvlp_act_stats(uint64_t *records, uint64_t *dropped, uint64_t *lost);
void nvlp_act_report_verbose(void);
void nvlp_act_atfork_child(void);
/* What the Kineto side (share.c, above this layer) supplies, registered at start. */
struct nvlp_act_share {
	/*! 1 while another client (Kineto) has registered buffer callbacks with us. */
	int (*client)(void);
	/*! Kineto's request callback if it should supply this buffer, else NULL. */
	CUpti_BuffersCallbackRequestFunc (*request_cb)(void);
	/*! Hand a completed buffer (already processed by us) to Kineto, filtered to its kinds.
	 * @return 1 if Kineto took ownership of the buffer, 0 if the caller still owns it. */
	int (*complete)(CUcontext ctx, uint32_t stream_id, uint8_t *buf, size_t size, size_t valid,
	                int ours);
};
void nvlp_act_set_share(const struct nvlp_act_share *share);

/* ---- share.c: Kineto coexistence (calls activity.c, driver.c) ---- */
/*! Called once from start, after our callbacks are registered: registers the share hooks with
 * activity.c and adopts a client that registered before us. */
void nvlp_share_on_start(void);
/*! Reset in a fork child. */
void nvlp_share_atfork_child(void);
/*! 1 if Kineto has this activity kind enabled (a kernel window must leave it on). */
int nvlp_share_wants(int kind);
/*! Compact a buffer in place to the records whose kind passes keep(); @return new valid size. */
size_t nvlp_share_filter(uint8_t *buf, size_t valid, int (*keep)(int kind, void *arg), void *arg);

/*! The definition of a cupti* function the caller would have bound to without us (a tool's
 * private libcupti), or NULL: the process's (nvlp_cu). self: our exported wrapper. */
void *nvlp_share_caller_real(const char *name, void *caller, void *self);

/* ---- subscribe.c: the one CUPTI callback subscription, shared with one client (Kineto) ---- */
/*! Called once from start: take the process's one subscription (or share the one a client made
 * through us). @return 0, or the CUptiResult that refused it. */
typedef void (*nvlp_sub_drv_fn)(CUpti_CallbackId cbid, const CUpti_CallbackData *cb);
int nvlp_sub_start(nvlp_sub_drv_fn drv);
/*! Enable or disable one callback for ourselves (the client's own state is kept). */
int nvlp_sub_enable(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, int on);
/*! Call hook (with the call's name, a static string of CUPTI's) at the exit of every runtime
 * and driver API call (both domains enabled on our subscription, taken if not held yet) until
 * cancelled or finalized. @return 0 or a CUptiResult. */
int nvlp_sub_exit_hook(void (*hook)(const char *fn));
/*! The hook removed, the API domains back to what ours and the client's callbacks need. */
void nvlp_sub_exit_hook_cancel(void);
/*! From the hook: cuptiFinalize (no subscription call runs beside it), then forget the
 * subscription CUPTI dropped. @return the CUptiResult. */
int nvlp_sub_finalize(void);
/*! NVLPROF_DETACH_TEST=nofinalize (DEVELOPMENT.md): the investigation's control, a detach that
 * does everything but cuptiFinalize (nvlp_sub_finalize skips the call). @return 1 when set */
int nvlp_sub_nofinalize(void);
/*! 1 while a client (Kineto) holds a subscription through us. */
int nvlp_sub_client(void);
void nvlp_sub_atfork_child(void);

/* ---- callbacks.c: driver-API capture (managed memory, peer access, copies), any runtime ---- */
/*! Called once from start, after activity is on: enables the driver callbacks we record.
 * managed_seen: cupti.c's, told of each managed allocation (UM counters). */
void nvlp_drv_start(void (*managed_seen)(void));
/*! A driver-API callback for a cbid we enabled (from subscribe.c's dispatcher). */
void nvlp_drv_callback(CUpti_CallbackId cbid, const CUpti_CallbackData *cb);
void nvlp_drv_atfork_child(void);

/* ---- streams.c: pure lookups for the hot path ---- */
#define NVLP_LINK_MAX_GPUS 64
/*! CUPTI's id of a CUDA stream (0 if unknown or CUPTI is not collecting). No side effects beyond
 * its own cache. */
uint64_t nvlp_streams_lookup(void *stream);
/*! Devices of the streams looked up so far (bit per device). */
void nvlp_streams_devices(uint64_t out[NVLP_LINK_MAX_GPUS / 64]);
void nvlp_streams_atfork_child(void);

/* ---- detach.c: NVLPROF_CUPTI=startup (calls windows.c, subscribe.c, activity.c, clock.c) ---- */
/*! From start, CUPTI attached at t_attach: a detach is due cupti_detach_ms later (startup only). */
void nvlp_detach_arm(uint64_t t_attach);
/*! From the flush thread at each wake; um: UM counters on or pending.
 * @return 0 go on as usual, 1 leave CUPTI alone (a detach is under way), 2 detached (note
 * written: the thread ends). */
int nvlp_detach_tick(uint64_t now, int um);
/*! At stop, the flush thread joined: cancels a pending detach. @return 1 if CUPTI was detached. */
int nvlp_detach_stop(void);
/*! 1 once CUPTI was detached. */
int nvlp_detach_done(void);
/*! Managed memory appeared after a detach: 1 (once; the caller attaches CUPTI again), else 0. */
int nvlp_detach_again(void);
/*! The NOTE of that attach: ok, or CUPTI refused; after_s since CUPTI first attached. */
void nvlp_detach_again_note(int ok, double after_s);
void nvlp_detach_atfork_child(void);
/*! NVLPROF_CUPTI=lazy at start: what needs CUPTI attached from the start, or NULL. */
const char *nvlp_detach_lazy_blocker(void);
/*! NVLPROF_CUPTI=lazy: CUPTI left out at start; from here on as after a detach. */
void nvlp_detach_lazy(uint64_t t_start);
/*! 1 once nvlp_detach_lazy ran. */
int nvlp_detach_is_lazy(void);
/*! NVLPROF_CUPTI=lazy, managed memory allocated: the NOTE that its migrations go unmeasured (once);
 * asked: NVLPROF_UM=attach asked for the attach, which did not happen (else none was asked). */
void nvlp_detach_lazy_um(int asked);

/* ---- cupti.c ---- */
/*! An intercepted call reached the shim: start late if injection will not (rate-limited; does
 * nothing once started). */
void nvlp_cupti_note_call(void);

/* ---- linksample.c: link traffic counters (PM sampling, NVML fallback) ---- */
/*! Note that this process uses CUDA device dev (sampler picks it up). */
void nvlp_link_device_seen(int dev);
/*! Start the sampler thread. @return 0 or -1. */
int nvlp_link_start(void);
/*! At exit: ask the thread to stop and wait for it, at most ~1.5 s (it may be inside PM setup). */
void nvlp_link_stop_thread(void);
/*! At exit, after nvlp_link_stop_thread: Stop and decode the GPUs whose PM setup completed, read
 * NVML once more. Tears nothing down (the process is ending). */
void nvlp_link_stop(void);
void nvlp_link_atfork_child(void);

/* ---- topo.c: the NVLink topology without CUPTI (driver API and NVML) ---- */
/*! One DEVICE record per CUDA device (driver attributes, as CUPTI's DEVICE records give them),
 * then NVLINK records from NVML's per-link state, grouped as CUPTI groups them: one per pair of
 * visible GPUs joined by direct links, one per pair of GPUs that both reach an NVSwitch
 * (NVLP_NVLINK_F_NVSWITCH). Call once, after cuInit (the driver loaded, n = cuDeviceGetCount's
 * devices), on a thread of ours (it registers an emitting thread, dlopens NVML, makes up to 10
 * NVML calls per link of each GPU).
 * @return the NVLINK records emitted (0: none, e.g. one GPU), why then saying what the links'
 * state queries answered ("NVML link state: 2 active, 16 inactive, 0 unanswered", with the first
 * unanswered link's errors when none was active); -1 with a one-line reason in why when NVML (or
 * its NVLink functions) is unavailable (the DEVICE records are emitted first). */
int nvlp_topo_nvml(int n, char *why, size_t len);
/*! NVML's nvmlNvlinkVersion_t (1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0,
 * 8 = 6.0) as the major number that CUPTI's NVLINK nvlinkVersion carries; 0 when unknown. */
static inline unsigned nvlp_nvml_nvlink_major(unsigned v)
{
	static const unsigned char major[] = {0, 1, 2, 2, 3, 3, 4, 5, 6};
	return v < sizeof major ? major[v] : 0;
}

/* ---- windows.c: kernel tracing (NVLPROF_KERNELS): all, off or windows ---- */
/*! At CUPTI start, before the kinds are enabled: the mode from the configuration; a value not
 * understood is warned about and noted (NOTE(CONFIG)) here, the default kept. */
void nvlp_kw_config(void);
/*! The mode in effect: enum nvlp_kmode (nvlp_rt.h). */
int nvlp_kw_mode(void);
/*! What is traced, for the ACTIVITY_ON note ("kernels and copies traced 20 ms of every ..."). */
void nvlp_kw_describe(char *km, size_t len);
/*! The flush schedule starts: the first window state (anchored windows close the kinds now). */
void nvlp_kw_start(void);
/*! When the schedule must first wake for a window edge (UINT64_MAX: never). */
uint64_t nvlp_kw_first_wake(void);
/*! On the flush thread at each wake: opens or closes a window when due, updating *next_win. */
void nvlp_kw_tick(uint64_t now, uint64_t *next_win);
/*! After the flush thread was joined: the last window, cut short, or a zero-length one when the
 * process ended before its first. */
void nvlp_kw_stop(void);
/*! NVLPROF_VERBOSE: the windows' count and time traced. */
void nvlp_kw_verbose(void);

/* ---- pm_host.cc: profiler-host config image (C++ header, tiny TU) ---- */
struct nvlp_pmh_fns {
	nvlp_cupti_pfn init, deinit, add_metrics, image_size, image, passes, evaluate;
	/* after each host call of a config (the first one, init, is where CUPTI loads
	 * libnvperf_host): re-registers the exit handler, @return nonzero once the process is
	 * exiting (call nothing more); NULL: never stop */
	int (*after_step)(void);
};
/* nvlp_pmh_config's result when after_step said the process is exiting: the host object (if any)
 * is left as it is, libnvperf_host is not called again */
#define NVLP_PMH_STOPPED ((CUptiResult)0x7ffffff0)
/*! Build the PM-sampling config image for chip with metrics (counter availability image may be
 * NULL). On success *host is the host object (keep for evaluate), *img malloc'ed.
 * @return CUPTI_SUCCESS, NVLP_PMH_STOPPED, or the first failing result. */
CUptiResult nvlp_pmh_config(const struct nvlp_pmh_fns *f, const char *chip, const uint8_t *avail,
                            const char *const *metrics, size_t n, void **host, uint8_t **img,
                            size_t *img_size, size_t *passes);
/*! Evaluate metrics of one decoded sample. @return CUPTI result */
CUptiResult nvlp_pmh_evaluate(const struct nvlp_pmh_fns *f, void *host, const uint8_t *data,
                              size_t data_size, size_t index, const char *const *metrics, size_t n,
                              double *values);
void nvlp_pmh_destroy(const struct nvlp_pmh_fns *f, void *host);

#ifdef __cplusplus
}
#endif
#endif /* NVLP_CUPTI_INT_H */

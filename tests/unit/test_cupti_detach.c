/* test_cupti_detach.c: NVLPROF_CUPTI=startup on the fake libcuda/libcupti: CUPTI detached from a callback once start-up is recorded, nothing of CUPTI called after, what needs CUPTI keeps it. */
/*
 * Parent: runs itself as a child under LD_PRELOAD=libnvlprof.so (fake libcuda's cuInit calls
 * InitializeInjection like the driver) with the fake NVML, then reads the child's trace.
 * detach: copies across devices through the driver and the runtime, before and after the
 *   detach: the driver path records the first, not the second; cuptiFinalize ran once, from an API
 *   callback's exit, and no CUPTI call came after it; topology records and NVML link samples are
 *   in the trace, with a NOTE saying what the detach leaves out.
 * again: managed memory allocated through the runtime after the detach attaches CUPTI again,
 *   before the allocation reaches the runtime (UM counters on, their records in the trace, a NOTE).
 * exitfirst: the program ends before the detach is due: a normal stop, no finalize.
 * idle: the detach is requested but no API call comes before exit: the request is cancelled and
 *   the stop flushes as usual (no finalize, no CUPTI call refused).
 * um: managed memory before the detach keeps CUPTI attached (UM counters), with a NOTE.
 * kernels: NVLPROF_KERNELS=all keeps CUPTI attached, with a NOTE.
 * kineto: a torch.profiler stand-in registered activity callbacks before the detach is due: kept
 *   attached, with a NOTE naming it.
 * kineto_after: the stand-in registers after the detach: its calls reach CUPTI itself (it profiles
 *   as it would without nvlprof).
 * drv_only (tests/progs/drv_only, no libcudart, as CuPy or JAX): kept attached, with a NOTE.
 * slow: another thread is inside a CUPTI call (a slow stream-id lookup) when the detach is due:
 *   the finalize waits for it (never while it is inside) and happens at a later call.
 * NVLPROF_CUPTI=lazy:
 * lazy: CUPTI never attached (no buffers, kind or callback, no finalize), the runtime hooks record
 *   the copies (no CUPTI stream id, no driver-level copy), NVML gives the link counters and the
 *   topology (DEVICE records from the driver), the report says CUPTI was not attached.
 * lazy_um_auto: managed memory after CUDA came up, NVLPROF_UM unset: CUPTI not attached mid-run
 *   (a later cuInit hung real jobs after such an attach: runs 16-17; the fake libcuda aborts at
 *   one with FAKE_CUDA_REINIT_HANG=1, and the fake runtime comes up inside the allocation), one
 *   NOTE says the migrations go unmeasured and why, the report says so.
 * lazy_um (NVLPROF_UM=attach, as the rest of lazy_um_*): the first managed allocation attaches
 *   CUPTI before it reaches the runtime (real CUPTI counts nothing of memory allocated before it
 *   attached: run 15), UM counters on, their records, a NOTE, the report's data line and JSON say
 *   so, no gap.
 * lazy_um_rt_late: CUDA up through the driver first (CuPy's runtime), the runtime's first call a
 *   managed allocation: the hook brings the runtime up (cudaFree(NULL)) before CUPTI attaches, as a
 *   runtime's first cuInit after a mid-run attach hangs in the real driver (run 16; the fake
 *   libcuda aborts there with FAKE_CUDA_REINIT_HANG=1).
 * lazy_um_first: the managed allocation is the first CUDA call (cuInit inside it): CUPTI attached
 *   at that cuInit, as needed from the start, before the allocation.
 * lazy_um_refused: CUPTI refuses the buffers: one NOTE says the migrations are not measured, the
 *   report says so (data line, JSON, collection gaps).
 * lazy_kineto: a torch.profiler stand-in reaches CUPTI itself (its buffers, its kind).
 * lazy_kernels, drv_only under lazy: needed from the start, attached, a NOTE says by what.
 */
#include <cupti.h>  /* driver and runtime API via cuda.h, cbids */
#include <limits.h>  /* PATH_MAX */
#include <pthread.h> /* pthread_create */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* mkdtemp */
#include <string.h> /* strcmp */

#include "check.h"
#include "nvlp_trace.h"
#include "shim_child.h"

void fake_cuda_set_device(int dev);
int fake_cupti_finalize_calls(void);
int fake_cupti_finalize_in_callback(void);
int fake_cupti_calls_after_finalize(void);
int fake_cupti_finalize_raced(void);
void *fake_cupti_request_callback(void);
int fake_cudart_managed_unattached(void);
int fake_cupti_attached_mid_run(void);
int fake_cupti_enabled(int kind);
int fake_cupti_cb_enabled(int d, int cbid);
void fake_cupti_generate(int kind, int n);

static CUdeviceptr d0, d1;

/* a copy from device 0 to 1: the driver path records it while CUPTI is attached; and a runtime
 * copy on a stream not seen before (its hook asks CUPTI for the stream id while attached) */
static void cross_copy(cudaStream_t st)
{
	cuMemcpyDtoD_v2(d1, d0, 4096);
	cudaMemcpyAsync((void *)(uintptr_t)d1, (void *)(uintptr_t)d0, 4096,
	                cudaMemcpyDeviceToDevice, st);
}

/* Driver calls every 10 ms until the detach happened, at most n of them. @return 1 if it did. */
static int until_detached(int n)
{
	for (int i = 0; i < n && !fake_cupti_finalize_calls(); i++) {
		CUdeviceptr t = 0;
		cuMemAlloc_v2(&t, 256);
		sleep_ms(10);
	}
	return fake_cupti_finalize_calls() > 0;
}

/* the torch.profiler stand-in's buffers */
static int k_reqs; /* buffers the stand-in was asked for */
static void CUPTIAPI k_req(uint8_t **b, size_t *sz, size_t *max)
{
	k_reqs++;
	*sz = 1 << 16;
	*b = aligned_alloc(8, *sz);
	*max = 0;
}
static int k_kernels; /* kernel records handed to the stand-in */
static void CUPTIAPI k_done(CUcontext c, uint32_t st, uint8_t *b, size_t sz, size_t valid)
{
	(void)c, (void)st, (void)sz;
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
		k_kernels += r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	free(b);
}

/* a runtime copy on a new stream: its hook's stream-id lookup sits in the slow fake call */
static void *slow_lookup(void *arg)
{
	(void)arg;
	fake_cuda_set_device(0);
	cudaMemcpyAsync((void *)(uintptr_t)d1, (void *)(uintptr_t)d0, 4096,
	                cudaMemcpyDeviceToDevice, (cudaStream_t)0x9900);
	return NULL;
}

static int child_slow(void)
{
	pthread_t t;
	pthread_create(&t, NULL, slow_lookup, NULL); /* inside CUPTI from ~0 to ~1000 ms */
	sleep_ms(450); /* the detach is due at 300 ms: the first try at ~450 ms finds it inside */
	CHECK(until_detached(500), "[slow] detached in the end");
	pthread_join(t, NULL);
	CHECK(fake_cupti_finalize_raced() == 0,
	      "[slow] cuptiFinalize never ran while another thread was inside a CUPTI call");
	CHECK(fake_cupti_calls_after_finalize() == 0, "[slow] no CUPTI call after it (%d)",
	      fake_cupti_calls_after_finalize());
	return CHECK_DONE();
}

/* NVLPROF_CUPTI=lazy's modes, after child()'s start (cuInit, allocations, one cross copy) */
static int child_lazy(const char *mode)
{
	if (!strcmp(mode, "lazy_kernels")) {
		CHECK(fake_cupti_request_callback() != NULL, "[%s] CUPTI attached from the start", mode);
		return CHECK_DONE();
	}
	CHECK(fake_cupti_request_callback() == NULL && !fake_cupti_enabled(CUPTI_ACTIVITY_KIND_DEVICE) &&
	          !fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2),
	      "[%s] CUPTI not attached: no buffers, no kind, no callback", mode);
	if (!strcmp(mode, "lazy_um_refused")) { /* CUPTI refuses our buffers */
		void *m = NULL, *m2 = NULL;
		CHECK(cudaMallocManaged(&m, 1 << 20, 1) == 0 && cudaMallocManaged(&m2, 1 << 20, 1) == 0 &&
		          !fake_cupti_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) &&
		          fake_cupti_request_callback() == NULL,
		      "[lazy_um_refused] managed memory twice, CUPTI refusing: no counters, no buffers");
		return CHECK_DONE();
	}
	if (!strcmp(mode, "lazy_um_auto")) {
		void *m = NULL, *m2 = NULL;
		CHECK(cudaMallocManaged(&m, 1 << 20, 1) == 0 && cudaMallocManaged(&m2, 1 << 20, 1) == 0 &&
		          !fake_cupti_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) &&
		          fake_cupti_request_callback() == NULL && !fake_cupti_attached_mid_run(),
		      "[lazy_um_auto] managed memory twice, NVLPROF_UM unset: CUPTI not attached, no "
		      "counters, no buffers");
		return CHECK_DONE();
	}
	if (!strcmp(mode, "lazy_um") || !strcmp(mode, "lazy_um_rt_late")) {
		void *m = NULL, *m2 = NULL;
		CHECK(cudaMallocManaged(&m, 1 << 20, 1) == 0 && cudaMallocManaged(&m2, 1 << 20, 1) == 0 &&
		          fake_cupti_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) &&
		          fake_cupti_request_callback() != NULL,
		      "[lazy_um] managed memory twice: CUPTI attached, UM counters on, buffers registered");
		CHECK(fake_cudart_managed_unattached() == 0,
		      "[lazy_um] attached before the first allocation reached the runtime (%d after)",
		      fake_cudart_managed_unattached());
		fake_cupti_generate(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER, 3);
		return CHECK_DONE(); /* the exit flushes them */
	}
	if (!strcmp(mode, "lazy_kineto")) {
		CHECK(cuptiActivityRegisterCallbacks(k_req, k_done) == CUPTI_SUCCESS &&
		          cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS &&
		          fake_cupti_request_callback() == (void *)k_req &&
		          fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
		      "[lazy_kineto] torch.profiler's stand-in registers with CUPTI itself");
		fake_cupti_generate(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 4);
		CHECK(cuptiActivityFlushAll(1) == CUPTI_SUCCESS && k_kernels == 4,
		      "[lazy_kineto] its flush hands it its 4 kernel records (%d)", k_kernels);
		return CHECK_DONE();
	}
	cross_copy((cudaStream_t)0x8800);
	sleep_ms(400); /* NVML samples, the topology */
	CHECK(fake_cupti_finalize_calls() == 0 && fake_cupti_request_callback() == NULL,
	      "[lazy] still not attached at the end, never finalized");
	return CHECK_DONE();
}

static int child(const char *mode)
{
	if (!strcmp(mode, "lazy_um_first")) { /* the first CUDA call a managed allocation */
		void *m = NULL;
		CHECK(cudaMallocManaged(&m, 1 << 20, 1) == 0 &&
		          fake_cupti_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) &&
		          fake_cupti_request_callback() != NULL && fake_cudart_managed_unattached() == 0,
		      "[lazy_um_first] CUDA came up inside the allocation: CUPTI attached there, before "
		      "the allocation, UM counters on (%d allocations unattached)",
		      fake_cudart_managed_unattached());
		fake_cupti_generate(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER, 3);
		return CHECK_DONE();
	}
	cuInit(0);
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_DEVICE, 2); /* topology, as CUPTI makes at cuInit */
	fake_cuda_set_device(0);
	cuMemAlloc_v2(&d0, 1 << 16);
	fake_cuda_set_device(1);
	cuMemAlloc_v2(&d1, 1 << 16);
	fake_cuda_set_device(0);
	cross_copy((cudaStream_t)0x7700); /* recorded: before any detach */
	if (!strncmp(mode, "lazy", 4))
		return child_lazy(mode);
	if (!strcmp(mode, "exitfirst"))
		return CHECK_DONE();
	if (!strcmp(mode, "slow"))
		return child_slow();
	if (!strcmp(mode, "idle")) {
		/* due at 300 ms: requested (the whole driver domain on), then no API call until exit */
		for (int i = 0; i < 500 && !fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API,
		                                                  CUPTI_DRIVER_TRACE_CBID_cuInit);
		     i++)
			sleep_ms(10);
		CHECK(fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuInit),
		      "[idle] the driver domain is on, waiting for a call's exit");
		sleep_ms(200);
		CHECK(fake_cupti_finalize_calls() == 0, "[idle] no finalize without an API call");
		return CHECK_DONE();
	}
	if (!strcmp(mode, "um")) {
		CUdeviceptr m = 0;
		CHECK(cuMemAllocManaged(&m, 1 << 20, 1) == 0, "[um] managed allocation");
	}
	if (!strcmp(mode, "kineto"))
		CHECK(cuptiActivityRegisterCallbacks(k_req, k_done) == CUPTI_SUCCESS &&
		          cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS,
		      "[kineto] a second client registers and enables kernels through nvlprof");
	if (!strcmp(mode, "refused")) { /* CUPTI 13.0 without NVLPROF_CUPTI_FINALIZE=1 */
		CHECK(!until_detached(150) && fake_cupti_finalize_calls() == 0,
		      "[refused] no cuptiFinalize in 1.5 s of API calls (CUPTI 13.0)");
		return CHECK_DONE();
	}
	if (!strcmp(mode, "um") || !strcmp(mode, "kernels") || !strcmp(mode, "kineto")) {
		CHECK(!until_detached(200), "[%s] CUPTI stays attached", mode); /* due at 300 ms */
		return CHECK_DONE();
	}
	CHECK(until_detached(500), "[%s] cuptiFinalize called within 5 s of driver calls", mode);
	if (!strcmp(mode, "kineto_after")) {
		CHECK(cuptiActivityRegisterCallbacks(k_req, k_done) == CUPTI_SUCCESS &&
		          cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS,
		      "[kineto_after] torch.profiler's stand-in registers and enables kernels");
		CHECK(fake_cupti_request_callback() == (void *)k_req &&
		          fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
		      "[kineto_after] ... with CUPTI itself: its buffers, its kind");
		/* then managed memory: nvlprof attaches again and adopts the profiler */
		int reqs = k_reqs;
		void *m = NULL;
		CHECK(cudaMallocManaged(&m, 1 << 20, 1) == 0 &&
		          fake_cupti_request_callback() != (void *)k_req &&
		          fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) &&
		          fake_cupti_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER),
		      "[kineto_after] managed memory: nvlprof's buffers again, its UM counters and the "
		      "profiler's kernels on");
		CHECK(k_reqs == reqs + 1, "[kineto_after] adopted as at a start: nvlprof holds one of "
		                          "its buffers for its next flush (%d asked)", k_reqs - reqs);
		fake_cupti_generate(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 5);
		CHECK(cuptiActivityFlushAll(1) == CUPTI_SUCCESS && k_kernels == 5,
		      "[kineto_after] the profiler's flush hands it its 5 kernel records (%d)",
		      k_kernels);
		return CHECK_DONE();
	}
	CHECK(fake_cupti_finalize_calls() == 1 && fake_cupti_finalize_in_callback(),
	      "[detach] once, from inside an API callback");
	CHECK(!fake_cupti_enabled(CUPTI_ACTIVITY_KIND_DEVICE) &&
	          !fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuInit),
	      "[detach] no kind, no callback left on");
	cross_copy((cudaStream_t)0x8800); /* driver copy not recorded after the detach */
	if (!strcmp(mode, "again")) {
		void *m = NULL; /* through the runtime: its hook still sees it */
		CHECK(cudaMallocManaged(&m, 1 << 20, 1) == 0, "[again] managed allocation after it");
		CHECK(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) &&
		          fake_cupti_request_callback() != NULL,
		      "[again] CUPTI attached again: UM counters on, buffers registered");
		CHECK(fake_cudart_managed_unattached() == 0,
		      "[again] attached again before the allocation reached the runtime (%d after)",
		      fake_cudart_managed_unattached());
		fake_cupti_generate(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER, 3);
		return CHECK_DONE(); /* the exit flushes them */
	}
	sleep_ms(300); /* the flush thread notices and writes its note */
	CHECK(fake_cupti_calls_after_finalize() == 0,
	      "[detach] no CUPTI call after cuptiFinalize (%d)", fake_cupti_calls_after_finalize());
	return CHECK_DONE();
}

/* ---- parent ---- */
struct summary {
	unsigned long long cross, rt_copies, rt_sid, device, um_records, nvml_samples, pm_samples, notes[NVLP_NOTE_CODE_COUNT];
	int detached_note, again_note, kept_note, finalize_failed;
	int refused_note; /* "CUPTI not detached ... cuptiFinalize of CUPTI 130001 (13.0)" */
	int lazy_note, lazy_needed, lazy_um, lazy_again, topo_note; /* NVLPROF_CUPTI=lazy's NOTEs */
	char report[8192]; /* `nvlprof report` of the trace, its text then its JSON */
};

static void count_record(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	(void)r;
	struct summary *s = arg;
	if (rec->kind == NVLP_K_COPY) {
		const struct nvlp_rec_copy *c = (const void *)rec->f;
		s->cross += c->fn == NVLP_CUDA_CU_MEMCPY_DTOD && c->src_device == 0 &&
		            c->dst_device == 1;
		s->rt_copies += c->fn == NVLP_CUDA_MEMCPY_ASYNC;
		s->rt_sid += c->fn == NVLP_CUDA_MEMCPY_ASYNC && c->cupti_stream != 0;
	} else if (rec->kind == NVLP_K_UM) {
		s->um_records++;
	} else if (rec->kind == NVLP_K_DEVICE) {
		s->device++;
	} else if (rec->kind == NVLP_K_LINKSAMPLE) {
		const struct nvlp_rec_linksample *l = (const void *)rec->f;
		s->nvml_samples += l->source == NVLP_LINK_NVML;
		s->pm_samples += l->source == NVLP_LINK_PM_SAMPLING;
	} else if (rec->kind == NVLP_K_NOTE) {
		const struct nvlp_rec_note *n = (const void *)rec->f;
		const char *t = (const char *)rec->blob;
		int len = (int)rec->blob_len;
		if (n->code < NVLP_NOTE_CODE_COUNT)
			s->notes[n->code]++;
		s->detached_note += n->code == NVLP_NOTE_CUPTI_DETACHED && memmem(t, len, "CUPTI detached", 14);
		s->again_note += n->code == NVLP_NOTE_CUPTI_REATTACHED && memmem(t, len, "CUPTI attached again", 20);
		s->lazy_again += n->code == NVLP_NOTE_CUPTI_REATTACHED &&
		                 memmem(t, len, "(NVLPROF_CUPTI=lazy) before the first managed allocation", 56);
		s->kept_note += n->code == NVLP_NOTE_CONFIG && memmem(t, len, "CUPTI kept attached", 19);
		s->finalize_failed += memmem(t, len, "cuptiFinalize failed", 20) != NULL;
		s->refused_note += n->code == NVLP_NOTE_CONFIG &&
		                   memmem(t, len, "CUPTI not detached (NVLPROF_CUPTI=startup): "
		                                  "cuptiFinalize of CUPTI 130001 (13.0) corrupted the heap",
		                          99) != NULL &&
		                   memmem(t, len, "NVLPROF_CUPTI_FINALIZE=1 detaches anyway", 40) != NULL;
		s->lazy_note += n->code == NVLP_NOTE_CONFIG &&
		                memmem(t, len, NVLP_NOTE_CUPTI_LAZY, sizeof NVLP_NOTE_CUPTI_LAZY - 1) == t;
		s->lazy_needed += n->code == NVLP_NOTE_CONFIG &&
		                  memmem(t, len, NVLP_NOTE_CUPTI_LAZY_NEEDED,
		                         sizeof NVLP_NOTE_CUPTI_LAZY_NEEDED - 1) == t;
		s->lazy_um += n->code == NVLP_NOTE_CUPTI_UNAVAILABLE &&
		              memmem(t, len, NVLP_NOTE_CUPTI_LAZY_UM, sizeof NVLP_NOTE_CUPTI_LAZY_UM - 1) == t &&
		              memmem(t, len, "NVLPROF_CUPTI=1 measures them", 29);
		s->topo_note += memmem(t, len, "topology from the driver and NVML (NVLPROF_CUPTI=lazy): 2 "
		                               "device(s)", 67) != NULL;
		printf("    note %s: %.*s\n", nvlp_note_name((unsigned)n->code), len, t);
	}
}

static int run(const char *self, const char *lib, const char *mode, const char *const *env,
               struct summary *s)
{
	char dir[] = "/tmp/nvlp-cupti-detach.XXXXXX";
	if (!mkdtemp(dir))
		return -1;
	int rc = shim_run_child(self, lib, dir, "10000", env, mode);
	memset(s, 0, sizeof *s);
	trace_dir_each(dir, count_record, NULL, s);
	char cmd[2 * PATH_MAX + 64];
	int ld = (int)(strrchr(lib, '/') - lib); /* build/libnvlprof.so: build/nvlprof beside it */
	snprintf(cmd, sizeof cmd, "%.*s/nvlprof report %s 2>&1; %.*s/nvlprof report --json %s 2>&1",
	         ld, lib, dir, ld, lib, dir);
	FILE *p = popen(cmd, "r");
	if (p) {
		size_t n = fread(s->report, 1, sizeof s->report - 1, p);
		s->report[n] = 0;
		pclose(p);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return -1;
	return rc;
}

/* Lazy's managed memory left unmeasured (no attach, or a refused one): one NOTE, no UM counter,
 * no attach; the report's data line and JSON say so, and its collection gaps say why */
static int um_unmeasured(int rc, const struct summary *s)
{
	return rc == 0 && s->lazy_note == 1 && s->lazy_um == 1 && s->lazy_again == 0 &&
	       s->notes[NVLP_NOTE_UM_ON] == 0 && s->um_records == 0;
}
static int um_unmeasured_told(const struct summary *s, const char *why)
{
	return strstr(s->report, "; managed memory allocated in 1: its page migrations not measured "
	                         "(NVLPROF_CUPTI=1 measures them)\n") &&
	       strstr(s->report, "\"managed_not_measured\": 1") &&
	       strstr(s->report, "\"attached_for_managed\": 0") && strstr(s->report, why);
}

/* NVLPROF_CUPTI=lazy: CUPTI left out; what attaches it, and what needs it from the start */
static void lazy_checks(const char *self, const char *lib, const char *prog, const char *ldp,
                        const char *ub)
{
	struct summary s;
	int rc = run(self, lib, "lazy", (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", NULL}, &s);
	CHECK(rc == 0 && s.lazy_note == 1 && !s.lazy_needed && !s.detached_note && !s.kept_note,
	      "[lazy] CUPTI left out: one NOTE says so (rc %d)", rc);
	CHECK(s.cross == 0 && s.rt_copies == 2 && s.rt_sid == 0,
	      "[lazy] copies from the runtime hooks, no CUPTI stream id, no driver-level copy (%llu "
	      "runtime, %llu with an id, %llu driver)",
	      s.rt_copies, s.rt_sid, s.cross);
	CHECK(s.nvml_samples >= 1 && s.pm_samples == 0, "[lazy] link counters from NVML (%llu)",
	      s.nvml_samples);
	CHECK(s.device == 2 && s.topo_note == 1,
	      "[lazy] topology from the driver and NVML: 2 DEVICE records (%llu), one NOTE", s.device);
	CHECK(strstr(s.report, "data: CUPTI not attached in 1 of 1 process (NVLPROF_CUPTI=lazy): "
	                       "topology from the driver and NVML, links from NVML, copies seen by "
	                       "the CUDA runtime hooks only\n") &&
	          strstr(s.report, "\"cupti_lazy\": {\n      \"not_attached\": 1,") &&
	          !strstr(s.report, "CUPTI detached") && !strstr(s.report, "cupti_lazy:"),
	      "[lazy] the report says CUPTI was not attached, text and JSON, and not as a gap:\n%s",
	      s.report);
	rc = run(self, lib, "lazy_um_auto",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", "FAKE_CUDART_INIT_ON_ALLOC=1",
	                          "FAKE_CUDA_REINIT_HANG=1", NULL},
	         &s);
	CHECK(um_unmeasured(rc, &s),
	      "[lazy_um_auto] no attach mid-run: one NOTE says the migrations go unmeasured (rc %d, "
	      "%d NOTEs, %d attaches, %llu UM records)",
	      rc, s.lazy_um, s.lazy_again, s.um_records);
	CHECK(um_unmeasured_told(&s, "no mid-run attach unless NVLPROF_UM=attach"),
	      "[lazy_um_auto] the report says so, and why, in the data line, JSON and the collection "
	      "gaps:\n%s",
	      s.report);
	rc = run(self, lib, "lazy_um",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", "NVLPROF_UM=attach", NULL}, &s);
	CHECK(rc == 0 && s.lazy_note == 1 && s.lazy_um == 0 && s.lazy_again == 1 &&
	          s.again_note == 0 && s.notes[NVLP_NOTE_UM_ON] == 1 && s.um_records == 3,
	      "[lazy_um] managed memory attached CUPTI: one NOTE says so, UM counters on, their 3 "
	      "records (rc %d, %d lazy attach, %d unmeasured NOTEs, %llu UM records)",
	      rc, s.lazy_again, s.lazy_um, s.um_records);
	CHECK(strstr(s.report, "data: CUPTI not attached in 1 of 1 process (NVLPROF_CUPTI=lazy)") &&
	          strstr(s.report, "; attached for managed memory in 1 (before its first allocation: "
	                           "page migrations measured)\n") &&
	          strstr(s.report, "\"attached_for_managed\": 1") &&
	          strstr(s.report, "\"managed_not_measured\": 0") &&
	          !strstr(s.report, "managed memory allocated under NVLPROF_CUPTI=lazy"),
	      "[lazy_um] the report says so, in the data line and JSON, and no gap:\n%s", s.report);
	CHECK(strstr(s.report, "; counting its 2 managed-memory migrations slows them (1.5x on a "
	                       "GPU/CPU ping-pong): NVLPROF_UM=0 times the job without\n") &&
	          strstr(s.report, "\"um_migrations_counted\": 2"),
	      "[lazy_um] the cost line says what counting the migrations (HtoD and DtoH of the 3 "
	      "records) costs, text and JSON:\n%s",
	      s.report);
	/* CUDA up through the driver (CuPy's runtime), the fake runtime's first call a managed
	 * allocation: its cuInit after a mid-run attach would hang the real driver (run 16) */
	rc = run(self, lib, "lazy_um_rt_late",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", "NVLPROF_UM=attach",
	                          "FAKE_CUDART_INIT_ON_ALLOC=1", "FAKE_CUDA_REINIT_HANG=1", NULL},
	         &s);
	CHECK(rc == 0 && s.lazy_note == 1 && s.lazy_again == 1 && s.notes[NVLP_NOTE_UM_ON] == 1 &&
	          s.um_records == 3,
	      "[lazy_um_rt_late] a runtime's first call a managed allocation, after CUDA came up "
	      "without it: the runtime up before CUPTI attached (no cuInit after the attach), UM "
	      "counters on, their 3 records (rc %d, %d lazy attach, %llu UM records)",
	      rc, s.lazy_again, s.um_records);
	rc = run(self, lib, "lazy_um_refused",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", "NVLPROF_UM=attach",
	                          "FAKE_CUPTI_REGISTER_FAIL=1", NULL},
	         &s);
	CHECK(um_unmeasured(rc, &s),
	      "[lazy_um_refused] CUPTI refused: one NOTE says the migrations go unmeasured (rc %d, %d "
	      "NOTEs)",
	      rc, s.lazy_um);
	CHECK(um_unmeasured_told(&s, "managed memory allocated under NVLPROF_CUPTI=lazy: migrations "
	                             "unmeasured (NVLPROF_CUPTI=1 measures them)"),
	      "[lazy_um_refused] the report says so, in the data line, JSON and the collection "
	      "gaps:\n%s",
	      s.report);
	rc = run(self, lib, "lazy_um_first",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", "FAKE_CUDART_INIT_ON_ALLOC=1", NULL}, &s);
	CHECK(rc == 0 && s.lazy_needed == 1 && !s.lazy_note && s.lazy_um == 0 &&
	          s.notes[NVLP_NOTE_UM_ON] == 1 && s.um_records == 3,
	      "[lazy_um_first] managed memory as the first CUDA call: attached from the start, one "
	      "NOTE says by what, its 3 UM records (rc %d, %d unmeasured NOTEs, %llu UM records)",
	      rc, s.lazy_um, s.um_records);
	CHECK(strstr(s.report, "; attached from the start in 1 (needed there") != NULL,
	      "[lazy_um_first] the report says so:\n%s", s.report);
	rc = run(self, lib, "lazy_kineto", (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", NULL}, &s);
	CHECK(rc == 0 && s.lazy_note == 1, "[lazy_kineto] the profiler profiled through CUPTI (rc %d)",
	      rc);
	rc = run(self, lib, "lazy_kernels",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", "NVLPROF_KERNELS=all", NULL}, &s);
	CHECK(rc == 0 && s.lazy_needed == 1 && !s.lazy_note && s.device == 2,
	      "[lazy_kernels] kernel tracing: attached from the start, one NOTE says by what, "
	      "CUPTI's topology (rc %d, %llu DEVICE)",
	      rc, s.device);
	CHECK(strstr(s.report, "data: CUPTI not attached in 0 of 1 process (NVLPROF_CUPTI=lazy)") &&
	          strstr(s.report, "; attached from the start in 1 (needed there"),
	      "[lazy_kernels] the report says so:\n%s", s.report);
	rc = run(prog, lib, "2000", (const char *[]){ldp, ub, "NVLPROF_CUPTI=lazy", NULL}, &s);
	CHECK(rc == 0 && s.lazy_needed == 1 && !s.lazy_note && s.cross == 200,
	      "[lazy drv_only] no CUDA runtime: attached from the start, all 200 copies recorded "
	      "(rc %d, %llu)",
	      rc, s.cross);
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	char self[PATH_MAX], lib[PATH_MAX + 32], ldp[PATH_MAX + 64];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	snprintf(ldp, sizeof ldp, "LD_LIBRARY_PATH=%.*s/../fakes/nvml",
	         (int)(strrchr(self, '/') - self), self);
	/* our own fake GPU UUIDs: the per-GPU sampling lock is not shared with parallel tests */
	unsigned base = 0x40 | ((unsigned)getpid() & 0x3f);
	char ub[64];
	snprintf(ub, sizeof ub, "FAKE_CUDA_UUID_BASE=%u", base);
	struct summary s;
	/* CUPTI 13.0 (the fake's version where the headers are 13.0) detaches only when told to
	 * (detach.c): every run that detaches says so; "refused" and "version" below do not */
	setenv("NVLPROF_CUPTI_FINALIZE", "1", 1);
	int rc = run(self, lib, "refused",
	             (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", "NVLPROF_KERNELS=off",
	                              "NVLPROF_CUPTI_FINALIZE", "FAKE_CUPTI_VERSION=130001", NULL},
	             &s);
	CHECK(rc == 0 && s.refused_note == 1 && s.detached_note == 0,
	      "[refused] CUPTI 13.0 without NVLPROF_CUPTI_FINALIZE=1: not detached, and one NOTE says "
	      "why and how to detach anyway (rc %d)",
	      rc);
	CHECK(strstr(s.report, "data: CUPTI kept attached in 1 of 1 process despite "
	                       "NVLPROF_CUPTI=startup: cuptiFinalize corrupts the heap with CUPTI 13.0 "
	                       "(NVLPROF_CUPTI_FINALIZE=1 detaches anyway)") &&
	          strstr(s.report, "\"cupti_kept_attached_unsafe_finalize\": 1") &&
	          !strstr(s.report, "CUPTI detached after start-up"),
	      "[refused] the report says so, text and JSON:\n%s", s.report);
	rc = run(self, lib, "detach",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", "NVLPROF_KERNELS=off",
	                          "NVLPROF_CUPTI_FINALIZE", "FAKE_CUPTI_VERSION=130200", NULL},
	         &s);
	CHECK(rc == 0 && s.refused_note == 0 && s.detached_note == 1,
	      "[version] a CUPTI other than 13.0 (130200) detaches without being told (rc %d)", rc);
	const char *env[] = {ldp, ub, "NVLPROF_CUPTI=startup:300", "NVLPROF_KERNELS=off",
	                     "FAKE_CUPTI_PM=1", NULL};
	rc = run(self, lib, "detach", env, &s);
	CHECK(rc == 0, "[detach] child ran and its checks passed (rc %d)", rc);
	CHECK(s.cross == 1, "[detach] the cross-device copy before the detach recorded, the one "
	                    "after not (%llu)", s.cross);
	CHECK(s.rt_copies == 2 && s.rt_sid == 1,
	      "[detach] the runtime hook records its copies either side, with a CUPTI stream id "
	      "only before (%llu copies, %llu with an id)",
	      s.rt_copies, s.rt_sid);
	CHECK(s.device >= 1, "[detach] topology (DEVICE records) flushed before it (%llu)", s.device);
	CHECK(s.detached_note == 1 && s.finalize_failed == 0, "[detach] one NOTE says CUPTI detached");
	CHECK(s.again_note == 0 && s.um_records == 0, "[detach] not attached again");
	CHECK(s.nvml_samples >= 1 && s.pm_samples == 0,
	      "[detach] link counters from NVML, never PM sampling (%llu NVML, %llu PM)",
	      s.nvml_samples, s.pm_samples);
	CHECK(strstr(s.report, "data: CUPTI detached after start-up in 1 of 1 process (") &&
	          !strstr(s.report, "attached again") &&
	          strstr(s.report, "\"cupti_detached\": {\n      \"processes\": 1,") &&
	          !strstr(s.report, "cupti_detached:"),
	      "[detach] the report says CUPTI was detached, text and JSON, and not as a gap:\n%s",
	      s.report);

	rc = run(self, lib, "exitfirst", (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup", NULL}, &s);
	CHECK(rc == 0 && s.cross == 1 && s.device >= 1 && !s.detached_note,
	      "[exitfirst] ended before the detach: recorded as usual, no detach note");

	rc = run(self, lib, "idle", (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", NULL}, &s);
	CHECK(rc == 0 && s.cross == 1 && s.device >= 1 && !s.detached_note,
	      "[idle] requested, never reached: cancelled at exit, everything recorded (rc %d)", rc);

	rc = run(self, lib, "um", (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", NULL}, &s);
	CHECK(rc == 0 && s.kept_note == 1 && !s.detached_note && s.notes[NVLP_NOTE_UM_ON] == 1,
	      "[um] UM counters on: CUPTI kept attached, one NOTE says why (rc %d)", rc);
	CHECK(strstr(s.report, "nvlprof report:") && !strstr(s.report, "CUPTI detached") &&
	          !strstr(s.report, "cupti_detached"),
	      "[um] kept attached: the report says nothing of a detach");

	rc = run(self, lib, "kernels",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", "NVLPROF_KERNELS=all", NULL}, &s);
	CHECK(rc == 0 && s.kept_note == 1 && !s.detached_note,
	      "[kernels] kernel tracing: CUPTI kept attached, one NOTE says why (rc %d)", rc);
	rc = run(self, lib, "kineto", (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", NULL}, &s);
	CHECK(rc == 0 && s.kept_note == 1 && !s.detached_note,
	      "[kineto] another CUPTI client: kept attached, one NOTE says why (rc %d)", rc);
	rc = run(self, lib, "again", (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", NULL}, &s);
	CHECK(rc == 0 && s.detached_note == 1 && s.again_note == 1 &&
	          s.notes[NVLP_NOTE_UM_ON] == 1 && s.um_records == 3,
	      "[again] detached, then attached again for managed memory: NOTEs, 3 UM records "
	      "(rc %d, %llu)",
	      rc, s.um_records);
	CHECK(strstr(s.report, "; attached again for managed memory in 1\n") &&
	          strstr(s.report, "\"attached_again\": 1"),
	      "[again] the report says CUPTI was attached again, text and JSON:\n%s", s.report);
	rc = run(self, lib, "kineto_after", (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", NULL},
	         &s);
	CHECK(rc == 0 && s.detached_note == 1 && !s.kept_note,
	      "[kineto_after] detached first, then the profiler's calls passed through (rc %d)", rc);
	char prog[PATH_MAX + 32];
	snprintf(prog, sizeof prog, "%.*s/progs/drv_only", (int)(strrchr(self, '/') - self), self);
	rc = run(prog, lib, "2000", (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", NULL}, &s);
	CHECK(rc == 0 && s.kept_note == 1 && !s.detached_note && s.cross == 200,
	      "[drv_only] no CUDA runtime: kept attached, one NOTE says why, all 200 copies "
	      "recorded (rc %d, %llu)",
	      rc, s.cross);
	rc = run(self, lib, "slow",
	         (const char *[]){ldp, ub, "NVLPROF_CUPTI=startup:300", "FAKE_CUPTI_SID_SLOW_MS=1000", NULL},
	         &s);
	CHECK(rc == 0 && s.detached_note == 1,
	      "[slow] detached after the other thread left CUPTI, one NOTE (rc %d)", rc);
	lazy_checks(self, lib, prog, ldp, ub);
	shim_unlink_gpu_locks(base);
	return CHECK_DONE();
}

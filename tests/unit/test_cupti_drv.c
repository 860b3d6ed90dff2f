/* test_cupti_drv.c: driver-level capture on the fake libcuda/libcupti: a "static runtime" program, a runtime program, and Kineto subscribing beside nvlprof. */
/*
 * Parent: runs itself as a child under LD_PRELOAD=libnvlprof.so (fake libcuda's cuInit calls
 * InitializeInjection like the driver), then reads the child's trace.
 * static: calls only driver entry points (as CuPy's statically linked runtime, JAX or Triton do):
 *   managed allocation, copies into and out of it, copies within and across devices, peer access,
 *   prefetch, advice, frees. Every interesting one is recorded once, with a stack; the others not.
 *   A Kineto stand-in subscribes to CUPTI callbacks after nvlprof (or before: kfirst) and gets
 *   exactly the callbacks it enabled while nvlprof keeps its own.
 * dynamic: the same operations through the (fake) runtime, whose inner driver calls fire the
 *   driver callbacks too: each is recorded once, by the runtime hook.
 * off: NVLPROF_DRIVER=0: no driver records, a NOTE says so.
 */
#include <cupti.h>  /* callback API, cbids */
#include <limits.h> /* PATH_MAX */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* setenv, mkdtemp */
#include <string.h> /* strcmp */

#include "check.h"
#include "nvlp_trace.h"
#include "shim_child.h"

/* fake libcuda / libcupti test controls */
void fake_cuda_set_device(int dev);
void *fake_cuda_ctx(int dev);
int fake_cupti_cb_enabled(int d, int cbid);
void fake_cupti_fire(int d, unsigned cbid);
int fake_cupti_enabled(int kind);

#define MB (1u << 20)
#define CB(name) CUPTI_DRIVER_TRACE_CBID_##name

/* ---- child: the Kineto stand-in's callback ---- */
static int k_calls[CUPTI_CB_DOMAIN_SIZE][CUPTI_DRIVER_TRACE_CBID_SIZE];
static int k_bad_data;
static char k_token;
static void CUPTIAPI k_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId cbid, const void *data)
{
	if (ud != &k_token)
		k_bad_data++;
	if ((unsigned)d < CUPTI_CB_DOMAIN_SIZE && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		k_calls[d][cbid]++;
	(void)data;
}

static CUpti_SubscriberHandle kineto_subscribe(void)
{
	CUpti_SubscriberHandle ks = NULL, k2 = NULL;
	CHECK(cuptiSubscribe(&ks, k_cb, &k_token) == CUPTI_SUCCESS && ks,
	      "kineto: cuptiSubscribe succeeds beside nvlprof");
	CHECK(cuptiSubscribe(&k2, k_cb, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
	      "a second client is refused, as CUPTI refuses one");
	CHECK(cuptiEnableDomain(1, ks, CUPTI_CB_DOMAIN_RESOURCE) == CUPTI_SUCCESS &&
	          cuptiEnableCallback(1, ks, CUPTI_CB_DOMAIN_DRIVER_API, CB(cuMemAllocManaged)) ==
	              CUPTI_SUCCESS &&
	          cuptiEnableCallback(1, ks, CUPTI_CB_DOMAIN_DRIVER_API, CB(cuLaunchKernel)) ==
	              CUPTI_SUCCESS,
	      "kineto: enables the resource domain, cuMemAllocManaged and cuLaunchKernel");
	return ks;
}

/* Driver API: cuda.h's declarations (via cupti.h), served by the fake libcuda. */
/* the runtime (fake cudart): cuda_runtime_api.h, also via cupti.h */

static char host[64 << 10];
static const CUmemLocation DEV0 = {CU_MEM_LOCATION_TYPE_DEVICE, 0};

static int child_static(int kfirst)
{
	CUpti_SubscriberHandle ks = NULL;
	if (kfirst)
		ks = kineto_subscribe(); /* before CUDA, hence before nvlprof's start */
	cuInit(0);
	if (!kfirst)
		ks = kineto_subscribe();
	fake_cuda_set_device(0);
	CUdeviceptr m = 0, d0 = 0, d0b = 0, d1 = 0;
	const char *drv = getenv("NVLPROF_DRIVER");
	int on = !drv || strcmp(drv, "0"); /* off: only the Kineto checks apply */
	CHECK(cuMemAllocManaged(&m, MB, 1) == 0 && m, "managed allocation through the driver");
	CHECK(!on || fake_cupti_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER),
	      "UM counters on once managed memory appeared through the driver");
	cuMemcpyHtoD_v2(m, host, 4096);     /* recorded: managed */
	cuMemcpyDtoH_v2(host, m, 4096);     /* recorded: managed */
	cuMemAlloc_v2(&d0, 1 << 16);
	cuMemAlloc_v2(&d0b, 1 << 16);
	fake_cuda_set_device(1);
	cuMemAlloc_v2(&d1, 1 << 16);
	fake_cuda_set_device(0);
	cuMemcpyDtoD_v2(d1, d0, 4096);                 /* recorded: crosses devices */
	cuMemcpyDtoD_v2(d0b, d0, 4096);                /* not: same device */
	cuMemcpyHtoD_v2(d0, host, 4096);    /* not: plain device memory */
	cuMemcpyAsync(d1, d0, 4096, (CUstream)0x7700);         /* recorded: crosses devices */
	cuMemcpyAsync(d0b, (uintptr_t)host, 4096, NULL);     /* not */
	CHECK(cuCtxEnablePeerAccess((CUcontext)fake_cuda_ctx(1), 0) == 0, "peer access 0 -> 1 enabled");
	cuMemcpyPeer(d1, (CUcontext)fake_cuda_ctx(1), d0, (CUcontext)fake_cuda_ctx(0), 8192); /* recorded */
	cuMemPrefetchAsync_v2(m, MB, DEV0, 0, NULL);        /* recorded */
	cuMemAdvise_v2(m, MB, CU_MEM_ADVISE_SET_READ_MOSTLY, DEV0);                     /* recorded */
	cuMemFree_v2(d0b);                                                /* not */
	CHECK(cuMemFree_v2(m) == 0, "managed block freed");               /* recorded */
	fake_cupti_fire(CUPTI_CB_DOMAIN_RESOURCE, 1);
	/* Kineto got what it enabled, nothing else */
	CHECK(k_calls[CUPTI_CB_DOMAIN_RESOURCE][1] == 1, "kineto got its resource callback (%d)",
	      k_calls[CUPTI_CB_DOMAIN_RESOURCE][1]);
	CHECK(k_calls[CUPTI_CB_DOMAIN_DRIVER_API][CB(cuMemAllocManaged)] == 2,
	      "kineto got enter and exit of cuMemAllocManaged, which nvlprof records too (%d)",
	      k_calls[CUPTI_CB_DOMAIN_DRIVER_API][CB(cuMemAllocManaged)]);
	int other = 0;
	for (int c = 0; c < CUPTI_DRIVER_TRACE_CBID_SIZE; c++)
		if (c != CB(cuMemAllocManaged))
			other += k_calls[CUPTI_CB_DOMAIN_DRIVER_API][c];
	CHECK(other == 0 && k_bad_data == 0,
	      "kineto gets no callback it did not enable (%d), with its own user data", other);
	uint32_t en = 9;
	CHECK(cuptiGetCallbackState(&en, ks, CUPTI_CB_DOMAIN_DRIVER_API, CB(cuMemcpyDtoD_v2)) ==
	              CUPTI_SUCCESS &&
	          en == 0,
	      "kineto's callback state is its own (DtoD off for it, on for nvlprof)");
	/* Kineto turning off what nvlprof also uses leaves nvlprof's on */
	cuptiEnableCallback(0, ks, CUPTI_CB_DOMAIN_DRIVER_API, CB(cuMemAllocManaged));
	cuptiEnableDomain(0, ks, CUPTI_CB_DOMAIN_DRIVER_API);
	CHECK(!on || (fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CB(cuMemAllocManaged)) &&
	               fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CB(cuMemcpyDtoD_v2))),
	      "kineto disabling a callback or the driver domain leaves nvlprof's on");
	CHECK(!fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CB(cuLaunchKernel)),
	      "kineto's own callback really disabled with its domain");
	CHECK(cuptiUnsubscribe(ks) == CUPTI_SUCCESS, "kineto unsubscribes");
	fake_cupti_fire(CUPTI_CB_DOMAIN_RESOURCE, 1);
	CHECK(k_calls[CUPTI_CB_DOMAIN_RESOURCE][1] == 1 &&
	          !fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_RESOURCE, 1),
	      "after unsubscribing kineto gets nothing and its callbacks are off");
	CHECK(on == fake_cupti_cb_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CB(cuMemFree_v2)),
	      "nvlprof's callbacks outlive kineto's subscription");
	return CHECK_DONE();
}

static int child_dynamic(void)
{
	cuInit(0);
	void *m = NULL;
	CUdeviceptr dm = 0;
	CHECK(cudaMallocManaged(&m, MB, 1) == 0 && m, "managed allocation through the runtime");
	cudaMemcpy(m, host, 4096, cudaMemcpyHostToDevice); /* runtime hook records; its inner driver copy does not */
	CHECK(cuMemAllocManaged(&dm, 1 << 16, 1) == 0, "managed allocation through the driver");
	/* the runtime hook does not know this block, the driver path does: recorded there */
	cudaMemcpy((void *)(uintptr_t)dm, host, 4096, cudaMemcpyHostToDevice);
	CHECK(cudaFree(m) == 0, "runtime free");
	return CHECK_DONE();
}

/* ---- parent ---- */
struct summary {
	unsigned long long kinds[NVLP_K_COUNT], fn[NVLP_K_COUNT][NVLP_CUDA_FN_COUNT];
	unsigned long long notes[NVLP_NOTE_CODE_COUNT], driver_cfg_note;
	unsigned long long nostack, stacks_missing, peer_enabled, prefetch_target0, free_bytes;
	unsigned long long cross_dev, async_stream;
	uint64_t stack_ids[256];
	int nstack;
	uint64_t used[256];
	int nused;
};

static void count_record(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	(void)r;
	struct summary *s = arg;
	if (rec->kind < NVLP_K_COUNT)
		s->kinds[rec->kind]++;
	uint64_t fn = rec->kind == NVLP_K_COPY || rec->kind == NVLP_K_MANAGED ||
	                      rec->kind == NVLP_K_PEER
	                  ? rec->f[0]
	                  : NVLP_CUDA_FN_COUNT;
	if (fn < NVLP_CUDA_FN_COUNT)
		s->fn[rec->kind][fn]++;
	if (rec->kind == NVLP_K_STACK && s->nstack < 256) {
		s->stack_ids[s->nstack++] = rec->f[0];
	} else if (rec->kind == NVLP_K_COPY) {
		const struct nvlp_rec_copy *c = (const void *)rec->f;
		if (!c->stack)
			s->nostack++;
		else if (s->nused < 256)
			s->used[s->nused++] = c->stack;
		if (c->fn == NVLP_CUDA_CU_MEMCPY_PEER && (int64_t)c->peer_enabled == 1 &&
		    c->src_device == 0 && c->dst_device == 1 && c->bytes == 8192)
			s->peer_enabled++;
		if ((c->fn == NVLP_CUDA_CU_MEMCPY_DTOD || c->fn == NVLP_CUDA_CU_MEMCPY_ASYNC) &&
		    c->src_device == 0 && c->dst_device == 1)
			s->cross_dev++;
		if (c->fn == NVLP_CUDA_CU_MEMCPY_ASYNC && c->stream == 0x7700)
			s->async_stream++;
	} else if (rec->kind == NVLP_K_MANAGED) {
		const struct nvlp_rec_managed *m = (const void *)rec->f;
		if (!m->stack)
			s->nostack++;
		else if (s->nused < 256)
			s->used[s->nused++] = m->stack;
		if (m->fn == NVLP_CUDA_CU_MEM_PREFETCH_ASYNC && (int64_t)m->target == 0 &&
		    m->bytes == MB)
			s->prefetch_target0++;
		if (m->fn == NVLP_CUDA_CU_MEM_FREE)
			s->free_bytes += m->bytes;
	} else if (rec->kind == NVLP_K_NOTE) {
		const struct nvlp_rec_note *n = (const void *)rec->f;
		if (n->code < NVLP_NOTE_CODE_COUNT)
			s->notes[n->code]++;
		if (n->code == NVLP_NOTE_CONFIG && rec->blob_len > 15 &&
		    !memcmp(rec->blob, "NVLPROF_DRIVER=0", 16))
			s->driver_cfg_note++;
		printf("    note %s: %.*s\n", nvlp_note_name((unsigned)n->code), (int)rec->blob_len,
		       (const char *)rec->blob);
	}
}

static void summarize(const char *dir, struct summary *s)
{
	memset(s, 0, sizeof *s);
	trace_dir_each(dir, count_record, NULL, s);
	for (int i = 0; i < s->nused; i++) {
		int found = 0;
		for (int j = 0; j < s->nstack; j++)
			found |= s->stack_ids[j] == s->used[i];
		s->stacks_missing += !found;
	}
}

static unsigned long long cu_records(const struct summary *s, int kind)
{
	unsigned long long n = 0;
	for (int f = NVLP_CUDA_CU_MEM_ALLOC_MANAGED; f < NVLP_CUDA_FN_COUNT; f++)
		n += s->fn[kind][f];
	return n;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child")) {
		if (!strcmp(argv[2], "dynamic"))
			return child_dynamic();
		return child_static(!strcmp(argv[2], "kfirst"));
	}
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	static const char *const modes[] = {"static", "kfirst", "dynamic", "off"};
	for (int run = 0; run < 4; run++) {
		const char *mode = modes[run];
		char dir[] = "/tmp/nvlp-cupti-drv.XXXXXX";
		if (!mkdtemp(dir))
			return 1;
		/* CUPTI attached at cuInit (NVLPROF_CUPTI=1) whatever the default: its driver callbacks */
		const char *env[] = {run == 3 ? "NVLPROF_DRIVER=0" : "NVLPROF_DRIVER",
		                     "NVLPROF_KERNELS=off", "NVLPROF_CUPTI=1", NULL};
		int rc = shim_run_child(self, lib, dir, "0", env, run == 3 ? "static" : mode);
		struct summary s;
		summarize(dir, &s);
		if (run == 3) {
			/* the child's checks on Kineto pass without driver capture too */
			CHECK(rc == 0, "[%s] child ran and its checks passed (rc %d)", mode, rc);
			CHECK(cu_records(&s, NVLP_K_MANAGED) + cu_records(&s, NVLP_K_COPY) +
			              cu_records(&s, NVLP_K_PEER) ==
			          0,
			      "[%s] no driver-level records", mode);
			CHECK(s.driver_cfg_note == 1, "[%s] a NOTE says driver capture is off", mode);
		} else if (run < 2) {
			CHECK(rc == 0, "[%s] child ran and its checks passed (rc %d)", mode, rc);
			const unsigned long long *m = s.fn[NVLP_K_MANAGED], *c = s.fn[NVLP_K_COPY];
			CHECK(m[NVLP_CUDA_CU_MEM_ALLOC_MANAGED] == 1 && m[NVLP_CUDA_CU_MEM_FREE] == 1 &&
			          m[NVLP_CUDA_CU_MEM_PREFETCH_ASYNC] == 1 &&
			          m[NVLP_CUDA_CU_MEM_ADVISE] == 1 && s.kinds[NVLP_K_MANAGED] == 4,
			      "[%s] managed alloc, prefetch, advise, free: one record each (%llu)",
			      mode, s.kinds[NVLP_K_MANAGED]);
			CHECK(s.prefetch_target0 == 1 && s.free_bytes == MB,
			      "[%s] prefetch target and freed size recorded", mode);
			CHECK(c[NVLP_CUDA_CU_MEMCPY_HTOD] == 1 && c[NVLP_CUDA_CU_MEMCPY_DTOH] == 1 &&
			          c[NVLP_CUDA_CU_MEMCPY_DTOD] == 1 && c[NVLP_CUDA_CU_MEMCPY_ASYNC] == 1 &&
			          c[NVLP_CUDA_CU_MEMCPY_PEER] == 1 && s.kinds[NVLP_K_COPY] == 5,
			      "[%s] managed and cross-device copies once each, no others (%llu)", mode,
			      s.kinds[NVLP_K_COPY]);
			CHECK(s.cross_dev == 2 && s.async_stream == 1,
			      "[%s] cross-device copies carry devices 0 -> 1 and their stream", mode);
			CHECK(s.peer_enabled == 1, "[%s] peer copy after cuCtxEnablePeerAccess: "
			                           "peer_enabled 1",
			      mode);
			CHECK(s.fn[NVLP_K_PEER][NVLP_CUDA_CU_CTX_ENABLE_PEER_ACCESS] == 1 &&
			          s.kinds[NVLP_K_PEER] == 1,
			      "[%s] one PEER record", mode);
			CHECK(s.nostack == 0 && s.stacks_missing == 0 && s.nused == 9,
			      "[%s] every record has a stack in the trace (%d, %llu missing)", mode,
			      s.nused, s.stacks_missing);
			CHECK(s.notes[NVLP_NOTE_UM_ON] == 1, "[%s] UM counters NOTE", mode);
			CHECK(s.notes[NVLP_NOTE_SHARED_CUPTI] >= 1,
			      "[%s] NOTE says the subscription is shared", mode);
		} else {
			CHECK(rc == 0, "[%s] child ran and its checks passed (rc %d)", mode, rc);
			const unsigned long long *m = s.fn[NVLP_K_MANAGED], *c = s.fn[NVLP_K_COPY];
			CHECK(m[NVLP_CUDA_MALLOC_MANAGED] == 1 && m[NVLP_CUDA_FREE] == 1 &&
			          m[NVLP_CUDA_CU_MEM_FREE] == 0,
			      "[%s] runtime managed alloc and free recorded once, by the runtime hook",
			      mode);
			CHECK(m[NVLP_CUDA_CU_MEM_ALLOC_MANAGED] == 1 && s.kinds[NVLP_K_MANAGED] == 3,
			      "[%s] the driver-only allocation recorded by the driver path (%llu)",
			      mode, s.kinds[NVLP_K_MANAGED]);
			CHECK(c[NVLP_CUDA_MEMCPY] == 1 && c[NVLP_CUDA_CU_MEMCPY_HTOD] == 1 &&
			          s.kinds[NVLP_K_COPY] == 2,
			      "[%s] copy into the runtime's block: runtime record only; into the "
			      "driver's block: driver record only (%llu)",
			      mode, s.kinds[NVLP_K_COPY]);
			CHECK(s.nostack == 0 && s.stacks_missing == 0,
			      "[%s] every record has its stack", mode);
			CHECK(s.notes[NVLP_NOTE_UM_ON] == 1, "[%s] UM counters NOTE", mode);
		}
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return CHECK_DONE();
}

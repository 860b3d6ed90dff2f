/* hk_nvtx.c: a job that marks its steps with NVTX (NVIDIA's header-only v3 library, which loads NVTX_INJECTION64_PATH) and cudaProfilerStart/Stop, or as torch.profiler does through CUPTI's external correlation, around NCCL calls on the fake NCCL. */
#include <dlfcn.h>   /* dlopen */
#include <pthread.h> /* the second thread of kineto mode */
#include <stdio.h>   /* printf */
#include <stdlib.h>  /* getenv */
#include <string.h>  /* strcmp */

#include <cuda_profiler_api.h>
#include <cupti_activity.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>

/* nvtx STEPS: steps 0..STEPS-1, each an NVTX range "step" holding 2 allreduces (count = 100*step +
 * 1, +2), nested in "train"; before and after, 3 allreduces outside any range (count 7). Step 2 is
 * also a domain range with a registered string, step 3 a start/end range "step" on its own.
 * profiler: the same, with cudaProfilerStart before step 1 and cudaProfilerStop after step 2. */
typedef CUptiResult (*xc_push_fn)(CUpti_ExternalCorrelationKind, uint64_t);
typedef CUptiResult (*xc_pop_fn)(CUpti_ExternalCorrelationKind, uint64_t *);
static xc_push_fn xpush;
static xc_pop_fn xpop;
static int xc_bad; /* ids or return codes not the library's */
static void xc_pop_expect(CUpti_ExternalCorrelationKind k, uint64_t want)
{
	uint64_t got = 0;
	if (xpop(k, &got) != CUPTI_SUCCESS || got != want)
		xc_bad++;
}
static void *xc_thread(void *p) /* an autograd thread's own user range: not a step */
{
	(void)p;
	if (xpush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 777) != CUPTI_SUCCESS)
		xc_bad++;
	xc_pop_expect(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 777);
	return NULL;
}

/* kineto (HK_CUPTI_LIB=libcupti path): 5 steps as torch.profiler makes them while it traces CUDA (libtorch_cpu calls
 * libcupti): each step an outermost CUSTOM1 range (ProfilerStep#N) holding op ranges (CUSTOM0)
 * and a nested user range (record_function) around 2 allreduces; one more outermost CUSTOM1 range
 * on a second thread; a pop of an empty stack (its error must come back). Prints "xc ok" when
 * every id and return code was the library's. */
static int kineto(const char *lib, ncclComm_t comm)
{
	if (!dlopen(lib, RTLD_NOW | RTLD_GLOBAL))
		return fprintf(stderr, "hk_nvtx: %s\n", dlerror()), 1;
	xpush = (xc_push_fn)dlsym(RTLD_DEFAULT, "cuptiActivityPushExternalCorrelationId");
	xpop = (xc_pop_fn)dlsym(RTLD_DEFAULT, "cuptiActivityPopExternalCorrelationId");
	if (!xpush || !xpop)
		return 1;
	for (int s = 0; s < 5; s++) {
		xc_bad += xpush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 1000 + (uint64_t)s) != 0;
		xc_bad += xpush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1) != 0;
		xc_pop_expect(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1);
		xc_bad += xpush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 2000 + (uint64_t)s) != 0;
		ncclAllReduce(NULL, NULL, 100 * (size_t)s + 1, ncclFloat32, ncclSum, comm, NULL);
		ncclAllReduce(NULL, NULL, 100 * (size_t)s + 2, ncclFloat32, ncclSum, comm, NULL);
		xc_pop_expect(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 2000 + (uint64_t)s);
		if (s == 2) {
			pthread_t t;
			pthread_create(&t, NULL, xc_thread, NULL);
			pthread_join(t, NULL);
		}
		xc_pop_expect(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 1000 + (uint64_t)s);
	}
	uint64_t none;
	xc_bad += xpop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &none) != CUPTI_ERROR_QUEUE_EMPTY;
	printf("xc %s\n", xc_bad ? "BAD" : "ok");
	return 0;
}

int main(int argc, char **argv)
{
	int prof = argc >= 2 && !strcmp(argv[1], "profiler");
	int steps = 5;
	ncclUniqueId id;
	ncclComm_t comm;
	if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
		return 1;
	for (int i = 0; i < 3; i++)
		ncclAllReduce(NULL, NULL, 7, ncclFloat32, ncclSum, comm, NULL);
	if (argc >= 2 && !strcmp(argv[1], "kineto") && getenv("HK_CUPTI_LIB")) {
		int rc = kineto(getenv("HK_CUPTI_LIB"), comm);
		ncclCommDestroy(comm);
		printf("done\n");
		return rc;
	}
	nvtxDomainHandle_t dom = nvtxDomainCreateA("nvlp_test");
	nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "step");
	nvtxRangePushA("train");
	for (int s = 0; s < steps; s++) {
		if (prof && s == 1)
			cudaProfilerStart();
		nvtxRangeId_t rid = 0;
		if (s == 2) {
			nvtxEventAttributes_t a = {0};
			a.version = NVTX_VERSION;
			a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
			a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
			a.message.registered = reg;
			nvtxDomainRangePushEx(dom, &a);
		} else if (s == 3) {
			rid = nvtxRangeStartA("step");
		} else {
			nvtxRangePushA("step");
		}
		nvtxMarkA("mid");
		ncclAllReduce(NULL, NULL, 100 * (size_t)s + 1, ncclFloat32, ncclSum, comm, NULL);
		ncclAllReduce(NULL, NULL, 100 * (size_t)s + 2, ncclFloat32, ncclSum, comm, NULL);
		if (s == 2)
			nvtxDomainRangePop(dom);
		else if (s == 3)
			nvtxRangeEnd(rid);
		else
			nvtxRangePop();
		if (prof && s == 2)
			cudaProfilerStop();
	}
	nvtxRangePop();
	for (int i = 0; i < 3; i++)
		ncclAllReduce(NULL, NULL, 7, ncclFloat32, ncclSum, comm, NULL);
	ncclCommDestroy(comm);
	printf("done\n");
	return 0;
}

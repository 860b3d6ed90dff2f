/* hk_graph.c: drives a CUDA runtime of either major (12 or 13, dlopened by soname) and NCCL through
 * the shim: prefetch/advice, stream capture, graph replays. */
#include <dlfcn.h>  /* dlopen, dlsym(RTLD_DEFAULT): calls reach the shim's exports first */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* atoi */
#include <string.h> /* memset, memcmp */

#include <cuda_runtime_api.h>
#include <nccl.h>

/* Raw-word views of the calls whose signature differs between 12 and 13 (see hooks_cuda.c). */
typedef cudaError_t (*prefetch_t)(const void *, size_t, uint64_t, uint64_t, uint64_t);
typedef cudaError_t (*advise_t)(const void *, size_t, uint64_t, uint64_t);

static void *fn(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	if (!f)
		printf("missing=%s\n", name);
	return f;
}
#define F(type, name) ((type)fn(#name))

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: hk_graph CUDART_SONAME MAJOR REPLAYS [NCCL_SONAME]\n");
		return 2;
	}
	int major = atoi(argv[2]), replays = atoi(argv[3]);
	if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) ||
	    (argc > 4 && !dlopen(argv[4], RTLD_NOW | RTLD_GLOBAL))) {
		printf("dlopen failed: %s\n", dlerror());
		return 1;
	}
	if (getenv("HK_CUPTI")) { /* bring the (fake) driver up: it loads the shim's injection */
		void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
		int (*init)(unsigned) = drv ? (int (*)(unsigned))dlsym(drv, "cuInit") : NULL;
		printf("cuinit rc=%d\n", init ? init(0) : -1);
	}
	void *m = NULL;
	cudaStream_t st = (cudaStream_t)(uintptr_t)0x5100;
	int rc = F(cudaError_t(*)(void **, size_t, unsigned), cudaMallocManaged)(&m, 4096, 1);
	printf("managed rc=%d\n", rc);
	/* device 1, on st: 12 passes (p, n, int dev, stream), 13 (p, n, location, flags, stream) */
	struct cudaMemLocation loc = {cudaMemLocationTypeDevice, 1};
	uint64_t w;
	memcpy(&w, &loc, sizeof w);
	prefetch_t pf = F(prefetch_t, cudaMemPrefetchAsync);
	rc = major == 12 ? pf(m, 4096, 1, (uintptr_t)st, 0) : pf(m, 4096, w, 0, (uintptr_t)st);
	int dev = -9;
	unsigned flags = 9;
	void *got = NULL;
	/* fake-only introspection: absent from a real runtime (then the run only proves no crash)
	 */
	void (*last)(int *, unsigned *, void **) =
	    (void (*)(int *, unsigned *, void **))dlsym(RTLD_DEFAULT, "fake_cuda_last_prefetch");
	if (last)
		last(&dev, &flags, &got);
	printf("prefetch rc=%d dev=%d stream_ok=%d\n", rc, dev, got == (void *)st);
	advise_t ad = F(advise_t, cudaMemAdvise);
	rc = ad(m, 4096, cudaMemAdviseSetPreferredLocation, major == 12 ? 1 : w);
	printf("advise rc=%d\n", rc);

	/* Capture a copy between devices and an NCCL all-reduce, then replay them. */
	char *a = NULL, *b = NULL;
	int (*set_dev)(int) = F(int (*)(int), cudaSetDevice);
	cudaError_t (*dmalloc)(void **, size_t) = F(cudaError_t(*)(void **, size_t), cudaMalloc);
	set_dev(0), dmalloc((void **)&a, 256);
	set_dev(1), dmalloc((void **)&b, 256);
	set_dev(0);
	if (!a || !b) { /* a real runtime without a driver: every call failed, none crashed */
		printf("no device memory: stopping after the capture calls\n");
		cudaGraph_t g0 = NULL;
		rc = F(cudaError_t(*)(cudaStream_t, enum cudaStreamCaptureMode),
		       cudaStreamBeginCapture)(st, cudaStreamCaptureModeGlobal);
		rc |= F(cudaError_t(*)(cudaStream_t, cudaGraph_t *), cudaStreamEndCapture)(st, &g0);
		printf("capture rc=%d\n", rc);
		return 0;
	}
	memset(a, 7, 256), memset(b, 0, 256);
	ncclComm_t comm = NULL;
	int devs[1] = {0};
	if (argc > 4)
		F(ncclResult_t(*)(ncclComm_t *, int, const int *), ncclCommInitAll)(&comm, 1, devs);
	typedef ncclResult_t (*ar_t)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
	                             ncclComm_t, cudaStream_t);
	ar_t ar = argc > 4 ? F(ar_t, ncclAllReduce) : NULL;
	/* HK_BCAST=N: N eager ncclBroadcasts first (as DDP broadcasts its parameters): NCCL then
	 * numbers the AllReduces from 0 while the shim's seq has counted the Broadcasts */
	int nb = ar && getenv("HK_BCAST") ? atoi(getenv("HK_BCAST")) : 0;
	typedef ncclResult_t (*bc_t)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
	                             cudaStream_t);
	for (int i = 0; i < nb; i++)
		F(bc_t, ncclBroadcast)(a, a, 64, ncclFloat, 0, comm, st);
	if (ar)
		ar(a, a, 64, ncclFloat, ncclSum, comm, st); /* eager, before the capture */
	rc = F(cudaError_t(*)(cudaStream_t, enum cudaStreamCaptureMode),
	       cudaStreamBeginCapture)(st, cudaStreamCaptureModeGlobal);
	printf("begin rc=%d\n", rc);
	typedef cudaError_t (*cp_t)(void *, const void *, size_t, enum cudaMemcpyKind,
	                            cudaStream_t);
	rc = F(cp_t, cudaMemcpyAsync)(b, a, 256, cudaMemcpyDeviceToDevice, st);
	if (ar)
		ar(a, a, 64, ncclFloat, ncclSum, comm, st);
	cudaGraph_t g = NULL;
	rc |= F(cudaError_t(*)(cudaStream_t, cudaGraph_t *), cudaStreamEndCapture)(st, &g);
	printf("captured rc=%d copied_during_capture=%d\n", rc, b[0] == 7);
	cudaGraphExec_t e = NULL;
	rc = F(cudaError_t(*)(cudaGraphExec_t *, cudaGraph_t, unsigned long long),
	       cudaGraphInstantiateWithFlags)(&e, g, 0);
	printf("instantiate rc=%d\n", rc);
	cudaError_t (*launch)(cudaGraphExec_t, cudaStream_t) =
	    F(cudaError_t(*)(cudaGraphExec_t, cudaStream_t), cudaGraphLaunch);
	int ok = 0;
	for (int i = 0; i < replays; i++)
		ok += launch(e, st) == cudaSuccess;
	int (*saw)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_graph_launches");
	printf("launches ok=%d of %d fake_saw=%d data_ok=%d\n", ok, replays, saw ? saw() : -1,
	       b[0] == 7 && b[255] == 7);
	if (ar)
		ar(a, a, 64, ncclFloat, ncclSum, comm, st); /* eager, after */
	/* HK_CUPTI=libcupti.so.N: have that (fake) CUPTI, which the shim loaded, make kernel
	 * records */
	const char *cupti = getenv("HK_CUPTI");
	void *h = cupti ? dlopen(cupti, RTLD_NOW | RTLD_NOLOAD) : NULL;
	void (*gen)(int, int) = h ? (void (*)(int, int))dlsym(h, "fake_cupti_generate") : NULL;
	printf("cupti_loaded=%d\n", gen != NULL);
	if (gen)
		gen(10 /* CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL */, 4);
	return 0;
}

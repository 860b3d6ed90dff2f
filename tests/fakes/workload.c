/* workload.c: a stand-in for libtorch_cuda.so: linked against the fake NCCL and cudart, loaded RTLD_LOCAL. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h> /* workload_thread */
#include <stdint.h>

/* The first NCCL call of the process, made while dlopen holds the dynamic loader's lock: the
 * shim resolves the real function right here and must not deadlock. */
static ncclResult_t ctor_rc = ncclInternalError;
__attribute__((constructor)) static void load_time_call(void)
{
	ncclUniqueId id;
	ctor_rc = ncclGetUniqueId(&id);
}

/* One single-rank communicator, n all-reduces and one cross-device copy.
 * @return the number of calls that failed */
__attribute__((visibility("default"))) int workload_run(int n)
{
	int bad = ctor_rc != ncclSuccess;
	ncclUniqueId id;
	ncclComm_t comm;
	bad += ncclGetUniqueId(&id) != ncclSuccess;
	bad += ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess;
	for (int i = 0; i < n; i++)
		bad += ncclAllReduce(NULL, NULL, 256, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess;
	void *a, *b;
	bad += cudaSetDevice(0) != cudaSuccess;
	bad += cudaMalloc(&a, 4096) != cudaSuccess;
	bad += cudaSetDevice(1) != cudaSuccess;
	bad += cudaMalloc(&b, 4096) != cudaSuccess;
	bad += cudaMemcpy(b, a, 4096, cudaMemcpyDeviceToDevice) != cudaSuccess;
	bad += ncclCommDestroy(comm) != ncclSuccess;
	return bad;
}

static void *workload_main(void *n)
{
	return (void *)(intptr_t)workload_run((int)(intptr_t)n);
}

/* workload_run on a thread of its own (one Python never ran on: it has no Python location).
 * @return the number of calls that failed, -1 no thread */
__attribute__((visibility("default"))) int workload_thread(int n)
{
	pthread_t t;
	void *rc;
	if (pthread_create(&t, NULL, workload_main, (void *)(intptr_t)n))
		return -1;
	pthread_join(t, &rc);
	return (int)(intptr_t)rc;
}

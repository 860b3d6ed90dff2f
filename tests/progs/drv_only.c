/* drv_only.c: a driver-only CUDA program (as CuPy with its static runtime, or JAX): the fake
 * libcuda and libcupti, no libcudart. For test_cupti_detach: with NVLPROF_CUPTI=startup, the
 * driver path is the only one that sees its copies, so CUPTI stays attached.
 *   drv_only [child] [MS]: cuInit, then a cross-device copy every 10 ms for MS ms (1000). */
#include <cuda.h>   /* cuInit, cuMemAlloc_v2, cuMemcpyDtoD_v2 */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* atoi */
#include <time.h>   /* nanosleep */

void fake_cuda_set_device(int dev);
int fake_cupti_finalize_calls(void);

int main(int argc, char **argv)
{
	int ms = argc > 2 ? atoi(argv[2]) : 1000;
	CUdeviceptr d0 = 0, d1 = 0;
	cuInit(0);
	fake_cuda_set_device(1);
	cuMemAlloc_v2(&d1, 1 << 16);
	fake_cuda_set_device(0);
	cuMemAlloc_v2(&d0, 1 << 16);
	struct timespec ts = {0, 10000000L};
	for (int i = 0; i < ms / 10; i++) {
		cuMemcpyDtoD_v2(d1, d0, 4096);
		nanosleep(&ts, NULL);
	}
	printf("drv_only: %d copies, cuptiFinalize called %d times\n", ms / 10,
	       fake_cupti_finalize_calls());
	return fake_cupti_finalize_calls() != 0;
}

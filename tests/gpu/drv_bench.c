/* drv_bench.c: host ns per driver call (cuMemcpyDtoDAsync same device, cuMemcpyHtoDAsync before and after a managed allocation, cuCtxGetDevice as a control), to compare with and without nvlprof's driver callbacks. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}
#define N 500 /* below the stream queue depth: the host cost, not the GPU's */
#define REPS 21
#define BENCH(label, call)                                                                         \
	do {                                                                                       \
		double t[REPS];                                                                    \
		for (int r = 0; r < REPS; r++) {                                                   \
			double t0 = now();                                                         \
			for (int i = 0; i < N; i++)                                                \
				call;                                                              \
			t[r] = (now() - t0) / N;                                                   \
			cuStreamSynchronize(st);                                                   \
		}                                                                                  \
		qsort(t, REPS, sizeof t[0], cmp);                                                  \
		printf("drv_bench: %-28s median %.0f ns/call (min %.0f, max %.0f)\n", label,       \
		       t[REPS / 2], t[0], t[REPS - 1]);                                            \
	} while (0)

int main(void)
{
	CUdevice d;
	CUcontext ctx;
	CUstream st;
	CUdeviceptr a, b, m;
	static char host[64];
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) ||
	    cuCtxSetCurrent(ctx) || cuStreamCreate(&st, 1) || cuMemAlloc(&a, 1 << 20) ||
	    cuMemAlloc(&b, 1 << 20)) {
		printf("drv_bench: CUDA setup failed\n");
		return 1;
	}
	int dev;
	BENCH("cuCtxGetDevice (control)", cuCtxGetDevice(&dev));
	BENCH("cuMemcpyDtoDAsync 64 B", cuMemcpyDtoDAsync(b, a, 64, st));
	BENCH("cuMemcpyHtoDAsync 64 B", cuMemcpyHtoDAsync(a, host, 64, st));
	if (cuMemAllocManaged(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL))
		return 1;
	BENCH("cuMemcpyHtoDAsync, managed", cuMemcpyHtoDAsync(a, host, 64, st));
	BENCH("cuMemcpyDtoDAsync, managed", cuMemcpyDtoDAsync(b, a, 64, st));
	cuMemFree(m);
	return 0;
}

/* cuda12_app.c: a program linked against CUDA 12's runtime (libcudart.so.12): device and managed
 * copies, prefetch/advice with 12's signatures, a kernel (driver API, from PTX) touching managed
 * memory. */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* malloc */
#include <string.h> /* memset */

#include <cuda.h> /* cuModuleLoadData, cuLaunchKernel: the kernel, without nvcc's registration */

/* CUDA 12.4's runtime API, declared here: the build machine has only CUDA 13's headers, whose
 * cudaMemPrefetchAsync / cudaMemAdvise take a cudaMemLocation (12's take an int device). */
typedef int rt_err;
rt_err cudaSetDevice(int);
rt_err cudaMalloc(void **, size_t);
rt_err cudaMallocManaged(void **, size_t, unsigned);
rt_err cudaFree(void *);
rt_err cudaMemcpy(void *, const void *, size_t, int);
rt_err cudaMemPrefetchAsync(const void *, size_t, int, void *);
rt_err cudaMemAdvise(const void *, size_t, int, int);
rt_err cudaDeviceSynchronize(void);
rt_err cudaRuntimeGetVersion(int *);

extern const char bump_ptx[]; /* bump(float *p, int n): p[i] += 1 */

#define CK(x)                                                                                      \
	do {                                                                                       \
		int e_ = (int)(x);                                                                 \
		if (e_) {                                                                          \
			printf("FAILED %s: %d\n", #x, e_);                                         \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 4;
	size_t n = 16u << 20, bytes = n * sizeof(float);
	int v = 0;
	CK(cudaRuntimeGetVersion(&v));
	CK(cudaSetDevice(0));
	float *d, *m, *h = malloc(bytes);
	CK(cudaMalloc((void **)&d, bytes));
	CK(cudaMallocManaged((void **)&m, bytes, 1));
	CUmodule mod;
	CUfunction f;
	CK(cuModuleLoadData(&mod, bump_ptx));
	CK(cuModuleGetFunction(&f, mod, "bump"));
	for (size_t i = 0; i < n; i++)
		h[i] = 1.0f;
	CK(cudaMemcpy(d, h, bytes, 1 /* HostToDevice */));
	CK(cudaMemcpy(m, d, bytes, 3 /* DeviceToDevice: into managed memory */));
	int nn = (int)n;
	void *args[] = {&m, &nn};
	for (int r = 0; r < rounds; r++) { /* GPU and CPU take turns on the managed buffer */
		CK(cuLaunchKernel(f, (unsigned)(n / 256), 1, 1, 256, 1, 1, 0, 0, args, 0));
		CK(cudaDeviceSynchronize());
		for (size_t i = 0; i < n; i += 1024)
			m[i] += 1.0f;
	}
	CK(cudaMemAdvise(m, bytes, 3 /* SetPreferredLocation */, 0));
	CK(cudaMemPrefetchAsync(m, bytes, 0, 0)); /* 12's signature: int device, stream */
	CK(cuLaunchKernel(f, (unsigned)(n / 256), 1, 1, 256, 1, 1, 0, 0, args, 0));
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(h, m, bytes, 2 /* DeviceToHost */));
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += h[i];
	printf("cudart %d: sum=%.0f expected=%.0f\n", v, sum,
	       (double)n * (rounds + 2) + (double)(n / 1024) * rounds);
	CK(cudaFree(m));
	CK(cudaFree(d));
	return 0;
}

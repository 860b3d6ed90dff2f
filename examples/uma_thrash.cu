// uma_thrash.cu: one managed buffer written in turn by GPU0, GPU1 and the CPU: page migrations (thrashing), or few with --advise.
// Build: nvcc -O2 -arch=sm_90 -o uma_thrash examples/uma_thrash.cu
// Usage: uma_thrash [rounds=10] [MiB=64] [--advise]
//   default : each round GPU0 writes the whole buffer, then GPU1, then the CPU touches every page:
//             every touch migrates pages (UM counter records: faults, HtoD/DtoH/DtoD bytes)
//   --advise: cudaMemAdvise(SetPreferredLocation CPU, SetAccessedBy GPU0 and GPU1) and one
//             cudaMemPrefetchAsync to the CPU: the pages stay in host memory and both GPUs map them
//             (remote access) instead of pulling them over, so almost nothing migrates. (Preferring
//             GPU0 is not enough on an x86 host: the CPU cannot map GPU memory, so its touches still
//             migrate every page, seen on H200.)
// NVLP_SETTLE_MS (default 2500): pause after CUDA is up, so that a profiler's counters are running.
// Prints per-round and total time, bytes touched; exit 0 on success. Keep MiB <= 256.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "uma_thrash: %s: %s\n", #x, cudaGetErrorString(e_));       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

__global__ void add(int *p, size_t n, int v)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] += v;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct cudaMemLocation loc(enum cudaMemLocationType t, int id)
{
	struct cudaMemLocation l;
	memset(&l, 0, sizeof l);
	l.type = t;
	l.id = id;
	return l;
}

/* Give a profiler's link-counter sampling (set up once a context exists) time to start. */
static void settle(void)
{
	const char *e = getenv("NVLP_SETTLE_MS");
	long ms = e ? atol(e) : 2500;
	if (ms > 0) {
		CK(cudaSetDevice(1));
		CK(cudaFree(0)); /* make sure both GPUs have a context */
		CK(cudaSetDevice(0));
		usleep((useconds_t)ms * 1000);
	}
}

int main(int argc, char **argv)
{
	int rounds = 10, advise = 0;
	size_t mib = 64;
	for (int i = 1, pos = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--advise"))
			advise = 1;
		else if (pos++ == 0)
			rounds = atoi(argv[i]);
		else
			mib = (size_t)atol(argv[i]);
	}
	if (rounds <= 0 || !mib || mib > 256) {
		fprintf(stderr, "usage: uma_thrash [rounds=10] [MiB=64, at most 256] [--advise]\n");
		return 2;
	}
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	if (n < 2) {
		fprintf(stderr, "uma_thrash: needs 2 GPUs, found %d\n", n);
		return 1;
	}
	size_t bytes = mib << 20, count = bytes / sizeof(int);
	int *m = NULL;
	CK(cudaSetDevice(0));
	CK(cudaMallocManaged(&m, bytes, cudaMemAttachGlobal));
	memset(m, 0, bytes);
	if (advise) {
		CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetPreferredLocation, loc(cudaMemLocationTypeHost, 0)));
		CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetAccessedBy, loc(cudaMemLocationTypeDevice, 0)));
		CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetAccessedBy, loc(cudaMemLocationTypeDevice, 1)));
		CK(cudaMemPrefetchAsync(m, bytes, loc(cudaMemLocationTypeHost, 0), 0, 0));
		CK(cudaDeviceSynchronize());
	}
	settle();
	const size_t page = 4096 / sizeof(int);
	double t0 = now_ms();
	for (int r = 0; r < rounds; r++) {
		double r0 = now_ms();
		for (int d = 0; d < 2; d++) {
			CK(cudaSetDevice(d));
			add<<<264, 256>>>(m, count, 1);
			CK(cudaGetLastError());
			CK(cudaDeviceSynchronize());
		}
		for (size_t i = 0; i < count; i += page) /* the CPU touches every page */
			m[i] += 1;
		printf("round %d: %.2f ms\n", r, now_ms() - r0);
	}
	double total = now_ms() - t0;
	/* every element got +2 per round, page heads +3 */
	if (m[1] != 2 * rounds || m[0] != 3 * rounds) {
		fprintf(stderr, "uma_thrash: wrong contents (%d, %d)\n", m[0], m[1]);
		return 1;
	}
	printf("%s: %d rounds over a %zu-byte managed buffer (GPU0, GPU1, CPU each touch it every round): "
	       "%.2f ms total, %.2f ms/round, %zu bytes touched by GPUs\n",
	       advise ? "advised (preferred GPU0, accessed by GPU1 and CPU, prefetched)" : "no advice",
	       rounds, bytes, total, total / rounds, 2 * bytes * (size_t)rounds);
	CK(cudaFree(m));
	printf("ok\n");
	return 0;
}

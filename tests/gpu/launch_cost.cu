// launch_cost.cu: host time per kernel launch, the cost CUPTI kernel tracing adds to every launch.
// Run it side by side without and with nvlprof (and with parts of nvlprof off) to split the
// overhead seen on a training step into per-launch cost x launches per step (run_gpu.sh launch).
//   launch_cost [LAUNCHES=200000] [ROUNDS=5]   prints: launch_cost: median N ns/launch ...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

__global__ void empty_kernel(int *p)
{
	if (p && threadIdx.x == 1024) // never true: the kernel does nothing, but is not optimised away
		*p = 1;
}

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	if (n <= 0 || rounds <= 0) {
		fprintf(stderr, "usage: launch_cost [LAUNCHES] [ROUNDS]\n");
		return 2;
	}
	CK(cudaSetDevice(0));
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	for (int i = 0; i < 1000; i++) // warm-up: module load, CUPTI and sampler setup
		empty_kernel<<<1, 32, 0, st>>>(nullptr);
	CK(cudaStreamSynchronize(st));
	std::vector<double> ns;
	for (int r = 0; r < rounds; r++) {
		auto t0 = std::chrono::steady_clock::now();
		for (long i = 0; i < n; i++)
			empty_kernel<<<1, 32, 0, st>>>(nullptr);
		auto t1 = std::chrono::steady_clock::now(); // host enqueue time only
		CK(cudaStreamSynchronize(st));
		ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / (double)n);
	}
	CK(cudaGetLastError());
	std::vector<double> s = ns;
	std::sort(s.begin(), s.end());
	printf("launch_cost: median %.1f ns/launch over %d rounds of %ld (min %.1f, max %.1f)\n",
	       s[s.size() / 2], rounds, n, s.front(), s.back());
	return 0;
}

// launch_cost.cu: what CUPTI kernel tracing adds to every kernel, on the host and on the GPU.
// Run it side by side without and with nvlprof (and with parts of nvlprof off) to split the
// overhead seen on a training step into per-kernel cost x kernels per step (run_gpu.sh launch).
//   launch_cost [LAUNCHES=200000] [ROUNDS=5]   prints three medians over ROUNDS:
//     launch_cost: median N ns/launch        host enqueue time of an empty kernel (host cost)
//     gpu_bound: median N ns/kernel          wall time per 2000-cycle kernel, queued back to back
//                                            (the GPU is the bottleneck: GPU-side cost)
//     sync_steps: median N us/step           54 such kernels then a stream sync, like one small
//                                            training step (latency as a step sees it)
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

__global__ void spin_kernel(long long cycles, int *p)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
	if (p && threadIdx.x == 1024)
		*p = 1;
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

// ROUNDS rounds of BATCHES x (PER spin kernels of CYC cycles, then a stream sync): the wall time
// of each round per batch, in ns, into out. @return 0, or 1 on a CUDA error (printed).
static int synced_batches(cudaStream_t st, int rounds, long batches, long per, long long cyc,
                          std::vector<double> &out)
{
	for (int r = 0; r < rounds; r++) {
		auto t0 = std::chrono::steady_clock::now();
		for (long b = 0; b < batches; b++) {
			for (long i = 0; i < per; i++)
				spin_kernel<<<1, 32, 0, st>>>(cyc, nullptr);
			CK(cudaStreamSynchronize(st));
		}
		auto t1 = std::chrono::steady_clock::now();
		out.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / (double)batches);
	}
	CK(cudaGetLastError());
	return 0;
}

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
	std::sort(ns.begin(), ns.end());
	printf("launch_cost: median %.1f ns/launch over %d rounds of %ld (min %.1f, max %.1f)\n",
	       ns[ns.size() / 2], rounds, n, ns.front(), ns.back());
	fflush(stdout);

	// GPU-bound: kernels of 2000 cycles (~1 us) queued faster than the GPU runs them
	const long long cyc = 2000;
	long ng = n / 4;
	std::vector<double> g;
	if (synced_batches(st, rounds, 1, ng, cyc, g))
		return 1;
	printf("gpu_bound: median %.1f ns/kernel over %d rounds of %ld kernels of %lld cycles\n",
	       median(g) / (double)ng, rounds, ng, cyc);
	fflush(stdout);

	// step-like: 54 kernels then a sync (the DDP example launches ~54 kernels per step)
	const int per_step = 54;
	long steps = n / 100;
	std::vector<double> sv;
	if (synced_batches(st, rounds, steps, per_step, cyc, sv))
		return 1;
	printf("sync_steps: median %.2f us/step over %d rounds of %ld steps of %d kernels\n",
	       median(sv) / 1e3, rounds, steps, per_step);
	return 0;
}

// cupti_phases.cu: what a closed kernel-tracing window leaves behind: per-launch cost before, during and after CUPTI activity.
// One process, phases in order; each measures the host enqueue time of an empty kernel (median over
// rounds; immune to GPU noise) and the wall time per 2000-cycle kernel queued back to back
// (GPU-bound). Phases: never enabled; CONCURRENT_KERNEL enabled; disabled; enabled again (second
// window); disabled; cuptiFinalize; enabled again after finalize (callbacks registered again: do
// records still arrive?); disabled + cuptiFinalize. Prints the records each phase produced.
//   cupti_phases [LAUNCHES=100000] [ROUNDS=5]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <cupti.h>

__global__ void empty_kernel(int *p)
{
	if (p && threadIdx.x == 1024)
		*p = 1;
}
__global__ void spin_kernel(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
}

static std::atomic<long> records;
static void CUPTIAPI buf_req(uint8_t **b, size_t *s, size_t *m)
{
	*s = 1 << 20;
	*b = (uint8_t *)aligned_alloc(8, *s);
	*m = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid)
{
	CUpti_Activity *r = nullptr;
	while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
		records++;
	free(b);
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

static void phase(const char *name, cudaStream_t st, long n, int rounds)
{
	std::vector<double> h, g;
	long r0 = records.load();
	for (int r = 0; r < rounds; r++) {
		auto t0 = std::chrono::steady_clock::now();
		for (long i = 0; i < n; i++)
			empty_kernel<<<1, 32, 0, st>>>(nullptr);
		auto t1 = std::chrono::steady_clock::now();
		cudaStreamSynchronize(st);
		h.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
		long ng = n / 4;
		t0 = std::chrono::steady_clock::now();
		for (long i = 0; i < ng; i++)
			spin_kernel<<<1, 32, 0, st>>>(2000);
		cudaStreamSynchronize(st);
		t1 = std::chrono::steady_clock::now();
		g.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / ng);
	}
	cuptiActivityFlushAll(1);
	printf("phase %-28s launch %7.1f ns (min %7.1f)  gpu_bound %7.1f ns/kernel  records %ld\n", name,
	       median(h), *std::min_element(h.begin(), h.end()), median(g), records.load() - r0);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	cudaSetDevice(0);
	cudaStream_t st;
	cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
	for (int i = 0; i < 1000; i++)
		empty_kernel<<<1, 32, 0, st>>>(nullptr);
	cudaStreamSynchronize(st);
	phase("never-enabled", st, n, rounds);
	cuptiActivityRegisterCallbacks(buf_req, buf_done);
	CUptiResult e = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	phase(e == CUPTI_SUCCESS ? "enabled" : "enabled(FAILED)", st, n, rounds);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	phase("disabled", st, n, rounds);
	cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	phase("enabled-again", st, n, rounds);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	phase("disabled-again", st, n, rounds);
	auto f0 = std::chrono::steady_clock::now();
	CUptiResult f = cuptiFinalize();
	auto f1 = std::chrono::steady_clock::now();
	printf("cuptiFinalize: rc %d in %.2f ms\n", (int)f,
	       std::chrono::duration<double, std::milli>(f1 - f0).count());
	phase("after-finalize", st, n, rounds);
	f0 = std::chrono::steady_clock::now();
	CUptiResult rr = cuptiActivityRegisterCallbacks(buf_req, buf_done);
	CUptiResult re = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	f1 = std::chrono::steady_clock::now();
	printf("re-subscribe after finalize: register rc %d, enable rc %d, %.2f ms\n", (int)rr, (int)re,
	       std::chrono::duration<double, std::milli>(f1 - f0).count());
	phase("enabled-after-finalize", st, n, rounds);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cuptiActivityFlushAll(1);
	f = cuptiFinalize();
	phase("finalized-twice", st, n, rounds);
	return 0;
}

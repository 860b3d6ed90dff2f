// cupti_parts.cu: which part of CUPTI, as nvlprof's default uses it, costs the launching thread.
// One process, one pinned thread; the parts are switched on and off in turn, ROUNDS times, so
// each "on" is compared with the "off" just before and after it (the machine's drift cancels):
//   callbacks  subscribed, driver-API callbacks on for the calls nvlprof's default traces
//              (managed memory, prefetch, advice, peer access, device/peer copies; not launches)
//   kinds      the DEVICE and NVLINK activity kinds on (topology), buffers registered
//   subscribed a subscriber with no callback enabled
//   domain     positive control: every driver-API callback on (the launch's own among them), to
//              show the probe sees a cost of the launching thread when there is one
// Each phase is one batch of LAUNCHES empty kernels through the runtime (as torch launches),
// short (~8 ms) so that the machine's slow states (seen: turns of a launch loop 30% apart) mostly
// span an "on" phase and its two "off" neighbours. Prints, per part, the mean and median of
// on - mean(off before, off after) with the mean's 2-SE interval, in ns and in % of a launch, and
// the launch before any CUPTI call against after all (what switching off leaves behind).
//   cupti_parts [LAUNCHES=2000] [ROUNDS=400]   (~1 min at 4 us a launch)
#include <algorithm>
#include <chrono>
#include <cmath>
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

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
#define CU(x)                                                                                      \
	do {                                                                                       \
		CUptiResult r_ = (x);                                                              \
		if (r_ != CUPTI_SUCCESS) {                                                         \
			const char *s_ = "?";                                                      \
			cuptiGetResultString(r_, &s_);                                             \
			fprintf(stderr, "%s: %s\n", #x, s_);                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static void CUPTIAPI on_call(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *)
{
}
static void CUPTIAPI buf_req(uint8_t **b, size_t *sz, size_t *max)
{
	*sz = 1 << 20;
	*b = (uint8_t *)aligned_alloc(8, *sz);
	*max = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t)
{
	free(b);
}

// the driver calls nvlprof's default traces (cupti/callbacks.c's DRV_CALLS, host<->device copies
// only after a managed allocation: not here)
static const CUpti_CallbackId traced[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAdvise,
    CUPTI_DRIVER_TRACE_CBID_cuCtxEnablePeerAccess,
    CUPTI_DRIVER_TRACE_CBID_cuCtxDisablePeerAccess,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
};
static CUpti_SubscriberHandle sub;

static void subscribed(bool on)
{
	if (on)
		CU(cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_call, nullptr));
	else
		CU(cuptiUnsubscribe(sub));
}
static void callbacks(bool on)
{
	subscribed(on);
	if (on)
		for (CUpti_CallbackId c : traced)
			CU(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, c));
}
static void domain(bool on)
{
	subscribed(on);
	if (on)
		CU(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API));
}
static void kinds(bool on)
{
	if (on) {
		CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE));
		CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_NVLINK));
	} else {
		CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DEVICE));
		CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_NVLINK));
	}
}

// ns per launch of one batch of n launches (the batch's kernels finish before the next batch)
static double per_launch(cudaStream_t st, long n)
{
	auto t0 = std::chrono::steady_clock::now();
	for (long i = 0; i < n; i++)
		empty_kernel<<<1, 32, 0, st>>>(nullptr);
	auto t1 = std::chrono::steady_clock::now();
	CK(cudaStreamSynchronize(st));
	return std::chrono::duration<double, std::nano>(t1 - t0).count() / (double)n;
}

struct part {
	const char *name;
	void (*sw)(bool);
	std::vector<double> d; // on - mean(off before, off after)
	double off;            // sum of the off phases' means
};

static void report(part &p)
{
	std::vector<double> &d = p.d;
	double m = 0, s = 0, base = p.off / (double)d.size();
	for (double x : d)
		m += x;
	m /= (double)d.size();
	for (double x : d)
		s += (x - m) * (x - m);
	double se2 =
	    d.size() > 1 ? 2 * std::sqrt(s / (double)(d.size() - 1) / (double)d.size()) : NAN;
	std::sort(d.begin(), d.end());
	double med = d[d.size() / 2];
	printf(
	    "cupti_parts: %-10s %+7.1f ns/launch +- %5.1f (2 SE) = %+5.2f%% +- %4.2f of a launch; "
	    "median %+7.1f ns; %zu rounds; off %.0f ns\n",
	    p.name, m, se2, 100 * m / base, 100 * se2 / base, med, d.size(), base);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000;
	int rounds = argc > 2 ? atoi(argv[2]) : 400;
	if (n <= 0 || rounds <= 1) {
		fprintf(stderr, "usage: cupti_parts [LAUNCHES] [ROUNDS>1]\n");
		return 2;
	}
	CK(cudaSetDevice(0));
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	for (int i = 0; i < 20; i++)
		per_launch(st, n); // warm-up
	// before any CUPTI call: what the "off" phases are compared with at the end (a part
	// switched off may leave some of its cost behind)
	double never = 0;
	for (int i = 0; i < 20; i++)
		never += per_launch(st, n) / 20;
	CU(cuptiActivityRegisterCallbacks(buf_req, buf_done));
	part parts[] = {{"subscribed", subscribed, {}, 0},
	                {"callbacks", callbacks, {}, 0},
	                {"kinds", kinds, {}, 0},
	                {"domain", domain, {}, 0}};
	for (int r = 0; r < rounds; r++)
		for (part &p : parts) {
			double a = per_launch(st, n);
			p.sw(true);
			double b = per_launch(st, n);
			p.sw(false);
			double c = per_launch(st, n);
			p.d.push_back(b - (a + c) / 2);
			p.off += (a + c) / 2;
		}
	for (part &p : parts)
		report(p);
	double after = 0;
	for (int i = 0; i < 20; i++)
		after += per_launch(st, n) / 20;
	printf("cupti_parts: before any CUPTI call %.0f ns/launch; after (all parts off) %.0f\n",
	       never, after);
	CU(cuptiActivityFlushAll(0));
	return 0;
}

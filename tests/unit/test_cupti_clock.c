/* test_cupti_clock.c: CUPTI timestamps of either clock (ours, or torch.profiler's system clock) land on CLOCK_MONOTONIC. */
#include "check.h"
#include "cupti_int.h"

int main(void)
{
	/* mono = realtime + real_off; a monotonic clock ~1 h after boot, a system clock in 2026 */
	const int64_t real_off = -1795978000000000000ll + 3600000000000ll;
	struct nvlp_cupti_clock ours = {1, 0, real_off};
	CHECK(nvlp_cupti_ts(&ours, 3600000000123ull) == 3600000000123ull,
	      "our timestamp callback (CLOCK_MONOTONIC) passes through");
	CHECK(nvlp_cupti_ts(&ours, 1795978000000000456ull) == 3600000000456ull,
	      "after torch.profiler installs its system-clock callback, epoch-sized stamps convert");
	CHECK(nvlp_cupti_ts(&ours, 0) == 0, "0 (no time) stays 0");
	struct nvlp_cupti_clock other = {0, 1000, real_off};
	CHECK(nvlp_cupti_ts(&other, 5000) == 6000, "a foreign clock converts by the pairing offset");
	CHECK(nvlp_cupti_ts(&other, 1795978000000000456ull) == 3600000000456ull,
	      "epoch-sized stamps use the realtime pairing whatever the identity flag");
	struct nvlp_cupti_clock unpaired = {1, 0, 0};
	CHECK(nvlp_cupti_ts(&unpaired, 1795978000000000456ull) == 1795978000000000456ull,
	      "before any realtime pairing, values are kept as they are");
	return CHECK_DONE();
}

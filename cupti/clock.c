/* clock.c: the one owner of the GPU-activity clock: CUPTI's timestamp callback, CLOCK pairs, conversion offsets. */
/*
 * A timestamp callback makes CUPTI stamp activity with CLOCK_MONOTONIC, the API records' clock.
 * CLOCK records pair cuptiGetTimestamp() (source 1) and CLOCK_REALTIME (source 2, the GPU time PM
 * samples use) with CLOCK_MONOTONIC at start and at every flush; when the callback could not be
 * registered, activity times are converted with the latest CUPTI pairing.
 */
#include <time.h> /* clock_gettime */

#include "cupti_int.h"
#include "nvlp_rt.h"

static struct {
	struct nvlp_cupti_clock clk;
	int64_t real_off; /* mono - realtime */
} S;

static uint64_t CUPTIAPI mono_timestamp(void)
{
	return nvlp_now();
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}


int nvlp_cupti_clock_register(void)
{
	if (nvlp_cu.cuptiActivityRegisterTimestampCallback &&
	    nvlp_cu.cuptiActivityRegisterTimestampCallback(mono_timestamp) == CUPTI_SUCCESS)
		S.clk.identity = 1;
	return S.clk.identity;
}

int nvlp_cupti_clock_identity(void)
{
	return S.clk.identity;
}

void nvlp_cupti_clock_get(struct nvlp_cupti_clock *c)
{
	*c = (struct nvlp_cupti_clock){S.clk.identity,
	                               __atomic_load_n(&S.clk.offset, __ATOMIC_RELAXED),
	                               __atomic_load_n(&S.real_off, __ATOMIC_RELAXED)};
}

/* Emit CLOCK pairs and refresh the conversion offsets. */
void nvlp_cupti_clock_pair(void)
{
	uint64_t cupti_ts = 0, m0 = nvlp_now();
	CUptiResult r = nvlp_cu.cuptiGetTimestamp ? nvlp_cu.cuptiGetTimestamp(&cupti_ts)
	                                          : CUPTI_ERROR_NOT_INITIALIZED;
	uint64_t m1 = nvlp_now();
	uint64_t mid = m0 + (m1 - m0) / 2;
	if (r == CUPTI_SUCCESS) {
		struct nvlp_rec_clock c = {.source = 1, .mono = mid, .other = cupti_ts};
		nvlp_emit_wait(NVLP_K_CLOCK, &c, NULL, 0, 1000);
		__atomic_store_n(&S.clk.offset, (int64_t)(mid - cupti_ts), __ATOMIC_RELAXED);
	}
	m0 = nvlp_now();
	uint64_t rt = realtime_ns();
	m1 = nvlp_now();
	mid = m0 + (m1 - m0) / 2;
	struct nvlp_rec_clock c = {.source = 2, .mono = mid, .other = rt};
	nvlp_emit_wait(NVLP_K_CLOCK, &c, NULL, 0, 1000);
	__atomic_store_n(&S.real_off, (int64_t)(mid - rt), __ATOMIC_RELAXED);
}

uint64_t nvlp_cupti_gpu_ts_to_mono(uint64_t ts)
{
	/* GPU time is host CLOCK_REALTIME ns (PTIMER synced by the driver): recognisably
	 * epoch-sized */
	struct nvlp_cupti_clock c;
	nvlp_cupti_clock_get(&c);
	return nvlp_cupti_ts(&c, ts);
}

/* clock.c: the one owner of the GPU-activity clock: CUPTI's timestamp callback, CLOCK pairs, conversion offsets. */
/*
 * A timestamp callback makes CUPTI stamp activity with CLOCK_MONOTONIC, the API records' clock.
 * CLOCK records pair cuptiGetTimestamp() (source 1) and CLOCK_REALTIME (source 2, the GPU time PM
 * samples use) with CLOCK_MONOTONIC at start and at every flush; when the callback could not be
 * registered, activity times are converted with the latest CUPTI pairing.
 *
 * When another client installs its own callback (torch.profiler's Kineto returns raw TSC ticks
 * on Linux, not ns; older ones the system clock), CUPTI stamps everything after with that clock.
 * Its callback is ours to call as well: pairs (our clock, its clock) taken at its registration
 * (two, 2 ms apart, for a first rate) and at every flush give a linear fit, rate from the first
 * to the latest pair, anchored at the latest (CLOCK records, source foreign). If it registered
 * before we started, ours is not installed over it (its window filter needs its clock).
 */
#include <pthread.h> /* the conversion's mutex */
#include <time.h>    /* clock_gettime, nanosleep */

#include "cupti_int.h"
#include "nvlp_rt.h"

static struct {
	struct nvlp_cupti_clock clk;
	int64_t real_off; /* mono - realtime */
	CUpti_TimestampCallbackFunc foreign_fn;
	uint64_t first_ts, first_mono; /* the foreign clock's first pair */
} clock_state;
/* Guards clk's foreign fields, which are read and written together. */
static pthread_mutex_t clk_mu = PTHREAD_MUTEX_INITIALIZER;

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


/* One pair of our clock and f's, read back to back (mono at the middle of the read). */
static void foreign_sample(CUpti_TimestampCallbackFunc f, uint64_t *mono, uint64_t *ts)
{
	uint64_t m0 = nvlp_now();
	*ts = f();
	uint64_t m1 = nvlp_now();
	*mono = m0 + (m1 - m0) / 2;
}

/* Caller holds clk_mu: a new pair of the foreign clock refines the fit. */
static void foreign_update_locked(uint64_t mono, uint64_t ts)
{
	/* >= 1 ms apart: a usable rate */
	if (ts > clock_state.first_ts && mono > clock_state.first_mono + 1000000)
		clock_state.clk.f_scale =
		    (double)(mono - clock_state.first_mono) / (double)(ts - clock_state.first_ts);
	clock_state.clk.f_ts = ts;
	clock_state.clk.f_mono = mono;
}

CUpti_TimestampCallbackFunc nvlp_cupti_clock_ours(void)
{
	return mono_timestamp;
}

void nvlp_cupti_clock_foreign(CUpti_TimestampCallbackFunc f, uint64_t m0, uint64_t t0)
{
	pthread_mutex_lock(&clk_mu);
	if (!f || f == mono_timestamp) {
		clock_state.foreign_fn = NULL;
		clock_state.clk.foreign = 0;
		clock_state.clk.identity = f == mono_timestamp;
		pthread_mutex_unlock(&clk_mu);
		return;
	}
	pthread_mutex_unlock(&clk_mu);
	/* A second pair 2 ms later gives a first rate (refined at every flush). */
	struct timespec two_ms = {0, 2000000};
	nanosleep(&two_ms, NULL);
	uint64_t m1, t1;
	foreign_sample(f, &m1, &t1);
	pthread_mutex_lock(&clk_mu);
	clock_state.foreign_fn = f;
	clock_state.first_ts = t0;
	clock_state.first_mono = m0;
	clock_state.clk.f_scale = t1 > t0 ? (double)(m1 - m0) / (double)(t1 - t0) : 1.0;
	clock_state.clk.f_ts = t1;
	clock_state.clk.f_mono = m1;
	clock_state.clk.switch_ts = t0;
	clock_state.clk.switch_mono = m0;
	clock_state.clk.foreign_epoch = t0 > NVLP_EPOCH_SIZED;
	clock_state.clk.foreign = 1;
	clock_state.clk.identity = 0;
	pthread_mutex_unlock(&clk_mu);
	struct nvlp_rec_clock c0 = {.source = NVLP_CLOCK_FOREIGN, .mono = m0, .other = t0};
	struct nvlp_rec_clock c1 = {.source = NVLP_CLOCK_FOREIGN, .mono = m1, .other = t1};
	nvlp_emit(NVLP_K_CLOCK, &c0, NULL, 0);
	nvlp_emit(NVLP_K_CLOCK, &c1, NULL, 0);
}

int nvlp_cupti_clock_register(void)
{
	pthread_mutex_lock(&clk_mu);
	int foreign = clock_state.clk.foreign;
	pthread_mutex_unlock(&clk_mu);
	if (foreign)
		return 0; /* another client's clock is installed: keep it, convert from it */
	if (nvlp_cu.cuptiActivityRegisterTimestampCallback &&
	    nvlp_cu.cuptiActivityRegisterTimestampCallback(mono_timestamp) == CUPTI_SUCCESS) {
		pthread_mutex_lock(&clk_mu);
		clock_state.clk.identity = 1;
		pthread_mutex_unlock(&clk_mu);
	}
	return nvlp_cupti_clock_identity();
}

int nvlp_cupti_clock_identity(void)
{
	pthread_mutex_lock(&clk_mu);
	int id = clock_state.clk.identity;
	pthread_mutex_unlock(&clk_mu);
	return id;
}

void nvlp_cupti_clock_get(struct nvlp_cupti_clock *c)
{
	pthread_mutex_lock(&clk_mu);
	*c = clock_state.clk;
	pthread_mutex_unlock(&clk_mu);
	c->offset = __atomic_load_n(&clock_state.clk.offset, __ATOMIC_RELAXED);
	c->real_off = __atomic_load_n(&clock_state.real_off, __ATOMIC_RELAXED);
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
		struct nvlp_rec_clock c = {.source = NVLP_CLOCK_CUPTI, .mono = mid, .other = cupti_ts};
		nvlp_emit_wait(NVLP_K_CLOCK, &c, NULL, 0, 1000);
		__atomic_store_n(&clock_state.clk.offset, (int64_t)(mid - cupti_ts),
		                 __ATOMIC_RELAXED);
	}
	m0 = nvlp_now();
	uint64_t rt = realtime_ns();
	m1 = nvlp_now();
	mid = m0 + (m1 - m0) / 2;
	struct nvlp_rec_clock c = {.source = NVLP_CLOCK_REALTIME, .mono = mid, .other = rt};
	nvlp_emit_wait(NVLP_K_CLOCK, &c, NULL, 0, 1000);
	__atomic_store_n(&clock_state.real_off, (int64_t)(mid - rt), __ATOMIC_RELAXED);
	pthread_mutex_lock(&clk_mu);
	CUpti_TimestampCallbackFunc f = clock_state.clk.foreign ? clock_state.foreign_fn : NULL;
	uint64_t fm = 0, ft = 0;
	if (f) {
		foreign_sample(f, &fm, &ft);
		foreign_update_locked(fm, ft);
	}
	pthread_mutex_unlock(&clk_mu);
	if (f) {
		struct nvlp_rec_clock cf = {.source = NVLP_CLOCK_FOREIGN, .mono = fm, .other = ft};
		nvlp_emit_wait(NVLP_K_CLOCK, &cf, NULL, 0, 1000);
	}
}

uint64_t nvlp_cupti_gpu_ts_to_mono(uint64_t ts)
{
	/* GPU time is host CLOCK_REALTIME ns (PTIMER synced by the driver): recognisably
	 * epoch-sized */
	struct nvlp_cupti_clock c;
	nvlp_cupti_clock_get(&c);
	return nvlp_cupti_ts(&c, ts);
}

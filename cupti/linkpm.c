/* linkpm.c: the link sampler's PM sampling: CUPTI's profiler set up on a GPU in steps (each
 * stopping when the process begins to exit), the samples decoded into LINKSAMPLE records. */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memset, strlen */

#include "link_int.h"
#include "nvlp_rt.h"

#define HW_BUFFER (64u << 20) /* PM records in GPU memory between decodes (KEEP_LATEST) */
#define MAX_SAMPLES 4000      /* decoded samples held per decode round */

/* Metric order = LINKSAMPLE field order after dur (nvl_tx .. pcie_wr). */
static const char *const METRICS[NMETRICS] = {
    "nvltx__bytes.sum",           "nvlrx__bytes.sum",     "nvltx__bytes_data_user.sum",
    "nvlrx__bytes_data_user.sum", "pcie__read_bytes.sum", "pcie__write_bytes.sum",
};

static struct {
	const volatile int *stop; /* the sampler's stop flag (linksample.c) */
	int profiler_init;        /* 1 ok, -1 failed */
	CUptiResult profiler_err;
	struct nvlp_pmh_fns host;
} pm_state;

static int stopping(void)
{
	return __atomic_load_n(pm_state.stop, __ATOMIC_ACQUIRE);
}

/* between profiler-host calls (pm_host.cc): the host library's destructor stays older than our exit
 * handler, and nothing more is called once exit began */
static int host_after_step(void)
{
	after_load();
	return stopping();
}

void nvlp_lk_pm_bind(const volatile int *stop)
{
	pm_state.stop = stop;
	pm_state.host = (struct nvlp_pmh_fns){
	    nvlp_cu.cuptiProfilerHostInitialize,
	    nvlp_cu.cuptiProfilerHostDeinitialize,
	    nvlp_cu.cuptiProfilerHostConfigAddMetrics,
	    nvlp_cu.cuptiProfilerHostGetConfigImageSize,
	    nvlp_cu.cuptiProfilerHostGetConfigImage,
	    nvlp_cu.cuptiProfilerHostGetNumOfPasses,
	    nvlp_cu.cuptiProfilerHostEvaluateToGpuValues,
	    host_after_step,
	};
}

#define PARAMS(T, v)                                                                               \
	T v;                                                                                       \
	memset(&v, 0, sizeof v);                                                                   \
	v.structSize = T##_STRUCT_SIZE

static int pm_fail(char *why, size_t len, const char *what, CUptiResult r)
{
	snprintf(why, len, "%s: %s", what, nvlp_cupti_err(r));
	return -1;
}

static int pm_exiting(char *why, size_t len)
{
	snprintf(why, len, "the process is exiting");
	return -2;
}

/* The steps of nvlp_lk_pm_setup, in the order CUPTI needs them. Those returning int return 0 to go
 * on, -1 (why says why) or -2 when the process began to exit during that step. */

/* The profiler API, initialised once per process. */
static int pm_init_profiler(char *why, size_t len)
{
	if (!nvlp_cu.cuptiPmSamplingEnable || !nvlp_cu.cuptiDeviceGetChipName ||
	    !nvlp_cu.cuptiProfilerInitialize || !pm_state.host.init) {
		snprintf(why, len, "%s has no PM sampling API", nvlp_cupti_path());
		return -1;
	}
	if (!pm_state.profiler_init) {
		PARAMS(CUpti_Profiler_Initialize_Params, pi);
		pm_state.profiler_err = nvlp_cu.cuptiProfilerInitialize(&pi);
		pm_state.profiler_init = pm_state.profiler_err == CUPTI_SUCCESS ? 1 : -1;
		after_load();
	}
	/* Stopped at exit between steps: leave what exists as it is (see the top of the file). */
	if (stopping())
		return pm_exiting(why, len);
	if (pm_state.profiler_init < 0)
		return pm_fail(why, len, "cuptiProfilerInitialize", pm_state.profiler_err);
	return 0;
}

/* The device's counter availability image in *avail (malloc'd; NULL when CUPTI gives none). */
static int pm_availability(int dev, uint8_t **avail, char *why, size_t len)
{
	PARAMS(CUpti_PmSampling_GetCounterAvailability_Params, av);
	av.deviceIndex = (size_t)dev;
	CUptiResult r = nvlp_cu.cuptiPmSamplingGetCounterAvailability(&av);
	*avail = NULL;
	if (r == CUPTI_SUCCESS && av.counterAvailabilityImageSize) {
		*avail = malloc(av.counterAvailabilityImageSize);
		av.pCounterAvailabilityImage = *avail;
		if (*avail)
			r = nvlp_cu.cuptiPmSamplingGetCounterAvailability(&av);
	}
	after_load();
	if (stopping()) {
		free(*avail);
		return pm_exiting(why, len);
	}
	if (r != CUPTI_SUCCESS) {
		free(*avail);
		return pm_fail(why, len, "counter availability (permission or counters in use)", r);
	}
	return 0;
}

/* g's metrics and config image; dropped names the metrics the chip refused. */
static CUptiResult pm_config(struct gpu *g, const char *chip, const uint8_t *avail,
                             size_t *passes, char *dropped, size_t dlen)
{
	/* all metrics in one config; if refused, keep those the chip accepts one by one */
	CUptiResult r = nvlp_pmh_config(&pm_state.host, chip, avail, METRICS, NMETRICS,
	                                &g->host, &g->cfg, &g->cfg_size, passes);
	g->nm = 0;
	dropped[0] = 0;
	if (r == NVLP_PMH_STOPPED)
		return r;
	if (r == CUPTI_SUCCESS) {
		for (int i = 0; i < NMETRICS; i++)
			g->metrics[g->nm] = METRICS[i], g->field[g->nm++] = 4 + i;
		return r;
	}
	for (int i = 0; i < NMETRICS; i++) {
		void *h;
		uint8_t *img;
		size_t sz, p;
		CUptiResult ri =
		    nvlp_pmh_config(&pm_state.host, chip, avail, &METRICS[i], 1, &h, &img, &sz, &p);
		if (ri == NVLP_PMH_STOPPED)
			return ri;
		if (ri == CUPTI_SUCCESS) {
			g->metrics[g->nm] = METRICS[i], g->field[g->nm++] = 4 + i;
			free(img);
			nvlp_pmh_destroy(&pm_state.host, h);
		} else {
			size_t l = strlen(dropped);
			snprintf(dropped + l, dlen - l, "%s%s", l ? " " : "", METRICS[i]);
		}
	}
	return g->nm ? nvlp_pmh_config(&pm_state.host, chip, avail, g->metrics, (size_t)g->nm,
	                               &g->host, &g->cfg, &g->cfg_size, passes)
	             : CUPTI_ERROR_INVALID_METRIC_NAME;
}

/* Sampling interval, buffer and trigger for g's enabled sampling object. */
static CUptiResult pm_set_config(struct gpu *g)
{
	const struct nvlp_config *cfg = nvlp_cfg();
	PARAMS(CUpti_PmSampling_SetConfig_Params, sc);
	sc.pPmSamplingObject = g->pm;
	sc.configSize = g->cfg_size;
	sc.pConfig = g->cfg;
	sc.hardwareBufferSize = HW_BUFFER;
	sc.samplingInterval = (uint64_t)cfg->sample_us * 1000u;
	sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
	sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
	return nvlp_cu.cuptiPmSamplingSetConfig(&sc);
}

/* g's counter data image, sized for MAX_SAMPLES of its metrics, initialised. */
static CUptiResult pm_counter_data(struct gpu *g)
{
	CUptiResult r;
	PARAMS(CUpti_PmSampling_GetCounterDataSize_Params, ds);
	ds.pPmSamplingObject = g->pm;
	ds.pMetricNames = g->metrics;
	ds.numMetrics = (size_t)g->nm;
	ds.maxSamples = MAX_SAMPLES;
	if ((r = nvlp_cu.cuptiPmSamplingGetCounterDataSize(&ds)) != CUPTI_SUCCESS)
		return r;
	g->data_size = ds.counterDataSize;
	g->data = malloc(g->data_size);
	if (!g->data)
		return CUPTI_ERROR_OUT_OF_MEMORY;
	PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, di);
	di.pPmSamplingObject = g->pm;
	di.counterDataSize = g->data_size;
	di.pCounterData = g->data;
	return nvlp_cu.cuptiPmSamplingCounterDataImageInitialize(&di);
}

/* Enables sampling on dev with g's config and starts it; on failure disables it again. */
static int pm_enable_start(int dev, struct gpu *g, char *why, size_t len)
{
	CUptiResult r;
	PARAMS(CUpti_PmSampling_Enable_Params, en);
	en.deviceIndex = (size_t)dev;
	if ((r = nvlp_cu.cuptiPmSamplingEnable(&en)) != CUPTI_SUCCESS)
		return pm_fail(why, len, "cuptiPmSamplingEnable", r);
	g->pm = en.pPmSamplingObject;
	after_load();
	if (stopping())
		return pm_exiting(why, len);
	if ((r = pm_set_config(g)) != CUPTI_SUCCESS)
		goto fail_enabled;
	if (stopping())
		return pm_exiting(why, len);
	if ((r = pm_counter_data(g)) != CUPTI_SUCCESS)
		goto fail_enabled;
	if (stopping())
		return pm_exiting(why, len);
	PARAMS(CUpti_PmSampling_Start_Params, st);
	st.pPmSamplingObject = g->pm;
	if ((r = nvlp_cu.cuptiPmSamplingStart(&st)) != CUPTI_SUCCESS)
		goto fail_enabled;
	return 0;
fail_enabled:
	pm_fail(why, len, "PM sampling setup", r);
	{
		PARAMS(CUpti_PmSampling_Disable_Params, dp);
		dp.pPmSamplingObject = g->pm;
		nvlp_cu.cuptiPmSamplingDisable(&dp);
	}
	g->pm = NULL;
	free(g->data);
	g->data = NULL;
	return -1;
}

int nvlp_lk_pm_setup(int dev, struct gpu *g, char *why, size_t len, char *dropped, size_t dlen)
{
	int rc = pm_init_profiler(why, len);
	if (rc != 0)
		return rc;
	PARAMS(CUpti_Device_GetChipName_Params, cn);
	cn.deviceIndex = (size_t)dev;
	CUptiResult r = nvlp_cu.cuptiDeviceGetChipName(&cn);
	if (r != CUPTI_SUCCESS)
		return pm_fail(why, len, "cuptiDeviceGetChipName", r);
	uint8_t *avail;
	if ((rc = pm_availability(dev, &avail, why, len)) != 0)
		return rc;
	size_t passes = 0;
	r = pm_config(g, cn.pChipName, avail, &passes, dropped, dlen);
	free(avail);
	after_load(); /* the host object is where libnvperf_host comes in */
	if (stopping())
		return pm_exiting(why, len);
	if (r != CUPTI_SUCCESS)
		return pm_fail(why, len, "no link metric accepted for this chip", r);
	if (passes != 1) {
		snprintf(why, len, "link metrics need %zu passes on %s (sampling needs 1)", passes,
		         cn.pChipName);
		return -1;
	}
	return pm_enable_start(dev, g, why, len);
}

/* Sample i of g's counter data image as a LINKSAMPLE record (none if CUPTI cannot read it). */
static void pm_emit_sample(int dev, struct gpu *g, size_t i)
{
	const uint64_t tol = 2000; /* ns: back-to-back samples share their boundary */
	PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params, si);
	si.pPmSamplingObject = g->pm;
	si.pCounterDataImage = g->data;
	si.counterDataImageSize = g->data_size;
	si.sampleIndex = i;
	if (nvlp_cu.cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS)
		return;
	double v[NMETRICS] = {0};
	if (nvlp_pmh_evaluate(&pm_state.host, g->host, g->data, g->data_size, i, g->metrics,
	                      (size_t)g->nm, v) != CUPTI_SUCCESS)
		return;
	struct nvlp_rec_linksample rec = {.device = (uint64_t)dev, .source = NVLP_LINK_PM_SAMPLING};
	uint64_t *f = (uint64_t *)&rec;
	rec.start = nvlp_cupti_gpu_ts_to_mono(si.startTimestamp);
	rec.dur = si.endTimestamp > si.startTimestamp ? si.endTimestamp - si.startTimestamp : 0;
	for (int m = 0; m < g->nm; m++)
		f[g->field[m]] = v[m] > 0 ? (uint64_t)(v[m] + 0.5) : 0;
	if (g->last_end && si.startTimestamp > g->last_end + tol)
		rec.flags |= NVLP_LINKSAMPLE_F_GAP;
	if (g->overflow)
		rec.flags |= NVLP_LINKSAMPLE_F_OVERFLOW, g->overflow = 0;
	g->last_end = si.endTimestamp;
	nvlp_emit_wait(NVLP_K_LINKSAMPLE, &rec, NULL, 0, 1000);
}

/* stoppable (the sampler's decodes): once exit began, return between samples; the exiting thread's
 * final decode reads the rest (img_done), while every library is still there */
static void pm_decode(int dev, struct gpu *g, int stoppable)
{
	for (int round = 0; round < 8; round++) {
		if (stoppable && stopping())
			return;
		PARAMS(CUpti_PmSampling_DecodeData_Params, dd);
		dd.pPmSamplingObject = g->pm;
		dd.pCounterDataImage = g->data;
		dd.counterDataImageSize = g->data_size;
		CUptiResult r = nvlp_cu.cuptiPmSamplingDecodeData(&dd);
		if (r != CUPTI_SUCCESS) {
			nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, (uint64_t)r,
			          "PM sampling decode failed on GPU %d: %s; link counters stop",
			          dev, nvlp_cupti_err(r));
			g->source = 0;
			return;
		}
		if (dd.overflow)
			g->overflow = 1;
		PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params, info);
		info.pCounterDataImage = g->data;
		info.counterDataImageSize = g->data_size;
		if (nvlp_cu.cuptiPmSamplingGetCounterDataInfo(&info) != CUPTI_SUCCESS)
			return;
		for (size_t i = g->img_done; i < info.numCompletedSamples; i++) {
			if (stoppable && stopping())
				return;
			g->img_done = i + 1;
			pm_emit_sample(dev, g, i);
		}
		/* start the image afresh so it never fills across rounds */
		PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, di);
		di.pPmSamplingObject = g->pm;
		di.counterDataSize = g->data_size;
		di.pCounterData = g->data;
		nvlp_cu.cuptiPmSamplingCounterDataImageInitialize(&di);
		g->img_done = 0;
		if (dd.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
			return;
	}
}

/* At exit: the last samples only. No Disable, host deinitialisation or free: the process is
 * ending, and tearing down through a library whose destructors already ran corrupts the heap (seen
 * with libnvperf_host: "double free or corruption"). */
void nvlp_lk_pm_final(int dev, struct gpu *g)
{
	PARAMS(CUpti_PmSampling_Stop_Params, sp);
	sp.pPmSamplingObject = g->pm;
	nvlp_cu.cuptiPmSamplingStop(&sp);
	pm_decode(dev, g, 0);
}

void nvlp_lk_pm_decode(int dev, struct gpu *g)
{
	pm_decode(dev, g, 1);
}

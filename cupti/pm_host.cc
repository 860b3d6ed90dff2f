// pm_host.cc: the one C++ unit: PM-sampling config images via cupti_profiler_host.h (C++ only).
// No STL use (the library links without libstdc++); CUPTI is called through the table's pointers.
#include <stdlib.h> /* malloc, free */
#include <string.h> /* memset */

#include <cupti_profiler_host.h> /* CUpti_Profiler_Host_* params */

#include "cupti_int.h"

#define NVLP_PARAMS(T, v)                                                                          \
	T v;                                                                                       \
	memset(&v, 0, sizeof v);                                                                   \
	v.structSize = T##_STRUCT_SIZE

static int stopped(const struct nvlp_pmh_fns *f)
{
	return f->after_step && f->after_step();
}

/* The config image of host object h with its metrics added (malloc'd into *img) and its passes;
 * NVLP_PMH_STOPPED when the process began to exit on the way. */
static CUptiResult image_of(const struct nvlp_pmh_fns *f, CUpti_Profiler_Host_Object *h,
                            uint8_t **img, size_t *img_size, size_t *passes)
{
	NVLP_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params, cs);
	cs.pHostObject = h;
	CUptiResult r = f->image_size(&cs);
	uint8_t *buf = NULL;
	if (r == CUPTI_SUCCESS) {
		buf = static_cast<uint8_t *>(malloc(cs.configImageSize ? cs.configImageSize : 1));
		if (!buf)
			r = CUPTI_ERROR_OUT_OF_MEMORY;
	}
	if (r == CUPTI_SUCCESS) {
		NVLP_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params, ci);
		ci.pHostObject = h;
		ci.configImageSize = cs.configImageSize;
		ci.pConfigImage = buf;
		r = f->image(&ci);
	}
	if (stopped(f)) {
		free(buf);
		return NVLP_PMH_STOPPED;
	}
	if (r == CUPTI_SUCCESS) {
		NVLP_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params, np);
		np.configImageSize = cs.configImageSize;
		np.pConfigImage = buf;
		r = f->passes(&np);
		*passes = np.numOfPasses;
	}
	if (r != CUPTI_SUCCESS) {
		free(buf);
		return r;
	}
	*img = buf;
	*img_size = cs.configImageSize;
	return CUPTI_SUCCESS;
}

extern "C" CUptiResult nvlp_pmh_config(const struct nvlp_pmh_fns *f, const char *chip,
                                       const uint8_t *avail, const char *const *metrics, size_t n,
                                       void **host, uint8_t **img, size_t *img_size, size_t *passes)
{
	*host = NULL;
	*img = NULL;
	*img_size = 0;
	*passes = 0;
	if (!f->init || !f->deinit || !f->add_metrics || !f->image_size || !f->image || !f->passes)
		return CUPTI_ERROR_NOT_SUPPORTED;

	NVLP_PARAMS(CUpti_Profiler_Host_Initialize_Params, hi);
	hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
	hi.pChipName = chip;
	hi.pCounterAvailabilityImage = avail;
	CUptiResult r = f->init(&hi);
	/* libnvperf_host may have just come in, its exit-time destructor newer than our handler:
	 * from here on, each call is made only if the process is not exiting */
	if (stopped(f))
		return NVLP_PMH_STOPPED;
	if (r != CUPTI_SUCCESS)
		return r;

	NVLP_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params, am);
	am.pHostObject = hi.pHostObject;
	am.ppMetricNames = const_cast<const char **>(metrics);
	am.numMetrics = n;
	r = f->add_metrics(&am);
	if (stopped(f))
		return NVLP_PMH_STOPPED;
	if (r == CUPTI_SUCCESS)
		r = image_of(f, hi.pHostObject, img, img_size, passes);
	if (r == NVLP_PMH_STOPPED)
		return r;
	if (r != CUPTI_SUCCESS) {
		nvlp_pmh_destroy(f, hi.pHostObject);
		return r;
	}
	*host = hi.pHostObject;
	return CUPTI_SUCCESS;
}

extern "C" CUptiResult nvlp_pmh_evaluate(const struct nvlp_pmh_fns *f, void *host,
                                         const uint8_t *data, size_t data_size, size_t index,
                                         const char *const *metrics, size_t n, double *values)
{
	if (!f->evaluate)
		return CUPTI_ERROR_NOT_SUPPORTED;
	NVLP_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params, ev);
	ev.pHostObject = static_cast<CUpti_Profiler_Host_Object *>(host);
	ev.pCounterDataImage = data;
	ev.counterDataImageSize = data_size;
	ev.rangeIndex = index;
	ev.ppMetricNames = const_cast<const char **>(metrics);
	ev.numMetrics = n;
	ev.pMetricValues = values;
	return f->evaluate(&ev);
}

extern "C" void nvlp_pmh_destroy(const struct nvlp_pmh_fns *f, void *host)
{
	if (!host || !f->deinit)
		return;
	NVLP_PARAMS(CUpti_Profiler_Host_Deinitialize_Params, d);
	d.pHostObject = static_cast<CUpti_Profiler_Host_Object *>(host);
	f->deinit(&d);
}

// pm_hold.cu: another tool holding a GPU's performance counters: CUPTI PM sampling on one GPU for a while (tests/gpu/pm_busy.sh).
// usage: pm_hold DEVICE SECONDS   prints "pm_hold: sampling GPU N" once sampling runs; after SECONDS or at
// SIGTERM "pm_hold: N samples" (its own sampling still worked) and exits 0; a CUPTI refusal: exit 1 naming it.
#include <cuda_runtime.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <vector>

#define CK(x)                                                                                      \
	do {                                                                                       \
		CUptiResult r_ = (x);                                                              \
		if (r_ != CUPTI_SUCCESS) {                                                         \
			const char *s_ = "?";                                                      \
			cuptiGetResultString(r_, &s_);                                             \
			fprintf(stderr, "pm_hold: %s: %s\n", #x, s_);                              \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static const char *METRICS[] = {"pcie__read_bytes.sum", "pcie__write_bytes.sum"};
enum { NM = 2 };

struct hold {
	CUpti_Profiler_Host_Object *host;
	CUpti_PmSampling_Object *pm;
	std::vector<uint8_t> avail, cfg, data;
};

static int host_config(int dev, hold &h)
{
	CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
	cn.deviceIndex = dev;
	CK(cuptiDeviceGetChipName(&cn));
	CUpti_PmSampling_GetCounterAvailability_Params av = {
	    CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
	av.deviceIndex = dev;
	CK(cuptiPmSamplingGetCounterAvailability(&av));
	h.avail.resize(av.counterAvailabilityImageSize);
	av.pCounterAvailabilityImage = h.avail.data();
	CK(cuptiPmSamplingGetCounterAvailability(&av));
	CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
	hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
	hi.pChipName = cn.pChipName;
	hi.pCounterAvailabilityImage = h.avail.data();
	CK(cuptiProfilerHostInitialize(&hi));
	h.host = hi.pHostObject;
	CUpti_Profiler_Host_ConfigAddMetrics_Params am = {
	    CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
	am.pHostObject = h.host;
	am.ppMetricNames = METRICS;
	am.numMetrics = NM;
	CK(cuptiProfilerHostConfigAddMetrics(&am));
	CUpti_Profiler_Host_GetConfigImageSize_Params cs = {
	    CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
	cs.pHostObject = h.host;
	CK(cuptiProfilerHostGetConfigImageSize(&cs));
	h.cfg.resize(cs.configImageSize);
	CUpti_Profiler_Host_GetConfigImage_Params ci = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
	ci.pHostObject = h.host;
	ci.configImageSize = h.cfg.size();
	ci.pConfigImage = h.cfg.data();
	CK(cuptiProfilerHostGetConfigImage(&ci));
	return 0;
}

static int start(int dev, hold &h)
{
	CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
	en.deviceIndex = dev;
	CK(cuptiPmSamplingEnable(&en));
	h.pm = en.pPmSamplingObject;
	CUpti_PmSampling_SetConfig_Params sc = {CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
	sc.pPmSamplingObject = h.pm;
	sc.configSize = h.cfg.size();
	sc.pConfig = h.cfg.data();
	sc.hardwareBufferSize = 64 << 20;
	sc.samplingInterval = 10000000; /* 10 ms */
	sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
	sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
	CK(cuptiPmSamplingSetConfig(&sc));
	CUpti_PmSampling_GetCounterDataSize_Params ds = {
	    CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
	ds.pPmSamplingObject = h.pm;
	ds.pMetricNames = METRICS;
	ds.numMetrics = NM;
	ds.maxSamples = 20000;
	CK(cuptiPmSamplingGetCounterDataSize(&ds));
	h.data.resize(ds.counterDataSize);
	CUpti_PmSampling_CounterDataImage_Initialize_Params di = {
	    CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
	di.pPmSamplingObject = h.pm;
	di.counterDataSize = h.data.size();
	di.pCounterData = h.data.data();
	CK(cuptiPmSamplingCounterDataImageInitialize(&di));
	CUpti_PmSampling_Start_Params st = {CUpti_PmSampling_Start_Params_STRUCT_SIZE};
	st.pPmSamplingObject = h.pm;
	CK(cuptiPmSamplingStart(&st));
	return 0;
}

static int finish(hold &h)
{
	CUpti_PmSampling_Stop_Params sp = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
	sp.pPmSamplingObject = h.pm;
	CK(cuptiPmSamplingStop(&sp));
	CUpti_PmSampling_DecodeData_Params dd = {CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
	dd.pPmSamplingObject = h.pm;
	dd.pCounterDataImage = h.data.data();
	dd.counterDataImageSize = h.data.size();
	CK(cuptiPmSamplingDecodeData(&dd));
	CUpti_PmSampling_GetCounterDataInfo_Params info = {
	    CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
	info.pCounterDataImage = h.data.data();
	info.counterDataImageSize = h.data.size();
	CK(cuptiPmSamplingGetCounterDataInfo(&info));
	printf("pm_hold: %zu samples\n", info.numCompletedSamples);
	return 0;
}

static volatile sig_atomic_t stop;
static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	int dev = argc > 1 ? atoi(argv[1]) : 0, secs = argc > 2 ? atoi(argv[2]) : 30;
	cudaSetDevice(dev);
	cudaFree(0); /* a context on the device */
	CUpti_Profiler_Initialize_Params pi = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
	CK(cuptiProfilerInitialize(&pi));
	hold h;
	if (host_config(dev, h) || start(dev, h))
		return 1;
	signal(SIGTERM, on_term);
	printf("pm_hold: sampling GPU %d\n", dev);
	fflush(stdout);
	for (int i = 0; i < secs && !stop; i++)
		sleep(1);
	return finish(h);
}

/* linksample.c: sampler thread: NVLink/PCIe byte counters (PM sampling, NVML). */
/*
 * One background thread per process. Every second it decodes PM samples into LINKSAMPLE records
 * (each sample's own start/end; the period is never assumed). It wakes for nothing else, except
 * every 10 ms until a GPU is in use and at NVML's period when NVML is the source (activity
 * flushes have their own schedule, in cupti.c). GPUs are sampled once they are known to be used:
 * the current context's device at a late start, any device whose streams the intercepted calls
 * used (streams.c's memo) and any device with an active primary context.
 *
 * Two processes on one GPU (two ranks sharing a device, or a data-loader that touched CUDA): the
 * counters are per GPU, not per process, and PM sampling can only be owned by one client. The first
 * process to claim the GPU samples it: it takes a non-blocking flock() on
 * /dev/shm/nvlprof-link-<GPU UUID>.lock (/tmp if /dev/shm is missing) and keeps it until it exits
 * (the kernel drops the lock even on a crash, so no stale owner). Any other process notes
 * PM_SAMPLING_UNAVAILABLE naming the owner's pid and does not sample; the owner's LINKSAMPLE
 * records already include its traffic. Lowest-rank election was rejected: ranks are not known this
 * early, and a lock needs no agreement between processes that may never talk.
 *
 * Fallback when PM sampling is unavailable (no permission, counters owned by another tool, older
 * GPU, library without the API): NVML cumulative counters (fields 138-141 NVLink data/raw KiB,
 * 197/198 PCIe TX/RX bytes) read at max(10 ms, interval), source = 2. The NOTE says which source
 * was used on each GPU and why.
 *
 * Exit. nvlp_link_stop_thread() asks the thread to stop and waits for it at most EXIT_WAIT_MS: PM
 * setup takes about a second per GPU, and a short program exits in the middle of it. The thread
 * checks the stop flag between setup steps and never decodes, samples or flushes once it is set.
 * nvlp_link_stop() then only Stops and decodes the GPUs whose setup completed: nothing is disabled,
 * deinitialised or freed at exit (the process is ending, and libnvperf_host, which CUPTI loads
 * during setup, may already be destroyed by then). Our exit handler must run before the destructors
 * of libraries loaded during setup, so the thread re-registers it right after every step that may
 * load one (nvlp_lc_refresh_atexit; seen on 2 x H200: a 0.5 s program exiting during setup crashed
 * before the final flush, with no END record).
 */
#include <dlfcn.h>    /* dlopen */
#include <errno.h>    /* errno */
#include <fcntl.h>    /* open */
#include <pthread.h>  /* pthread_create */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, free */
#include <string.h>   /* memset, strlen */
#include <sys/file.h> /* flock */
#include <sys/stat.h> /* stat */
#include <time.h>     /* clock_gettime */
#include <unistd.h>   /* getpid, read, write */

#include "cupti_int.h"
#include "nvlp_cost.h"
#include "nvlp_rt.h"
#include "nvlp_module.h" /* nvlp_lc_refresh_atexit */

#define MAX_GPUS 64
#define NMETRICS 6
#define HW_BUFFER (64u << 20)  /* PM records in GPU memory between decodes (KEEP_LATEST) */
#define MAX_SAMPLES 4000       /* decoded samples held per decode round */
/* Decode PM samples every second: a decode round cost ~9 ms of CPU whatever it held (the sampler
 * thread took 1.15 s over 129 s of a GPT-2 job at 10 ms samples decoded every 100 ms, 1.76 s over
 * 166 s at 1 ms samples: tests/gpu/results/cost2.txt, cost3.txt). */
#define DECODE_NS 1000000000ull
#define POLL_NS 10000000ull    /* look for the first context every 10 ms */
#define EXIT_WAIT_MS 1500      /* at exit, wait this long for a GPU whose setup is running */

/* Metric order = LINKSAMPLE field order after dur (nvl_tx .. pcie_wr). */
static const char *const METRICS[NMETRICS] = {
    "nvltx__bytes.sum",           "nvlrx__bytes.sum",     "nvltx__bytes_data_user.sum",
    "nvlrx__bytes_data_user.sum", "pcie__read_bytes.sum", "pcie__write_bytes.sum",
};

/* NVML, declared here (no nvml.h on the build machine). */
typedef struct {
	unsigned int fieldId, scopeId;
	long long timestamp, latencyUsec;
	int valueType, nvmlReturn;
	union {
		double d;
		unsigned int ui;
		unsigned long ul;
		unsigned long long ull;
		long long sll;
	} value;
} nvml_field_value;
/* NVLink data TX/RX KiB, raw (with protocol) TX/RX KiB, PCIe TX/RX bytes; cumulative. The NVLink
 * fields are per link (scopeId = link; scopeId 0 alone saw 1/18 of the traffic on H200): every
 * link is read and summed, links that do not exist answer an error and count nothing. */
static const unsigned NVML_FIELDS[6] = {138, 139, 140, 141, 197, 198};
#define NVML_LINKS 18                /* NVML_NVLINK_MAX_LINKS */
#define NVML_NV (4 * NVML_LINKS + 2) /* values read per sample */
/* Which of NVML_FIELDS value i of a sample is: [4 * link + field] for NVLink, then the 2 PCIe. */
static int nvml_field(int i)
{
	return i < 4 * NVML_LINKS ? i % 4 : 4 + i - 4 * NVML_LINKS;
}
static struct {
	int (*init)(void);
	int (*by_pci)(const char *, void **);
	int (*fields)(void *, int, nvml_field_value *);
	const char *(*err)(int);
	int state; /* 0 untried, 1 ok, -1 unavailable */
	char why[256];
} nvml_api;

/* gpu.phase: written by the sampler, read by the exiting thread (which may have stopped waiting) */
enum { PH_NONE = 0, PH_SETUP = 1, PH_DONE = 2 };

struct gpu {
	int setup;  /* tried */
	int phase;  /* PH_*, atomic */
	int source; /* 0 none, 1 PM, 2 NVML */
	int lock_fd;
	/* PM sampling */
	CUpti_PmSampling_Object *pm;
	void *host;
	const char *metrics[NMETRICS];
	int field[NMETRICS]; /* LINKSAMPLE field index of metrics[i] */
	int nm;
	uint8_t *cfg, *data;
	size_t cfg_size, data_size;
	uint64_t last_end; /* GPU time of the previous sample's end */
	int overflow;
	/* NVML */
	void *nvml;
	uint64_t last[NVML_NV];
	int valid[NVML_NV], have_last;
	uint64_t last_t;
};

static struct {
	pthread_t thr;
	int running, started; /* started: the thread was created (it may be gone now) */
	volatile int stop;    /* atomic: set once, at exit */
	int abandoned;        /* atomic: the exiting thread stopped waiting for the sampler */
	int in_setup;         /* atomic: device + 1 while the sampler is in setup_gpu, else 0 */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t seen[MAX_GPUS / 64]; /* devices to sample (bit per device) */
	int profiler_init;            /* 1 ok, -1 failed */
	CUptiResult profiler_err;
	struct gpu g[MAX_GPUS];
	struct nvlp_pmh_fns host;
} link_sampler = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
};

void nvlp_link_device_seen(int dev)
{
	if (dev < 0 || dev >= MAX_GPUS)
		return;
	uint64_t bit = 1ull << (dev % 64);
	if (__atomic_load_n(&link_sampler.seen[dev / 64], __ATOMIC_RELAXED) & bit)
		return;
	__atomic_fetch_or(&link_sampler.seen[dev / 64], bit, __ATOMIC_RELEASE);
	pthread_mutex_lock(&link_sampler.mu);
	pthread_cond_signal(&link_sampler.cv);
	pthread_mutex_unlock(&link_sampler.mu);
}

static int stopping(void)
{
	return __atomic_load_n(&link_sampler.stop, __ATOMIC_ACQUIRE);
}

/* After a step that may have loaded a library (CUPTI loads libnvperf_host during PM setup; NVML):
 * exit() runs handlers newest first, and that library's destructors are newer than our handler
 * until it is registered again. Cheap when nothing was loaded. */
static void after_load(void)
{
	nvlp_lc_refresh_atexit();
}

/* ---- one sampler per GPU ---- */

static void uuid_hex(int dev, char *out, size_t len)
{
	CUuuid u;
	memset(&u, 0, sizeof u);
	if (!nvlp_drv.cuDeviceGetUuid || nvlp_drv.cuDeviceGetUuid(&u, dev) != 0) {
		snprintf(out, len, "dev%d", dev);
		return;
	}
	size_t o = 0;
	for (int i = 0; i < 16 && o + 2 < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%02x", (unsigned char)u.bytes[i]);
}

/* @return 1 if this process may sample dev; else 0 with the owner's pid in *owner. */
static int claim_gpu(int dev, struct gpu *g, long *owner, char *uuid, size_t ulen)
{
	char path[256];
	struct stat st;
	uuid_hex(dev, uuid, ulen);
	snprintf(path, sizeof path, "%s/nvlprof-link-%s.lock",
	         stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp", uuid);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	*owner = 0;
	if (fd < 0)
		return 1; /* cannot coordinate: sample anyway, the NOTE says which source */
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		char buf[32] = "";
		ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
		if (n > 0)
			*owner = strtol(buf, NULL, 10);
		close(fd);
		return 0;
	}
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)n, 0) < 0) {
		/* the pid is informational only */
	}
	g->lock_fd = fd;
	return 1;
}

/* ---- PM sampling ---- */

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

/* The steps of pm_setup, in the order CUPTI needs them. Those returning int return 0 to go
 * on, -1 (why says why) or -2 when the process began to exit during that step. */

/* The profiler API, initialised once per process. */
static int pm_init_profiler(char *why, size_t len)
{
	if (!nvlp_cu.cuptiPmSamplingEnable || !nvlp_cu.cuptiDeviceGetChipName ||
	    !nvlp_cu.cuptiProfilerInitialize || !link_sampler.host.init) {
		snprintf(why, len, "%s has no PM sampling API", nvlp_cupti_path());
		return -1;
	}
	if (!link_sampler.profiler_init) {
		PARAMS(CUpti_Profiler_Initialize_Params, pi);
		link_sampler.profiler_err = nvlp_cu.cuptiProfilerInitialize(&pi);
		link_sampler.profiler_init = link_sampler.profiler_err == CUPTI_SUCCESS ? 1 : -1;
		after_load();
	}
	/* Stopped at exit between steps: leave what exists as it is (see the top of the file). */
	if (stopping())
		return pm_exiting(why, len);
	if (link_sampler.profiler_init < 0)
		return pm_fail(why, len, "cuptiProfilerInitialize", link_sampler.profiler_err);
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
	CUptiResult r = nvlp_pmh_config(&link_sampler.host, chip, avail, METRICS, NMETRICS,
	                                &g->host, &g->cfg, &g->cfg_size, passes);
	g->nm = 0;
	dropped[0] = 0;
	if (r == CUPTI_SUCCESS) {
		for (int i = 0; i < NMETRICS; i++)
			g->metrics[g->nm] = METRICS[i], g->field[g->nm++] = 4 + i;
		return r;
	}
	for (int i = 0; i < NMETRICS; i++) {
		void *h;
		uint8_t *img;
		size_t sz, p;
		if (nvlp_pmh_config(&link_sampler.host, chip, avail, &METRICS[i], 1, &h, &img, &sz,
		                    &p) == CUPTI_SUCCESS) {
			g->metrics[g->nm] = METRICS[i], g->field[g->nm++] = 4 + i;
			free(img);
			nvlp_pmh_destroy(&link_sampler.host, h);
		} else {
			size_t l = strlen(dropped);
			snprintf(dropped + l, dlen - l, "%s%s", l ? " " : "", METRICS[i]);
		}
	}
	return g->nm ? nvlp_pmh_config(&link_sampler.host, chip, avail, g->metrics, (size_t)g->nm,
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

/* @return 0 on success; -1 (why says why); -2 when the process began to exit during setup. */
static int pm_setup(int dev, struct gpu *g, char *why, size_t len, char *dropped, size_t dlen)
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

/* Decode what the GPU has buffered into LINKSAMPLE records. */
static void pm_decode(int dev, struct gpu *g)
{
	const uint64_t tol = 2000; /* ns: back-to-back samples share their boundary */
	for (int round = 0; round < 8; round++) {
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
		for (size_t i = 0; i < info.numCompletedSamples; i++) {
			PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params, si);
			si.pPmSamplingObject = g->pm;
			si.pCounterDataImage = g->data;
			si.counterDataImageSize = g->data_size;
			si.sampleIndex = i;
			if (nvlp_cu.cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS)
				continue;
			double v[NMETRICS] = {0};
			if (nvlp_pmh_evaluate(&link_sampler.host, g->host, g->data, g->data_size, i,
			                      g->metrics, (size_t)g->nm, v) != CUPTI_SUCCESS)
				continue;
			struct nvlp_rec_linksample rec = {.device = (uint64_t)dev, .source = NVLP_LINK_PM_SAMPLING};
			uint64_t *f = (uint64_t *)&rec;
			rec.start = nvlp_cupti_gpu_ts_to_mono(si.startTimestamp);
			rec.dur = si.endTimestamp > si.startTimestamp
			              ? si.endTimestamp - si.startTimestamp
			              : 0;
			for (int m = 0; m < g->nm; m++)
				f[g->field[m]] = v[m] > 0 ? (uint64_t)(v[m] + 0.5) : 0;
			if (g->last_end && si.startTimestamp > g->last_end + tol)
				rec.flags |= NVLP_LINKSAMPLE_F_GAP;
			if (g->overflow)
				rec.flags |= NVLP_LINKSAMPLE_F_OVERFLOW, g->overflow = 0;
			g->last_end = si.endTimestamp;
			nvlp_emit_wait(NVLP_K_LINKSAMPLE, &rec, NULL, 0, 1000);
		}
		/* start the image afresh so it never fills across rounds */
		PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, di);
		di.pPmSamplingObject = g->pm;
		di.counterDataSize = g->data_size;
		di.pCounterData = g->data;
		nvlp_cu.cuptiPmSamplingCounterDataImageInitialize(&di);
		if (dd.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
			return;
	}
}

/* At exit: the last samples only. No Disable, host deinitialisation or free: the process is
 * ending, and tearing down through a library whose destructors already ran corrupts the heap (seen
 * with libnvperf_host: "double free or corruption"). */
static void pm_final(int dev, struct gpu *g)
{
	PARAMS(CUpti_PmSampling_Stop_Params, sp);
	sp.pPmSamplingObject = g->pm;
	nvlp_cu.cuptiPmSamplingStop(&sp);
	pm_decode(dev, g);
}

/* ---- NVML ---- */

static int nvml_load(void)
{
	if (nvml_api.state)
		return nvml_api.state;
	void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		snprintf(nvml_api.why, sizeof nvml_api.why, "libnvidia-ml.so.1 not loadable");
		return nvml_api.state = -1;
	}
	nvml_api.init = (__typeof__(nvml_api.init))dlsym(h, "nvmlInit_v2");
	nvml_api.by_pci = (__typeof__(nvml_api.by_pci))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
	nvml_api.fields = (__typeof__(nvml_api.fields))dlsym(h, "nvmlDeviceGetFieldValues");
	nvml_api.err = (__typeof__(nvml_api.err))dlsym(h, "nvmlErrorString");
	after_load();
	if (!nvml_api.init || !nvml_api.by_pci || !nvml_api.fields) {
		snprintf(nvml_api.why, sizeof nvml_api.why,
		         "libnvidia-ml.so.1 lacks nvmlDeviceGetFieldValues");
		return nvml_api.state = -1;
	}
	int r = nvml_api.init();
	if (r != 0) {
		snprintf(nvml_api.why, sizeof nvml_api.why, "nvmlInit_v2: %s",
		         nvml_api.err ? nvml_api.err(r) : "error");
		return nvml_api.state = -1;
	}
	return nvml_api.state = 1;
}

/* Read the cumulative counters; emit a LINKSAMPLE of the deltas since the previous read. */
static void nvml_sample(int dev, struct gpu *g)
{
	nvml_field_value v[NVML_NV];
	memset(v, 0, sizeof v);
	for (int i = 0; i < NVML_NV; i++) {
		v[i].fieldId = NVML_FIELDS[nvml_field(i)];
		v[i].scopeId = i < 4 * NVML_LINKS ? (unsigned)(i / 4) : 0; /* the link; PCIe: 0 */
	}
	uint64_t t = nvlp_now();
	if (nvml_api.fields(g->nvml, NVML_NV, v) != 0)
		return;
	if (g->have_last) {
		struct nvlp_rec_linksample rec = {.device = (uint64_t)dev, .source = NVLP_LINK_NVML};
		rec.start = g->last_t;
		rec.dur = t - g->last_t;
		uint64_t d[6] = {0};
		for (int i = 0; i < NVML_NV; i++) {
			int ok = v[i].nvmlReturn == 0;
			if (ok && g->valid[i] && v[i].value.ull >= g->last[i])
				d[nvml_field(i)] += v[i].value.ull - g->last[i];
			else if (ok && g->valid[i])
				rec.flags |= NVLP_LINKSAMPLE_F_OVERFLOW; /* counter wrapped or reset */
		}
		rec.nvl_tx_user = d[0] * 1024, rec.nvl_rx_user = d[1] * 1024; /* KiB */
		rec.nvl_tx = d[2] * 1024, rec.nvl_rx = d[3] * 1024;
		rec.pcie_wr = d[4], rec.pcie_rd = d[5]; /* GPU TX = writes out, RX = reads in */
		nvlp_emit_wait(NVLP_K_LINKSAMPLE, &rec, NULL, 0, 1000);
	}
	for (int i = 0; i < NVML_NV; i++) {
		g->valid[i] = v[i].nvmlReturn == 0;
		g->last[i] = v[i].value.ull;
	}
	g->last_t = t;
	g->have_last = 1;
}

static int nvml_setup(int dev, struct gpu *g, char *why, size_t len)
{
	if (nvml_load() < 0) {
		snprintf(why, len, "%s", nvml_api.why);
		return -1;
	}
	char bus[64] = "";
	if (!nvlp_drv.cuDeviceGetPCIBusId ||
	    nvlp_drv.cuDeviceGetPCIBusId(bus, sizeof bus, dev) != 0) {
		snprintf(why, len, "no PCI bus id for CUDA device %d", dev);
		return -1;
	}
	int r = nvml_api.by_pci(bus, &g->nvml);
	if (r != 0) {
		snprintf(why, len, "nvmlDeviceGetHandleByPciBusId(%s): %s", bus,
		         nvml_api.err ? nvml_api.err(r) : "error");
		return -1;
	}
	nvml_sample(dev, g); /* baseline */
	int any = 0;
	for (int i = 0; i < NVML_NV; i++)
		any |= g->valid[i];
	if (!any) {
		snprintf(why, len, "NVML fields 138-141/197/198 not supported on %s", bus);
		return -1;
	}
	return 0;
}

/* ---- the thread ---- */

static void setup_gpu_body(int dev)
{
	struct gpu *g = &link_sampler.g[dev];
	char why[512] = "", why2[512] = "", dropped[256] = "", uuid[40];
	long owner;
	g->setup = 1;
	g->lock_fd = -1;
	if (!claim_gpu(dev, g, &owner, uuid, sizeof uuid)) {
		nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, (uint64_t)owner,
		          "GPU %d (uuid %s) link counters are sampled by process %ld: one sampler "
		          "per GPU, its LINKSAMPLE records include this process's traffic",
		          dev, uuid, owner);
		return;
	}
	int pr = -1;
	if (nvlp_cfg()->links_nvml)
		snprintf(why, sizeof why, "not tried: NVLPROF_LINKS=nvml");
	else
		pr = pm_setup(dev, g, why, sizeof why, dropped, sizeof dropped);
	if (pr == -2 || (pr != 0 && stopping())) {
		/* the exiting thread says so itself when it stopped waiting for us */
		if (!__atomic_load_n(&link_sampler.abandoned, __ATOMIC_ACQUIRE))
			nvlp_note(
			    NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, 0,
			    "GPU %d: the process ended while its link counters were being set "
			    "up (PM sampling setup takes about 1 s): no link samples for it",
			    dev);
		return;
	}
	if (pr == 0) {
		g->source = NVLP_LINK_PM_SAMPLING;
		nvlp_note(NVLP_NOTE_PM_SAMPLING_ON, dev, (uint64_t)nvlp_cfg()->sample_us,
		          "PM sampling on GPU %d every %ld us: %d metrics%s%s", dev,
		          nvlp_cfg()->sample_us, g->nm, dropped[0] ? "; not available: " : "",
		          dropped);
		return;
	}
	if (nvml_setup(dev, g, why2, sizeof why2) == 0) {
		g->source = NVLP_LINK_NVML;
		long us = nvlp_cfg()->sample_us < 10000 ? 10000 : nvlp_cfg()->sample_us;
		nvlp_note(NVLP_NOTE_NVML_ON, dev, (uint64_t)us,
		          "NVML link counters on GPU %d every %ld us (PM sampling unavailable: %s)",
		          dev, us, why);
		return;
	}
	nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, 0,
	          "no link counters on GPU %d: PM sampling: %s; NVML: %s", dev, why, why2);
	if (g->lock_fd >= 0) {
		close(g->lock_fd); /* let another process try */
		g->lock_fd = -1;
	}
}

static void setup_gpu(int dev)
{
	struct gpu *g = &link_sampler.g[dev];
	__atomic_store_n(&link_sampler.in_setup, dev + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&g->phase, PH_SETUP, __ATOMIC_RELEASE);
	setup_gpu_body(dev);
	/* PH_DONE publishes g->source and the PM objects to the exiting thread */
	__atomic_store_n(&g->phase, PH_DONE, __ATOMIC_RELEASE);
	__atomic_store_n(&link_sampler.in_setup, 0, __ATOMIC_RELEASE);
}

/* A GPU the process has a context on is "used" as soon as the context exists: waiting for the
 * first intercepted call with a stream missed short programs (their copies were over before the
 * counters came up, about a second after setup starts). */
static void seen_by_context(void)
{
	int n = 0;
	if (!nvlp_drv.cuDevicePrimaryCtxGetState || !nvlp_drv.cuDeviceGetCount ||
	    nvlp_drv.cuDeviceGetCount(&n) != 0)
		return;
	for (int d = 0; d < n && d < MAX_GPUS; d++) {
		unsigned flags = 0;
		int active = 0;
		if (nvlp_drv.cuDevicePrimaryCtxGetState(d, &flags, &active) == 0 && active)
			nvlp_link_device_seen(d);
	}
}

/* GPUs whose streams the intercepted calls used (streams.c remembers them, on the hot path). */
static void seen_by_streams(void)
{
	uint64_t s[NVLP_LINK_MAX_GPUS / 64];
	nvlp_streams_devices(s);
	for (int d = 0; d < MAX_GPUS && d < NVLP_LINK_MAX_GPUS; d++)
		if (s[d / 64] >> (d % 64) & 1)
			nvlp_link_device_seen(d);
}

static void *sampler(void *arg)
{
	(void)arg;
	nvlp_cost_thread_start(NVLP_COST_SAMPLER);
	const struct nvlp_config *cfg = nvlp_cfg();
	uint64_t nvml_ns = cfg->sample_us * 1000ull < 10000000ull
	                       ? 10000000ull
	                       : (uint64_t)cfg->sample_us * 1000ull;
	uint64_t now = nvlp_now();
	uint64_t next_decode = now + DECODE_NS, next_nvml = now + nvml_ns, next_tick = now + POLL_NS;
	after_load(); /* libcuda and libcupti came in just before we were started */
	pthread_mutex_lock(&link_sampler.mu);
	while (!link_sampler.stop) {
		uint64_t wake = next_decode;
		if (next_tick < wake)
			wake = next_tick;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t cur = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		if (wake > cur) {
			uint64_t abs_ns = wake;
			ts.tv_sec = (time_t)(abs_ns / 1000000000ull);
			ts.tv_nsec = (long)(abs_ns % 1000000000ull);
			pthread_cond_timedwait(&link_sampler.cv, &link_sampler.mu, &ts);
		}
		if (stopping())
			break;
		pthread_mutex_unlock(&link_sampler.mu);
		after_load(); /* the program's own dlopens, between flushes of the writer */
		if (cfg->sample_us > 0) {
			seen_by_context();
			seen_by_streams();
		}
		if (cfg->sample_us > 0)
			for (int d = 0; d < MAX_GPUS && !stopping(); d++)
				if ((__atomic_load_n(&link_sampler.seen[d / 64],
				                     __ATOMIC_ACQUIRE) >>
				         (d % 64) &
				     1) &&
				    !link_sampler.g[d].setup)
					setup_gpu(d);
		/* once stopping, the exiting thread owns the GPUs' state: touch nothing more */
		if (stopping()) {
			pthread_mutex_lock(&link_sampler.mu);
			break;
		}
		now = nvlp_now();
		if (now >= next_decode) {
			for (int d = 0; d < MAX_GPUS; d++)
				if (link_sampler.g[d].source == NVLP_LINK_PM_SAMPLING)
					pm_decode(d, &link_sampler.g[d]);
			next_decode = now + DECODE_NS;
		}
		int nvml = 0, ready = cfg->sample_us <= 0; /* ready: no first context to look for */
		for (int d = 0; d < MAX_GPUS; d++)
			nvml |= link_sampler.g[d].source == NVLP_LINK_NVML,
			    ready |= link_sampler.g[d].setup;
		if (nvml && now >= next_nvml) {
			for (int d = 0; d < MAX_GPUS; d++)
				if (link_sampler.g[d].source == NVLP_LINK_NVML)
					nvml_sample(d, &link_sampler.g[d]);
			next_nvml = now + nvml_ns;
		}
		/* No reason to wake 100 times a second (the old 10 ms tick; its cost was within noise on
		 * the DDP example): NVML's period when it is the source, else 10 ms only until a GPU is
		 * in use (a short program's first context), then the decoding period. */
		next_tick = nvml ? next_nvml : now + (ready ? DECODE_NS : POLL_NS);
		pthread_mutex_lock(&link_sampler.mu);
	}
	pthread_mutex_unlock(&link_sampler.mu);
	nvlp_cost_thread_end(NVLP_COST_SAMPLER);
	return NULL;
}

int nvlp_link_start(void)
{
	if (link_sampler.running)
		return 0;
	link_sampler.host = (struct nvlp_pmh_fns){
	    nvlp_cu.cuptiProfilerHostInitialize,
	    nvlp_cu.cuptiProfilerHostDeinitialize,
	    nvlp_cu.cuptiProfilerHostConfigAddMetrics,
	    nvlp_cu.cuptiProfilerHostGetConfigImageSize,
	    nvlp_cu.cuptiProfilerHostGetConfigImage,
	    nvlp_cu.cuptiProfilerHostGetNumOfPasses,
	    nvlp_cu.cuptiProfilerHostEvaluateToGpuValues,
	};
	nvlp_driver_load(NULL, 0);
	if (nvlp_cfg()->sample_us <= 0)
		nvlp_note(NVLP_NOTE_CONFIG, -1, 0, "NVLPROF_SAMPLE_US=0: no link counters");
	/* the condattr must match the CLOCK_MONOTONIC deadlines */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&link_sampler.cv, &ca);
	pthread_condattr_destroy(&ca);
	link_sampler.stop = 0;
	if (pthread_create(&link_sampler.thr, NULL, sampler, NULL) != 0) {
		nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, -1, (uint64_t)errno,
		          "cannot start the sampler thread: no link counters, activity flushed at "
		          "exit only");
		return -1;
	}
	pthread_setname_np(link_sampler.thr, "nvlprof-sample");
	link_sampler.running = link_sampler.started = 1;
	return 0;
}

/* Set stop and wait for the sampler, at most EXIT_WAIT_MS (it may be inside a CUPTI setup call
 * that takes most of a second). @return 1 if it is gone, 0 if we stopped waiting. */
static int join_bounded(void)
{
	pthread_mutex_lock(&link_sampler.mu);
	__atomic_store_n(&link_sampler.stop, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&link_sampler.cv);
	pthread_mutex_unlock(&link_sampler.mu);
	if (pthread_equal(pthread_self(), link_sampler.thr))
		return 0; /* exit() from the sampler itself (a signal handler on it): never join */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* pthread_timedjoin_np's clock */
	ts.tv_sec += EXIT_WAIT_MS / 1000;
	ts.tv_nsec += (EXIT_WAIT_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_sec++, ts.tv_nsec -= 1000000000L;
	int rc;
	while ((rc = pthread_timedjoin_np(link_sampler.thr, NULL, &ts)) == EINTR)
		;
	return rc == 0;
}

void nvlp_link_stop_thread(void)
{
	if (!link_sampler.running)
		return;
	link_sampler.running = 0;
	if (join_bounded())
		return;
	/* The sampler is still in a CUPTI call. It checks stop before touching anything else, so
	 * the GPUs whose setup is done are ours; the one it is setting up is left alone. */
	__atomic_store_n(&link_sampler.abandoned, 1, __ATOMIC_RELEASE);
	int dev = __atomic_load_n(&link_sampler.in_setup, __ATOMIC_ACQUIRE) - 1;
	if (dev >= 0)
		nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, EXIT_WAIT_MS,
		          "GPU %d: PM sampling setup still running %d ms after exit began: gave up "
		          "waiting; its last link samples are dropped",
		          dev, EXIT_WAIT_MS);
	else
		nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, -1, EXIT_WAIT_MS,
		          "the link sampler did not stop within %d ms of exit: the last link "
		          "samples are dropped",
		          EXIT_WAIT_MS);
}

void nvlp_link_stop(void)
{
	if (!link_sampler.started)
		return;
	nvlp_link_stop_thread();
	int abandoned = __atomic_load_n(&link_sampler.abandoned, __ATOMIC_ACQUIRE);
	/* abandoned outside a setup: it may be decoding or sampling, so the GPUs are not ours */
	if (abandoned && __atomic_load_n(&link_sampler.in_setup, __ATOMIC_ACQUIRE) == 0)
		return;
	for (int d = 0; d < MAX_GPUS; d++) {
		struct gpu *g = &link_sampler.g[d];
		int ph = __atomic_load_n(&g->phase, __ATOMIC_ACQUIRE);
		if (ph == PH_NONE && (link_sampler.seen[d / 64] >> (d % 64) & 1) &&
		    nvlp_cfg()->sample_us > 0)
			nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, d, 0,
			          "GPU %d: the process ended before its link counters were set up",
			          d);
		if (ph != PH_DONE)
			continue; /* in setup: the sampler's (see above) */
		if (g->source == 1)
			pm_final(d, g);
		else if (g->source == 2)
			nvml_sample(d, g);
		g->source = 0;
	}
}

void nvlp_link_atfork_child(void)
{
	/* the thread does not exist in the child; GPU state belongs to the parent */
	link_sampler.running = link_sampler.started = 0;
	link_sampler.stop = 0;
	link_sampler.abandoned = 0;
	link_sampler.in_setup = 0;
	pthread_mutex_init(&link_sampler.mu, NULL);
	for (int d = 0; d < MAX_GPUS; d++) {
		if (link_sampler.g[d].lock_fd > 0)
			close(link_sampler.g[d].lock_fd); /* the parent keeps its lock */
		memset(&link_sampler.g[d], 0, sizeof link_sampler.g[d]);
	}
	memset(link_sampler.seen, 0, sizeof link_sampler.seen);
}

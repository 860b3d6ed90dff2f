/* link_int.h: the link sampler's internals (cupti/linksample.c: the thread and the GPUs' claims;
 * cupti/linkpm.c: PM sampling; cupti/linknvml.c: the NVML fallback). */
#ifndef NVLP_LINK_INT_H
#define NVLP_LINK_INT_H

#include "cupti_int.h"
#include "nvlp_module.h" /* nvlp_lc_refresh_atexit */

#define MAX_GPUS 64
#define NMETRICS 6
#define NVML_LINKS 18                /* NVML_NVLINK_MAX_LINKS */
#define NVML_NV (4 * NVML_LINKS + 2) /* values read per sample */

/* nvmlFieldValue_t, declared here (no nvml.h on the build machine); linknvml.c reads the link
 * counters with it, topo.c the links' state and version. */
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
	size_t img_done; /* samples of the counter data image already read (a decode stopped at exit
	                  * leaves the rest to the final one) */
	uint64_t last_end; /* GPU time of the previous sample's end */
	int overflow;
	/* NVML */
	void *nvml;
	uint64_t last[NVML_NV];
	int valid[NVML_NV], have_last;
	int nvml_n;                 /* fields read: all for the baseline, then those that answered */
	uint8_t nvml_at[NVML_NV];   /* their indices in the full list */
	uint64_t last_t;
};

/* After a step that may have loaded a library (CUPTI loads libnvperf_host during PM setup; NVML):
 * exit() runs handlers newest first, and that library's destructors are newer than our handler
 * until it is registered again. Against the sampler's own count of loads: the writer's tick may
 * have seen the library mapped while its initialisers still ran (test_cupti_exit's "host library
 * slow to load"). Only the sampler thread calls it. Cheap when nothing was loaded. */
static inline void after_load(void)
{
	nvlp_lc_refresh_atexit_after_load();
}

/* ---- linkpm.c: PM sampling ---- */
/*! At the sampler's start: the profiler-host functions from the CUPTI table, and the flag (set
 * once, at exit) that the setup steps check between them. */
void nvlp_lk_pm_bind(const volatile int *stop);
/*! PM sampling set up and started on dev. @return 0 on success; -1 (why says why); -2 when the
 * process began to exit during setup. dropped names the metrics the chip refused. */
int nvlp_lk_pm_setup(int dev, struct gpu *g, char *why, size_t len, char *dropped, size_t dlen);
/*! Decode what the GPU has buffered into LINKSAMPLE records. */
void nvlp_lk_pm_decode(int dev, struct gpu *g);
/*! At exit: Stop and decode the last samples (nothing torn down). */
void nvlp_lk_pm_final(int dev, struct gpu *g);

/* ---- linknvml.c: NVML cumulative counters, the fallback ---- */
/*! NVML for dev: loaded once, the device's handle, a baseline read. @return 0, or -1 (why). */
int nvlp_lk_nvml_setup(int dev, struct gpu *g, char *why, size_t len);
/*! Read the cumulative counters; emit a LINKSAMPLE of the deltas since the previous read. */
void nvlp_lk_nvml_sample(int dev, struct gpu *g);
/*! NVML loaded and initialised (once, shared with the sampler; any thread): its dlopen handle,
 * for the functions the sampler does not use (topo.c's NVLink state). @return the handle, or NULL
 * (why says why). */
void *nvlp_lk_nvml_handle(char *why, size_t len);

#endif /* NVLP_LINK_INT_H */

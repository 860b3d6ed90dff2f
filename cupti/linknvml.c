/* linknvml.c: the link sampler's fallback when PM sampling is unavailable: NVML's cumulative
 * NVLink and PCIe counters, read per link and summed into LINKSAMPLE records of their deltas. */
#include <dlfcn.h>   /* dlopen */
#include <pthread.h> /* pthread_mutex_t */
#include <stdio.h>   /* snprintf */
#include <string.h>  /* memset */
#include <time.h>    /* clock_gettime */

#include "link_int.h"
#include "nvlp_rt.h"

/* NVLink data TX/RX KiB, raw (with protocol) TX/RX KiB, PCIe TX/RX bytes; cumulative. The NVLink
 * fields are per link (scopeId = link; scopeId 0 alone saw 1/18 of the traffic on H200): every
 * link is read and summed, links that do not exist answer an error and count nothing. */
static const unsigned NVML_FIELDS[6] = {138, 139, 140, 141, 197, 198};
/* Which of NVML_FIELDS value i of a sample is: [4 * link + field] for NVLink, then the 2 PCIe. */
static int nvml_field(int i)
{
	return i < 4 * NVML_LINKS ? i % 4 : 4 + i - 4 * NVML_LINKS;
}
/* Loaded once, by the link sampler or topo.c (nvlp_lk_nvml_handle), whichever comes first: the
 * fields below are written under mu, then state (atomic) says they are set. */
static struct {
	int (*init)(void);
	int (*by_pci)(const char *, void **);
	int (*fields)(void *, int, nvml_field_value *);
	const char *(*err)(int);
	void *h;   /* the dlopen handle (topo.c resolves the NVLink functions from it) */
	int state; /* 0 untried, 1 ok, -1 unavailable */
	char why[256];
	pthread_mutex_t mu;
} nvml_api = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* @return the state to publish: 1 ok, -1 (nvml_api.why says why) */
static int nvml_open(void)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		snprintf(nvml_api.why, sizeof nvml_api.why, "libnvidia-ml.so.1 not loadable");
		return -1;
	}
	nvml_api.h = h;
	nvml_api.init = (__typeof__(nvml_api.init))dlsym(h, "nvmlInit_v2");
	nvml_api.by_pci = (__typeof__(nvml_api.by_pci))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
	nvml_api.fields = (__typeof__(nvml_api.fields))dlsym(h, "nvmlDeviceGetFieldValues");
	nvml_api.err = (__typeof__(nvml_api.err))dlsym(h, "nvmlErrorString");
	after_load();
	if (!nvml_api.init || !nvml_api.by_pci || !nvml_api.fields) {
		snprintf(nvml_api.why, sizeof nvml_api.why,
		         "libnvidia-ml.so.1 lacks nvmlDeviceGetFieldValues");
		return -1;
	}
	int r = nvml_api.init();
	if (r != 0) {
		snprintf(nvml_api.why, sizeof nvml_api.why, "nvmlInit_v2: %s",
		         nvml_api.err ? nvml_api.err(r) : "error");
		return -1;
	}
	return 1;
}

/* @return 1 loaded, or -1 (why says why) */
static int nvml_load(char *why, size_t len)
{
	int st = __atomic_load_n(&nvml_api.state, __ATOMIC_ACQUIRE);
	if (st < 0)
		snprintf(why, len, "%s", nvml_api.why);
	if (st)
		return st;
	/* bounded: a fork while another thread was loading leaves mu locked in the child */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	if (pthread_mutex_timedlock(&nvml_api.mu, &until) != 0) {
		snprintf(why, len, "NVML: another thread is still loading libnvidia-ml.so.1");
		return -1;
	}
	st = nvml_api.state;
	if (!st)
		__atomic_store_n(&nvml_api.state, st = nvml_open(), __ATOMIC_RELEASE);
	pthread_mutex_unlock(&nvml_api.mu);
	if (st < 0)
		snprintf(why, len, "%s", nvml_api.why);
	return st;
}

void *nvlp_lk_nvml_handle(char *why, size_t len)
{
	return nvml_load(why, len) > 0 ? nvml_api.h : NULL;
}

/* Reads the fields g->nvml_at names (every one for the baseline) into a sample. A field that
 * does not answer the baseline (a link the GPU lacks: 18 asked, 0-18 exist) is never read again
 * (its valid[] stays 0): each field read costs the sampler thread ~5 us of CPU (0.36 ms for all
 * 74 on an H200). */
void nvlp_lk_nvml_sample(int dev, struct gpu *g)
{
	nvml_field_value v[NVML_NV];
	memset(v, 0, sizeof v);
	int n = g->nvml_n;
	for (int j = 0; j < n; j++) {
		int i = g->nvml_at[j];
		v[j].fieldId = NVML_FIELDS[nvml_field(i)];
		v[j].scopeId = i < 4 * NVML_LINKS ? (unsigned)(i / 4) : 0; /* the link; PCIe: 0 */
	}
	uint64_t t = nvlp_now();
	if (nvml_api.fields(g->nvml, n, v) != 0)
		return;
	if (g->have_last) {
		struct nvlp_rec_linksample rec = {.device = (uint64_t)dev, .source = NVLP_LINK_NVML};
		rec.start = g->last_t;
		rec.dur = t - g->last_t;
		uint64_t d[6] = {0};
		for (int j = 0; j < n; j++) {
			int i = g->nvml_at[j], ok = v[j].nvmlReturn == 0;
			if (ok && g->valid[i] && v[j].value.ull >= g->last[i])
				d[nvml_field(i)] += v[j].value.ull - g->last[i];
			else if (ok && g->valid[i])
				rec.flags |= NVLP_LINKSAMPLE_F_OVERFLOW; /* counter wrapped or reset */
		}
		rec.nvl_tx_user = d[0] * 1024, rec.nvl_rx_user = d[1] * 1024; /* KiB */
		rec.nvl_tx = d[2] * 1024, rec.nvl_rx = d[3] * 1024;
		rec.pcie_wr = d[4], rec.pcie_rd = d[5]; /* GPU TX = writes out, RX = reads in */
		nvlp_emit_wait(NVLP_K_LINKSAMPLE, &rec, NULL, 0, 1000);
	}
	for (int j = 0; j < n; j++) {
		int i = g->nvml_at[j];
		g->valid[i] = v[j].nvmlReturn == 0;
		g->last[i] = v[j].value.ull;
	}
	g->last_t = t;
	g->have_last = 1;
}

int nvlp_lk_nvml_setup(int dev, struct gpu *g, char *why, size_t len)
{
	if (nvml_load(why, len) < 0)
		return -1;
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
	g->nvml_n = NVML_NV; /* the baseline reads every field */
	for (int i = 0; i < NVML_NV; i++)
		g->nvml_at[i] = (uint8_t)i;
	nvlp_lk_nvml_sample(dev, g);
	int any = 0;
	for (int i = 0; i < NVML_NV; i++)
		if (g->valid[i])
			g->nvml_at[any++] = (uint8_t)i;
	g->nvml_n = any; /* from now on, only these */
	if (!any) {
		snprintf(why, len, "NVML fields 138-141/197/198 not supported on %s", bus);
		return -1;
	}
	return 0;
}

/* fake_nvml.c: a CPU-only libnvidia-ml.so.1 with the few calls the link sampler makes: cumulative NVLink/PCIe counters that grow with every read. */
/*
 * Each read of a GPU adds, per existing link (FAKE_NVML_LINKS, default 18), 64 KiB of NVLink
 * data (fields 138/139; raw 140/141: 66 KiB), and 1 MiB of PCIe (197/198) per GPU; links past
 * the count answer NVML_ERROR_NOT_SUPPORTED (3), as on a real GPU. FAKE_NVML_LOG=PATH: each read
 * appends a line to PATH: the number of fields asked for.
 */
#include <stdio.h>  /* sscanf, fopen */
#include <stdlib.h> /* getenv, atoi */

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
} field_value;

#define EXPORT __attribute__((visibility("default")))
static struct gpu {
	unsigned long long reads;
} gpus[8];

EXPORT int nvmlInit_v2(void) { return 0; }

/* "00000000:XX:00.0": the fake libcuda's bus ids, one bus per device */
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
	unsigned dom, b;
	if (!bus || sscanf(bus, "%x:%x", &dom, &b) != 2)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*dev = &gpus[b % 8];
	return 0;
}

EXPORT int nvmlDeviceGetFieldValues(void *dev, int n, field_value *v)
{
	struct gpu *g = dev;
	const char *ls = getenv("FAKE_NVML_LINKS");
	unsigned links = ls && *ls ? (unsigned)atoi(ls) : 18;
	g->reads++;
	const char *logp = getenv("FAKE_NVML_LOG");
	FILE *lf = logp && *logp ? fopen(logp, "a") : NULL;
	if (lf) {
		fprintf(lf, "%d\n", n);
		fclose(lf);
	}
	for (int i = 0; i < n; i++) {
		unsigned f = v[i].fieldId;
		v[i].nvmlReturn = 0;
		if (f >= 138 && f <= 141 && v[i].scopeId >= links)
			v[i].nvmlReturn = 3;
		else if (f == 138 || f == 139)
			v[i].value.ull = g->reads * 64;
		else if (f == 140 || f == 141)
			v[i].value.ull = g->reads * 66;
		else if (f == 197 || f == 198)
			v[i].value.ull = g->reads << 20;
		else
			v[i].nvmlReturn = 3;
	}
	return 0;
}

EXPORT const char *nvmlErrorString(int r)
{
	return r == 0 ? "Success" : r == 3 ? "Not Supported" : "Unknown Error";
}

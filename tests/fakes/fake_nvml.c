/* fake_nvml.c: a CPU-only libnvidia-ml.so.1 with the few calls the link sampler and topo.c make: cumulative NVLink/PCIe counters that grow with every read, and the links' state. */
/*
 * Each read of a GPU adds, per existing link (FAKE_NVML_LINKS, default 18), 64 KiB of NVLink
 * data (fields 138/139; raw 140/141: 66 KiB), and 1 MiB of PCIe (197/198) per GPU; links past
 * the count answer NVML_ERROR_NOT_SUPPORTED (3), as on a real GPU. FAKE_NVML_LOG=PATH: each read
 * appends a line to PATH: the number of fields asked for.
 *
 * NVLink state (topo.c), FAKE_NVML_TOPO: unset or "none": every link inactive; "pair:N": GPUs 0
 * and 1 (buses 0x18 and 0x19, as the fake libcuda numbers them) joined by links 0..N-1 on each
 * side; "switch:N": every GPU's links 0..N-1 reach an NVSwitch. Link version 6 (NVLink 4.0)
 * unless FAKE_NVML_NVLINK_VERSION says otherwise. A link index past 17 answers
 * NVML_ERROR_INVALID_ARGUMENT (2), an inactive link's remote NVML_ERROR_NOT_SUPPORTED (3).
 * The state answers through nvmlDeviceGetNvLinkState and the field NVML_FI_DEV_NVLINK_GET_STATE
 * (165), the version through nvmlDeviceGetNvLinkVersion and NVML_FI_DEV_NVLINK_GET_VERSION (166);
 * FAKE_NVML_STATE=field: the function answers NVML_ERROR_NOT_SUPPORTED for every link (as a
 * one-GPU H100 VM did), the field answers; =api: the field does not answer, the function does;
 * =none: neither; a link index past FAKE_NVML_LINKS (18) answers NVML_ERROR_INVALID_ARGUMENT to
 * both, as past a GPU's real links. FAKE_NVML_NOTYPE=1: nvmlDeviceGetNvLinkRemoteDeviceType
 * answers NVML_ERROR_NOT_SUPPORTED, =unknown: NVML_NVLINK_DEVICE_TYPE_UNKNOWN (0xff);
 * FAKE_NVML_HIDDEN=1: an NVSwitch link's remote PCI address is the one NCCL takes for a device
 * hidden from the VM (bus id "fffffff:ffff:ff", numbers 0); FAKE_NVML_NOVERSION=1:
 * nvmlDeviceGetNvLinkVersion answers NVML_ERROR_NOT_SUPPORTED (the field still answers). An
 * active link's capabilities: peer access and peer atomics, no system memory
 * (NVML_NVLINK_CAP_P2P_SUPPORTED and _P2P_ATOMICS; CUPTI's flags 0xa on two H200s), none with
 * FAKE_NVML_NOCAPS=1 (NVML_ERROR_NOT_SUPPORTED). FAKE_NVML_INIT=r: nvmlInit_v2 answers r (e.g.
 * 9, NVML_ERROR_DRIVER_NOT_LOADED). FAKE_NVML_TRAIN=1: a link reads inactive until its P2P
 * capability was asked for (NCCL asks for it before the state: "The previous call should have
 * trained the link").
 */
#include <stdio.h>  /* sscanf, fopen */
#include <stdlib.h> /* getenv, atoi */
#include <string.h> /* strncmp, memset */

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
	unsigned domain, bus; /* from the bus id it was looked up by */
	unsigned trained;     /* FAKE_NVML_TRAIN: the links whose P2P capability was asked for */
} gpus[8];

EXPORT int nvmlShutdown(void)
{
	return 0;
}

EXPORT int nvmlInit_v2(void)
{
	const char *e = getenv("FAKE_NVML_INIT");
	return e && *e ? atoi(e) : 0;
}

/* "00000000:XX:00.0": the fake libcuda's bus ids, one bus per device */
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
	unsigned dom, b;
	if (!bus || sscanf(bus, "%x:%x", &dom, &b) != 2)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*dev = &gpus[b % 8];
	gpus[b % 8].domain = dom, gpus[b % 8].bus = b;
	return 0;
}

/* By index, as tests/gpu/nvml_links.py enumerates: FAKE_CUDA_DEVICES GPUs (2 unless 1), at the
 * fake libcuda's PCI addresses (domain FAKE_CUDA_PCI_DOMAIN, bus 0x18 + index). */
EXPORT int nvmlDeviceGetCount_v2(unsigned *n)
{
	const char *e = getenv("FAKE_CUDA_DEVICES");
	*n = e && atoi(e) == 1 ? 1 : 2;
	return 0;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
	char bus[32];
	const char *e = getenv("FAKE_CUDA_PCI_DOMAIN");
	snprintf(bus, sizeof bus, "%08lX:%02X:00.0", e ? strtoul(e, NULL, 0) : 0ul, 0x18 + i % 8);
	return nvmlDeviceGetHandleByPciBusId_v2(bus, dev);
}

EXPORT int nvmlDeviceGetName(void *dev, char *name, unsigned len)
{
	snprintf(name, len, "Fake GPU %u", ((struct gpu *)dev)->bus - 0x18);
	return 0;
}

/* ---- NVLink state (FAKE_NVML_TOPO) ---- */
typedef struct { /* nvmlPciInfo_t */
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} pci_info;
#define MAX_LINKS 18 /* NVML_NVLINK_MAX_LINKS */

/* GPU g's active links (0..*n-1) and whether they reach an NVSwitch. */
static void topo(const struct gpu *g, unsigned *n, int *sw)
{
	const char *t = getenv("FAKE_NVML_TOPO");
	unsigned b = g->bus;
	*n = 0, *sw = 0;
	if (t && !strncmp(t, "pair:", 5) && (b == 0x18 || b == 0x19))
		*n = (unsigned)atoi(t + 5);
	else if (t && !strncmp(t, "switch:", 7))
		*n = (unsigned)atoi(t + 7), *sw = 1;
	if (*n > MAX_LINKS)
		*n = MAX_LINKS;
}

/* @return 0 when link is active on dev (*sw: to an NVSwitch), else the NVML error */
static int active_link(void *dev, unsigned link, int *sw)
{
	unsigned n;
	if (link >= MAX_LINKS)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	topo(dev, &n, sw);
	return link < n ? 0 : 3; /* NVML_ERROR_NOT_SUPPORTED */
}

/* Whether FAKE_NVML_STATE lets route ("api" or "field") answer the links' state */
static int state_answers(const char *route)
{
	const char *e = getenv("FAKE_NVML_STATE");
	return !e || !*e || !strcmp(e, route);
}

static int flag(const char *var)
{
	const char *e = getenv(var);
	return e && *e && strcmp(e, "0");
}

/* The links each GPU has (FAKE_NVML_LINKS, default 18) */
static unsigned links_of(void)
{
	const char *ls = getenv("FAKE_NVML_LINKS");
	return ls && *ls ? (unsigned)atoi(ls) : 18;
}

/* @return 0 with *is_active (NVML_FEATURE_ENABLED = 1), or the NVML error */
static int link_state(void *dev, unsigned link, unsigned *is_active)
{
	unsigned n;
	int sw;
	if (link >= MAX_LINKS || link >= links_of())
		return 2;
	topo(dev, &n, &sw);
	unsigned trained = ((struct gpu *)dev)->trained >> link & 1;
	*is_active = link < n && (!flag("FAKE_NVML_TRAIN") || trained);
	return 0;
}

EXPORT int nvmlDeviceGetNvLinkState(void *dev, unsigned link, unsigned *is_active)
{
	return state_answers("api") ? link_state(dev, link, is_active) : 3;
}

EXPORT int nvmlDeviceGetNvLinkRemoteDeviceType(void *dev, unsigned link, unsigned *type)
{
	int sw, r = active_link(dev, link, &sw);
	const char *nt = getenv("FAKE_NVML_NOTYPE");
	if (r == 0 && nt && !strcmp(nt, "unknown"))
		*type = 0xff; /* NVML_NVLINK_DEVICE_TYPE_UNKNOWN */
	else if (r == 0 && flag("FAKE_NVML_NOTYPE"))
		return 3;
	else if (r == 0)
		*type = sw ? 2 : 0; /* NVML_NVLINK_DEVICE_TYPE_SWITCH : _GPU */
	return r;
}

EXPORT int nvmlDeviceGetPciInfo_v3(void *dev, pci_info *pci)
{
	const struct gpu *g = dev;
	memset(pci, 0, sizeof *pci);
	pci->domain = g->domain, pci->bus = g->bus;
	snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:00.0", pci->domain, pci->bus);
	return 0;
}

EXPORT int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, pci_info *pci)
{
	int sw, r = active_link(dev, link, &sw);
	if (r != 0)
		return r;
	const struct gpu *g = dev;
	memset(pci, 0, sizeof *pci);
	pci->domain = g->domain;
	pci->bus = sw ? 0x80 : g->bus ^ 1; /* the switch's own bus; the pair's other GPU */
	pci->device = 0;
	pci->pciDeviceId = sw ? 0x22a310de : 0x233510de;
	snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:00.0", pci->domain, pci->bus);
	snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:00.0", pci->domain,
	         pci->bus);
	if (sw && flag("FAKE_NVML_HIDDEN")) {
		memset(pci, 0, sizeof *pci);
		snprintf(pci->busId, sizeof pci->busId, "fffffff:ffff:ff");
	}
	return 0;
}

/* @return 0 with *version (nvmlNvlinkVersion_t), or the NVML error */
static int link_version(void *dev, unsigned link, unsigned *version)
{
	int sw, r = active_link(dev, link, &sw);
	const char *e = getenv("FAKE_NVML_NVLINK_VERSION");
	if (r == 0)
		*version = e && *e ? (unsigned)atoi(e) : 6; /* NVML_NVLINK_VERSION_4_0 */
	return r;
}

EXPORT int nvmlDeviceGetNvLinkVersion(void *dev, unsigned link, unsigned *version)
{
	return flag("FAKE_NVML_NOVERSION") ? 3 : link_version(dev, link, version);
}

EXPORT int nvmlDeviceGetNvLinkCapability(void *dev, unsigned link, unsigned cap, unsigned *yes)
{
	int sw, r = active_link(dev, link, &sw);
	if (r == 0 && cap == 0) /* NCCL: "The previous call should have trained the link" */
		((struct gpu *)dev)->trained |= 1u << link;
	if (r == 0 && flag("FAKE_NVML_NOCAPS"))
		return 3;
	if (r == 0)
		*yes = cap == 0 || cap == 2; /* P2P_SUPPORTED, P2P_ATOMICS */
	return r;
}

EXPORT int nvmlDeviceGetFieldValues(void *dev, int n, field_value *v)
{
	struct gpu *g = dev;
	unsigned links = links_of();
	/* a read of the counters (the link sampler's), not of a link's state or version (topo.c) */
	int counters = n > 0 && v[0].fieldId != 165 && v[0].fieldId != 166;
	g->reads += counters;
	const char *logp = getenv("FAKE_NVML_LOG");
	FILE *lf = counters && logp && *logp ? fopen(logp, "a") : NULL;
	if (lf) {
		fprintf(lf, "%d\n", n);
		fclose(lf);
	}
	for (int i = 0; i < n; i++) {
		unsigned f = v[i].fieldId;
		v[i].nvmlReturn = 0;
		v[i].valueType = f == 165 || f == 166 ? 1 : 3; /* NVML_VALUE_TYPE_UNSIGNED_INT, _LONG */
		if (f >= 138 && f <= 141 && v[i].scopeId >= links)
			v[i].nvmlReturn = 3;
		else if (f == 138 || f == 139)
			v[i].value.ull = g->reads * 64;
		else if (f == 140 || f == 141)
			v[i].value.ull = g->reads * 66;
		else if (f == 197 || f == 198)
			v[i].value.ull = g->reads << 20;
		else if (f == 165) /* NVML_FI_DEV_NVLINK_GET_STATE */
			v[i].nvmlReturn = state_answers("field")
			                      ? link_state(dev, v[i].scopeId, &v[i].value.ui)
			                      : 3;
		else if (f == 166) /* NVML_FI_DEV_NVLINK_GET_VERSION */
			v[i].nvmlReturn = link_version(dev, v[i].scopeId, &v[i].value.ui);
		else
			v[i].nvmlReturn = 3;
	}
	return 0;
}

EXPORT const char *nvmlErrorString(int r)
{
	return r == 0   ? "Success"
	       : r == 2 ? "Invalid Argument"
	       : r == 3 ? "Not Supported"
	       : r == 9 ? "Driver Not Loaded"
	                : "Unknown Error";
}

/* topo.c: the NVLink topology without CUPTI: DEVICE records from the driver API, NVLINK records from NVML's per-link state, grouped as CUPTI's NVLINK records are. */
/*
 * CUPTI gives one DEVICE record per device and one NVLINK record per pair of GPUs (direct links)
 * or per pair of GPUs that both reach an NVSwitch (nvswitchConnected). Here the same from the
 * driver (cuDeviceGetAttribute, cuDeviceGetUuid, cuDeviceGetName, cuDeviceTotalMem_v2) and NVML.
 * For each link: its state, and for an active one its remote's type, PCI address and NVLink
 * version. The state is read as NCCL reads it on compute capability 9.0 and later, through the
 * field NVML_FI_DEV_NVLINK_GET_STATE (scopeId = link), with nvmlDeviceGetNvLinkState where the
 * field does not answer (a one-GPU H100 VM answered "Not Supported" to the latter for every
 * link); the version likewise (nvmlDeviceGetNvLinkVersion, then NVML_FI_DEV_NVLINK_GET_VERSION);
 * what the link can carry from nvmlDeviceGetNvLinkCapability, as CUPTI's CUpti_LinkFlag bits
 * (CUPTI's record of two H200s on an NVSwitch: peer access and peer atomics).
 * Where NVML cannot say what a link reaches (nvmlDeviceGetNvLinkRemoteDeviceType fails or says
 * "unknown"), its remote PCI address decides, as NCCL decides it: a visible GPU is that GPU; an
 * address hidden from this VM (all f's, or no PCI device in /sys) or a device of PCI class 0x0680
 * is an NVSwitch, a display or 3D controller a GPU; anything else is left out. A remote GPU is
 * matched to a CUDA ordinal by PCI domain/bus/device. Links this process cannot pair, because the
 * GPU at the other end is hidden from it (CUDA_VISIBLE_DEVICES giving each rank one GPU) or no
 * other visible GPU reaches the NVSwitch, still give a GPU its NVLink: one record per GPU with
 * dev1 = -1, the links to hidden GPUs and, apart, the links to an NVSwitch no visible peer shares
 * (the analyzer takes a GPU's peak from them). CUPTI's records for such a process are not
 * measured. No state outlives the call (the shim's cap on mutable globals): everything is on the
 * stack, the NVML functions resolved per call.
 */
#include <dlfcn.h>   /* dlsym */
#include <stdio.h>   /* snprintf, fopen */
#include <string.h>  /* strlen */
#include <strings.h> /* strncasecmp */
#include <unistd.h>  /* access */

#include "link_int.h"
#include "nvlp_rt.h"

#define TOPO_MAX_DEV NVLP_CUPTI_MAX_DEV

/* nvmlPciInfo_t (declared here: no nvml.h on the build machine) */
typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} topo_pci_info;

enum { NVML_REMOTE_GPU = 0, NVML_REMOTE_IBMNPU = 1, NVML_REMOTE_SWITCH = 2 };
enum { NVML_INVALID_ARGUMENT = 2 }; /* a link index past the GPU's links */
/* NVML_FI_DEV_NVLINK_GET_STATE, _GET_VERSION (nvml.h) */
enum { FI_NVLINK_STATE = 165, FI_NVLINK_VERSION = 166 };

/* The NVML functions; state, type and version may be missing (their fallbacks answer). */
struct topo_nvml {
	int (*by_pci)(const char *, void **);
	int (*fields)(void *, int, nvml_field_value *);
	int (*state)(void *, unsigned, unsigned *); /* nvmlEnableState_t: 1 active */
	int (*type)(void *, unsigned, unsigned *);  /* nvmlIntNvLinkDeviceType_t */
	int (*remote_pci)(void *, unsigned, topo_pci_info *);
	int (*version)(void *, unsigned, unsigned *);       /* nvmlNvlinkVersion_t */
	int (*cap)(void *, unsigned, unsigned, unsigned *); /* nvmlNvLinkCapability_t */
	const char *(*err)(int);
};

/* What the links' state queries answered, over every device, for the NOTE. A link index both
 * routes call an invalid argument is past that GPU's links (12 on an A100, 18 asked): not
 * counted. */
struct topo_tally {
	int active, inactive, silent; /* silent: neither the field nor the function answered */
	char first[160];              /* the first silent link's GPU, link and answers */
	int other;                    /* links NVML gave another version than their GPU's */
	int o_gpu;                    /* the first of them: GPU, link, NVML's major version */
	unsigned o_link, o_nvml;
};

/* A GPU's links that go one record together: their mask, and the major NVLink version and
 * CUpti_LinkFlag bits of the first of them */
struct topo_bundle {
	uint32_t mask;
	unsigned version, caps;
};

struct topo_dev {
	uint64_t domain, bus, pcidev, uuid_hi;
	unsigned cc, arch_nvlink;    /* compute capability (major * 10 + minor), its NVLink */
	void *nvml;                  /* NULL: NVML has no handle for it */
	struct topo_bundle sw;       /* links to an NVSwitch */
	struct topo_bundle hid;      /* links to GPUs this process cannot see */
	int8_t peer[NVML_LINKS];     /* per link: the CUDA ordinal of its remote GPU, -1 none */
	uint8_t version[NVML_LINKS]; /* per link: major NVLink version */
	uint8_t caps[NVML_LINKS];    /* per link: CUpti_LinkFlag bits */
};

/* The NVLink major version of a GPU architecture (compute capability major): Pascal 1, Volta and
 * Turing 2, Ampere 3, Hopper 4, Blackwell (sm_100, sm_103) 5; 0 for one not known here. NVML's
 * own answer (nvmlNvlinkVersion_t, or field 166, whose encoding NVIDIA did not document before
 * 2025) is used only where the architecture does not say. */
static unsigned topo_arch_nvlink(uint64_t cc_major)
{
	static const unsigned char by_major[] = {0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5};
	return cc_major < sizeof by_major ? by_major[cc_major] : 0;
}

/* DEVICE record of ordinal dev, as CUPTI's (cupti/convert.c conv_device, activity.c's PCI ids);
 * keeps its PCI address and UUID in d for the links. */
static void topo_device(int dev, struct topo_dev *d)
{
	struct nvlp_rec_device r = {.device = (uint64_t)dev};
	nvlp_drv_device_pci(&r);
	d->domain = r.pci_domain, d->bus = r.pci_bus, d->pcidev = r.pci_dev;
	CUuuid u;
	memset(&u, 0, sizeof u);
	if (nvlp_drv.cuDeviceGetUuid && nvlp_drv.cuDeviceGetUuid(&u, dev) == 0) {
		r.uuid_hi = d->uuid_hi = nvlp_be64((const uint8_t *)u.bytes);
		r.uuid_lo = nvlp_be64((const uint8_t *)u.bytes + 8);
	}
	r.sm_count = nvlp_drv_attr(dev, 16 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */);
	size_t mem = 0;
	if (nvlp_drv.cuDeviceTotalMem_v2 && nvlp_drv.cuDeviceTotalMem_v2(&mem, dev) == 0)
		r.global_mem = mem;
	r.cc_major = nvlp_drv_attr(dev, 75 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */);
	r.cc_minor = nvlp_drv_attr(dev, 76 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */);
	d->cc = (unsigned)(r.cc_major * 10 + r.cc_minor);
	d->arch_nvlink = topo_arch_nvlink(r.cc_major);
	char name[256] = "";
	if (!nvlp_drv.cuDeviceGetName || nvlp_drv.cuDeviceGetName(name, sizeof name, dev) != 0)
		name[0] = 0;
	name[sizeof name - 1] = 0;
	nvlp_emit_wait(NVLP_K_DEVICE, &r, name, strlen(name), 1000);
}

/* The NVML functions from the loaded library. @return 0, or -1 (why) */
static int topo_bind(struct topo_nvml *f, char *why, size_t len)
{
	void *h = nvlp_lk_nvml_handle(why, len);
	if (!h)
		return -1;
	f->by_pci = (__typeof__(f->by_pci))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
	f->fields = (__typeof__(f->fields))dlsym(h, "nvmlDeviceGetFieldValues");
	f->state = (__typeof__(f->state))dlsym(h, "nvmlDeviceGetNvLinkState");
	f->type = (__typeof__(f->type))dlsym(h, "nvmlDeviceGetNvLinkRemoteDeviceType");
	f->remote_pci = (__typeof__(f->remote_pci))dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	f->version = (__typeof__(f->version))dlsym(h, "nvmlDeviceGetNvLinkVersion");
	f->cap = (__typeof__(f->cap))dlsym(h, "nvmlDeviceGetNvLinkCapability");
	f->err = (__typeof__(f->err))dlsym(h, "nvmlErrorString");
	const char *missing = !f->by_pci       ? "nvmlDeviceGetHandleByPciBusId_v2"
	                      : !f->fields     ? "nvmlDeviceGetFieldValues"
	                      : !f->remote_pci ? "nvmlDeviceGetNvLinkRemotePciInfo_v2"
	                                       : NULL;
	if (missing) {
		snprintf(why, len, "libnvidia-ml.so.1 lacks %s", missing);
		return -1;
	}
	return 0;
}

/* NVML's name of error r (-1: the function is absent) */
static const char *topo_err(const struct topo_nvml *f, int r)
{
	return r == -1 ? "absent" : f->err ? f->err(r) : "error";
}

/* Field id of link l. @return 0 (*v set), or NVML's error */
static int topo_field(const struct topo_nvml *f, void *dev, unsigned id, unsigned l, unsigned *v)
{
	nvml_field_value fv;
	memset(&fv, 0, sizeof fv);
	fv.fieldId = id, fv.scopeId = l;
	int r = f->fields(dev, 1, &fv);
	if (r == 0 && fv.nvmlReturn != 0)
		r = fv.nvmlReturn;
	if (r == 0)
		*v = fv.value.ui;
	return r;
}

/* Link l of GPU i: its state, the field first, then the function. @return 1 active, 0 inactive,
 * -1 neither answered (counted in t, the first such named) */
static int topo_state(const struct topo_nvml *f, void *dev, int i, unsigned l,
                      struct topo_tally *t)
{
	unsigned v = 0;
	int rf = topo_field(f, dev, FI_NVLINK_STATE, l, &v);
	int ra = rf == 0 ? 0 : f->state ? f->state(dev, l, &v) : -1;
	if (ra != 0) {
		if (rf == NVML_INVALID_ARGUMENT && (ra == NVML_INVALID_ARGUMENT || ra == -1))
			return -1; /* no such link */
		if (!t->silent++)
			snprintf(t->first, sizeof t->first,
			         "GPU %d link %u: field %d %s, nvmlDeviceGetNvLinkState %s", i, l,
			         FI_NVLINK_STATE, topo_err(f, rf), topo_err(f, ra));
		return -1;
	}
	if (v == 1)
		t->active++;
	else
		t->inactive++;
	return v == 1;
}

/* Link l's nvmlNvlinkVersion_t: the function, then the field; 0 unknown */
static unsigned topo_version(const struct topo_nvml *f, void *dev, unsigned l)
{
	unsigned v = 0;
	if (f->version && f->version(dev, l, &v) == 0)
		return v;
	return topo_field(f, dev, FI_NVLINK_VERSION, l, &v) == 0 ? v : 0;
}

/* The CUDA ordinal at a PCI address, or -1 (not visible in this process). */
static int topo_ordinal(const struct topo_dev *d, int n, const topo_pci_info *p)
{
	for (int i = 0; i < n; i++)
		if (d[i].domain == p->domain && d[i].bus == p->bus && d[i].pcidev == p->device)
			return i;
	return -1;
}

/* Link l's capabilities as CUpti_LinkFlag bits: NVML_NVLINK_CAP_P2P_SUPPORTED (0, asked before the
 * link's state: p2p), _SYSMEM_ACCESS (1), _P2P_ATOMICS (2), _SYSMEM_ATOMICS (3) are CUPTI's bits 1
 * to 4. */
static unsigned topo_caps(const struct topo_nvml *f, void *dev, unsigned l, int p2p)
{
	unsigned flags = p2p ? 2u : 0;
	for (unsigned c = 1; f->cap && c < 4; c++) {
		unsigned yes = 0;
		if (f->cap(dev, l, c, &yes) == 0 && yes)
			flags |= 2u << c;
	}
	return flags;
}

/* Whether the remote's address is the one NVML gives for a device hidden from this VM (NCCL
 * compares the bus id with "fffffff:ffff:ff"; the numbers may say it too). */
static int topo_hidden_remote(const topo_pci_info *p)
{
	return p->domain == 0xffffffffu || !strncasecmp(p->busId, "fffffff", 7) ||
	       !strncasecmp(p->busIdLegacy, "ffff", 4);
}

/* What an active link reaches when NVML does not say (its remote's type query failed or answered
 * "unknown"), from the remote's PCI address as NCCL reads it: a visible GPU; an address NVML marks
 * as hidden, or one with no PCI device in /sys (not visible inside this VM), or a PCI device of
 * class 0x0680 (an NVSwitch on bare metal): an NVSwitch; a display or 3D controller (class 0x0300,
 * 0x0302): a GPU this process cannot see. Anything else (a CPU), or no /sys/bus/pci to look in, is
 * left out.
 * @return NVML_REMOTE_GPU, NVML_REMOTE_SWITCH, or -1 */
static int topo_remote_type(const struct topo_dev *d, int n, const topo_pci_info *p)
{
	if (topo_ordinal(d, n, p) >= 0)
		return NVML_REMOTE_GPU;
	if (topo_hidden_remote(p))
		return NVML_REMOTE_SWITCH;
	char path[96], cls[16] = "";
	snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.0/class", p->domain, p->bus,
	         p->device);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return access("/sys/bus/pci/devices", F_OK) == 0 ? NVML_REMOTE_SWITCH : -1;
	int ok = fgets(cls, sizeof cls, fp) != NULL;
	fclose(fp);
	if (ok && (!strncasecmp(cls, "0x0300", 6) || !strncasecmp(cls, "0x0302", 6)))
		return NVML_REMOTE_GPU;
	return ok && !strncasecmp(cls, "0x0680", 6) ? NVML_REMOTE_SWITCH : -1;
}

/* Link l of device i's major NVLink version: its architecture's, else NVML's (v); an NVML answer
 * other than the architecture's is counted in t (the first one named). */
static unsigned topo_major(const struct topo_dev *d, int i, unsigned l, unsigned v,
                           struct topo_tally *t)
{
	unsigned m = nvlp_nvml_nvlink_major(v), a = d[i].arch_nvlink;
	if (!a)
		return m;
	if (m && m != a && t->other++ == 0)
		t->o_gpu = i, t->o_link = l, t->o_nvml = m;
	return a;
}

/* Link l (major NVLink version v, flags caps) into bundle b */
static void topo_bundle_add(struct topo_bundle *b, unsigned l, unsigned v, unsigned caps)
{
	if (!b->mask)
		b->version = v, b->caps = caps;
	b->mask |= 1u << l;
}

/* Link l of device i: its remote (a visible GPU, a hidden GPU or an NVSwitch) and version, into
 * d[i]. */
static void topo_link(const struct topo_nvml *f, struct topo_dev *d, int n, int i, unsigned l,
                      struct topo_tally *t)
{
	/* as NCCL does: the link's P2P capability first ("The previous call should have trained the
	 * link", src/graph/xml.cc), then its state */
	unsigned yes = 0;
	int p2p = f->cap &&
	          f->cap(d[i].nvml, l, 0 /* NVML_NVLINK_CAP_P2P_SUPPORTED */, &yes) == 0 && yes;
	if (topo_state(f, d[i].nvml, i, l, t) != 1)
		return;
	topo_pci_info p;
	memset(&p, 0, sizeof p);
	int have_pci = f->remote_pci(d[i].nvml, l, &p) == 0;
	unsigned type = 0;
	if (!f->type || f->type(d[i].nvml, l, &type) != 0 || type > NVML_REMOTE_SWITCH) {
		int ty = have_pci ? topo_remote_type(d, n, &p) : -1;
		if (ty < 0)
			return;
		type = (unsigned)ty;
	}
	unsigned v = topo_major(d, i, l, topo_version(f, d[i].nvml, l), t);
	unsigned caps = topo_caps(f, d[i].nvml, l, p2p);
	if (type == NVML_REMOTE_SWITCH) {
		topo_bundle_add(&d[i].sw, l, v, caps);
		return;
	}
	if (type != NVML_REMOTE_GPU)
		return; /* an IBM NPU: not in CUPTI's GPU-pair records either */
	int j = have_pci ? topo_ordinal(d, n, &p) : -1;
	if (j < 0 && have_pci) { /* a GPU hidden from this process */
		topo_bundle_add(&d[i].hid, l, v, caps);
		return;
	}
	if (j < 0 || j == i)
		return;
	d[i].peer[l] = (int8_t)j;
	d[i].version[l] = (uint8_t)v;
	d[i].caps[l] = (uint8_t)caps;
}

/* Every device's NVML handle and links. @return the devices with a handle; why names the first
 * one without. */
static int topo_scan(const struct topo_nvml *f, struct topo_dev *d, int n, char *why, size_t len,
                     struct topo_tally *t)
{
	int handles = 0;
	for (int i = 0; i < n; i++) {
		memset(d[i].peer, -1, sizeof d[i].peer);
		char bus[64] = "";
		if (!nvlp_drv.cuDeviceGetPCIBusId ||
		    nvlp_drv.cuDeviceGetPCIBusId(bus, sizeof bus, i) != 0) {
			snprintf(why, len, "no PCI bus id for CUDA device %d", i);
			continue;
		}
		int r = f->by_pci(bus, &d[i].nvml);
		if (r != 0) {
			d[i].nvml = NULL;
			snprintf(why, len, "nvmlDeviceGetHandleByPciBusId(%s): %s", bus, topo_err(f, r));
			continue;
		}
		handles++;
		for (unsigned l = 0; l < NVML_LINKS; l++)
			topo_link(f, d, n, i, l, t);
	}
	return handles;
}

static int topo_emit(const struct nvlp_rec_nvlink *r)
{
	return nvlp_emit_wait(NVLP_K_NVLINK, r, NULL, 0, 1000) == 0;
}

/* r's dev0 side from bundle b (flags: b's capabilities and more); emitted. @return emitted */
static int topo_emit_bundle(struct nvlp_rec_nvlink *r, const struct topo_bundle *b,
                            uint64_t more)
{
	r->ports0 = b->mask;
	r->links = (uint64_t)__builtin_popcount(b->mask);
	r->version = b->version;
	r->flags = b->caps | more;
	return topo_emit(r);
}

/* The records of the pair i < j: direct links, then through an NVSwitch. @return emitted */
static int topo_pair(const struct topo_dev *d, int i, int j)
{
	struct nvlp_rec_nvlink r = {.type0 = NVLP_DEV_TYPE_GPU, .type1 = NVLP_DEV_TYPE_GPU};
	r.dev0 = (uint64_t)i, r.dev1 = (uint64_t)j;
	r.id0 = d[i].uuid_hi, r.id1 = d[j].uuid_hi;
	unsigned v0 = 0, v1 = 0, c0 = 0, c1 = 0;
	for (int l = NVML_LINKS - 1; l >= 0; l--) { /* version and caps: those of the lowest link */
		if (d[i].peer[l] == j)
			r.ports0 |= 1ull << l, v0 = d[i].version[l], c0 = d[i].caps[l];
		if (d[j].peer[l] == i)
			r.ports1 |= 1ull << l, v1 = d[j].version[l], c1 = d[j].caps[l];
	}
	int n = 0;
	if (r.ports0 | r.ports1) {
		r.links = (uint64_t)__builtin_popcountll(r.ports0 ? r.ports0 : r.ports1);
		r.version = r.ports0 ? v0 : v1;
		r.flags = r.ports0 ? c0 : c1;
		n += topo_emit(&r);
	}
	if (d[i].sw.mask && d[j].sw.mask) {
		r.ports1 = d[j].sw.mask;
		n += topo_emit_bundle(&r, &d[i].sw, NVLP_NVLINK_F_NVSWITCH);
	}
	return n;
}

/* Device i's links that no pair record holds (dev1 = -1): to hidden GPUs, and to an NVSwitch
 * when no other visible GPU reaches one (on_switch: the visible GPUs that do). @return emitted */
static int topo_alone(const struct topo_dev *d, int i, int on_switch)
{
	struct nvlp_rec_nvlink r = {.type0 = NVLP_DEV_TYPE_GPU, .type1 = NVLP_DEV_TYPE_GPU};
	r.dev0 = (uint64_t)i, r.dev1 = (uint64_t)-1;
	r.id0 = d[i].uuid_hi;
	int emitted = 0;
	if (d[i].hid.mask)
		emitted += topo_emit_bundle(&r, &d[i].hid, 0);
	if (d[i].sw.mask && on_switch == 1)
		emitted += topo_emit_bundle(&r, &d[i].sw, NVLP_NVLINK_F_NVSWITCH);
	return emitted;
}

int nvlp_topo_nvml(int n, char *why, size_t len)
{
	if (n > TOPO_MAX_DEV)
		n = TOPO_MAX_DEV;
	struct topo_dev d[TOPO_MAX_DEV];
	memset(d, 0, sizeof d);
	for (int i = 0; i < n; i++)
		topo_device(i, &d[i]);
	struct topo_nvml f;
	if (topo_bind(&f, why, len) != 0)
		return -1;
	char first[256] = "";
	struct topo_tally t;
	memset(&t, 0, sizeof t);
	if (n > 0 && topo_scan(&f, d, n, first, sizeof first, &t) == 0) {
		snprintf(why, len, "%s", first);
		return -1;
	}
	int records = 0, alone = 0, on_switch = 0;
	for (int i = 0; i < n; i++) {
		on_switch += d[i].sw.mask != 0;
		for (int j = i + 1; j < n; j++)
			records += topo_pair(d, i, j);
	}
	for (int i = 0; i < n; i++)
		alone += topo_alone(d, i, on_switch);
	char more[96] = "";
	if (alone)
		snprintf(more, sizeof more, "%d record(s) of links beyond this process's GPUs; ", alone);
	int say = t.silent && !t.active; /* why no link was seen */
	char other[128] = "";
	if (t.other)
		snprintf(other, sizeof other,
		         "; NVLink %u as sm_%u's on %d link(s) (GPU %d link %u: NVML said %u)",
		         d[t.o_gpu].arch_nvlink, d[t.o_gpu].cc, t.other, t.o_gpu, t.o_link,
		         t.o_nvml);
	snprintf(why, len,
	         "%s" NVLP_NOTE_TOPO_LAZY_STATE " %d active, %d inactive, %d unanswered%s%s%s%s",
	         more, t.active, t.inactive, t.silent, say ? " (" : "", say ? t.first : "",
	         say ? ")" : "", other);
	return records;
}

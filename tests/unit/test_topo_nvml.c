/* test_topo_nvml.c: NVLPROF_CUPTI=lazy (CUPTI never attached): the topology from the driver API and NVML, the DEVICE and NVLINK records CUPTI would give. */
/*
 * The child runs under the shim with NVLPROF_CUPTI=lazy (CUPTI loaded, never attached: no CUPTI
 * record at all), calls cuInit on the fake libcuda (2 devices: "Fake GPU d", bus 0x18 + d, 132
 * SMs, 141 GiB) and the runtime, then waits while the link sampler's thread records the topology
 * (cupti/topo.c). The fake libnvidia-ml.so.1 (build/fakes/nvml) has the links that FAKE_NVML_TOPO
 * describes. The parent reads the trace: the DEVICE records (every field), the NVLINK records
 * (pairs, link counts, port masks, version, NVSwitch flag), and the NOTE that says how many pairs
 * were found, or why NVML gave none.
 * Cases: two GPUs joined by 4 links (PCI domain 2, compute capability 8.6); both on an NVSwitch
 * by 18 links (NVLink 5.0); no active link; one visible GPU whose links reach a GPU the process
 * cannot see, or an NVSwitch no visible GPU shares (a record with dev1 -1); NVML whose init fails; no NVML at all (skipped where a real one is installed).
 * The links' state read through the field NVML_FI_DEV_NVLINK_GET_STATE alone (the function
 * "Not Supported"), through nvmlDeviceGetNvLinkState alone, through neither (the NOTE names both
 * errors); no remote device type (a GPU found by its PCI address, an NVSwitch by its absence from
 * /sys, or by the address NVML gives a device hidden from the VM, with the type "unknown"; for one
 * visible GPU, by the remote's PCI class in a /sys of the test's own mount namespace: a display or
 * 3D controller a hidden GPU, 0x0680 or no such device an NVSwitch, a bridge or no /sys/bus/pci
 * left out; skipped where the test may not make a mount namespace) and
 * the version from its field; a GPU with 12 links (the indices past them not counted); the links'
 * capabilities as CUPTI's flags, or none where NVML does not say. The NOTE's tally of link states
 * in every case with NVML.
 * Also the NVML version enum -> NVLink major map (cupti_int.h) on its own.
 */
#include <cuda_runtime_api.h> /* cudaGetDeviceCount */
#include <dlfcn.h>            /* dlopen */
#include <limits.h>           /* PATH_MAX */
#include <stdio.h>            /* fopen */
#include <stdlib.h>           /* mkdtemp */
#include <string.h>           /* strstr */
#include <sched.h>            /* unshare */
#include <sys/mount.h>        /* mount */
#include <sys/stat.h>         /* mkdir */
#include <unistd.h>           /* access */

#include "check.h"
#include "cupti_int.h" /* nvlp_nvml_nvlink_major */
#include "nvlp_trace.h"
#include "shim_child.h"

/* cuInit: cuda.h (through cupti_int.h); the fake libcuda is linked in */

/* arg: "PATH" or "PATH:missing" (also say whether an NVML got loaded after all) */
static int child(const char *arg)
{
	char out[PATH_MAX];
	snprintf(out, sizeof out, "%s", arg);
	char *tail = strstr(out, ":missing");
	if (tail)
		*tail = 0;
	cuInit(0);
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1)
		return 4;
	sleep_ms(300); /* the sampler's first wakes: the topology */
	int real = tail && dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_NOLOAD) != NULL;
	FILE *f = fopen(out, "w");
	if (!f)
		return 5;
	fprintf(f, "%d\n", real);
	fclose(f);
	return 0;
}

#define MAXR 8
struct seen {
	int ndev, nnv;
	int ret, notes; /* from the topology NOTE: its pair count, or -1 with why */
	char why[256];
	struct nvlp_rec_device dev[MAXR];
	char name[MAXR][64];
	struct nvlp_rec_nvlink nv[MAXR];
};
static void on_rec(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	(void)r;
	struct seen *s = arg;
	if (rec->kind == NVLP_K_DEVICE) {
		if (s->ndev < MAXR) {
			memcpy(&s->dev[s->ndev], rec->f, sizeof s->dev[0]);
			snprintf(s->name[s->ndev], sizeof s->name[0], "%.*s", (int)rec->blob_len,
			         (const char *)rec->blob);
		}
		s->ndev++;
	} else if (rec->kind == NVLP_K_NOTE) {
		const struct nvlp_rec_note *n = (const void *)rec->f;
		const char *t = (const char *)rec->blob;
		static const char ok[] = "topology from the driver and NVML (NVLPROF_CUPTI=lazy)",
		                  no[] = "no NVLink topology (NVLPROF_CUPTI=lazy): ";
		if (rec->blob_len >= sizeof ok - 1 && !memcmp(t, ok, sizeof ok - 1)) {
			s->ret = (int)n->value;
			s->notes++;
			const char *tally = memmem(t, rec->blob_len, "; ", 2);
			if (tally)
				snprintf(s->why, sizeof s->why, "%.*s",
				         (int)(rec->blob_len - (size_t)(tally + 2 - t)), tally + 2);
		} else if (rec->blob_len >= sizeof no - 1 && !memcmp(t, no, sizeof no - 1)) {
			s->ret = -1;
			s->notes++;
			snprintf(s->why, sizeof s->why, "%.*s",
			         (int)(rec->blob_len - (sizeof no - 1)), t + sizeof no - 1);
		}
	} else if (rec->kind == NVLP_K_NVLINK) {
		if (s->nnv < MAXR)
			memcpy(&s->nv[s->nnv], rec->f, sizeof s->nv[0]);
		s->nnv++;
	}
}

static uint64_t uuid_half(unsigned base, int dev, int half)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | ((base + (unsigned)dev * 16 + (unsigned)(half * 8 + i)) & 0xff);
	return v;
}

struct topo_case {
	const char *name;
	const char *topo, *version, *domain, *cc, *devices, *init;
	int nvml; /* 0: no NVML in reach */
	/* FAKE_NVML_STATE, _NOTYPE, _NOVERSION (fake_nvml.c); the tally the NOTE must give */
	const char *state, *notype, *noversion, *tally, *train;
	const char *nocaps, *links, *hidden; /* FAKE_NVML_NOCAPS, _LINKS, _HIDDEN */
	int sysfs; /* the NVSwitch is found only where /sys/bus/pci/devices exists */
	int alone; /* one GPU visible: 1 its links to the hidden GPU, 2 to the NVSwitch (dev1 -1) */
	/* the remote's PCI class in a /sys of the test's own (its own mount namespace): "0x030200"
	 * and so on, "" no such device, "nodir" no /sys/bus/pci/devices; alone 0 then: no record */
	const char *pciclass;
};

/* The DEVICE records: n of them, every field as the fake libcuda reports it. */
static void check_devices(const struct topo_case *c, const struct seen *s, unsigned base, int n)
{
	unsigned dom = c->domain ? (unsigned)atoi(c->domain) : 0;
	int major = 9, minor = 0;
	if (c->cc)
		sscanf(c->cc, "%d.%d", &major, &minor);
	CHECK(s->ndev == n, "[%s] %d DEVICE records (%d)", c->name, n, s->ndev);
	for (int i = 0; i < n && i < s->ndev; i++) {
		const struct nvlp_rec_device *d = &s->dev[i];
		char want[32];
		snprintf(want, sizeof want, "Fake GPU %d", i);
		CHECK(d->device == (uint64_t)i && d->pci_domain == dom && d->pci_bus == 0x18u + i &&
		          d->pci_dev == 0,
		      "[%s] DEVICE %d: ordinal and PCI %llx:%llx:%llx", c->name, i,
		      (unsigned long long)d->pci_domain, (unsigned long long)d->pci_bus,
		      (unsigned long long)d->pci_dev);
		CHECK(d->uuid_hi == uuid_half(base, i, 0) && d->uuid_lo == uuid_half(base, i, 1),
		      "[%s] DEVICE %d: UUID big-endian halves (%016llx %016llx)", c->name, i,
		      (unsigned long long)d->uuid_hi, (unsigned long long)d->uuid_lo);
		CHECK(d->sm_count == 132 && d->global_mem == 141ull << 30 &&
		          d->cc_major == (uint64_t)major && d->cc_minor == (uint64_t)minor,
		      "[%s] DEVICE %d: 132 SMs, 141 GiB, cc %d.%d (%llu SMs, %llu B, cc %llu.%llu)",
		      c->name, i, major, minor, (unsigned long long)d->sm_count,
		      (unsigned long long)d->global_mem, (unsigned long long)d->cc_major,
		      (unsigned long long)d->cc_minor);
		CHECK(!strcmp(s->name[i], want), "[%s] DEVICE %d: named \"%s\" (\"%s\")", c->name,
		      i, want, s->name[i]);
	}
}

/* The one NVLINK record a case expects: between GPUs 0 and 1 (the NOTE counts 1 pair), or, for a
 * case with one GPU visible (c->alone), GPU 0's links beyond the process: dev1 -1, id1 0, no
 * ports on the far side (the NOTE counts 0 pairs). */
static void check_link(const struct topo_case *c, const struct seen *s, unsigned base, int rc,
                       unsigned links, int sw, unsigned version)
{
	uint64_t mask = (1ull << links) - 1, mask1 = c->alone ? 0 : mask;
	int64_t dev1 = c->alone ? -1 : 1;
	uint64_t id1 = c->alone ? 0 : uuid_half(base, 1, 0);
	CHECK(rc == !c->alone && s->nnv == 1, "[%s] returns %d pair(s), one NVLINK record (%d, %d)",
	      c->name, !c->alone, rc, s->nnv);
	if (s->nnv < 1)
		return;
	const struct nvlp_rec_nvlink *l = &s->nv[0];
	CHECK(l->dev0 == 0 && (int64_t)l->dev1 == dev1 && l->type0 == NVLP_DEV_TYPE_GPU &&
	          l->type1 == NVLP_DEV_TYPE_GPU && l->id0 == uuid_half(base, 0, 0) && l->id1 == id1,
	      "[%s] NVLINK: GPU 0 - %s, ids %s (dev %lld-%lld, id1 %llx)", c->name,
	      c->alone ? "beyond the process (dev1 -1)" : "GPU 1",
	      c->alone ? "GPU 0's UUID's first half and 0" : "their UUIDs' first halves",
	      (long long)l->dev0, (long long)l->dev1, (unsigned long long)l->id1);
	CHECK(l->links == links && l->ports0 == mask && l->ports1 == mask1 && l->bandwidth == 0,
	      "[%s] NVLINK: %u links, ports 0x%llx and 0x%llx (%llu, 0x%llx, 0x%llx, bw %llu)",
	      c->name, links, (unsigned long long)mask, (unsigned long long)mask1,
	      (unsigned long long)l->links, (unsigned long long)l->ports0,
	      (unsigned long long)l->ports1, (unsigned long long)l->bandwidth);
	CHECK(l->version == version, "[%s] NVLINK: version %u (%llu)", c->name, version,
	      (unsigned long long)l->version);
	/* CUpti_LinkFlag: peer access (1 << 1) and peer atomics (1 << 3), as CUPTI gave two H200s
	 */
	uint64_t caps = c->nocaps ? 0 : 0xa;
	CHECK(l->flags == ((sw ? NVLP_NVLINK_F_NVSWITCH : 0) | caps),
	      "[%s] NVLINK: flags %s%s (0x%llx)", c->name,
	      sw ? "the NVSwitch bit" : "no NVSwitch bit",
	      caps ? ", peer access and atomics" : ", no capability", (unsigned long long)l->flags);
}

/* The remote (bus 0x80 of PCI domain 0, the fake NVML's NVSwitch) as /sys shows it: a tmpfs over
 * /sys/bus/pci in a mount namespace of this process's own (made once; the children inherit it)
 * with that device's class file, cls "" no such device, "nodir" no devices directory.
 * @return 0, or -1 where this process may not make a mount namespace (not root) */
static int fake_sysfs(const char *cls)
{
	static int made;
	if (!made) {
		made = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
		               mount("nvlp-test", "/sys/bus/pci", "tmpfs", 0, NULL) == 0
		           ? 1
		           : -1;
	}
	if (made < 0)
		return -1;
	const char *dev = "/sys/bus/pci/devices/0000:80:00.0";
	unlink("/sys/bus/pci/devices/0000:80:00.0/class");
	rmdir(dev);
	rmdir("/sys/bus/pci/devices");
	if (!strcmp(cls, "nodir"))
		return 0;
	if (mkdir("/sys/bus/pci/devices", 0755) || (*cls && mkdir(dev, 0755)))
		return -1;
	FILE *f = *cls ? fopen("/sys/bus/pci/devices/0000:80:00.0/class", "w") : NULL;
	if (f) {
		fprintf(f, "%s\n", cls);
		fclose(f);
	}
	return *cls && !f ? -1 : 0;
}

/* The NVLink version a case's records carry: its GPU architecture's (FAKE_CUDA_CC, default 9.0:
 * Hopper, 4) whatever NVML says; NVML's (FAKE_NVML_NVLINK_VERSION, default 6: 4.0) for an
 * architecture not known */
static unsigned want_version(const struct topo_case *c)
{
	int major = c->cc ? atoi(c->cc) : 9;
	if (major >= 6 && major <= 10)
		return (unsigned)major - 5;
	return nvlp_nvml_nvlink_major(c->version ? (unsigned)atoi(c->version) : 6);
}

static void run(const char *self, const char *lib, unsigned base, const struct topo_case *c)
{
	char dir[] = "/tmp/nvlp-topo.XXXXXX", b[64], ldp[PATH_MAX + 64], out[PATH_MAX + 32];
	char tp[64], ver[64], dom[64], cc[64], ndev[64], init[64], st[64], nt[64], nv[64];
	char nc[64], nl[64], hd[64], tr[64];
	if (c->pciclass && fake_sysfs(c->pciclass) != 0) {
		printf("SKIP: [%s] no mount namespace of its own here (not root): /sys not faked\n", c->name);
		return;
	}
	if (!mkdtemp(dir))
		return;
	snprintf(b, sizeof b, "FAKE_CUDA_UUID_BASE=%u", base);
	snprintf(ldp, sizeof ldp, "LD_LIBRARY_PATH=%.*s/../fakes/nvml",
	         (int)(strrchr(self, '/') - self), self);
	snprintf(tp, sizeof tp, "FAKE_NVML_TOPO%s%s", c->topo ? "=" : "", c->topo ? c->topo : "");
#define ENV(buf, var, v) snprintf(buf, sizeof buf, "%s%s%s", var, v ? "=" : "", v ? v : "")
	ENV(ver, "FAKE_NVML_NVLINK_VERSION", c->version);
	ENV(dom, "FAKE_CUDA_PCI_DOMAIN", c->domain);
	ENV(cc, "FAKE_CUDA_CC", c->cc);
	ENV(ndev, "FAKE_CUDA_DEVICES", c->devices);
	ENV(init, "FAKE_NVML_INIT", c->init);
	ENV(st, "FAKE_NVML_STATE", c->state);
	ENV(nt, "FAKE_NVML_NOTYPE", c->notype);
	ENV(nv, "FAKE_NVML_NOVERSION", c->noversion);
	ENV(nc, "FAKE_NVML_NOCAPS", c->nocaps);
	ENV(nl, "FAKE_NVML_LINKS", c->links);
	ENV(hd, "FAKE_NVML_HIDDEN", c->hidden);
	ENV(tr, "FAKE_NVML_TRAIN", c->train);
	const char *env[] = {"NVLPROF_CUPTI=lazy",
	                     b,
	                     c->nvml ? ldp : "LD_LIBRARY_PATH",
	                     tp,
	                     ver,
	                     dom,
	                     cc,
	                     ndev,
	                     init,
	                     st,
	                     nt,
	                     nv,
	                     nc,
	                     nl,
	                     hd,
	                     tr,
	                     NULL};
	snprintf(out, sizeof out, "%s/topo.out%s", dir, c->nvml ? "" : ":missing");
	int rc = shim_run_child(self, lib, dir, "100000", env, out);
	CHECK(rc == 0, "[%s] the child ran (status %d)", c->name, rc);
	struct trace_summary sum;
	trace_summarize(dir, &sum);
	CHECK(sum.complete == 1, "[%s] trace complete", c->name);
	struct seen s;
	memset(&s, 0, sizeof s);
	trace_dir_each(dir, on_rec, NULL, &s);
	int real = 0;
	*strrchr(out, '/') = 0;
	strcat(out, "/topo.out");
	FILE *f = fopen(out, "r");
	if (!f || fscanf(f, "%d", &real) != 1)
		real = 0;
	if (f)
		fclose(f);
	int ret = s.notes == 1 ? s.ret : -9;
	const char *why = s.why;
	CHECK(s.notes == 1, "[%s] one topology NOTE (%d)", c->name, s.notes);
	int n = c->devices ? atoi(c->devices) : 2;
	if (!c->nvml && real) {
		printf("SKIP: [%s] a real libnvidia-ml.so.1 is installed here\n", c->name);
	} else if (!c->nvml || c->init) {
		check_devices(c, &s, base, n);
		CHECK(ret == -1 && s.nnv == 0, "[%s] returns -1, no NVLINK record (%d, %d)",
		      c->name, ret, s.nnv);
		const char *want = c->init ? "nvmlInit_v2: Driver Not Loaded" : "libnvidia-ml.so.1";
		CHECK(strstr(why, want) != NULL, "[%s] the reason names %s (\"%s\")", c->name, want,
		      why);
	} else {
		check_devices(c, &s, base, n);
		int silent = c->state && !strcmp(c->state, "none");
		if (c->alone)
			check_link(c, &s, base, ret, strstr(c->topo, "switch:18") ? 18 : 4,
			           c->alone == 2, want_version(c));
		else if (c->pciclass)
			CHECK(ret == 0 && s.nnv == 0,
			      "[%s] returns 0, no NVLINK record: the links left out (%d, %d)", c->name,
			      ret, s.nnv);
		else if (c->topo && strstr(c->topo, "pair:4") && n == 2 && !silent)
			check_link(c, &s, base, ret, 4, 0, want_version(c));
		else if (c->topo && strstr(c->topo, "switch:18") &&
		         (!c->sysfs || access("/sys/bus/pci/devices", F_OK) == 0))
			check_link(c, &s, base, ret, 18, 1, want_version(c));
		else
			CHECK(ret == 0 && s.nnv == 0,
			      "[%s] returns 0, no NVLINK record (%d, %d; %s)", c->name, ret, s.nnv,
			      why);
		if (c->tally)
			CHECK(!strcmp(why, c->tally), "[%s] the NOTE says \"%s\" (\"%s\")", c->name,
			      c->tally, why);
	}
	shim_rm_rf(dir);
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	/* nvmlNvlinkVersion_t -> the major number CUPTI records */
	CHECK(nvlp_nvml_nvlink_major(6) == 4 && nvlp_nvml_nvlink_major(4) == 3 &&
	          nvlp_nvml_nvlink_major(7) == 5,
	      "NVML NVLink version enum: 6 (4.0) -> 4, 4 (3.0) -> 3, 7 (5.0) -> 5");
	CHECK(nvlp_nvml_nvlink_major(1) == 1 && nvlp_nvml_nvlink_major(3) == 2 &&
	          nvlp_nvml_nvlink_major(5) == 3 && nvlp_nvml_nvlink_major(0) == 0 &&
	          nvlp_nvml_nvlink_major(99) == 0,
	      "NVML NVLink version enum: 1 -> 1, 3 (2.2) -> 2, 5 (3.1) -> 3; invalid/unknown -> 0");
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	unsigned base = 0x40 | ((unsigned)getpid() & 0x3f);
	static const char silent[] =
	    "NVML link state: 0 active, 0 inactive, 36 unanswered (GPU 0 link 0: field 165 Not "
	    "Supported, nvmlDeviceGetNvLinkState Not Supported)";
	static const char beyond18[] = "1 record(s) of links beyond this process's GPUs; NVML link "
	                               "state: 18 active, 0 inactive, 0 unanswered";
	static const char plain18[] = "NVML link state: 18 active, 0 inactive, 0 unanswered";
	static const struct topo_case cases[] = {
	    {.name = "pair:4",
	     .topo = "pair:4",
	     .domain = "2",
	     .cc = "8.6",
	     .version = "4",
	     .nvml = 1,
	     .tally = "NVML link state: 8 active, 28 inactive, 0 unanswered"},
	    /* NVML's version not the architecture's (an H100 said to answer NVLink 5.0): the
	     * architecture's, and the NOTE says where NVML differed */
	    {.name = "pair:4, NVML's version not sm_90's",
	     .topo = "pair:4",
	     .version = "7",
	     .cc = "9.0",
	     .nvml = 1,
	     .tally = "NVML link state: 8 active, 28 inactive, 0 unanswered; NVLink 4 as sm_90's on "
	              "8 link(s) (GPU 0 link 0: NVML said 5)"},
	    /* links that read inactive until their P2P capability was asked for, as NCCL's order
	     * assumes: asked first, they are seen */
	    {.name = "pair:4, links trained by the capability query",
	     .topo = "pair:4",
	     .nvml = 1,
	     .train = "1",
	     .tally = "NVML link state: 8 active, 28 inactive, 0 unanswered"},
	    /* an architecture not in the table (sm_120): NVML's version as it says */
	    {.name = "pair:4, sm_120: NVML's version",
	     .topo = "pair:4",
	     .version = "7",
	     .cc = "12.0",
	     .nvml = 1,
	     .tally = "NVML link state: 8 active, 28 inactive, 0 unanswered"},
	    {.name = "switch:18",
	     .topo = "switch:18",
	     .version = "7",
	     .cc = "10.0",
	     .nvml = 1,
	     .tally = "NVML link state: 36 active, 0 inactive, 0 unanswered"},
	    {.name = "none",
	     .nvml = 1,
	     .tally = "NVML link state: 0 active, 36 inactive, 0 unanswered"},
	    /* CUDA_VISIBLE_DEVICES giving the process one GPU: its links to the GPU it cannot see,
	     * its links to an NVSwitch that no visible GPU shares, each in a record of its own */
	    {.name = "pair:4, one GPU visible",
	     .topo = "pair:4",
	     .devices = "1",
	     .nvml = 1,
	     .alone = 1,
	     .tally = "1 record(s) of links beyond this process's GPUs; NVML link state: 4 active, "
	              "14 inactive, 0 unanswered"},
	    {.name = "switch:18, one GPU visible",
	     .topo = "switch:18",
	     .version = "7",
	     .cc = "10.0",
	     .devices = "1",
	     .nvml = 1,
	     .alone = 2,
	     .tally = "1 record(s) of links beyond this process's GPUs; NVML link state: 18 active, "
	              "0 inactive, 0 unanswered"},
	    {.name = "NVML init fails", .topo = "pair:4", .init = "9", .nvml = 1},
	    {.name = "no NVML", .topo = "pair:4", .nvml = 0},
	    /* the state through the field alone (nvmlDeviceGetNvLinkState "Not Supported", as on a
	     * one-GPU H100 VM), through the function alone, through neither */
	    {.name = "pair:4, state from the field only",
	     .topo = "pair:4",
	     .nvml = 1,
	     .state = "field",
	     .tally = "NVML link state: 8 active, 28 inactive, 0 unanswered"},
	    {.name = "pair:4, state from the function only, no capabilities",
	     .topo = "pair:4",
	     .nvml = 1,
	     .state = "api",
	     .nocaps = "1",
	     .tally = "NVML link state: 8 active, 28 inactive, 0 unanswered"},
	    {.name = "pair:4, no state answered",
	     .topo = "pair:4",
	     .nvml = 1,
	     .state = "none",
	     .tally = silent},
	    /* no remote type: a visible GPU by its PCI address, an NVSwitch by its absence from
	     * /sys (PCI domain 0x7e57: no such device); the version from the field */
	    {.name = "pair:4, no remote type, version from the field",
	     .topo = "pair:4",
	     .version = "7",
	     .cc = "10.0",
	     .nvml = 1,
	     .notype = "1",
	     .noversion = "1"},
	    {.name = "switch:18, no remote type, not in /sys",
	     .topo = "switch:18",
	     .version = "7",
	     .cc = "10.0",
	     .domain = "32343",
	     .nvml = 1,
	     .notype = "1",
	     .sysfs = 1},
	    /* the type "unknown", the remote's address the one NVML gives a device hidden from the
	     * VM (NCCL's "fffffff:ffff:ff") */
	    {.name = "switch:18, remote type unknown, address hidden",
	     .topo = "switch:18",
	     .version = "7",
	     .cc = "10.0",
	     .nvml = 1,
	     .notype = "unknown",
	     .hidden = "1"},
	    /* 12 links per GPU (an A100): the 6 indices past them are not counted as unanswered */
	    {.name = "pair:4, 12 links per GPU",
	     .topo = "pair:4",
	     .nvml = 1,
	     .links = "12",
	     .tally = "NVML link state: 8 active, 16 inactive, 0 unanswered"},
	    /* one GPU visible, no remote type, the remote's address not a visible GPU: what /sys says
	     * of it (a /sys of the test's own): a 3D or display controller is a GPU the process cannot
	     * see, a bridge class 0x0680 or no such device (a VM) an NVSwitch, anything else (a
	     * CPU) or no /sys/bus/pci at all is left out */
	    {.name = "switch:18, one GPU, no remote type, PCI class 0x0302 (hidden GPU)",
	     .topo = "switch:18", .version = "7",
	     .cc = "10.0", .devices = "1", .nvml = 1, .notype = "1",
	     .pciclass = "0x030200", .alone = 1, .tally = beyond18},
	    {.name = "switch:18, one GPU, no remote type, PCI class 0x0300 (hidden GPU)",
	     .topo = "switch:18", .version = "7",
	     .cc = "10.0", .devices = "1", .nvml = 1, .notype = "1",
	     .pciclass = "0x030000", .alone = 1, .tally = beyond18},
	    {.name = "switch:18, one GPU, no remote type, PCI class 0x0680 (NVSwitch)",
	     .topo = "switch:18", .version = "7",
	     .cc = "10.0", .devices = "1", .nvml = 1, .notype = "1",
	     .pciclass = "0x068000", .alone = 2, .tally = beyond18},
	    {.name = "switch:18, one GPU, no remote type, no such PCI device (NVSwitch)",
	     .topo = "switch:18", .version = "7",
	     .cc = "10.0", .devices = "1", .nvml = 1, .notype = "1",
	     .pciclass = "", .alone = 2, .tally = beyond18},
	    {.name = "switch:18, one GPU, no remote type, PCI class 0x0604 (left out)",
	     .topo = "switch:18", .version = "7",
	     .cc = "10.0", .devices = "1", .nvml = 1, .notype = "1",
	     .pciclass = "0x060400", .tally = plain18},
	    {.name = "switch:18, one GPU, no remote type, no /sys/bus/pci/devices (left out)",
	     .topo = "switch:18", .version = "7",
	     .cc = "10.0", .devices = "1", .nvml = 1, .notype = "1",
	     .pciclass = "nodir", .tally = plain18},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		run(self, lib, base, &cases[i]);
	return CHECK_DONE();
}

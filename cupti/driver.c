/* driver.c: the one owner of the CUPTI and driver function tables: finds libcupti and libcuda, fills nvlp_cu / nvlp_drv. */
/*
 * Finding CUPTI. Never linked: a libcupti.so.13 or .12 already in the process (torch loads it),
 * else libcupti.so.N next to the loaded libcudart.so.N (also the pip-wheel layout
 * nvidia/cuda_cupti/lib), else $CUDA_HOME and /usr/local/cuda, N first that of the loaded runtime,
 * then 13, then 12 (CUPTI of CUDA 12 and 13 share the record layouts we read: convert.c). Every function we call is in one table (cupti_int.h), resolved
 * with dlsym on that handle, so our own calls never reach our exported cupti* wrappers.
 */
#include <dlfcn.h>   /* dlopen, dlsym, dladdr */
#include <link.h>    /* dl_iterate_phdr */
#include <limits.h>  /* PATH_MAX */
#include <pthread.h> /* pthread_mutex_t */
#include <stdio.h>   /* snprintf */
#include <stdlib.h>  /* getenv */
#include <string.h>  /* strcmp, strrchr */

#include "cupti_int.h"

struct nvlp_cupti_table nvlp_cu;
struct nvlp_driver_table nvlp_drv;

static struct {
	void *handle;        /* libcupti */
	char path[PATH_MAX]; /* its path */
	pthread_mutex_t load_mu;
	int loaded; /* 1 ok, -1 failed */
	char load_why[512];
	int drv_loaded; /* 1 ok, -1 failed */
} cupti_library = {.load_mu = PTHREAD_MUTEX_INITIALIZER};

const char *nvlp_cupti_err(CUptiResult r)
{
	const char *s = NULL;
	if (nvlp_cu.cuptiGetResultString && nvlp_cu.cuptiGetResultString(r, &s) == CUPTI_SUCCESS &&
	    s)
		return s;
	return "CUPTI error";
}


/* ---- finding libcupti ---- */

struct cudart_dir {
	char dir[PATH_MAX];
	int major; /* N of libcudart.so.N, 0 unknown */
};
static int find_cudart(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct cudart_dir *d = arg;
	const char *name = info->dlpi_name, *slash;
	if (!name || !(slash = strrchr(name, '/')) || strncmp(slash + 1, "libcudart.so", 12) != 0)
		return 0;
	snprintf(d->dir, sizeof d->dir, "%.*s", (int)(slash - name), name);
	d->major = slash[13] == '.' ? atoi(slash + 14) : 0;
	return 1;
}

/* The CUPTI majors we read (convert.c), newest first. */
static const int cupti_majors[] = {13, 12};
#define NMAJORS (int)(sizeof cupti_majors / sizeof cupti_majors[0])

void *nvlp_cupti_loaded(void)
{
	char so[32];
	for (int i = 0; i < NMAJORS; i++) {
		snprintf(so, sizeof so, "libcupti.so.%d", cupti_majors[i]);
		void *h = dlopen(so, RTLD_LAZY | RTLD_NOLOAD);
		if (h)
			return h;
	}
	return NULL;
}

static void *try_open(const char *path, int flags)
{
	void *h = dlopen(path, flags);
	if (h) {
		size_t n = strnlen(path, sizeof cupti_library.path - 1);
		memcpy(cupti_library.path, path, n);
		cupti_library.path[n] = 0;
	}
	return h;
}

/* libcupti.so.<major> under the usual places; NULL if none. */
static void *open_major(const struct cudart_dir *d, int major)
{
	char p[PATH_MAX + 64];
	void *h;
	if (d->dir[0]) {
		/* toolkit layout (lib64/), then pip wheels (nvidia/cuda_runtime/lib ->
		 * cuda_cupti/lib) */
		const char *rel[] = {"", "/../extras/CUPTI/lib64", "/../../cuda_cupti/lib"};
		for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
			snprintf(p, sizeof p, "%s%s/libcupti.so.%d", d->dir, rel[i], major);
			if ((h = try_open(p, RTLD_LAZY | RTLD_LOCAL)))
				return h;
		}
	}
	const char *home = getenv("CUDA_HOME");
	const char *roots[] = {home, "/usr/local/cuda"};
	const char *sub[] = {"extras/CUPTI/lib64", "targets/x86_64-linux/lib", "lib64"};
	for (size_t i = 0; i < 2; i++) {
		if (!roots[i] || !roots[i][0])
			continue;
		for (size_t j = 0; j < 3; j++) {
			snprintf(p, sizeof p, "%s/%s/libcupti.so.%d", roots[i], sub[j], major);
			if ((h = try_open(p, RTLD_LAZY | RTLD_LOCAL)))
				return h;
		}
	}
	snprintf(p, sizeof p, "libcupti.so.%d", major);
	return try_open(p, RTLD_LAZY | RTLD_LOCAL); /* LD_LIBRARY_PATH, ld.so.cache */
}

static void *open_cupti(void)
{
	void *h = nvlp_cupti_loaded();
	if (h) {
		/* record where it is, for the NOTE */
		void *f = dlsym(h, "cuptiGetVersion");
		Dl_info di;
		if (f && dladdr(f, &di) && di.dli_fname)
			snprintf(cupti_library.path, sizeof cupti_library.path, "%s", di.dli_fname);
		else
			snprintf(cupti_library.path, sizeof cupti_library.path,
			         "libcupti (already loaded)");
		return h;
	}
	struct cudart_dir d = {"", 0};
	dl_iterate_phdr(find_cudart, &d);
	/* the runtime's own major first: a CUDA 12 job gets CUPTI 12 even where 13 is installed */
	if (d.major && (h = open_major(&d, d.major)))
		return h;
	for (int i = 0; i < NMAJORS; i++)
		if (cupti_majors[i] != d.major && (h = open_major(&d, cupti_majors[i])))
			return h;
	return NULL;
}

int nvlp_cupti_load(char *why, size_t whylen)
{
	pthread_mutex_lock(&cupti_library.load_mu);
	if (!cupti_library.loaded) {
		cupti_library.handle = open_cupti();
		if (!cupti_library.handle) {
			snprintf(cupti_library.load_why, sizeof cupti_library.load_why,
			         "libcupti.so.13/.12 not found (not loaded, not next to libcudart, "
			         "not under $CUDA_HOME or /usr/local/cuda): %s",
			         dlerror());
			cupti_library.loaded = -1;
		} else {
			struct nvlp_cupti_table t;
			int missing = 0;
			char names[256] = "";
#define NVLP_RESOLVE(name, req)                                                                    \
	t.name = (__typeof__(t.name))dlsym(cupti_library.handle, #name);                           \
	if (!t.name && #req[0] == 'R') {                                                           \
		missing++;                                                                         \
		size_t l_ = strlen(names);                                                         \
		snprintf(names + l_, sizeof names - l_, "%s%s", l_ ? " " : "", #name);             \
	}
			NVLP_CUPTI_FUNCS(NVLP_RESOLVE, NVLP_RESOLVE)
#undef NVLP_RESOLVE
			nvlp_cu = t;
			if (missing) {
				snprintf(cupti_library.load_why, sizeof cupti_library.load_why,
				         "%.300s lacks %.200s", cupti_library.path, names);
				cupti_library.loaded = -1;
			} else {
				cupti_library.loaded = 1;
			}
		}
	}
	int rc = cupti_library.loaded == 1 ? 0 : -1;
	if (rc && why)
		snprintf(why, whylen, "%s", cupti_library.load_why);
	pthread_mutex_unlock(&cupti_library.load_mu);
	return rc;
}

const char *nvlp_cupti_path(void)
{
	return cupti_library.path;
}

/* ---- the driver (libcuda.so.1): stream contexts, device attributes, no-driver diagnosis ---- */

uint64_t nvlp_drv_attr(int dev, int attr)
{
	int v = 0;
	if (nvlp_drv.cuDeviceGetAttribute && nvlp_drv.cuDeviceGetAttribute(&v, attr, dev) == 0)
		return (uint64_t)(unsigned)v;
	return 0;
}

void nvlp_drv_device_pci(struct nvlp_rec_device *r)
{
	int dev = (int)r->device;
	r->pci_domain = nvlp_drv_attr(dev, 50 /* CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID */);
	r->pci_bus = nvlp_drv_attr(dev, 33 /* CU_DEVICE_ATTRIBUTE_PCI_BUS_ID */);
	r->pci_dev = nvlp_drv_attr(dev, 34 /* CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID */);
}

int nvlp_driver_load(char *why, size_t whylen)
{
	if (__atomic_load_n(&cupti_library.drv_loaded, __ATOMIC_ACQUIRE) == 1)
		return 0; /* hot path (stream ids): no lock once loaded */
	pthread_mutex_lock(&cupti_library.load_mu);
	if (cupti_library.drv_loaded != 1) {
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
		if (!h) {
			if (why)
				snprintf(why, whylen, "libcuda.so.1 cannot be loaded (%s)",
				         dlerror());
			cupti_library.drv_loaded = -1;
			pthread_mutex_unlock(&cupti_library.load_mu);
			return -1;
		}
		struct nvlp_driver_table t;
		/* the _v2 names are the current ABI of these functions */
		t.cuInit = (__typeof__(t.cuInit))dlsym(h, "cuInit");
		t.cuDriverGetVersion =
		    (__typeof__(t.cuDriverGetVersion))dlsym(h, "cuDriverGetVersion");
		t.cuCtxGetCurrent = (__typeof__(t.cuCtxGetCurrent))dlsym(h, "cuCtxGetCurrent");
		t.cuStreamGetCtx = (__typeof__(t.cuStreamGetCtx))dlsym(h, "cuStreamGetCtx");
		t.cuCtxGetDevice = (__typeof__(t.cuCtxGetDevice))dlsym(h, "cuCtxGetDevice");
		t.cuDeviceGetCount = (__typeof__(t.cuDeviceGetCount))dlsym(h, "cuDeviceGetCount");
		t.cuDevicePrimaryCtxGetState = (__typeof__(t.cuDevicePrimaryCtxGetState))dlsym(
		    h, "cuDevicePrimaryCtxGetState");
		t.cuDeviceGetAttribute =
		    (__typeof__(t.cuDeviceGetAttribute))dlsym(h, "cuDeviceGetAttribute");
		t.cuDeviceGetUuid = (__typeof__(t.cuDeviceGetUuid))dlsym(h, "cuDeviceGetUuid_v2");
		if (!t.cuDeviceGetUuid)
			t.cuDeviceGetUuid =
			    (__typeof__(t.cuDeviceGetUuid))dlsym(h, "cuDeviceGetUuid");
		t.cuDeviceGetPCIBusId =
		    (__typeof__(t.cuDeviceGetPCIBusId))dlsym(h, "cuDeviceGetPCIBusId");
		t.cuPointerGetAttributes =
		    (__typeof__(t.cuPointerGetAttributes))dlsym(h, "cuPointerGetAttributes");
		t.cuDeviceGetName = (__typeof__(t.cuDeviceGetName))dlsym(h, "cuDeviceGetName");
		t.cuDeviceTotalMem_v2 =
		    (__typeof__(t.cuDeviceTotalMem_v2))dlsym(h, "cuDeviceTotalMem_v2");
		if (!t.cuInit || !t.cuCtxGetCurrent || !t.cuDeviceGetCount) {
			if (why)
				snprintf(why, whylen, "libcuda.so.1 lacks cuInit/cuCtxGetCurrent");
			cupti_library.drv_loaded = -1;
			pthread_mutex_unlock(&cupti_library.load_mu);
			return -1;
		}
		nvlp_drv = t;
		__atomic_store_n(&cupti_library.drv_loaded, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&cupti_library.load_mu);
	return 0;
}

int nvlp_driver_loaded(void)
{
	return __atomic_load_n(&cupti_library.drv_loaded, __ATOMIC_ACQUIRE) == 1;
}

void nvlp_driver_atfork_child(void)
{
	pthread_mutex_init(&cupti_library.load_mu, NULL);
}

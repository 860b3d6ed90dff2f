/* cupti.c: GPU activity via the process's CUPTI: attach, buffers -> trace records, stream ids. */
/*
 * Attaching. The runtime's constructor points CUDA_INJECTION64_PATH at this library, so the driver
 * calls InitializeInjection() inside cuInit, early enough for the NVLINK/DEVICE topology records.
 * When that cannot happen (the user set their own CUDA_INJECTION64_PATH, or CUDA came up without
 * calling us), the first intercepted call (nvlp_cupti_stream_id / nvlp_cupti_managed_seen) starts
 * collection late and a NOTE says topology is missing. A profiler that owns CUPTI (nsys, ncu) makes
 * us step aside with NOTE(FOREIGN_TOOL); torch.profiler (Kineto) is shared with (share.c).
 *
 * Finding CUPTI. Never linked: libcupti.so.13 already in the process (torch loads it), else the one
 * next to the loaded libcudart (also the pip-wheel layout nvidia/cuda_cupti/lib), else
 * $CUDA_HOME and /usr/local/cuda. Every function we call is in one table (cupti_int.h), resolved
 * with dlsym on that handle, so our own calls never reach our exported cupti* wrappers.
 *
 * Unified-memory counters (NVLPROF_UM): 1 = on from the first intercepted CUDA call; 0 = never;
 * auto (default) = on when the process allocates managed memory. The cudaMallocManaged hook calls
 * nvlp_cupti_managed_seen() before the allocation returns, and no page of that allocation can
 * fault or migrate before then, so enabling at that moment still catches the first faults, while
 * jobs without managed memory pay nothing for UM tracking (the driver's UM counters are not free).
 *
 * Clock. A timestamp callback makes CUPTI stamp activity with CLOCK_MONOTONIC, the API records'
 * clock. CLOCK records pair cuptiGetTimestamp() (source 1) and CLOCK_REALTIME (source 2, the GPU
 * time PM samples use) with CLOCK_MONOTONIC at start and at every flush; when the callback could
 * not be registered, activity times are converted with the latest CUPTI pairing.
 */
#include <dlfcn.h>   /* dlopen, dlsym, dladdr */
#include <errno.h>   /* errno */
#include <link.h>    /* dl_iterate_phdr */
#include <limits.h>  /* PATH_MAX */
#include <pthread.h> /* pthread_mutex_t */
#include <stdio.h>   /* snprintf */
#include <stdlib.h>  /* getenv, aligned_alloc, free, realpath */
#include <string.h>  /* strcmp, strstr, strrchr */
#include <time.h>    /* clock_gettime */

#include "cupti_int.h"
#include "nvlp_rt.h"

struct nvlp_cupti_table nvlp_cu;
struct nvlp_driver_table nvlp_drv;

/* Activity buffer: the low end of CUPTI's recommended 1-10 MiB range. CUPTI hands a buffer over
 * when it is full (a few thousand records), which is how records reach the trace between the
 * rare forced flushes (NVLPROF_GPU_FLUSH_MS). */
#define BUF_SIZE (1u << 20)
#define MAX_OWN_BUFS 256

static struct {
	volatile int state; /* enum nvlp_cupti_state */
	int injected;       /* InitializeInjection ran */
	int calls_seen;     /* an intercepted call reached us (diagnose at stop if never started) */
	int um_on;          /* UM counters enabled (or attempted) */
	void *handle;       /* libcupti */
	char path[PATH_MAX]; /* its path */
	pthread_mutex_t load_mu;
	int loaded; /* 1 ok, -1 failed */
	char load_why[512];
	int drv_loaded;                                   /* 1 ok, -1 failed */
	unsigned char enabled[CUPTI_ACTIVITY_KIND_COUNT]; /* kinds we enabled */
	struct nvlp_cupti_clock clk;
	int64_t real_off;        /* mono - realtime */
	pthread_mutex_t buf_mu;  /* own-buffer set (taken on the buffer-request path: kept short) */
	pthread_mutex_t conv_mu; /* record conversion (devmap); may wait on the trace writer */
	uint8_t *own[MAX_OWN_BUFS];
	struct nvlp_cupti_devmap devmap;
	uint64_t dropped_total, lost, records;
	uint64_t t_start;
} S = {
    .load_mu = PTHREAD_MUTEX_INITIALIZER,
    .buf_mu = PTHREAD_MUTEX_INITIALIZER,
    .conv_mu = PTHREAD_MUTEX_INITIALIZER,
};

int nvlp_cupti_state(void)
{
	return __atomic_load_n(&S.state, __ATOMIC_ACQUIRE);
}

int nvlp_cupti_we_enabled(int kind)
{
	return kind >= 0 && kind < CUPTI_ACTIVITY_KIND_COUNT && S.enabled[kind];
}

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
};
static int find_cudart(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct cudart_dir *d = arg;
	const char *name = info->dlpi_name, *slash;
	if (!name || !(slash = strrchr(name, '/')) || strncmp(slash + 1, "libcudart.so", 12) != 0)
		return 0;
	snprintf(d->dir, sizeof d->dir, "%.*s", (int)(slash - name), name);
	return 1;
}

static void *try_open(const char *path, int flags)
{
	void *h = dlopen(path, flags);
	if (h) {
		size_t n = strnlen(path, sizeof S.path - 1);
		memcpy(S.path, path, n);
		S.path[n] = 0;
	}
	return h;
}

static void *open_cupti(void)
{
	void *h = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD);
	if (h) {
		/* record where it is, for the NOTE */
		void *f = dlsym(h, "cuptiGetVersion");
		Dl_info di;
		if (f && dladdr(f, &di) && di.dli_fname)
			snprintf(S.path, sizeof S.path, "%s", di.dli_fname);
		else
			snprintf(S.path, sizeof S.path, "libcupti.so.13 (already loaded)");
		return h;
	}
	char p[PATH_MAX + 64];
	struct cudart_dir d = {""};
	dl_iterate_phdr(find_cudart, &d);
	if (d.dir[0]) {
		/* toolkit layout (lib64/), then pip wheels (nvidia/cuda_runtime/lib ->
		 * cuda_cupti/lib) */
		const char *rel[] = {"", "/../extras/CUPTI/lib64", "/../../cuda_cupti/lib"};
		for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
			snprintf(p, sizeof p, "%s%s/libcupti.so.13", d.dir, rel[i]);
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
			snprintf(p, sizeof p, "%s/%s/libcupti.so.13", roots[i], sub[j]);
			if ((h = try_open(p, RTLD_LAZY | RTLD_LOCAL)))
				return h;
		}
	}
	return try_open("libcupti.so.13",
	                RTLD_LAZY | RTLD_LOCAL); /* LD_LIBRARY_PATH, ld.so.cache */
}

int nvlp_cupti_load(char *why, size_t whylen)
{
	pthread_mutex_lock(&S.load_mu);
	if (!S.loaded) {
		S.handle = open_cupti();
		if (!S.handle) {
			snprintf(S.load_why, sizeof S.load_why,
			         "libcupti.so.13 not found (not loaded, not next to libcudart, not "
			         "under "
			         "$CUDA_HOME or /usr/local/cuda): %s",
			         dlerror());
			S.loaded = -1;
		} else {
			struct nvlp_cupti_table t;
			int missing = 0;
			char names[256] = "";
#define NVLP_RESOLVE(name, req)                                                                    \
	t.name = (__typeof__(t.name))dlsym(S.handle, #name);                                       \
	if (!t.name && #req[0] == 'R') {                                                           \
		missing++;                                                                         \
		size_t l_ = strlen(names);                                                         \
		snprintf(names + l_, sizeof names - l_, "%s%s", l_ ? " " : "", #name);             \
	}
			NVLP_CUPTI_FUNCS(NVLP_RESOLVE, NVLP_RESOLVE)
#undef NVLP_RESOLVE
			nvlp_cu = t;
			if (missing) {
				snprintf(S.load_why, sizeof S.load_why, "%.300s lacks %.200s",
				         S.path, names);
				S.loaded = -1;
			} else {
				S.loaded = 1;
			}
		}
	}
	int rc = S.loaded == 1 ? 0 : -1;
	if (rc && why)
		snprintf(why, whylen, "%s", S.load_why);
	pthread_mutex_unlock(&S.load_mu);
	return rc;
}

const char *nvlp_cupti_path(void)
{
	return S.path;
}

/* ---- the driver (libcuda.so.1): stream contexts, device attributes, no-driver diagnosis ---- */

int nvlp_driver_load(char *why, size_t whylen)
{
	if (__atomic_load_n(&S.drv_loaded, __ATOMIC_ACQUIRE) == 1)
		return 0; /* hot path (stream ids): no lock once loaded */
	pthread_mutex_lock(&S.load_mu);
	if (S.drv_loaded != 1) {
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
		if (!h) {
			if (why)
				snprintf(why, whylen, "libcuda.so.1 cannot be loaded (%s)",
				         dlerror());
			S.drv_loaded = -1;
			pthread_mutex_unlock(&S.load_mu);
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
		if (!t.cuInit || !t.cuCtxGetCurrent || !t.cuDeviceGetCount) {
			if (why)
				snprintf(why, whylen, "libcuda.so.1 lacks cuInit/cuCtxGetCurrent");
			S.drv_loaded = -1;
			pthread_mutex_unlock(&S.load_mu);
			return -1;
		}
		nvlp_drv = t;
		__atomic_store_n(&S.drv_loaded, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&S.load_mu);
	return 0;
}

/* ---- clocks ---- */

static uint64_t CUPTIAPI mono_timestamp(void)
{
	return nvlp_now();
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Emit CLOCK pairs and refresh the conversion offsets. */
static void clock_pair(void)
{
	uint64_t cupti_ts = 0, m0 = nvlp_now();
	CUptiResult r = nvlp_cu.cuptiGetTimestamp ? nvlp_cu.cuptiGetTimestamp(&cupti_ts)
	                                          : CUPTI_ERROR_NOT_INITIALIZED;
	uint64_t m1 = nvlp_now();
	uint64_t mid = m0 + (m1 - m0) / 2;
	if (r == CUPTI_SUCCESS) {
		struct nvlp_rec_clock c = {.source = 1, .mono = mid, .other = cupti_ts};
		nvlp_emit_wait(NVLP_K_CLOCK, &c, NULL, 0, 1000);
		__atomic_store_n(&S.clk.offset, (int64_t)(mid - cupti_ts), __ATOMIC_RELAXED);
	}
	m0 = nvlp_now();
	uint64_t rt = realtime_ns();
	m1 = nvlp_now();
	mid = m0 + (m1 - m0) / 2;
	struct nvlp_rec_clock c = {.source = 2, .mono = mid, .other = rt};
	nvlp_emit_wait(NVLP_K_CLOCK, &c, NULL, 0, 1000);
	__atomic_store_n(&S.real_off, (int64_t)(mid - rt), __ATOMIC_RELAXED);
}

uint64_t nvlp_cupti_gpu_ts_to_mono(uint64_t ts)
{
	/* GPU time is host CLOCK_REALTIME ns (PTIMER synced by the driver): recognisably
	 * epoch-sized */
	struct nvlp_cupti_clock c = {S.clk.identity,
	                             __atomic_load_n(&S.clk.offset, __ATOMIC_RELAXED),
	                             __atomic_load_n(&S.real_off, __ATOMIC_RELAXED)};
	return nvlp_cupti_ts(&c, ts);
}

/* ---- activity buffers ---- */

static void own_add(uint8_t *b)
{
	pthread_mutex_lock(&S.buf_mu);
	for (int i = 0; i < MAX_OWN_BUFS; i++)
		if (!S.own[i]) {
			S.own[i] = b;
			break;
		}
	pthread_mutex_unlock(&S.buf_mu);
}

/* @return 1 if b was ours (and forgets it) */
static int own_take(uint8_t *b)
{
	int found = 0;
	pthread_mutex_lock(&S.buf_mu);
	for (int i = 0; i < MAX_OWN_BUFS; i++)
		if (S.own[i] == b) {
			S.own[i] = NULL;
			found = 1;
			break;
		}
	pthread_mutex_unlock(&S.buf_mu);
	return found;
}

void CUPTIAPI nvlp_cupti_buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
	CUpti_BuffersCallbackRequestFunc k = nvlp_share_request_cb();
	if (k) {
		/* Kineto is tracing: let it allocate, so the buffers it gets back are its own */
		k(buf, size, max_records);
		if (*buf)
			return;
	}
	*buf = aligned_alloc(8, BUF_SIZE);
	*size = *buf ? BUF_SIZE : 0;
	*max_records = 0;
	if (*buf)
		own_add(*buf);
}

static uint64_t pci_attr(int dev, int attr)
{
	int v = 0;
	if (nvlp_drv.cuDeviceGetAttribute && nvlp_drv.cuDeviceGetAttribute(&v, attr, dev) == 0)
		return (uint64_t)v;
	return 0;
}

static void emit(unsigned kind, const void *rec, const void *blob, size_t len)
{
	if (nvlp_emit_wait(kind, rec, blob, len, 1000) != 0)
		__atomic_fetch_add(&S.lost, 1, __ATOMIC_RELAXED);
}

/* Convert and emit every record of ours in a completed buffer. */
static void process_buffer(uint8_t *buf, size_t valid)
{
	CUpti_Activity *a = NULL;
	struct nvlp_cupti_clock clk = {S.clk.identity,
	                               __atomic_load_n(&S.clk.offset, __ATOMIC_RELAXED),
	                               __atomic_load_n(&S.real_off, __ATOMIC_RELAXED)};
	pthread_mutex_lock(&S.conv_mu); /* devmap; CUPTI may complete buffers on several threads */
	while (nvlp_cu.cuptiActivityGetNextRecord(buf, valid, &a) == CUPTI_SUCCESS) {
		if (!nvlp_cupti_we_enabled((int)a->kind))
			continue; /* only Kineto asked for this kind */
		union nvlp_cupti_rec r;
		const char *text;
		unsigned kind = nvlp_cupti_convert(a, &clk, &S.devmap, &r, &text);
		if (!kind)
			continue;
		S.records++;
		if (kind == NVLP_K_KERNEL) {
			r.kernel.name = text ? nvlp_intern(text) : 0;
			emit(kind, &r, NULL, 0);
		} else if (kind == NVLP_K_DEVICE) {
			int d = (int)r.device.device;
			r.device.pci_domain =
			    pci_attr(d, 50 /* CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID */);
			r.device.pci_bus = pci_attr(d, 33 /* CU_DEVICE_ATTRIBUTE_PCI_BUS_ID */);
			r.device.pci_dev = pci_attr(d, 34 /* CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID */);
			emit(kind, &r, text, text ? strlen(text) : 0);
		} else {
			emit(kind, &r, NULL, 0);
		}
	}
	pthread_mutex_unlock(&S.conv_mu);
}

/* Completed buffers of ours wait here for the sampler thread. CUPTI calls the completion
 * callback from inside its flush or its worker, where the application's kernel launches can wait
 * on it (a flush itself held them up 4-11 ms on H200); converting a buffer took up to 5 ms more
 * there. The callback therefore only queues the buffer; nvlp_cupti_drain converts it after the
 * flush returns. Buffers that Kineto shares are converted at once (its flush must see its
 * records). */
#define PEND_MAX 64
static struct {
	pthread_mutex_t mu;
	int n;
	struct pend {
		CUcontext ctx;
		uint32_t sid;
		uint8_t *buf;
		size_t size, valid;
	} b[PEND_MAX];
	/* cost of our flushes, for NVLPROF_VERBOSE */
	uint64_t flushes, flush_ns, flush_max, drain_ns, drain_max, buffers;
} Q = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void finish_buffer(CUcontext ctx, uint32_t sid, uint8_t *buf, size_t size, size_t valid,
                          int ours)
{
	if (buf && nvlp_share_complete(ctx, sid, buf, size, valid, ours))
		return;
	if (ours)
		free(buf);
}

void CUPTIAPI nvlp_cupti_buf_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buf, size_t size,
                                      size_t valid)
{
	int st = nvlp_cupti_state();
	size_t dropped = 0;
	if (st == NVLP_CS_ACTIVE && nvlp_cu.cuptiActivityGetNumDroppedRecords &&
	    nvlp_cu.cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS &&
	    dropped) {
		__atomic_fetch_add(&S.dropped_total, dropped, __ATOMIC_RELAXED);
		nvlp_note(NVLP_NOTE_ACTIVITY_DROPPED, -1, dropped,
		          "CUPTI dropped %zu activity records (buffers full before they were "
		          "completed)",
		          dropped);
	}
	int ours = buf ? own_take(buf) : 0;
	if (ours && st == NVLP_CS_ACTIVE && !nvlp_share_client()) {
		pthread_mutex_lock(&Q.mu);
		if (Q.n < PEND_MAX) {
			Q.b[Q.n++] = (struct pend){ctx, stream_id, buf, size, valid};
			Q.buffers++;
			pthread_mutex_unlock(&Q.mu);
			return;
		}
		pthread_mutex_unlock(&Q.mu); /* queue full: convert here rather than lose them */
	}
	if (buf && valid && st == NVLP_CS_ACTIVE)
		process_buffer(buf, valid);
	finish_buffer(ctx, stream_id, buf, size, valid, ours);
}

void nvlp_cupti_drain(void)
{
	for (;;) {
		struct pend b[PEND_MAX];
		pthread_mutex_lock(&Q.mu);
		int n = Q.n;
		memcpy(b, Q.b, (size_t)n * sizeof b[0]);
		Q.n = 0;
		pthread_mutex_unlock(&Q.mu);
		if (!n)
			return;
		for (int i = 0; i < n; i++) {
			if (b[i].valid)
				process_buffer(b[i].buf, b[i].valid);
			finish_buffer(b[i].ctx, b[i].sid, b[i].buf, b[i].size, b[i].valid, 1);
		}
	}
}

/* One flush of CUPTI's buffers, then their conversion; timed for NVLPROF_VERBOSE. */
static void flush_and_drain(uint32_t flag)
{
	uint64_t t0 = nvlp_now();
	nvlp_cu.cuptiActivityFlushAll(flag);
	uint64_t t1 = nvlp_now();
	nvlp_cupti_drain();
	uint64_t t2 = nvlp_now();
	pthread_mutex_lock(&Q.mu);
	Q.flushes++;
	Q.flush_ns += t1 - t0;
	Q.drain_ns += t2 - t1;
	if (t1 - t0 > Q.flush_max)
		Q.flush_max = t1 - t0;
	if (t2 - t1 > Q.drain_max)
		Q.drain_max = t2 - t1;
	pthread_mutex_unlock(&Q.mu);
}

/* ---- start / stop ---- */

static int enable_kind(CUpti_ActivityKind kind, const char *name, char *list, size_t listlen)
{
	CUptiResult r = nvlp_cu.cuptiActivityEnable(kind);
	size_t l = strlen(list);
	if (r == CUPTI_SUCCESS) {
		S.enabled[kind] = 1;
		snprintf(list + l, listlen - l, "%s%s", l ? " " : "", name);
		return 0;
	}
	nvlp_note(NVLP_NOTE_ACTIVITY_ON, -1, (uint64_t)r, "CUPTI activity kind %s not enabled: %s",
	          name, nvlp_cupti_err(r));
	return (int)r;
}

static int injection_is_ours(void);

/* What else owns CUPTI or the injection hook. @return a description, or NULL. */
static const char *foreign_tool(char *buf, size_t len)
{
	extern char **environ;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "NSYS_", 5) == 0) {
			snprintf(buf, len, "Nsight Systems (%.*s set)",
			         (int)(strchr(*e, '=') ? strchr(*e, '=') - *e : 32), *e);
			return buf;
		}
	/* nsys: libToolsInjection64.so; ncu: lib*Injection*.so; compute-sanitizer: libsanitizer* */
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	const char *base = inj ? strrchr(inj, '/') : NULL;
	base = base ? base + 1 : inj;
	if (base && !injection_is_ours() &&
	    (strcasestr(base, "injection") || strcasestr(base, "sanitizer") ||
	     strcasestr(inj, "nsight"))) {
		snprintf(buf, len, "a profiler (CUDA_INJECTION64_PATH=%s)", inj);
		return buf;
	}
	return NULL;
}

/* 1 if CUDA_INJECTION64_PATH names this library (the driver will call InitializeInjection). */
static int injection_is_ours(void)
{
	static int cached = -1;
	if (cached >= 0)
		return cached;
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	Dl_info di;
	char a[PATH_MAX], b[PATH_MAX];
	cached = inj && dladdr((void *)injection_is_ours, &di) && di.dli_fname &&
	         realpath(inj, a) && realpath(di.dli_fname, b) && strcmp(a, b) == 0;
	return cached;
}

static void um_enable_locked(void);

static void start_locked(void)
{
	const struct nvlp_config *cfg = nvlp_cfg();
	char why[600], tool[600];
	S.t_start = nvlp_now();
	if (!nvlp_is_active())
		goto aside; /* recording is off (NVLPROF_DISABLE, inherited injection path): stay
		               out */
	if (!cfg->cupti) {
		nvlp_note(NVLP_NOTE_CONFIG, -1, 0,
		          "NVLPROF_CUPTI=0: no GPU activity or link counters collected");
		goto aside;
	}
	if (foreign_tool(tool, sizeof tool)) {
		nvlp_note(NVLP_NOTE_FOREIGN_TOOL, -1, 0,
		          "%s owns CUPTI: no GPU activity, UM counters or link counters collected "
		          "by nvlprof in this process (from its start)",
		          tool);
		goto aside;
	}
	if (nvlp_cupti_load(why, sizeof why) != 0) {
		nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, 0, "no GPU activity: %s", why);
		goto aside;
	}
	uint32_t ver = 0;
	CUptiResult r = nvlp_cu.cuptiGetVersion(&ver);
	if (r != CUPTI_SUCCESS || ver / 10000 != CUPTI_API_VERSION / 10000) {
		nvlp_note(NVLP_NOTE_CUPTI_VERSION, -1, ver,
		          "%s reports CUPTI API version %u, nvlprof was built for %u (CUDA %u.x "
		          "record layouts): no GPU activity collected",
		          S.path, ver, (unsigned)CUPTI_API_VERSION,
		          (unsigned)CUPTI_API_VERSION / 10000);
		goto aside;
	}
	if (!S.injected) {
		/* late start: CUDA should be up; find out whether there is a driver at all */
		if (nvlp_driver_load(why, sizeof why) != 0) {
			nvlp_note(
			    NVLP_NOTE_NO_DRIVER, -1, 0,
			    "no NVIDIA driver: %s; no GPU activity collected (CUPTI %u at %s)", why,
			    ver, S.path);
			goto aside;
		}
		nvlp_cures cr = nvlp_drv.cuInit(0); /* no-op when CUDA is up, as it should be */
		if (cr != 0) {
			nvlp_note(
			    NVLP_NOTE_NO_DRIVER, -1, (uint64_t)cr,
			    "cuInit failed with CUresult %d%s: no GPU activity collected (CUPTI "
			    "%u at %s)",
			    cr, cr == 34 ? " (stub libcuda, no driver)" : "", ver, S.path);
			goto aside;
		}
	}

	/* One clock for everything: ours, when CUPTI lets us. */
	if (nvlp_cu.cuptiActivityRegisterTimestampCallback &&
	    nvlp_cu.cuptiActivityRegisterTimestampCallback(mono_timestamp) == CUPTI_SUCCESS)
		S.clk.identity = 1;
	clock_pair();

	r = nvlp_cu.cuptiActivityRegisterCallbacks(nvlp_cupti_buf_request, nvlp_cupti_buf_complete);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
	    r == CUPTI_ERROR_NOT_INITIALIZED) {
		nvlp_note(NVLP_NOTE_FOREIGN_TOOL, -1, (uint64_t)r,
		          "CUPTI refused our activity callbacks (%s): another tool owns it; no GPU "
		          "activity collected from the start",
		          nvlp_cupti_err(r));
		goto aside;
	}
	if (r != CUPTI_SUCCESS) {
		nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, (uint64_t)r,
		          "cuptiActivityRegisterCallbacks: %s; no GPU activity collected",
		          nvlp_cupti_err(r));
		goto aside;
	}
	char list[256] = "";
	/* topology first: DEVICE/NVLINK records are only produced when enabled before cuInit
	 * ends */
	enable_kind(CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE", list, sizeof list);
	enable_kind(CUPTI_ACTIVITY_KIND_NVLINK, "NVLINK", list, sizeof list);
	r = (CUptiResult)enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL",
	                             list, sizeof list);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		nvlp_note(NVLP_NOTE_FOREIGN_TOOL, -1, (uint64_t)r,
		          "CUPTI refused activity (%s): another tool owns it; no GPU activity "
		          "collected from the start",
		          nvlp_cupti_err(r));
		goto aside;
	}
	if (r != CUPTI_SUCCESS) {
		/* kernels are the point: without them CUPTI is not usable here (seen: no driver) */
		nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, (uint64_t)r,
		          "CUPTI %u (%s) cannot trace kernels (%s): no GPU activity collected", ver,
		          S.path, nvlp_cupti_err(r));
		goto aside;
	}
	enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", list, sizeof list);
	enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", list, sizeof list);
	nvlp_note(NVLP_NOTE_ACTIVITY_ON, -1, ver, "CUPTI %u (%s): %s; clock %s%s", ver, S.path,
	          list,
	          S.clk.identity ? "CLOCK_MONOTONIC via timestamp callback"
	                         : "converted from CUPTI timestamps (CLOCK pairs)",
	          S.injected ? ""
	                     : "; started late (CUDA was initialised before nvlprof's "
	                       "injection ran): NVLINK/DEVICE topology records missing");
	__atomic_store_n(&S.state, NVLP_CS_ACTIVE, __ATOMIC_RELEASE);
	nvlp_share_on_start();
	if (cfg->um == 1 && !S.injected)
		um_enable_locked();
	nvlp_link_start();
	if (!S.injected) {
		/* the current context's device is in use already */
		int dev = -1;
		if (nvlp_drv.cuCtxGetDevice && nvlp_drv.cuCtxGetDevice(&dev) == 0 && dev >= 0)
			nvlp_link_device_seen(dev);
	}
	return;
aside:
	__atomic_store_n(&S.state, NVLP_CS_ASIDE, __ATOMIC_RELEASE);
}

static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

void nvlp_cupti_start(void)
{
	nvlp_init();
	pthread_mutex_lock(&start_mu);
	if (nvlp_cupti_state() == NVLP_CS_OFF) {
		__atomic_store_n(&S.state, NVLP_CS_STARTING, __ATOMIC_RELEASE);
		start_locked();
	}
	pthread_mutex_unlock(&start_mu);
}

NVLP_EXPORT int InitializeInjection(void)
{
	S.injected = 1;
	nvlp_cupti_start();
	return 1; /* the driver only checks that the entry point ran */
}

/* "CUPTI 130001 at /path" or "libcupti not loaded", for NOTEs. */
static void cupti_desc(char *out, size_t len)
{
	uint32_t ver = 0;
	if (dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD) && nvlp_cupti_load(NULL, 0) == 0 &&
	    nvlp_cu.cuptiGetVersion(&ver) == CUPTI_SUCCESS)
		snprintf(out, len, "CUPTI %u at %.600s", ver, S.path);
	else
		snprintf(out, len, "libcupti not loaded");
}

/* Intercepted calls before CUDA is up, with no driver able to bring it up: say so once and stop
 * looking (the hot path then costs one load). @return 1 if there is no usable driver. */
static int no_driver_check(void)
{
	char why[600], cupti[700];
	int v = 0, cr = 0;
	if (nvlp_driver_load(why, sizeof why) == 0) {
		cr = nvlp_drv.cuDriverGetVersion ? nvlp_drv.cuDriverGetVersion(&v) : 0;
		if (cr == 0)
			return 0; /* a driver: CUDA just is not initialised yet */
	}
	pthread_mutex_lock(&start_mu);
	if (nvlp_cupti_state() == NVLP_CS_OFF) {
		cupti_desc(cupti, sizeof cupti);
		if (cr)
			nvlp_note(NVLP_NOTE_NO_DRIVER, -1, (uint64_t)cr,
			          "cuDriverGetVersion failed with CUresult %d%s: no GPU activity "
			          "collected (%s)",
			          cr, cr == 34 ? " (stub libcuda, no driver)" : "", cupti);
		else
			nvlp_note(NVLP_NOTE_NO_DRIVER, -1, 0,
			          "no NVIDIA driver (%s): no GPU activity collected (%s)", why,
			          cupti);
		__atomic_store_n(&S.state, NVLP_CS_ASIDE, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&start_mu);
	return 1;
}

/* Intercepted call while not started: start now if injection will not do it. Runs its checks
 * (dlopen, driver calls) at most every 100 ms, on one thread at a time. */
static void maybe_late_start(void)
{
	static uint64_t next_check;
	if (!__atomic_load_n(&S.calls_seen, __ATOMIC_RELAXED))
		__atomic_store_n(&S.calls_seen, 1, __ATOMIC_RELAXED);
	uint64_t now = nvlp_now(), next = __atomic_load_n(&next_check, __ATOMIC_RELAXED);
	if (now < next || !__atomic_compare_exchange_n(&next_check, &next, now + 100000000ull, 0,
	                                               __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	if (!nvlp_cfg()->cupti || foreign_tool((char[8]){0}, 8) || !injection_is_ours()) {
		nvlp_cupti_start(); /* notes why it does nothing, or starts late */
		return;
	}
	/* the driver calls InitializeInjection at cuInit; only if CUDA is already up without it
	 * (injection failed, or CUDA came up before our constructor) do we start here */
	if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
		CUcontext ctx = NULL;
		if (nvlp_driver_load(NULL, 0) == 0 && nvlp_drv.cuCtxGetCurrent(&ctx) == 0 && ctx)
			nvlp_cupti_start();
		return;
	}
	no_driver_check();
}

/* ---- unified memory counters ---- */

static void um_enable_locked(void)
{
	if (S.um_on)
		return;
	S.um_on = 1;
	int n = 0;
	if (nvlp_driver_load(NULL, 0) != 0 || nvlp_drv.cuDeviceGetCount(&n) != 0 || n <= 0 ||
	    !nvlp_cu.cuptiActivityConfigureUnifiedMemoryCounter) {
		nvlp_note(NVLP_NOTE_UM_ON, -1, 0,
		          "unified-memory counters not enabled: no device count or no "
		          "cuptiActivityConfigureUnifiedMemoryCounter");
		return;
	}
	static const CUpti_ActivityUnifiedMemoryCounterKind all[] = {
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
	    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP,
	};
	const size_t nk = sizeof all / sizeof all[0];
	if (n > NVLP_CUPTI_MAX_DEV)
		n = NVLP_CUPTI_MAX_DEV;
	CUpti_ActivityUnifiedMemoryCounterConfig cfg[NVLP_CUPTI_MAX_DEV * 8];
	memset(cfg, 0, sizeof cfg);
	/* fall back to the essential counters if the full set is refused */
	size_t tries[2] = {nk, 4};
	CUptiResult r = CUPTI_ERROR_UNKNOWN;
	size_t used = 0;
	for (int t = 0; t < 2 && r != CUPTI_SUCCESS; t++) {
		size_t c = 0;
		for (int d = 0; d < n; d++)
			for (size_t k = 0; k < tries[t]; k++, c++) {
				cfg[c].scope =
				    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
				cfg[c].kind = all[k];
				cfg[c].deviceId = (uint32_t)d;
				cfg[c].enable = 1;
			}
		r = nvlp_cu.cuptiActivityConfigureUnifiedMemoryCounter(cfg, (uint32_t)c);
		used = tries[t];
	}
	if (r == CUPTI_SUCCESS)
		r = nvlp_cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	if (r != CUPTI_SUCCESS) {
		nvlp_note(NVLP_NOTE_UM_ON, -1, (uint64_t)r,
		          "unified-memory counters not enabled: %s", nvlp_cupti_err(r));
		return;
	}
	S.enabled[CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER] = 1;
	nvlp_note(NVLP_NOTE_UM_ON, -1, (uint64_t)n,
	          "unified-memory counters on for %d device(s) (%s; NVLPROF_UM=%s)%s", n,
	          used == nk
	              ? "HtoD DtoH DtoD bytes, GPU/CPU faults, thrashing, throttling, remote map"
	              : "HtoD DtoH DtoD bytes, GPU faults only",
	          nvlp_cfg()->um == 1 ? "1" : "auto, managed memory allocated",
	          used == nk ? "" : " (full set refused)");
}

void nvlp_cupti_managed_seen(void)
{
	if (nvlp_cupti_state() == NVLP_CS_OFF)
		maybe_late_start();
	if (nvlp_cupti_state() != NVLP_CS_ACTIVE || nvlp_cfg()->um == 0 ||
	    __atomic_load_n(&S.um_on, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&start_mu);
	um_enable_locked();
	pthread_mutex_unlock(&start_mu);
	/* the allocating context's device is in use: sample its links too */
	int dev = -1;
	if (nvlp_drv.cuCtxGetDevice && nvlp_drv.cuCtxGetDevice(&dev) == 0 && dev >= 0)
		nvlp_link_device_seen(dev);
}

/* ---- stream ids: a small lock-free open-addressing cache (key 0 = empty) ---- */

#define SID_SLOTS 1024         /* power of two; a job has tens of streams */
#define SID_UNKNOWN UINT64_MAX /* cached "CUPTI has no id for this stream" */
static struct {
	uint64_t key, val;
} sid_cache[SID_SLOTS];

static uint64_t sid_lookup(uint64_t key)
{
	uint64_t h = (key * 0x9e3779b97f4a7c15ull) >> 54;
	for (unsigned i = 0; i < 16; i++) {
		unsigned s = (unsigned)(h + i) & (SID_SLOTS - 1);
		uint64_t k = __atomic_load_n(&sid_cache[s].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return __atomic_load_n(&sid_cache[s].val, __ATOMIC_ACQUIRE);
		if (k == 0)
			return 0;
	}
	return 0;
}

static void sid_insert(uint64_t key, uint64_t val)
{
	uint64_t h = (key * 0x9e3779b97f4a7c15ull) >> 54;
	for (unsigned i = 0; i < 16; i++) {
		unsigned s = (unsigned)(h + i) & (SID_SLOTS - 1);
		uint64_t expect = 0;
		if (__atomic_compare_exchange_n(&sid_cache[s].key, &expect, key, 0,
		                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
		    expect == key) {
			__atomic_store_n(&sid_cache[s].val, val, __ATOMIC_RELEASE);
			return;
		}
	}
	/* full neighbourhood: stay uncached (still correct, just slower) */
}

/*
 * Where a copy's pointer lives, asked of the driver: the runtime's cudaPointerGetAttributes would
 * do, but it is an API call that torch.profiler (Kineto) records, so every device-to-device copy of
 * the job would show two calls the job never made (measured: 100 per 5 DDP steps).
 * cuPointerGetAttributes answers all three attributes in one call, sets no runtime error state, and
 * Kineto keeps no driver calls but launches. Only a libcuda already in the process is used (never
 * loaded for this): before CUDA is up there is nothing to ask, and the caller falls back to the
 * runtime.
 */
int nvlp_cupti_pointer_info(const void *p, int *device, int *managed)
{
	static int tries; /* libcuda is in the process before any device pointer exists */
	if (NVLP_UNLIKELY(__atomic_load_n(&S.drv_loaded, __ATOMIC_ACQUIRE) != 1)) {
		if (__atomic_fetch_add(&tries, 1, __ATOMIC_RELAXED) >= 16 ||
		    !dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) ||
		    nvlp_driver_load(NULL, 0) != 0)
			return -1;
	}
	if (!nvlp_drv.cuPointerGetAttributes)
		return -1;
	/* CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _IS_MANAGED, _DEVICE_ORDINAL (cuda.h 13.0) */
	int attrs[3] = {2, 8, 9};
	unsigned type = 0, is_managed = 0;
	int ordinal = -1;
	void *data[3] = {&type, &is_managed, &ordinal};
	if (nvlp_drv.cuPointerGetAttributes(3, attrs, data, (uint64_t)(uintptr_t)p) != 0)
		return -1;
	*managed = is_managed != 0;
	/* CU_MEMORYTYPE_DEVICE 2, _UNIFIED 4; host, registered or unknown memory: no device */
	*device = (type == 2 || type == 4 || is_managed) && ordinal >= 0 ? ordinal : -1;
	return 0;
}

uint64_t nvlp_cupti_stream_id(void *stream)
{
	if (NVLP_UNLIKELY(nvlp_cupti_state() != NVLP_CS_ACTIVE)) {
		if (nvlp_cupti_state() != NVLP_CS_OFF)
			return 0;
		maybe_late_start();
		if (nvlp_cupti_state() != NVLP_CS_ACTIVE)
			return 0;
	}
	uintptr_t s = (uintptr_t)stream;
	CUcontext ctx = NULL;
	uint64_t key = s;
	if (s <= 2) {
		/* NULL / legacy / per-thread default streams are per context */
		if (nvlp_driver_load(NULL, 0) != 0 || nvlp_drv.cuCtxGetCurrent(&ctx) != 0 || !ctx)
			return 0;
		key =
		    ((uint64_t)(uintptr_t)ctx ^ (s << 1)) | 1; /* real stream handles are aligned */
	}
	uint64_t id = sid_lookup(key);
	if (NVLP_LIKELY(id))
		return id == SID_UNKNOWN ? 0 : id;
	/* slow path: ask the driver for the context, CUPTI for the id */
	if (nvlp_driver_load(NULL, 0) != 0 || !nvlp_cu.cuptiGetStreamIdEx)
		return 0;
	if (!ctx &&
	    (!nvlp_drv.cuStreamGetCtx || nvlp_drv.cuStreamGetCtx((CUstream)stream, &ctx) != 0))
		return 0;
	uint32_t sid = 0;
	if (nvlp_cu.cuptiGetStreamIdEx(ctx, s == 2 ? NULL : (CUstream)stream, s == 2 ? 1 : 0,
	                               &sid) != CUPTI_SUCCESS ||
	    sid == 0) {
		sid_insert(key, SID_UNKNOWN); /* do not ask CUPTI again on every call */
		return 0;
	}
	uint32_t dev = 0;
	if (nvlp_cu.cuptiGetDeviceId && nvlp_cu.cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS)
		nvlp_link_device_seen((int)dev);
	if (nvlp_cfg()->um == 1 && !__atomic_load_n(&S.um_on, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&start_mu);
		um_enable_locked();
		pthread_mutex_unlock(&start_mu);
	}
	sid_insert(key, sid);
	return sid;
}

/* ---- periodic and final flush ---- */

void nvlp_cupti_periodic_flush(void)
{
	if (nvlp_cupti_state() != NVLP_CS_ACTIVE)
		return;
	flush_and_drain(0);
	clock_pair();
}

/* Never started although the process made CUDA/NCCL calls and a driver exists. No dlopen or
 * driver call here: stop may run from a signal's shutdown path. */
static void diagnose_never_started(void)
{
	if (!__atomic_load_n(&S.calls_seen, __ATOMIC_RELAXED))
		return;
	nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, 0,
	          "CUDA was never initialised through nvlprof's injection and no intercepted call "
	          "found a CUDA context: no GPU activity collected");
}

void nvlp_cupti_stop(void)
{
	pthread_mutex_lock(&start_mu);
	int st = nvlp_cupti_state();
	if (st == NVLP_CS_OFF) {
		diagnose_never_started();
		__atomic_store_n(&S.state, NVLP_CS_ASIDE, __ATOMIC_RELEASE);
	} else if (st == NVLP_CS_ACTIVE) {
		/* Activity first: it is the bulk of the trace, and the PM calls that follow go
		 * through libnvperf_host, whose fate at exit we control less. The sampler stops
		 * first so that its periodic flush never runs alongside this one. */
		nvlp_link_stop_thread();
		flush_and_drain(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		clock_pair();
		nvlp_kick_writer();
		nvlp_link_stop();
		uint64_t lost = __atomic_load_n(&S.lost, __ATOMIC_RELAXED);
		if (lost)
			nvlp_note(NVLP_NOTE_ACTIVITY_LOST, -1, lost,
			          "%llu GPU activity records lost: the trace writer had no room "
			          "within 1 s",
			          (unsigned long long)lost);
		if (nvlp_cfg()->verbose) {
			nvlp_warn("GPU activity: %llu records, %llu dropped by CUPTI, %llu lost",
			          (unsigned long long)S.records,
			          (unsigned long long)S.dropped_total, (unsigned long long)lost);
			nvlp_warn(
			    "CUPTI: %llu buffers; %llu forced flushes, in cuptiActivityFlushAll "
			    "%.2f ms (max %.2f), converting after them %.2f ms (max %.2f)",
			    (unsigned long long)Q.buffers, (unsigned long long)Q.flushes,
			    Q.flush_ns / 1e6, Q.flush_max / 1e6, Q.drain_ns / 1e6,
			    Q.drain_max / 1e6);
		}
		/* records arriving from now on (Kineto's flushes) are relayed, not recorded */
		__atomic_store_n(&S.state, NVLP_CS_ASIDE, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&start_mu);
}

void nvlp_cupti_atfork_child(void)
{
	/* CUDA does not survive fork; the child must not call into CUPTI or join our threads */
	S.state = NVLP_CS_ASIDE;
	S.calls_seen = 0;
	pthread_mutex_init(&S.buf_mu, NULL);
	pthread_mutex_init(&S.conv_mu, NULL);
	pthread_mutex_init(&S.load_mu, NULL);
	pthread_mutex_init(&Q.mu, NULL);
	Q.n = 0; /* the parent's queued buffers are its own to convert */
	pthread_mutex_init(&start_mu, NULL);
	memset(sid_cache, 0, sizeof sid_cache);
	nvlp_link_atfork_child();
	nvlp_share_atfork_child();
}

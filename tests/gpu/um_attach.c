/* um_attach.c: does CUPTI count managed memory's page migrations when it attaches late? Without nvlprof: NVLPROF_CUPTI=lazy's first build attached CUPTI at the first managed allocation and counted nothing (run 14), where CUPTI attached at cuInit counted the same job's thrashing; this probe finds which step has to come early.
 *   um_attach ATTACH-UM [ROUNDS] [MIB]
 * ATTACH: when CUPTI is attached (activity buffers registered, a subscriber with the driver domain
 * on, as nvlprof attaches); UM: when the unified-memory counters are configured and their kind
 * enabled (not before ATTACH). Each is one of
 *   init     right after cuInit, before any context
 *   ctx      after device 0's primary context is current, before the allocation
 *   alloc    after cuMemAllocManaged, before anything touched it
 *   touched  after the first round of migrations
 * or ATTACH-UM = never (the control: no CUPTI). A round prefetches the buffer to the GPU
 * (cuMemPrefetchAsync), has the GPU write it (cuMemsetD8), and writes it from the CPU, so its pages
 * migrate both ways. At the end CUPTI is flushed (forced) and one line says what each call returned
 * and how many unified-memory records came, by counter kind:
 *   um_attach: ATTACH-UM configure=RC enable=RC records=N htod=N dtoh=N gpu_fault=N cpu_fault=N other=N
 * libcuda.so.1 and libcupti (UM_ATTACH_CUPTI, else libcupti.so.13, else libcupti.so) are dlopened;
 * a missing function prints one line and its step is skipped. Exit 0 unless the arguments or
 * libcuda fail. Built with gcc (no nvcc): build/gpu/um_attach; tests/gpu/test_um_attach.sh runs it on
 * the fakes, plan_lazy.sh probe on the GPU. Test-only: never shipped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

enum { P_INIT, P_CTX, P_ALLOC, P_TOUCHED, P_NEVER };
static const char *const point_names[] = {"init", "ctx", "alloc", "touched"};

static void *cu, *cp;
static long counts[8], records;
static int rc_conf = -1, rc_enable = -1;

static void *sym(void *lib, const char *name)
{
	void *f = lib ? dlsym(lib, name) : NULL;
	if (!f)
		fprintf(stderr, "um_attach: %s not found: step skipped\n", name);
	return f;
}

static int point(const char *s, size_t n)
{
	for (int i = 0; i < P_NEVER; i++)
		if (strlen(point_names[i]) == n && !strncmp(s, point_names[i], n))
			return i;
	return -1;
}

static void CUPTIAPI buf_req(uint8_t **b, size_t *sz, size_t *max)
{
	*sz = 4 << 20;
	*b = aligned_alloc(8, *sz);
	*max = 0;
}

static void CUPTIAPI buf_done(CUcontext c, uint32_t s, uint8_t *b, size_t sz, size_t valid)
{
	CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **) = sym(cp, "cuptiActivityGetNextRecord");
	CUpti_Activity *r = NULL;
	(void)c, (void)s, (void)sz;
	while (next && next(b, valid, &r) == CUPTI_SUCCESS) {
		if (r->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
			continue;
		CUpti_ActivityUnifiedMemoryCounter3 *u = (CUpti_ActivityUnifiedMemoryCounter3 *)r;
		unsigned k = (unsigned)u->counterKind;
		records++;
		counts[k < 8 ? k : 0]++;
	}
	free(b);
}

static void CUPTIAPI on_api(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *info)
{
	(void)ud, (void)d, (void)id, (void)info;
}

static void attach(void)
{
	CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
		sym(cp, "cuptiActivityRegisterCallbacks");
	CUptiResult (*sub)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *) = sym(cp, "cuptiSubscribe");
	CUptiResult (*dom)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) = sym(cp, "cuptiEnableDomain");
	CUpti_SubscriberHandle h;
	if (reg && reg(buf_req, buf_done) != CUPTI_SUCCESS)
		fprintf(stderr, "um_attach: cuptiActivityRegisterCallbacks failed\n");
	if (sub && sub(&h, on_api, NULL) == CUPTI_SUCCESS && dom)
		dom(1, h, CUPTI_CB_DOMAIN_DRIVER_API);
}

static void um_on(void)
{
	CUptiResult (*conf)(CUpti_ActivityUnifiedMemoryCounterConfig *, uint32_t) =
		sym(cp, "cuptiActivityConfigureUnifiedMemoryCounter");
	CUptiResult (*en)(CUpti_ActivityKind) = sym(cp, "cuptiActivityEnable");
	static const CUpti_ActivityUnifiedMemoryCounterKind kinds[] = {
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
	};
	CUpti_ActivityUnifiedMemoryCounterConfig c[4];
	memset(c, 0, sizeof c);
	for (int i = 0; i < 4; i++) {
		c[i].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
		c[i].kind = kinds[i];
		c[i].enable = 1;
	}
	if (conf)
		rc_conf = (int)conf(c, 4);
	if (en)
		rc_enable = (int)en(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
}

/* at point p: attach and/or turn the counters on where due */
static void step(int p, int at, int um)
{
	if (at == p)
		attach();
	if (um == p)
		um_on();
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: um_attach ATTACH-UM|never [ROUNDS] [MIB]  (init ctx alloc touched)\n");
		return 2;
	}
	int at = P_NEVER, um = P_NEVER, rounds = argc > 2 ? atoi(argv[2]) : 6;
	size_t mib = argc > 3 ? (size_t)atoi(argv[3]) : 64, n = mib << 20;
	const char *dash = strchr(argv[1], '-');
	if (strcmp(argv[1], "never")) {
		at = dash ? point(argv[1], (size_t)(dash - argv[1])) : -1;
		um = dash ? point(dash + 1, strlen(dash + 1)) : -1;
		if (at < 0 || um < 0 || um < at) {
			fprintf(stderr, "um_attach: '%s' is not ATTACH-UM with UM not before ATTACH (init ctx alloc touched)\n",
			        argv[1]);
			return 2;
		}
	}
	if (rounds < 2 || !n) {
		fprintf(stderr, "um_attach: ROUNDS >= 2 and MIB >= 1\n");
		return 2;
	}
	cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!cu) {
		fprintf(stderr, "um_attach: no libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	if (at != P_NEVER) {
		const char *lib = getenv("UM_ATTACH_CUPTI");
		cp = dlopen(lib && *lib ? lib : "libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
		if (!cp && !(lib && *lib))
			cp = dlopen("libcupti.so", RTLD_NOW | RTLD_GLOBAL);
		if (!cp)
			fprintf(stderr, "um_attach: no libcupti: %s\n", dlerror());
	}
	int (*init)(unsigned) = sym(cu, "cuInit");
	int (*retain)(void **, int) = sym(cu, "cuDevicePrimaryCtxRetain");
	int (*setcur)(void *) = sym(cu, "cuCtxSetCurrent");
	int (*alloc)(uint64_t *, size_t, unsigned) = sym(cu, "cuMemAllocManaged");
	int (*prefetch)(uint64_t, size_t, CUmemLocation, unsigned, void *) = sym(cu, "cuMemPrefetchAsync_v2");
	int (*memset_d8)(uint64_t, unsigned char, size_t) = sym(cu, "cuMemsetD8_v2");
	int (*sync)(void) = sym(cu, "cuCtxSynchronize");
	if (!init || init(0)) {
		fprintf(stderr, "um_attach: cuInit failed\n");
		return 1;
	}
	step(P_INIT, at, um);
	void *ctx = NULL;
	if (retain && setcur && (retain(&ctx, 0) || setcur(ctx)))
		fprintf(stderr, "um_attach: no primary context on device 0\n");
	step(P_CTX, at, um);
	uint64_t p = 0;
	if (!alloc || alloc(&p, n, 1 /* CU_MEM_ATTACH_GLOBAL */) || !p) {
		fprintf(stderr, "um_attach: cuMemAllocManaged of %zu MiB failed\n", mib);
		return 1;
	}
	step(P_ALLOC, at, um);
	CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
	unsigned long sum = 0;
	for (int r = 0; r < rounds; r++) {
		if (prefetch)
			prefetch(p, n, gpu, 0, NULL);
		if (memset_d8)
			memset_d8(p, (unsigned char)r, n);
		if (sync)
			sync();
		volatile unsigned char *h = (volatile unsigned char *)(uintptr_t)p;
		for (size_t i = 0; i < n; i += 4096) {
			sum += h[i];
			h[i] = (unsigned char)(r + 1);
		}
		if (r == 0)
			step(P_TOUCHED, at, um);
	}
	CUptiResult (*flush)(uint32_t) = cp ? sym(cp, "cuptiActivityFlushAll") : NULL;
	if (flush)
		flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	printf("um_attach: %s configure=%d enable=%d records=%ld htod=%ld dtoh=%ld gpu_fault=%ld cpu_fault=%ld "
	       "other=%ld (checksum %lu)\n",
	       argv[1], rc_conf, rc_enable, records, counts[CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD],
	       counts[CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH],
	       counts[CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT],
	       counts[CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT],
	       records - counts[1] - counts[2] - counts[3] - counts[4], sum);
	return 0;
}

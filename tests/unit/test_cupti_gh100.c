/* test_cupti_gh100.c: real libcupti builds the GH100 link-metric config image, no GPU. */
#include <dlfcn.h>  /* dlopen */
#include <link.h>   /* dl_iterate_phdr */
#include <string.h> /* strstr */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* free, getenv */

#include "check.h"
#include "cupti_int.h"

#ifndef NVLP_CUDA_HOME
#define NVLP_CUDA_HOME "/usr/local/cuda"
#endif

/* Same metric list as cupti/linksample.c (kept in step by this test failing if one is renamed). */
static const char *const METRICS[] = {
    "nvltx__bytes.sum",           "nvlrx__bytes.sum",     "nvltx__bytes_data_user.sum",
    "nvlrx__bytes_data_user.sum", "pcie__read_bytes.sum", "pcie__write_bytes.sum",
};

static int sanitizer_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size, (void)arg;
	const char *n = info->dlpi_name;
	return n && (strstr(n, "/libasan.so") || strstr(n, "/libtsan.so"));
}

int main(void)
{
	const char *home = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : NVLP_CUDA_HOME;
	const char *sub[] = {"extras/CUPTI/lib64", "lib64", "targets/x86_64-linux/lib"};
	void *h = NULL;
	char path[1024];
	for (int i = 0; i < 3 && !h; i++) {
		snprintf(path, sizeof path, "%s/%s/libcupti.so.13", home, sub[i]);
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	CHECK(h != NULL, "real libcupti.so.13 found under %s", home);
	if (!h)
		return CHECK_DONE();
	struct nvlp_pmh_fns f = {
	    (nvlp_cupti_pfn)dlsym(h, "cuptiProfilerHostInitialize"),
	    (nvlp_cupti_pfn)dlsym(h, "cuptiProfilerHostDeinitialize"),
	    (nvlp_cupti_pfn)dlsym(h, "cuptiProfilerHostConfigAddMetrics"),
	    (nvlp_cupti_pfn)dlsym(h, "cuptiProfilerHostGetConfigImageSize"),
	    (nvlp_cupti_pfn)dlsym(h, "cuptiProfilerHostGetConfigImage"),
	    (nvlp_cupti_pfn)dlsym(h, "cuptiProfilerHostGetNumOfPasses"),
	    (nvlp_cupti_pfn)dlsym(h, "cuptiProfilerHostEvaluateToGpuValues"),
	};
	CHECK(f.init && f.add_metrics && f.image && f.passes && f.evaluate,
	      "profiler host API present in %s", path);
	if (dl_iterate_phdr(sanitizer_cb, NULL)) {
		/* libcupti dlopens libnvperf_host.so with RTLD_DEEPBIND: ASan/TSan abort the
		 * process */
		printf(
		    "SKIP: GH100 config image under a sanitizer (libnvperf_host.so is loaded with "
		    "RTLD_DEEPBIND)\n");
		return CHECK_DONE();
	}
	void *host = NULL;
	uint8_t *img = NULL;
	size_t size = 0, passes = 0;
	CUptiResult r = nvlp_pmh_config(&f, "GH100", NULL, METRICS, 6, &host, &img, &size, &passes);
	CHECK(r == CUPTI_SUCCESS, "GH100 config image with all 6 link metrics (result %d)", (int)r);
	CHECK(size > 0 && img != NULL, "config image size %zu > 0", size);
	CHECK(passes == 1, "all link metrics in one pass (%zu)", passes);
	nvlp_pmh_destroy(&f, host);
	free(img);
	for (int i = 0; i < 6; i++) {
		r = nvlp_pmh_config(&f, "GH100", NULL, &METRICS[i], 1, &host, &img, &size, &passes);
		CHECK(r == CUPTI_SUCCESS && passes == 1, "GH100 has %s", METRICS[i]);
		nvlp_pmh_destroy(&f, host);
		free(img);
	}
	const char *bogus = "nvltx__no_such_metric.sum";
	r = nvlp_pmh_config(&f, "GH100", NULL, &bogus, 1, &host, &img, &size, &passes);
	CHECK(r != CUPTI_SUCCESS && host == NULL && img == NULL,
	      "an unknown metric is refused and nothing leaks (result %d)", (int)r);
	return CHECK_DONE();
}

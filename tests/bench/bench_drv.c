/* bench_drv.c: host cost of nvlprof's driver-API callbacks, ns per driver call on the fake libcuda/libcupti, without the shim, with NVLPROF_DRIVER=0 and with driver capture on. */
/*
 * A child calls the fake driver's entry points in a loop (the fake issues CUPTI's enter and exit
 * callbacks to whoever subscribed, as the driver does): a same-device copy (judged, not recorded:
 * two pointer queries), a host-to-device copy before managed memory exists (its callback is not
 * enabled yet), the same after a managed allocation (enabled, judged), and a cross-device copy
 * (recorded). The parent runs ROUNDS children per configuration, interleaved, and prints the
 * medians side by side. On the fakes a pointer query is a table walk, not the driver's: the figures
 * measure nvlprof's own share (dispatch, judgement, record), the GPU machine's drv_bench the rest.
 */
#include <cupti.h>  /* cuda.h's driver declarations */
#include <limits.h> /* PATH_MAX */
#include <stdio.h>  /* popen */
#include <stdlib.h> /* qsort */
#include <string.h> /* strcmp */
#include <time.h>   /* clock_gettime */
#include <unistd.h> /* readlink */

void fake_cuda_set_device(int dev);

#define ROUNDS 5
#define N 200000
enum { T_DTOD_SAME, T_HTOD_EARLY, T_HTOD_MANAGED, T_DTOD_CROSS, T_COUNT };
static const char *const names[T_COUNT] = {
    "cuMemcpyDtoD same device", "cuMemcpyHtoD, no managed yet", "cuMemcpyHtoD, managed exists",
    "cuMemcpyDtoD across devices (recorded)"};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int child(void)
{
	static char host[64];
	CUdeviceptr a = 0, b = 0, c = 0, m = 0;
	cuInit(0);
	fake_cuda_set_device(0);
	cuMemAlloc_v2(&a, 4096);
	cuMemAlloc_v2(&b, 4096);
	fake_cuda_set_device(1);
	cuMemAlloc_v2(&c, 4096);
	fake_cuda_set_device(0);
	double t[T_COUNT];
	double t0 = now();
	for (int i = 0; i < N; i++)
		cuMemcpyDtoD_v2(b, a, 64);
	t[T_DTOD_SAME] = (now() - t0) / N;
	t0 = now();
	for (int i = 0; i < N; i++)
		cuMemcpyHtoD_v2(a, host, 64);
	t[T_HTOD_EARLY] = (now() - t0) / N;
	cuMemAllocManaged(&m, 4096, 1);
	t0 = now();
	for (int i = 0; i < N; i++)
		cuMemcpyHtoD_v2(a, host, 64);
	t[T_HTOD_MANAGED] = (now() - t0) / N;
	t0 = now();
	for (int i = 0; i < N / 10; i++) /* recorded: fewer, so the ring never fills */
		cuMemcpyDtoD_v2(c, a, 64);
	t[T_DTOD_CROSS] = (now() - t0) / (N / 10);
	for (int k = 0; k < T_COUNT; k++)
		printf("%.1f\n", t[k]);
	return 0;
}

static int cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child"))
		return child();
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	const char *cfg[3] = {"env -u LD_PRELOAD", "NVLPROF_DRIVER=0 LD_PRELOAD=%s/../libnvlprof.so",
	                      "NVLPROF_DRIVER=1 LD_PRELOAD=%s/../libnvlprof.so"};
	static const char *const cname[3] = {"no shim", "NVLPROF_DRIVER=0", "driver capture"};
	double v[3][T_COUNT][ROUNDS];
	char dir[] = "/tmp/nvlp-bench-drv.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char bdir[PATH_MAX];
	snprintf(bdir, sizeof bdir, "%.*s", (int)(strrchr(self, '/') - self), self);
	for (int r = 0; r < ROUNDS; r++)
		for (int c = 0; c < 3; c++) {
			char pre[PATH_MAX * 2], cmd[PATH_MAX * 4];
			snprintf(pre, sizeof pre, cfg[c], bdir);
			snprintf(cmd, sizeof cmd,
			         "%s NVLPROF_DIR=%s NVLPROF_SAMPLE_US=0 NVLPROF_KERNELS=off "
			         "NVLPROF_BUFFER_KB=16384 %s child",
			         pre, dir, self);
			FILE *p = popen(cmd, "r");
			int got = 0;
			for (int k = 0; p && k < T_COUNT; k++)
				got += fscanf(p, "%lf", &v[c][k][r]) == 1;
			if (!p || pclose(p) != 0 || got != T_COUNT) {
				printf("bench_drv: child (%s) failed\n", cname[c]);
				return 1;
			}
		}
	printf("ns per fake driver call, median of %d runs (min-max)\n", ROUNDS);
	printf("%-40s %18s %18s %18s\n", "", cname[0], cname[1], cname[2]);
	for (int k = 0; k < T_COUNT; k++) {
		printf("%-40s", names[k]);
		for (int c = 0; c < 3; c++) {
			qsort(v[c][k], ROUNDS, sizeof(double), cmp);
			char cell[64];
			snprintf(cell, sizeof cell, "%.0f (%.0f-%.0f)", v[c][k][ROUNDS / 2], v[c][k][0],
			         v[c][k][ROUNDS - 1]);
			printf(" %18s", cell);
		}
		printf("\n");
	}
	char rm[PATH_MAX + 16];
	snprintf(rm, sizeof rm, "rm -rf %s", dir);
	return system(rm) != 0;
}

/* bench_kch.c: CPU cost of NCCL's kernel-channel (KernelCh) events in the shim's profiler plugin, ns per event, and their trace bytes. */
/*
 * A child runs under LD_PRELOAD of the shim (CUPTI off: no driver here) and drives the plugin
 * exactly as NCCL's proxy thread does: a Coll start per collective, then per channel a KernelCh
 * start, recordEventState(KernelChStop) and stopEvent. It times the channel events alone (one
 * "event" = the three calls of one channel) and the collective starts, and the parent takes the
 * median of ROUNDS children (8 MiB rings, writer every 20 ms: nothing dropped, which it checks). The trace's KCH bytes per record come from the last child's trace.
 * The analyzer side (kernelch.c turning the records into GPU times) is timed on that trace.
 */
#include <dirent.h> /* opendir */
#include <dlfcn.h>  /* dlsym */
#include <limits.h> /* PATH_MAX */
#include <stdio.h>  /* printf, popen */
#include <stdlib.h> /* qsort */
#include <string.h> /* strrchr */
#include <sys/stat.h>
#include <time.h>   /* clock_gettime */
#include <unistd.h> /* readlink */

#include "model/kernelch.h" /* an_kch_apply */
#include "model/model.h"
#include "nvlp_trace.h"
#include "fakes/fake.h" /* fake_descr_v5, fake_profiler_v5 */

#define ROUNDS 5
#define COLLS 50000
#define CHANNELS 8
#define WARM 10000
#define BATCH 1000

typedef fake_descr_v5 descr;
typedef fake_profiler_v5 plugin;

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int child(void)
{
	const plugin *p = dlsym(RTLD_DEFAULT, "ncclProfiler_v5");
	if (!p)
		return 2;
	void *ctx = NULL;
	int mask = 0;
	if (p->init(&ctx, 0x1234, &mask, "bench", 1, 2, 0, NULL) != 0 || !ctx || !(mask & (1 << 6)))
		return 3;
	double t_coll = 0, t_ch = 0;
	uint64_t g = 1790000000000000000ull;
	/* WARM collectives untimed first (the ring's pages, the caches), then batches of BATCH with a
	 * pause after each, so that the writer keeps up: NCCL's proxy reports a few channels per
	 * collective, not 400,000 events in a burst */
	for (long i = 0; i < COLLS + WARM; i++) {
		if (i == WARM)
			t_coll = t_ch = 0;
		if (i % BATCH == 0) {
			struct timespec ts = {0, 5000000};
			nanosleep(&ts, NULL);
		}
		descr d;
		memset(&d, 0, sizeof d);
		d.type = 1 << 1;
		d.coll.seqNumber = (uint64_t)i;
		d.coll.func = "AllReduce";
		d.coll.count = 1024;
		d.coll.datatype = "ncclFloat32";
		d.coll.nChannels = CHANNELS;
		d.coll.algo = "RING";
		d.coll.proto = "LL";
		void *h = NULL;
		double t0 = now_ns();
		p->startEvent(ctx, &h, &d);
		double t1 = now_ns();
		for (int c = 0; c < CHANNELS; c++) {
			descr k;
			memset(&k, 0, sizeof k);
			k.type = 1 << 6;
			k.parentObj = h;
			k.kernelCh.channelId = (uint8_t)c;
			k.kernelCh.pTimer = g + 10ull * c;
			void *kh = NULL;
			p->startEvent(ctx, &kh, &k);
			uint64_t st[2] = {g + 5000 - 3ull * c, 0};
			p->recordEventState(kh, 22, st);
			p->stopEvent(kh);
		}
		double t2 = now_ns();
		p->stopEvent(h);
		t_coll += t1 - t0;
		t_ch += t2 - t1;
		g += 10000;
	}
	p->finalize(ctx);
	printf("%.3f %.3f\n", t_ch / ((double)COLLS * CHANNELS), t_coll / COLLS);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "--child"))
		return child();
	char self[PATH_MAX - 64], lib[PATH_MAX], tmpl[] = "/tmp/nvlp-bench-kch.XXXXXX";
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0 || !mkdtemp(tmpl))
		return 1;
	self[n] = 0;
	snprintf(lib, sizeof lib, "%s", self); /* $BUILD/bench/bench_kch -> $BUILD/libnvlprof.so */
	*strrchr(lib, '/') = 0;
	char *slash = strrchr(lib, '/');
	snprintf(slash + 1, sizeof lib - (size_t)(slash + 1 - lib), "libnvlprof.so");
	double ch[ROUNDS], co[ROUNDS];
	char dir[PATH_MAX + 32];
	for (int i = 0; i < ROUNDS; i++) {
		snprintf(dir, sizeof dir, "%s/r%d", tmpl, i);
		mkdir(dir, 0755);
		char cmd[4 * PATH_MAX];
		snprintf(cmd, sizeof cmd,
		         "env -u NCCL_PROFILER_PLUGIN LD_PRELOAD=%s NVLPROF_DIR='%s' NVLPROF_CUPTI=0 NVLPROF_BUFFER_KB=8192 NVLPROF_FLUSH_MS=20 "
		         "'%s' --child",
		         lib, dir, self);
		FILE *p = popen(cmd, "r");
		if (!p || fscanf(p, "%lf %lf", &ch[i], &co[i]) != 2 || pclose(p) != 0) {
			printf("bench_kch: child run failed (shim %s)\n", lib);
			return 1;
		}
	}
	qsort(ch, ROUNDS, sizeof ch[0], cmp_double);
	qsort(co, ROUNDS, sizeof co[0], cmp_double);
	printf("bench_kch: %d collectives x %d channels x %d rounds: %.1f ns per KernelCh channel "
	       "event (start + stop state + stop, one KCH record), %.1f ns per collective start\n",
	       COLLS, CHANNELS, ROUNDS, ch[ROUNDS / 2], co[ROUNDS / 2]);
	/* the trace: KCH bytes, and the analyzer's pass over it */
	char *paths[1] = {dir};
	struct an_job job;
	memset(&job, 0, sizeof job);
	char err[512];
	if (an_job_load(&job, paths, 1, 1, err, sizeof err) != 0 || job.nok != 1) {
		printf("bench_kch: trace unreadable: %s\n", err);
		return 1;
	}
	uint64_t nk = job.ranks[0].kind_count[NVLP_K_KCH], want = (uint64_t)(COLLS + WARM) * CHANNELS;
	struct stat st;
	DIR *dd = opendir(dir);
	struct dirent *e;
	double bytes = 0;
	char path[PATH_MAX + 320];
	while (dd && (e = readdir(dd)))
		if (strstr(e->d_name, ".nvlp")) {
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			if (stat(path, &st) == 0)
				bytes += (double)st.st_size;
		}
	if (dd)
		closedir(dd);
	double t0 = now_ns();
	an_kch_apply(&job);
	double t1 = now_ns();
	printf("bench_kch: %llu KCH records (%s), whole trace %.2f bytes per KCH record; "
	       "analyzer: %.1f ns per KCH record (fit + match; ingest decodes the records)\n",
	       (unsigned long long)nk, nk == want ? "none dropped" : "SOME DROPPED",
	       bytes / (nk ? (double)nk : 1), (t1 - t0) / (nk ? (double)nk : 1));
	an_job_free(&job);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
	return system(cmd) != 0 || nk != want;
}

/* bench_kch.c: CPU cost of NCCL's kernel-channel (KernelCh) events in the shim's profiler plugin, ns per event, and their trace bytes per collective, folded (KCOLL, the default) and per channel (NVLPROF_KCH=channels). */
/*
 * A child runs under LD_PRELOAD of the shim (CUPTI off: no driver here) and drives the plugin
 * exactly as NCCL's proxy thread does: a Coll start per collective, then per channel a KernelCh
 * start, recordEventState(KernelChStop) and stopEvent, on CHANNELS channels (an NVLink AllReduce
 * on H200s) whose stamps scatter by up to 1.6 us inside the kernel's span, as real channels do,
 * and collectives 10-16.4 us apart (regular stamps would flatter both ways of recording: they
 * compress to nothing). It times the
 * channel events alone (one "event" = the three calls of one channel) and the collective starts,
 * and the parent takes the median of ROUNDS children (8 MiB rings, writer every 20 ms: nothing
 * dropped, which it checks), for each way of recording, the two ways' children interleaved. The
 * trace bytes per collective come from each way's last child's trace. The analyzer side
 * (kernelch.c turning the records into GPU times) is timed on that trace.
 */
#include <dlfcn.h>  /* dlsym */
#include <limits.h> /* PATH_MAX */
#include <stdio.h>  /* printf, popen */
#include <stdlib.h> /* qsort */
#include <string.h> /* strrchr */
#include <sys/stat.h> /* mkdir */
#include <time.h>   /* clock_gettime */
#include <unistd.h> /* readlink */

#include "model/kernelch.h" /* an_kch_apply */
#include "model/model.h"
#include "nvlp_trace.h"
#include "fakes/fake.h" /* fake_descr_v5, fake_profiler_v5 */
#include "shim_child.h"   /* trace_dir_bytes */

#define ROUNDS 5
#define COLLS 50000
#define CHANNELS 24
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

/* How far inside the span channel c of the kernel starting at g starts (which 0) or stops (1) */
static uint64_t inset(uint64_t g, int c, int which)
{
	return c ? fake_kch_inset(g, c, which, 1600) : 0; /* channel 0 spans the kernel */
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
			k.kernelCh.pTimer = g + inset(g, c, 0);
			void *kh = NULL;
			p->startEvent(ctx, &kh, &k);
			uint64_t st[2] = {g + 5000 - inset(g, c, 1), 0};
			p->recordEventState(kh, 22, st);
			p->stopEvent(kh);
		}
		double t2 = now_ns();
		p->stopEvent(h);
		t_coll += t1 - t0;
		t_ch += t2 - t1;
		g += 10000 + inset(g, 1, 0) * 4; /* collectives 10-16.4 us apart, not on a grid */
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
	static const char *const modes[2] = {"1", "channels"};
	double ch[2][ROUNDS], co[2][ROUNDS];
	char dir[2][PATH_MAX + 32];
	for (int i = 0; i < 2 * ROUNDS; i++) {
		int m = i % 2; /* the two ways interleaved: a slow spell of the machine hits both */
		snprintf(dir[m], sizeof dir[m], "%s/r%d", tmpl, i);
		mkdir(dir[m], 0755);
		char cmd[4 * PATH_MAX];
		snprintf(cmd, sizeof cmd,
		         "env -u NCCL_PROFILER_PLUGIN LD_PRELOAD=%s NVLPROF_DIR='%s' NVLPROF_CUPTI=0 NVLPROF_BUFFER_KB=8192 NVLPROF_FLUSH_MS=20 "
		         "NVLPROF_KCH=%s '%s' --child",
		         lib, dir[m], modes[m], self);
		FILE *p = popen(cmd, "r");
		if (!p || fscanf(p, "%lf %lf", &ch[m][i / 2], &co[m][i / 2]) != 2 || pclose(p) != 0) {
			printf("bench_kch: child run failed (shim %s)\n", lib);
			return 1;
		}
	}
	int bad = 0;
	for (int m = 0; m < 2; m++) {
		qsort(ch[m], ROUNDS, sizeof ch[m][0], cmp_double);
		qsort(co[m], ROUNDS, sizeof co[m][0], cmp_double);
		printf("bench_kch: NVLPROF_KCH=%s, %d collectives x %d channels x %d rounds: %.1f ns per "
		       "KernelCh channel event (start + stop state + stop) [%.1f-%.1f], %.1f ns per "
		       "collective start\n",
		       modes[m], COLLS, CHANNELS, ROUNDS, ch[m][ROUNDS / 2], ch[m][0],
		       ch[m][ROUNDS - 1], co[m][ROUNDS / 2]);
		/* the trace: bytes per collective, and the analyzer's pass over it */
		char *paths[1] = {dir[m]};
		struct an_job job;
		memset(&job, 0, sizeof job);
		char err[512];
		if (an_job_load(&job, paths, 1, 1, err, sizeof err) != 0 || job.nok != 1) {
			printf("bench_kch: trace unreadable: %s\n", err);
			return 1;
		}
		uint64_t colls = (uint64_t)(COLLS + WARM);
		uint64_t nk = job.ranks[0].kind_count[m ? NVLP_K_KCH : NVLP_K_KCOLL];
		uint64_t want = m ? colls * CHANNELS : colls;
		double bytes = (double)trace_dir_bytes(dir[m]);
		double t0 = now_ns();
		an_kch_apply(&job);
		double t1 = now_ns();
		uint64_t timed = job.kch ? job.kch->collectives : 0;
		printf("bench_kch: NVLPROF_KCH=%s, %llu %s records (%s), whole trace %.1f bytes per "
		       "collective (%.0f MB an hour at 1,000 collectives a second); %llu collectives "
		       "timed; analyzer: %.1f ns per collective (fit + match; ingest decodes the "
		       "records)\n",
		       modes[m], (unsigned long long)nk, m ? "KCH" : "KCOLL",
		       nk == want ? "none dropped" : "SOME DROPPED", bytes / (double)colls,
		       bytes / (double)colls * 1000 * 3600 / 1e6, (unsigned long long)timed,
		       (t1 - t0) / (double)colls);
		bad |= nk != want || timed != colls;
		an_job_free(&job);
	}
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
	return system(cmd) != 0 || bad;
}

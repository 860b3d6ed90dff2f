/* test_cupti_exit.c: a short program exits before, during and just after PM-sampling setup. */
/*
 * Seen on 2 x H200: a 0.5 s CUDA program exited while the sampler thread was inside PM setup
 * (about 0.9 s per GPU) and died of SIGSEGV after its last line, leaving a trace without END and
 * without its last records. The fake libcupti reproduces the shape: slow setup steps, and a
 * libnvperf_host that CUPTI loads during setup and that aborts if used after its exit-time
 * destructor. The parent re-runs itself under LD_PRELOAD=libnvlprof.so with the fake libcupti and
 * libcuda; the child starts CUDA (fake cuInit runs InitializeInjection), queues kernel records,
 * makes one intercepted call, waits for the chosen point of setup (one of them inside the host
 * library's config calls, just after CUPTI loaded it) and returns from main. Each run
 * must exit 0 with a complete trace (END) holding every record made before exit. One more run
 * stays idle for a second once sampling is on and counts the sampler thread's wake-ups.
 */
#include <cuda_runtime_api.h> /* cudaMallocManaged (fake cudart, intercepted by the shim) */
#include <cupti.h>            /* CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL */
#include <limits.h>           /* PATH_MAX */
#include <stdio.h>            /* printf, fprintf */
#include <stdlib.h>           /* setenv, mkdtemp */
#include <string.h>           /* strstr */
#include <time.h>             /* clock_gettime */
#include <unistd.h>           /* fork, execl */

#include "check.h"
#include "nvlp_trace.h"
#include "shim_child.h"

void fake_cupti_generate(int kind, int n);
int fake_cupti_pm_progress(void);
int fake_cuda_device_counts(void);

enum { NK = 500 };

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

/* ---- child: a short CUDA program ---- */
static int child(int wait_progress, int idle_ms)
{
	cuInit(0); /* fake driver: InitializeInjection -> nvlprof attaches, sampler starts */
	void *m = NULL;
	if (cudaMallocManaged(&m, 1 << 20, cudaMemAttachGlobal) != cudaSuccess)
		return 3;
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, NK);
	uint64_t t0 = mono_ms();
	while (fake_cupti_pm_progress() < wait_progress && mono_ms() - t0 < 5000) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	if (fake_cupti_pm_progress() < wait_progress)
		return 4;
	if (idle_ms > 0) {
		/* a GPU sampled, nothing else happening: the sampler wakes up every 100 ms (decoding);
		 * it used to wake every 10 ms. One cuDeviceGetCount per wake-up (new contexts). */
		struct timespec ts = {0, 100000000}; /* past setup's last steps */
		nanosleep(&ts, NULL);
		int n0 = fake_cuda_device_counts();
		ts = (struct timespec){idle_ms / 1000, (idle_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		int wakes = fake_cuda_device_counts() - n0, most = idle_ms / 100 + 3;
		fprintf(stderr, "sampler wake-ups in %d ms idle: %d (at most %d, at least 1)\n",
		        idle_ms, wakes, most);
		if (wakes > most || wakes < 1)
			return 5;
	}
	return 0; /* exit() now: the exit path under test */
}

/* ---- parent ---- */
struct scenario {
	const char *name;
	int wait_progress; /* fake_cupti_pm_progress() to reach before exiting */
	const char *slow_ms, *enable_ms;
	int idle_ms;           /* then stay idle this long, counting the sampler's wake-ups */
	const char *nvperf_ms; /* the host library's add-metrics call takes this long */
	const char *eval_ms;   /* and each evaluation of a sample */
	const char *ctor_ms;   /* the host library's constructors take this long (flushes every 5 ms) */
};

/* The child runs under the shim with the fake's slow PM setup; default flushes: the program ends
 * before one. */
static int run_child(const char *self, const char *lib, const char *dir, const struct scenario *sc,
                     unsigned uuid_base)
{
	char wait[32], slow[64], enable[64], base[64], nvperf[64], eval[64];
	snprintf(wait, sizeof wait, "%d/%d", sc->wait_progress, sc->idle_ms);
	snprintf(slow, sizeof slow, "FAKE_CUPTI_PM_SLOW_MS=%s", sc->slow_ms);
	snprintf(enable, sizeof enable, "FAKE_CUPTI_PM_ENABLE_MS=%s", sc->enable_ms);
	snprintf(base, sizeof base, "FAKE_CUDA_UUID_BASE=%u", uuid_base);
	snprintf(nvperf, sizeof nvperf, "FAKE_NVPERF_SLOW_MS=%s", sc->nvperf_ms ? sc->nvperf_ms : "");
	snprintf(eval, sizeof eval, "FAKE_NVPERF_EVAL_MS=%s", sc->eval_ms ? sc->eval_ms : "");
	char ctor[64];
	snprintf(ctor, sizeof ctor, "FAKE_NVPERF_CTOR_MS=%s", sc->ctor_ms ? sc->ctor_ms : "");
	/* CUPTI attached at cuInit (NVLPROF_CUPTI=1) whatever the default: its PM sampling */
	const char *env[] = {"FAKE_CUPTI_PM=1", slow, enable, base, sc->nvperf_ms ? nvperf : eval,
	                     ctor, sc->ctor_ms ? "NVLPROF_FLUSH_MS=5" : "NVLPROF_FLUSH_MS",
	                     "NVLPROF_CUPTI=1", NULL};
	return shim_run_child(self, lib, dir, "1000", env, wait);
}

int main(int argc, char **argv)
{
	/* these runs count every kernel and copy: traced all the time, not in windows */
	setenv("NVLPROF_KERNELS", "all", 1);
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(atoi(argv[2]), atoi(strchr(argv[2], '/') ? strchr(argv[2], '/') + 1 : "0"));
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	/* our own fake GPU UUIDs: the per-GPU sampling lock is not shared with parallel tests */
	unsigned base = 0x80 | ((unsigned)getpid() & 0x3f);
	static const struct scenario scs[] = {
	    /* exit at once: the sampler has not started setup (or just has) */
	    {"before setup", 0, "100", "0"},
	    /* exit inside cuptiPmSamplingEnable, libnvperf_host loaded: the crash on the H200 */
	    {"during setup", 3, "150", "0"},
	    /* exit the moment sampling started: final samples are decoded */
	    {"just after setup", 4, "20", "0"},
	    /* setup stuck in one call longer than exit waits: bounded, samples dropped */
	    {"setup stuck", 3, "20", "4000"},
	    /* sampling, then a second of nothing: the sampler's wake-ups are few (status 5 if not) */
	    {"idle after setup", 4, "20", "0", 1000, NULL},
	    /* exit inside the host library's config calls, just after CUPTI loaded it: its
	     * destructor was newer than our exit handler until the sampler stepped out of the
	     * config (a SIGABRT seen once in make mutate's baseline); no host call after exit began */
	    {"exit in host config", 5, "20", "0", 0, "600", NULL},
	    /* exit while the sampler decodes, each sample's evaluation taking 1 s: it stops after
	     * the one it is in (the wait for it used to outlast 1.5 s, and the next evaluation came
	     * after the host library's destructor); the exiting thread reads the rest */
	    {"exit in a decode", 6, "20", "0", 0, NULL, "1000"},
	    /* the host library's constructors slow: the writer's tick saw it loaded and registered
	     * our exit handler again before its destructor was registered; exit once sampling is on
	     * (the final decode evaluates samples in the host library) */
	    {"host library slow to load", 4, "20", "0", 0, NULL, NULL, "300"},
	};
	for (size_t i = 0; i < sizeof scs / sizeof scs[0]; i++) {
		const struct scenario *sc = &scs[i];
		char dir[] = "/tmp/nvlp-cupti-exit.XXXXXX";
		if (!mkdtemp(dir))
			return 1;
		uint64_t t0 = mono_ms();
		int rc = run_child(self, lib, dir, sc, base);
		uint64_t ms = mono_ms() - t0;
		struct trace_summary s;
		trace_summarize(dir, &s);
		CHECK(rc == 0, "[%s] program exited normally (status %d%s)", sc->name, rc,
		      rc == 5 ? ": the sampler woke up too often" : "");
		CHECK(s.files == 1 && s.complete == 1, "[%s] trace is complete: END record present",
		      sc->name);
		CHECK(s.kinds[NVLP_K_KERNEL] == NK,
		      "[%s] all %d kernel records made before exit are there (%llu)", sc->name, NK,
		      s.kinds[NVLP_K_KERNEL]);
		CHECK(s.kinds[NVLP_K_MANAGED] == 1, "[%s] the API record is there (%llu)", sc->name,
		      s.kinds[NVLP_K_MANAGED]);
		if ((sc->wait_progress == 3 || sc->wait_progress == 5) && sc->enable_ms[0] == '0')
			CHECK(s.kinds[NVLP_K_LINKSAMPLE] == 0 &&
			          strstr(s.text, "ended while its link counters were being set up"),
			      "[%s] NOTE: exit during setup, no link samples (%llu)", sc->name,
			      s.kinds[NVLP_K_LINKSAMPLE]);
		if (sc->wait_progress == 4)
			CHECK(s.notes[NVLP_NOTE_PM_SAMPLING_ON] == 1 &&
			          s.kinds[NVLP_K_LINKSAMPLE] >= 1,
			      "[%s] PM sampling on, final samples decoded at exit (%llu)", sc->name,
			      s.kinds[NVLP_K_LINKSAMPLE]);
		if (sc->wait_progress == 6)
			CHECK(s.kinds[NVLP_K_LINKSAMPLE] == 4 && !strstr(s.text, "gave up waiting") &&
			          !strstr(s.text, "did not stop within"),
			      "[%s] the sampler stopped between samples; the 2 it left and the last 2 "
			      "read at exit, none twice (%llu LINKSAMPLE, 4 expected)",
			      sc->name, s.kinds[NVLP_K_LINKSAMPLE]);
		if (sc->enable_ms[0] != '0') {
			CHECK(strstr(s.text, "gave up waiting") != NULL,
			      "[%s] NOTE: gave up waiting, last samples dropped", sc->name);
			CHECK(ms < 3500, "[%s] exit waited a bounded time (%llu ms)", sc->name,
			      (unsigned long long)ms);
		}
		if (check_failed_)
			printf("    notes:\n%s", s.text);
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
	}
	shim_unlink_gpu_locks(base);
	return CHECK_DONE();
}

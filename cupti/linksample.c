/* linksample.c: sampler thread: NVLink/PCIe byte counters (PM sampling: linkpm.c, NVML:
 * linknvml.c); which GPUs are sampled, the per-GPU claim between processes, and exit. */
/*
 * One background thread per process. Every second it decodes PM samples into LINKSAMPLE records
 * (each sample's own start/end; the period is never assumed). It wakes for nothing else, except
 * every 10 ms until a GPU is in use and at NVML's period when NVML is the source (activity
 * flushes have their own schedule, in cupti.c). GPUs are sampled once they are known to be used:
 * the current context's device at a late start, any device whose streams the intercepted calls
 * used (streams.c's memo) and any device with an active primary context.
 *
 * Two processes on one GPU (two ranks sharing a device, or a data-loader that touched CUDA): the
 * counters are per GPU, not per process, and PM sampling can only be owned by one client. The first
 * process to claim the GPU samples it: it takes a non-blocking flock() on
 * /dev/shm/nvlprof-link-<GPU UUID>.lock (/tmp if /dev/shm is missing) and keeps it until it exits
 * (the kernel drops the lock even on a crash, so no stale owner). Any other process notes
 * PM_SAMPLING_UNAVAILABLE naming the owner's pid and does not sample; the owner's LINKSAMPLE
 * records already include its traffic. Lowest-rank election was rejected: ranks are not known this
 * early, and a lock needs no agreement between processes that may never talk.
 *
 * Fallback when PM sampling is unavailable (no permission, counters owned by another tool, older
 * GPU, library without the API): NVML cumulative counters (fields 138-141 NVLink data/raw KiB,
 * 197/198 PCIe TX/RX bytes) read every 100 ms (max(10 ms, NVLPROF_SAMPLE_US) when that is set:
 * a read of the 74 fields cost ~0.36 ms of CPU on an H200, 3.6% of a core at 10 ms), only the
 * fields that answered the first read, source = 2. The NOTE says which source was used on each
 * GPU, why, and how often.
 *
 * Exit. nvlp_link_stop_thread() asks the thread to stop and waits for it at most EXIT_WAIT_MS: PM
 * setup takes about a second per GPU, and a short program exits in the middle of it. The thread
 * checks the stop flag between setup steps and never decodes, samples or flushes once it is set.
 * nvlp_link_stop() then only Stops and decodes the GPUs whose setup completed: nothing is disabled,
 * deinitialised or freed at exit (the process is ending, and libnvperf_host, which CUPTI loads
 * during setup, may already be destroyed by then). Our exit handler must run before the destructors
 * of libraries loaded during setup, so the thread re-registers it right after every step that may
 * load one (nvlp_lc_refresh_atexit; seen on 2 x H200: a 0.5 s program exiting during setup crashed
 * before the final flush, with no END record), and between the profiler-host calls of a config
 * (pm_host.cc's after_step: CUPTI loads libnvperf_host in the first, and an exit in the middle of
 * the others ran its destructor first: a SIGABRT from the fake, test_cupti_exit's "exit in host
 * config"); once exit began it makes no more host calls. The sampler counts loads itself: the
 * writer's tick, which registers the handler again whenever the loads counter moved, may see
 * libnvperf_host mapped while its initialisers still run, before its destructor is registered
 * (test_cupti_exit's "host library slow to load": SIGABRT at exit, no END). Left: an exit that
 * begins inside the dlopen itself, before the first after_step. A decode stops between samples
 * once exit began (an evaluation is a host call: a long decode outlasted the wait, and its next
 * evaluation came after the destructor), and the exiting thread's final decode reads the samples
 * it left.
 */
#include <errno.h>    /* errno */
#include <fcntl.h>    /* open */
#include <pthread.h>  /* pthread_create */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* strtol */
#include <string.h>   /* memset */
#include <sys/file.h> /* flock */
#include <sys/stat.h> /* stat */
#include <time.h>     /* clock_gettime */
#include <unistd.h>   /* getpid, read, write */

#include "link_int.h"
#include "nvlp_cost.h"
#include "nvlp_rt.h"

/* Decode PM samples every second: a decode round cost ~9 ms of CPU whatever it held (the sampler
 * thread took 1.15 s over 129 s of a GPT-2 job at 10 ms samples decoded every 100 ms, 1.76 s over
 * 166 s at 1 ms samples: tests/gpu/results/cost2.txt, cost3.txt). */
#define DECODE_NS 1000000000ull
#define POLL_NS 10000000ull    /* look for the first context every 10 ms */
#define EXIT_WAIT_MS 1500      /* at exit, wait this long for a GPU whose setup is running */
#define TOPO_TRIES 500         /* lazy: look for the devices at this many wakes (5-50 s), then note */

static struct {
	pthread_t thr;
	int running, started; /* started: the thread was created (it may be gone now) */
	volatile int stop;    /* atomic: set once, at exit */
	int abandoned;        /* atomic: the exiting thread stopped waiting for the sampler */
	int in_setup;         /* atomic: device + 1 while the sampler is in setup_gpu, else 0 */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t seen[MAX_GPUS / 64]; /* devices to sample (bit per device) */
	struct gpu g[MAX_GPUS];
	int topo_tries; /* NVLPROF_CUPTI=lazy: topology attempts (TOPO_TRIES once recorded) */
} link_sampler = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
};

void nvlp_link_device_seen(int dev)
{
	if (dev < 0 || dev >= MAX_GPUS)
		return;
	uint64_t bit = 1ull << (dev % 64);
	if (__atomic_load_n(&link_sampler.seen[dev / 64], __ATOMIC_RELAXED) & bit)
		return;
	__atomic_fetch_or(&link_sampler.seen[dev / 64], bit, __ATOMIC_RELEASE);
	pthread_mutex_lock(&link_sampler.mu);
	pthread_cond_signal(&link_sampler.cv);
	pthread_mutex_unlock(&link_sampler.mu);
}

static int stopping(void)
{
	return __atomic_load_n(&link_sampler.stop, __ATOMIC_ACQUIRE);
}

/* ---- one sampler per GPU ---- */

static void uuid_hex(int dev, char *out, size_t len)
{
	CUuuid u;
	memset(&u, 0, sizeof u);
	if (!nvlp_drv.cuDeviceGetUuid || nvlp_drv.cuDeviceGetUuid(&u, dev) != 0) {
		snprintf(out, len, "dev%d", dev);
		return;
	}
	size_t o = 0;
	for (int i = 0; i < 16 && o + 2 < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%02x", (unsigned char)u.bytes[i]);
}

/* @return 1 if this process may sample dev; else 0 with the owner's pid in *owner. */
static int claim_gpu(int dev, struct gpu *g, long *owner, char *uuid, size_t ulen)
{
	char path[256];
	struct stat st;
	uuid_hex(dev, uuid, ulen);
	snprintf(path, sizeof path, "%s/nvlprof-link-%s.lock",
	         stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp", uuid);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	*owner = 0;
	if (fd < 0)
		return 1; /* cannot coordinate: sample anyway, the NOTE says which source */
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		char buf[32] = "";
		ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
		if (n > 0)
			*owner = strtol(buf, NULL, 10);
		close(fd);
		return 0;
	}
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)n, 0) < 0) {
		/* the pid is informational only */
	}
	g->lock_fd = fd;
	return 1;
}

/* ---- the thread ---- */

static void setup_gpu_body(int dev)
{
	struct gpu *g = &link_sampler.g[dev];
	char why[512] = "", why2[512] = "", dropped[256] = "", uuid[40];
	long owner;
	g->setup = 1;
	g->lock_fd = -1;
	if (!claim_gpu(dev, g, &owner, uuid, sizeof uuid)) {
		nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, (uint64_t)owner,
		          "GPU %d (uuid %s) link counters are sampled by process %ld: one sampler "
		          "per GPU, its LINKSAMPLE records include this process's traffic",
		          dev, uuid, owner);
		return;
	}
	int pr = -1;
	if (nvlp_cfg()->links_nvml)
		snprintf(why, sizeof why, "%s",
		         nvlp_cfg()->cupti == 2
		             ? "not tried: NVLPROF_CUPTI=startup detaches CUPTI after start-up; 1 "
		               "keeps it, with PM sampling"
		         : nvlp_cfg()->cupti == 3
		             ? "not tried: NVLPROF_CUPTI=lazy leaves CUPTI out; 1 attaches it, with "
		               "PM sampling"
		             : "not tried: NVLPROF_LINKS=nvml");
	else
		pr = nvlp_lk_pm_setup(dev, g, why, sizeof why, dropped, sizeof dropped);
	if (pr == -2 || (pr != 0 && stopping())) {
		/* the exiting thread says so itself when it stopped waiting for us */
		if (!__atomic_load_n(&link_sampler.abandoned, __ATOMIC_ACQUIRE))
			nvlp_note(
			    NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, 0,
			    "GPU %d: the process ended while its link counters were being set "
			    "up (PM sampling setup takes about 1 s): no link samples for it",
			    dev);
		return;
	}
	if (pr == 0) {
		g->source = NVLP_LINK_PM_SAMPLING;
		nvlp_note(NVLP_NOTE_PM_SAMPLING_ON, dev, (uint64_t)nvlp_cfg()->sample_us,
		          "PM sampling on GPU %d every %ld us: %d metrics%s%s", dev,
		          nvlp_cfg()->sample_us, g->nm, dropped[0] ? "; not available: " : "",
		          dropped);
		return;
	}
	if (nvlp_lk_nvml_setup(dev, g, why2, sizeof why2) == 0) {
		g->source = NVLP_LINK_NVML;
		long us = nvlp_cfg()->nvml_us;
		nvlp_note(NVLP_NOTE_NVML_ON, dev, (uint64_t)us,
		          "NVML link counters on GPU %d every %ld us, %d of %d fields (PM sampling "
		          "unavailable: %s)",
		          dev, us, g->nvml_n, NVML_NV, why);
		return;
	}
	nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, 0,
	          "no link counters on GPU %d: PM sampling: %s; NVML: %s", dev, why, why2);
	if (g->lock_fd >= 0) {
		close(g->lock_fd); /* let another process try */
		g->lock_fd = -1;
	}
}

static void setup_gpu(int dev)
{
	struct gpu *g = &link_sampler.g[dev];
	__atomic_store_n(&link_sampler.in_setup, dev + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&g->phase, PH_SETUP, __ATOMIC_RELEASE);
	setup_gpu_body(dev);
	/* PH_DONE publishes g->source and the PM objects to the exiting thread */
	__atomic_store_n(&g->phase, PH_DONE, __ATOMIC_RELEASE);
	__atomic_store_n(&link_sampler.in_setup, 0, __ATOMIC_RELEASE);
}

/* A GPU the process has a context on is "used" as soon as the context exists: waiting for the
 * first intercepted call with a stream missed short programs (their copies were over before the
 * counters came up, about a second after setup starts). */
static void seen_by_context(void)
{
	int n = 0;
	if (!nvlp_drv.cuDevicePrimaryCtxGetState || !nvlp_drv.cuDeviceGetCount ||
	    nvlp_drv.cuDeviceGetCount(&n) != 0)
		return;
	for (int d = 0; d < n && d < MAX_GPUS; d++) {
		unsigned flags = 0;
		int active = 0;
		if (nvlp_drv.cuDevicePrimaryCtxGetState(d, &flags, &active) == 0 && active)
			nvlp_link_device_seen(d);
	}
}

/* GPUs whose streams the intercepted calls used (streams.c remembers them, on the hot path). */
static void seen_by_streams(void)
{
	uint64_t s[NVLP_LINK_MAX_GPUS / 64];
	nvlp_streams_devices(s);
	for (int d = 0; d < MAX_GPUS && d < NVLP_LINK_MAX_GPUS; d++)
		if (s[d / 64] >> (d % 64) & 1)
			nvlp_link_device_seen(d);
}

/* Sleep until wake (CLOCK_MONOTONIC ns) or a signal; link_sampler.mu held. */
static void sampler_wait(uint64_t wake)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t cur = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (wake > cur) {
		uint64_t abs_ns = wake;
		ts.tv_sec = (time_t)(abs_ns / 1000000000ull);
		ts.tv_nsec = (long)(abs_ns % 1000000000ull);
		pthread_cond_timedwait(&link_sampler.cv, &link_sampler.mu, &ts);
	}
}

/* The GPUs in use, each set up the first time it is seen. */
static void sampler_find_gpus(const struct nvlp_config *cfg)
{
	if (cfg->sample_us > 0) {
		seen_by_context();
		seen_by_streams();
	}
	if (cfg->sample_us > 0)
		for (int d = 0; d < MAX_GPUS && !stopping(); d++)
			if ((__atomic_load_n(&link_sampler.seen[d / 64], __ATOMIC_ACQUIRE) >>
			         (d % 64) &
			     1) &&
			    !link_sampler.g[d].setup)
				setup_gpu(d);
}

/* NVLPROF_CUPTI=lazy: no CUPTI DEVICE/NVLINK records, so the topology from the driver and NVML
 * (topo.c), once the devices can be counted (cuInit done). */
static void sampler_topology(void)
{
	if (link_sampler.topo_tries >= TOPO_TRIES || !nvlp_detach_is_lazy())
		return;
	int n = 0;
	if (nvlp_driver_load(NULL, 0) != 0 || !nvlp_drv.cuDeviceGetCount ||
	    nvlp_drv.cuDeviceGetCount(&n) != 0 || n <= 0) {
		if (++link_sampler.topo_tries == TOPO_TRIES)
			nvlp_note(NVLP_NOTE_CONFIG, -1, 0,
			          "no topology recorded (NVLPROF_CUPTI=lazy): no CUDA device counted "
			          "in %d looks",
			          TOPO_TRIES);
		return;
	}
	link_sampler.topo_tries = TOPO_TRIES;
	char why[256] = "";
	int r = nvlp_topo_nvml(n, why, sizeof why);
	if (r < 0)
		nvlp_note(NVLP_NOTE_NVML_UNAVAILABLE, -1, 0,
		          NVLP_NOTE_TOPO_LAZY_NONE " %s; %d device(s) recorded from the driver",
		          why, n);
	else
		nvlp_note(NVLP_NOTE_CONFIG, -1, (uint64_t)r,
		          NVLP_NOTE_TOPO_LAZY " %d device(s), %d NVLink pair(s); %s",
		          n, r, why);
}

/* Decode the PM samples and read NVML when due. @return when to wake next for them. */
static uint64_t sampler_read(const struct nvlp_config *cfg, uint64_t now, uint64_t *next_decode,
                             uint64_t *next_nvml, uint64_t nvml_ns)
{
	if (now >= *next_decode) {
		for (int d = 0; d < MAX_GPUS; d++)
			if (link_sampler.g[d].source == NVLP_LINK_PM_SAMPLING)
				nvlp_lk_pm_decode(d, &link_sampler.g[d]);
		*next_decode = now + DECODE_NS;
	}
	int nvml = 0, ready = cfg->sample_us <= 0; /* ready: no first context to look for */
	for (int d = 0; d < MAX_GPUS; d++)
		nvml |= link_sampler.g[d].source == NVLP_LINK_NVML,
		    ready |= link_sampler.g[d].setup;
	if (nvml && now >= *next_nvml) {
		for (int d = 0; d < MAX_GPUS; d++)
			if (link_sampler.g[d].source == NVLP_LINK_NVML)
				nvlp_lk_nvml_sample(d, &link_sampler.g[d]);
		*next_nvml = now + nvml_ns;
	}
	/* No reason to wake 100 times a second (the old 10 ms tick; its cost was within noise on
	 * the DDP example): NVML's period when it is the source, else 10 ms only until a GPU is
	 * in use (a short program's first context), then the decoding period. */
	return nvml ? *next_nvml : now + (ready ? DECODE_NS : POLL_NS);
}

static void *sampler(void *arg)
{
	(void)arg;
	nvlp_cost_thread_start(NVLP_COST_SAMPLER);
	const struct nvlp_config *cfg = nvlp_cfg();
	uint64_t nvml_ns = (uint64_t)cfg->nvml_us * 1000ull;
	uint64_t now = nvlp_now();
	uint64_t next_decode = now + DECODE_NS, next_nvml = now + nvml_ns, next_tick = now + POLL_NS;
	after_load(); /* libcuda and libcupti came in just before we were started */
	pthread_mutex_lock(&link_sampler.mu);
	while (!link_sampler.stop) {
		uint64_t wake = next_decode;
		if (next_tick < wake)
			wake = next_tick;
		sampler_wait(wake);
		if (stopping())
			break;
		pthread_mutex_unlock(&link_sampler.mu);
		nvlp_lc_refresh_atexit(); /* the program's own dlopens, as the writer's tick */
		sampler_find_gpus(cfg);
		sampler_topology();
		/* once stopping, the exiting thread owns the GPUs' state: touch nothing more */
		if (stopping()) {
			pthread_mutex_lock(&link_sampler.mu);
			break;
		}
		now = nvlp_now();
		next_tick = sampler_read(cfg, now, &next_decode, &next_nvml, nvml_ns);
		pthread_mutex_lock(&link_sampler.mu);
	}
	pthread_mutex_unlock(&link_sampler.mu);
	nvlp_cost_thread_end(NVLP_COST_SAMPLER);
	return NULL;
}

int nvlp_link_start(void)
{
	if (link_sampler.running)
		return 0;
	nvlp_lk_pm_bind(&link_sampler.stop);
	nvlp_driver_load(NULL, 0);
	if (nvlp_cfg()->sample_us <= 0)
		nvlp_note(NVLP_NOTE_CONFIG, -1, 0, "NVLPROF_SAMPLE_US=0: no link counters");
	/* the condattr must match the CLOCK_MONOTONIC deadlines */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&link_sampler.cv, &ca);
	pthread_condattr_destroy(&ca);
	link_sampler.stop = 0;
	if (pthread_create(&link_sampler.thr, NULL, sampler, NULL) != 0) {
		nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, -1, (uint64_t)errno,
		          "cannot start the sampler thread: no link counters, activity flushed at "
		          "exit only");
		return -1;
	}
	pthread_setname_np(link_sampler.thr, "nvlprof-sample");
	link_sampler.running = link_sampler.started = 1;
	return 0;
}

/* Set stop and wait for the sampler, at most EXIT_WAIT_MS (it may be inside a CUPTI setup call
 * that takes most of a second). @return 1 if it is gone, 0 if we stopped waiting. */
static int join_bounded(void)
{
	pthread_mutex_lock(&link_sampler.mu);
	__atomic_store_n(&link_sampler.stop, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&link_sampler.cv);
	pthread_mutex_unlock(&link_sampler.mu);
	if (pthread_equal(pthread_self(), link_sampler.thr))
		return 0; /* exit() from the sampler itself (a signal handler on it): never join */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* pthread_timedjoin_np's clock */
	ts.tv_sec += EXIT_WAIT_MS / 1000;
	ts.tv_nsec += (EXIT_WAIT_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_sec++, ts.tv_nsec -= 1000000000L;
	int rc;
	while ((rc = pthread_timedjoin_np(link_sampler.thr, NULL, &ts)) == EINTR)
		;
	return rc == 0;
}

void nvlp_link_stop_thread(void)
{
	if (!link_sampler.running)
		return;
	link_sampler.running = 0;
	if (join_bounded())
		return;
	/* The sampler is still in a CUPTI call. It checks stop before touching anything else, so
	 * the GPUs whose setup is done are ours; the one it is setting up is left alone. */
	__atomic_store_n(&link_sampler.abandoned, 1, __ATOMIC_RELEASE);
	int dev = __atomic_load_n(&link_sampler.in_setup, __ATOMIC_ACQUIRE) - 1;
	if (dev >= 0)
		nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, dev, EXIT_WAIT_MS,
		          "GPU %d: PM sampling setup still running %d ms after exit began: gave up "
		          "waiting; its last link samples are dropped",
		          dev, EXIT_WAIT_MS);
	else
		nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, -1, EXIT_WAIT_MS,
		          "the link sampler did not stop within %d ms of exit: the last link "
		          "samples are dropped",
		          EXIT_WAIT_MS);
}

void nvlp_link_stop(void)
{
	if (!link_sampler.started)
		return;
	nvlp_link_stop_thread();
	int abandoned = __atomic_load_n(&link_sampler.abandoned, __ATOMIC_ACQUIRE);
	/* abandoned outside a setup: it may be decoding or sampling, so the GPUs are not ours */
	if (abandoned && __atomic_load_n(&link_sampler.in_setup, __ATOMIC_ACQUIRE) == 0)
		return;
	for (int d = 0; d < MAX_GPUS; d++) {
		struct gpu *g = &link_sampler.g[d];
		int ph = __atomic_load_n(&g->phase, __ATOMIC_ACQUIRE);
		if (ph == PH_NONE && (link_sampler.seen[d / 64] >> (d % 64) & 1) &&
		    nvlp_cfg()->sample_us > 0)
			nvlp_note(NVLP_NOTE_PM_SAMPLING_UNAVAILABLE, d, 0,
			          "GPU %d: the process ended before its link counters were set up",
			          d);
		if (ph != PH_DONE)
			continue; /* in setup: the sampler's (see above) */
		if (g->source == 1)
			nvlp_lk_pm_final(d, g);
		else if (g->source == 2)
			nvlp_lk_nvml_sample(d, g);
		g->source = 0;
	}
}

void nvlp_link_atfork_child(void)
{
	/* the thread does not exist in the child; GPU state belongs to the parent */
	link_sampler.running = link_sampler.started = 0;
	link_sampler.stop = 0;
	link_sampler.abandoned = 0;
	link_sampler.in_setup = 0;
	link_sampler.topo_tries = 0;
	pthread_mutex_init(&link_sampler.mu, NULL);
	for (int d = 0; d < MAX_GPUS; d++) {
		if (link_sampler.g[d].lock_fd > 0)
			close(link_sampler.g[d].lock_fd); /* the parent keeps its lock */
		memset(&link_sampler.g[d], 0, sizeof link_sampler.g[d]);
	}
	memset(link_sampler.seen, 0, sizeof link_sampler.seen);
}

/* test_cupti_kineto.c: shim and a Kineto stand-in share a fake libcupti; both get their records. */
/*
 * Parent: runs itself as a child under LD_PRELOAD=libnvlprof.so with the fake libcupti and fake
 * libcuda (whose cuInit calls InitializeInjection like the driver), then reads the child's trace.
 * Child: plays torch.profiler: registers its own buffer callbacks after nvlprof, enables kinds,
 * records, disables its kinds, then flushes (as Kineto stops), finalizes, and checks what it
 * received.
 * Runs with nvlprof's timestamp callback, with CUPTI refusing it (clock conversion), with Kineto
 * first, and with Kineto installing its own timestamp callback (TSC-like ticks, 2.5 per ns, as
 * Kineto's getApproximateTime on Linux) after or before nvlprof started: GPU times must still be
 * converted onto the API clock, inside the job's wall time.
 */
#include <cuda_runtime_api.h> /* cudaMallocManaged (fake cudart, intercepted by the shim) */
#include <cupti.h>            /* kinds, record layouts */
#include <fcntl.h>            /* open */
#include <sys/file.h>         /* flock */
#include <limits.h>           /* PATH_MAX */
#include <stdio.h>            /* printf */
#include <stdlib.h>           /* setenv, mkdtemp */
#include <string.h>           /* strstr */
#include <time.h>             /* clock_gettime */
#include <unistd.h>           /* fork, execv */

#include "check.h"
#include "nvlp_trace.h"
#include "shim_child.h"

void fake_cupti_generate(int kind, int n);
int fake_cupti_enabled(int kind);
int fake_cupti_finalize_calls(void);
void fake_cupti_hold_buffer(void);
void fake_cupti_materialize(void);

enum { NK = 1000, NRT = 300, NMC = 50, NP2P = 20, NUM = 40, NK2 = 100 };

/* ---- child: the Kineto stand-in ---- */
static int k_got[CUPTI_ACTIVITY_KIND_COUNT], k_req, k_comp;
static void CUPTIAPI k_request(uint8_t **buf, size_t *size, size_t *max)
{
	/* small buffers, so several Kineto buffers per flush */
	*size = 64 << 10;
	*buf = aligned_alloc(8, *size);
	*max = 0;
	k_req++;
}
static void CUPTIAPI k_complete(CUcontext c, uint32_t s, uint8_t *buf, size_t size, size_t valid)
{
	(void)c, (void)s, (void)size;
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
		k_got[r->kind]++;
	free(buf);
	k_comp++;
}

/* Kineto's approximate clock: raw TSC ticks (here 2.5 per ns plus an offset), not ns. */
static uint64_t CUPTIAPI k_tsc(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return ns * 5 / 2 + 777777777ull;
}

static void kineto_start(void)
{
	if (getenv("KINETO_TSC"))
		CHECK(cuptiActivityRegisterTimestampCallback(k_tsc) == CUPTI_SUCCESS,
		      "kineto: its timestamp callback is installed");
	CHECK(cuptiActivityRegisterCallbacks(k_request, k_complete) == CUPTI_SUCCESS,
	      "kineto: register callbacks");
	CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS &&
	          cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_SUCCESS,
	      "kineto: enable kernel + runtime");
}

static int child(void)
{
	int first = getenv("KINETO_FIRST") != NULL;
	if (first)
		kineto_start(); /* before CUDA (and nvlprof) start: passed through, then adopted */
	cuInit(0);              /* fake driver: runs InitializeInjection -> nvlprof attaches */
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_DEVICE, 2);
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_NVLINK, 1);
	if (getenv("KINETO_LATE")) {
		/* NVLPROF_KERNELS=window:1/...: the first window closes before Kineto starts */
		for (int i = 0; i < 500 && fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); i++)
			usleep(10000);
		CHECK(!fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
		      "kernel window closed before kineto starts");
	}
	if (!first) {
		fake_cupti_hold_buffer(); /* nvlprof's buffer, in flight while Kineto starts */
		kineto_start();
	}
	CHECK(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
	      "kernels really enabled once kineto enabled them (window closed or not)");
	void *m = NULL;
	cudaMallocManaged(&m, 1 << 20, cudaMemAttachGlobal); /* auto mode: UM counters on */
	usleep(200000); /* let the sampler thread claim GPU 0 */
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, NK);
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_RUNTIME, NRT);
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_MEMCPY, NMC);
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_MEMCPY2, NP2P);
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER, NUM);
	fake_cupti_materialize(); /* recorded while enabled, into the buffer CUPTI holds */
	/* Kineto's stop: it disables its kinds first, then flushes, and only if it holds a buffer
	 * it allocated (CuptiActivityApi::activityBuffers) */
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
	CHECK(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
	      "kineto cannot disable a kind nvlprof needs");
	CHECK(!fake_cupti_enabled(CUPTI_ACTIVITY_KIND_RUNTIME),
	      "kineto's own kind is really disabled");
	CHECK(k_req > k_comp, "kineto holds a buffer of its own at its stop, so it flushes (%d/%d)",
	      k_comp, k_req);
	if (k_req > k_comp)
		CHECK(cuptiActivityFlushAll(1) == CUPTI_SUCCESS,
		      "kineto: flush through the wrapper");
	CHECK(k_got[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] == NK,
	      "kineto got all %d kernels recorded before it disabled them (%d)", NK,
	      k_got[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
	CHECK(k_got[CUPTI_ACTIVITY_KIND_RUNTIME] == NRT, "kineto got all %d runtime records (%d)",
	      NRT, k_got[CUPTI_ACTIVITY_KIND_RUNTIME]);
	CHECK(k_got[CUPTI_ACTIVITY_KIND_MEMCPY] + k_got[CUPTI_ACTIVITY_KIND_MEMCPY2] +
	              k_got[CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER] +
	              k_got[CUPTI_ACTIVITY_KIND_DEVICE] + k_got[CUPTI_ACTIVITY_KIND_NVLINK] ==
	          0,
	      "kineto sees no kind it did not enable");
	CHECK(k_req >= 1 && k_req == k_comp, "kineto got back every buffer it allocated (%d/%d)",
	      k_comp, k_req);
	/* after its flush, kinds it disabled are no longer relayed */
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, NK2);
	cuptiActivityFlushAll(1);
	CHECK(k_got[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] == NK,
	      "kineto gets no kernels after disabling them and flushing");
	CHECK(k_req == k_comp, "kineto holds no buffer once it stopped (%d/%d)", k_comp, k_req);
	CHECK(cuptiFinalize() == CUPTI_SUCCESS && fake_cupti_finalize_calls() == 0,
	      "cuptiFinalize ignored while nvlprof collects");
	return CHECK_DONE();
}

/* ---- parent: run the child, read its trace ---- */
struct summary {
	unsigned long long kinds[NVLP_K_COUNT], nccl_kernels, p2p, notes[NVLP_NOTE_CODE_COUNT];
	unsigned long long kernel_named, t_bad, dev_named, nvlink_mapped, managed, foreign_pairs;
	uint64_t t_min, t_max;
	uint64_t dropped, pm_owner;
};

struct sum_ctx {
	struct summary *s;
	uint64_t t0, t1;
};

static void count_record(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	struct sum_ctx *x = arg;
	struct summary *s = x->s;
	if (rec->kind < NVLP_K_COUNT)
		s->kinds[rec->kind]++;
	if (rec->kind == NVLP_K_KERNEL) {
		const struct nvlp_rec_kernel *k = (const void *)rec->f;
		const char *n = nvlp_reader_string(r, k->name);
		s->nccl_kernels += k->flags & 1;
		s->kernel_named += n && (strstr(n, "ncclDevKernel") || strstr(n, "gemm"));
		s->t_bad += k->start < x->t0 || k->start > x->t1;
		s->t_min = !s->t_min || k->start < s->t_min ? k->start : s->t_min;
		s->t_max = k->start > s->t_max ? k->start : s->t_max;
	} else if (rec->kind == NVLP_K_CLOCK) {
		const struct nvlp_rec_clock *c = (const void *)rec->f;
		s->foreign_pairs += c->source == NVLP_CLOCK_FOREIGN;
	} else if (rec->kind == NVLP_K_GPUCOPY) {
		const struct nvlp_rec_gpucopy *c = (const void *)rec->f;
		s->p2p += (c->flags & 0x100) && c->src_device == 0 && c->dst_device == 1;
		s->t_bad += c->start < x->t0 || c->start > x->t1;
	} else if (rec->kind == NVLP_K_NOTE) {
		const struct nvlp_rec_note *n = (const void *)rec->f;
		if (n->code < NVLP_NOTE_CODE_COUNT)
			s->notes[n->code]++;
		if (n->code == NVLP_NOTE_ACTIVITY_DROPPED)
			s->dropped += n->value;
		if (n->code == NVLP_NOTE_PM_SAMPLING_UNAVAILABLE)
			s->pm_owner = n->value;
		printf("    note %s: %.*s\n", nvlp_note_name((unsigned)n->code), (int)rec->blob_len,
		       (const char *)rec->blob);
	} else if (rec->kind == NVLP_K_DEVICE) {
		s->dev_named += rec->blob_len == 9 && !memcmp(rec->blob, "Fake H200", 9);
	} else if (rec->kind == NVLP_K_NVLINK) {
		const struct nvlp_rec_nvlink *n = (const void *)rec->f;
		s->nvlink_mapped += n->dev0 == 0 && n->dev1 == 1 && n->links == 18 &&
		                    n->ports0 == ((1u << 0) | (1u << 5));
	} else if (rec->kind == NVLP_K_MANAGED) {
		s->managed++;
	}
}

static void summarize(const char *dir, struct summary *s, uint64_t t0, uint64_t t1)
{
	memset(s, 0, sizeof *s);
	struct sum_ctx x = {s, t0, t1};
	trace_dir_each(dir, count_record, NULL, &x);
}

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int run_child(const char *self, const char *lib, const char *dir, int no_ts_cb,
                     int kineto_first, int tsc)
{
	const char *env[] = {kineto_first ? "KINETO_FIRST=1" : "KINETO_FIRST",
	                     tsc ? "KINETO_TSC=1" : "KINETO_TSC",
	                     no_ts_cb ? "FAKE_CUPTI_NO_TS_CB=1" : "FAKE_CUPTI_DROPPED",
	                     no_ts_cb ? "FAKE_CUPTI_DROPPED=5" : NULL, NULL};
	const char *late[] = {"KINETO_LATE=1", "NVLPROF_KERNELS=window:1/3600000", NULL};
	if (kineto_first == 2)
		return shim_run_child(self, lib, dir, "1000", late, NULL);
	return shim_run_child(self, lib, dir, "1000", env, NULL);
}

int main(int argc, char **argv)
{
	/* these runs count every kernel and copy: traced all the time, not in windows */
	setenv("NVLPROF_KERNELS", "all", 0); /* a child keeps what its parent chose */
	if (argc > 1 && !strcmp(argv[1], "child"))
		return child();
	setenv("NVLPROF_KERNELS", "all", 1);
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	/* A fake GPU of its own (its UUID names the machine-wide link-counter lock): two suites run
	 * side by side would otherwise take each other's lock (seen: the NOTE named the other
	 * suite's pid). The first UUID base whose lock nobody holds now. */
	char lockpath[96];
	for (unsigned base = 0x10 + (unsigned)getpid() % 0xc0, k = 0; k < 0xc0; k++) {
		unsigned b = 0x10 + (base - 0x10 + k) % 0xc0;
		int o = snprintf(lockpath, sizeof lockpath, "/dev/shm/nvlprof-link-");
		for (int i = 0; i < 16; i++)
			o += snprintf(lockpath + o, sizeof lockpath - (size_t)o, "%02x", b + (unsigned)i);
		snprintf(lockpath + o, sizeof lockpath - (size_t)o, ".lock");
		int fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		int free_now = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
		if (fd >= 0)
			close(fd);
		if (free_now || fd < 0) {
			char v[16];
			snprintf(v, sizeof v, "%u", b);
			setenv("FAKE_CUDA_UUID_BASE", v, 1);
			break;
		}
	}
	for (int run = 0; run < 5; run++) {
		/* run 2 repeats run 0 with Kineto registered before nvlprof started; runs 3 and 4
		 * with Kineto's own timestamp callback (after, before nvlprof started) */
		int pass = run == 1, tsc = run >= 3;
		const char *mode = run == 4   ? "kineto tsc clock, first"
		                   : run == 3 ? "kineto tsc clock"
		                   : run == 2 ? "kineto first"
		                   : pass     ? "converted clock"
		                              : "timestamp callback";
		char dir[] = "/tmp/nvlp-cupti-kineto.XXXXXX";
		if (!mkdtemp(dir))
			return 1;
		/* pass 1: another process (we) owns fake GPU 0's link counters */
		int lock = -1;
		if (pass) {
			lock = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
			if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0 ||
			    dprintf(lock, "%d\n", (int)getpid()) < 0)
				printf("    could not take the GPU lock\n");
		}
		uint64_t t0 = mono();
		int rc = run_child(self, lib, dir, pass, run == 2 || run == 4, tsc);
		if (run == 2) {
			/* then once more, Kineto starting after the first kernel window closed */
			char dir2[] = "/tmp/nvlp-cupti-kineto.XXXXXX";
			if (!mkdtemp(dir2))
				return 1;
			int rc2 = run_child(self, lib, dir2, 0, 2, 0);
			CHECK(rc2 == 0, "[kineto after a window] child ran and its checks passed (rc %d)",
			      rc2);
			char rm[PATH_MAX + 16];
			snprintf(rm, sizeof rm, "rm -rf %s", dir2);
			if (system(rm) != 0)
				return 1;
		}
		if (lock >= 0) {
			if (ftruncate(lock, 0) != 0)
				printf("    could not truncate the GPU lock\n");
			close(lock);
		}
		uint64_t t1 = mono();
		CHECK(rc == 0, "[%s] child ran and its checks passed (rc %d)", mode, rc);
		struct summary s;
		summarize(dir, &s, t0, t1);
		CHECK(s.kinds[NVLP_K_KERNEL] == NK + NK2, "[%s] trace has all %d kernels (%llu)",
		      mode, NK + NK2, s.kinds[NVLP_K_KERNEL]);
		CHECK(s.nccl_kernels == (NK + NK2) / 2 && s.kernel_named == NK + NK2,
		      "[%s] kernel names interned, NCCL kernels flagged (%llu)", mode,
		      s.nccl_kernels);
		CHECK(s.kinds[NVLP_K_GPUCOPY] == NMC + NP2P && s.p2p == NP2P,
		      "[%s] MEMCPY + MEMCPY2 -> GPUCOPY (%llu, %llu peer)", mode,
		      s.kinds[NVLP_K_GPUCOPY], s.p2p);
		CHECK(s.kinds[NVLP_K_UM] == NUM && s.notes[NVLP_NOTE_UM_ON] == 1,
		      "[%s] UM counters enabled by cudaMallocManaged, %d UM records (%llu)", mode,
		      NUM, s.kinds[NVLP_K_UM]);
		CHECK(s.kinds[NVLP_K_DEVICE] == 2 && s.dev_named == 2,
		      "[%s] DEVICE records with names", mode);
		CHECK(s.kinds[NVLP_K_NVLINK] == 1 && s.nvlink_mapped == 1,
		      "[%s] NVLINK record with device ids from UUIDs, links and ports", mode);
		CHECK(s.t_bad == 0, "[%s] GPU times on the API clock (%llu outside the run)", mode,
		      s.t_bad);
		CHECK(s.kinds[NVLP_K_CLOCK] >= 4, "[%s] CLOCK pairs at start and stop (%llu)", mode,
		      s.kinds[NVLP_K_CLOCK]);
		CHECK(s.t_max >= s.t_min && s.t_max - s.t_min <= t1 - t0,
		      "[%s] kernels span no more than the job's wall time (%.1f ms of %.1f)", mode,
		      (double)(s.t_max - s.t_min) / 1e6, (double)(t1 - t0) / 1e6);
		CHECK(tsc ? s.foreign_pairs >= 3 : s.foreign_pairs == 0,
		      "[%s] CLOCK pairs of the foreign clock: at its registration and flushes (%llu)",
		      mode, s.foreign_pairs);
		CHECK(s.notes[NVLP_NOTE_SHARED_CUPTI] >= 1 && s.notes[NVLP_NOTE_ACTIVITY_ON] == 1,
		      "[%s] NOTEs activity_on and shared_cupti", mode);
		CHECK(s.notes[NVLP_NOTE_PM_SAMPLING_UNAVAILABLE] == 1,
		      "[%s] NOTE says why there are no link counters", mode);
		if (pass)
			CHECK(s.pm_owner == (uint64_t)getpid(),
			      "[%s] GPU sampled by another process: NOTE names its pid (%llu)",
			      mode, (unsigned long long)s.pm_owner);
		CHECK(s.dropped == (pass ? 5u : 0u) &&
		          s.notes[NVLP_NOTE_ACTIVITY_DROPPED] == (pass ? 1u : 0u),
		      "[%s] CUPTI's dropped records reported (%llu)", mode,
		      (unsigned long long)s.dropped);
		CHECK(s.managed == 1, "[%s] API records still captured (MANAGED: %llu)", mode,
		      s.managed);
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return CHECK_DONE();
}

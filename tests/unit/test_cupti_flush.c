/* test_cupti_flush.c: how GPU activity reaches the trace without stalling the application. */
/*
 * Measured on 2 x H200: cuptiActivityFlushAll holds up the application's kernel launches for
 * 4-11 ms, and a flush every 500 ms stalled a 4 ms DDP step by 5-15 ms each time (+6.8% mean step
 * time). So nvlprof forces a flush only every NVLPROF_GPU_FLUSH_MS (default 10 s) and at exit;
 * between those, CUPTI hands over each buffer that fills up, the completion callback only queues
 * it, and the sampler thread converts it. The parent re-runs itself under the shim with the fake
 * libcupti/libcuda; the child records 3.5 activity buffers' worth of kernels (CUPTI completes the
 * 3 full ones by itself, the last stays in CUPTI), waits 1.5 s and dies of SIGKILL (or exits):
 *  - default: exactly the records of the full buffers are in the trace (they were converted and
 *    written without any flush, and no forced flush ran);
 *  - NVLPROF_GPU_FLUSH_MS=200: the forced flush brought the partial buffer too: every record;
 *  - normal exit: every record, trace complete.
 */
#include <cuda.h>   /* cuInit */
#include <cupti.h>  /* CUpti_ActivityKernel10 */
#include <limits.h> /* PATH_MAX */
#include <signal.h> /* raise, SIGKILL */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* setenv, mkdtemp */
#include <string.h> /* strcmp */
#include <time.h>   /* nanosleep */
#include <unistd.h> /* fork, execl */

#include "check.h"
#include "nvlp_trace.h"
#include "shim_child.h"

void fake_cupti_generate(int kind, int n);
void fake_cupti_materialize(void);

#define BUF_BYTES (1u << 20) /* nvlprof's activity buffer size (cupti/cupti.c BUF_SIZE) */
#define PER_BUF ((int)(BUF_BYTES / sizeof(CUpti_ActivityKernel10)))
#define NFULL 3
#define NK (NFULL * PER_BUF + PER_BUF / 2)

/* ---- child ---- */
static int child(const char *how)
{
	cuInit(0); /* fake driver: InitializeInjection -> nvlprof attaches */
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, NK);
	fake_cupti_materialize(); /* as the GPU runs them: full buffers are completed on the way */
	struct timespec ts = {1, 500000000}; /* sampler wakes every 100 ms, writer every 500 ms */
	nanosleep(&ts, NULL);
	if (!strcmp(how, "kill"))
		raise(SIGKILL);
	return 0;
}

/* ---- parent ---- */
int main(int argc, char **argv)
{
	/* these runs count every kernel and copy: traced all the time, not in windows */
	setenv("NVLPROF_KERNELS", "all", 1);
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	static const struct {
		const char *name, *how, *env; /* env: NAME=VALUE for the child, or NULL */
		int want_rc, want_kernels;
	} scs[] = {
	    {"kill -9, default flush period", "kill", NULL, 128 + SIGKILL, NFULL * PER_BUF},
	    {"kill -9, NVLPROF_GPU_FLUSH_MS=200", "kill", "NVLPROF_GPU_FLUSH_MS=200", 128 + SIGKILL,
	     NK},
	    {"normal exit", "exit", NULL, 0, NK},
	};
	for (size_t i = 0; i < sizeof scs / sizeof scs[0]; i++) {
		char dir[] = "/tmp/nvlp-cupti-flush.XXXXXX";
		if (!mkdtemp(dir))
			return 1;
		const char *env[] = {scs[i].env, NULL};
		int rc = shim_run_child(self, lib, dir, "0", env, scs[i].how);
		struct trace_summary s;
		trace_summarize(dir, &s);
		CHECK(rc == scs[i].want_rc, "[%s] child status %d (want %d)", scs[i].name, rc,
		      scs[i].want_rc);
		CHECK(s.files == 1 &&
		          s.kinds[NVLP_K_KERNEL] == (unsigned long long)scs[i].want_kernels,
		      "[%s] %d kernel records in the trace (%llu of %d made)", scs[i].name,
		      scs[i].want_kernels, s.kinds[NVLP_K_KERNEL], NK);
		if (scs[i].want_rc == 0)
			CHECK(s.complete == 1, "[%s] trace complete (END)", scs[i].name);
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return CHECK_DONE();
}

/* test_cupti_nodriver.c: real libcupti, no driver or stub libcuda: API records and a NOTE. */
/*
 * The binary links the real libcupti.so.13 (as libtorch_cpu does) and the fake cudart. The parent
 * re-runs itself under LD_PRELOAD=libnvlprof.so in several environments; the child makes an
 * intercepted call (cudaMallocManaged: a MANAGED record, and the UM trigger into cupti/); the
 * parent checks the trace's records and NOTEs.
 */
#include <cuda_runtime_api.h> /* cudaMallocManaged */
#include <limits.h>           /* PATH_MAX */
#include <stdio.h>            /* printf */
#include <stdlib.h>           /* setenv, mkdtemp */
#include <string.h>           /* strstr */
#include <unistd.h>           /* fork, execl, symlink */

#include "check.h"
#include "nvlp_trace.h"
#include "shim_child.h"

#ifndef NVLP_CUDA_HOME
#define NVLP_CUDA_HOME "/usr/local/cuda"
#endif

static int child(void)
{
	void *p = NULL;
	cudaError_t rc = cudaMallocManaged(&p, 4096, cudaMemAttachGlobal);
	if (rc == cudaSuccess)
		cudaFree(p);
	return rc == cudaSuccess ? 0 : 3;
}

static void scenario(const char *self, const char *lib, const char *name, const char *const *env,
                     struct trace_summary *s)
{
	char dir[] = "/tmp/nvlp-cupti-nodrv.XXXXXX", cmd[64];
	if (!mkdtemp(dir))
		return;
	int rc = shim_run_child(self, lib, dir, "1000", env, NULL);
	trace_summarize(dir, s);
	CHECK(rc == 0 && s->complete == 1, "[%s] program ran, trace complete (rc %d)", name, rc);
	CHECK(s->kinds[NVLP_K_MANAGED] >= 1, "[%s] API records captured (MANAGED %llu)", name,
	      s->kinds[NVLP_K_MANAGED]);
	CHECK(s->kinds[NVLP_K_KERNEL] + s->kinds[NVLP_K_GPUCOPY] + s->kinds[NVLP_K_UM] == 0,
	      "[%s] no GPU activity records", name);
	printf("%s", s->text);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("    could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child"))
		return child();
	/* the children find libcuda where each scenario says, CUPTI on, no profiler markers from
	 * the outside */
	unsetenv("NVLPROF_CUPTI");
	unsetenv("LD_LIBRARY_PATH");
	for (char **e = environ; *e;)
		if (!strncmp(*e, "NSYS_", 5)) {
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)(strchr(*e, '=') - *e), *e);
			unsetenv(name);
		} else {
			e++;
		}
	char self[PATH_MAX], lib[PATH_MAX + 32], stubdir[] = "/tmp/nvlp-cupti-stub.XXXXXX";
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0 || !mkdtemp(stubdir))
		return 1;
	/* the toolkit's stub libcuda under the driver's soname: cuInit fails with 34 */
	char stub[PATH_MAX], link[PATH_MAX + 32], ldpath[PATH_MAX + 32];
	snprintf(stub, sizeof stub, "%s/lib64/stubs/libcuda.so",
	         getenv("CUDA_HOME") ? getenv("CUDA_HOME") : NVLP_CUDA_HOME);
	snprintf(link, sizeof link, "%s/libcuda.so.1", stubdir);
	int have_stub = access(stub, R_OK) == 0 && symlink(stub, link) == 0;
	snprintf(ldpath, sizeof ldpath, "LD_LIBRARY_PATH=%s", stubdir);
	struct trace_summary s;

	scenario(self, lib, "no libcuda", NULL, &s);
	CHECK(s.notes[NVLP_NOTE_NO_DRIVER] == 1 && strstr(s.text, "libcuda.so.1") &&
	          strstr(s.text, "CUPTI 13"),
	      "[no libcuda] NOTE no_driver names libcuda and the loaded CUPTI");

	CHECK(have_stub, "stub libcuda found at %s", stub);
	if (have_stub) {
		const char *env[] = {ldpath, NULL};
		scenario(self, lib, "stub libcuda", env, &s);
		CHECK(s.notes[NVLP_NOTE_NO_DRIVER] == 1 &&
		          s.note_value[NVLP_NOTE_NO_DRIVER] == 34 && strstr(s.text, "stub"),
		      "[stub libcuda] NOTE no_driver with CUresult 34");

		const char *env2[] = {ldpath, "CUDA_INJECTION64_PATH=/nonexistent/libuser.so",
		                      NULL};
		scenario(self, lib, "late start", env2, &s);
		CHECK(s.notes[NVLP_NOTE_NO_DRIVER] == 1 &&
		          s.note_value[NVLP_NOTE_NO_DRIVER] == 34 && strstr(s.text, "cuInit"),
		      "[late start] user's injection path: started from the first call, cuInit "
		      "refused by the stub");
	}

	const char *env3[] = {"NVLPROF_CUPTI=0", NULL};
	scenario(self, lib, "NVLPROF_CUPTI=0", env3, &s);
	CHECK(s.notes[NVLP_NOTE_CONFIG] >= 1 && strstr(s.text, "NVLPROF_CUPTI=0") &&
	          s.notes[NVLP_NOTE_NO_DRIVER] == 0,
	      "[NVLPROF_CUPTI=0] one NOTE, nothing attempted");

	const char *env4[] = {"NSYS_PROFILING_SESSION_ID=7", NULL};
	scenario(self, lib, "nsys", env4, &s);
	CHECK(s.notes[NVLP_NOTE_FOREIGN_TOOL] == 1 && strstr(s.text, "Nsight Systems"),
	      "[nsys] NOTE foreign_tool");

	unlink(link);
	rmdir(stubdir);
	return CHECK_DONE();
}

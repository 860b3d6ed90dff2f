/* hk_dlopen.c: loads a workload with dlopen(RTLD_LOCAL), as Python loads torch, and runs NCCL through it. */
#include <dlfcn.h> /* dlopen */
#include <stdio.h> /* printf */

#include "check.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: hk_dlopen LIBWORKLOAD.so N\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL, "dlopen_workload %s", h ? "" : dlerror());
	if (!h)
		return 1;
	/* What a shim using only RTLD_NEXT would get: NCCL is not in the global scope. */
	CHECK(dlsym(RTLD_NEXT, "pncclAllReduce") == NULL, "rtld_next_misses_nccl");
	CHECK(dlsym(RTLD_DEFAULT, "pncclAllReduce") == NULL, "global_scope_lacks_nccl");
	int (*run)(int) = (int (*)(int))dlsym(h, "workload_run");
	CHECK(run != NULL, "workload_entry");
	if (!run)
		return 1;
	int n = 0;
	sscanf(argv[2], "%d", &n);
	CHECK(run(n) == 0, "workload_calls_succeed");
	return CHECK_DONE();
}

/* chain_app.c: a job for the profiler-plugin chaining tests: two communicators (one named), lone collectives and a group of them, over the fake NCCL. */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* atoi */

#include <nccl.h>

/* @return the number of calls that failed */
static int steps(ncclComm_t a, ncclComm_t b, int n)
{
	int bad = 0;
	for (int i = 0; i < n; i++) {
		bad += ncclAllReduce(NULL, NULL, 1024, ncclFloat32, ncclSum, a, NULL) != ncclSuccess;
		bad += ncclGroupStart() != ncclSuccess;
		bad += ncclAllGather(NULL, NULL, 1 << 20, ncclFloat32, b, NULL) != ncclSuccess;
		bad += ncclReduceScatter(NULL, NULL, 4096, ncclFloat32, ncclSum, b, NULL) != ncclSuccess;
		bad += ncclGroupEnd() != ncclSuccess;
		bad += ncclBroadcast(NULL, NULL, 64, ncclFloat32, 0, b, NULL) != ncclSuccess;
	}
	return bad;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	ncclUniqueId id;
	ncclComm_t a, b;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.commName = "pg1:tp";
	int bad = ncclGetUniqueId(&id) != ncclSuccess;
	bad += ncclCommInitRank(&a, 1, id, 0) != ncclSuccess;
	bad += ncclCommInitRankConfig(&b, 1, id, 0, &cfg) != ncclSuccess;
	bad += steps(a, b, n);
	bad += ncclCommDestroy(b) != ncclSuccess;
	bad += ncclCommDestroy(a) != ncclSuccess;
	printf("chain_app: %d steps, %d failed\n", n, bad);
	return bad != 0;
}

/* commname.c: two ranks on one GPU (each its own NCCL_HOSTID) init a communicator with
 * ncclCommInitRankConfig and config.commName, run one AllReduce and check it: does the name reach
 * nvlprof's trace (COMMNAME) on real NCCL? Build on the GPU machine:
 *   nvcc -o commname tests/gpu/commname.c -I$NCCL/include -L$NCCL/lib -l:libnccl.so.2
 * Run: commname [NAME]; exit 0 when both ranks' sums are right. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int rank_main(int rank, int rfd, int wfd, const char *name)
{
	char host[32];
	snprintf(host, sizeof host, "commname-rank%d", rank);
	setenv("NCCL_HOSTID", host, 1);
	ncclUniqueId id;
	if (rank == 0) {
		if (ncclGetUniqueId(&id) != ncclSuccess || write(wfd, &id, sizeof id) != sizeof id)
			return 2;
	} else if (read(rfd, &id, sizeof id) != sizeof id) {
		return 2;
	}
	if (cudaSetDevice(0) != cudaSuccess)
		return 3;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.commName = name;
	ncclComm_t comm;
	if (ncclCommInitRankConfig(&comm, 2, id, rank, &cfg) != ncclSuccess)
		return 4;
	size_t n = 1 << 20;
	float *d, h = 0;
	cudaMalloc((void **)&d, n * sizeof *d);
	float one = 1.0f;
	for (size_t i = 0; i < n; i += 1 << 18)
		cudaMemcpy(d + i, &one, sizeof one, cudaMemcpyHostToDevice);
	cudaStream_t st;
	cudaStreamCreate(&st);
	int rc = ncclAllReduce(d, d, n, ncclFloat, ncclSum, comm, st) != ncclSuccess;
	cudaStreamSynchronize(st);
	cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
	ncclCommDestroy(comm);
	printf("rank %d: sum %.1f (want 2.0) comm %s\n", rank, h, name);
	return rc || h != 2.0f ? 5 : 0;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "nvlp_named_dp";
	int p[2];
	if (pipe(p) != 0)
		return 1;
	pid_t kid[2];
	for (int r = 0; r < 2; r++) {
		kid[r] = fork();
		if (kid[r] == 0)
			_exit(rank_main(r, p[0], p[1], name));
	}
	int bad = 0;
	for (int r = 0; r < 2; r++) {
		int st = 0;
		waitpid(kid[r], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	return bad;
}

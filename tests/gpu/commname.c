/* commname.c: two ranks on one GPU (each its own NCCL_HOSTID) init a communicator with
 * ncclCommInitRankConfig and config.commName, run one AllReduce and check it: does the name reach
 * nvlprof's trace (COMMNAME) on real NCCL? Build on the GPU machine:
 *   nvcc -o commname tests/gpu/commname.c -I$NCCL/include -L$NCCL/lib -l:libnccl.so.2
 * Run: commname [NAME [KILL_AT]]; exit 0 when both ranks' sums are right. KILL_AT = K: rank 1
 * dies (_exit, as an OOM-killed rank) after K AllReduces; rank 0 goes on, polls
 * ncclCommGetAsyncError while its collective waits, and calls the next one, which NCCL fails with
 * the error it saw (the dead peer's closed socket): a failed call for nvlprof to keep in place.
 * Exit 0 when rank 0 saw that error. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Wait for st, or for the communicator's asynchronous error (60 s at most). */
static ncclResult_t wait_or_error(ncclComm_t comm, cudaStream_t st)
{
	for (int i = 0; i < 60000; i++) {
		if (cudaStreamQuery(st) == cudaSuccess)
			return ncclSuccess;
		ncclResult_t ae = ncclSuccess;
		if (ncclCommGetAsyncError(comm, &ae) != ncclSuccess || ae != ncclSuccess)
			return ae != ncclSuccess ? ae : ncclInternalError;
		usleep(1000);
	}
	return ncclInternalError;
}

static int killed_main(int rank, ncclComm_t comm, float *d, size_t n, cudaStream_t st, int k)
{
	for (int i = 0; i < k + 3; i++) {
		if (rank == 1 && i == k) {
			printf("rank 1: dying before AllReduce %d\n", i + 1);
			fflush(stdout);
			_exit(9);
		}
		ncclResult_t rc = ncclAllReduce(d, d, n, ncclFloat, ncclSum, comm, st);
		if (rc == ncclSuccess)
			rc = wait_or_error(comm, st);
		if (rc != ncclSuccess) {
			printf("rank %d: AllReduce %d: %s\n", rank, i + 1, ncclGetErrorString(rc));
			ncclResult_t again = ncclAllReduce(d, d, n, ncclFloat, ncclSum, comm, st);
			printf("rank %d: AllReduce %d after it: %s\n", rank, i + 2,
			       ncclGetErrorString(again));
			ncclCommAbort(comm);
			return again != ncclSuccess ? 0 : 6;
		}
	}
	ncclCommDestroy(comm);
	return 7; /* the peer's death went unnoticed */
}

static int rank_main(int rank, int rfd, int wfd, const char *name, int kill_at)
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
	if (kill_at > 0)
		return killed_main(rank, comm, d, n, st, kill_at);
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
	int kill_at = argc > 2 ? atoi(argv[2]) : 0;
	int p[2];
	if (pipe(p) != 0)
		return 1;
	pid_t kid[2];
	for (int r = 0; r < 2; r++) {
		kid[r] = fork();
		if (kid[r] == 0)
			{
				int rc = rank_main(r, p[0], p[1], name, kill_at);
				fflush(stdout); /* _exit drops stdio buffers */
				_exit(rc);
			}
	}
	int bad = 0;
	for (int r = 0; r < 2; r++) {
		int st = 0;
		waitpid(kid[r], &st, 0);
		/* with KILL_AT rank 1 dies by design: only rank 0's verdict counts */
		if (!kill_at || r == 0)
			bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	return bad;
}

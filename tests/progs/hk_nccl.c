/* hk_nccl.c: drives the fake NCCL (and cudart) in the ways the hooks' shell tests need, one mode per run. */
#include <errno.h>   /* errno */
#include <pthread.h> /* threads mode */
#include <stdio.h>   /* printf */
#include <stdlib.h>  /* atoi */
#include <string.h>  /* strcmp */
#include <unistd.h>  /* usleep */

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "../fakes/fake.h" /* fake_nccl_set_rc */


/* rank R N IDFILE: one rank of an N-rank communicator; rank 0 publishes the unique id in IDFILE. */
static int mode_rank(int rank, int n, const char *idfile)
{
	ncclUniqueId id;
	if (rank == 0) {
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", idfile);
		FILE *f = fopen(tmp, "wb");
		if (ncclGetUniqueId(&id) != ncclSuccess || !f || fwrite(&id, sizeof id, 1, f) != 1)
			return 1;
		fclose(f);
		rename(tmp, idfile);
	} else {
		FILE *f = NULL;
		for (int i = 0; i < 2000 && !(f = fopen(idfile, "rb")); i++)
			usleep(5000);
		if (!f || fread(&id, sizeof id, 1, f) != 1)
			return 1;
		fclose(f);
	}
	cudaSetDevice(rank);
	ncclComm_t comm, even_odd, all;
	int bad = ncclCommInitRank(&comm, n, id, rank) != ncclSuccess;
	for (int i = 0; i < 5; i++)
		bad += ncclAllReduce(NULL, NULL, 1000 + i, ncclFloat32, ncclSum, comm, NULL) != 0;
	bad += ncclAllGather(NULL, NULL, 100, ncclBfloat16, comm, NULL) != 0;
	bad += ncclReduceScatter(NULL, NULL, 100, ncclFloat16, ncclSum, comm, NULL) != 0;
	bad += ncclBroadcast(NULL, NULL, 64, ncclInt8, 0, comm, NULL) != 0;
	/* A ring exchange inside a group, twice: the nth send to B must match B's nth receive. */
	for (int k = 0; k < 2; k++) {
		bad += ncclGroupStart() != 0;
		bad += ncclSend(NULL, 10 + k, ncclFloat32, (rank + 1) % n, comm, NULL) != 0;
		bad += ncclRecv(NULL, 10 + k, ncclFloat32, (rank + n - 1) % n, comm, NULL) != 0;
		bad += ncclGroupEnd() != 0;
	}
	bad += ncclCommSplit(comm, rank % 2, rank, &even_odd, NULL) != 0;
	bad += ncclCommSplit(comm, 7, rank, &all, NULL) != 0;
	for (int i = 0; i < 3; i++)
		bad += ncclAllReduce(NULL, NULL, 2000 + i, ncclFloat32, ncclSum, all, NULL) != 0;
	bad += ncclAllReduce(NULL, NULL, 3000, ncclFloat32, ncclSum, even_odd, NULL) != 0;
	bad += ncclCommDestroy(even_odd) != 0;
	bad += ncclCommDestroy(all) != 0;
	bad += ncclCommDestroy(comm) != 0;
	return bad != 0;
}

/* Prints every return code, errno and out-parameter of a fixed call sequence, so that runs with
 * and without the shim (and with forced errors) can be compared byte for byte. */
#define SHOW(what, call)                                                                           \
	do {                                                                                       \
		errno = 0;                                                                         \
		int rc_ = (int)(call);                                                             \
		printf("%s rc=%d errno=%d", what, rc_, errno);                                     \
	} while (0)
static int mode_outparams(void)
{
	ncclUniqueId id;
	memset(&id, 0, sizeof id);
	SHOW("getuniqueid", ncclGetUniqueId(&id));
	int nonzero = 0;
	for (size_t i = 0; i < sizeof id.internal; i++)
		nonzero |= id.internal[i];
	printf(" id_set=%d\n", nonzero != 0);
	ncclComm_t comm = NULL, split = NULL, shrunk = NULL, all[2] = {NULL, NULL};
	SHOW("initrank", ncclCommInitRank(&comm, 2, id, 1));
	printf(" comm_set=%d\n", comm != NULL);
	int v = -5;
	SHOW("count", ncclCommCount(comm, &v));
	printf(" v=%d\n", v);
	v = -5;
	SHOW("userrank", ncclCommUserRank(comm, &v));
	printf(" v=%d\n", v);
	SHOW("allreduce", ncclAllReduce(NULL, NULL, 8, ncclFloat32, ncclSum, comm, NULL));
	printf("\n");
	SHOW("allreduce_badcomm", ncclAllReduce(NULL, NULL, 8, ncclFloat32, ncclSum, NULL, NULL));
	printf("\n");
	SHOW("send_badpeer", ncclSend(NULL, 8, ncclFloat32, 9, comm, NULL));
	printf("\n");
	SHOW("groupend_unbalanced", ncclGroupEnd());
	printf("\n");
	ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
	SHOW("groupstart", ncclGroupStart());
	SHOW(" simulate", ncclGroupSimulateEnd(&sim));
	printf(" est=%.2f\n", sim.estimatedTime);
	SHOW("split", ncclCommSplit(comm, 3, 0, &split, NULL));
	printf(" split_set=%d\n", split != NULL);
	int excl = 0;
	SHOW("shrink", ncclCommShrink(comm, &excl, 1, &shrunk, NULL, 0));
	printf(" shrunk_set=%d\n", shrunk != NULL);
	v = -5;
	SHOW("shrunk_rank", ncclCommUserRank(shrunk, &v));
	printf(" v=%d\n", v);
	static char buf[4096];
	void *handle = NULL;
	SHOW("register", ncclCommRegister(comm, buf, sizeof buf, &handle));
	printf(" handle_off=%td\n", handle ? (char *)handle - buf : -1);
	SHOW("deregister", ncclCommDeregister(comm, handle));
	ncclWindow_t win = NULL;
	SHOW(" winreg", ncclCommWindowRegister(comm, buf, sizeof buf, &win, 0));
	printf(" win_off=%td\n", win ? (char *)win - buf : -1);
	SHOW("windereg", ncclCommWindowDeregister(comm, win));
	void *mem = NULL;
	SHOW(" memalloc", ncclMemAlloc(&mem, 64));
	printf(" mem_set=%d\n", mem != NULL);
	SHOW("memfree", ncclMemFree(mem));
	int devs[2] = {1, 0};
	SHOW(" initall", ncclCommInitAll(all, 2, devs));
	v = -5;
	SHOW(" all1_dev", ncclCommCuDevice(all[1], &v));
	printf(" v=%d\n", v);
	SHOW("finalize", ncclCommFinalize(comm));
	SHOW(" revoke", ncclCommRevoke(comm, 0));
	SHOW(" destroy_split", ncclCommDestroy(split));
	SHOW(" abort_shrunk", ncclCommAbort(shrunk));
	SHOW(" destroy_all", ncclCommDestroy(all[0]) + 10 * ncclCommDestroy(all[1]));
	SHOW(" destroy", ncclCommDestroy(comm));
	printf("\n");
	return 0;
}

/* A non-blocking communicator: init answers ncclInProgress; rank and size come later. */
static int mode_nonblocking(void)
{
	ncclUniqueId id;
	ncclComm_t comm;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclGetUniqueId(&id);
	cudaSetDevice(2);
	int bad = ncclCommInitRankConfig(&comm, 4, id, 3, &cfg) != ncclInProgress;
	ncclResult_t st = ncclInProgress;
	for (int i = 0; i < 10 && st == ncclInProgress; i++)
		bad += ncclCommGetAsyncError(comm, &st) != ncclSuccess;
	ncclComm_t child;
	bad += ncclCommSplit(comm, 1, 0, &child, &cfg) != ncclInProgress;
	/* First collective while the child is still "in progress": its rank is not known yet. */
	bad += ncclAllReduce(NULL, NULL, 10, ncclFloat32, ncclSum, child, NULL) != ncclSuccess;
	st = ncclInProgress;
	for (int i = 0; i < 10 && st == ncclInProgress; i++)
		bad += ncclCommGetAsyncError(child, &st) != ncclSuccess;
	bad += ncclAllReduce(NULL, NULL, 20, ncclFloat32, ncclSum, child, NULL) != ncclSuccess;
	bad += ncclAllReduce(NULL, NULL, 30, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess;
	ncclCommDestroy(child);
	ncclCommDestroy(comm);
	return bad != 0;
}

/* threads T N: T threads, each with its own communicator, N all-reduces and N cross-device copies. */
static int iters;
static void *hammer(void *arg)
{
	long t = (long)arg, bad = 0;
	ncclUniqueId id;
	ncclComm_t comm;
	ncclGetUniqueId(&id);
	cudaSetDevice((int)(t % 4));
	bad += ncclCommInitRank(&comm, 1, id, 0) != 0;
	void *a, *b;
	bad += cudaMalloc(&a, 1024) != 0;
	cudaSetDevice((int)((t + 1) % 4));
	bad += cudaMalloc(&b, 1024) != 0;
	for (int i = 0; i < iters; i++) {
		bad += ncclAllReduce(NULL, NULL, 4, ncclFloat32, ncclSum, comm, NULL) != 0;
		bad += cudaMemcpyAsync(b, a, 512, cudaMemcpyDeviceToDevice, NULL) != 0;
	}
	bad += ncclCommDestroy(comm) != 0;
	return (void *)bad;
}
static int mode_threads(int nthreads, int n)
{
	pthread_t th[64];
	long bad = 0;
	iters = n;
	for (long t = 0; t < nthreads && t < 64; t++)
		pthread_create(&th[t], NULL, hammer, (void *)t);
	for (int t = 0; t < nthreads && t < 64; t++) {
		void *r;
		pthread_join(th[t], &r);
		bad += (long)r;
	}
	printf("thread_failures=%ld\n", bad);
	return bad != 0;
}

/* failseq: collectives that fail keep their place in the sequence; names from the config. */
static int mode_failseq(void)
{
	ncclUniqueId id;
	ncclComm_t comm = NULL, child = NULL;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.commName = "pg0:default_pg";
	if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRankConfig(&comm, 2, id, 0, &cfg))
		return 1;
	ncclAllReduce(NULL, NULL, 1, ncclFloat32, ncclSum, comm, NULL); /* seq 1 */
	ncclAllReduce(NULL, NULL, 2, ncclFloat32, ncclSum, comm, NULL); /* seq 2 */
	fake_nccl_set_rc(ncclRemoteError); /* a peer died: attempted, fails, uses seq 3 */
	ncclAllReduce(NULL, NULL, 3, ncclFloat32, ncclSum, comm, NULL);
	fake_nccl_set_rc(ncclInvalidArgument); /* rejected: would be seq 4, does not use it */
	ncclAllReduce(NULL, NULL, 4, ncclFloat32, ncclSum, comm, NULL);
	fake_nccl_set_rc(-1);
	ncclAllReduce(NULL, NULL, 5, ncclFloat32, ncclSum, comm, NULL); /* seq 4 */
	fake_nccl_set_rc(ncclSystemError);
	ncclSend(NULL, 6, ncclFloat32, 1, comm, NULL); /* p2p seq 1, failed */
	fake_nccl_set_rc(-1);
	ncclSend(NULL, 7, ncclFloat32, 1, comm, NULL); /* p2p seq 2 */
	ncclConfig_t ccfg = NCCL_CONFIG_INITIALIZER;
	ccfg.commName = "pg1:tp_group\tx"; /* a control character is written as '?' */
	ncclCommSplit(comm, 0, 0, &child, &ccfg);
	ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
	old.version = 21800; /* a config from before commName existed: not read */
	old.commName = "never";
	ncclComm_t c3 = NULL;
	ncclCommInitRankConfig(&c3, 1, id, 0, &old);
	ncclCommDestroy(c3);
	ncclCommDestroy(child);
	ncclCommDestroy(comm);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "failseq"))
		return mode_failseq();
	if (argc >= 5 && !strcmp(argv[1], "rank"))
		return mode_rank(atoi(argv[2]), atoi(argv[3]), argv[4]);
	if (argc >= 2 && !strcmp(argv[1], "outparams"))
		return mode_outparams();
	if (argc >= 2 && !strcmp(argv[1], "nonblocking"))
		return mode_nonblocking();
	if (argc >= 4 && !strcmp(argv[1], "threads"))
		return mode_threads(atoi(argv[2]), atoi(argv[3]));
	fprintf(stderr, "usage: hk_nccl rank R N IDFILE | outparams | nonblocking | threads T N\n");
	return 2;
}

/* fake_nccl.c: a CPU-only libnccl.so.2 (strong pnccl*, weak nccl* aliases like the real one), for shim tests. */
#include <dlfcn.h>   /* dlopen: the profiler plugin */
#include <time.h>    /* clock_gettime */
#include <errno.h>   /* errno */
#include <fcntl.h>   /* open */
#include <pthread.h> /* pthread_mutex_t */
#include <stdatomic.h> /* atomic_long */
#include <stdint.h>  /* uint32_t */
#include <stdio.h>   /* fprintf */
#include <stdlib.h>  /* calloc, getenv */
#include <string.h>  /* memset */
#include <sys/mman.h> /* mmap: FAKE_NCCL_ASYNC's shared counters */
#include <unistd.h>  /* read, usleep */

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "fake.h"
#include "fake_nccl_int.h"

/* ncclX is a weak alias of the strong pncclX, as in the real library: a shim must find pncclX. */
#define ALIAS(name) extern __typeof(p##name) name __attribute__((weak, alias("p" #name)));

#define COMM_MAGIC 0x6e63636cu
#define RET(rc)                                                                                    \
	do {                                                                                       \
		errno = FAKE_ERRNO_SENTINEL;                                                       \
		return (rc);                                                                       \
	} while (0)


/* ---- FAKE_NCCL_ASYNC=DIR: collectives complete only when every rank entered them, as NCCL's
 * do. A call returns at once; the next collective call on the communicator (or its destroy)
 * waits until the previous one completed, which is where a rank of a real job waits (the next
 * call, a sync). The ranks (processes) share DIR/fake_nccl.<id>: one counter per rank of what it
 * entered. Communicators made without an id (ncclCommInitAll, splits) are not coordinated. */
static const char *async_dir(void)
{
	static const char *d;
	static int read;
	if (!read++)
		d = getenv("FAKE_NCCL_ASYNC");
	return d && *d ? d : NULL;
}

/* The coordinated communicators of the process, for fake_nccl_sync */
#define ASYNC_MAX 16
static struct ncclComm *async_comms[ASYNC_MAX];

static void async_open(struct ncclComm *c, const ncclUniqueId *id)
{
	const char *dir = async_dir();
	if (!dir || !id || c->nranks < 2)
		return;
	memcpy(&c->id, id->internal, sizeof c->id);
	char path[4096];
	snprintf(path, sizeof path, "%s/fake_nccl.%016llx", dir, (unsigned long long)c->id);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	size_t len = (size_t)c->nranks * sizeof *c->entered;
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) { /* every rank sizes it alike: no race */
		if (fd >= 0)
			close(fd);
		return;
	}
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	c->entered = m == MAP_FAILED ? NULL : m;
	for (int i = 0; c->entered && i < ASYNC_MAX; i++) {
		struct ncclComm *none = NULL;
		if (__atomic_compare_exchange_n(&async_comms[i], &none, c, 0, __ATOMIC_ACQ_REL,
		                                __ATOMIC_ACQUIRE))
			break;
	}
}

/* Wait until every rank entered n collectives of c (collective n - 1 completed). */
static void async_wait(const struct ncclComm *c, uint64_t n)
{
	for (int r = 0; c->entered && r < c->nranks; r++)
		while (__atomic_load_n(&c->entered[r], __ATOMIC_ACQUIRE) < n)
			usleep(1000);
}

/* A stream sync (loss.item() in a training step): every collective entered so far completes */
void fake_nccl_sync(void)
{
	for (int i = 0; i < ASYNC_MAX; i++) {
		struct ncclComm *c = __atomic_load_n(&async_comms[i], __ATOMIC_ACQUIRE);
		if (c)
			async_wait(c, c->mine);
	}
}

/* A collective call: the previous one must complete first; this one is then in flight. */
static void async_enter(struct ncclComm *c)
{
	if (!c->entered)
		return;
	async_wait(c, c->mine);
	__atomic_store_n(&c->entered[c->rank], ++c->mine, __ATOMIC_RELEASE);
}

static __thread int group_depth;

static void prof_coll_seq(struct ncclComm *c, const char *func, size_t n, ncclDataType_t t,
			  uint64_t seq);

/* A collective captured into a CUDA graph runs (and reports its events) at each replay: as NCCL
 * does, a host function captured with it reports them (fake cudart runs it per launch). */
struct replay {
	struct ncclComm *c;
	const char *func;
	size_t n;
	ncclDataType_t t;
	uint64_t seq;
};
static void replay_coll(void *arg)
{
	struct replay *r = arg;
	prof_coll_seq(r->c, r->func, r->n, r->t, r->seq);
}

/* @return 1 when st is capturing (the collective was then captured, not run) */
static int captured(struct ncclComm *c, const char *func, size_t n, ncclDataType_t t,
		    cudaStream_t st, uint64_t seq)
{
	enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	if (!st || cudaStreamIsCapturing(st, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusActive)
		return 0;
	struct replay *r = malloc(sizeof *r); /* lives as long as the graph: never freed here */
	if (r) {
		*r = (struct replay){c, func, n, t, seq};
		cudaLaunchHostFunc(st, replay_coll, r);
	}
	return 1;
}

static void prof_coll(struct ncclComm *c, const char *func, size_t n, ncclDataType_t t,
		      cudaStream_t st)
{
	/* NCCL counts per communicator and function (comm->seqNumber[func], from 0: a DDP job's
	 * first AllReduce is #0 after its Broadcasts); a per-thread count is the same for one thread
	 * on one communicator, and keeps threads sharing a communicator off one contended cache
	 * line */
	static const char *const funcs[] = {"AllReduce", "Broadcast", "Reduce", "AllGather",
	                                    "ReduceScatter", "AllToAll", "Gather", "Scatter"};
	static __thread uint64_t tseq[sizeof funcs / sizeof funcs[0] + 1];
	size_t fi = 0;
	while (fi < sizeof funcs / sizeof funcs[0] && strcmp(funcs[fi], func))
		fi++;
	uint64_t seq = tseq[fi]++;
	if (!captured(c, func, n, t, st, seq))
		prof_coll_seq(c, func, n, t, seq);
}

static void prof_coll_seq(struct ncclComm *c, const char *func, size_t n, ncclDataType_t t,
			  uint64_t seq)
{
	fake_prof_coll(c, func, n, t, seq, group_depth);
}

/* ---- blocking calls (FAKE_NCCL_BLOCK_MS=N): the FAKE_NCCL_BLOCK_AT-th (default 1st) call of
 * FAKE_NCCL_BLOCK_FN (AllReduce, the default; GroupEnd; CommInitRank) in the process sleeps N ms
 * before it returns, as a collective whose peer died, or an init waiting for ranks, does. ---- */
static void fake_block(const char *fn)
{
	static atomic_long seen;
	const char *ms = getenv("FAKE_NCCL_BLOCK_MS"), *want = getenv("FAKE_NCCL_BLOCK_FN");
	if (!ms || strcmp(fn, want && *want ? want : "AllReduce"))
		return;
	const char *at = getenv("FAKE_NCCL_BLOCK_AT");
	if (atomic_fetch_add(&seen, 1) + 1 != (at ? atol(at) : 1))
		return;
	long n = atol(ms);
	struct timespec ts = {n / 1000, (n % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int forced_rc = -1;
/* FAKE_NCCL_ALLREDUCE_MS: each AllReduce blocks that long, in one sleep that is not resumed: a
 * signal delivered to the thread meanwhile is reported (the sampler must never cause one). */
static long allreduce_ms;

__attribute__((constructor)) static void fake_init(void)
{
	const char *s = getenv("FAKE_NCCL_RC");
	if (s && *s)
		forced_rc = atoi(s);
	const char *ms = getenv("FAKE_NCCL_ALLREDUCE_MS");
	if (ms && *ms)
		allreduce_ms = atol(ms);
}

static void allreduce_block(void)
{
	struct timespec d = {allreduce_ms / 1000, allreduce_ms % 1000 * 1000000L};
	if (allreduce_ms > 0 && nanosleep(&d, NULL) != 0)
		fprintf(stderr, "fake_nccl: AllReduce's sleep interrupted: %s\n", strerror(errno));
}

void fake_nccl_set_rc(int rc) { forced_rc = rc; }

static int valid(const struct ncclComm *c) { return c && c->magic == COMM_MAGIC; }

static ncclResult_t new_comm_id(ncclComm_t *out, int nranks, int rank, int dev, ncclConfig_t *cfg,
                               const ncclUniqueId *id);
static ncclResult_t new_comm(ncclComm_t *out, int nranks, int rank, int dev, ncclConfig_t *cfg)
{
	return new_comm_id(out, nranks, rank, dev, cfg, NULL);
}
static ncclResult_t new_comm_id(ncclComm_t *out, int nranks, int rank, int dev, ncclConfig_t *cfg,
                               const ncclUniqueId *id)
{
	if (!out || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	struct ncclComm *c = calloc(1, sizeof *c);
	if (!c)
		return ncclSystemError;
	c->magic = COMM_MAGIC;
	c->nranks = nranks;
	c->rank = rank;
	c->device = dev;
	c->pending = (cfg && cfg->blocking == 0) ? 2 : 0;
	fake_prof_comm_init(c, cfg && cfg->magic == 0xcafebeef ? cfg->commName : NULL);
	async_open(c, id);
	*out = c;
	return c->pending ? ncclInProgress : ncclSuccess;
}

static int cur_device(void)
{
	int d = 0;
	cudaGetDevice(&d);
	return d;
}

/* Collectives, point-to-point and group calls share one check. */
static ncclResult_t op_rc(ncclComm_t comm)
{
	if (forced_rc >= 0)
		return (ncclResult_t)forced_rc;
	return valid(comm) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t pncclGetVersion(int *version)
{
	*version = NCCL_VERSION_CODE;
	RET(ncclSuccess);
}
ALIAS(ncclGetVersion)

ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, id->internal, sizeof id->internal) : -1;
	if (fd >= 0)
		close(fd);
	RET(n == (ssize_t)sizeof id->internal ? ncclSuccess : ncclSystemError);
}
ALIAS(ncclGetUniqueId)

const char *pncclGetErrorString(ncclResult_t r)
{
	static const char *s[] = {"no error", "unhandled cuda error", "unhandled system error",
				  "internal error", "invalid argument", "invalid usage",
				  "remote process exited or there was a network error",
				  "NCCL operation in progress"};
	return (unsigned)r < sizeof s / sizeof *s ? s[r] : "unknown result code";
}
ALIAS(ncclGetErrorString)

const char *pncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	return "";
}
ALIAS(ncclGetLastError)

ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
				     ncclConfig_t *config)
{
	RET(new_comm_id(comm, nranks, rank, cur_device(), config, &id));
}
ALIAS(ncclCommInitRankConfig)

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	fake_block("CommInitRank");
	RET(new_comm_id(comm, nranks, rank, cur_device(), NULL, &id));
}
ALIAS(ncclCommInitRank)

ncclResult_t pncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nId,
				       ncclUniqueId *ids, ncclConfig_t *config)
{
	if (nId < 1 || !ids)
		RET(ncclInvalidArgument);
	RET(new_comm(comm, nranks, rank, cur_device(), config));
}
ALIAS(ncclCommInitRankScalable)

ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	if (!comms || ndev < 1)
		RET(ncclInvalidArgument);
	for (int i = 0; i < ndev; i++) {
		ncclResult_t r = new_comm(&comms[i], ndev, i, devlist ? devlist[i] : i, NULL);
		if (r != ncclSuccess)
			RET(r);
	}
	RET(ncclSuccess);
}
ALIAS(ncclCommInitAll)

/* Every rank of the parent keeps its place: the fake has no way to learn the other ranks' colors. */
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
			    ncclConfig_t *config)
{
	(void)key;
	if (!valid(comm) || !newcomm)
		RET(ncclInvalidArgument);
	if (color == NCCL_SPLIT_NOCOLOR) {
		*newcomm = NULL;
		RET(ncclSuccess);
	}
	RET(new_comm(newcomm, comm->nranks, comm->rank, comm->device, config));
}
ALIAS(ncclCommSplit)

ncclResult_t pncclCommShrink(ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm,
			     ncclConfig_t *config, int flags)
{
	(void)flags;
	if (!valid(comm) || !newcomm || nexclude < 0 || nexclude >= comm->nranks)
		RET(ncclInvalidArgument);
	int below = 0;
	for (int i = 0; i < nexclude; i++) {
		if (exclude[i] == comm->rank) {
			*newcomm = NULL;
			RET(ncclSuccess);
		}
		below += exclude[i] < comm->rank;
	}
	RET(new_comm(newcomm, comm->nranks - nexclude, comm->rank - below, comm->device, config));
}
ALIAS(ncclCommShrink)

ncclResult_t pncclCommFinalize(ncclComm_t comm) { RET(valid(comm) ? ncclSuccess : ncclInvalidArgument); }
ALIAS(ncclCommFinalize)

ncclResult_t pncclCommRevoke(ncclComm_t comm, int flags)
{
	RET(valid(comm) && flags == 0 ? ncclSuccess : ncclInvalidArgument);
}
ALIAS(ncclCommRevoke)

/* Freed for real, so malloc may hand the same address to the next communicator. */
static ncclResult_t free_comm(ncclComm_t comm, int wait)
{
	if (!valid(comm))
		return ncclInvalidArgument;
	if (wait) /* destroy: its collectives complete before it goes; abort: not */
		async_wait(comm, comm->mine);
	for (int i = 0; comm->entered && i < ASYNC_MAX; i++) {
		struct ncclComm *me = comm;
		__atomic_compare_exchange_n(&async_comms[i], &me, NULL, 0, __ATOMIC_ACQ_REL,
		                            __ATOMIC_ACQUIRE);
	}
	if (comm->entered)
		munmap(comm->entered, (size_t)comm->nranks * sizeof *comm->entered);
	comm->magic = 0;
	fake_prof_comm_fini(comm);
	free(comm);
	return ncclSuccess;
}
ncclResult_t pncclCommDestroy(ncclComm_t comm) { RET(free_comm(comm, 1)); }
ALIAS(ncclCommDestroy)
ncclResult_t pncclCommAbort(ncclComm_t comm) { RET(free_comm(comm, 0)); }
ALIAS(ncclCommAbort)

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
	if (!valid(comm) || !err)
		RET(ncclInvalidArgument);
	if (comm->pending > 0)
		comm->pending--;
	*err = comm->pending ? ncclInProgress : ncclSuccess;
	RET(ncclSuccess);
}
ALIAS(ncclCommGetAsyncError)

/* Queries fail with ncclInProgress until a non-blocking init completes. */
#define QUERY(fn, field)                                                                           \
	ncclResult_t p##fn(const ncclComm_t comm, int *out)                                        \
	{                                                                                          \
		if (!valid(comm) || !out)                                                          \
			RET(ncclInvalidArgument);                                                  \
		if (comm->pending)                                                                 \
			RET(ncclInProgress);                                                       \
		*out = comm->field;                                                                \
		RET(ncclSuccess);                                                                  \
	}                                                                                          \
	ALIAS(fn)
QUERY(ncclCommCount, nranks)
QUERY(ncclCommCuDevice, device)
QUERY(ncclCommUserRank, rank)

ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
	if (!valid(comm) || !handle || !size)
		RET(ncclInvalidArgument);
	*handle = (char *)buff + 1;
	RET(ncclSuccess);
}
ALIAS(ncclCommRegister)

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
	RET(valid(comm) && handle ? ncclSuccess : ncclInvalidArgument);
}
ALIAS(ncclCommDeregister)

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
				     int flags)
{
	(void)flags;
	if (!valid(comm) || !win || !size)
		RET(ncclInvalidArgument);
	*win = (ncclWindow_t)((char *)buff + 2);
	RET(ncclSuccess);
}
ALIAS(ncclCommWindowRegister)

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
	RET(valid(comm) && win ? ncclSuccess : ncclInvalidArgument);
}
ALIAS(ncclCommWindowDeregister)

ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
	if (!ptr || !size)
		RET(ncclInvalidArgument);
	*ptr = malloc(size);
	RET(*ptr ? ncclSuccess : ncclSystemError);
}
ALIAS(ncclMemAlloc)

ncclResult_t pncclMemFree(void *ptr)
{
	free(ptr);
	RET(ncclSuccess);
}
ALIAS(ncclMemFree)

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t dt,
				       ncclScalarResidence_t res, ncclComm_t comm)
{
	(void)scalar, (void)dt, (void)res;
	if (!valid(comm) || !op)
		RET(ncclInvalidArgument);
	*op = (ncclRedOp_t)ncclNumOps;
	RET(ncclSuccess);
}
ALIAS(ncclRedOpCreatePreMulSum)

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	RET(valid(comm) && op >= ncclNumOps ? ncclSuccess : ncclInvalidArgument);
}
ALIAS(ncclRedOpDestroy)

ncclResult_t pncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t o,
			    ncclComm_t comm, cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)t, (void)o, (void)st;
	fake_block("AllReduce");
	allreduce_block();
	if (op_rc(comm) == ncclSuccess) {
		async_enter(comm);
		prof_coll(comm, "AllReduce", n, t, st);
	}
	RET(op_rc(comm));
}
ALIAS(ncclAllReduce)

ncclResult_t pncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
			    ncclComm_t comm, cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)t, (void)root, (void)st;
	if (op_rc(comm) == ncclSuccess) {
		async_enter(comm);
		prof_coll(comm, "Broadcast", n, t, st);
	}
	RET(op_rc(comm));
}
ALIAS(ncclBroadcast)

ncclResult_t pncclBcast(void *b, size_t n, ncclDataType_t t, int root, ncclComm_t comm,
			cudaStream_t st)
{
	(void)b, (void)n, (void)t, (void)root, (void)st;
	RET(op_rc(comm));
}
ALIAS(ncclBcast)

ncclResult_t pncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t o,
			 int root, ncclComm_t comm, cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)t, (void)o, (void)root, (void)st;
	if (op_rc(comm) == ncclSuccess) {
		async_enter(comm);
		prof_coll(comm, "Reduce", n, t, st);
	}
	RET(op_rc(comm));
}
ALIAS(ncclReduce)

ncclResult_t pncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm,
			    cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)t, (void)st;
	if (op_rc(comm) == ncclSuccess) {
		async_enter(comm);
		prof_coll(comm, "AllGather", n, t, st);
	}
	RET(op_rc(comm));
}
ALIAS(ncclAllGather)

ncclResult_t pncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t o,
				ncclComm_t comm, cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)t, (void)o, (void)st;
	if (op_rc(comm) == ncclSuccess) {
		async_enter(comm);
		prof_coll(comm, "ReduceScatter", n, t, st);
	}
	RET(op_rc(comm));
}
ALIAS(ncclReduceScatter)

ncclResult_t pncclAlltoAll(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm,
			   cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)t, (void)st;
	RET(op_rc(comm));
}
ALIAS(ncclAlltoAll)

ncclResult_t pncclGather(const void *s, void *r, size_t n, ncclDataType_t t, int root,
			 ncclComm_t comm, cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)t, (void)root, (void)st;
	RET(op_rc(comm));
}
ALIAS(ncclGather)

ncclResult_t pncclScatter(const void *s, void *r, size_t n, ncclDataType_t t, int root,
			  ncclComm_t comm, cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)t, (void)root, (void)st;
	RET(op_rc(comm));
}
ALIAS(ncclScatter)

ncclResult_t pncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
		       cudaStream_t st)
{
	(void)s, (void)n, (void)t, (void)st;
	if (forced_rc < 0 && valid(comm) && (peer < 0 || peer >= comm->nranks))
		RET(ncclInvalidArgument);
	RET(op_rc(comm));
}
ALIAS(ncclSend)

ncclResult_t pncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
		       cudaStream_t st)
{
	(void)r, (void)n, (void)t, (void)st;
	if (forced_rc < 0 && valid(comm) && (peer < 0 || peer >= comm->nranks))
		RET(ncclInvalidArgument);
	RET(op_rc(comm));
}
ALIAS(ncclRecv)

ncclResult_t pncclGroupStart(void)
{
	if (forced_rc >= 0)
		RET((ncclResult_t)forced_rc);
	group_depth++;
	RET(ncclSuccess);
}
ALIAS(ncclGroupStart)

ncclResult_t pncclGroupEnd(void)
{
	fake_block("GroupEnd");
	if (forced_rc >= 0)
		RET((ncclResult_t)forced_rc);
	if (group_depth == 0)
		RET(ncclInvalidUsage);
	if (--group_depth == 0)
		fake_prof_group_end();
	RET(ncclSuccess);
}
ALIAS(ncclGroupEnd)

ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *info)
{
	if (forced_rc >= 0)
		RET((ncclResult_t)forced_rc);
	if (!info || group_depth == 0)
		RET(ncclInvalidUsage);
	info->estimatedTime = 1.5f;
	group_depth--;
	RET(ncclSuccess);
}
ALIAS(ncclGroupSimulateEnd)

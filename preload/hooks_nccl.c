/* hooks_nccl.c: wrappers of every NCCL function in NVLP_NCCL_FUNCS, one NCCL record per call. */
#include <errno.h>  /* errno, saved around recording */
#include <stddef.h> /* offsetof */
#include <stdint.h> /* uintptr_t */
#include <string.h> /* memcpy */
#include <unistd.h> /* getpid */

#include <nccl.h>

#include "comms.h"
#include "nvlp_cost.h"
#include "hooks_cuda.h" /* nvlp_capture_note */
#include "nvlp_cupti.h"
#include "nvlp_pystacks.h"
#include "nvlp_rt.h"
#include "resolve.h"
#include "../trace/nvlp_trace.h" /* nvlp_hash64, nvlp_nccl_dtype_size */

/*
 * The one list: X(E, name, params, args). E names the nvlp_nccl_fn enum value, so the symbol table
 * the resolver fills is indexed by the same enum the records carry. Collectives and point-to-point
 * calls are generated whole from NCCL_COLLS below; the rest have short hand-written bodies because
 * each derives different fields. Adding a function: one line here, one in NVLP_NCCL_FUNCS, a body.
 */
#define NCCL_OTHERS(X)                                                                             \
	X(GET_UNIQUE_ID, ncclGetUniqueId, (ncclUniqueId * id), (id))                               \
	X(COMM_INIT_RANK, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank), \
	  (comm, nranks, id, rank))                                                                \
	X(COMM_INIT_RANK_CONFIG, ncclCommInitRankConfig,                                           \
	  (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *cfg),           \
	  (comm, nranks, id, rank, cfg))                                                           \
	X(COMM_INIT_ALL, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int *devlist),     \
	  (comms, ndev, devlist))                                                                  \
	X(COMM_INIT_RANK_SCALABLE, ncclCommInitRankScalable,                                       \
	  (ncclComm_t * comm, int nranks, int rank, int nid, ncclUniqueId *ids, ncclConfig_t *cfg), \
	  (comm, nranks, rank, nid, ids, cfg))                                                     \
	X(COMM_SPLIT, ncclCommSplit,                                                               \
	  (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *cfg),           \
	  (comm, color, key, newcomm, cfg))                                                        \
	X(COMM_SHRINK, ncclCommShrink,                                                             \
	  (ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm, ncclConfig_t *cfg, int flags), \
	  (comm, excl, nexcl, newcomm, cfg, flags))                                                \
	X(COMM_FINALIZE, ncclCommFinalize, (ncclComm_t comm), (comm))                              \
	X(COMM_DESTROY, ncclCommDestroy, (ncclComm_t comm), (comm))                                \
	X(COMM_ABORT, ncclCommAbort, (ncclComm_t comm), (comm))                                    \
	X(COMM_REVOKE, ncclCommRevoke, (ncclComm_t comm, int flags), (comm, flags))                \
	X(GROUP_START, ncclGroupStart, (void), ())                                                 \
	X(GROUP_END, ncclGroupEnd, (void), ())                                                     \
	X(GROUP_SIMULATE_END, ncclGroupSimulateEnd, (ncclSimInfo_t * info), (info))                \
	X(COMM_REGISTER, ncclCommRegister,                                                         \
	  (const ncclComm_t comm, void *buf, size_t size, void **handle), (comm, buf, size, handle)) \
	X(COMM_DEREGISTER, ncclCommDeregister, (const ncclComm_t comm, void *handle),              \
	  (comm, handle))                                                                          \
	X(COMM_WINDOW_REGISTER, ncclCommWindowRegister,                                            \
	  (ncclComm_t comm, void *buf, size_t size, ncclWindow_t *win, int flags),                 \
	  (comm, buf, size, win, flags))                                                           \
	X(COMM_WINDOW_DEREGISTER, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win),   \
	  (comm, win))                                                                             \
	X(MEM_ALLOC, ncclMemAlloc, (void **ptr, size_t size), (ptr, size))                         \
	X(MEM_FREE, ncclMemFree, (void *ptr), (ptr))

/* Collectives and point-to-point: C(E, name, params, args, count, dtype, op, peer, how).
 * how: COLL (S = count*size), COLL_N (S = count*size*nranks), SEND, RECV. The params name the
 * communicator comm and the stream st. */
#define NCCL_COLLS(C)                                                                              \
	C(ALL_REDUCE, ncclAllReduce,                                                               \
	  (const void *sb, void *rb, size_t n, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm, \
	   cudaStream_t st),                                                                       \
	  (sb, rb, n, dt, op, comm, st), n, dt, op, -1, COLL)                                      \
	C(BROADCAST, ncclBroadcast,                                                                \
	  (const void *sb, void *rb, size_t n, ncclDataType_t dt, int root, ncclComm_t comm,       \
	   cudaStream_t st),                                                                       \
	  (sb, rb, n, dt, root, comm, st), n, dt, -1, root, COLL)                                  \
	C(BCAST, ncclBcast,                                                                        \
	  (void *b, size_t n, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t st),      \
	  (b, n, dt, root, comm, st), n, dt, -1, root, COLL)                                       \
	C(REDUCE, ncclReduce,                                                                      \
	  (const void *sb, void *rb, size_t n, ncclDataType_t dt, ncclRedOp_t op, int root,        \
	   ncclComm_t comm, cudaStream_t st),                                                      \
	  (sb, rb, n, dt, op, root, comm, st), n, dt, op, root, COLL)                              \
	C(ALL_GATHER, ncclAllGather,                                                               \
	  (const void *sb, void *rb, size_t n, ncclDataType_t dt, ncclComm_t comm, cudaStream_t st), \
	  (sb, rb, n, dt, comm, st), n, dt, -1, -1, COLL_N)                                        \
	C(REDUCE_SCATTER, ncclReduceScatter,                                                       \
	  (const void *sb, void *rb, size_t n, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm, \
	   cudaStream_t st),                                                                       \
	  (sb, rb, n, dt, op, comm, st), n, dt, op, -1, COLL_N)                                    \
	C(ALL_TO_ALL, ncclAlltoAll,                                                                \
	  (const void *sb, void *rb, size_t n, ncclDataType_t dt, ncclComm_t comm, cudaStream_t st), \
	  (sb, rb, n, dt, comm, st), n, dt, -1, -1, COLL_N)                                        \
	C(GATHER, ncclGather,                                                                      \
	  (const void *sb, void *rb, size_t n, ncclDataType_t dt, int root, ncclComm_t comm,       \
	   cudaStream_t st),                                                                       \
	  (sb, rb, n, dt, root, comm, st), n, dt, -1, root, COLL_N)                                \
	C(SCATTER, ncclScatter,                                                                    \
	  (const void *sb, void *rb, size_t n, ncclDataType_t dt, int root, ncclComm_t comm,       \
	   cudaStream_t st),                                                                       \
	  (sb, rb, n, dt, root, comm, st), n, dt, -1, root, COLL_N)                                \
	C(SEND, ncclSend,                                                                          \
	  (const void *sb, size_t n, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t st), \
	  (sb, n, dt, peer, comm, st), n, dt, -1, peer, SEND)                                      \
	C(RECV, ncclRecv,                                                                          \
	  (void *rb, size_t n, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t st),     \
	  (rb, n, dt, peer, comm, st), n, dt, -1, peer, RECV)

enum how { COLL, COLL_N, SEND, RECV };

/* Types of the real functions, and the resolver's table (indexed by enum nvlp_nccl_fn). */
#define TYPEDEF(E, name, params, args, ...) typedef ncclResult_t (*real_##name##_t) params;
NCCL_OTHERS(TYPEDEF)
NCCL_COLLS(TYPEDEF)
#undef TYPEDEF

#define SYM(E, name, params, args, ...) [NVLP_NCCL_##E] = {#name, "p" #name, NULL, NULL},
static struct nvlp_sym syms[NVLP_NCCL_FN_COUNT] = {NCCL_OTHERS(SYM) NCCL_COLLS(SYM)};
#undef SYM

/* Every function of the format's list has a wrapper here, and no other. */
#define ONE(...) +1
_Static_assert(0 NCCL_OTHERS(ONE) NCCL_COLLS(ONE) == NVLP_NCCL_FN_COUNT,
	       "NCCL_OTHERS + NCCL_COLLS must cover NVLP_NCCL_FUNCS exactly");
#undef ONE

/*
 * Wrapper skeleton. PASS: find the real function (a missing one fails the call with
 * ncclSystemError rather than crash), pass through when not recording. ENTER adds the record with
 * its defaults. CALL: time the real call; errno is saved right after it, since building the record
 * may touch errno. LEAVE: emit, restore.
 */
#define PASS(E, name, args)                                                                        \
	real_##name##_t real = (real_##name##_t)nvlp_real(&syms[NVLP_NCCL_##E]);                   \
	if (NVLP_UNLIKELY(!real))                                                                  \
		return ncclSystemError;                                                            \
	struct nvlp_tls *tls = nvlp_recording_tls();                                               \
	if (!tls)                                                                                  \
		return real args;                                                                  \
	uint64_t cost0 = nvlp_cost_begin();                                                        \
	tls->in_hook = 1;                                                                          \
	nvlp_py_enter(tls);
#define ENTER(E, name, args)                                                                       \
	PASS(E, name, args)                                                                        \
	struct nvlp_rec_nccl r = {.fn = NVLP_NCCL_##E,                                             \
				  .tid = tls->tid,                                                 \
				  .device = (uint64_t)-1,                                          \
				  .dtype = (uint64_t)-1,                                           \
				  .op = (uint64_t)-1,                                              \
				  .peer = (uint64_t)-1,                                            \
				  .rank = (uint64_t)-1,                                            \
				  .nranks = (uint64_t)-1,                                          \
				  .group_depth = (uint64_t)tls->group_depth};
#define CALL(args)                                                                                 \
	r.call_id = nvlp_next_call_id();                                                           \
	r.t_enter = nvlp_now();                                                                    \
	struct nvlp_live *live = live_call(tls, &r);                                               \
	ncclResult_t rc = real args;                                                               \
	r.dur = nvlp_elapsed(r.t_enter, nvlp_now());                                               \
	nvlp_live_end(live);                                                                       \
	int saved_errno = errno;                                                                   \
	r.rc = (uint64_t)(int64_t)rc;
#define LEAVE                                                                                      \
	nvlp_emit(NVLP_K_NCCL, &r, NULL, 0);                                                       \
	nvlp_py_leave(tls);                                                                        \
	tls->in_hook = 0;                                                                          \
	nvlp_cost_end(cost0, r.dur);                                                               \
	errno = saved_errno;                                                                       \
	return rc;

/* In progress (nvlp_live_*): the call as its record will say, from what r holds before the real
 * call (the communicator of an init or split is set before it; a group end names the
 * communicator of the thread's latest collective). Not the hot path: collectives use live_coll. */
static struct nvlp_live *live_call(struct nvlp_tls *tls, const struct nvlp_rec_nccl *r)
{
	struct nvlp_live *l = nvlp_live_begin(tls, 1);
	if (!l)
		return NULL;
	uint64_t comm = r->comm;
	if (!comm && r->fn == NVLP_NCCL_GROUP_END && tls->nccl_comm) {
		struct nvlp_comm *c = nvlp_comm_find(tls->nccl_comm);
		comm = c ? c->hash : nvlp_comm_ptr_hash(tls->nccl_comm);
	}
	NVLP_LIVE_SET(l, kind, NVLP_K_NCCL);
	NVLP_LIVE_SET(l, fn, r->fn);
	NVLP_LIVE_SET(l, t_enter, r->t_enter);
	NVLP_LIVE_SET(l, device, r->device);
	NVLP_LIVE_SET(l, stream, 0);
	NVLP_LIVE_SET(l, comm, comm);
	NVLP_LIVE_SET(l, seq, 0);
	NVLP_LIVE_SET(l, count, r->count);
	NVLP_LIVE_SET(l, dtype, r->dtype);
	NVLP_LIVE_SET(l, op, r->op);
	NVLP_LIVE_SET(l, peer, r->peer);
	NVLP_LIVE_SET(l, rank, r->rank);
	NVLP_LIVE_SET(l, nranks, r->nranks);
	NVLP_LIVE_SET(l, call_id, r->call_id);
	NVLP_LIVE_SET(l, bytes, r->bytes);
	nvlp_live_publish(l);
	return l;
}

/* NCCL accepted the call (a non-blocking communicator answers ncclInProgress). */
#define OK(rc) ((rc) == ncclSuccess || (rc) == ncclInProgress)

/* An error NCCL returns after it attempted the operation (a peer died, a CUDA or network error),
 * as opposed to rejecting its arguments: the operation took its place in the sequence. */
static inline int ran(ncclResult_t rc)
{
	return rc == ncclSystemError || rc == ncclInternalError || rc == ncclRemoteError ||
	       rc == ncclUnhandledCudaError;
}

/* The entry to record a call on comm with. A communicator we never saw is added (and NCCL asked
 * about it) only after NCCL accepted a call on it: a pointer NCCL rejected may not be a
 * communicator at all, and asking about it could crash where the program got an error code. */
static inline struct nvlp_comm *comm_entry(ncclComm_t comm, ncclResult_t rc)
{
	return OK(rc) ? nvlp_comm_get(comm) : nvlp_comm_find(comm);
}

/* A communicator's identity fields; the pointer's hash for one we cannot track. */
static struct nvlp_comm *fill_comm(struct nvlp_rec_nccl *r, struct nvlp_comm *c, const void *comm)
{
	if (c) {
		r->comm = c->hash;
		r->rank = (uint64_t)(int64_t)atomic_load_explicit(&c->rank, memory_order_relaxed);
		r->nranks = (uint64_t)(int64_t)atomic_load_explicit(&c->nranks, memory_order_relaxed);
		r->device = (uint64_t)(int64_t)atomic_load_explicit(&c->device, memory_order_relaxed);
	} else if (comm) {
		r->comm = nvlp_comm_ptr_hash(comm);
	}
	return c;
}

/*
 * The hot path: collectives and point-to-point calls. The record is written in one initializer
 * (no zero-fill first). Every call records the sequence number it was issued at (a failed one
 * too: a hang or abort is matched across ranks by it); the number is used up by calls NCCL accepted
 * or attempted, not by ones it rejected up front, so that a call rejected on one rank does not
 * shift the numbering against the other ranks. The counters are read and written,
 * not atomically incremented: NCCL forbids concurrent calls on one communicator, and a locked
 * increment costs more than the rest of the bookkeeping.
 */
/* What a collective's record (and its in-flight slot) says of its communicator: rank, size,
 * device, hash, the call's seq (advanced when the call used a number up; 0: only read, for the
 * slot filled before the call) and its nccl-tests byte count. */
struct coll_view {
	int64_t rank, nranks, device;
	uint64_t hash, seq, bytes;
};
static inline __attribute__((always_inline)) struct coll_view
coll_view(struct nvlp_comm *c, ncclComm_t comm, enum how how, int peer, uint64_t nbytes,
	  int advance)
{
	struct coll_view v = {-1, -1, -1, 0, 0, nbytes};
	if (NVLP_LIKELY(c != NULL)) {
		v.hash = c->hash;
		v.rank = atomic_load_explicit(&c->rank, memory_order_relaxed);
		v.nranks = atomic_load_explicit(&c->nranks, memory_order_relaxed);
		v.device = atomic_load_explicit(&c->device, memory_order_relaxed);
		if (how == SEND || how == RECV) {
			v.seq = nvlp_comm_p2p_seq_ex(c, peer, how == RECV, advance);
		} else {
			v.seq = atomic_load_explicit(&c->seq, memory_order_relaxed) + 1;
			if (advance)
				atomic_store_explicit(&c->seq, v.seq, memory_order_relaxed);
		}
	} else if (comm) {
		v.hash = nvlp_comm_ptr_hash(comm);
	}
	if (how == COLL_N && v.nranks > 0)
		v.bytes *= (uint64_t)v.nranks;
	return v;
}

/* Inlined into each wrapper: passing a dozen arguments cost more than the code it saves. */
static inline __attribute__((always_inline)) void
emit_coll(struct nvlp_tls *tls, unsigned fn, uint64_t t0, uint64_t t1, ncclComm_t comm,
	  cudaStream_t st, size_t n, ncclDataType_t dt, int op, int peer, enum how how,
	  ncclResult_t rc, uint64_t call_id, uint64_t nbytes)
{
	/* The last communicator entry and stream of this thread (the same stream handle on the same
	 * communicator's device is the same stream). */
	__typeof__(tls->nccl_last) *last = &tls->nccl_last;
	struct nvlp_comm *c = last->c;
	if (NVLP_UNLIKELY(!c || atomic_load_explicit(&c->key, memory_order_relaxed) != comm ||
			  atomic_load_explicit(&c->known, memory_order_relaxed) != NVLP_COMM_ALL)) {
		last->c = c = comm_entry(comm, rc);
		last->cupti_stream = 0;
	}
	if (!last->cupti_stream || last->stream != (void *)st) {
		last->stream = st;
		last->cupti_stream = nvlp_cupti_stream_id(st); /* 0 (not cached) while CUPTI is off */
	}
	int advance = OK(rc) || NVLP_UNLIKELY(ran(rc));
	struct coll_view v = coll_view(c, comm, how, peer, nbytes, advance);
	int64_t rank = v.rank, nranks = v.nranks, device = v.device;
	uint64_t hash = v.hash, seq = v.seq, bytes = v.bytes;
	/* read-mostly: one relaxed load per collective after the first */
	if (NVLP_UNLIKELY(!__atomic_load_n(&nvlp_first_coll_ns, __ATOMIC_RELAXED)))
		__atomic_store_n(&nvlp_first_coll_ns, t0 ? t0 : 1, __ATOMIC_RELAXED);
	/* Built straight in the thread's buffer; on the stack only when the buffer cannot take it
	 * in one piece (full: nvlp_emit drops and counts; wrapping: nvlp_emit splits it). */
	struct nvlp_emit_slot slot;
	struct nvlp_rec_nccl tmp, *r = nvlp_emit_reserve(NVLP_K_NCCL, &slot);
	*(r ? r : &tmp) = (struct nvlp_rec_nccl){
		.fn = fn,
		.t_enter = t0,
		.dur = nvlp_elapsed(t0, t1),
		.tid = tls->tid,
		.device = (uint64_t)device,
		.stream = (uintptr_t)st,
		.cupti_stream = last->cupti_stream,
		.count = n,
		.dtype = (uint64_t)(int64_t)dt,
		.bytes = bytes,
		.op = (uint64_t)(int64_t)op,
		.peer = (uint64_t)(int64_t)peer,
		.group_depth = (uint64_t)tls->group_depth,
		.rc = (uint64_t)(int64_t)rc,
		.comm = hash,
		.rank = (uint64_t)rank,
		.nranks = (uint64_t)nranks,
		.seq = seq,
		.call_id = call_id,
		.aux = 0,
		.aux2 = OK(rc) ? 0 : NVLP_NCCL_AUX2_FAILED,
	};
	if (NVLP_LIKELY(r != NULL))
		nvlp_emit_commit(&slot);
	else
		nvlp_emit(NVLP_K_NCCL, &tmp, NULL, 0);
	nvlp_capture_note(NVLP_K_NCCL, call_id, st); /* captured into a graph: not executed yet */
	nvlp_py_nccl_maybe(tls, t0, call_id);
}

/*
 * A collective or point-to-point call in progress (INFLIGHT): the fields its record will have,
 * from the thread's last communicator entry (no lookup unless the communicator changed) and the
 * sequence number it is about to take. A dozen plain stores; the same few loads emit_coll makes
 * after the call.
 */
static inline __attribute__((always_inline)) struct nvlp_live *
live_coll(struct nvlp_tls *tls, unsigned fn, uint64_t t0, uint64_t call_id, ncclComm_t comm,
	  cudaStream_t st, size_t n, ncclDataType_t dt, int op, int peer, enum how how,
	  uint64_t nbytes)
{
	struct nvlp_live *l = nvlp_live_begin(tls, 1);
	if (NVLP_UNLIKELY(!l))
		return NULL;
	struct nvlp_comm *c = tls->nccl_last.c;
	if (NVLP_UNLIKELY(!c || atomic_load_explicit(&c->key, memory_order_relaxed) != comm))
		c = nvlp_comm_find(comm);
	struct coll_view v = coll_view(c, comm, how, peer, nbytes, 0);
	int64_t rank = v.rank, nranks = v.nranks, device = v.device;
	uint64_t hash = v.hash, seq = v.seq, bytes = v.bytes;
	NVLP_LIVE_SET(l, kind, NVLP_K_NCCL);
	NVLP_LIVE_SET(l, fn, fn);
	NVLP_LIVE_SET(l, t_enter, t0);
	NVLP_LIVE_SET(l, device, device);
	NVLP_LIVE_SET(l, stream, (uintptr_t)st);
	NVLP_LIVE_SET(l, comm, hash);
	NVLP_LIVE_SET(l, seq, seq);
	NVLP_LIVE_SET(l, count, n);
	NVLP_LIVE_SET(l, dtype, (int64_t)dt);
	NVLP_LIVE_SET(l, op, (int64_t)op);
	NVLP_LIVE_SET(l, peer, (int64_t)peer);
	NVLP_LIVE_SET(l, rank, rank);
	NVLP_LIVE_SET(l, nranks, nranks);
	NVLP_LIVE_SET(l, call_id, call_id);
	NVLP_LIVE_SET(l, bytes, bytes);
	nvlp_live_publish(l);
	return l;
}

#define COLL_WRAPPER(E, name, params, args, n, dt, op, peer, how)                                  \
	NVLP_EXPORT ncclResult_t name params                                                       \
	{                                                                                          \
		PASS(E, name, args)                                                                \
		tls->nccl_comm = comm;                                                             \
		uint64_t call_id = nvlp_next_call_id();                                            \
		uint64_t nbytes = (uint64_t)(n) * nvlp_nccl_dtype_size(dt);                        \
		uint64_t t0 = nvlp_now();                                                          \
		struct nvlp_live *live = live_coll(tls, NVLP_NCCL_##E, t0, call_id, comm, st, n,   \
						   dt, op, peer, how, nbytes);             \
		ncclResult_t rc = real args;                                                       \
		uint64_t t1 = nvlp_now();                                                          \
		nvlp_live_end(live);                                                               \
		int saved_errno = errno;                                                           \
		emit_coll(tls, NVLP_NCCL_##E, t0, t1, comm, st, n, dt, op, peer, how, rc,          \
			  call_id, nbytes);                                                        \
		nvlp_py_leave(tls);                                                                \
		tls->in_hook = 0;                                                                  \
		nvlp_cost_end(cost0, t1 - t0);                                                     \
		errno = saved_errno;                                                               \
		return rc;                                                                         \
	}
NCCL_COLLS(COLL_WRAPPER)

/* ---- communicator lifecycle ------------------------------------------------------------------ */

/* Seeds keep hashes of different origins apart. */
#define SEED_ID 0x6e63636c6964ull
#define SEED_SPLIT 0x73706c6974ull
#define SEED_SHRINK 0x736872696e6bull
#define SEED_ALL 0x616c6cull

/* Every rank got the same unique id(s): hashing them gives every rank the same communicator hash. */
static uint64_t hash_ids(const ncclUniqueId *ids, int n)
{
	uint64_t h = SEED_ID;
	for (int i = 0; i < n; i++)
		h = nvlp_hash64(ids[i].internal, sizeof ids[i].internal, h);
	return h;
}

/* A child's hash from its parent's, what distinguishes siblings (color), and how many children the
 * parent had before: the same on every rank, since splits are collective over the parent. */
static uint64_t hash_child(uint64_t parent, uint64_t seed, int64_t what, uint64_t nth)
{
	uint64_t v[3] = {parent, (uint64_t)what, nth};
	return nvlp_hash64(v, sizeof v, seed);
}

/*
 * The name the job gave a communicator in its config (torch names its process groups there), as a
 * COMMNAME record. The config is the caller's struct of whatever NCCL version it was built against:
 * commName is read only when magic, version (2.19 added it) and size say the field is there.
 */
#define CONFIG_MAGIC 0xcafebeefu
#define CONFIG_COMMNAME_SINCE 21900u /* NCCL_VERSION(2, 19, 0) */
void nvlp_comm_name_emit(struct nvlp_comm *c, uint64_t hash, const char *name)
{
	if (!name || !hash)
		return;
	char buf[256];
	size_t n = 0;
	for (; n < sizeof buf - 1 && name[n]; n++)
		buf[n] = (unsigned char)name[n] < 0x20 ? '?' : name[n];
	if (!n)
		return;
	buf[n] = 0;
	struct nvlp_rec_commname r = {.comm = hash, .name = nvlp_intern(buf)};
	if (!r.name)
		return;
	if (c)
		atomic_store_explicit(&c->named, 1, memory_order_relaxed);
	nvlp_emit(NVLP_K_COMMNAME, &r, NULL, 0);
}

static void config_name(const ncclConfig_t *cfg, const ncclComm_t *comm, uint64_t hash,
			ncclResult_t rc)
{
	if (!cfg || !OK(rc) || cfg->magic != CONFIG_MAGIC || cfg->version < CONFIG_COMMNAME_SINCE ||
	    cfg->size < offsetof(ncclConfig_t, commName) + sizeof cfg->commName || !cfg->commName)
		return;
	nvlp_comm_name_emit(comm && *comm ? nvlp_comm_find(*comm) : NULL, hash, cfg->commName);
}

/* Record a communicator the call created: rank/nranks from the arguments when known. */
static void new_comm(struct nvlp_rec_nccl *r, ncclResult_t rc, const ncclComm_t *comm,
		     uint64_t hash, int rank, int nranks)
{
	r->comm = r->aux = hash;
	r->rank = (uint64_t)(int64_t)rank;
	r->nranks = (uint64_t)(int64_t)nranks;
	if (OK(rc) && comm && *comm) {
		struct nvlp_comm *c = nvlp_comm_add(*comm, hash, rank, nranks);
		if (c)
			r->device = (uint64_t)(int64_t)atomic_load(&c->device);
	}
}

NVLP_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	ENTER(GET_UNIQUE_ID, ncclGetUniqueId, (id))
	CALL((id))
	if (rc == ncclSuccess && id)
		r.aux = hash_ids(id, 1); /* the hash the communicator made from this id will have */
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	ENTER(COMM_INIT_RANK, ncclCommInitRank, (comm, nranks, id, rank))
	new_comm(&r, ncclInvalidArgument, NULL, hash_ids(&id, 1), rank, nranks); /* in progress */
	CALL((comm, nranks, id, rank))
	new_comm(&r, rc, comm, hash_ids(&id, 1), rank, nranks);
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
						int rank, ncclConfig_t *cfg)
{
	ENTER(COMM_INIT_RANK_CONFIG, ncclCommInitRankConfig, (comm, nranks, id, rank, cfg))
	new_comm(&r, ncclInvalidArgument, NULL, hash_ids(&id, 1), rank, nranks); /* in progress */
	CALL((comm, nranks, id, rank, cfg))
	new_comm(&r, rc, comm, hash_ids(&id, 1), rank, nranks);
	config_name(cfg, comm, r.comm, rc);
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid,
						  ncclUniqueId *ids, ncclConfig_t *cfg)
{
	ENTER(COMM_INIT_RANK_SCALABLE, ncclCommInitRankScalable, (comm, nranks, rank, nid, ids, cfg))
	new_comm(&r, ncclInvalidArgument, NULL, ids && nid > 0 ? hash_ids(ids, nid) : 0, rank,
		 nranks); /* in progress */
	CALL((comm, nranks, rank, nid, ids, cfg))
	new_comm(&r, rc, comm, ids && nid > 0 ? hash_ids(ids, nid) : 0, rank, nranks);
	config_name(cfg, comm, r.comm, rc);
	LEAVE
}

/* One process owns every rank: the pid and a per-process counter make the hash. */
NVLP_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	static atomic_uint_fast64_t count;
	ENTER(COMM_INIT_ALL, ncclCommInitAll, (comms, ndev, devlist))
	CALL((comms, ndev, devlist))
	uint64_t h = hash_child((uint64_t)getpid(), SEED_ALL, 0, atomic_fetch_add(&count, 1) + 1);
	r.comm = r.aux = h;
	r.nranks = (uint64_t)(int64_t)ndev;
	if (OK(rc) && comms)
		for (int i = 0; i < ndev; i++)
			if (comms[i])
				nvlp_comm_add(comms[i], h, i, ndev);
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
				       ncclConfig_t *cfg)
{
	ENTER(COMM_SPLIT, ncclCommSplit, (comm, color, key, newcomm, cfg))
	fill_comm(&r, nvlp_comm_find(comm), comm); /* in progress */
	CALL((comm, color, key, newcomm, cfg))
	struct nvlp_comm *p = fill_comm(&r, comm_entry(comm, rc), comm);
	r.aux2 = (uint64_t)(int64_t)color;
	if (p && OK(rc)) {
		uint64_t nth = atomic_fetch_add(&p->splits, 1) + 1;
		if (newcomm && *newcomm) {
			/* Rank and size in the child depend on every rank's color and key: ask NCCL. */
			r.aux = hash_child(p->hash, SEED_SPLIT, color, nth);
			nvlp_comm_add(*newcomm, r.aux, -1, -1);
			config_name(cfg, newcomm, r.aux, rc);
		}
	}
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm,
					ncclConfig_t *cfg, int flags)
{
	ENTER(COMM_SHRINK, ncclCommShrink, (comm, excl, nexcl, newcomm, cfg, flags))
	fill_comm(&r, nvlp_comm_find(comm), comm); /* in progress */
	CALL((comm, excl, nexcl, newcomm, cfg, flags))
	struct nvlp_comm *p = fill_comm(&r, comm_entry(comm, rc), comm);
	r.aux2 = (uint64_t)(int64_t)nexcl;
	if (p && OK(rc)) {
		uint64_t nth = atomic_fetch_add(&p->shrinks, 1) + 1;
		if (newcomm && *newcomm) {
			r.aux = hash_child(p->hash, SEED_SHRINK, 0, nth);
			nvlp_comm_add(*newcomm, r.aux, -1, -1);
			config_name(cfg, newcomm, r.aux, rc);
		}
	}
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	ENTER(COMM_FINALIZE, ncclCommFinalize, (comm))
	fill_comm(&r, nvlp_comm_find(comm), comm); /* in progress */
	CALL((comm))
	fill_comm(&r, comm_entry(comm, rc), comm);
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags)
{
	ENTER(COMM_REVOKE, ncclCommRevoke, (comm, flags))
	CALL((comm, flags))
	fill_comm(&r, comm_entry(comm, rc), comm);
	r.aux2 = (uint64_t)(int64_t)flags;
	LEAVE
}

/* The entry goes before the real call frees the communicator: afterwards another thread could get
 * the same address from a new communicator, whose entry we would then remove. */
NVLP_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	ENTER(COMM_DESTROY, ncclCommDestroy, (comm))
	fill_comm(&r, nvlp_comm_find(comm), comm);
	nvlp_comm_remove(comm);
	CALL((comm))
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	ENTER(COMM_ABORT, ncclCommAbort, (comm))
	fill_comm(&r, nvlp_comm_find(comm), comm);
	nvlp_comm_remove(comm);
	CALL((comm))
	LEAVE
}

/* ---- groups: NCCL's own depth rules (End decrements whenever a group is open) ---------------- */

NVLP_EXPORT ncclResult_t ncclGroupStart(void)
{
	ENTER(GROUP_START, ncclGroupStart, ())
	CALL(())
	if (rc == ncclSuccess)
		tls->group_depth++;
	r.group_depth = (uint64_t)tls->group_depth;
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclGroupEnd(void)
{
	ENTER(GROUP_END, ncclGroupEnd, ())
	CALL(())
	if (tls->group_depth > 0)
		tls->group_depth--;
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *info)
{
	ENTER(GROUP_SIMULATE_END, ncclGroupSimulateEnd, (info))
	CALL((info))
	if (tls->group_depth > 0)
		tls->group_depth--;
	LEAVE
}

/* ---- registration and memory: aux = the buffer, aux2 = the handle NCCL returned --------------- */

NVLP_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buf, size_t size,
					  void **handle)
{
	ENTER(COMM_REGISTER, ncclCommRegister, (comm, buf, size, handle))
	CALL((comm, buf, size, handle))
	fill_comm(&r, comm_entry(comm, rc), comm);
	r.bytes = size;
	r.aux = (uintptr_t)buf;
	if (rc == ncclSuccess && handle)
		r.aux2 = (uintptr_t)*handle;
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
	ENTER(COMM_DEREGISTER, ncclCommDeregister, (comm, handle))
	CALL((comm, handle))
	fill_comm(&r, comm_entry(comm, rc), comm);
	r.aux2 = (uintptr_t)handle;
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buf, size_t size,
						ncclWindow_t *win, int flags)
{
	ENTER(COMM_WINDOW_REGISTER, ncclCommWindowRegister, (comm, buf, size, win, flags))
	CALL((comm, buf, size, win, flags))
	fill_comm(&r, comm_entry(comm, rc), comm);
	r.bytes = size;
	r.aux = (uintptr_t)buf;
	if (rc == ncclSuccess && win)
		r.aux2 = (uintptr_t)*win;
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
	ENTER(COMM_WINDOW_DEREGISTER, ncclCommWindowDeregister, (comm, win))
	CALL((comm, win))
	fill_comm(&r, comm_entry(comm, rc), comm);
	r.aux2 = (uintptr_t)win;
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
	ENTER(MEM_ALLOC, ncclMemAlloc, (ptr, size))
	CALL((ptr, size))
	r.bytes = size;
	if (rc == ncclSuccess && ptr)
		r.aux = (uintptr_t)*ptr;
	LEAVE
}

NVLP_EXPORT ncclResult_t ncclMemFree(void *ptr)
{
	ENTER(MEM_FREE, ncclMemFree, (ptr))
	CALL((ptr))
	r.aux = (uintptr_t)ptr;
	LEAVE
}

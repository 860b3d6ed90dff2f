/* comms.c: communicator table: open addressing keyed by pointer, lock-free reads, inserts under a mutex. */
#include <pthread.h> /* pthread_mutex_t */
#include <stdlib.h>  /* calloc */

#include <nccl.h>

#include "comms.h"
#include "nvlp_rt.h"
#include "resolve.h"
#include "../trace/nvlp_trace.h" /* nvlp_hash64 */

/*
 * Readers probe from the pointer's home slot until they meet the key or an empty slot; a removed
 * entry leaves a tombstone so probes continue past it. Writers (new communicators, removals) hold
 * the mutex and publish the key last, after the entry's fields are written. A slot is reused only
 * after its communicator was destroyed, so only a program using a communicator while destroying it
 * could see a half-rewritten entry. Jobs create a handful of communicators; 4096 slots is plenty.
 */
#define NSLOTS 4096
#define TOMB ((const void *)1)

static struct {
	struct nvlp_comm slots[NSLOTS];
	pthread_mutex_t mu;
} comm_table = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Helpers the shim does not wrap: it only needs their answers. */
static struct {
	struct nvlp_sym rank, count, device;
} queries = {.rank = {"ncclCommUserRank", "pncclCommUserRank", NULL, NULL},
             .count = {"ncclCommCount", "pncclCommCount", NULL, NULL},
             .device = {"ncclCommCuDevice", "pncclCommCuDevice", NULL, NULL}};

static unsigned home(const void *comm)
{
	return (unsigned)(((uintptr_t)comm >> 4) * 0x9e3779b97f4a7c15ull >> 52) & (NSLOTS - 1);
}

uint64_t nvlp_comm_ptr_hash(const void *comm)
{
	return nvlp_hash64(&comm, sizeof comm, 0x636f6d6dull);
}

struct nvlp_comm *nvlp_comm_find(const void *comm)
{
	if (!comm)
		return NULL;
	for (unsigned i = home(comm), n = 0; n < NSLOTS; i = (i + 1) & (NSLOTS - 1), n++) {
		const void *k =
		    atomic_load_explicit(&comm_table.slots[i].key, memory_order_acquire);
		if (k == comm)
			return &comm_table.slots[i];
		if (!k)
			return NULL;
	}
	return NULL;
}

static int query(struct nvlp_sym *s, const void *comm, int *out)
{
	ncclResult_t (*fn)(const ncclComm_t, int *) = nvlp_real(s);
	return fn && fn((ncclComm_t)comm, out) == ncclSuccess;
}

void nvlp_comm_refresh(struct nvlp_comm *c)
{
	unsigned known = atomic_load_explicit(&c->known, memory_order_acquire);
	if (known == NVLP_COMM_ALL)
		return;
	const void *comm = atomic_load_explicit(&c->key, memory_order_relaxed);
	int v;
	if (!(known & NVLP_COMM_RANK) && query(&queries.rank, comm, &v)) {
		atomic_store(&c->rank, v);
		atomic_fetch_or(&c->known, NVLP_COMM_RANK);
	}
	if (!(known & NVLP_COMM_NRANKS) && query(&queries.count, comm, &v) && v > 0) {
		atomic_store(&c->nranks, v);
		atomic_fetch_or(&c->known, NVLP_COMM_NRANKS);
	}
	if (!(known & NVLP_COMM_DEVICE) && query(&queries.device, comm, &v)) {
		atomic_store(&c->device, v);
		atomic_fetch_or(&c->known, NVLP_COMM_DEVICE);
	}
	int n = atomic_load(&c->nranks);
	if (n > 0 && !atomic_load(&c->p2p)) {
		/* Once per communicator, when its size becomes known. */
		atomic_uint_fast64_t *p = calloc(2 * (size_t)n, sizeof *p), *expected = NULL;
		if (p && !atomic_compare_exchange_strong(&c->p2p, &expected, p))
			free(p);
	}
}

/* Caller holds mu. */
static struct nvlp_comm *insert_locked(const void *comm, uint64_t hash, int rank, int nranks)
{
	struct nvlp_comm *free_slot = NULL;
	for (unsigned i = home(comm), n = 0; n < NSLOTS; i = (i + 1) & (NSLOTS - 1), n++) {
		const void *k =
		    atomic_load_explicit(&comm_table.slots[i].key, memory_order_relaxed);
		if (k == comm) {
			/* A stale entry: the pointer was freed without Destroy/Abort passing through us. */
			atomic_store_explicit(&comm_table.slots[i].key, TOMB, memory_order_release);
			free_slot = free_slot ? free_slot : &comm_table.slots[i];
			continue;
		}
		if (k == TOMB && !free_slot)
			free_slot = &comm_table.slots[i];
		if (!k) {
			free_slot = free_slot ? free_slot : &comm_table.slots[i];
			break;
		}
	}
	if (!free_slot)
		return NULL;
	struct nvlp_comm *c = free_slot;
	free(atomic_exchange(&c->p2p, NULL));
	c->hash = hash;
	atomic_store(&c->rank, rank);
	atomic_store(&c->nranks, nranks);
	atomic_store(&c->device, -1);
	atomic_store(&c->known, (rank >= 0 ? NVLP_COMM_RANK : 0) | (nranks > 0 ? NVLP_COMM_NRANKS : 0));
	atomic_store(&c->seq, 0);
	atomic_store(&c->splits, 0);
	atomic_store(&c->shrinks, 0);
	atomic_store(&c->named, 0);
	atomic_store_explicit(&c->key, comm, memory_order_release);
	return c;
}

struct nvlp_comm *nvlp_comm_add(const void *comm, uint64_t hash, int rank, int nranks)
{
	if (!comm)
		return NULL;
	pthread_mutex_lock(&comm_table.mu);
	struct nvlp_comm *c = insert_locked(comm, hash, rank, nranks);
	pthread_mutex_unlock(&comm_table.mu);
	if (c)
		nvlp_comm_refresh(c);
	return c;
}

struct nvlp_comm *nvlp_comm_get(const void *comm)
{
	struct nvlp_comm *c = nvlp_comm_find(comm);
	if (NVLP_UNLIKELY(!c)) {
		if (!comm)
			return NULL;
		/* Created before we were loaded (or by a path we do not wrap): only this rank knows it. */
		pthread_mutex_lock(&comm_table.mu);
		c = nvlp_comm_find(comm);
		if (!c)
			c = insert_locked(comm, nvlp_comm_ptr_hash(comm), -1, -1);
		pthread_mutex_unlock(&comm_table.mu);
		if (!c)
			return NULL;
	}
	if (NVLP_UNLIKELY(atomic_load_explicit(&c->known, memory_order_relaxed) != NVLP_COMM_ALL))
		nvlp_comm_refresh(c);
	return c;
}

void nvlp_comm_remove(const void *comm)
{
	pthread_mutex_lock(&comm_table.mu);
	struct nvlp_comm *c = nvlp_comm_find(comm);
	if (c)
		atomic_store_explicit(&c->key, TOMB, memory_order_release);
	pthread_mutex_unlock(&comm_table.mu);
}

uint64_t nvlp_comm_p2p_seq(struct nvlp_comm *c, int peer, int recv)
{
	return nvlp_comm_p2p_seq_ex(c, peer, recv, 1);
}

uint64_t nvlp_comm_p2p_seq_ex(struct nvlp_comm *c, int peer, int recv, int advance)
{
	atomic_uint_fast64_t *p = atomic_load_explicit(&c->p2p, memory_order_acquire);
	int n = atomic_load_explicit(&c->nranks, memory_order_relaxed);
	if (!p || peer < 0 || peer >= n)
		return 0;
	/* Not a locked increment: NCCL forbids concurrent calls on one communicator. */
	atomic_uint_fast64_t *ctr = &p[recv ? n + peer : peer];
	uint64_t seq = atomic_load_explicit(ctr, memory_order_relaxed) + 1;
	if (advance)
		atomic_store_explicit(ctr, seq, memory_order_relaxed);
	return seq;
}

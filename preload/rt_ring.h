/* rt_ring.h: per-thread single-producer/single-consumer record rings and their registry. */
#ifndef NVLP_RT_RING_H
#define NVLP_RT_RING_H

#include <stdatomic.h> /* _Atomic */
#include <stddef.h>    /* size_t */
#include <stdint.h>    /* uint64_t */

#include "nvlp_rt.h" /* struct nvlp_live */

/* Ring life cycle. FREE rings wait for a new thread; RETIRED ones belong to an exited thread and
 * still hold records for the writer, which returns them to FREE once drained. */
enum { NVLP_RING_FREE = 0, NVLP_RING_ACTIVE = 1, NVLP_RING_RETIRED = 2 };

/*
 * Entry layout in the ring (8-byte units, so an entry header never straddles the wrap point):
 *   u32 kind, u32 blob_len, then the kind's fields (u64 each), then the blob padded to 8.
 * head and tail are free-running byte counters; the producer owns head, the consumer owns tail,
 * and each lives on its own cache line so the two sides do not false-share.
 *
 * Bursts: a thread's ring (1 MiB by default, ~6,000 NCCL records) is backed by a spill ring, a
 * large reservation (63 MiB by default, MAP_NORESERVE) that takes the records when the ring is
 * full, until the writer has emptied it. Its pages cost memory only while they hold records: the
 * writer gives them back (MADV_DONTNEED) after draining them and before releasing the space to
 * the producer, so the producer never writes a page being discarded. Order is kept: once spilling,
 * the producer writes to the spill only, until it is empty; the writer drains the ring before the
 * spill (see nvlp_ring_drain).
 */
struct nvlp_ring {
	_Atomic uint64_t head;
	char pad0[56];
	_Atomic uint64_t tail;
	char pad1[56];
	_Atomic uint64_t drops;  /* written by the producer only, read by the writer */
	uint64_t drops_reported; /* writer only: value in the last DROPS record */
	_Atomic int state;
	uint64_t tid;           /* owner thread, for DROPS records */
	uint64_t cap;           /* power of two */
	struct nvlp_ring *next; /* registry link; rings are never unlinked or unmapped */
	uint8_t *data;
	struct nvlp_ring *spill; /* overflow ring (none when the buffer fits the ring), or NULL */
	int spilling;            /* producer only: records go to the spill until it is empty */
	int release;             /* consumer gives drained pages back (the spill) */
	unsigned wake_shift;     /* the spill: count a late mark at every 2^wake_shift bytes written */
	_Atomic uint64_t late;   /* producer only: late marks (NVLP_RING_WAKE), read by the writer */
	uint64_t late_seen;      /* writer only: value at the last drain */
	uint64_t live_reported;  /* writer only: gen of the last call in live written as INFLIGHT */
	/* The owner thread's call in progress (nvlp_rt.h), on cache lines of its own: the owner
	 * writes it at every call, the writer reads it a few times a second. */
	struct nvlp_live live __attribute__((aligned(64)));
};

/* Fill level at which a producer counts a late mark (the writer fell behind): 3/4. Producers
 * never wake the writer (no syscall on the hot path); it polls often enough that the spill
 * absorbs what arrives while it sleeps (rt_writer.c), and reports the marks (NVLPROF_VERBOSE). */
#define NVLP_RING_WAKE(cap) ((cap) / 4 * 3)

/*! Producer side: count a late mark on r (its producer is the only writer of r->late). */
static inline void nvlp_ring_late(struct nvlp_ring *r)
{
	atomic_store_explicit(&r->late, atomic_load_explicit(&r->late, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
}

/*! Size of the fixed part (u64 fields) of a kind, or 0 if the kind is invalid. */
unsigned nvlp_ring_nfields(unsigned kind);

/*! Take a FREE ring or map a new one (cap bytes, a power of two, with a spill ring of spill_cap
 * bytes when spill_cap > 0) and mark it ACTIVE for tid. A spill that cannot be mapped (strict
 * overcommit ignores MAP_NORESERVE) is tried at half the size, down to cap, then left out.
 * @return the ring, or NULL when memory could not be mapped. */
struct nvlp_ring *nvlp_ring_acquire(uint64_t cap, uint64_t spill_cap, uint64_t tid);

/*! Producer side: append one record (to the spill when the ring is full). @return 0, 1 when the
 * consumer is late (the ring crossed NVLP_RING_WAKE, or spilling began: a late mark, counted in
 * r->late), -1 when there is no room in either (nothing written, nothing counted). */
int nvlp_ring_put(struct nvlp_ring *r, unsigned kind, const void *fields, const void *blob,
                  size_t blob_len);

/* Producer side in two steps, for a record without blob built in place (no copy): nothing is
 * visible to the consumer before head is stored (with release) past it; see nvlp_emit_reserve. */
/*! Room for one record of kind with fbytes of fields at the head of r (or of its spill while
 * spilling), contiguous: @return where the fields go (with the head to store *end into in *headp;
 * a late mark is counted when that crosses NVLP_RING_WAKE), or NULL when that ring is full or the
 * record would wrap (then nvlp_ring_put, which spills it, splits it or reports the buffer full). */
static inline void *nvlp_ring_reserve(struct nvlp_ring *r, unsigned kind, uint64_t fbytes,
                                      _Atomic uint64_t **headp, uint64_t *end)
{
	struct nvlp_ring *own = r;
	if (__builtin_expect(r->spilling, 0)) {
		/* Stay on the spill until the writer has emptied it (the order of records). */
		struct nvlp_ring *s = r->spill;
		if (atomic_load_explicit(&s->tail, memory_order_acquire) !=
		    atomic_load_explicit(&s->head, memory_order_relaxed))
			r = s;
		else
			r->spilling = 0;
	}
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
	uint64_t off = h & (r->cap - 1);
	if (__builtin_expect(h - t + 8 + fbytes > r->cap || off + 8 + fbytes > r->cap, 0))
		return NULL;
	uint64_t mark = NVLP_RING_WAKE(r->cap);
	*headp = &r->head;
	*end = h + 8 + fbytes;
	if (__builtin_expect(r->wake_shift ? (h >> r->wake_shift) != (*end >> r->wake_shift)
	                                   : h - t < mark && *end - t >= mark,
	                     0))
		nvlp_ring_late(own);
	uint8_t *p = r->data + off;
	const uint32_t hdr[2] = {kind, 0};
	__builtin_memcpy(p, hdr, 8);
	return p + 8;
}
/* Consumer side. */
typedef int (*nvlp_ring_sink)(void *ctx, unsigned kind, const void *fields, const void *blob,
                              size_t blob_len);
/*! Hand every published record of r and then of its spill to sink (in order) and release the
 * space.
 * scratch must hold 8 * NVLP_MAX_FIELDS + NVLP_MAX_BLOB + 8 bytes. @return records consumed. */
uint64_t nvlp_ring_drain(struct nvlp_ring *r, nvlp_ring_sink sink, void *ctx, uint8_t *scratch);

/*! First ring of the registry (iterate with ->next). */
struct nvlp_ring *nvlp_ring_first(void);
/*! Number of rings ever mapped (bounded if rings are recycled). */
unsigned nvlp_ring_count(void);
/*! Number of RETIRED rings waiting for the writer. */
extern _Atomic unsigned nvlp_ring_retired;

/*! Fork child: every ring becomes FREE and empty (their threads do not exist here). */
void nvlp_ring_reset_all(void);

#endif /* NVLP_RT_RING_H */

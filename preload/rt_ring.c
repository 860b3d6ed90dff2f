/* rt_ring.c: per-thread SPSC record rings (lock-free hot path) and their recycling registry. */
#include <stdatomic.h> /* atomic_* */
#include <string.h>    /* memcpy */
#include <sys/mman.h>  /* mmap */

#include "nvlp_format.h"
#include "rt_ring.h"

/* Fixed-part sizes from the one X-macro list, so the hot path needs no table from trace/. */
static const unsigned char kind_nfields[NVLP_K_COUNT] = {
#define NVLP_R_NF(NAME, name, blob, FIELDS) [NVLP_K_##NAME] = sizeof(struct nvlp_rec_##name) / 8,
    NVLP_RECORD_KINDS(NVLP_R_NF)
#undef NVLP_R_NF
};

/* The registry of rings (a list, newest first) and how many it holds. */
static struct {
	struct nvlp_ring *_Atomic head;
	_Atomic unsigned count;
} ring_registry;
_Atomic unsigned nvlp_ring_retired;

unsigned nvlp_ring_nfields(unsigned kind)
{
	return kind < NVLP_K_COUNT ? kind_nfields[kind] : 0;
}

struct nvlp_ring *nvlp_ring_first(void)
{
	return atomic_load_explicit(&ring_registry.head, memory_order_acquire);
}

unsigned nvlp_ring_count(void)
{
	return atomic_load(&ring_registry.count);
}

/* One mapping holds the control block and the data; pages are only touched as used, so an idle
 * thread costs one page of memory. */
static struct nvlp_ring *map_ring(uint64_t cap)
{
	size_t ctl = 4096;
	void *m = mmap(NULL, ctl + cap, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
		/* A fork child resets every ring anyway: giving it zero pages instead of sharing
		 * them copy-on-write spares the parent a page fault (and TLB shootdown) per ring
		 * page written after each fork, which made forks under load ~100 ms slower. Best
		 * effort (Linux >= 4.14). */
#ifdef MADV_WIPEONFORK
	madvise((uint8_t *)m + ctl, cap, MADV_WIPEONFORK);
#endif
	struct nvlp_ring *r = m;
	r->cap = cap;
	r->data = (uint8_t *)m + ctl;
	return r;
}

struct nvlp_ring *nvlp_ring_acquire(uint64_t cap, uint64_t spill_cap, uint64_t tid)
{
	for (struct nvlp_ring *r = nvlp_ring_first(); r; r = r->next) {
		int expect = NVLP_RING_FREE;
		if (r->cap == cap &&
		    atomic_load_explicit(&r->state, memory_order_relaxed) == expect &&
		    atomic_compare_exchange_strong(&r->state, &expect, NVLP_RING_ACTIVE)) {
			r->tid = tid;
			r->spilling = 0;
			return r;
		}
	}
	struct nvlp_ring *r = map_ring(cap);
	if (!r)
		return NULL;
	for (; spill_cap >= cap && !r->spill; spill_cap /= 2)
		r->spill = map_ring(spill_cap);
	if (r->spill) {
		r->spill->release = 1;
		/* A spill in use means the writer is behind: a late mark at every half ring
		 * written, as a ring would count them, not at half the spill. */
		unsigned shift = 0;
		while ((2ull << shift) < cap)
			shift++;
		r->spill->wake_shift = shift;
	}
	r->tid = tid;
	atomic_store_explicit(&r->state, NVLP_RING_ACTIVE, memory_order_relaxed);
	struct nvlp_ring *old = atomic_load_explicit(&ring_registry.head, memory_order_relaxed);
	do
		r->next = old;
	while (!atomic_compare_exchange_weak_explicit(&ring_registry.head, &old, r,
	                                              memory_order_release, memory_order_relaxed));
	atomic_fetch_add(&ring_registry.count, 1);
	return r;
}

/* Copy into / out of the circular buffer at a free-running position, splitting at the end. */
static inline void ring_write(struct nvlp_ring *r, uint64_t pos, const void *src, size_t n)
{
	uint64_t off = pos & (r->cap - 1);
	uint64_t first = r->cap - off;
	if (n <= first) {
		memcpy(r->data + off, src, n);
	} else {
		memcpy(r->data + off, src, first);
		memcpy(r->data, (const uint8_t *)src + first, n - first);
	}
}

static inline void ring_read(const struct nvlp_ring *r, uint64_t pos, void *dst, size_t n)
{
	uint64_t off = pos & (r->cap - 1);
	uint64_t first = r->cap - off;
	if (n <= first) {
		memcpy(dst, r->data + off, n);
	} else {
		memcpy(dst, r->data + off, first);
		memcpy((uint8_t *)dst + first, r->data, n - first);
	}
}

/* Append to one ring: @return as nvlp_ring_put. */
static int put_one(struct nvlp_ring *r, unsigned kind, uint64_t fbytes, const void *fields,
                   const void *blob, size_t blob_len)
{
	uint64_t need = 8 + fbytes + ((blob_len + 7) & ~(uint64_t)7);
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (h - t + need > r->cap)
		return -1;
	uint32_t hdr[2] = {kind, (uint32_t)blob_len};
	ring_write(r, h, hdr, 8);
	ring_write(r, h + 8, fields, fbytes);
	if (blob_len)
		ring_write(r, h + 8 + fbytes, blob, blob_len);
	atomic_store_explicit(&r->head, h + need, memory_order_release);
	if (r->wake_shift)
		return (h >> r->wake_shift) != ((h + need) >> r->wake_shift);
	uint64_t mark = NVLP_RING_WAKE(r->cap);
	return (h - t < mark && h + need - t >= mark) ? 1 : 0;
}

/* nvlp_ring_put without the late mark. */
static int put_spill(struct nvlp_ring *r, unsigned kind, const void *fields, const void *blob,
                     size_t blob_len)
{
	uint64_t fbytes = (uint64_t)nvlp_ring_nfields(kind) * 8;
	struct nvlp_ring *s = r->spill;
	if (r->spilling) {
		/* Back to the ring only once the writer has taken everything spilled. */
		if (atomic_load_explicit(&s->tail, memory_order_acquire) !=
		    atomic_load_explicit(&s->head, memory_order_relaxed))
			return put_one(s, kind, fbytes, fields, blob, blob_len);
		r->spilling = 0;
	}
	int rc = put_one(r, kind, fbytes, fields, blob, blob_len);
	if (rc >= 0 || !s)
		return rc;
	rc = put_one(s, kind, fbytes, fields, blob, blob_len);
	if (rc < 0)
		return -1;
	r->spilling = 1;
	return 1; /* the writer is behind */
}

int nvlp_ring_put(struct nvlp_ring *r, unsigned kind, const void *fields, const void *blob,
                  size_t blob_len)
{
	int rc = put_spill(r, kind, fields, blob, blob_len);
	if (rc > 0)
		nvlp_ring_late(r);
	return rc;
}

/* Give back the pages that the drained positions [a, b) covered entirely; called before tail
 * moves past b, so the producer cannot be writing there. */
static void release_pages(struct nvlp_ring *r, uint64_t a, uint64_t b)
{
	const uint64_t pg = 4096;
	a = (a + pg - 1) & ~(pg - 1);
	b &= ~(pg - 1);
	while (a < b) {
		uint64_t off = a & (r->cap - 1);
		uint64_t len = b - a < r->cap - off ? b - a : r->cap - off;
		madvise(r->data + off, len, MADV_DONTNEED);
		a += len;
	}
}

/* Drain r up to position h. */
static uint64_t drain_one(struct nvlp_ring *r, uint64_t h, nvlp_ring_sink sink, void *ctx,
                          uint8_t *scratch)
{
	uint64_t t0 = atomic_load_explicit(&r->tail, memory_order_relaxed), t = t0;
	uint64_t n = 0;
	while (t < h) {
		uint32_t hdr[2];
		ring_read(r, t, hdr, 8);
		uint64_t fbytes = (uint64_t)nvlp_ring_nfields(hdr[0]) * 8;
		uint64_t blen = hdr[1];
		uint64_t off = (t + 8) & (r->cap - 1);
		/* In place unless it wraps: the space is ours until tail moves past it, and a copy
		 * per record was a tenth of the writer's time. */
		const uint8_t *f = r->data + off;
		if (off + fbytes + blen > r->cap) {
			ring_read(r, t + 8, scratch, fbytes + blen);
			f = scratch;
		}
		sink(ctx, hdr[0], f, blen ? f + fbytes : NULL, blen);
		t += 8 + fbytes + ((blen + 7) & ~(uint64_t)7);
		n++;
	}
	if (t == t0)
		return 0;
	if (r->release)
		release_pages(r, t0, t);
	/* Release only after the copies: the producer may then overwrite the space. */
	atomic_store_explicit(&r->tail, t, memory_order_release);
	return n;
}

uint64_t nvlp_ring_drain(struct nvlp_ring *r, nvlp_ring_sink sink, void *ctx, uint8_t *scratch)
{
	struct nvlp_ring *s = r->spill;
	if (!s)
		return drain_one(r, atomic_load_explicit(&r->head, memory_order_acquire), sink, ctx,
		                 scratch);
	/* The spill's head first: every ring record written before those spilled records is then
	 * visible, and the producer writes the ring again only after the spill was emptied, so
	 * ring-then-spill up to these heads is the order the records were made in. */
	uint64_t hs = atomic_load_explicit(&s->head, memory_order_acquire);
	uint64_t n = drain_one(r, atomic_load_explicit(&r->head, memory_order_acquire), sink, ctx,
	                       scratch);
	return n + drain_one(s, hs, sink, ctx, scratch);
}

void nvlp_ring_reset_all(void)
{
	for (struct nvlp_ring *r = nvlp_ring_first(); r; r = r->next) {
		for (struct nvlp_ring *x = r; x; x = x == r ? r->spill : NULL) {
			atomic_store(&x->head, 0);
			atomic_store(&x->tail, 0);
		}
		r->spilling = 0;
		atomic_store(&r->drops, 0);
		r->drops_reported = 0;
		atomic_store(&r->late, 0);
		r->late_seen = 0;
		__atomic_store_n(&r->live.rec.kind, 0, __ATOMIC_RELAXED); /* gen runs on */
		atomic_store(&r->state, NVLP_RING_FREE);
	}
	atomic_store(&nvlp_ring_retired, 0);
}

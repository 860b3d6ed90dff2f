/* rt_emit.c: recording from any thread: a ring per thread, records put in place or copied, drops counted, notes. */
#include <errno.h>     /* errno */
#include <pthread.h>   /* pthread_key_t */
#include <stdarg.h>    /* va_list */
#include <stdatomic.h> /* atomic_* */
#include <stdio.h>     /* vsnprintf */
#include <stdlib.h>    /* free */
#include <string.h>    /* strerror */
#include <time.h>      /* nanosleep */

#include "nvlp_rt.h"
#include "rt_internal.h"
#include "rt_ring.h"

static pthread_key_t exit_key;

/* NVLPROF_CAPTURE's range (capture.c), set once at init before any record; NULL: keep all. */
const struct nvlp_record_filter *nvlp_rec_filter;

void nvlp_set_record_filter(const struct nvlp_record_filter *f)
{
	__atomic_store_n(&nvlp_rec_filter, f, __ATOMIC_RELEASE);
}

/* 1 when the filter does not keep this record (not written, and not a drop either). */
static inline int filtered_out(unsigned kind, const void *fields)
{
	const struct nvlp_record_filter *f = __atomic_load_n(&nvlp_rec_filter, __ATOMIC_RELAXED);
	return NVLP_UNLIKELY(f != NULL) && !f->keep(kind, fields);
}

/* What a thread's ring holds resident: 1 MiB (~6,000 NCCL records, plenty between two wake-ups
 * of the writer). NVLPROF_BUFFER_KB up to that is the ring itself (small, for tests that force
 * drops); above, it is the spill ring's reservation behind a 1 MiB ring, touched only in bursts
 * (rt_ring.h). Powers of two: index arithmetic by mask. */
#define RING_RESIDENT (1u << 20)
static uint64_t pow2_at_least(uint64_t want)
{
	uint64_t cap = 4096;
	while (cap < want)
		cap <<= 1;
	return cap;
}
static uint64_t ring_cap(void)
{
	uint64_t want = pow2_at_least((uint64_t)nvlp_cfg()->buffer_kb * 1024);
	return want < RING_RESIDENT ? want : RING_RESIDENT;
}
static uint64_t spill_cap(void)
{
	uint64_t want = pow2_at_least((uint64_t)nvlp_cfg()->buffer_kb * 1024);
	return want > RING_RESIDENT ? want : 0;
}

/* Open the trace and start the writer: called on the first record of the process (or of a fork
 * child, or after a failed exec). @return 0 if recording, -1 if not. */
static int ensure_writer(void)
{
	if (NVLP_LIKELY(nvlp_rt_trace_open()))
		return 0;
	if (!nvlp_wr_idle() || !nvlp_rt_active())
		return -1;
	int err = errno;
	nvlp_str_lock();
	nvlp_wr_lock();
	int ok = 0;
	if (nvlp_wr_idle() && nvlp_rt_active()) {
		/* The notes and every string known so far come first in the new file. */
		if (nvlp_wr_open_locked() == 0) {
			nvlp_str_replay_locked();
			ok = nvlp_wr_start_locked() == 0;
		}
	} else {
		ok = nvlp_rt_trace_open();
	}
	nvlp_wr_unlock();
	nvlp_str_unlock();
	if (ok)
		nvlp_wr_opened();
	errno = err;
	return ok ? 0 : -1;
}

/* The thread's first record: find it a ring (recycled when possible). */
static struct nvlp_ring *register_thread(struct nvlp_tls *t)
{
	if (ensure_writer() < 0)
		return NULL;
	int err = errno;
	/* Thread churn: when exited threads' rings pile up, give the writer a moment to recycle
	 * them instead of mapping yet another ring. */
	for (int i = 0; i < 20 && atomic_load(&nvlp_ring_retired) >= 16; i++) {
		nvlp_kick_writer();
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	struct nvlp_ring *r = nvlp_ring_acquire(ring_cap(), spill_cap(), t->tid);
	if (!r) {
		nvlp_warn_once(register_thread, "cannot map a %llu-byte thread buffer: %s",
		               (unsigned long long)ring_cap(), strerror(errno));
	} else {
		t->ring = r;
		t->live = &r->live;
		pthread_setspecific(exit_key, r);
	}
	errno = err;
	return r;
}

/* pthread key destructor: the thread is gone; its ring goes to the writer for a last drain. */
static void thread_exit(void *v)
{
	(void)v;
	struct nvlp_tls *t = &nvlp_tls_state;
	free(t->stack_scratch);
	t->stack_scratch = NULL;
	free(t->py_scratch);
	t->py_scratch = NULL;
	if (t->ring && t->epoch == nvlp_tls_epoch) {
		nvlp_live_end(t->live);
		atomic_fetch_add(&nvlp_ring_retired, 1);
		atomic_store_explicit(&t->ring->state, NVLP_RING_RETIRED, memory_order_release);
		nvlp_kick_writer();
	}
	t->ring = NULL;
	t->live = NULL;
}

struct nvlp_live *nvlp_live_slow(struct nvlp_tls *t)
{
	if (!nvlp_rt_active() || !nvlp_record_gate_open())
		return NULL;
	if (!t->ring && !register_thread(t))
		return NULL;
	return t->live;
}

static inline int valid(unsigned kind, size_t blob_len)
{
	return kind > NVLP_K_NONE && kind < NVLP_K_COUNT && blob_len <= NVLP_MAX_BLOB;
}

int nvlp_emit(unsigned kind, const void *fields, const void *blob, size_t blob_len)
{
	if (NVLP_UNLIKELY(!nvlp_rt_active() || !valid(kind, blob_len)))
		return -1;
	/* Outside NVLPROF_CAPTURE's range: not written, and not a drop either. */
	if (filtered_out(kind, fields))
		return 0;
	/* No writer yet (first record of the process, or again after a failed exec). */
	if (NVLP_UNLIKELY(!nvlp_rt_trace_open()) && ensure_writer() < 0)
		return -1;
	struct nvlp_tls *t = nvlp_tls();
	struct nvlp_ring *r = t->ring;
	if (NVLP_UNLIKELY(!r) && !(r = register_thread(t)))
		return -1;
	/* No wake-up when the writer is late (rc 1): that was a write(2) on this thread; the
	 * writer's polling keeps the spill from filling (rt_writer.c). */
	if (NVLP_LIKELY(nvlp_ring_put(r, kind, fields, blob, blob_len) >= 0))
		return 0;
	atomic_fetch_add_explicit(&r->drops, 1, memory_order_relaxed);
	return -1;
}

void *nvlp_emit_reserve(unsigned kind, struct nvlp_emit_slot *slot)
{
	if (NVLP_UNLIKELY(!nvlp_rt_active() || !valid(kind, 0) || !nvlp_rt_trace_open() ||
	                  !nvlp_record_gate_open()))
		return NULL; /* nvlp_emit decides (and counts) */
	struct nvlp_ring *r = nvlp_tls()->ring;
	if (NVLP_UNLIKELY(!r))
		return NULL;
	uint64_t fbytes = (uint64_t)nvlp_ring_nfields(kind) * 8;
	_Atomic uint64_t *head = NULL;
	void *p = nvlp_ring_reserve(r, kind, fbytes, &head, &slot->end);
	slot->head = (uint64_t *)head;
	return p;
}

int nvlp_emit_wait(unsigned kind, const void *fields, const void *blob, size_t blob_len,
                   int timeout_ms)
{
	if (!nvlp_rt_active() || !valid(kind, blob_len) || ensure_writer() < 0)
		return -1;
	if (filtered_out(kind, fields))
		return 0;
	struct nvlp_tls *t = nvlp_tls();
	struct nvlp_ring *r = t->ring;
	if (!r && !(r = register_thread(t)))
		return -1;
	int err = errno;
	for (int waited = 0;; waited++) {
		int rc = nvlp_ring_put(r, kind, fields, blob, blob_len);
		if (rc >= 0) {
			errno = err;
			return 0;
		}
		if (waited >= timeout_ms || !nvlp_rt_active())
			break;
		if (nvlp_wr_is_writer_thread()) {
			/* The writer itself produces (CUPTI flush during a signal shutdown): nobody
			 * else will drain, so drain here. */
			nvlp_wr_drain_now();
		} else {
			nvlp_kick_writer();
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	atomic_fetch_add_explicit(&r->drops, 1, memory_order_relaxed);
	errno = err;
	return -1;
}

void nvlp_note(unsigned code, int device, uint64_t value, const char *fmt, ...)
{
	int err = errno;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if (n >= (int)sizeof msg)
		n = sizeof msg - 1;
	struct nvlp_rec_note rec = {
	    .code = code, .t = nvlp_now(), .device = (uint64_t)(int64_t)device, .value = value};
	nvlp_emit(NVLP_K_NOTE, &rec, msg, (size_t)n);
	errno = err;
}

void nvlp_emit_init(void)
{
	pthread_key_create(&exit_key, thread_exit);
}

/* activity.c: the one owner of CUPTI's activity buffers: which kinds are on, buffer callbacks, conversion to trace records, flushes. */
/*
 * Kineto (share.c) sits above this file: it registers its hooks here (nvlp_act_set_share) and
 * calls down into the flush and drain; nothing here calls share.c by name.
 */
#include <pthread.h> /* pthread_mutex_t */
#include <sched.h>   /* sched_yield */
#include <stdio.h>   /* snprintf */
#include <stdlib.h>  /* aligned_alloc, free */
#include <string.h>  /* memcpy, strlen */

#include "cupti_int.h"
#include "nvlp_cost.h"
#include "nvlp_rt.h"


/* Activity buffer: the low end of CUPTI's recommended 1-10 MiB range. CUPTI hands a buffer over
 * when it is full (a few thousand records), which is how records reach the trace between the
 * rare forced flushes (NVLPROF_GPU_FLUSH_MS). */
#define BUF_SIZE (1u << 20)
#define MAX_OWN_BUFS 256

static struct {
	volatile int state;                               /* enum nvlp_cupti_state */
	unsigned char enabled[CUPTI_ACTIVITY_KIND_COUNT]; /* kinds we enabled */
	pthread_mutex_t buf_mu;  /* own-buffer set (taken on the buffer-request path: kept short) */
	pthread_mutex_t conv_mu; /* record conversion (devmap); may wait on the trace writer */
	uint8_t *own[MAX_OWN_BUFS];
	struct nvlp_cupti_devmap devmap;
	uint64_t dropped_total, lost, records;
	const struct nvlp_act_share *share; /* Kineto's side, once share.c registered it */
	/* threads inside a CUPTI call made outside the flush thread (stream ids, UM counters): a
	 * detach (detach.c) waits for none before cuptiFinalize, which must not race another */
	int cupti_users;
} activity_state = {
    .buf_mu = PTHREAD_MUTEX_INITIALIZER,
    .conv_mu = PTHREAD_MUTEX_INITIALIZER,
};

int nvlp_cupti_state(void)
{
	return __atomic_load_n(&activity_state.state, __ATOMIC_ACQUIRE);
}

void nvlp_act_set_state(int state)
{
	__atomic_store_n(&activity_state.state, state, __ATOMIC_RELEASE);
}

int nvlp_cupti_we_enabled(int kind)
{
	return kind >= 0 && kind < CUPTI_ACTIVITY_KIND_COUNT &&
	       __atomic_load_n(&activity_state.enabled[kind], __ATOMIC_RELAXED);
}

void nvlp_act_set_share(const struct nvlp_act_share *share)
{
	__atomic_store_n(&activity_state.share, share, __ATOMIC_RELEASE);
}

static const struct nvlp_act_share *share(void)
{
	return __atomic_load_n(&activity_state.share, __ATOMIC_ACQUIRE);
}

static void own_add(uint8_t *b)
{
	pthread_mutex_lock(&activity_state.buf_mu);
	for (int i = 0; i < MAX_OWN_BUFS; i++)
		if (!activity_state.own[i]) {
			activity_state.own[i] = b;
			break;
		}
	pthread_mutex_unlock(&activity_state.buf_mu);
}

/* @return 1 if b was ours (and forgets it) */
static int own_take(uint8_t *b)
{
	int found = 0;
	pthread_mutex_lock(&activity_state.buf_mu);
	for (int i = 0; i < MAX_OWN_BUFS; i++)
		if (activity_state.own[i] == b) {
			activity_state.own[i] = NULL;
			found = 1;
			break;
		}
	pthread_mutex_unlock(&activity_state.buf_mu);
	return found;
}

void CUPTIAPI nvlp_cupti_buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
	CUpti_BuffersCallbackRequestFunc k = share() ? share()->request_cb() : NULL;
	if (k) {
		/* Kineto is tracing: let it allocate, so the buffers it gets back are its own */
		k(buf, size, max_records);
		if (*buf)
			return;
	}
	*buf = aligned_alloc(8, BUF_SIZE);
	*size = *buf ? BUF_SIZE : 0;
	*max_records = 0;
	if (*buf) {
		own_add(*buf);
		nvlp_cost_mem(BUF_SIZE);
	}
}

static void emit(unsigned kind, const void *rec, const void *blob, size_t len)
{
	if (nvlp_emit_wait(kind, rec, blob, len, 1000) != 0)
		__atomic_fetch_add(&activity_state.lost, 1, __ATOMIC_RELAXED);
}

/* Convert and emit every record of ours in a completed buffer. */
static void process_buffer(uint8_t *buf, size_t valid)
{
	CUpti_Activity *a = NULL;
	struct nvlp_cupti_clock clk;
	nvlp_cupti_clock_get(&clk);
	/* devmap; CUPTI may complete buffers on several threads */
	pthread_mutex_lock(&activity_state.conv_mu);
	while (nvlp_cu.cuptiActivityGetNextRecord(buf, valid, &a) == CUPTI_SUCCESS) {
		if (!nvlp_cupti_we_enabled((int)a->kind))
			continue; /* only Kineto asked for this kind */
		union nvlp_cupti_rec r;
		const char *text;
		unsigned kind = nvlp_cupti_convert(a, &clk, &activity_state.devmap, &r, &text);
		if (!kind)
			continue;
		activity_state.records++;
		if (kind == NVLP_K_KERNEL) {
			r.kernel.name = text ? nvlp_intern(text) : 0;
			emit(kind, &r, NULL, 0);
		} else if (kind == NVLP_K_DEVICE) {
			nvlp_drv_device_pci(&r.device);
			emit(kind, &r, text, text ? strlen(text) : 0);
		} else {
			emit(kind, &r, NULL, 0);
		}
		struct nvlp_rec_gpugraph gn; /* graph replays: which graph and execution (graphs.c) */
		if (nvlp_cupti_graph_node(a, &r, kind, &gn))
			emit(NVLP_K_GPUGRAPH, &gn, NULL, 0);
	}
	pthread_mutex_unlock(&activity_state.conv_mu);
}

/* Completed buffers of ours wait here for the flush schedule (cupti.c). CUPTI calls the completion
 * callback from inside its flush or its worker, where the application's kernel launches can wait
 * on it (a flush itself held them up 4-11 ms on H200); converting a buffer took up to 5 ms more
 * there. The callback therefore only queues the buffer; nvlp_cupti_drain converts it after the
 * flush returns. Buffers that Kineto shares are converted at once (its flush must see its
 * records). */
#define PEND_MAX 64
static struct {
	pthread_mutex_t mu;
	int n;
	struct pend {
		CUcontext ctx;
		uint32_t sid;
		uint8_t *buf;
		size_t size, valid;
	} b[PEND_MAX];
	/* cost of our flushes, for NVLPROF_VERBOSE */
	uint64_t flushes, flush_ns, flush_max, drain_ns, drain_max, buffers;
} completed_queue = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void finish_buffer(CUcontext ctx, uint32_t sid, uint8_t *buf, size_t size, size_t valid,
                          int ours)
{
	if (buf && share() && share()->complete(ctx, sid, buf, size, valid, ours))
		return;
	if (ours) {
		free(buf);
		nvlp_cost_mem(-(int64_t)BUF_SIZE);
	}
}

void CUPTIAPI nvlp_cupti_buf_complete(CUcontext ctx, uint32_t stream_id, uint8_t *buf, size_t size,
                                      size_t valid)
{
	int st = nvlp_cupti_state();
	size_t dropped = 0;
	if (st == NVLP_CS_ACTIVE && nvlp_cu.cuptiActivityGetNumDroppedRecords &&
	    nvlp_cu.cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS &&
	    dropped) {
		__atomic_fetch_add(&activity_state.dropped_total, dropped, __ATOMIC_RELAXED);
		nvlp_note(NVLP_NOTE_ACTIVITY_DROPPED, -1, dropped,
		          "CUPTI dropped %zu activity records (buffers full before they were "
		          "completed)",
		          dropped);
	}
	int ours = buf ? own_take(buf) : 0;
	if (ours && st == NVLP_CS_ACTIVE && !(share() && share()->client())) {
		pthread_mutex_lock(&completed_queue.mu);
		if (completed_queue.n < PEND_MAX) {
			completed_queue.b[completed_queue.n++] =
			    (struct pend){ctx, stream_id, buf, size, valid};
			completed_queue.buffers++;
			pthread_mutex_unlock(&completed_queue.mu);
			return;
		}
		/* queue full: convert here rather than lose them */
		pthread_mutex_unlock(&completed_queue.mu);
	}
	if (buf && valid && st == NVLP_CS_ACTIVE)
		process_buffer(buf, valid);
	finish_buffer(ctx, stream_id, buf, size, valid, ours);
}

void nvlp_cupti_drain(void)
{
	for (;;) {
		struct pend b[PEND_MAX];
		pthread_mutex_lock(&completed_queue.mu);
		int n = completed_queue.n;
		memcpy(b, completed_queue.b, (size_t)n * sizeof b[0]);
		completed_queue.n = 0;
		pthread_mutex_unlock(&completed_queue.mu);
		if (!n)
			return;
		for (int i = 0; i < n; i++) {
			if (b[i].valid)
				process_buffer(b[i].buf, b[i].valid);
			finish_buffer(b[i].ctx, b[i].sid, b[i].buf, b[i].size, b[i].valid, 1);
		}
	}
}

/* One flush of CUPTI's buffers, then their conversion; timed for NVLPROF_VERBOSE. */
static void flush_and_drain(uint32_t flag)
{
	uint64_t t0 = nvlp_now();
	nvlp_cu.cuptiActivityFlushAll(flag);
	uint64_t t1 = nvlp_now();
	nvlp_cupti_drain();
	uint64_t t2 = nvlp_now();
	pthread_mutex_lock(&completed_queue.mu);
	completed_queue.flushes++;
	completed_queue.flush_ns += t1 - t0;
	completed_queue.drain_ns += t2 - t1;
	if (t1 - t0 > completed_queue.flush_max)
		completed_queue.flush_max = t1 - t0;
	if (t2 - t1 > completed_queue.drain_max)
		completed_queue.drain_max = t2 - t1;
	pthread_mutex_unlock(&completed_queue.mu);
}

void nvlp_act_flush(uint32_t flag)
{
	flush_and_drain(flag);
}

int nvlp_act_enable(CUpti_ActivityKind kind, const char *name, char *list, size_t listlen)
{
	CUptiResult r = nvlp_cu.cuptiActivityEnable(kind);
	size_t l = list ? strlen(list) : 0;
	if (r == CUPTI_SUCCESS) {
		__atomic_store_n(&activity_state.enabled[kind], 1, __ATOMIC_RELAXED);
		if (list)
			snprintf(list + l, listlen - l, "%s%s", l ? " " : "", name);
		return 0;
	}
	nvlp_note(NVLP_NOTE_ACTIVITY_ON, -1, (uint64_t)r, "CUPTI activity kind %s not enabled: %s",
	          name, nvlp_cupti_err(r));
	return (int)r;
}

void nvlp_act_mark_enabled(CUpti_ActivityKind kind)
{
	__atomic_store_n(&activity_state.enabled[kind], 1, __ATOMIC_RELAXED);
}

int nvlp_act_enter(void)
{
	__atomic_fetch_add(&activity_state.cupti_users, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&activity_state.state, __ATOMIC_SEQ_CST) == NVLP_CS_ACTIVE)
		return 1;
	__atomic_fetch_sub(&activity_state.cupti_users, 1, __ATOMIC_SEQ_CST);
	return 0;
}

void nvlp_act_leave(void)
{
	__atomic_fetch_sub(&activity_state.cupti_users, 1, __ATOMIC_SEQ_CST);
}

int nvlp_act_quiesce(uint64_t max_ns)
{
	__atomic_store_n(&activity_state.state, NVLP_CS_ASIDE, __ATOMIC_SEQ_CST);
	uint64_t t0 = nvlp_now();
	while (__atomic_load_n(&activity_state.cupti_users, __ATOMIC_SEQ_CST) > 0) {
		if (nvlp_now() - t0 > max_ns) {
			__atomic_store_n(&activity_state.state, NVLP_CS_ACTIVE, __ATOMIC_SEQ_CST);
			return -1;
		}
		sched_yield();
	}
	return 0;
}

void nvlp_act_disable_ours(void)
{
	for (int k = 0; k < CUPTI_ACTIVITY_KIND_COUNT; k++)
		if (__atomic_exchange_n(&activity_state.enabled[k], 0, __ATOMIC_RELAXED))
			nvlp_cu.cuptiActivityDisable((CUpti_ActivityKind)k);
}

int nvlp_act_client(void)
{
	const struct nvlp_act_share *sh = share();
	return sh && sh->client && sh->client();
}

void nvlp_act_stats(uint64_t *records, uint64_t *dropped, uint64_t *lost)
{
	*records = activity_state.records;
	*dropped = __atomic_load_n(&activity_state.dropped_total, __ATOMIC_RELAXED);
	*lost = __atomic_load_n(&activity_state.lost, __ATOMIC_RELAXED);
}

void nvlp_act_report_verbose(void)
{
	nvlp_warn("CUPTI: %llu buffers; %llu forced flushes, in cuptiActivityFlushAll "
	          "%.2f ms (max %.2f), converting after them %.2f ms (max %.2f)",
	          (unsigned long long)completed_queue.buffers,
	          (unsigned long long)completed_queue.flushes, completed_queue.flush_ns / 1e6,
	          completed_queue.flush_max / 1e6, completed_queue.drain_ns / 1e6,
	          completed_queue.drain_max / 1e6);
}

void nvlp_act_atfork_child(void)
{
	activity_state.state = NVLP_CS_ASIDE;
	activity_state.cupti_users = 0;
	pthread_mutex_init(&activity_state.buf_mu, NULL);
	pthread_mutex_init(&activity_state.conv_mu, NULL);
	pthread_mutex_init(&completed_queue.mu, NULL);
	completed_queue.n = 0; /* the parent's queued buffers are its own to convert */
}

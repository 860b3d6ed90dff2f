/* rt_writer.c: the trace being written: its state, lock and writer thread (drain every ring, flush, end). */
#include <errno.h>       /* errno */
#include <fcntl.h>       /* O_CLOEXEC */
#include <limits.h>      /* PATH_MAX */
#include <poll.h>        /* poll */
#include <pthread.h>     /* pthread_* */
#include <signal.h>      /* sigset_t */
#include <stdatomic.h>   /* atomic_* */
#include <stdio.h>       /* snprintf */
#include <stdlib.h>      /* free */
#include <string.h>      /* strerror */
#include <sys/syscall.h> /* SYS_getpid */
#include <time.h>        /* clock_gettime */
#include <unistd.h>      /* write, pipe2 */

#include "nvlp_cost.h"
#include "nvlp_rt.h"
#include "nvlp_trace.h"
#include "rt_internal.h"
#include "rt_ring.h"
#include "rt_symbols.h"

/* Symbols for the frames of the trace's stacks are bounded: a signal handler waits 3 s for all of
 * the end. */
#define SYMBOLS_BUDGET_NS 1000000000ull

enum { W_IDLE, W_RUNNING, W_CLOSED, W_FAILED };
/* Lock order: the strings' lock before writer_lock.mu. It guards the writer, the drain and the
 * state below that is neither atomic nor a signal handler's. */
static struct {
	pthread_mutex_t mu;
	/* Threads waiting for mu. The writer holds it for long stretches under load and glibc
	 * mutexes are not fair, so it steps aside between rings while anyone waits (fork must not
	 * starve). */
	_Atomic int waiters;
} writer_lock = {.mu = PTHREAD_MUTEX_INITIALIZER};
/* The trace being written. */
static struct {
	_Atomic int state; /* W_* */
	nvlp_writer *writer;
	char path[PATH_MAX + 64];
	pid_t forked_from;
	struct nvlp_rt_hooks hooks;
} trace_out;
static struct {
	pthread_t id;
	int live;
} writer_thread;
/* What the drain moves and counts. */
static struct {
	uint8_t scratch[8 * NVLP_MAX_FIELDS + NVLP_MAX_BLOB + 8];
	uint64_t drops;
	/* Late marks (rt_ring.h) seen, for NVLPROF_VERBOSE. */
	uint64_t late;
	/* The most any one ring had filled since the previous drain, in 1/64ths of it (the
	 * writer's polling interval follows it). */
	uint64_t fill_64ths;
} drain_state;
volatile pid_t nvlp_rt_pid;
/* Wake-up pipe (kicks, signal requests) and the answer pipe for signal handlers. Created with the
 * first trace of the process and kept: a signal handler may write to them at any time. */
static struct {
	int kick_rd, kick_wr, ans_rd, ans_wr;
	_Atomic int pending;
	/* Kicks that reached the pipe (a syscall each, on the thread that kicked: a thread's first
	 * record, its exit, a bulk producer waiting for room; never a record on the hot path), for
	 * NVLPROF_VERBOSE. */
	_Atomic uint64_t kicks;
} wake_pipe = {.kick_rd = -1, .kick_wr = -1, .ans_rd = -1, .ans_wr = -1};
/* How the process ends: what signal handlers and the exit hooks leave for the writer thread. */
static struct {
	/* Set by a signal handler, read by the writer thread: a lock-free atomic int is both
	 * async-signal-safe and what ThreadSanitizer expects between threads. */
	int sig_req;
	/* A fatal signal's details, set by its handler before sig_req (FATAL record at the end). */
	uint64_t fatal_tid, fatal_code, fatal_addr;
	/* ... and the stacker stacks.c registered, which takes and writes the stack of its thread */
	const struct nvlp_fatal_stacker *stacker;
	/* The FATAL record was written when the signal came (fatal_early), not at the end. */
	int fatal_written;
	/* The status the process passed to exit/_exit (-1: not seen, e.g. main returned). */
	int exit_status;
} end_cause = {.exit_status = -1};
/* What recording cost so far, every COST_PERIOD_NS (at a heartbeat) and at the end: a COST record
 * in a frame of its own (a reader older than the kind loses that frame only). last: when the
 * last one was taken. */
static struct {
	uint64_t last;
	struct nvlp_rec_cost rec;
} cost_report;

void nvlp_rt_set_exit_status(int status)
{
	__atomic_store_n(&end_cause.exit_status, status, __ATOMIC_RELEASE);
}

static void wlock(void)
{
	atomic_fetch_add(&writer_lock.waiters, 1);
	pthread_mutex_lock(&writer_lock.mu);
	atomic_fetch_sub(&writer_lock.waiters, 1);
}

/* Writer thread only, holding writer_lock.mu: let waiting threads in. */
static void yield_locked(void)
{
	if (!atomic_load_explicit(&writer_lock.waiters, memory_order_relaxed))
		return;
	pthread_mutex_unlock(&writer_lock.mu);
	for (int i = 0; i < 100000 && atomic_load(&writer_lock.waiters); i++) {
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&writer_lock.mu);
}

void nvlp_rt_set_hooks(const struct nvlp_rt_hooks *h)
{
	trace_out.hooks = *h;
}

void nvlp_wr_lock(void)
{
	wlock();
}

void nvlp_wr_unlock(void)
{
	pthread_mutex_unlock(&writer_lock.mu);
}

int nvlp_rt_trace_open(void)
{
	return atomic_load(&trace_out.state) == W_RUNNING;
}

void nvlp_kick_writer(void)
{
	if (atomic_load_explicit(&trace_out.state, memory_order_relaxed) != W_RUNNING)
		return;
	/* Coalesce: one byte in the pipe is enough until the writer wakes. */
	if (atomic_exchange(&wake_pipe.pending, 1))
		return;
	atomic_fetch_add_explicit(&wake_pipe.kicks, 1, memory_order_relaxed);
	int e = errno;
	(void)!write(wake_pipe.kick_wr, "k", 1);
	errno = e;
}

int nvlp_wr_idle(void)
{
	return atomic_load(&trace_out.state) == W_IDLE;
}

int nvlp_rt_in_vfork_child(void)
{
	return (pid_t)syscall(SYS_getpid) != nvlp_rt_pid;
}

/* ---- the writer thread ---------------------------------------------------------------------- */

static int sink(void *ctx, unsigned kind, const void *fields, const void *blob, size_t blob_len)
{
	(void)ctx;
	if (kind == NVLP_K_STACK || kind == NVLP_K_MODULE || kind == NVLP_K_BUILDID)
		nvlp_syms_seen(kind, fields, blob, blob_len);
	return nvlp_writer_add(trace_out.writer, kind, fields, blob, blob_len);
}

static void write_failed_locked(int err)
{
	nvlp_warn("cannot write trace %s: %s; recording stopped", trace_out.path, strerror(err));
	nvlp_rt_set_active(0);
	nvlp_writer_abandon(trace_out.writer);
	trace_out.writer = NULL;
	atomic_store(&trace_out.state, W_FAILED);
}

static void flush_locked(void)
{
	if (nvlp_writer_flush(trace_out.writer) < 0)
		write_failed_locked(errno);
}

/* Bytes a drain took from r and its spill, as a share of r's size in 1/64ths. */
static uint64_t taken_64ths(const struct nvlp_ring *r, uint64_t t0, uint64_t s0)
{
	uint64_t n = atomic_load_explicit(&r->tail, memory_order_relaxed) - t0;
	if (r->spill)
		n += atomic_load_explicit(&r->spill->tail, memory_order_relaxed) - s0;
	return n * 64 / r->cap;
}

/* Move every ring's records into the writer; report drop counts; recycle rings of dead threads. */
static void drain_locked(int can_yield)
{
	drain_state.fill_64ths = 0;
	for (struct nvlp_ring *r = nvlp_ring_first(); r; r = r->next) {
		if (can_yield)
			yield_locked();
		/* The trace may have been ended (or failed) while we stepped aside. */
		if (!trace_out.writer || atomic_load(&trace_out.state) != W_RUNNING)
			return;
		int st = atomic_load_explicit(&r->state, memory_order_acquire);
		if (st == NVLP_RING_FREE)
			continue;
		uint64_t t0 = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t s0 =
		    r->spill ? atomic_load_explicit(&r->spill->tail, memory_order_relaxed) : 0;
		nvlp_ring_drain(r, sink, NULL, drain_state.scratch);
		uint64_t f = taken_64ths(r, t0, s0);
		if (f > drain_state.fill_64ths)
			drain_state.fill_64ths = f;
		uint64_t d = atomic_load_explicit(&r->drops, memory_order_relaxed);
		if (d != r->drops_reported) {
			struct nvlp_rec_drops rec = {.tid = r->tid, .dropped = d, .t = nvlp_now()};
			nvlp_writer_add(trace_out.writer, NVLP_K_DROPS, &rec, NULL, 0);
			drain_state.drops += d - r->drops_reported;
			r->drops_reported = d;
		}
		uint64_t l = atomic_load_explicit(&r->late, memory_order_relaxed);
		drain_state.late += l - r->late_seen;
		r->late_seen = l;
		if (st == NVLP_RING_RETIRED) {
			atomic_store_explicit(&r->drops, 0, memory_order_relaxed);
			r->drops_reported = 0;
			atomic_store_explicit(&r->late, 0, memory_order_relaxed);
			r->late_seen = 0;
			atomic_store_explicit(&r->state, NVLP_RING_FREE, memory_order_release);
			atomic_fetch_sub(&nvlp_ring_retired, 1);
		}
		/* Keep frames bounded when a burst filled many rings. */
		if (nvlp_writer_pending(trace_out.writer) > (8u << 20))
			flush_locked();
	}
}

static void fatal_locked(void);
static void inflight_locked(const struct nvlp_rec_inflight *x, unsigned n);

/* A fatal signal: its FATAL record and the calls in progress go to the file at once, before the
 * end of the trace is attempted. That end stops CUPTI first, whose flush can block for good when
 * the GPU or the driver is stuck (seen on the GPU machine: a rank aborted by torch's heartbeat
 * monitor while its AllReduce hung left a trace with neither FATAL nor END). */
static void fatal_early(void)
{
	if (!__atomic_load_n(&end_cause.fatal_tid, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&writer_lock.mu);
	if (atomic_load(&trace_out.state) == W_RUNNING && trace_out.writer) {
		drain_locked(0);
		struct nvlp_rec_inflight x[16];
		if (trace_out.writer)
			inflight_locked(x, nvlp_live_scan(nvlp_now(), 0, 1, x, 16));
		if (trace_out.writer) {
			fatal_locked();
			end_cause.fatal_written = 1;
		}
	}
	pthread_mutex_unlock(&writer_lock.mu);
}

/* Ends the trace for a signal handler (see writer_main); inherits the writer's signal mask. */
static void *stopper_main(void *arg)
{
	(void)arg;
	if (trace_out.hooks.end_for_signal)
		trace_out.hooks.end_for_signal();
	(void)!write(wake_pipe.ans_wr, "a", 1);
	return NULL;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- once a second: heartbeat, calls in progress, OOM kills ------------------------------ */

/* The writer's watch period. A heartbeat CLOCK record (mono, CLOCK_REALTIME) goes out in a frame
 * of its own making at every one, so a trace cut short by kill -9 says when its process was last
 * alive to within this period (and the poll interval). Idle, that is one small frame per period
 * (bytes per hour in README). 500 ms = the default flush period, so a busy trace gets no extra
 * frame. */
#define WATCH_NS 500000000ull
/* A call in progress longer than this is written as INFLIGHT, each once; at most LIVE_MAX per
 * period (a few per second). */
#define LIVE_AGE_NS 1000000000ull
#define LIVE_MAX 4

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Each INFLIGHT in a frame of its own: a reader older than the kind loses that frame only. */
static void inflight_locked(const struct nvlp_rec_inflight *x, unsigned n)
{
	for (unsigned i = 0; i < n && trace_out.writer; i++) {
		flush_locked();
		if (trace_out.writer)
			nvlp_writer_add(trace_out.writer, NVLP_K_INFLIGHT, &x[i], NULL, 0);
		if (trace_out.writer)
			flush_locked();
	}
}

static void note_locked(unsigned code, uint64_t value, const char *msg);

#define COST_PERIOD_NS 10000000000ull

static void cost_locked(void)
{
	nvlp_cost_fill(&cost_report.rec, trace_out.writer);
	flush_locked();
	if (trace_out.writer)
		nvlp_writer_add(trace_out.writer, NVLP_K_COST, &cost_report.rec, NULL, 0);
	if (trace_out.writer)
		flush_locked();
}

/* Holding writer_lock.mu with a trace open; ends with a flush (the heartbeat's frame). */
static void watch_locked(void)
{
	struct nvlp_rec_inflight x[LIVE_MAX];
	inflight_locked(x, nvlp_live_scan(nvlp_now(), LIVE_AGE_NS, 0, x, LIVE_MAX));
	uint64_t oom;
	if (trace_out.writer && nvlp_oom_changed(&oom)) {
		char m[96];
		snprintf(m, sizeof m, "the cgroup's oom_kill count is now %llu",
		         (unsigned long long)oom);
		note_locked(NVLP_NOTE_OOM_KILL, oom, m);
	}
	if (!trace_out.writer)
		return;
	uint64_t now = nvlp_now();
	if (now - cost_report.last >= COST_PERIOD_NS) {
		cost_locked();
		cost_report.last = now;
	}
	if (!trace_out.writer)
		return;
	struct nvlp_rec_clock hb = {
	    .source = NVLP_CLOCK_HEARTBEAT, .mono = nvlp_now(), .other = real_ns()};
	nvlp_writer_add(trace_out.writer, NVLP_K_CLOCK, &hb, NULL, 0);
	flush_locked();
}

/* The longest the writer sleeps between two polls. Producers never wake it, so this bounds what a
 * thread's buffers must absorb while it sleeps: at 1 M records/s (176 bytes each in the ring),
 * 100 ms is 17.6 MB, a quarter of the default 1 MiB ring + 64 MiB spill (~380 ms of that rate).
 * Idle, it costs ~10 wake-ups a second (CPU measured in the commit that set it). */
#define POLL_MAX_NS 100000000ull

/*
 * The writer polls the rings at an interval that follows how full the fullest one got since the
 * last drain: halved when it reached 3/8 (down to 1 ms; at once to 1 ms past half), doubled when it
 * stayed under 1/16 (up to POLL_MAX_NS, or NVLPROF_FLUSH_MS when shorter). Producers never wake it
 * (no syscall on the hot path): a burst that starts while it sleeps goes to the spill, which holds
 * more than a sleep's worth at 1 M records/s; the ring alone (NVLPROF_BUFFER_KB <= 1024) may drop
 * such a burst, counted. A frame is written every
 * NVLPROF_FLUSH_MS (what a kill -9 may lose) or whenever 1 MiB of records is pending, not at every
 * wake-up: a frame per wake-up of a busy writer (~3,000 records) cost ~10% more CPU per record than
 * 1 MiB frames and made the trace ~4% larger (measured on the bench's NCCL records).
 */
/* Sleep up to wait ns or until kicked (the kick pipe emptied). @return 1 when kicked */
static int writer_sleep(uint64_t wait)
{
	struct pollfd p = {.fd = wake_pipe.kick_rd, .events = POLLIN};
	int kicked = 0;
	if (poll(&p, 1, (int)((wait + 999999) / 1000000)) > 0) {
		char b[64];
		while (read(wake_pipe.kick_rd, b, sizeof b) > 0)
			;
		kicked = 1;
	}
	atomic_store(&wake_pipe.pending, 0);
	return kicked;
}

/* A signal handler asked for the end of the trace. It is done on a helper thread (locks and
 * allocation are fine there) while this one keeps draining: CUPTI's flush and samplers emit
 * through rings and wait for room (seen on the GPU machine: ending on this thread alone missed the
 * handler's deadline). The helper answers the handler when done. @return 1 when the end was done
 * on this thread (no helper): the writer stops */
static int writer_signal_end(void)
{
	fatal_early();
	pthread_t t;
	if (pthread_create(&t, NULL, stopper_main, NULL) == 0) {
		pthread_detach(t);
		return 0;
	}
	stopper_main(NULL);
	return 1;
}

/* Drain the rings; a frame (with the watch's records when due) when due. @return the writer's
 * state after, and in *fill how full the fullest ring got (64ths). */
static int writer_drain(uint64_t now, uint64_t period, uint64_t *last_flush, uint64_t *last_watch,
                        uint64_t *fill)
{
	pthread_mutex_lock(&writer_lock.mu);
	if (atomic_load(&trace_out.state) == W_RUNNING) {
		drain_locked(1);
		if (trace_out.writer && atomic_load(&trace_out.state) == W_RUNNING &&
		    now - *last_watch >= WATCH_NS) {
			watch_locked(); /* flushes */
			*last_watch = *last_flush = now;
		} else if (trace_out.writer && atomic_load(&trace_out.state) == W_RUNNING &&
		           now >= *last_flush + period) {
			flush_locked();
			*last_flush = now;
		}
	}
	int st = atomic_load(&trace_out.state);
	*fill = drain_state.fill_64ths;
	pthread_mutex_unlock(&writer_lock.mu);
	return st;
}

/* The next poll interval from how full the fullest ring got (see below). */
static uint64_t writer_interval(uint64_t interval, uint64_t fill, uint64_t longest)
{
	if (fill >= 32) /* half full or spilled: a burst began */
		interval = 1000000;
	else if (fill >= 24 && interval > 1000000)
		interval /= 2;
	else if (fill < 4 && interval < longest)
		interval = interval * 2 < longest ? interval * 2 : longest;
	return interval;
}

/*
 * The writer polls the rings at an interval that follows how full the fullest one got since the
 * last drain: halved when it reached 3/8 (down to 1 ms; at once to 1 ms past half), doubled when it
 * stayed under 1/16 (up to POLL_MAX_NS, or NVLPROF_FLUSH_MS when shorter). Producers never wake it
 * (no syscall on the hot path): a burst that starts while it sleeps goes to the spill, which holds
 * more than a sleep's worth at 1 M records/s; the ring alone (NVLPROF_BUFFER_KB <= 1024) may drop
 * such a burst, counted. A frame is written every
 * NVLPROF_FLUSH_MS (what a kill -9 may lose) or whenever 1 MiB of records is pending, not at every
 * wake-up: a frame per wake-up of a busy writer (~3,000 records) cost ~10% more CPU per record than
 * 1 MiB frames and made the trace ~4% larger (measured on the bench's NCCL records).
 */
static void *writer_main(void *arg)
{
	int stopper_started = 0;
	(void)arg;
	nvlp_tls()->is_writer = 1;
	nvlp_cost_thread_start(NVLP_COST_WRITER);
	const uint64_t period = (uint64_t)nvlp_cfg()->flush_ms * 1000000ull;
	const uint64_t longest = period < POLL_MAX_NS ? period : POLL_MAX_NS;
	uint64_t interval = longest, last_flush = mono_ns(), last_tick = 0, last_watch = 0;
	for (;;) {
		uint64_t now = mono_ns(), due = last_flush + period, watch = last_watch + WATCH_NS;
		if (watch < due)
			due = watch;
		uint64_t wait = due > now ? due - now : 0;
		if (wait > interval)
			wait = interval;
		int kicked = writer_sleep(wait);
		now = mono_ns();
		nvlp_clock_refresh();
		/* The tick walks the loaded objects: at the flush period, not at every poll. */
		if (trace_out.hooks.tick && (kicked || now - last_tick >= period)) {
			trace_out.hooks.tick();
			last_tick = now;
		}
		if (__atomic_load_n(&end_cause.sig_req, __ATOMIC_ACQUIRE) && !stopper_started) {
			stopper_started = 1;
			if (writer_signal_end())
				return NULL;
		}
		uint64_t fill;
		if (writer_drain(now, period, &last_flush, &last_watch, &fill) != W_RUNNING)
			return NULL;
		interval = writer_interval(interval, fill, longest);
	}
}

/* ---- opening the trace ---------------------------------------------------------------------- */

static void note_locked(unsigned code, uint64_t value, const char *msg)
{
	struct nvlp_rec_note rec = {
	    .code = code, .t = nvlp_now(), .device = (uint64_t)-1, .value = value};
	nvlp_writer_add(trace_out.writer, NVLP_K_NOTE, &rec, msg, strlen(msg));
}

static int make_pipe(int *rd, int *wr)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	*rd = p[0];
	*wr = p[1];
	return 0;
}

/* The writer thread must never take the job's signals: they belong to the application. */
static int start_thread(void)
{
	sigset_t all, old;
	sigfillset(&all);
	static const int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
	for (size_t i = 0; i < sizeof sync_sigs / sizeof *sync_sigs; i++)
		sigdelset(&all, sync_sigs[i]);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&writer_thread.id, NULL, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -1;
	pthread_setname_np(writer_thread.id, "nvlprof-writer");
	writer_thread.live = 1;
	return 0;
}

int nvlp_wr_open_locked(void)
{
	int fd = nvlp_tf_create(trace_out.path, sizeof trace_out.path);
	if (fd < 0) {
		nvlp_warn("cannot write traces to %s: %s; recording disabled", nvlp_cfg()->dir,
		          strerror(errno));
		nvlp_rt_set_active(0);
		atomic_store(&trace_out.state, W_FAILED);
		return -1;
	}
	uint64_t t_mono, t_real;
	char *hdr = nvlp_tf_header(&t_mono, &t_real);
	trace_out.writer = nvlp_writer_open_fd(fd, hdr, t_mono, t_real);
	free(hdr);
	if (!trace_out.writer) {
		nvlp_warn("cannot write traces to %s: %s; recording disabled", nvlp_cfg()->dir,
		          strerror(errno));
		close(fd);
		unlink(trace_out.path);
		nvlp_rt_set_active(0);
		atomic_store(&trace_out.state, W_FAILED);
		return -1;
	}
	nvlp_cost_opened();
	for (unsigned i = 0; i < nvlp_cfg_note_count(); i++)
		note_locked(NVLP_NOTE_CONFIG, 0, nvlp_cfg_note(i));
	if (trace_out.forked_from) {
		char m[64];
		snprintf(m, sizeof m, "fork child of pid %d", (int)trace_out.forked_from);
		note_locked(NVLP_NOTE_FORK_CHILD, (uint64_t)trace_out.forked_from, m);
	}
	return 0;
}

void nvlp_wr_add_locked(unsigned kind, const void *fields, const void *blob, size_t blob_len)
{
	if (trace_out.writer)
		nvlp_writer_add(trace_out.writer, kind, fields, blob, blob_len);
}

int nvlp_wr_start_locked(void)
{
	int ok = 0;
	if (wake_pipe.kick_rd < 0 && (make_pipe(&wake_pipe.kick_rd, &wake_pipe.kick_wr) < 0 ||
	                              make_pipe(&wake_pipe.ans_rd, &wake_pipe.ans_wr) < 0)) {
		nvlp_warn("cannot create a pipe: %s; recording disabled", strerror(errno));
	} else {
		atomic_store(&trace_out.state, W_RUNNING);
		if (start_thread() == 0)
			ok = 1;
		else
			nvlp_warn("cannot start the writer thread; recording disabled");
	}
	if (!ok) {
		nvlp_writer_close(trace_out.writer);
		trace_out.writer = NULL;
		unlink(trace_out.path);
		nvlp_rt_set_active(0);
		atomic_store(&trace_out.state, W_FAILED);
		return -1;
	}
	return 0;
}

void nvlp_wr_opened(void)
{
	if (trace_out.hooks.trace_opened)
		trace_out.hooks.trace_opened();
}

int nvlp_wr_is_writer_thread(void)
{
	return nvlp_tls()->is_writer;
}

void nvlp_wr_drain_now(void)
{
	pthread_mutex_lock(&writer_lock.mu);
	if (atomic_load(&trace_out.state) == W_RUNNING)
		drain_locked(0);
	pthread_mutex_unlock(&writer_lock.mu);
}

/* ---- end of a trace ------------------------------------------------------------------------- */

/* The FATAL record of a fatal signal (its handler waits), in a frame of its own. */
static void fatal_locked(void)
{
	uint64_t tid = __atomic_load_n(&end_cause.fatal_tid, __ATOMIC_ACQUIRE);
	struct nvlp_rec_fatal f = {
	    .t = nvlp_now(),
	    .signal = (uint64_t)(int64_t)__atomic_load_n(&end_cause.sig_req, __ATOMIC_ACQUIRE),
	    .tid = tid,
	    .code = __atomic_load_n(&end_cause.fatal_code, __ATOMIC_RELAXED),
	    .addr = __atomic_load_n(&end_cause.fatal_addr, __ATOMIC_RELAXED),
	    .main = tid == (uint64_t)nvlp_rt_pid};
	char path[64], name[32] = "";
	snprintf(path, sizeof path, "/proc/self/task/%llu/comm", (unsigned long long)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, name, sizeof name - 1) : 0;
	if (fd >= 0)
		close(fd);
	while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == 0))
		n--;
	flush_locked();
	/* The stack's records (MODULE, BUILDID, STACK) before the FATAL naming it, in its frame. */
	const struct nvlp_fatal_stacker *st = __atomic_load_n(&end_cause.stacker, __ATOMIC_ACQUIRE);
	if (trace_out.writer && st)
		f.stack = st->write(sink, NULL);
	if (trace_out.writer)
		nvlp_writer_add(trace_out.writer, NVLP_K_FATAL, &f, name, n > 0 ? (size_t)n : 0);
	if (trace_out.writer)
		flush_locked();
}

/* The end of the trace (writer_lock.mu held, the writer running): symbols, cost, EXITINFO, END,
 * and the file closed. */
static void close_locked(unsigned reason)
{
	/* Symbols for the frames of the trace's stacks (bounded: a signal handler waits
	 * 3 s for all of the end). */
	uint64_t t0 = nvlp_now();
	uint64_t nsyms = nvlp_syms_write(trace_out.writer, SYMBOLS_BUDGET_NS);
	uint64_t syms_ns = nvlp_now() - t0;
	nvlp_syms_reset();
	cost_locked();
	/* How the process ends, beside END (which cannot gain fields). */
	struct nvlp_rec_exitinfo xi = {
	    .t = nvlp_now(),
	    .reason = reason,
	    .signal = reason == NVLP_END_SIGNAL
	                  ? (uint64_t)(int64_t)__atomic_load_n(&end_cause.sig_req, __ATOMIC_ACQUIRE)
	                  : 0,
	    .status = (uint64_t)(int64_t)__atomic_load_n(&end_cause.exit_status, __ATOMIC_ACQUIRE)};
	nvlp_writer_add(trace_out.writer, NVLP_K_EXITINFO, &xi, NULL, 0);
	uint64_t records = 0;
	nvlp_writer_stats(trace_out.writer, &records, NULL, NULL);
	struct nvlp_rec_end end = {
	    .t = nvlp_now(), .records = records, .dropped = drain_state.drops, .reason = reason};
	nvlp_writer_add(trace_out.writer, NVLP_K_END, &end, NULL, 0);
	if (nvlp_writer_close(trace_out.writer) < 0)
		nvlp_warn("cannot write trace %s: %s", trace_out.path, strerror(errno));
	else if (nvlp_cfg()->verbose) {
		nvlp_warn("wrote %s: %llu records, %llu dropped, %llu symbols (%.1f ms), %llu "
		          "late-writer marks, %llu writer kicks, %u thread buffers",
		          trace_out.path, (unsigned long long)records,
		          (unsigned long long)drain_state.drops, (unsigned long long)nsyms,
		          syms_ns / 1e6, (unsigned long long)drain_state.late,
		          (unsigned long long)atomic_load(&wake_pipe.kicks), nvlp_ring_count());
		nvlp_cost_verbose();
	}
	trace_out.writer = NULL;
	atomic_store(&trace_out.state, W_CLOSED);
}

void nvlp_rt_finish(unsigned reason)
{
	int join = 0;
	wlock();
	if (atomic_load(&trace_out.state) == W_RUNNING && trace_out.writer) {
		drain_locked(0);
	}
	if (atomic_load(&trace_out.state) == W_RUNNING && trace_out.writer &&
	    !end_cause.fatal_written) {
		/* Every call still in progress (a rank ended by a signal while blocked in one; a
		 * fatal signal's were written with its FATAL record). */
		struct nvlp_rec_inflight x[16];
		inflight_locked(x, nvlp_live_scan(nvlp_now(), 0, 1, x, 16));
	}
	if (atomic_load(&trace_out.state) == W_RUNNING && trace_out.writer &&
	    reason == NVLP_END_SIGNAL && __atomic_load_n(&end_cause.fatal_tid, __ATOMIC_ACQUIRE) &&
	    !end_cause.fatal_written)
		fatal_locked();
	if (atomic_load(&trace_out.state) == W_RUNNING && trace_out.writer)
		close_locked(reason);
	join = writer_thread.live;
	writer_thread.live = 0;
	pthread_mutex_unlock(&writer_lock.mu);
	if (join) {
		(void)!write(wake_pipe.kick_wr, "q", 1);
		if (nvlp_tls()->is_writer)
			pthread_detach(pthread_self());
		else
			pthread_join(writer_thread.id, NULL);
	}
}

int nvlp_rt_rearm(void)
{
	wlock();
	if (atomic_load(&trace_out.state) == W_CLOSED) {
		atomic_store(&trace_out.state, W_IDLE);
		drain_state.drops = 0;
		drain_state.late = 0;
	}
	int ok = atomic_load(&trace_out.state) == W_IDLE;
	pthread_mutex_unlock(&writer_lock.mu);
	return ok && !nvlp_cfg()->disable;
}

void nvlp_rt_set_fatal_stacker(const struct nvlp_fatal_stacker *s)
{
	__atomic_store_n(&end_cause.stacker, s, __ATOMIC_RELEASE);
}

void nvlp_rt_fatal_capture(const void *uc)
{
	const struct nvlp_fatal_stacker *st = __atomic_load_n(&end_cause.stacker, __ATOMIC_ACQUIRE);
	if (atomic_load(&trace_out.state) == W_RUNNING && st)
		st->capture(uc); /* published by fatal_tid's release in nvlp_rt_fatal_request */
}

int nvlp_rt_fatal_request(int sig, uint64_t tid, int code, uint64_t addr, int timeout_ms)
{
	if (atomic_load(&trace_out.state) != W_RUNNING || wake_pipe.kick_wr < 0)
		return -1;
	__atomic_store_n(&end_cause.fatal_code, (uint64_t)(int64_t)code, __ATOMIC_RELAXED);
	__atomic_store_n(&end_cause.fatal_addr, addr, __ATOMIC_RELAXED);
	__atomic_store_n(&end_cause.fatal_tid, tid, __ATOMIC_RELEASE);
	return nvlp_rt_signal_request(sig, timeout_ms);
}

int nvlp_rt_signal_request(int sig, int timeout_ms)
{
	if (atomic_load(&trace_out.state) != W_RUNNING || wake_pipe.kick_wr < 0)
		return -1;
	__atomic_store_n(&end_cause.sig_req, sig, __ATOMIC_RELEASE);
	(void)!write(wake_pipe.kick_wr, "s", 1);
	/* Other handlers (SIGCHLD from dying DataLoader workers, seen under torch) interrupt poll:
	 * keep waiting until the deadline. */
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long long end = now.tv_sec * 1000LL + now.tv_nsec / 1000000 + timeout_ms;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long long left = end - (now.tv_sec * 1000LL + now.tv_nsec / 1000000);
		if (left <= 0)
			return -1;
		struct pollfd p = {.fd = wake_pipe.ans_rd, .events = POLLIN};
		int n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/* ---- fork ----------------------------------------------------------------------------------- */

void nvlp_wr_fork_child_locked(void)
{
	trace_out.forked_from = nvlp_rt_pid;
	nvlp_rt_pid = (pid_t)syscall(SYS_getpid);
	/* The parent owns its file and its writer thread does not exist here. */
	if (trace_out.writer)
		nvlp_writer_abandon(trace_out.writer);
	trace_out.writer = NULL;
	writer_thread.live = 0;
	if (atomic_load(&trace_out.state) != W_FAILED)
		atomic_store(&trace_out.state, W_IDLE);
	int *fds[] = {&wake_pipe.kick_rd, &wake_pipe.kick_wr, &wake_pipe.ans_rd, &wake_pipe.ans_wr};
	for (int i = 0; i < 4; i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	atomic_store(&wake_pipe.pending, 0);
	atomic_store(&wake_pipe.kicks, 0);
	atomic_store(&writer_lock.waiters, 0); /* waiters of the parent do not exist here */
	__atomic_store_n(&end_cause.sig_req, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&end_cause.fatal_tid, 0, __ATOMIC_RELAXED);
	end_cause.fatal_written = 0;
	__atomic_store_n(&end_cause.exit_status, -1, __ATOMIC_RELAXED);
	drain_state.drops = 0;
	drain_state.late = 0;
}

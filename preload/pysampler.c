/* pysampler.c: the Python sampler thread: at NVLPROF_PYSAMPLE_HZ, the chains of the main thread
 * and of the threads inside intercepted calls (their slots), read through the layout walk. */
#include <errno.h>   /* EINTR */
#include <fcntl.h>   /* O_CLOEXEC */
#include <pthread.h> /* the sampler's thread */
#include <signal.h>  /* the sampler takes no signal */
#include <stdlib.h>  /* malloc */
#include <string.h>  /* memset */
#include <time.h>    /* clock_gettime: the sampler's period and CPU time */
#include <unistd.h>  /* getpid, pipe2 */

#include "nvlp_cost.h"
#include "nvlp_module.h" /* the module's table; nvlp_rt_pid: which thread is the main one */
#include "pystacks_int.h"

/* ---- the sampler: where the main thread and the threads inside calls are, at NVLPROF_PYSAMPLE_HZ
 *
 * A rank that hangs or dies is explained by where its threads were in its last seconds, and a
 * thread blocked in the job's own code (data loading, a sleep, a lock) passes no hook at all. So
 * the shim's own thread reads, at NVLPROF_PYSAMPLE_HZ, the chains of the process's main thread and
 * of each thread inside an intercepted call (which published its PyThreadState in its slot on the
 * way in, see nvlp_py_enter), and writes a PYREF of kind 0 when a thread's chain changed since its
 * previous sample (pystack 0: no Python frames, or no longer inside a call, from then on).
 * Never by signalling the threads (a signal turns a blocking call into EINTR): the reads are the
 * self-check's, which fail instead of faulting (process_vm_readv on ourselves, or a pipe), with
 * the walk's validation (types, alignment, bounds). The target runs meanwhile: a chain is taken
 * only when its shape key read before and after its text agree (tried three times, then the
 * sample is discarded and counted). Started only once the layout self-check passed, lazily from
 * the Python paths (so never in a process without Python, nor with NVLPROF_STACKS=0 or
 * NVLPROF_PYSAMPLE_HZ=0), again in a fork child (where it does not exist) at the child's first
 * capture; stopped before the trace ends (nvlp_shutdown: exit, _exit, exec, signals), waiting for
 * at most the sample under way.
 */
#define SAMP_SLOTS 256  /* threads inside calls followed at once; more are not sampled */
#define SAMP_TRIES 3    /* reads of a moving chain before the sample is discarded */
#define SAMP_JOIN_MS 20 /* the longest the end of the trace waits for the sampler */

/* atomic: 1 while the hooks publish their threads' states (from the start, so that a thread
 * already inside a call when the sampler starts is sampled), 0 once the process is known to have
 * no sampler (no Python, a layout refused, NVLPROF_STACKS=0, NVLPROF_PYSAMPLE_HZ=0) or it
 * stopped (the end of the trace: a failed exec's resumed recording starts it again). */
int nvlp_py_sampling = 1;
static struct nvlp_py_slot slots[SAMP_SLOTS];
/* What the sampler wrote last for a thread (its own thread only). */
struct samp_last {
	uint64_t tid, full, id;
};
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thr;
	int running, stop; /* running: started in this process (under mu); stop: atomic */
	int failed;        /* pthread_create failed: not tried again */
	uint64_t main_ts;  /* atomic: the main thread's PyThreadState, 0 not known yet */
	pthread_key_t key; /* releases a thread's slot when it ends */
	int key_ok;
	/* counters, for NVLPROF_VERBOSE and the bench (the sampler's thread writes, stop reads) */
	uint64_t rounds, reads, written, discarded, cpu_ns;
} samp = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
static pthread_once_t samp_once = PTHREAD_ONCE_INIT;

static void slot_release(void *p)
{
	struct nvlp_py_slot *s = p;
	uint64_t tid = nvlp_tls_state.tid;
	__atomic_store_n(&s->ts, 0, __ATOMIC_RELEASE);
	/* a fork child's key value may name a slot another thread claimed since */
	__atomic_compare_exchange_n(&s->tid, &tid, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* The child has only the forking thread: no sampler, no thread inside a call of the parent's. */
static void samp_atfork_child(void)
{
	pthread_mutex_init(&samp.mu, NULL);
	samp.running = 0;
	__atomic_store_n(&samp.stop, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&nvlp_py_sampling, 1, __ATOMIC_RELAXED); /* its first hook starts one */
	__atomic_store_n(&samp.main_ts, 0, __ATOMIC_RELAXED);
	memset(slots, 0, sizeof slots);
	samp.rounds = samp.reads = samp.written = samp.discarded = samp.cpu_ns = 0;
}

static void samp_init_once(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&samp.cv);
	pthread_cond_init(&samp.cv, &ca);
	pthread_condattr_destroy(&ca);
	samp.key_ok = pthread_key_create(&samp.key, slot_release) == 0;
	pthread_atfork(NULL, NULL, samp_atfork_child);
}

/* The calling thread is the process's main thread: its state is the one sampled always. */
static void learn_main(struct nvlp_tls *tls)
{
	if (NVLP_LIKELY(__atomic_load_n(&samp.main_ts, __ATOMIC_RELAXED) != 0) ||
	    tls->tid != (uint64_t)nvlp_rt_pid || !py.this_tstate || !py.is_initialized())
		return;
	uintptr_t ts = (uintptr_t)py.this_tstate();
	if (ts)
		__atomic_store_n(&samp.main_ts, ts, __ATOMIC_RELEASE);
}

struct nvlp_py_slot *nvlp_py_slot_claim(struct nvlp_tls *tls)
{
	pthread_once(&samp_once, samp_init_once);
	if (!samp.key_ok)
		return NULL;
	for (unsigned i = 0; i < SAMP_SLOTS; i++) {
		uint64_t free_ = 0;
		if (__atomic_load_n(&slots[i].tid, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&slots[i].tid, &free_, tls->tid, 0,
		                                __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			pthread_setspecific(samp.key, &slots[i]);
			return tls->py_slot = &slots[i];
		}
	}
	return NULL;
}

/* One thread's sample into st: @return 1 a PYREF was written */
static int sample_one(struct rdr *r, char *blob, uint64_t tid, uintptr_t ts, struct samp_last *st,
                      uint64_t t)
{
	uint64_t id = 0, full = 0, shape1, shape2 = 0, full2;
	if (st->tid != tid)
		*st = (struct samp_last){.tid = tid};
	if (ts) {
		int tries = 0;
		for (;; tries++) {
			samp.reads++;
			full = nvlp_py_chain_keys(r, ts, &shape1);
			if (full && full == st->full)
				return 0; /* the same chain as at its previous sample */
			long n = full ? nvlp_py_layout_blob(r, ts, blob) : -1;
			full2 = n >= 0 ? nvlp_py_chain_keys(r, ts, &shape2) : 0;
			if (n >= 0 && full2 && shape1 == shape2) {
				id = n > 0 ? nvlp_py_chain_id(blob, (size_t)n) : 0;
				/* the innermost line may be either key's: read again next time */
				full = full == full2 ? full : 0;
				break;
			}
			if (tries + 1 >= SAMP_TRIES || r->failed) {
				samp.discarded++;
				return 0;
			}
		}
	}
	st->full = full;
	if (id == st->id)
		return 0;
	st->id = id;
	nvlp_py_emit_ref(NVLP_K_NONE, tid, t, 0, id);
	samp.written++;
	return 1;
}

/* One round: the main thread, then every slot's thread (a slot whose thread ended gets its
 * pystack 0). */
static void samp_round(struct rdr *r, char *blob, struct samp_last *last,
                       struct samp_last *main_last, uint64_t main_tid)
{
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	uint64_t t = nvlp_now();
	uintptr_t mts = (uintptr_t)__atomic_load_n(&samp.main_ts, __ATOMIC_ACQUIRE);
	if (mts)
		sample_one(r, blob, main_tid, mts, main_last, t);
	for (unsigned i = 0; i < SAMP_SLOTS; i++) {
		uint64_t tid = __atomic_load_n(&slots[i].tid, __ATOMIC_ACQUIRE);
		if (!tid && !last[i].tid)
			continue;
		uintptr_t ts_i = (uintptr_t)__atomic_load_n(&slots[i].ts, __ATOMIC_ACQUIRE);
		if (tid == main_tid)
			continue;                     /* sampled above, inside a call or not */
		if (tid != last[i].tid && last[i].id) /* the slot's thread ended */
			nvlp_py_emit_ref(NVLP_K_NONE, last[i].tid, t, 0, 0);
		if (tid)
			sample_one(r, blob, tid, ts_i, &last[i], t);
		else
			last[i] = (struct samp_last){0};
	}
	samp.rounds++;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	samp.cpu_ns +=
	    (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000000000ll + (c1.tv_nsec - c0.tv_nsec));
}

/* Wait (samp.mu held) for the next period after *next, never bursting to catch up.
 * @return 1 when asked to stop */
static int samp_wait(uint64_t *next, uint64_t period)
{
	struct timespec ts;
	*next += period;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t cur = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (*next < cur)
		*next = cur; /* late (the machine was busy): no burst to catch up */
	ts.tv_sec = (time_t)(*next / 1000000000ull);
	ts.tv_nsec = (long)(*next % 1000000000ull);
	while (!__atomic_load_n(&samp.stop, __ATOMIC_ACQUIRE) &&
	       pthread_cond_timedwait(&samp.cv, &samp.mu, &ts) == 0)
		;
	return __atomic_load_n(&samp.stop, __ATOMIC_ACQUIRE);
}

static void *samp_main(void *arg)
{
	(void)arg;
	nvlp_cost_thread_start(NVLP_COST_PYSAMPLE);
	struct samp_last main_last = {0}, *last = calloc(SAMP_SLOTS, sizeof *last);
	struct rdr r = {.checked = 1,
	                .pid = getpid(),
	                .pipe = {-1, -1},
	                .tab = malloc(MAX_LINETABLE),
	                .lc = calloc(1, sizeof(struct linecache)),
	                .bc = malloc(sizeof(struct blocks))};
	char *blob = malloc(NVLP_MAX_BLOB);
	if (lay_test_pipe && pipe2(r.pipe, O_CLOEXEC))
		r.failed = 1;
	const uint64_t period = 1000000000ull / (uint64_t)nvlp_cfg()->pysample_hz;
	uint64_t main_tid = (uint64_t)nvlp_rt_pid;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* the condition variable's clock (not nvlp_now's) */
	pthread_mutex_lock(&samp.mu);
	for (uint64_t next = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;;) {
		if (samp_wait(&next, period))
			break;
		pthread_mutex_unlock(&samp.mu);
		if (last && blob && r.tab && r.lc && r.bc && !r.failed && nvlp_is_active() &&
		    py.is_initialized())
			samp_round(&r, blob, last, &main_last, main_tid);
		pthread_mutex_lock(&samp.mu);
	}
	pthread_mutex_unlock(&samp.mu);
	free(last);
	free(blob);
	free(r.tab);
	free(r.lc);
	free(r.bc);
	if (r.pipe[0] >= 0)
		close(r.pipe[0]), close(r.pipe[1]);
	nvlp_cost_thread_end(NVLP_COST_PYSAMPLE);
	return NULL;
}

/* Start the sampler if it may run and does not (cheap when it runs: two loads). */
void nvlp_py_samp_kick(struct nvlp_tls *tls)
{
	learn_main(tls);
	if (NVLP_LIKELY(__atomic_load_n(&samp.running, __ATOMIC_RELAXED)) ||
	    __atomic_load_n(&lay_state, __ATOMIC_ACQUIRE) <= 0 || nvlp_cfg()->pysample_hz <= 0 ||
	    !nvlp_cfg()->stacks || !nvlp_is_active() || tls->is_writer ||
	    __atomic_load_n(&samp.failed, __ATOMIC_RELAXED))
		return;
	pthread_once(&samp_once, samp_init_once);
	if (pthread_mutex_trylock(&samp.mu))
		return;
	if (!samp.running && nvlp_is_active()) {
		__atomic_store_n(&samp.stop, 0, __ATOMIC_RELEASE);
		/* never the job's signals: they belong to the application */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		int rc = pthread_create(&samp.thr, NULL, samp_main, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc == 0) {
			pthread_setname_np(samp.thr, "nvlprof-pysamp");
			__atomic_store_n(&samp.running, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&nvlp_py_sampling, 1, __ATOMIC_RELEASE);
		} else {
			nvlp_warn_once(&samp, "cannot start the Python sampler thread: no samples");
			__atomic_store_n(&samp.failed, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&samp.mu);
}

/* Stop the sampler thread (bounded wait: it finishes at most the sample under way). */
static void py_sampler_stop(void)
{
	pthread_mutex_lock(&samp.mu);
	int running = samp.running;
	__atomic_store_n(&samp.running, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&samp.stop, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&samp.cv);
	pthread_mutex_unlock(&samp.mu);
	__atomic_store_n(&nvlp_py_sampling, 0, __ATOMIC_RELEASE);
	if (!running || pthread_equal(pthread_self(), samp.thr))
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* pthread_timedjoin_np's clock */
	ts.tv_nsec += SAMP_JOIN_MS * 1000000L;
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_sec++, ts.tv_nsec -= 1000000000L;
	int rc;
	while ((rc = pthread_timedjoin_np(samp.thr, NULL, &ts)) == EINTR)
		;
	if (rc) {
		pthread_detach(samp.thr); /* it ends at its next look at stop */
		return;
	}
	if (nvlp_cfg()->verbose && samp.rounds)
		nvlp_warn(
		    "Python sampler: %llu rounds, %llu chain reads, %llu samples written, %llu "
		    "discarded (moving), %.0f ns CPU per round",
		    (unsigned long long)samp.rounds, (unsigned long long)samp.reads,
		    (unsigned long long)samp.written, (unsigned long long)samp.discarded,
		    (double)samp.cpu_ns / (double)samp.rounds);
}

/* The module: at the end, the sampler stops (after recording is off, before the final drain). */
static const struct nvlp_module pystacks_module = {.name = "pystacks", .stop = py_sampler_stop};
NVLP_MODULE(PYSTACKS, pystacks_module)

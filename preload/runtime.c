/* runtime.c: the shim's recording runtime: config, emit, strings, notes, writer thread. */
#include <errno.h>       /* errno */
#include <fcntl.h>       /* open */
#include <dlfcn.h>       /* dladdr */
#include <limits.h>      /* PATH_MAX */
#include <poll.h>        /* poll */
#include <pthread.h>     /* pthread_* */
#include <signal.h>      /* sigset_t */
#include <stdarg.h>      /* va_list */
#include <stdatomic.h>   /* atomic_* */
#include <stdio.h>       /* snprintf */
#include <stdlib.h>      /* getenv, strtol, malloc */
#include <string.h>      /* strerror */
#include <sys/stat.h>    /* mkdir */
#include <sys/syscall.h> /* SYS_gettid */
#include <time.h>        /* clock_gettime, CLOCK_THREAD_CPUTIME_ID */
#include <unistd.h>      /* write, getpid */

#include "nvlp_rt.h"
#include "nvlp_trace.h"
#include "rt_internal.h"
#include "rt_ring.h"
#include "rt_symbols.h"

#if __has_include("nvlp_version.h")
#include "nvlp_version.h"
#endif
#ifndef NVLP_VERSION
#define NVLP_VERSION "0.1.0"
#endif

extern char **environ;

volatile int nvlp_active;
volatile pid_t nvlp_rt_pid;

static inline int active_get(void)
{
	return __atomic_load_n(&nvlp_active, __ATOMIC_ACQUIRE);
}
static inline void active_set(int v)
{
	__atomic_store_n(&nvlp_active, v, __ATOMIC_RELEASE);
}

/* ---- configuration -------------------------------------------------------------------------- */

static struct nvlp_config cfg = {
    .stacks = 1,
    .cupti = 1,
    .um = -1,
    .sample_us = 1000,
    .nccl_plugin = 1,
    .buffer_kb = 65536,
    .flush_ms = 500,
    .gpu_flush_ms = 10000,
};
/* Config problems, kept to be written as NOTE(CONFIG) once a trace exists. */
#define MAX_CFG_NOTES 16
static char cfg_notes[MAX_CFG_NOTES][320];
static int n_cfg_notes;

const struct nvlp_config *nvlp_cfg(void)
{
	return &cfg;
}

static void cfg_bad(const char *var, const char *val, const char *expected, const char *def)
{
	char msg[320];
	snprintf(msg, sizeof msg, "%s='%.64s': expected %s; using default %s", var, val, expected,
	         def);
	nvlp_warn("%s", msg);
	if (n_cfg_notes < MAX_CFG_NOTES)
		snprintf(cfg_notes[n_cfg_notes++], sizeof cfg_notes[0], "%s", msg);
}

static void cfg_bool(const char *var, int *out)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return;
	if (!strcmp(v, "0") || !strcmp(v, "1")) {
		*out = v[0] == '1';
		return;
	}
	char def[8];
	snprintf(def, sizeof def, "%d", *out);
	cfg_bad(var, v, "0 or 1", def);
}

static void cfg_long(const char *var, long *out, long lo, long hi)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || *end || end == v || x < lo || x > hi) {
		char exp[64], def[32];
		snprintf(exp, sizeof exp, "an integer %ld..%ld", lo, hi);
		snprintf(def, sizeof def, "%ld", *out);
		cfg_bad(var, v, exp, def);
		return;
	}
	*out = x;
}

static void cfg_parse(void)
{
	cfg_bool("NVLPROF_DISABLE", &cfg.disable);
	cfg_bool("NVLPROF_STACKS", &cfg.stacks);
	cfg_bool("NVLPROF_CUPTI", &cfg.cupti);
	cfg_bool("NVLPROF_VERBOSE", &cfg.verbose);
	cfg_bool("NVLPROF_NCCL_PLUGIN", &cfg.nccl_plugin);
	const char *um = getenv("NVLPROF_UM");
	if (um && *um) {
		if (!strcmp(um, "auto"))
			cfg.um = -1;
		else if (!strcmp(um, "0") || !strcmp(um, "1"))
			cfg.um = um[0] == '1';
		else
			cfg_bad("NVLPROF_UM", um, "auto, 0 or 1", "auto");
	}
	const char *links = getenv("NVLPROF_LINKS");
	if (links && *links) {
		if (!strcmp(links, "auto") || !strcmp(links, "nvml"))
			cfg.links_nvml = links[0] == 'n';
		else
			cfg_bad("NVLPROF_LINKS", links, "auto or nvml", "auto");
	}
	const char *clk = getenv("NVLPROF_CLOCK");
	if (nvlp_clock_init(clk) < 0)
		cfg_bad("NVLPROF_CLOCK", clk, "auto, tsc or gettime", "auto");
	cfg_long("NVLPROF_SAMPLE_US", &cfg.sample_us, 0, 10000000);
	/* 64 KiB floor: a ring must hold the largest ordinary record several times over. */
	cfg_long("NVLPROF_BUFFER_KB", &cfg.buffer_kb, 64, 4L << 20);
	cfg_long("NVLPROF_FLUSH_MS", &cfg.flush_ms, 1, 1000);
	cfg_long("NVLPROF_GPU_FLUSH_MS", &cfg.gpu_flush_ms, 0, 3600000);

	/* Resolved against the start-up directory, so a later chdir() does not move the traces. */
	const char *dir = getenv("NVLPROF_DIR");
	if (!dir || !*dir)
		dir = "./nvlprof-traces";
	char cwd[PATH_MAX];
	const char *rel = dir[0] == '.' && dir[1] == '/' ? dir + 2 : dir;
	if (dir[0] == '/' || !getcwd(cwd, sizeof cwd) ||
	    snprintf(cfg.dir, sizeof cfg.dir, "%s/%s", cwd, rel) >= (int)sizeof cfg.dir)
		snprintf(cfg.dir, sizeof cfg.dir, "%s", dir);
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
	uint64_t want = pow2_at_least((uint64_t)cfg.buffer_kb * 1024);
	return want < RING_RESIDENT ? want : RING_RESIDENT;
}
static uint64_t spill_cap(void)
{
	uint64_t want = pow2_at_least((uint64_t)cfg.buffer_kb * 1024);
	return want > RING_RESIDENT ? want : 0;
}

/* ---- warnings ------------------------------------------------------------------------------- */

static void vwarn(const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "nvlprof: ");
	int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	/* One write(): the line is not interleaved with the job's own output. */
	(void)!write(2, buf, n);
}

void nvlp_warn(const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
	errno = e;
}

#define WARN_KEYS 256
static const void *_Atomic warn_keys[WARN_KEYS];

void nvlp_warn_once(const void *key, const char *fmt, ...)
{
	int e = errno;
	for (int i = 0; i < WARN_KEYS; i++) {
		const void *k = atomic_load(&warn_keys[i]);
		if (k == key)
			return;
		if (k == NULL) {
			const void *expect = NULL;
			if (atomic_compare_exchange_strong(&warn_keys[i], &expect, key)) {
				va_list ap;
				va_start(ap, fmt);
				vwarn(fmt, ap);
				va_end(ap);
				errno = e;
				return;
			}
			if (expect == key)
				return;
		}
	}
	/* Table full: stay quiet rather than flood stderr. */
}

/* ---- per-thread state ----------------------------------------------------------------------- */

__thread struct nvlp_tls nvlp_tls_state __attribute__((tls_model("initial-exec")));
static __thread int tls_is_writer __attribute__((tls_model("initial-exec")));
/* Bumped in a fork child: every thread's ring (and cached tid) from before is invalid. */
volatile unsigned nvlp_tls_epoch = 1;
static pthread_key_t exit_key;

struct nvlp_tls *nvlp_tls_renew(void)
{
	struct nvlp_tls *t = &nvlp_tls_state;
	if (t->epoch != nvlp_tls_epoch) {
		t->tid = (uint64_t)syscall(SYS_gettid);
		t->ring = NULL;
		t->epoch = nvlp_tls_epoch;
	}
	return t;
}

static inline struct nvlp_tls *tls_get(void)
{
	return nvlp_tls();
}

uint64_t nvlp_call_ids = 1; /* atomic (see nvlp_next_call_id) */

/* ---- writer state --------------------------------------------------------------------------- */

enum { W_IDLE, W_RUNNING, W_CLOSED, W_FAILED };
static _Atomic int wstate;
/* Lock order: str_mu before w_mu. w_mu guards the writer, the drain and everything below. */
static pthread_mutex_t w_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t str_mu = PTHREAD_MUTEX_INITIALIZER;
static nvlp_writer *writer;
static char trace_path[PATH_MAX + 64];
static pthread_t wthread;
static int wthread_live;
static uint64_t total_drops;
static pid_t forked_from;
static uint8_t scratch[8 * NVLP_MAX_FIELDS + NVLP_MAX_BLOB + 8];
/* Wake-up pipe (kicks, signal requests) and the answer pipe for signal handlers. Created with the
 * first trace of the process and kept: a signal handler may write to them at any time. */
static int kick_rd = -1, kick_wr = -1, ans_rd = -1, ans_wr = -1;
static _Atomic int kick_pending;
static volatile sig_atomic_t sig_req;
/* Threads waiting for w_mu. The writer holds it for long stretches under load and glibc mutexes
 * are not fair, so it steps aside between rings while anyone waits (fork must not starve). */
static _Atomic int w_waiters;

static void wlock(void)
{
	atomic_fetch_add(&w_waiters, 1);
	pthread_mutex_lock(&w_mu);
	atomic_fetch_sub(&w_waiters, 1);
}

/* Writer thread only, holding w_mu: let waiting threads in. */
static void yield_locked(void)
{
	if (!atomic_load_explicit(&w_waiters, memory_order_relaxed))
		return;
	pthread_mutex_unlock(&w_mu);
	for (int i = 0; i < 100000 && atomic_load(&w_waiters); i++) {
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&w_mu);
}

int nvlp_rt_trace_open(void)
{
	return atomic_load(&wstate) == W_RUNNING;
}

void nvlp_kick_writer(void)
{
	if (atomic_load_explicit(&wstate, memory_order_relaxed) != W_RUNNING)
		return;
	/* Coalesce: one byte in the pipe is enough until the writer wakes. */
	if (atomic_exchange(&kick_pending, 1))
		return;
	int e = errno;
	(void)!write(kick_wr, "k", 1);
	errno = e;
}

/* ---- strings -------------------------------------------------------------------------------- */

struct str_ent {
	struct str_ent *next;
	uint64_t hash, id;
	size_t len;
	char s[];
};
#define STR_BUCKETS 4096
static struct str_ent *str_tab[STR_BUCKETS];
static uint64_t str_next_id = 1;

static uint64_t fnv1a(const char *s, size_t *len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *p = s;
	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	*len = (size_t)(p - s);
	return h;
}

static void add_string_locked(const struct str_ent *e)
{
	struct nvlp_rec_string rec = {.id = e->id};
	nvlp_writer_add(writer, NVLP_K_STRING, &rec, e->s,
	                e->len > NVLP_MAX_BLOB ? NVLP_MAX_BLOB : e->len);
}

uint64_t nvlp_intern(const char *s)
{
	if (!s)
		return 0;
	int err = errno;
	size_t len;
	uint64_t h = fnv1a(s, &len), id = 0;
	pthread_mutex_lock(&str_mu);
	struct str_ent *e;
	for (e = str_tab[h % STR_BUCKETS]; e; e = e->next)
		if (e->hash == h && e->len == len && !memcmp(e->s, s, len))
			break;
	if (e) {
		id = e->id;
	} else if ((e = malloc(sizeof *e + len + 1))) {
		e->hash = h;
		e->len = len;
		memcpy(e->s, s, len + 1);
		e->id = id = str_next_id++;
		e->next = str_tab[h % STR_BUCKETS];
		str_tab[h % STR_BUCKETS] = e;
		/* Written straight into the file, so the STRING precedes every record that uses the
		 * id (those are still in some ring). Ids are process-wide: a new file (fork child,
		 * failed exec) gets every known string replayed when it opens. */
		wlock();
		if (atomic_load(&wstate) == W_RUNNING)
			add_string_locked(e);
		pthread_mutex_unlock(&w_mu);
	}
	pthread_mutex_unlock(&str_mu);
	errno = err;
	return id;
}

/* ---- writer thread -------------------------------------------------------------------------- */

static int sink(void *ctx, unsigned kind, const void *fields, const void *blob, size_t blob_len)
{
	(void)ctx;
	if (kind == NVLP_K_STACK || kind == NVLP_K_MODULE || kind == NVLP_K_BUILDID)
		nvlp_syms_seen(kind, fields, blob, blob_len);
	return nvlp_writer_add(writer, kind, fields, blob, blob_len);
}

static void write_failed_locked(int err)
{
	nvlp_warn("cannot write trace %s: %s; recording stopped", trace_path, strerror(err));
	active_set(0);
	nvlp_writer_abandon(writer);
	writer = NULL;
	atomic_store(&wstate, W_FAILED);
}

static void flush_locked(void)
{
	if (nvlp_writer_flush(writer) < 0)
		write_failed_locked(errno);
}

/* Move every ring's records into the writer; report drop counts; recycle rings of dead threads. */
static void drain_locked(int can_yield)
{
	for (struct nvlp_ring *r = nvlp_ring_first(); r; r = r->next) {
		if (can_yield)
			yield_locked();
		/* The trace may have been ended (or failed) while we stepped aside. */
		if (!writer || atomic_load(&wstate) != W_RUNNING)
			return;
		int st = atomic_load_explicit(&r->state, memory_order_acquire);
		if (st == NVLP_RING_FREE)
			continue;
		nvlp_ring_drain(r, sink, NULL, scratch);
		uint64_t d = atomic_load_explicit(&r->drops, memory_order_relaxed);
		if (d != r->drops_reported) {
			struct nvlp_rec_drops rec = {.tid = r->tid, .dropped = d, .t = nvlp_now()};
			nvlp_writer_add(writer, NVLP_K_DROPS, &rec, NULL, 0);
			total_drops += d - r->drops_reported;
			r->drops_reported = d;
		}
		if (st == NVLP_RING_RETIRED) {
			atomic_store_explicit(&r->drops, 0, memory_order_relaxed);
			r->drops_reported = 0;
			atomic_store_explicit(&r->state, NVLP_RING_FREE, memory_order_release);
			atomic_fetch_sub(&nvlp_ring_retired, 1);
		}
		/* Keep frames bounded when a burst filled many rings. */
		if (nvlp_writer_pending(writer) > (8u << 20))
			flush_locked();
	}
}

/* Ends the trace for a signal handler (see writer_main); inherits the writer's signal mask. */
static void *stopper_main(void *arg)
{
	(void)arg;
	nvlp_shutdown(NVLP_END_SIGNAL);
	(void)!write(ans_wr, "a", 1);
	return NULL;
}

static void *writer_main(void *arg)
{
	int stopper_started = 0;
	(void)arg;
	tls_is_writer = 1;
	for (;;) {
		struct pollfd p = {.fd = kick_rd, .events = POLLIN};
		if (poll(&p, 1, (int)cfg.flush_ms) > 0) {
			char b[64];
			while (read(kick_rd, b, sizeof b) > 0)
				;
		}
		atomic_store(&kick_pending, 0);
		nvlp_clock_refresh();
		nvlp_lc_refresh_atexit();
		if (sig_req && !stopper_started) {
			/* A signal handler asked for the end of the trace. It is done on a helper
			 * thread (locks and allocation are fine there) while this one keeps
			 * draining: CUPTI's flush and samplers emit through rings and wait for room
			 * (seen on the GPU machine: ending on this thread alone missed the
			 * handler's deadline). The helper answers the handler when done. */
			stopper_started = 1;
			pthread_t t;
			if (pthread_create(&t, NULL, stopper_main, NULL) == 0) {
				pthread_detach(t);
			} else {
				nvlp_shutdown(NVLP_END_SIGNAL);
				(void)!write(ans_wr, "a", 1);
				return NULL;
			}
		}
		pthread_mutex_lock(&w_mu);
		if (atomic_load(&wstate) == W_RUNNING) {
			drain_locked(1);
			if (writer && atomic_load(&wstate) == W_RUNNING)
				flush_locked();
		}
		int st = atomic_load(&wstate);
		pthread_mutex_unlock(&w_mu);
		if (st != W_RUNNING)
			return NULL;
	}
}

/* ---- opening the trace ---------------------------------------------------------------------- */

static int mkdir_p(const char *dir)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == 0) {
			char c = *s;
			*s = 0;
			if (mkdir(p, 0777) < 0 && errno != EEXIST)
				return -1;
			*s = c;
			if (!c)
				break;
		}
	}
	struct stat st;
	if (stat(p, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

static int open_trace_file(void)
{
	if (mkdir_p(cfg.dir) < 0)
		return -1;
	char host[256] = "unknown";
	gethostname(host, sizeof host - 1);
	int pid = getpid();
	/* exec keeps the pid: later images of this process get .1, .2, ... */
	for (int n = 0; n < 10000; n++) {
		if (n == 0)
			snprintf(trace_path, sizeof trace_path, "%s/%s-%d.nvlp", cfg.dir, host,
			         pid);
		else
			snprintf(trace_path, sizeof trace_path, "%s/%s-%d.%d.nvlp", cfg.dir, host,
			         pid, n);
		int fd = open(trace_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

/* A growable text buffer for the header. */
struct sbuf {
	char *p;
	size_t n, cap;
};

static void sb_add(struct sbuf *b, const char *s, size_t len)
{
	if (b->n + len + 1 > b->cap) {
		size_t cap = (b->cap ? b->cap * 2 : 4096);
		while (cap < b->n + len + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = 0;
}

/* key=value line; newlines in the value become spaces (one line per key). */
static void sb_kv(struct sbuf *b, const char *key, const char *val)
{
	sb_add(b, key, strlen(key));
	sb_add(b, "=", 1);
	size_t start = b->n;
	sb_add(b, val, strlen(val));
	for (size_t i = start; b->p && i < b->n; i++)
		if (b->p[i] == '\n' || b->p[i] == '\r')
			b->p[i] = ' ';
	sb_add(b, "\n", 1);
}

static void sb_kvl(struct sbuf *b, const char *key, long long v)
{
	char s[32];
	snprintf(s, sizeof s, "%lld", v);
	sb_kv(b, key, s);
}

/* The first variable set among names (NULL-terminated), as an integer; -1 if none. */
static long long env_first(const char *const *names)
{
	for (; *names; names++) {
		const char *v = getenv(*names);
		if (v && *v) {
			char *end;
			long long x = strtoll(v, &end, 10);
			if (!*end)
				return x;
		}
	}
	return -1;
}

static int env_recorded(const char *kv)
{
	static const char *const prefixes[] = {
	    "NCCL_", "CUDA_", "TORCH_NCCL_", "NVLPROF_", "TORCH_DISTRIBUTED_", "LD_PRELOAD=", NULL};
	for (const char *const *p = prefixes; *p; p++)
		if (!strncmp(kv, *p, strlen(*p)))
			return 1;
	return 0;
}

static char *build_header(uint64_t *t_mono, uint64_t *t_real)
{
	static const char *const rank[] = {"RANK",     "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
	                                   "PMI_RANK", "PMIX_RANK",    "MV2_COMM_WORLD_RANK",
	                                   NULL};
	static const char *const local[] = {"LOCAL_RANK",
	                                    "SLURM_LOCALID",
	                                    "OMPI_COMM_WORLD_LOCAL_RANK",
	                                    "MPI_LOCALRANKID",
	                                    "MV2_COMM_WORLD_LOCAL_RANK",
	                                    NULL};
	static const char *const world[] = {"WORLD_SIZE",           "SLURM_NTASKS",
	                                    "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
	                                    "MV2_COMM_WORLD_SIZE",  NULL};
	struct sbuf b = {0};
	char host[256] = "unknown";
	gethostname(host, sizeof host - 1);
	sb_kvl(&b, NVLP_HDR_FORMAT, NVLP_FORMAT_VERSION);
	sb_kv(&b, NVLP_HDR_VERSION, NVLP_VERSION);
	sb_kv(&b, NVLP_HDR_HOST, host);
	sb_kvl(&b, NVLP_HDR_PID, getpid());
	sb_kvl(&b, NVLP_HDR_PPID, getppid());
	sb_kvl(&b, NVLP_HDR_RANK, env_first(rank));
	sb_kvl(&b, NVLP_HDR_LOCAL_RANK, env_first(local));
	sb_kvl(&b, NVLP_HDR_WORLD_SIZE, env_first(world));

	char cmd[4096] = "";
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, cmd, sizeof cmd - 1);
		close(fd);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				if (cmd[i] == 0)
					cmd[i] = ' ';
			while (n > 0 && cmd[n - 1] == ' ')
				n--;
			cmd[n] = 0;
		}
	}
	sb_kv(&b, NVLP_HDR_CMDLINE, cmd);

	/* Back to back, so the analyzer can map CLOCK_MONOTONIC to wall time. */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	*t_mono = nvlp_now();
	*t_real = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	sb_kvl(&b, NVLP_HDR_T_REAL, (long long)*t_real);
	sb_kvl(&b, NVLP_HDR_T_MONO, (long long)*t_mono);

	for (char **e = environ; e && *e; e++) {
		if (!env_recorded(*e) || !strchr(*e, '='))
			continue;
		sb_add(&b, NVLP_HDR_ENV_PREFIX, strlen(NVLP_HDR_ENV_PREFIX));
		size_t start = b.n;
		sb_add(&b, *e, strlen(*e));
		for (size_t i = start; b.p && i < b.n; i++)
			if (b.p[i] == '\n' || b.p[i] == '\r')
				b.p[i] = ' ';
		sb_add(&b, "\n", 1);
	}
	return b.p;
}

static void note_locked(unsigned code, uint64_t value, const char *msg)
{
	struct nvlp_rec_note rec = {
	    .code = code, .t = nvlp_now(), .device = (uint64_t)-1, .value = value};
	nvlp_writer_add(writer, NVLP_K_NOTE, &rec, msg, strlen(msg));
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
	int rc = pthread_create(&wthread, NULL, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -1;
	pthread_setname_np(wthread, "nvlprof-writer");
	wthread_live = 1;
	return 0;
}

/* Open the trace and start the writer: called on the first record of the process (or of a fork
 * child, or after a failed exec). @return 0 if recording, -1 if not. */
static int ensure_writer(void)
{
	int st = atomic_load(&wstate);
	if (NVLP_LIKELY(st == W_RUNNING))
		return 0;
	if (st != W_IDLE || !active_get())
		return -1;
	int err = errno;
	pthread_mutex_lock(&str_mu);
	wlock();
	int ok = 0;
	if (atomic_load(&wstate) == W_IDLE && active_get()) {
		int fd = open_trace_file();
		if (fd < 0) {
			nvlp_warn("cannot write traces to %s: %s; recording disabled", cfg.dir,
			          strerror(errno));
			active_set(0);
			atomic_store(&wstate, W_FAILED);
		} else {
			uint64_t t_mono, t_real;
			char *hdr = build_header(&t_mono, &t_real);
			writer = nvlp_writer_open_fd(fd, hdr, t_mono, t_real);
			free(hdr);
			if (!writer) {
				nvlp_warn("cannot write traces to %s: %s; recording disabled",
				          cfg.dir, strerror(errno));
				close(fd);
				unlink(trace_path);
				active_set(0);
				atomic_store(&wstate, W_FAILED);
			}
		}
		if (writer) {
			for (int i = 0; i < n_cfg_notes; i++)
				note_locked(NVLP_NOTE_CONFIG, 0, cfg_notes[i]);
			if (forked_from) {
				char m[64];
				snprintf(m, sizeof m, "fork child of pid %d", (int)forked_from);
				note_locked(NVLP_NOTE_FORK_CHILD, (uint64_t)forked_from, m);
			}
			for (int i = 0; i < STR_BUCKETS; i++)
				for (struct str_ent *e = str_tab[i]; e; e = e->next)
					add_string_locked(e);
			if (kick_rd < 0 && (make_pipe(&kick_rd, &kick_wr) < 0 ||
			                    make_pipe(&ans_rd, &ans_wr) < 0)) {
				nvlp_warn("cannot create a pipe: %s; recording disabled",
				          strerror(errno));
			} else {
				atomic_store(&wstate, W_RUNNING);
				if (start_thread() == 0) {
					ok = 1;
				} else {
					nvlp_warn(
					    "cannot start the writer thread; recording disabled");
				}
			}
			if (!ok) {
				nvlp_writer_close(writer);
				writer = NULL;
				unlink(trace_path);
				active_set(0);
				atomic_store(&wstate, W_FAILED);
			}
		}
	} else {
		ok = atomic_load(&wstate) == W_RUNNING;
	}
	pthread_mutex_unlock(&w_mu);
	pthread_mutex_unlock(&str_mu);
	if (ok) {
		nvlp_lc_install_signals();
		nvlp_lc_refresh_atexit();
	}
	errno = err;
	return ok ? 0 : -1;
}

/* ---- emitting ------------------------------------------------------------------------------- */

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
	if (t->ring && t->epoch == nvlp_tls_epoch) {
		atomic_fetch_add(&nvlp_ring_retired, 1);
		atomic_store_explicit(&t->ring->state, NVLP_RING_RETIRED, memory_order_release);
		nvlp_kick_writer();
	}
	t->ring = NULL;
}

static inline int valid(unsigned kind, size_t blob_len)
{
	return kind > NVLP_K_NONE && kind < NVLP_K_COUNT && blob_len <= NVLP_MAX_BLOB;
}

int nvlp_emit(unsigned kind, const void *fields, const void *blob, size_t blob_len)
{
	if (NVLP_UNLIKELY(!active_get() || !valid(kind, blob_len)))
		return -1;
	/* No writer yet (first record of the process, or again after a failed exec). */
	if (NVLP_UNLIKELY(atomic_load_explicit(&wstate, memory_order_relaxed) != W_RUNNING) &&
	    ensure_writer() < 0)
		return -1;
	struct nvlp_tls *t = tls_get();
	struct nvlp_ring *r = t->ring;
	if (NVLP_UNLIKELY(!r) && !(r = register_thread(t)))
		return -1;
	int rc = nvlp_ring_put(r, kind, fields, blob, blob_len);
	if (NVLP_LIKELY(rc == 0))
		return 0;
	if (rc > 0) {
		nvlp_kick_writer();
		return 0;
	}
	atomic_fetch_add_explicit(&r->drops, 1, memory_order_relaxed);
	return -1;
}

void *nvlp_emit_reserve(unsigned kind, struct nvlp_emit_slot *slot)
{
	if (NVLP_UNLIKELY(!active_get() || !valid(kind, 0) ||
	                  atomic_load_explicit(&wstate, memory_order_relaxed) != W_RUNNING))
		return NULL;
	struct nvlp_ring *r = tls_get()->ring;
	if (NVLP_UNLIKELY(!r))
		return NULL;
	uint64_t fbytes = (uint64_t)nvlp_ring_nfields(kind) * 8;
	void *p = nvlp_ring_reserve(r, kind, fbytes, &slot->end, &slot->wake);
	slot->head = (uint64_t *)&r->head;
	return p;
}

int nvlp_emit_wait(unsigned kind, const void *fields, const void *blob, size_t blob_len,
                   int timeout_ms)
{
	if (!active_get() || !valid(kind, blob_len) || ensure_writer() < 0)
		return -1;
	struct nvlp_tls *t = tls_get();
	struct nvlp_ring *r = t->ring;
	if (!r && !(r = register_thread(t)))
		return -1;
	int err = errno;
	for (int waited = 0;; waited++) {
		int rc = nvlp_ring_put(r, kind, fields, blob, blob_len);
		if (rc >= 0) {
			if (rc > 0)
				nvlp_kick_writer();
			errno = err;
			return 0;
		}
		if (waited >= timeout_ms || !active_get())
			break;
		if (tls_is_writer) {
			/* The writer itself produces (CUPTI flush during a signal shutdown): nobody
			 * else will drain, so drain here. */
			pthread_mutex_lock(&w_mu);
			if (atomic_load(&wstate) == W_RUNNING)
				drain_locked(0);
			pthread_mutex_unlock(&w_mu);
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

/* ---- end of a trace ------------------------------------------------------------------------- */

/* CPU time of nvlprof's own threads, for NVLPROF_VERBOSE: ended threads add theirs here; the
 * writer, still running when the trace closes, is read through its clock. Set against the process's
 * total, it says how much of the job's CPU the profiler took. */
static struct {
	pthread_mutex_t mu;
	char text[160];
} own_cpu = {PTHREAD_MUTEX_INITIALIZER, ""};

static double thread_cpu_ms(clockid_t c)
{
	struct timespec ts;
	return clock_gettime(c, &ts) == 0 ? ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 : 0;
}

void nvlp_own_cpu_account(const char *who)
{
	if (!cfg.verbose)
		return;
	double ms = thread_cpu_ms(CLOCK_THREAD_CPUTIME_ID);
	pthread_mutex_lock(&own_cpu.mu);
	size_t n = strlen(own_cpu.text);
	snprintf(own_cpu.text + n, sizeof own_cpu.text - n, ", %s %.1f ms", who, ms);
	pthread_mutex_unlock(&own_cpu.mu);
}

static void own_cpu_report(void)
{
	clockid_t c;
	double writer =
	    wthread_live && pthread_getcpuclockid(wthread, &c) == 0 ? thread_cpu_ms(c) : 0;
	pthread_mutex_lock(&own_cpu.mu);
	nvlp_warn("CPU time: process %.1f ms; nvlprof's threads: writer %.1f ms%s",
	          thread_cpu_ms(CLOCK_PROCESS_CPUTIME_ID), writer, own_cpu.text);
	pthread_mutex_unlock(&own_cpu.mu);
}

#define SYMBOLS_BUDGET_NS 1000000000ull

void nvlp_rt_finish(unsigned reason)
{
	int join = 0;
	wlock();
	if (atomic_load(&wstate) == W_RUNNING && writer) {
		drain_locked(0);
	}
	if (atomic_load(&wstate) == W_RUNNING && writer) {
		/* Symbols for the frames of the trace's stacks (bounded: a signal handler waits
		 * 3 s for all of the end). */
		nvlp_syms_write(writer, SYMBOLS_BUDGET_NS);
		nvlp_syms_reset();
		uint64_t records = 0;
		nvlp_writer_stats(writer, &records, NULL, NULL);
		struct nvlp_rec_end end = {
		    .t = nvlp_now(), .records = records, .dropped = total_drops, .reason = reason};
		nvlp_writer_add(writer, NVLP_K_END, &end, NULL, 0);
		if (nvlp_writer_close(writer) < 0)
			nvlp_warn("cannot write trace %s: %s", trace_path, strerror(errno));
		else if (cfg.verbose) {
			nvlp_warn("wrote %s: %llu records, %llu dropped, %u thread buffers",
			          trace_path, (unsigned long long)records,
			          (unsigned long long)total_drops, nvlp_ring_count());
			own_cpu_report();
		}
		writer = NULL;
		atomic_store(&wstate, W_CLOSED);
	}
	join = wthread_live;
	wthread_live = 0;
	pthread_mutex_unlock(&w_mu);
	if (join) {
		(void)!write(kick_wr, "q", 1);
		if (tls_is_writer)
			pthread_detach(pthread_self());
		else
			pthread_join(wthread, NULL);
	}
}

int nvlp_rt_rearm(void)
{
	wlock();
	if (atomic_load(&wstate) == W_CLOSED) {
		atomic_store(&wstate, W_IDLE);
		total_drops = 0;
	}
	int ok = atomic_load(&wstate) == W_IDLE;
	pthread_mutex_unlock(&w_mu);
	return ok && !cfg.disable;
}

int nvlp_rt_signal_request(int sig, int timeout_ms)
{
	if (atomic_load(&wstate) != W_RUNNING || kick_wr < 0)
		return -1;
	sig_req = sig;
	(void)!write(kick_wr, "s", 1);
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
		struct pollfd p = {.fd = ans_rd, .events = POLLIN};
		int n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/* ---- fork ----------------------------------------------------------------------------------- */

void nvlp_rt_fork_prepare(void)
{
	/* No lock may be held mid-operation at the moment of fork: the child has only this
	 * thread. */
	pthread_mutex_lock(&str_mu);
	wlock();
}

void nvlp_rt_fork_parent(void)
{
	pthread_mutex_unlock(&w_mu);
	pthread_mutex_unlock(&str_mu);
}

int nvlp_rt_fork_child(void)
{
	forked_from = nvlp_rt_pid;
	nvlp_rt_pid = (pid_t)syscall(SYS_getpid);
	/* The parent owns its file and its writer thread does not exist here. */
	if (writer)
		nvlp_writer_abandon(writer);
	writer = NULL;
	wthread_live = 0;
	if (atomic_load(&wstate) != W_FAILED)
		atomic_store(&wstate, W_IDLE);
	/* Not recording until lifecycle.c has reset CUPTI too. */
	active_set(0);
	int *fds[] = {&kick_rd, &kick_wr, &ans_rd, &ans_wr};
	for (int i = 0; i < 4; i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	atomic_store(&kick_pending, 0);
	atomic_store(&w_waiters, 0); /* waiters of the parent do not exist here */
	sig_req = 0;
	total_drops = 0;
	nvlp_syms_reset(); /* the parent's modules and frames, which its trace has */
	nvlp_ring_reset_all();
	nvlp_clock_atfork_child();
	nvlp_tls_epoch = nvlp_tls_epoch + 1;
	pthread_mutex_unlock(&w_mu);
	pthread_mutex_unlock(&str_mu);
	return atomic_load(&wstate) == W_IDLE && !cfg.disable;
}

/* ---- init ----------------------------------------------------------------------------------- */

int nvlp_rt_in_vfork_child(void)
{
	return (pid_t)syscall(SYS_getpid) != nvlp_rt_pid;
}

/* Let the CUDA driver load us as its injection library (InitializeInjection, in cupti/), which
 * is the only way to see NVLink topology records. */
static void set_path_env(const char *var)
{
	if (getenv(var))
		return;
	Dl_info di;
	char path[PATH_MAX];
	if (dladdr((void *)nvlp_init, &di) && di.dli_fname && realpath(di.dli_fname, path))
		setenv(var, path, 0);
}

static void init_once(void)
{
	int err = errno;
	nvlp_rt_pid = (pid_t)syscall(SYS_getpid);
	cfg_parse();
	nvlp_lc_init();
	if (!cfg.disable) {
		pthread_key_create(&exit_key, thread_exit);
		if (cfg.cupti)
			set_path_env("CUDA_INJECTION64_PATH");
		/* NCCL loads its profiler plugin from this path: us (preload/ncclprof.c) */
		if (cfg.nccl_plugin)
			set_path_env("NCCL_PROFILER_PLUGIN");
		active_set(1);
	}
	errno = err;
}

void nvlp_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_once);
}

/* Cheap on purpose: parse the environment, register handlers; no thread, no file until the
 * first record. */
__attribute__((constructor)) static void rt_ctor(void)
{
	nvlp_init();
}

/* ---- defaults for cupti/ (replaced by its strong definitions when it is linked in) ----------- */
__attribute__((weak)) void nvlp_cupti_start(void)
{
}
__attribute__((weak)) void nvlp_cupti_stop(void)
{
}
__attribute__((weak)) void nvlp_cupti_atfork_child(void)
{
}
__attribute__((weak)) uint64_t nvlp_cupti_stream_id(void *stream)
{
	(void)stream;
	return 0;
}
__attribute__((weak)) int nvlp_cupti_pointer_info(const void *p, int *device, int *managed)
{
	(void)p, (void)device, (void)managed;
	return -1;
}
__attribute__((weak)) void nvlp_cupti_managed_seen(void)
{
}

void nvlp_rt_set_active(int on)
{
	active_set(on);
}

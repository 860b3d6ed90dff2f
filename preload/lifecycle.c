/* lifecycle.c: decides when recording starts and ends: init, exit, _exit, signals, exec, and fork children. */
#include <dlfcn.h>       /* dlsym, dladdr */
#include <link.h>        /* dl_iterate_phdr */
#include <errno.h>       /* errno */
#include <limits.h>      /* PATH_MAX */
#include <pthread.h>     /* pthread_atfork, pthread_sigmask */
#include <setjmp.h>      /* sigsetjmp */
#include <signal.h>      /* sigaction */
#include <stdlib.h>      /* atexit, getenv, setenv, realpath */
#include <sys/syscall.h> /* SYS_exit_group */
#include <time.h>        /* nanosleep */
#include <unistd.h>      /* execve */

#include "nvlp_module.h" /* nvlp_lc_refresh_atexit, nvlp_env_point_at_self */
#include "nvlp_rt.h"
#include "rt_internal.h"

/* How far the end of the trace (nvlp_shutdown) has got, and who is running it. */
static struct {
	/* 0 none, 1 shutting down, 2 done (reset by rearm and in a fork child). */
	volatile int state;
	/* The thread running nvlp_shutdown (a signal handler must not wait for itself). */
	volatile pid_t tid;
} shutdown_run;

static inline int shut_get(void)
{
	return __atomic_load_n(&shutdown_run.state, __ATOMIC_ACQUIRE);
}
static inline void shut_set(int v)
{
	__atomic_store_n(&shutdown_run.state, v, __ATOMIC_RELEASE);
}

/* ---- the real functions (resolved at init: a vfork child must not run dlsym) ----------------- */

typedef void (*exit_fn)(int);
typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

/* u_exit, u_Exit: _exit, _Exit */
static struct {
	exit_fn u_exit, u_Exit, exit;
	execve_fn execve, execvpe;
	execv_fn execv, execvp;
	fexecve_fn fexecve;
} real;

static void resolve(void)
{
	real.u_exit = (exit_fn)dlsym(RTLD_NEXT, "_exit");
	real.u_Exit = (exit_fn)dlsym(RTLD_NEXT, "_Exit");
	real.exit = (exit_fn)dlsym(RTLD_NEXT, "exit");
	real.execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
	real.execvpe = (execve_fn)dlsym(RTLD_NEXT, "execvpe");
	real.execv = (execv_fn)dlsym(RTLD_NEXT, "execv");
	real.execvp = (execv_fn)dlsym(RTLD_NEXT, "execvp");
	real.fexecve = (fexecve_fn)dlsym(RTLD_NEXT, "fexecve");
}

/* ---- shutdown ------------------------------------------------------------------------------- */

void nvlp_shutdown(unsigned reason)
{
	/* A vfork child shares the parent's memory: the parent's trace is not ours to end. */
	if (nvlp_rt_in_vfork_child())
		return;
	int err = errno;
	int expect = 0;
	if (!__atomic_compare_exchange_n(&shutdown_run.state, &expect, 1, 0, __ATOMIC_ACQ_REL,
	                                 __ATOMIC_ACQUIRE)) {
		/* Someone else is ending the trace (exit() racing a signal, two exiting threads):
		 * wait a bounded time so whoever proceeds to _exit finds the file complete. */
		for (int i = 0; i < 3000 && shut_get() == 1 && nvlp_rt_trace_open(); i++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
		errno = err;
		return;
	}
	shutdown_run.tid = (pid_t)syscall(SYS_gettid);
	/* Modules flush through the ring (CUPTI's buffers), so recording must still be on; their
	 * threads stop after it is off (the Python sampler's last records are in before the final
	 * drain). The order: nvlp_module.h. */
	if (nvlp_is_active())
		nvlp_modules_flush();
	nvlp_rt_set_active(0);
	nvlp_modules_stop();
	nvlp_rt_finish(reason);
	shut_set(2);
	errno = err;
}

static void at_exit(void)
{
	nvlp_shutdown(NVLP_END_EXIT);
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(unsigned long long *)data = info->dlpi_adds;
	return 1; /* the counter is the same in every entry: stop at the first */
}

/*
 * Handlers registered from a preloaded library's constructor run after every library destructor
 * (ld.so's own exit handler is registered later, by __libc_start_main), and libraries dlopen'ed
 * later register theirs later still: CUPTI's PM-sampling teardown at exit then frees through
 * libnvperf_host's destroyed state (seen on the GPU machine: "double free or corruption").
 * So the handler is registered again whenever the set of loaded objects grew; it is idempotent.
 */
/* Flags a handler takes so that it does not run twice (a fork child resets them, see fork_child).
 */
static struct {
	int atexit_busy; /* a flag, not a mutex */
	/* Set by the first fatal signal of the process: any later one (another thread, or a fault
	 * in this handler's waiting) goes straight to the default action (on_fatal_signal). */
	int fatal_seen;
	/* The thread unwinding a fatal signal's stack (0: none), and where a fault of its
	 * unwinding jumps back to (unwind_guarded) */
	pid_t unwinding;
	sigjmp_buf unwind_jb;
} guards;

/* The handler again if the loads counter moved since *seen. A library is counted once mapped, before
 * its initialisers ran (and registered its destructors): a caller that knows its own step loaded
 * one keeps its own *seen, so that another thread's tick, which saw the library half-loaded, does
 * not hide the load from it. */
static void refresh_atexit(unsigned long long *seen)
{
	unsigned long long adds = 0;
	dl_iterate_phdr(count_adds, &adds);
	if (adds == __atomic_load_n(seen, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&guards.atexit_busy, 1, __ATOMIC_ACQUIRE))
		return;
	if (adds != __atomic_load_n(seen, __ATOMIC_RELAXED) && shut_get() == 0) {
		__atomic_store_n(seen, adds, __ATOMIC_RELAXED);
		atexit(at_exit);
	}
	__atomic_store_n(&guards.atexit_busy, 0, __ATOMIC_RELEASE);
}

void nvlp_lc_refresh_atexit(void)
{
	static unsigned long long seen;
	refresh_atexit(&seen);
}

void nvlp_lc_refresh_atexit_after_load(void)
{
	static unsigned long long seen; /* the link sampler's own count */
	refresh_atexit(&seen);
}

/* Also when the library is unloaded without exit() (it is built nodelete, but be safe). */
__attribute__((destructor)) static void lc_dtor(void)
{
	nvlp_shutdown(NVLP_END_EXIT);
}

/* ---- termination signals -------------------------------------------------------------------- */

static const int term_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

/* Async-signal-safe: the writer thread does the work; we wait for it (bounded), then die of the
 * same signal so the exit status is what it would have been without us. */
static void on_term_signal(int sig)
{
	int err = errno;
	if (!nvlp_rt_in_vfork_child()) {
		if (shut_get() == 0) {
			nvlp_rt_signal_request(sig, 3000);
		} else if (shutdown_run.tid != (pid_t)syscall(SYS_gettid)) {
			/* Another thread is already ending the trace (exit()): let it finish. */
			for (int i = 0; i < 300 && shut_get() == 1; i++) {
				struct timespec ts = {0, 10000000};
				nanosleep(&ts, NULL);
			}
		}
	}
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	raise(sig); /* pending until the handler returns (sig is blocked in here) */
	errno = err;
}

/* ---- fatal signals ------------------------------------------------------------------------ */

/*
 * SIGABRT (abort(), torch's NCCL watchdog), SIGSEGV, SIGBUS, SIGFPE, SIGILL: the writer thread
 * writes FATAL (who got it, where), EXITINFO and END while the handler waits (2 s at most), then
 * the default action runs as it would have without us: the disposition goes back to SIG_DFL and
 * a fault the instruction raised (si_code > 0) simply happens again on return, with its own
 * siginfo in the core; a signal that was sent (kill, raise, abort's raise: si_code <= 0) is
 * raised again, pending until we return. Status, core dump and signal are the same as without
 * us. Taken only where the disposition is still SIG_DFL when the trace opens, like the
 * termination signals, and never chained: a handler installed before may be part of the job's
 * normal work (runtimes that use SIGSEGV for their own purposes), and one installed later
 * (Python's faulthandler.enable()) replaces ours, so that job's crash leaves no FATAL.
 */
static const int fatal_sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define FATAL_WAIT_MS 2000

static void on_fatal_signal(int sig, siginfo_t *si, void *uc);

/*
 * The stack of the thread a fatal signal hit, taken in its handler (nvlp_rt_fatal_capture). An
 * unwinder walking a smashed stack may fault: that fault comes back to on_fatal_signal, which
 * jumps back here, and the FATAL record goes without a stack; the process still dies of its
 * first signal. Only where SIGSEGV and SIGBUS come to us (a handler of the job's would get our
 * fault); both are unblocked for the walk (the one being handled is blocked in here).
 */
static void unwind_guarded(const void *uc, pid_t tid)
{
	static const int faults[] = {SIGSEGV, SIGBUS};
	sigset_t set, old;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) {
		struct sigaction cur;
		if (sigaction(faults[i], NULL, &cur) < 0 || !(cur.sa_flags & SA_SIGINFO) ||
		    cur.sa_sigaction != on_fatal_signal)
			return;
		sigaddset(&set, faults[i]);
	}
	if (sigsetjmp(guards.unwind_jb, 1) == 0) { /* 1: the handler's mask comes back with a jump */
		__atomic_store_n(&guards.unwinding, tid, __ATOMIC_RELEASE);
		pthread_sigmask(SIG_UNBLOCK, &set, &old);
		nvlp_rt_fatal_capture(uc);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	__atomic_store_n(&guards.unwinding, 0, __ATOMIC_RELEASE);
}

static void on_fatal_signal(int sig, siginfo_t *si, void *uc)
{
	int err = errno;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	if (__atomic_load_n(&guards.unwinding, __ATOMIC_ACQUIRE) == tid)
		siglongjmp(guards.unwind_jb, 1); /* a fault in unwind_guarded's walk */
	/* The writer thread cannot end a trace for its own fault, nor the thread that is ending it;
	 * either way there is nobody to wait for. */
	if (!__atomic_exchange_n(&guards.fatal_seen, 1, __ATOMIC_ACQ_REL) &&
	    !nvlp_rt_in_vfork_child() && !nvlp_tls_state.is_writer && tid != shutdown_run.tid) {
		if (shut_get() == 0) {
			/* si_addr means the faulting address only for a fault (a sent signal's
			 * siginfo holds the sender's pid there) */
			int code = si ? si->si_code : 0;
			uint64_t addr = code > 0 ? (uint64_t)(uintptr_t)si->si_addr : 0;
			unwind_guarded(uc, tid);
			nvlp_rt_fatal_request(sig, (uint64_t)tid, code, addr, FATAL_WAIT_MS);
		} else {
			/* Another thread is ending the trace (exit(), a signal): let it finish. */
			for (int i = 0; i < FATAL_WAIT_MS / 10 && shut_get() == 1; i++) {
				struct timespec ts = {0, 10000000};
				nanosleep(&ts, NULL);
			}
		}
	}
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	/* Sent, not raised by the instruction (or an asynchronous machine-check SIGBUS, which does not
	 * come back by itself): raise it again. */
	if (!si || si->si_code <= 0 || (sig == SIGBUS && si->si_code == BUS_MCEERR_AO))
		raise(sig); /* pending until the handler returns (sig is blocked in here) */
	errno = err;
}

/* When the first trace file opens: take over SIGTERM/SIGINT/SIGHUP/SIGQUIT if they still have the
 * default disposition (so handlers the program installed during start-up win), and the fatal
 * signals by the same rule. */
static void install_signals(void)
{
	static int done;
	if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
		return;
	for (size_t i = 0; i < sizeof term_sigs / sizeof *term_sigs; i++) {
		struct sigaction old;
		if (sigaction(term_sigs[i], NULL, &old) < 0)
			continue;
		/* The application's own handler (or SIG_IGN, e.g. nohup) always wins. */
		if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
			continue;
		/* Every asynchronous signal waits while we end the trace (at most ~3 s). */
		struct sigaction sa = {.sa_handler = on_term_signal, .sa_flags = SA_RESTART};
		sigfillset(&sa.sa_mask);
		static const int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
		for (size_t j = 0; j < sizeof sync_sigs / sizeof *sync_sigs; j++)
			sigdelset(&sa.sa_mask, sync_sigs[j]);
		sigaction(term_sigs[i], &sa, NULL);
	}
	for (size_t i = 0; i < sizeof fatal_sigs / sizeof *fatal_sigs; i++) {
		struct sigaction old;
		if (sigaction(fatal_sigs[i], NULL, &old) < 0 || (old.sa_flags & SA_SIGINFO) ||
		    old.sa_handler != SIG_DFL)
			continue;
		/* SA_ONSTACK: on the job's alternate stack when it has one (a stack overflow);
		 * asynchronous signals wait, other faults still come through. */
		struct sigaction sa = {.sa_sigaction = on_fatal_signal,
		                       .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART};
		sigfillset(&sa.sa_mask);
		for (size_t j = 0; j < sizeof fatal_sigs / sizeof *fatal_sigs; j++)
			sigdelset(&sa.sa_mask, fatal_sigs[j]);
		sigdelset(&sa.sa_mask, SIGTRAP);
		sigdelset(&sa.sa_mask, SIGSYS);
		sigaddset(&sa.sa_mask, fatal_sigs[i]);
		sigaction(fatal_sigs[i], &sa, NULL);
	}
}

/* ---- fork ----------------------------------------------------------------------------------- */

static void fork_prepare(void)
{
	nvlp_rt_fork_prepare();
}

static void fork_parent(void)
{
	nvlp_rt_fork_parent();
}

/* The child (e.g. a DataLoader worker) forgets the parent's trace and records into its own file,
 * opened lazily, only if it makes an intercepted call. */
static void fork_child(void)
{
	int may_record = nvlp_rt_fork_child();
	shut_set(0);
	__atomic_store_n(&guards.fatal_seen, 0, __ATOMIC_RELAXED);
	guards.atexit_busy = 0;
	nvlp_modules_atfork_child(); /* CUPTI's state: CUDA does not survive fork */
	if (may_record)
		nvlp_rt_set_active(1);
}

/* For the modules: the CUDA driver loads us as its injection library (InitializeInjection, in
 * cupti/: the only way to see NVLink topology records), NVTX as its tool (capture.c). */
void nvlp_env_point_at_self(const char *var)
{
	if (getenv(var))
		return;
	Dl_info di;
	char path[PATH_MAX];
	if (dladdr((void *)nvlp_init, &di) && di.dli_fname && realpath(di.dli_fname, path))
		setenv(var, path, 0);
}

/* What the runtime tells us: a trace opened (take the signals, register at exit again), the
 * writer's period (libraries may have been loaded: register at exit again), a signal's end. */
static void trace_opened(void)
{
	install_signals();
	nvlp_lc_refresh_atexit();
}

static void end_for_signal(void)
{
	nvlp_shutdown(NVLP_END_SIGNAL);
}

static void init_once(void)
{
	int err = errno;
	nvlp_rt_pid = (pid_t)syscall(SYS_getpid);
	nvlp_cfg_parse();
	resolve();
	const struct nvlp_config *cfg = nvlp_cfg();
	if (!cfg->disable) {
		static const struct nvlp_rt_hooks hooks = {
		    .trace_opened = trace_opened, .tick = nvlp_lc_refresh_atexit, .end_for_signal = end_for_signal};
		nvlp_rt_set_hooks(&hooks);
		pthread_atfork(fork_prepare, fork_parent, fork_child);
		atexit(at_exit);
		nvlp_emit_init();
		/* the environment the CUDA driver, NVTX and NCCL load us by (nvlp_module.h's order) */
		nvlp_modules_init(cfg);
		nvlp_rt_set_active(1);
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
__attribute__((constructor)) static void lc_ctor(void)
{
	nvlp_init();
}

/* ---- exported wrappers ---------------------------------------------------------------------- */

/* exit() itself only notes the status (Python's sys.exit reaches it; a return from main does not
 * pass through the PLT): the trace ends in the exit handler as before. */
NVLP_EXPORT void exit(int status)
{
	if (!nvlp_rt_in_vfork_child()) /* a vfork child's status is not the parent's */
		nvlp_rt_set_exit_status(status);
	exit_fn f = real.exit ? real.exit : (exit_fn)dlsym(RTLD_NEXT, "exit");
	if (f)
		f(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

NVLP_EXPORT void _exit(int status)
{
	if (!nvlp_rt_in_vfork_child())
		nvlp_rt_set_exit_status(status);
	nvlp_shutdown(NVLP_END_UEXIT);
	if (real.u_exit)
		real.u_exit(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

NVLP_EXPORT void _Exit(int status)
{
	if (!nvlp_rt_in_vfork_child())
		nvlp_rt_set_exit_status(status);
	nvlp_shutdown(NVLP_END_UEXIT);
	if (real.u_Exit)
		real.u_Exit(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

/* Before exec: end the trace (the new image starts its own file, LD_PRELOAD being inherited).
 * Returns 1 when the trace was ended here, so a failed exec can resume recording. */
static int before_exec(void)
{
	if (nvlp_cfg()->disable || nvlp_rt_in_vfork_child() || shut_get() != 0)
		return 0;
	nvlp_shutdown(NVLP_END_EXEC);
	return 1;
}

static void after_failed_exec(int ended)
{
	if (!ended)
		return;
	int err = errno;
	if (nvlp_rt_rearm()) {
		shut_set(0);
		nvlp_rt_set_active(1);
	}
	errno = err;
}

#define EXEC_WRAPPER(real, call)                                                                   \
	do {                                                                                       \
		if (!real) {                                                                       \
			errno = ENOSYS;                                                            \
			return -1;                                                                 \
		}                                                                                  \
		int ended_ = before_exec();                                                        \
		int rc_ = call;                                                                    \
		after_failed_exec(ended_);                                                         \
		return rc_;                                                                        \
	} while (0)

NVLP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	EXEC_WRAPPER(real.execve, real.execve(path, argv, envp));
}

NVLP_EXPORT int execv(const char *path, char *const argv[])
{
	EXEC_WRAPPER(real.execv, real.execv(path, argv));
}

NVLP_EXPORT int execvp(const char *file, char *const argv[])
{
	EXEC_WRAPPER(real.execvp, real.execvp(file, argv));
}

NVLP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	EXEC_WRAPPER(real.execvpe, real.execvpe(file, argv, envp));
}

NVLP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	EXEC_WRAPPER(real.fexecve, real.fexecve(fd, argv, envp));
}

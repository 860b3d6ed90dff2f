/* rt_app.c: a job that calls (fake) NCCL in the ways the runtime's lifecycle tests need. */
#include <dlfcn.h>     /* dlopen */
#include <errno.h>     /* errno */
#include <pthread.h>   /* pthread_create */
#include <signal.h>    /* sigaction */
#include <stdatomic.h> /* atomic_long */
#include <stdint.h>    /* uintptr_t */
#include <stdio.h>     /* printf */
#include <stdlib.h>    /* atoi, exit */
#include <string.h>    /* strcmp */
#include <sys/wait.h>  /* waitpid */
#include <time.h>      /* nanosleep */
#include <fcntl.h>     /* open */
#include <unistd.h>    /* fork, execv, _exit, pread */

#include <nccl.h>

static ncclComm_t comm;
static atomic_long calls; /* ncclAllReduce calls made */
static atomic_int stop;   /* ask worker threads to finish */
static volatile sig_atomic_t got_term;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static void init_comm(void)
{
	ncclUniqueId id;
	if (ncclGetUniqueId(&id) != ncclSuccess ||
	    ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
		fprintf(stderr, "rt_app: fake NCCL init failed\n");
		exit(90);
	}
}

static void allreduce(void)
{
	if (ncclAllReduce(NULL, NULL, 1024, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess) {
		fprintf(stderr, "rt_app: ncclAllReduce failed\n");
		exit(91);
	}
	atomic_fetch_add(&calls, 1);
}

/* Worker: n calls (or until stop when n < 0). */
static void *worker(void *arg)
{
	long n = (long)arg;
	for (long i = 0; n < 0 ? !atomic_load(&stop) : i < n; i++)
		allreduce();
	return NULL;
}

/* Paced worker: emits until stop, resting 1 ms every 50 calls (the machine has 2 cores; eight
 * spinning threads would starve the forked children of CPU rather than test anything). */
static void *paced_worker(void *arg)
{
	(void)arg;
	for (long i = 0; !atomic_load(&stop); i++) {
		allreduce();
		if (i % 50 == 0)
			sleep_ms(1);
	}
	return NULL;
}

static void *exit_after(void *arg)
{
	sleep_ms((long)arg);
	exit(7);
}

/* fatal modes: the second thread's work, then the crash */
static const char *crash_how = "abort";
/* not inlined: the FATAL record's stack names it (crash_in_app) */
__attribute__((noinline)) static void crash_in_app(void)
{
	if (!strcmp(crash_how, "segv")) {
		volatile int *p = (volatile int *)(uintptr_t)atol("8");
		*p = 1;
	} else if (!strcmp(crash_how, "kill")) {
		kill(getpid(), SIGABRT); /* sent, not raised: si_code SI_USER */
	} else if (!strcmp(crash_how, "free")) {
		/* a double free: glibc's malloc aborts inside free() (heap corruption, as in a
		 * "corrupted double-linked list" at exit) */
		char *volatile p = malloc(24);
		free(p);
		free(p);
	}
	abort();
}
#define crash crash_in_app

static void *crash_thread(void *arg)
{
	pthread_setname_np(pthread_self(), "crasher");
	sleep_ms((long)arg); /* no NCCL call: the main thread's are the only ones (FAKE_NCCL_BLOCK_AT) */
	crash();
	return NULL;
}

static void on_abrt(int sig)
{
	static const char m[] = "app abort handler ran\n";
	(void)!write(1, m, sizeof m - 1);
	signal(sig, SIG_DFL); /* abort() raises again when we return */
}

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256], fmt[64];
	long kb = -1;
	snprintf(fmt, sizeof fmt, "%s: %%ld", key);
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, fmt, &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static long vm_size_kb(void)
{
	return status_kb("VmSize");
}

/* This thread's read- and write-type syscall counts (task I/O accounting): one pread each time. */
static void thread_syscalls(int fd, long *r, long *w)
{
	char b[512];
	ssize_t n = pread(fd, b, sizeof b - 1, 0);
	b[n > 0 ? n : 0] = 0;
	const char *x = strstr(b, "syscr: "), *y = strstr(b, "syscw: ");
	*r = x ? atol(x + 7) : -1;
	*w = y ? atol(y + 7) : -1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rt_app MODE [ARGS]\n");
		return 2;
	}
	const char *mode = argv[1];
	long a = argc > 2 ? atol(argv[2]) : 0, b = argc > 3 ? atol(argv[3]) : 0;
	/* fatal HOW WHERE [handler]: a job whose own SIGABRT handler was installed before the shim's
	 * trace opened */
	if (!strcmp(mode, "fatal") && argc > 4 && !strcmp(argv[4], "handler-before"))
		signal(SIGABRT, on_abrt);
	init_comm();

	if (!strcmp(mode, "calls")) { /* calls N: N calls, return from main */
		worker((void *)a);
		printf("calls=%ld\n", atomic_load(&calls));
		return 0;
	}
	if (!strcmp(mode, "exit-thread")) { /* exit(7) from a non-main thread while 4 emit */
		pthread_t t[4], e;
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, worker, (void *)-1L);
		pthread_create(&e, NULL, exit_after, (void *)300L);
		worker((void *)-1L);
		return 1;
	}
	if (!strcmp(mode, "loop")) { /* calls until killed; prints ready after the first */
		for (long i = 0;; i++) {
			allreduce();
			if (i == 0) {
				printf("ready\n");
				fflush(stdout);
			}
			if (i % 100 == 0)
				sleep_ms(1);
		}
	}
	if (!strcmp(mode, "managed")) { /* managed MS: one call, ready, a managed allocation (the fake
	                                  * runtime's FAKE_CUDART_MANAGED_MS makes it slow), then MS ms */
		allreduce();
		printf("ready\n");
		fflush(stdout);
		int (*mm)(void **, size_t, unsigned) =
		    (int (*)(void **, size_t, unsigned))dlsym(RTLD_DEFAULT, "cudaMallocManaged");
		void *m = NULL;
		printf("allocated=%d\n", mm ? mm(&m, 1 << 20, 1) : -1);
		fflush(stdout);
		sleep_ms(a);
		return 0;
	}
	if (!strcmp(mode, "idle")) { /* idle MS: one call, then nothing for MS ms; ready after it */
		allreduce();
		printf("ready\n");
		fflush(stdout);
		sleep_ms(a);
		return 0;
	}
	if (!strcmp(mode, "block-thread")) { /* block-thread MS: a thread calls (FAKE_NCCL_BLOCK_*
	                                       * makes it block); the main thread returns after MS */
		pthread_t t;
		pthread_create(&t, NULL, worker, (void *)2L);
		printf("ready\n");
		fflush(stdout);
		sleep_ms(a);
		printf("calls=%ld\n", atomic_load(&calls));
		return 0;
	}
	if (!strcmp(mode, "fatal")) { /* fatal HOW WHERE [handler-before|handler-after]: HOW abort,
	                                * segv, kill (SIGABRT sent to itself) or free (a double
	                                * free: glibc aborts), on the main thread or
	                                * a second one ("thread", while main makes calls) */
		crash_how = argv[2];
		if (argc > 4 && !strcmp(argv[4], "handler-after")) {
			allreduce(); /* the trace is open: this replaces the shim's handler */
			signal(SIGABRT, on_abrt);
		}
		allreduce();
		printf("ready\n");
		fflush(stdout);
		if (!strcmp(argv[3], "thread")) {
			pthread_t t;
			pthread_create(&t, NULL, crash_thread, (void *)300L);
			for (;;) {
				allreduce();
				sleep_ms(1);
			}
		}
		sleep_ms(300);
		crash();
		return 1;
	}
	if (!strcmp(mode, "slow-loop")) { /* a call every 10 ms until killed: too few records to
	                                     * fill a buffer, only the periodic flush writes them */
		for (long i = 0;; i++) {
			allreduce();
			if (i == 0) {
				printf("ready\n");
				fflush(stdout);
			}
			sleep_ms(10);
		}
	}
	if (!strcmp(mode, "handler")) { /* the app's own SIGTERM handler must run */
		struct sigaction sa = {.sa_handler = on_term};
		sigaction(SIGTERM, &sa, NULL);
		allreduce();
		printf("ready\n");
		fflush(stdout);
		while (!got_term) {
			allreduce();
			sleep_ms(1);
		}
		printf("app handler ran\n");
		return 0;
	}
	if (!strcmp(mode, "uexit")) { /* uexit N STATUS: N calls then _exit(STATUS) */
		worker((void *)a);
		_exit((int)b);
	}
	if (!strcmp(mode, "fork")) { /* fork P C: parent P calls, child C calls, exit(0) each */
		worker((void *)a);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			worker((void *)b);
			exit(0);
		}
		int st;
		waitpid(pid, &st, 0);
		worker((void *)a);
		printf("child=%d status=%d\n", (int)pid, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return 0;
	}
	if (!strcmp(mode, "fork-stress")) { /* 8 threads emit while the main thread forks N times */
		pthread_t t[8];
		for (int i = 0; i < 8; i++)
			pthread_create(&t[i], NULL, paced_worker, NULL);
		int bad = 0;
		for (long i = 0; i < a; i++) {
			pid_t pid = fork();
			if (pid == 0) {
				allreduce();
				_exit(0);
			}
			int st;
			if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
			    WEXITSTATUS(st))
				bad++;
		}
		atomic_store(&stop, 1);
		for (int i = 0; i < 8; i++)
			pthread_join(t[i], NULL);
		printf("forks=%ld bad=%d\n", a, bad);
		return 0;
	}
	if (!strcmp(mode, "exec")) { /* exec N PROG ARGS...: N calls, execv; N more if it fails */
		worker((void *)a);
		fflush(stdout);
		execv(argv[3], argv + 3);
		/* A failed exec: the job goes on, and so must recording (into a new file). */
		perror("execv");
		worker((void *)a);
		return 1;
	}
	if (!strcmp(mode, "threads")) { /* threads T N: T threads x N calls */
		pthread_t t[64];
		if (a > 64)
			a = 64;
		for (long i = 0; i < a; i++)
			pthread_create(&t[i], NULL, worker, (void *)b);
		for (long i = 0; i < a; i++)
			pthread_join(t[i], NULL);
		printf("calls=%ld\n", atomic_load(&calls));
		return 0;
	}
	if (!strcmp(mode, "late")) { /* late LIB MS: record, dlopen LIB, record, sleep MS, exit */
		allreduce();
		if (!dlopen(argv[2], RTLD_NOW | RTLD_LOCAL)) {
			fprintf(stderr, "rt_app: %s\n", dlerror());
			return 3;
		}
		allreduce();
		sleep_ms(b);
		return 0;
	}
	if (!strcmp(mode, "nosys")) { /* nosys N: N calls back to back on a started recorder; prints
	                               * the read/write syscalls this thread made during them, less
	                               * those of an empty interval (the pread that measures) */
		allreduce();
		sleep_ms(100);
		int fd = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			perror("rt_app: /proc/thread-self/io");
			return 3;
		}
		long r0, w0, r1, w1, r2, w2;
		thread_syscalls(fd, &r0, &w0);
		thread_syscalls(fd, &r1, &w1);
		worker((void *)a);
		thread_syscalls(fd, &r2, &w2);
		printf("calls=%ld\n", atomic_load(&calls));
		printf("syscr=%ld\nsyscw=%ld\n", (r2 - r1) - (r1 - r0), (w2 - w1) - (w1 - w0));
		return 0;
	}
	if (!strcmp(mode, "burst")) { /* burst N: N calls back to back, then wait (20 s at most)
	                                * until the resident memory is back within 8 MiB of before */
		allreduce();
		sleep_ms(100);
		long rss0 = status_kb("VmRSS");
		worker((void *)a);
		long peak = status_kb("VmRSS");
		long rss = peak;
		for (int i = 0; i < 400 && rss > rss0 + 8192; i++) {
			sleep_ms(50);
			rss = status_kb("VmRSS");
		}
		printf("calls=%ld\n", atomic_load(&calls));
		printf("rss_burst_kb=%ld\n", peak - rss0);
		printf("rss_back=%d\n", rss <= rss0 + 8192);
		return 0;
	}
	if (!strcmp(mode, "rate")) { /* rate R S: R calls/s for S s in 1 ms slices (a late slice is
	                              * made up at once); prints the calls and this thread's CPU */
		allreduce();
		struct timespec next, c0, c1;
		clock_gettime(CLOCK_MONOTONIC, &next);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		for (long ms = 0; ms < b * 1000; ms++) {
			for (long i = 0; i < a / 1000; i++)
				allreduce();
			next.tv_nsec += 1000000;
			if (next.tv_nsec >= 1000000000) {
				next.tv_sec++;
				next.tv_nsec -= 1000000000;
			}
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		}
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		printf("calls=%ld\n", atomic_load(&calls));
		printf("cpu_ms=%.1f\n",
		       ((c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec)) / 1e6);
		return 0;
	}
	if (!strcmp(mode, "churn")) { /* churn K: K short threads, 4 at a time, 3 calls each */
		long vm0 = vm_size_kb();
		for (long i = 0; i < a; i += 4) {
			pthread_t t[4];
			for (int j = 0; j < 4; j++)
				pthread_create(&t[j], NULL, worker, (void *)3L);
			for (int j = 0; j < 4; j++)
				pthread_join(t[j], NULL);
		}
		printf("calls=%ld\n", atomic_load(&calls));
		printf("vm_growth_kb=%ld\n", vm_size_kb() - vm0);
		return 0;
	}
	fprintf(stderr, "rt_app: unknown mode %s\n", mode);
	return 2;
}

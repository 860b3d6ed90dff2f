/* bench_shim.c: the shim's added cost per ncclAllReduce, its trace bytes per record, and what it keeps of bursts on busy cores, on the fake NCCL. */
#include <dirent.h>   /* opendir */
#include <pthread.h>  /* pthread_create */
#include <signal.h>   /* kill */
#include <sys/wait.h> /* waitpid */
#include <limits.h>   /* PATH_MAX */
#include <stdio.h>    /* printf, popen */
#include <stdlib.h>   /* qsort, setenv */
#include <string.h>   /* strrchr */
#include <sys/stat.h> /* stat, mkdir */
#include <time.h>     /* clock_gettime */
#include <unistd.h>   /* readlink */

#include <nccl.h>

#include "nvlp_trace.h"

/*
 * The parent runs the same binary as a child, alternately without and with LD_PRELOAD of the shim
 * (ROUNDS times each, so that machine noise hits both alike), and takes the median of each side.
 * CUPTI collection is switched off in the child: without a GPU driver there is no CUPTI, and this
 * measures the interposition and recording path itself; a third run per round adds NCCL's profiler
 * plugin (the fake NCCL calls it per collective, as NCCL does). A fourth run per round uses the
 * ring as it was before spill rings (NVLPROF_BUFFER_KB=1024: a 1 MiB ring, nothing behind it).
 *
 * Bursts (issue 12): with every core of the machine busy with spinning processes this program
 * starts and stops itself, a child makes N calls back to back on T threads, or paces 1 M calls/s
 * for 10 s (on one thread, and shared by 16); each with the default buffers and with the old
 * ring, counting records kept and dropped in the trace, and the writer thread's CPU per record.
 * The burst child also reports its resident memory before, right after, and 1.5 s after the burst
 * (when the writer has drained the spill and given its pages back).
 */
#define ROUNDS 5
#define DEFAULT_CALLS 400000

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int child(long calls)
{
	ncclUniqueId id;
	ncclComm_t comm;
	if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
		return 1;
	long bad = 0;
	for (long i = 0; i < 10000; i++) /* warm up: resolve, first ring, page faults */
		bad += ncclAllReduce(NULL, NULL, 1024, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess;
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	double t0 = now_ns();
	for (long i = 0; i < calls; i++)
		bad += ncclAllReduce(NULL, NULL, 1024 + (i & 7), ncclFloat32, ncclSum, comm, NULL) !=
		       ncclSuccess;
	double t1 = now_ns();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	ncclCommDestroy(comm);
	/* wall ns per call, then this thread's CPU ns per call (no preemption in it: on a shared
	 * machine the figure that resolves a few ns) */
	printf("%.3f %.3f\n", (t1 - t0) / (double)calls,
	       ((c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec)) / (double)calls);
	return bad != 0;
}

static int trace_stats(const char *dir, double *bytes, double *records, double *dropped);
/* ncclAllReduce records in the trace trace_stats read last */
static double allreduces;

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static ncclComm_t burst_comm;
static long burst_calls;

static void *burst_thread(void *arg)
{
	(void)arg;
	for (long i = 0; i < burst_calls; i++)
		ncclAllReduce(NULL, NULL, 1024 + (i & 7), ncclFloat32, ncclSum, burst_comm, NULL);
	return NULL;
}

/* --burst N T: T threads x N calls at once; prints ns per call (wall), RSS (KiB) before, right
 * after and 1.5 s after the burst, and the main thread's CPU ns per call (page faults included,
 * time waiting for a core left out: the figure that busy cores do not blur). */
static int child_burst(long calls, int threads)
{
	ncclUniqueId id;
	if (ncclGetUniqueId(&id) != ncclSuccess ||
	    ncclCommInitRank(&burst_comm, 1, id, 0) != ncclSuccess)
		return 1;
	ncclAllReduce(NULL, NULL, 1, ncclFloat32, ncclSum, burst_comm, NULL); /* trace open */
	struct timespec rest = {0, 200000000};
	nanosleep(&rest, NULL);
	long rss0 = rss_kb();
	burst_calls = calls;
	pthread_t t[64];
	threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
	double t0 = now_ns();
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	for (int i = 1; i < threads; i++)
		pthread_create(&t[i], NULL, burst_thread, NULL);
	burst_thread(NULL);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
	double t1 = now_ns();
	long rss1 = rss_kb();
	struct timespec drain = {1, 500000000};
	nanosleep(&drain, NULL);
	double cpu = (c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec);
	printf("%.3f %ld %ld %ld %.3f\n", (t1 - t0) / (double)calls, rss0, rss1, rss_kb(),
	       cpu / (double)calls);
	ncclCommDestroy(burst_comm);
	return 0;
}

/* --rate R S [T]: R calls per second for S seconds in all, shared by T threads (1 by default),
 * in 1 ms slices (a slice late behind busy cores is made up at once, as a job's step would be);
 * prints the calls made and the achieved rate. */
static ncclComm_t rate_comm;
static long rate_per_ms, rate_secs;
static long rate_made; /* __atomic builtins */

static void *rate_thread(void *arg)
{
	(void)arg;
	long made = 0;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long ms = 0; ms < rate_secs * 1000; ms++) {
		for (long i = 0; i < rate_per_ms; i++, made++)
			ncclAllReduce(NULL, NULL, 1024 + (i & 7), ncclFloat32, ncclSum, rate_comm,
			              NULL);
		next.tv_nsec += 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	__atomic_fetch_add(&rate_made, made, __ATOMIC_RELAXED);
	return NULL;
}

static int child_rate(long rate, long secs, int threads)
{
	ncclUniqueId id;
	if (ncclGetUniqueId(&id) != ncclSuccess ||
	    ncclCommInitRank(&rate_comm, 1, id, 0) != ncclSuccess)
		return 1;
	threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
	rate_per_ms = rate / 1000 / threads;
	rate_secs = secs;
	pthread_t t[64];
	double t0 = now_ns();
	for (int i = 1; i < threads; i++)
		pthread_create(&t[i], NULL, rate_thread, NULL);
	rate_thread(NULL);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
	double t1 = now_ns();
	ncclCommDestroy(rate_comm);
	long made = __atomic_load_n(&rate_made, __ATOMIC_RELAXED);
	printf("%ld %.0f\n", made, made / ((t1 - t0) / 1e9));
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Run ourselves as a child; @return ns per call, or -1. */
static double run_child(const char *self, long calls, const char *preload, const char *dir,
                        int plugin, const char *env)
{
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof cmd,
	         "env -u NCCL_PROFILER_PLUGIN %s%s NVLPROF_DIR='%s' NVLPROF_CUPTI=0 "
	         "NVLPROF_NCCL_PLUGIN=%d %s '%s' --child %ld",
		 preload ? "LD_PRELOAD=" : "", preload ? preload : "", dir, plugin, env, self,
		 calls);
	FILE *p = popen(cmd, "r");
	double ns = -1;
	if (!p || fscanf(p, "%lf", &ns) != 1)
		ns = -1;
	if (p && pclose(p) != 0)
		ns = -1;
	return ns;
}

/*
 * Python chains (issue 16): a python3 job calls ncclAllReduce through the shim with ctypes, PyDLL
 * (the GIL held during the call: the shim reads the interpreter, and walks the chain again only
 * when the frame moved) and CDLL (the GIL released, as torch does: the shim only checks). Each
 * with NVLPROF_STACKS=0 and 1, ROUNDS rounds alternated; the difference is what the Python
 * reader adds per collective (CPU time of the process, less sensitive to a loaded machine than wall
 * time). @return 0, or 1 when python3 is missing or failed (reported).
 */
static double run_py(const char *script, const char *preload, const char *dir, const char *how,
                     int stacks, long calls)
{
	char cmd[8 * PATH_MAX];
	snprintf(cmd, sizeof cmd,
	         "env -u NCCL_PROFILER_PLUGIN LD_PRELOAD='%s' NVLPROF_DIR='%s' NVLPROF_CUPTI=0 "
	         "NVLPROF_NCCL_PLUGIN=0 NVLPROF_STACKS=%d python3 '%s' %s %ld '%s'",
	         preload, dir, stacks, script, how, calls, preload);
	FILE *p = popen(cmd, "r");
	double ns = -1;
	if (!p || fscanf(p, "%lf", &ns) != 1)
		ns = -1;
	if (p && pclose(p) != 0)
		ns = -1;
	return ns;
}

static int bench_python(const char *preload, const char *tmpl, const char *fakes)
{
	if (system("command -v python3 >/dev/null 2>&1") != 0) {
		printf("bench_shim: python: no python3, Python chain cost not measured\n");
		return 0;
	}
	char script[PATH_MAX + 16], dir[PATH_MAX + 16];
	snprintf(script, sizeof script, "%s/py.py", tmpl);
	snprintf(dir, sizeof dir, "%s/py", tmpl);
	mkdir(dir, 0755);
	FILE *f = fopen(script, "w");
	if (!f)
		return 1;
	fprintf(f,
	        "import ctypes, sys, time\n"
	        "ctypes.CDLL('%s/libcudart.so.13', mode=ctypes.RTLD_GLOBAL)\n"
	        "ctypes.CDLL('%s/libnccl.so.2', mode=ctypes.RTLD_LOCAL)\n"
	        "how, n, lib = sys.argv[1], int(sys.argv[2]), sys.argv[3]\n"
	        "shim = (ctypes.PyDLL if how == 'gil' else ctypes.CDLL)(lib, mode=ctypes.RTLD_LOCAL)\n"
	        "class Uid(ctypes.Structure):\n"
	        "    _fields_ = [('internal', ctypes.c_char * 128)]\n"
	        "uid = Uid(); comm = ctypes.c_void_p()\n"
	        "assert shim.ncclGetUniqueId(ctypes.byref(uid)) == 0\n"
	        "assert shim.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0\n"
	        "ar = shim.ncclAllReduce\n"
	        "ar.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,\n"
	        "               ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]\n"
	        "def step(k):\n"
	        "    for i in range(k):\n"
	        "        ar(None, None, 1024, 7, 0, comm, None)\n"
	        "step(10000)\n"
	        "t0 = time.process_time_ns(); step(n); t1 = time.process_time_ns()\n"
	        "print((t1 - t0) / n)\n",
	        fakes, fakes);
	fclose(f);
	const long calls = 200000;
	double r[4][ROUNDS];
	static const char *const how[4] = {"gil", "gil", "nogil", "nogil"};
	for (int i = 0; i < ROUNDS; i++)
		for (int k = 0; k < 4; k++)
			if ((r[k][i] = run_py(script, preload, dir, how[k], k & 1, calls)) < 0) {
				printf("bench_shim: python: a run failed\n");
				return 1;
			}
	for (int k = 0; k < 4; k++)
		qsort(r[k], ROUNDS, sizeof r[k][0], cmp_double);
	printf("bench_shim: python ctypes, %ld ncclAllReduce x %d rounds: GIL held %.1f ns/call "
	       "with Python chains off, %.1f on: added %.1f ns/call; GIL released %.1f off, %.1f on: "
	       "added %.1f ns/call\n",
	       calls, ROUNDS, r[0][ROUNDS / 2], r[1][ROUNDS / 2], r[1][ROUNDS / 2] - r[0][ROUNDS / 2],
	       r[2][ROUNDS / 2], r[3][ROUNDS / 2], r[3][ROUNDS / 2] - r[2][ROUNDS / 2]);
	printf("bench_shim: python: spread (min..max) GIL held off %.1f..%.1f on %.1f..%.1f; "
	       "released off %.1f..%.1f on %.1f..%.1f\n",
	       r[0][0], r[0][ROUNDS - 1], r[1][0], r[1][ROUNDS - 1], r[2][0], r[2][ROUNDS - 1],
	       r[3][0], r[3][ROUNDS - 1]);
	return 0;
}

/* Spinning processes, one per core, so the writer thread competes for CPU as on a busy node. */
static int busy_start(pid_t *pids, int max)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	int k = 0;
	for (; k < n && k < max; k++) {
		pids[k] = fork();
		if (pids[k] == 0)
			for (volatile unsigned long x = 0;; x++)
				;
		if (pids[k] < 0)
			break;
	}
	return k;
}

static void busy_stop(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
}

/* What one burst/rate child left: its trace's ncclAllReduce records (records), every record
 * (all), drops, size, and the writer thread's CPU time (-1: not reported). */
struct load_stats {
	double records, all, dropped, bytes, writer_ms;
};

/* One burst/rate child under LD_PRELOAD with env; fills out[] from its line, and *ls.
 * @return 0 or -1. */
static int run_load(const char *self, const char *preload, const char *dir, const char *env,
                    const char *mode, double *out, int nout, struct load_stats *ls)
{
	char cmd[12 * PATH_MAX], err[2 * PATH_MAX];
	/* NVLPROF_VERBOSE: the shim's last words give the writer thread's CPU time. */
	snprintf(err, sizeof err, "%s.err", dir);
	snprintf(cmd, sizeof cmd,
	         "env -u NCCL_PROFILER_PLUGIN LD_PRELOAD=%s NVLPROF_DIR='%s' NVLPROF_CUPTI=0 "
	         "NVLPROF_STACKS=0 NVLPROF_NCCL_PLUGIN=0 NVLPROF_VERBOSE=1 %s '%s' %s 2>'%s'",
	         preload, dir, env, self, mode, err);
	FILE *p = popen(cmd, "r");
	int ok = p != NULL;
	for (int i = 0; ok && i < nout; i++)
		ok = fscanf(p, "%lf", &out[i]) == 1;
	if (p && pclose(p) != 0)
		ok = 0;
	if (!ok || trace_stats(dir, &ls->bytes, &ls->records, &ls->dropped) != 0)
		return -1;
	ls->all = ls->records;
	ls->records = allreduces;
	ls->writer_ms = -1;
	FILE *e = fopen(err, "r");
	char line[1024];
	while (e && fgets(line, sizeof line, e)) {
		const char *w = strstr(line, "nvlprof's threads: writer ");
		if (w)
			sscanf(w + strlen("nvlprof's threads: writer "), "%lf", &ls->writer_ms);
	}
	if (e)
		fclose(e);
	return 0;
}

static int bench_bursts(const char *self, const char *preload, const char *tmpl)
{
	static const struct {
		const char *name, *env;
	} sides[] = {{"default buffers", ""}, {"old ring (1 MiB)", "NVLPROF_BUFFER_KB=1024"}};
	static const struct {
		const char *what, *mode;
		long calls;
	} loads[] = {{"1 thread x 100,000 calls back to back", "--burst 100000 1", 100000},
	             {"16 threads x 20,000 calls back to back", "--burst 20000 16", 320000},
	             {"1 M calls/s for 10 s", "--rate 1000000 10", 0},
	             /* one writer for 16 producers: each gets a core's share, the writer one too */
	             {"16 threads x 62,000 calls/s for 10 s", "--rate 1000000 10 16", 0}};
	pid_t busy[256];
	int nbusy = busy_start(busy, 256);
	printf("bench_shim: bursts with %d spinning processes keeping every core busy\n", nbusy);
	int bad = 0;
	for (size_t l = 0; l < sizeof loads / sizeof *loads; l++)
		for (size_t s = 0; s < sizeof sides / sizeof *sides; s++) {
			char dir[PATH_MAX + 64];
			snprintf(dir, sizeof dir, "%s/b%zu%zu", tmpl, l, s);
			mkdir(dir, 0755);
			double o[5] = {0};
			struct load_stats ls;
			int burst = loads[l].calls > 0;
			if (run_load(self, preload, dir, sides[s].env, loads[l].mode, o, burst ? 5 : 2,
			             &ls) < 0) {
				printf("bench_shim: %s, %s: child failed\n", loads[l].what,
				       sides[s].name);
				bad = 1;
				continue;
			}
			/* Writer CPU per record: what the writer thread needs for the rate to hold
			 * (it gets about as much CPU as the producing thread on busy cores). */
			double wns = ls.writer_ms >= 0 && ls.all > 0 ? ls.writer_ms * 1e6 / ls.all : -1;
			/* The trace holds the calls plus a few records of its own (NCCL setup). */
			if (burst)
				printf("bench_shim:   %-40s %-17s %7.0f calls kept, %7.0f dropped, "
				       "%6.1f ns/call (%5.1f of CPU), writer %5.1f ns CPU/record, "
				       "%.2f bytes/record; RSS +%.0f KiB in the burst, +%.0f KiB 1.5 s "
				       "after\n",
				       loads[l].what, sides[s].name, ls.records, ls.dropped, o[0], o[4],
				       wns, ls.bytes / (ls.all > 0 ? ls.all : 1), o[2] - o[1],
				       o[3] - o[1]);
			else
				printf("bench_shim:   %-40s %-17s %7.0f calls kept, %7.0f dropped, "
				       "of %.0f made at %.0f calls/s, writer %5.1f ns CPU/record, "
				       "%.2f bytes/record\n",
				       loads[l].what, sides[s].name, ls.records, ls.dropped, o[0], o[1],
				       wns, ls.bytes / (ls.all > 0 ? ls.all : 1));
		}
	busy_stop(busy, nbusy);
	return bad;
}

/* Size of the one trace in dir and its record count. */
static int trace_stats(const char *dir, double *bytes, double *records, double *dropped)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX + 320];
	int found = 0;
	while (d && (e = readdir(d)))
		if (strstr(e->d_name, ".nvlp")) {
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			found = 1;
		}
	if (d)
		closedir(d);
	struct stat st;
	char err[512];
	nvlp_reader *r = found && stat(path, &st) == 0 ? nvlp_reader_open(path, err, sizeof err) : NULL;
	if (!r)
		return -1;
	struct nvlp_record rec;
	*records = 0;
	*dropped = 0;
	allreduces = 0;
	while (nvlp_reader_next(r, &rec) == 1) {
		*records += 1;
		if (rec.kind == NVLP_K_NCCL &&
		    ((const struct nvlp_rec_nccl *)rec.f)->fn == NVLP_NCCL_ALL_REDUCE)
			allreduces += 1;
		if (rec.kind == NVLP_K_END)
			*dropped = (double)((const struct nvlp_rec_end *)rec.f)->dropped;
	}
	nvlp_reader_close(r);
	*bytes = (double)st.st_size;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "--child"))
		return child(atol(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "--burst"))
		return child_burst(atol(argv[2]), atoi(argv[3]));
	if (argc >= 4 && !strcmp(argv[1], "--rate"))
		return child_rate(atol(argv[2]), atol(argv[3]), argc >= 5 ? atoi(argv[4]) : 1);
	/* --bursts: only the burst section (the rest is skipped) */
	int only_bursts = argc >= 2 && !strcmp(argv[1], "--bursts");
	long calls = argc >= 2 && !only_bursts ? atol(argv[1]) : DEFAULT_CALLS;
	char self[PATH_MAX - 64], lib[PATH_MAX], tmpl[] = "/tmp/nvlp-bench.XXXXXX";
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0 || !mkdtemp(tmpl))
		return 1;
	self[n] = 0;
	/* $BUILD/bench/bench_shim -> $BUILD/libnvlprof.so */
	snprintf(lib, sizeof lib, "%s", self);
	char *slash = strrchr(lib, '/');
	*slash = 0;
	slash = strrchr(lib, '/');
	snprintf(slash + 1, sizeof lib - (size_t)(slash + 1 - lib), "libnvlprof.so");
	const char *env_lib = getenv("NVLPROF_LIB");
	const char *preload = env_lib ? env_lib : lib;

	if (only_bursts) {
		int bad = bench_bursts(self, preload, tmpl);
		char rm[PATH_MAX + 16];
		snprintf(rm, sizeof rm, "rm -rf '%s'", tmpl);
		return system(rm) != 0 || bad;
	}

	/* traced: the interception alone (NCCL's profiler plugin off); plugged: with the plugin,
	 * which the fake NCCL then calls once per collective, as NCCL 2.27+ does */
	double plain[ROUNDS], traced[ROUNDS], plugged[ROUNDS], oldring[ROUNDS];
	char dir[PATH_MAX + 32], pdir[PATH_MAX + 32], odir[PATH_MAX + 32];
	for (int i = 0; i < ROUNDS; i++) {
		snprintf(dir, sizeof dir, "%s/r%d", tmpl, i);
		snprintf(pdir, sizeof pdir, "%s/p%d", tmpl, i);
		snprintf(odir, sizeof odir, "%s/o%d", tmpl, i);
		mkdir(dir, 0755);
		mkdir(pdir, 0755);
		mkdir(odir, 0755);
		plain[i] = run_child(self, calls, NULL, dir, 0, "");
		traced[i] = run_child(self, calls, preload, dir, 0, "");
		plugged[i] = run_child(self, calls, preload, pdir, 1, "");
		oldring[i] = run_child(self, calls, preload, odir, 0, "NVLPROF_BUFFER_KB=1024");
		if (plain[i] < 0 || traced[i] < 0 || plugged[i] < 0 || oldring[i] < 0) {
			printf("bench_shim: a child run failed (shim %s)\n", preload);
			return 1;
		}
	}
	double bytes = 0, records = 0, dropped = 0, ob = 0, orec = 0, odrop = 0;
	int stats = trace_stats(dir, &bytes, &records, &dropped);
	/* A ring that fills drops records instead of keeping them, which is cheaper: say how many,
	 * so that the two figures compare the same work. */
	trace_stats(odir, &ob, &orec, &odrop);
	qsort(plain, ROUNDS, sizeof plain[0], cmp_double);
	qsort(traced, ROUNDS, sizeof traced[0], cmp_double);
	qsort(plugged, ROUNDS, sizeof plugged[0], cmp_double);
	qsort(oldring, ROUNDS, sizeof oldring[0], cmp_double);
	double added = traced[ROUNDS / 2] - plain[ROUNDS / 2];
	printf("bench_shim: %ld ncclAllReduce calls x %d rounds: %.1f ns/call without, %.1f with: "
	       "added %.1f ns/call (target <= 100)\n",
	       calls, ROUNDS, plain[ROUNDS / 2], traced[ROUNDS / 2], added);
	printf("bench_shim: with NCCL's profiler plugin served too (one more record per "
	       "collective): %.1f ns/call, %.1f more\n",
	       plugged[ROUNDS / 2], plugged[ROUNDS / 2] - traced[ROUNDS / 2]);
	printf("bench_shim: the same with the old ring (1 MiB, no spill): %.1f ns/call, added %.1f; "
	       "its last round dropped %.0f of %.0f calls, the default buffers' %.0f\n",
	       oldring[ROUNDS / 2], oldring[ROUNDS / 2] - plain[ROUNDS / 2], odrop,
	       (double)calls + 10000, dropped);
	if (stats == 0)
		printf("bench_shim: trace %.0f bytes, %.0f records, %.0f dropped: %.2f bytes/record "
		       "(target <= 8)\n",
		       bytes, records, dropped, bytes / (records > 0 ? records : 1));
	else
		printf("bench_shim: no readable trace in %s\n", dir);
	char fakes[PATH_MAX];
	snprintf(fakes, sizeof fakes, "%s", lib);
	char *ls = strrchr(fakes, '/');
	snprintf(ls + 1, sizeof fakes - (size_t)(ls + 1 - fakes), "fakes");
	int pyfail = bench_python(preload, tmpl, fakes);
	int bursts = getenv("NVLPROF_BENCH_NO_BURSTS") ? 0 : bench_bursts(self, preload, tmpl);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
	return system(cmd) != 0 || stats != 0 || bursts != 0 || pyfail != 0;
}

/* run.c: `nvlprof run`: runs a command with libnvlprof.so (found next to this binary or in ../lib) preloaded, into a run directory of its own, and says what was recorded. */
#include <dirent.h>   /* opendir */
#include <errno.h>    /* errno */
#include <limits.h>   /* PATH_MAX */
#include <signal.h>   /* sigaction, kill */
#include <stdio.h>    /* fprintf */
#include <stdlib.h>   /* getenv, setenv, realpath */
#include <string.h>   /* strcmp, strncmp */
#include <sys/stat.h> /* mkdir */
#include <sys/wait.h> /* waitpid */
#include <time.h>     /* strftime */
#include <unistd.h>   /* execvp, fork, readlink, access */

#include "cli/argparse.h"
#include "cli/commands.h"
#include "nvlp_trace.h" /* the reader, for the closing summary */

#define LIB_NAME "libnvlprof.so"

static void run_usage(FILE *f)
{
	fprintf(f, "usage: nvlprof run [-o DIR] [--append] [--] CMD [ARGS...]\n"
		   "  -o, --output DIR   write traces to DIR (sets NVLPROF_DIR; refused if DIR already\n"
		   "                     holds traces). Default: a new run directory\n"
		   "                     ./nvlprof-traces/run-YYYYmmdd-HHMMSS-PID (under $NVLPROF_DIR\n"
		   "                     when set), ./nvlprof-traces/latest pointing at it\n"
		   "  --append           allow DIR to hold traces of earlier runs (they will be reported\n"
		   "                     together)\n");
}

/* The library lives next to the real nvlprof binary (symlinks resolved), as make builds it, or in
 * ../lib, as `make install` puts it (PREFIX/bin/nvlprof, PREFIX/lib/libnvlprof.so).
 * tried[0], tried[1]: the two places, for the message when neither has it. */
static int find_library(char *out, char tried[2][PATH_MAX])
{
	char exe[PATH_MAX], real[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	if (!realpath(exe, real))
		return -1;
	char *slash = strrchr(real, '/');
	if (!slash)
		return -1;
	*slash = 0;
	static const char *const dirs[] = {"", "/../lib"};
	for (size_t i = 0; i < 2; i++) {
		if ((size_t)snprintf(tried[i], PATH_MAX, "%s%s/%s", real, dirs[i], LIB_NAME) >= PATH_MAX)
			return -1;
		if (access(tried[i], R_OK) == 0 && realpath(tried[i], out))
			return 0;
	}
	return -1;
}

/* ld.so splits LD_PRELOAD on ':' and ' '. */
static int preload_has(const char *list, const char *lib)
{
	size_t n = strlen(lib);
	for (const char *p = list; *p;) {
		size_t k = strcspn(p, ": ");
		if (k == n && strncmp(p, lib, n) == 0)
			return 1;
		p += k;
		if (*p)
			p++;
	}
	return 0;
}

/* Length of the leading sanitizer runtimes in an LD_PRELOAD list (without the separator after
 * them): ASan and TSan refuse to start unless their runtime is the first library loaded, so a
 * sanitizer build of the shim goes right after them rather than in front. */
static size_t sanitizer_prefix(const char *list)
{
	static const char *const rts[] = {"libasan.so", "libtsan.so", "libubsan.so", "liblsan.so"};
	size_t end = 0;
	for (const char *p = list; *p;) {
		size_t k = strcspn(p, ": ");
		const char *base = p;
		for (const char *q = p; q < p + k; q++)
			if (*q == '/')
				base = q + 1;
		int rt = 0;
		for (size_t i = 0; i < sizeof(rts) / sizeof(rts[0]); i++)
			rt |= !strncmp(base, rts[i], strlen(rts[i]));
		if (!rt)
			break;
		end = (size_t)(p - list) + k;
		p += k;
		if (*p)
			p++;
	}
	return end;
}

static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0777) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0777) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* Traces (*.nvlp) in dir. */
static int count_traces(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		n += l > 5 && !strcmp(e->d_name + l - 5, ".nvlp");
	}
	closedir(d);
	return n;
}

/* What the run recorded, for its closing line: traces, records lost in the shim's buffers, notes
 * of what CUPTI lost or could not collect, traces that never ended (a killed process). */
struct run_sum {
	int traces, unreadable, unended;
	unsigned long long dropped, gaps;
};

static void sum_trace(const char *path, struct run_sum *s)
{
	char err[256];
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof err);
	if (!r) {
		s->unreadable++;
		return;
	}
	s->traces++;
	struct nvlp_record rec;
	unsigned long long dropped = 0;
	int ended = 0;
	while (nvlp_reader_next(r, &rec) == 1) {
		if (rec.kind == NVLP_K_DROPS) {
			const struct nvlp_rec_drops *d = (const void *)rec.f;
			dropped += d->dropped; /* cumulative per thread: the END total supersedes */
		} else if (rec.kind == NVLP_K_END) {
			const struct nvlp_rec_end *e = (const void *)rec.f;
			dropped = e->dropped;
			ended = 1;
		} else if (rec.kind == NVLP_K_NOTE) {
			const struct nvlp_rec_note *n = (const void *)rec.f;
			s->gaps += n->code == NVLP_NOTE_ACTIVITY_LOST ||
			           n->code == NVLP_NOTE_ACTIVITY_DROPPED ||
			           n->code == NVLP_NOTE_SHARED_CUPTI || n->code == NVLP_NOTE_FOREIGN_TOOL;
		}
	}
	s->dropped += dropped;
	s->unended += !ended;
	nvlp_reader_close(r);
}

static void summarize(const char *dir, const char *status)
{
	struct run_sum s = {0};
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		char path[PATH_MAX];
		while ((e = readdir(d))) {
			size_t l = strlen(e->d_name);
			if (l > 5 && !strcmp(e->d_name + l - 5, ".nvlp") &&
			    (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path)
				sum_trace(path, &s);
		}
		closedir(d);
	}
	char extra[256] = "";
	size_t n = 0;
	if (s.dropped)
		n += (size_t)snprintf(extra + n, sizeof extra - n, ", %llu records dropped", s.dropped);
	if (s.gaps && n < sizeof extra)
		n += (size_t)snprintf(extra + n, sizeof extra - n, ", %llu collection gaps noted",
		                      s.gaps);
	if (s.unended && n < sizeof extra)
		n += (size_t)snprintf(extra + n, sizeof extra - n, ", %d without an end (killed?)",
		                      s.unended);
	if (s.unreadable && n < sizeof extra)
		n += (size_t)snprintf(extra + n, sizeof extra - n, ", %d unreadable", s.unreadable);
	if (!s.dropped && !s.gaps && !s.unended && !s.unreadable && s.traces)
		snprintf(extra, sizeof extra, ", no drops, no collection gaps");
	if (!s.traces && !s.unreadable)
		fprintf(stderr, "nvlprof run: %s; nothing recorded in %s (no CUDA or NCCL call was "
		                "seen)\n", status, dir);
	else
		fprintf(stderr, "nvlprof run: %s; %s: %d trace%s%s\n", status, dir, s.traces,
		        s.traces == 1 ? "" : "s", extra);
}

/* A signal someone sent us (kill, a launcher) goes on to the job; one the terminal sent reached
 * the job's process group already (forwarding it would deliver it twice). */
static volatile pid_t job_pid;
static void forward(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	if (si && si->si_code <= 0 && job_pid > 0)
		kill(job_pid, sig);
}

/* The options before the command: -1 and *cmd the command, else the exit status. */
static int run_opts(int argc, char **argv, const char **outdir, int *append, char ***cmd)
{
	const struct an_opt opts[] = {
	    {"--output", "-o", AN_OPT_VALUE, outdir, AN_OPT_EQ | AN_OPT_NONEMPTY | AN_OPT_USAGE,
	     "a directory"},
	    {"--append", NULL, AN_OPT_FLAG, append},
	    {NULL},
	};
	struct an_cmdline c = {
	    .opts = opts,
	    .prefix = "nvlprof run: ",
	    .leading = 1,
	    .help = run_usage,
	    .usage = run_usage,
	    .unknown = {"nvlprof run: unknown option '",
	                "' (-o DIR, --append, or -- before a command that starts with -)", 1},
	    .none = {"nvlprof run: no command given", NULL, 1},
	};
	int rc = an_parse_args(&c, argc, argv);
	*cmd = c.args;
	return rc;
}

/* Our library first in LD_PRELOAD (after a sanitizer runtime, which must come first): 0, or
 * the exit status. */
static int set_preload(void)
{
	char lib[PATH_MAX], tried[2][PATH_MAX] = {"(the nvlprof binary could not be located)", "-"};
	if (find_library(lib, tried) < 0) {
		fprintf(stderr,
			"nvlprof run: %s not found next to the nvlprof binary (looked for %s) nor in "
			"../lib (looked for %s)\n",
			LIB_NAME, tried[0], tried[1]);
		return 1;
	}
	const char *old = getenv("LD_PRELOAD");
	if (!old || !*old) {
		setenv("LD_PRELOAD", lib, 1);
	} else if (!preload_has(old, lib)) {
		size_t len = strlen(lib) + 1 + strlen(old) + 2;
		char *v = malloc(len);
		if (!v) {
			fprintf(stderr, "nvlprof run: out of memory\n");
			return 1;
		}
		size_t keep = sanitizer_prefix(old);
		const char *rest = old + keep + (keep && old[keep] ? 1 : 0);
		snprintf(v, len, "%.*s%s%s%s%s", (int)keep, old, keep ? ":" : "", lib,
			 *rest ? ":" : "", rest);
		setenv("LD_PRELOAD", v, 1);
		free(v);
	}
	return 0;
}

/* Where this run's traces go: -o DIR as given, else a new run directory under $NVLPROF_DIR or
 * ./nvlprof-traces (latest_base: that base, for its "latest" link; "" with -o). 0, or -1 when
 * the name does not fit. */
static int run_dir_name(const char *outdir, char want[PATH_MAX], char latest_base[PATH_MAX])
{
	if (outdir) {
		snprintf(want, PATH_MAX, "%s", outdir);
		return 0;
	}
	const char *base = getenv("NVLPROF_DIR");
	base = base && *base ? base : "nvlprof-traces";
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime_r(&now, &tm));
	if ((size_t)snprintf(want, PATH_MAX, "%s/run-%s-%d", base, stamp, (int)getpid()) >=
	    PATH_MAX) {
		fprintf(stderr, "nvlprof run: trace directory name too long: '%s'\n", base);
		return -1;
	}
	snprintf(latest_base, PATH_MAX, "%s", base);
	return 0;
}

/* The run directory, made and named in NVLPROF_DIR for the job (not mixed with an earlier
 * run's traces unless --append): -1 and its absolute path in abs, else the exit status. */
static int run_dir(const char *outdir, int append, char abs[PATH_MAX])
{
	char want[PATH_MAX], latest_base[PATH_MAX] = "";
	if (run_dir_name(outdir, want, latest_base) < 0)
		return 1;
	/* absolute, so that a job which changes directory still writes where it was asked */
	if (mkdir_p(want) < 0 || !realpath(want, abs)) {
		fprintf(stderr, "nvlprof run: cannot create output directory '%s': %s\n", want,
			strerror(errno));
		return 1;
	}
	int before = count_traces(abs);
	if (before && !append) {
		fprintf(stderr,
		        "nvlprof run: %s already holds %d trace%s of an earlier run: give a new "
		        "directory, remove them, or pass --append to report both runs together\n",
		        abs, before, before == 1 ? "" : "s");
		return 2;
	}
	setenv("NVLPROF_DIR", abs, 1);
	if (latest_base[0]) {
		/* ./nvlprof-traces/latest -> the run directory (best effort) */
		char link[PATH_MAX];
		const char *leaf = strrchr(abs, '/');
		if ((size_t)snprintf(link, sizeof link, "%s/latest", latest_base) < sizeof link && leaf) {
			unlink(link);
			(void)!symlink(leaf + 1, link);
		}
	}
	return -1;
}

/* The job runs as our child, so that we can say what it recorded when it ends: its wait
 * status in *st, or -1 when it could not start. Signals sent to us are forwarded to it. */
static int run_job(char **cmd, int *st)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "nvlprof run: cannot start '%s': %s\n", cmd[0], strerror(errno));
		return -1;
	}
	if (pid == 0) {
		execvp(cmd[0], cmd);
		int e = errno;
		fprintf(stderr, "nvlprof run: cannot run '%s': %s\n", cmd[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	job_pid = pid;
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
	for (size_t k = 0; k < sizeof sigs / sizeof *sigs; k++) {
		struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[k], &sa, NULL);
	}
	*st = 0;
	while (waitpid(pid, st, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* Say what the job recorded; its exit status (or the signal that ended it) becomes ours. */
static int job_ended(const char *abs, int st)
{
	char status[64];
	if (WIFSIGNALED(st))
		snprintf(status, sizeof status, "job killed by signal %d (%s)", WTERMSIG(st),
		         strsignal(WTERMSIG(st)));
	else
		snprintf(status, sizeof status, "job exited with status %d", WEXITSTATUS(st));
	/* 127/126 from our own child: exec failed and it said why; no traces to speak of. */
	if (!(WIFEXITED(st) && (WEXITSTATUS(st) == 127 || WEXITSTATUS(st) == 126) &&
	      !count_traces(abs)))
		summarize(abs, status);
	if (WIFSIGNALED(st)) {
		int sig = WTERMSIG(st);
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigemptyset(&dfl.sa_mask);
		sigaction(sig, &dfl, NULL);
		fflush(NULL);
		raise(sig);
		return 128 + sig;
	}
	return WEXITSTATUS(st);
}

int nvlp_cmd_run(int argc, char **argv)
{
	const char *outdir = NULL;
	int append = 0, rc, st;
	char **cmd = NULL;
	if ((rc = run_opts(argc, argv, &outdir, &append, &cmd)) >= 0)
		return rc;
	if (set_preload())
		return 1;
	char abs[PATH_MAX];
	if ((rc = run_dir(outdir, append, abs)) >= 0)
		return rc;
	if (run_job(cmd, &st) < 0)
		return 1;
	return job_ended(abs, st);
}

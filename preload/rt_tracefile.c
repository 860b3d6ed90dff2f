/* rt_tracefile.c: where a process's trace goes (directory, unique name) and its header (job identity, clocks, environment). */
#include <errno.h>    /* errno */
#include <fcntl.h>    /* open */
#include <limits.h>   /* PATH_MAX */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* realloc, strtoll */
#include <string.h>   /* strlen */
#include <sys/stat.h> /* mkdir */
#include <time.h>     /* clock_gettime */
#include <unistd.h>   /* gethostname, getpid */

#include "nvlp_rt.h"
#include "nvlp_trace.h"
#include "nvlp_version.h"
#include "rt_internal.h"

extern char **environ;

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

int nvlp_tf_create(char *trace_path, size_t len)
{
	const char *dir = nvlp_cfg()->dir;
	if (mkdir_p(dir) < 0)
		return -1;
	char host[256] = "unknown";
	gethostname(host, sizeof host - 1);
	int pid = getpid();
	/* exec keeps the pid: later images of this process get .1, .2, ... */
	for (int n = 0; n < 10000; n++) {
		if (n == 0)
			snprintf(trace_path, len, "%s/%s-%d.nvlp", dir, host, pid);
		else
			snprintf(trace_path, len, "%s/%s-%d.%d.nvlp", dir, host, pid, n);
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

/* The kernel's boot id (a UUID, 36 characters): the same for every container on one kernel, where
 * the host name may differ per container; NCCL hashes it with the host name into its host hash.
 * Read once (headers are written under the writer's lock; fork children share the kernel).
 * @return it, or NULL when it cannot be read or is not 36 printable characters */
static const char *boot_id(void)
{
	static char id[40];
	static int state; /* 0 not read, 1 read, -1 unreadable */
	if (state)
		return state > 0 ? id : NULL;
	state = -1;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char buf[sizeof id];
	ssize_t n = read(fd, buf, sizeof buf);
	close(fd);
	if (n >= 36 && (n == 36 || buf[36] == '\n')) {
		for (int i = 0; i < 36; i++)
			if (buf[i] <= ' ' || buf[i] > '~')
				return NULL;
		memcpy(id, buf, 36);
		id[36] = 0;
		state = 1;
	}
	return state > 0 ? id : NULL;
}

/* The host, the process and its place in the job (rank variables as the launchers set them). */
static void hdr_process(struct sbuf *b)
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
	char host[256] = "unknown";
	gethostname(host, sizeof host - 1);
	sb_kvl(b, NVLP_HDR_FORMAT, NVLP_FORMAT_VERSION);
	sb_kv(b, NVLP_HDR_VERSION, NVLP_VERSION);
	sb_kv(b, NVLP_HDR_HOST, host);
	const char *boot = boot_id();
	if (boot)
		sb_kv(b, NVLP_HDR_BOOT_ID, boot);
	sb_kvl(b, NVLP_HDR_PID, getpid());
	sb_kvl(b, NVLP_HDR_PPID, getppid());
	sb_kvl(b, NVLP_HDR_RANK, env_first(rank));
	sb_kvl(b, NVLP_HDR_LOCAL_RANK, env_first(local));
	sb_kvl(b, NVLP_HDR_WORLD_SIZE, env_first(world));
}

/* The command line, its arguments separated by spaces. */
static void hdr_cmdline(struct sbuf *b)
{
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
	sb_kv(b, NVLP_HDR_CMDLINE, cmd);
}

/* The recorded environment variables, one line each. */
static void hdr_env(struct sbuf *b)
{
	for (char **e = environ; e && *e; e++) {
		if (!env_recorded(*e) || !strchr(*e, '='))
			continue;
		sb_add(b, NVLP_HDR_ENV_PREFIX, strlen(NVLP_HDR_ENV_PREFIX));
		size_t start = b->n;
		sb_add(b, *e, strlen(*e));
		for (size_t i = start; b->p && i < b->n; i++)
			if (b->p[i] == '\n' || b->p[i] == '\r')
				b->p[i] = ' ';
		sb_add(b, "\n", 1);
	}
}

char *nvlp_tf_header(uint64_t *t_mono, uint64_t *t_real)
{
	struct sbuf b = {0};
	hdr_process(&b);
	hdr_cmdline(&b);

	/* Back to back, so the analyzer can map CLOCK_MONOTONIC to wall time. */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	*t_mono = nvlp_now();
	*t_real = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	const char *oom = nvlp_oom_open();
	sb_add(&b, oom, strlen(oom));
	char cap[512];
	nvlp_cost_capture(cap, sizeof cap);
	sb_kv(&b, NVLP_HDR_CAPTURE, cap);
	sb_kvl(&b, NVLP_HDR_T_REAL, (long long)*t_real);
	sb_kvl(&b, NVLP_HDR_T_MONO, (long long)*t_mono);
	hdr_env(&b);
	return b.p;
}

/* rt_watch.c: what the writer looks at about once a second for a post-mortem: the calls threads are inside (INFLIGHT) and the cgroup's OOM-kill count. */
#include <errno.h>     /* errno */
#include <fcntl.h>     /* open */
#include <stdatomic.h> /* atomic_load_explicit */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* strtoull */
#include <string.h>    /* strerror, strncmp */
#include <unistd.h>    /* pread, close */

#include "nvlp_rt.h"
#include "nvlp_trace.h" /* NVLP_HDR_* */
#include "rt_internal.h"
#include "rt_ring.h"

/* ---- calls in progress ---------------------------------------------------------------------- */

/* One consistent copy of r's call in progress (0), or -1: none, or the owner changed it while we
 * read (its gen moved: discard, the next scan sees the new one). */
static int live_read(const struct nvlp_ring *r, struct nvlp_rec_inflight *out, uint64_t *gen)
{
	const struct nvlp_live *l = &r->live;
	uint64_t g = __atomic_load_n(&l->gen, __ATOMIC_ACQUIRE);
	if (g & 1)
		return -1;
	/* Field by field with acquire: a value from a newer call makes the gen read below see that
	 * call's odd gen or later. */
	const uint64_t *src = (const uint64_t *)&l->rec;
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
	if (!out->kind || __atomic_load_n(&l->gen, __ATOMIC_RELAXED) != g)
		return -1;
	*gen = g;
	return 0;
}

unsigned nvlp_live_scan(uint64_t now, uint64_t min_age_ns, int all, struct nvlp_rec_inflight *out,
                        unsigned max)
{
	unsigned n = 0;
	for (struct nvlp_ring *r = nvlp_ring_first(); r && n < max; r = r->next) {
		if (atomic_load_explicit(&r->state, memory_order_acquire) != NVLP_RING_ACTIVE)
			continue;
		uint64_t gen;
		struct nvlp_rec_inflight x;
		if (live_read(r, &x, &gen) < 0 || (!all && gen == r->live_reported))
			continue;
		if (!all && (x.t_enter > now || now - x.t_enter < min_age_ns))
			continue;
		x.t = now;
		x.tid = r->tid;
		out[n++] = x;
		r->live_reported = gen;
	}
	return n;
}

/* ---- the cgroup's OOM kills ----------------------------------------------------------------- */

/*
 * cgroup v2 only: /proc/self/cgroup's "0::PATH" line names the cgroup, whose memory.events counts
 * oom_kill (processes of the cgroup the kernel's OOM killer took). A trace cut short in a cgroup
 * whose count rose was most likely killed by it (SIGKILL leaves no END). v1 (or a hybrid mount
 * without the memory controller in v2) is said once in the header. The file is kept open and read
 * with one pread (measured: README's cost table).
 */
static struct {
	int fd;
	uint64_t count;
} oom_watch = {.fd = -1};
/* Apart from oom_watch: zero-initialised, it stays in .bss. */
static char oom_hdr[4096 + 256];

/* oom_kill's value in memory.events text, or -1. */
static long long parse_oom_kill(const char *b)
{
	for (const char *p = b; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, "oom_kill ", 9))
			return (long long)strtoull(p + 9, NULL, 10);
	return -1;
}

static long long oom_read(int fd)
{
	char b[512];
	ssize_t n = pread(fd, b, sizeof b - 1, 0);
	if (n <= 0)
		return -1;
	b[n] = 0;
	return parse_oom_kill(b);
}

/* The cgroup v2 path of this process into cg, or why not (static text). */
static const char *cgroup_path(char *cg, size_t len)
{
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "/proc/self/cgroup unreadable";
	char b[4096];
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	if (n <= 0)
		return "/proc/self/cgroup unreadable";
	b[n] = 0;
	for (char *p = b; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, "0::", 3))
			continue;
		char *e = strchr(p, '\n');
		size_t l = e ? (size_t)(e - p - 3) : strlen(p + 3);
		if (l == 0 || l >= len)
			return "cgroup path unusable";
		memcpy(cg, p + 3, l);
		cg[l] = 0;
		return NULL;
	}
	return "cgroup v1";
}

const char *nvlp_oom_open(void)
{
	if (oom_watch.fd >= 0)
		close(oom_watch.fd); /* a fork child's or a failed exec's copy: read again */
	oom_watch.fd = -1;
	oom_watch.count = 0;
	char cg[4096] = "", ev[4096 + 64];
	const char *why = cgroup_path(cg, sizeof cg);
	/* Tests only: a stand-in for memory.events (a cgroup's count cannot be raised on demand). */
	const char *test = nvlp_cfg()->test_cgroup_events;
	if (test && *test)
		snprintf(ev, sizeof ev, "%s", test);
	else if (!why)
		snprintf(ev, sizeof ev, "/sys/fs/cgroup%s%smemory.events", cg,
		         cg[strlen(cg) - 1] == '/' ? "" : "/");
	int n = 0;
	if (!why)
		n = snprintf(oom_hdr, sizeof oom_hdr, "%s=%s\n", NVLP_HDR_CGROUP, cg);
	if (why && !(test && *test)) {
		snprintf(oom_hdr + n, sizeof oom_hdr - (size_t)n, "%s=none (%s)\n", NVLP_HDR_OOM_WATCH,
		         why);
		return oom_hdr;
	}
	int fd = open(ev, O_RDONLY | O_CLOEXEC);
	long long c = fd >= 0 ? oom_read(fd) : -1;
	if (c < 0) {
		const char *what = fd < 0 ? strerror(errno) : "no oom_kill count";
		if (fd >= 0)
			close(fd);
		/* a hybrid mount: "0::/" exists but memory is a v1 controller */
		snprintf(oom_hdr + n, sizeof oom_hdr - (size_t)n, "%s=none (%s: %s)\n",
		         NVLP_HDR_OOM_WATCH, ev, what);
		return oom_hdr;
	}
	oom_watch.fd = fd;
	oom_watch.count = (uint64_t)c;
	snprintf(oom_hdr + n, sizeof oom_hdr - (size_t)n, "%s=%s\n%s=%lld\n", NVLP_HDR_OOM_WATCH, ev,
	         NVLP_HDR_OOM_KILL, c);
	return oom_hdr;
}

int nvlp_oom_changed(uint64_t *count)
{
	if (oom_watch.fd < 0)
		return 0;
	long long c = oom_read(oom_watch.fd);
	if (c < 0 || (uint64_t)c == oom_watch.count)
		return 0;
	oom_watch.count = (uint64_t)c;
	*count = oom_watch.count;
	return 1;
}

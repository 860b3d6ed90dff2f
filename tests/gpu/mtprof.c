/* mtprof.c: where one thread's CPU time goes, by shared object: a stand-in for `perf record -t` on
 * the GPU machine, which has no perf (nor gdb, strace). LD_PRELOAD it; the thread to watch calls
 * mtprof_start() (overhead.py's worker: after its warm-up, through ctypes), then its own CPU-time
 * clock sends it SIGPROF every 1/MTPROF_HZ s of CPU (default 1000) and the handler keeps the
 * interrupted instruction's address. mtprof_write(path) stops and writes, per shared object
 * (executable mappings from dl_iterate_phdr), how many samples fell there:
 *   samples N
 *   dso COUNT NAME            (most first; "[unmapped]": JIT code, or an object unloaded since)
 *   sym COUNT NAME            (the 40 commonest nearest exported symbols, where dladdr finds one)
 *   chain COUNT PC < CALLER < ...  (MTPROF_FOCUS=NAME: the 30 commonest call chains of the samples
 *                             that fell in a shared object whose name holds NAME, e.g. libcupti:
 *                             who called into it; frames as object:symbol+offset, or object+offset)
 * A sample is 1/HZ s of the thread's CPU, so COUNT/N of the thread's CPU time is in that object.
 * Samples only while the thread runs (blocked in a read between turns: none). x86-64 and aarch64.
 * Chains are unwound (glibc's backtrace, from the signal frame) only for samples inside the focus
 * object, whose code holds no loader lock, so the unwinder's own lookups cannot deadlock there.
 * Test-only: not part of the product, never shipped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_SAMPLES (1L << 22) /* 32 MiB; ~70 min of CPU at 1 kHz */
#define MAX_SEGS 4096
#define TOP_SYMS 40
#define DEPTH 6        /* callers kept per focus sample */
#define TOP_CHAINS 30
#define MAX_FOCUS 16   /* executable segments of the focus objects */

static struct {
	uintptr_t *pc;
	uintptr_t (*up)[DEPTH]; /* callers of each focus sample (0: none), MTPROF_FOCUS only */
	atomic_long n;
	timer_t timer;
	int running;
	uintptr_t focus_lo[MAX_FOCUS], focus_hi[MAX_FOCUS];
	int nfocus;
} prof;

static int in_focus(uintptr_t pc)
{
	for (int i = 0; i < prof.nfocus; i++)
		if (pc >= prof.focus_lo[i] && pc < prof.focus_hi[i])
			return 1;
	return 0;
}

/* the interrupted frame's callers, from the handler's own backtrace */
static void callers(uintptr_t pc, uintptr_t *out)
{
	void *bt[DEPTH + 24];
	int k = backtrace(bt, DEPTH + 24);
	int j = 0;
	while (j < k && (uintptr_t)bt[j] != pc)
		j++;
	for (int d = 0; d < DEPTH; d++)
		out[d] = j + 1 + d < k ? (uintptr_t)bt[j + 1 + d] : 0;
}

static void on_prof(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	int saved = errno;
	const ucontext_t *uc = ctx;
#if defined(__x86_64__)
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
#else
	uintptr_t pc = 0;
#endif
	long i = atomic_fetch_add_explicit(&prof.n, 1, memory_order_relaxed);
	if (i < MAX_SAMPLES) {
		prof.pc[i] = pc;
		if (prof.up && i < MAX_SAMPLES / 16 && in_focus(pc))
			callers(pc, prof.up[i]);
	}
	errno = saved;
}

static int find_focus(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const char *name = info->dlpi_name;
	if (!name || !strstr(name, (const char *)arg))
		return 0;
	for (int i = 0; i < info->dlpi_phnum && prof.nfocus < MAX_FOCUS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		prof.focus_lo[prof.nfocus] = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
		prof.focus_hi[prof.nfocus++] = (uintptr_t)info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	return 0;
}

/* @return 0, or -1 with a line on stderr (the job runs on, unsampled) */
int mtprof_start(void)
{
	if (prof.running)
		return 0;
	const char *hz_s = getenv("MTPROF_HZ");
	long hz = hz_s ? strtol(hz_s, NULL, 10) : 1000;
	if (hz < 1 || hz > 100000) {
		fprintf(stderr, "mtprof: MTPROF_HZ=%s: expected 1-100000; using 1000\n", hz_s);
		hz = 1000;
	}
	prof.pc = calloc((size_t)MAX_SAMPLES, sizeof *prof.pc);
	if (!prof.pc) {
		fprintf(stderr, "mtprof: no memory for the samples; not sampling\n");
		return -1;
	}
	const char *focus = getenv("MTPROF_FOCUS");
	if (focus && *focus) {
		dl_iterate_phdr(find_focus, (void *)focus);
		void *warm[4];
		backtrace(warm, 4); /* loads the unwinder now, not in the handler */
		prof.up = calloc((size_t)MAX_SAMPLES / 16, sizeof *prof.up);
		if (!prof.nfocus || !prof.up)
			fprintf(stderr, "mtprof: MTPROF_FOCUS=%s: %s; no chains\n", focus,
			        prof.nfocus ? "no memory" : "no loaded object has that name");
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_prof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	struct sigevent ev;
	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = SIGPROF;
	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	long ns = 1000000000L / hz;
	struct itimerspec it = {{ns / 1000000000L, ns % 1000000000L},
	                        {ns / 1000000000L, ns % 1000000000L}};
	if (sigaction(SIGPROF, &sa, NULL) != 0 ||
	    timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &prof.timer) != 0 ||
	    timer_settime(prof.timer, 0, &it, NULL) != 0) {
		fprintf(stderr, "mtprof: cannot set up the SIGPROF timer: %s; not sampling\n",
		        strerror(errno));
		return -1;
	}
	prof.running = 1;
	return 0;
}

struct seg {
	uintptr_t lo, hi;
	const char *name;
};
static struct {
	struct seg s[MAX_SEGS];
	int n;
} segs;

static int add_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	for (int i = 0; i < info->dlpi_phnum && segs.n < MAX_SEGS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "[main]";
		const char *base = strrchr(name, '/');
		uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
		segs.s[segs.n++] = (struct seg){lo, lo + ph->p_memsz, base ? base + 1 : name};
	}
	return 0;
}

struct count {
	const char *name;
	long n;
};

static int by_count(const void *a, const void *b)
{
	long x = ((const struct count *)a)->n, y = ((const struct count *)b)->n;
	return (x < y) - (x > y);
}

/* adds one to name in a small table; @return the table's new length */
static int bump(struct count *t, int len, int cap, const char *name)
{
	for (int i = 0; i < len; i++)
		if (t[i].name == name || !strcmp(t[i].name, name)) {
			t[i].n++;
			return len;
		}
	if (len < cap)
		t[len++] = (struct count){name, 1};
	return len;
}

/* one frame as object:symbol+offset, or object+offset */
static size_t frame_name(uintptr_t a, int exact, char *out, size_t len)
{
	Dl_info di;
	if (!a)
		return (size_t)snprintf(out, len, "?");
	if (!dladdr((void *)a, &di) || !di.dli_fname)
		return (size_t)snprintf(out, len, "0x%lx", (unsigned long)a);
	const char *b = strrchr(di.dli_fname, '/');
	b = b ? b + 1 : di.dli_fname;
	if (di.dli_sname && !exact)
		return (size_t)snprintf(out, len, "%s:%s", b, di.dli_sname);
	if (di.dli_sname)
		return (size_t)snprintf(out, len, "%s:%s+0x%lx", b, di.dli_sname,
		                        (unsigned long)(a - (uintptr_t)di.dli_saddr));
	return (size_t)snprintf(out, len, "%s+0x%lx", b, (unsigned long)(a - (uintptr_t)di.dli_fbase));
}

/* MTPROF_FOCUS: the commonest call chains into the focus object */
static void write_chains(FILE *f, long n)
{
	if (!prof.up)
		return;
	enum { CAP = 4096, LEN = 1024 };
	static char names[CAP][LEN];
	static struct count ch[CAP];
	int nc = 0;
	for (long i = 0; i < n && i < MAX_SAMPLES / 16; i++) {
		if (!in_focus(prof.pc[i]))
			continue;
		char buf[LEN];
		size_t o = frame_name(prof.pc[i], 0, buf, LEN);
		for (int d = 0; d < DEPTH && prof.up[i][d] && o + 3 < LEN; d++) {
			o += (size_t)snprintf(buf + o, LEN - o, " < ");
			if (o < LEN)
				o += frame_name(prof.up[i][d], 1, buf + o, LEN - o);
		}
		int k = 0;
		while (k < nc && strcmp(names[k], buf))
			k++;
		if (k < nc)
			ch[k].n++;
		else if (nc < CAP) {
			snprintf(names[nc], LEN, "%s", buf);
			ch[nc] = (struct count){names[nc], 1};
			nc++;
		}
	}
	qsort(ch, (size_t)nc, sizeof *ch, by_count);
	for (int i = 0; i < nc && i < TOP_CHAINS; i++)
		fprintf(f, "chain %ld %s\n", ch[i].n, ch[i].name);
}

/* Stops sampling and writes the table to path. @return 0, or -1 with a line on stderr */
int mtprof_write(const char *path)
{
	if (!prof.running)
		return -1;
	timer_delete(prof.timer);
	prof.running = 0;
	long n = atomic_load(&prof.n);
	if (n > MAX_SAMPLES)
		n = MAX_SAMPLES;
	segs.n = 0;
	dl_iterate_phdr(add_object, NULL);
	static struct count dso[512], sym[8192];
	int nd = 0, ns = 0;
	for (long i = 0; i < n; i++) {
		uintptr_t pc = prof.pc[i];
		const char *name = "[unmapped]";
		for (int k = 0; k < segs.n; k++)
			if (pc >= segs.s[k].lo && pc < segs.s[k].hi) {
				name = segs.s[k].name;
				break;
			}
		nd = bump(dso, nd, 512, name);
		Dl_info di;
		if (dladdr((void *)pc, &di) && di.dli_sname)
			ns = bump(sym, ns, 8192, di.dli_sname);
	}
	qsort(dso, (size_t)nd, sizeof *dso, by_count);
	qsort(sym, (size_t)ns, sizeof *sym, by_count);
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "mtprof: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "samples %ld\n", n);
	for (int i = 0; i < nd; i++)
		fprintf(f, "dso %ld %s\n", dso[i].n, dso[i].name);
	for (int i = 0; i < ns && i < TOP_SYMS; i++)
		fprintf(f, "sym %ld %s\n", sym[i].n, sym[i].name);
	write_chains(f, n);
	fclose(f);
	return 0;
}

/* stacks.c: call stacks of copies and managed-memory calls, deduplicated, with the modules they touch. */
#include <dlfcn.h>    /* dlopen libunwind, dladdr */
#include <execinfo.h> /* backtrace */
#include <link.h>     /* dl_iterate_phdr */
#include <pthread.h>  /* pthread_once */
#include <stdatomic.h>
#include <stdlib.h>   /* malloc */
#include <string.h>   /* strlen */
#include <ucontext.h> /* ucontext_t, REG_RIP */
#include <unistd.h>   /* readlink */

#include "nvlp_rt.h"
#include "nvlp_stacks.h"
#include "rt_symbols.h"          /* nvlp_build_id_mem */
#include "../trace/nvlp_trace.h" /* nvlp_hash64 */

/*
 * A STACK record holds return addresses, innermost first, after dropping the shim's own frames;
 * its id is the hash of the addresses, so a stack seen again costs a hash and one table probe. The
 * first time a stack is seen, every module it touches that was not reported yet gets a MODULE
 * record (load bias, address range, path), written before the STACK: the analyzer symbolizes
 * offline as (address - 1 - base) in that file. Return addresses point after the call, hence -1.
 * The MODULE is followed by its BUILDID (read from the image in memory), which lets the writer
 * check the file before saving its symbols at the end (symbols.c) and the analyzer check any
 * other copy of it.
 */
#define MAX_FRAMES 32
#define SKIP_FRAMES 8 /* more than the shim's own depth, which is dropped by address */
#define STACK_SLOTS 65536
#define MODULE_SLOTS 1024
#define PROBES 64

typedef int (*unw_backtrace_fn)(void **, int);
/* How stacks are taken: libunwind's unw_backtrace if found (picked once), and which frames are
 * ours. */
static struct {
	unw_backtrace_fn bt;
	pthread_once_t once;
	uintptr_t self_lo, self_hi; /* the shim's own mapped range */
	int ready;                  /* picked (a signal handler cannot wait for the once) */
	int test_fault; /* NVLPROF_TEST_UNWIND_FAULT=1: a fatal stack's walk faults (tests) */
	/* a fatal signal's stack, kept by fatal_capture for fatal_write */
	uint64_t fatal_pc[MAX_FRAMES];
	int fatal_n;
} unwinder = {.once = PTHREAD_ONCE_INIT};
/* The stacks and modules already emitted (sets of ids and bases). */
static struct {
	_Atomic uint64_t stack_ids[STACK_SLOTS];
	_Atomic uintptr_t module_bases[MODULE_SLOTS];
} emitted;

struct module {
	uintptr_t addr; /* in: an address; out: the module holding it */
	uintptr_t base, lo, hi;
	char path[4096];
	int found;
	uint8_t id[NVLP_BUILD_ID_MAX];
	size_t id_len;
};

static int module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct module *m = data;
	(void)size;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int hit = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
		lo = a < lo ? a : lo;
		hi = b > hi ? b : hi;
		hit |= m->addr >= a && m->addr < b;
	}
	if (!hit)
		return 0;
	m->base = info->dlpi_addr;
	m->lo = lo;
	m->hi = hi;
	m->found = 1;
	m->id_len = nvlp_build_id_mem(info, m->id, sizeof m->id);
	const char *name = info->dlpi_name;
	if (name && name[0]) {
		size_t n = strlen(name);
		n = n < sizeof m->path - 1 ? n : sizeof m->path - 1;
		memcpy(m->path, name, n);
		m->path[n] = 0;
	} else {
		/* The main program has no name here. */
		ssize_t n = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
		m->path[n > 0 ? n : 0] = 0;
	}
	return 1;
}

static int find_module(struct module *m, uintptr_t addr)
{
	m->addr = addr;
	m->found = 0;
	dl_iterate_phdr(module_cb, m);
	return m->found;
}

/* At first use, not at load: dlopen from a hook is safe, from our constructor it is not. */
static void pick_unwinder(void)
{
	static struct module self;
	if (find_module(&self, (uintptr_t)&pick_unwinder)) {
		unwinder.self_lo = self.lo;
		unwinder.self_hi = self.hi;
	}
	/* A TSan build keeps to backtrace(): libunwind (not instrumented) locks a mutex in its
	 * per-thread cache's destructor, which TSan intercepts after it finished the thread: a
	 * SIGSEGV inside TSan when an application thread that took a stack exits
	 * (test_cupti_detach's slow thread). */
#ifndef __SANITIZE_THREAD__
	void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	if (h)
		unwinder.bt = (unw_backtrace_fn)dlsym(h, "unw_backtrace");
#endif
	__atomic_store_n(&unwinder.ready, 1, __ATOMIC_RELEASE);
}

static void fatal_capture(const void *uc);
static uint64_t fatal_write(nvlp_stack_sink sink, void *ctx);

/* glibc's backtrace() dlopens libgcc_s on its first call: do that at load, not inside a hook
 * that may run while the dynamic loader's lock is held (or in a fatal signal's handler). */
__attribute__((constructor)) static void warm_up(void)
{
	static const struct nvlp_fatal_stacker stacker = {fatal_capture, fatal_write};
	nvlp_init();
	const char *tf = getenv("NVLPROF_TEST_UNWIND_FAULT");
	unwinder.test_fault = tf && tf[0] == '1';
	if (nvlp_cfg()->stacks && !nvlp_cfg()->disable) {
		void *f[2];
		backtrace(f, 2);
	}
	nvlp_rt_set_fatal_stacker(&stacker);
}

/* @return 1 if v was added to the set now, 0 if it was there (or the set is full: -1). */
static int set_add(_Atomic uint64_t *set, unsigned nslots, uint64_t v)
{
	unsigned i = (unsigned)(v * 0x9e3779b97f4a7c15ull >> 40) & (nslots - 1);
	for (int n = 0; n < PROBES; n++, i = (i + 1) & (nslots - 1)) {
		uint64_t cur = atomic_load_explicit(&set[i], memory_order_acquire);
		if (cur == v)
			return 0;
		if (!cur) {
			if (atomic_compare_exchange_strong(&set[i], &cur, v))
				return 1;
			if (cur == v)
				return 0;
		}
	}
	return -1;
}

static int emit_sink(void *ctx, unsigned kind, const void *fields, const void *blob,
                     size_t blob_len)
{
	(void)ctx;
	return nvlp_emit(kind, fields, blob, blob_len);
}

static void report_modules(const uint64_t *pc, int n, struct module *m, nvlp_stack_sink sink,
                           void *ctx)
{
	for (int i = 0; i < n; i++) {
		if (!find_module(m, (uintptr_t)pc[i]))
			continue;
		if (set_add((_Atomic uint64_t *)emitted.module_bases, MODULE_SLOTS,
		            m->base ? m->base : 1) == 0)
			continue;
		struct nvlp_rec_module r = {.base = m->base, .start = m->lo, .end = m->hi};
		sink(ctx, NVLP_K_MODULE, &r, m->path, strlen(m->path));
		if (m->id_len) {
			struct nvlp_rec_buildid b = {.base = m->base};
			sink(ctx, NVLP_K_BUILDID, &b, m->id, m->id_len);
		}
	}
}

/* The first of raw[0..n) that is not the shim's own frame (its mapped range [lo, hi)). */
static int skip_own(void *const *raw, int n, uintptr_t lo, uintptr_t hi)
{
	int skip = 0;
	while (skip < n && (uintptr_t)raw[skip] >= lo && (uintptr_t)raw[skip] < hi)
		skip++;
	return skip;
}

/* A STACK record's id: the hash of its addresses (never 0). */
static uint64_t stack_id(const uint64_t *pc, int n)
{
	uint64_t id = nvlp_hash64(pc, (size_t)n * sizeof pc[0], 0x737461636bull);
	return id ? id : 1;
}

/* The MODULE/BUILDID records of the modules pc[0..n) touches that were not written yet (m: the
 * lookup's scratch, NULL: none), then the STACK record, through sink. */
static void write_stack(uint64_t id, const uint64_t *pc, int n, struct module *m,
                        nvlp_stack_sink sink, void *ctx)
{
	if (m)
		report_modules(pc, n, m, sink, ctx);
	struct nvlp_rec_stack r = {.id = id};
	sink(ctx, NVLP_K_STACK, &r, pc, (size_t)n * sizeof pc[0]);
}

uint64_t nvlp_stack_capture(void)
{
	if (!nvlp_cfg()->stacks)
		return 0;
	pthread_once(&unwinder.once, pick_unwinder);
	void *raw[MAX_FRAMES + SKIP_FRAMES];
	int n = unwinder.bt ? unwinder.bt(raw, MAX_FRAMES + SKIP_FRAMES)
	                    : backtrace(raw, MAX_FRAMES + SKIP_FRAMES);
	uint64_t pc[MAX_FRAMES];
	int k = 0;
	for (int i = skip_own(raw, n, unwinder.self_lo, unwinder.self_hi); i < n && k < MAX_FRAMES;
	     i++)
		pc[k++] = (uintptr_t)raw[i];
	if (!k)
		return 0;
	uint64_t id = stack_id(pc, k);
	if (set_add(emitted.stack_ids, STACK_SLOTS, id) == 0)
		return id;
	/* New (or the set is full: writing it again is harmless, the analyzer keys by id). 4 KiB
	 * of scratch: kept off the job's stack, made once per thread (freed when it exits). */
	struct nvlp_tls *t = nvlp_tls();
	if (!t->stack_scratch)
		t->stack_scratch = malloc(sizeof(struct module));
	write_stack(id, pc, k, t->stack_scratch, emit_sink, NULL);
	return id;
}

/* ---- the stack of a fatal signal ------------------------------------------------------------ */

/* The instruction the signal interrupted, from the handler's ucontext (0 where not known). */
static uintptr_t interrupted_pc(const void *uc)
{
	if (!uc)
		return 0;
#if defined(__x86_64__)
	return (uintptr_t)((const ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	return (uintptr_t)((const ucontext_t *)uc)->uc_mcontext.pc;
#else
	return 0;
#endif
}

/*
 * The handler runs on the thread that got the signal, and the process may be anywhere: inside
 * malloc with the heap corrupt (glibc's "corrupted double-linked list" abort), inside the
 * dynamic loader. So nothing is loaded or allocated here: the unwinder is the one already
 * picked (libunwind, whose local unwinding is signal-safe), else glibc's backtrace(), whose
 * libgcc_s the constructor loaded; both unwind through the kernel's signal frame. Module
 * lookups and records wait for the writer thread (fatal_write). Both are lent to the core
 * (nvlp_rt_set_fatal_stacker), which calls no module by name.
 */
static void fatal_capture(const void *uc)
{
	uint64_t *pc = unwinder.fatal_pc;
	const int max = MAX_FRAMES;
	if (!nvlp_cfg()->stacks)
		return;
	if (unwinder.test_fault) /* a walk over a smashed stack, as the tests make one */
		pc[0] = *(volatile uint64_t *)(uintptr_t)atol("16");
	void *raw[MAX_FRAMES + SKIP_FRAMES];
	int ready = __atomic_load_n(&unwinder.ready, __ATOMIC_ACQUIRE);
	unw_backtrace_fn bt = ready ? unwinder.bt : NULL;
	uintptr_t lo = ready ? unwinder.self_lo : 0, hi = ready ? unwinder.self_hi : 0;
	int n = bt ? bt(raw, MAX_FRAMES + SKIP_FRAMES) : backtrace(raw, MAX_FRAMES + SKIP_FRAMES);
	uintptr_t ip = interrupted_pc(uc);
	/* From the interrupted frame (both unwinders give its exact address); without it, from
	 * the first frame that is not ours (the kernel's signal trampoline), the address first. */
	int from = -1;
	for (int i = 0; ip && i < n && from < 0; i++)
		if ((uintptr_t)raw[i] == ip)
			from = i;
	int k = 0;
	if (from < 0) {
		from = skip_own(raw, n, lo, hi);
		if (ip)
			pc[k++] = ip;
	}
	for (int i = from; i < n && k < max; i++)
		pc[k++] = (uintptr_t)raw[i];
	/* at the end: a walk that faults keeps none */
	__atomic_store_n(&unwinder.fatal_n, k, __ATOMIC_RELEASE);
}

static uint64_t fatal_write(nvlp_stack_sink sink, void *ctx)
{
	static struct module m; /* the writer thread's, under its lock */
	const uint64_t *pc = unwinder.fatal_pc;
	int n = __atomic_load_n(&unwinder.fatal_n, __ATOMIC_ACQUIRE);
	if (n <= 0)
		return 0;
	uint64_t id = stack_id(pc, n);
	set_add(emitted.stack_ids, STACK_SLOTS, id);
	write_stack(id, pc, n, &m, sink, ctx);
	return id;
}

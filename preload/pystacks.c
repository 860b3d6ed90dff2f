/* pystacks.c: the calling thread's Python file:line chain (C API with the GIL, its own frames' memory without), as PYSTACK/PYREF records. */
#include <dlfcn.h>     /* dlsym(RTLD_DEFAULT) */
#include <errno.h>
#include <fcntl.h>     /* O_CLOEXEC */
#include <pthread.h>   /* the code-name cache's mutex, the sampler's thread */
#include <signal.h>    /* the sampler takes no signal */
#include <stdatomic.h>
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc */
#include <string.h>    /* memcpy, strlen */
#include <sys/uio.h>   /* process_vm_readv: the self-check's and the sampler's reads */
#include <time.h>      /* clock_gettime: the sampler's period and CPU time */
#include <unistd.h>    /* getpid, pipe2 */

#include "nvlp_cost.h"
#include "nvlp_module.h"        /* the module's table; nvlp_rt_pid: which thread is the main one */
#include "nvlp_pystacks.h"
#include "nvlp_rt.h"
#include "../trace/nvlp_trace.h" /* nvlp_hash64 */

/*
 * The interpreter is asked only through its public C API, resolved from the process (a program
 * without Python resolves nothing and pays one load per call after the first), and only when the
 * calling thread holds the GIL: PyGILState_Check() says so, and the thread's current state must
 * be set (PyGILState_Check answers 1 whenever its checks are off, e.g. with subinterpreters). We
 * never take the GIL and never block. A pending exception is saved and restored around our calls,
 * so the program never sees one of ours. A thread that released the GIL (torch, CuPy and
 * ctypes.CDLL release it around their CUDA and NCCL calls) is read through the layout walk below,
 * or not at all.
 *
 * Frame names: a code object's co_filename and co_name are attributes (no stable accessor exists
 * in 3.11/3.12), read once per code object and cached by its address; the cache keeps a reference
 * so that the address is not reused by another code object while cached.
 */
typedef void PyObject;
typedef int (*int_fn)(void);
typedef void *(*ptr_fn)(void);
typedef PyObject *(*obj_obj_fn)(PyObject *);
typedef int (*int_obj_fn)(PyObject *);
typedef PyObject *(*getattr_fn)(PyObject *, const char *);
typedef const char *(*utf8_fn)(PyObject *);
typedef void (*ref_fn)(PyObject *);
typedef void (*fetch_fn)(PyObject **, PyObject **, PyObject **);
typedef void (*restore_fn)(PyObject *, PyObject *, PyObject *);

static struct {
	int_fn is_initialized, gil_check;
	ptr_fn tstate; /* _PyThreadState_UncheckedGet / PyThreadState_GetUnchecked */
	ptr_fn get_frame; /* PyEval_GetFrame: borrowed */
	obj_obj_fn frame_back, frame_code; /* new references */
	int_obj_fn frame_line, frame_lasti; /* lasti: 3.11+, else NULL */
	getattr_fn getattr;
	utf8_fn utf8;
	ref_fn incref, decref;
	fetch_fn err_fetch;
	restore_fn err_restore;
	/* the layout walk's: no GIL needed for any of them */
	ptr_fn this_tstate;                       /* PyGILState_GetThisThreadState */
	int (*add_pending)(int (*)(void *), void *); /* Py_AddPendingCall */
	const void *code_type, *unicode_type, *bytes_type;
	unsigned long version; /* Py_Version, 0 before 3.11 */
} py;
/* 0 not looked up yet, 1 Python is there, -1 not a Python process (read inline by the hooks). */
int nvlp_py_state; /* atomic (__atomic builtins, as the header reads it) */
#define py_state nvlp_py_state
static pthread_mutex_t resolve_mu = PTHREAD_MUTEX_INITIALIZER;

static void layout_choose(void);

static void *sym(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

static int resolve(void)
{
	int s = __atomic_load_n(&py_state, __ATOMIC_ACQUIRE);
	if (NVLP_LIKELY(s))
		return s;
	pthread_mutex_lock(&resolve_mu);
	if (!(s = __atomic_load_n(&py_state, __ATOMIC_RELAXED))) {
		py.is_initialized = (int_fn)sym("Py_IsInitialized");
		py.gil_check = (int_fn)sym("PyGILState_Check");
		py.tstate = (ptr_fn)sym("PyThreadState_GetUnchecked");
		if (!py.tstate)
			py.tstate = (ptr_fn)sym("_PyThreadState_UncheckedGet");
		py.get_frame = (ptr_fn)sym("PyEval_GetFrame");
		py.frame_back = (obj_obj_fn)sym("PyFrame_GetBack");
		py.frame_code = (obj_obj_fn)sym("PyFrame_GetCode");
		py.frame_line = (int_obj_fn)sym("PyFrame_GetLineNumber");
		py.frame_lasti = (int_obj_fn)sym("PyFrame_GetLasti");
		py.getattr = (getattr_fn)sym("PyObject_GetAttrString");
		py.utf8 = (utf8_fn)sym("PyUnicode_AsUTF8");
		py.incref = (ref_fn)sym("Py_IncRef");
		py.decref = (ref_fn)sym("Py_DecRef");
		py.err_fetch = (fetch_fn)sym("PyErr_Fetch");
		py.err_restore = (restore_fn)sym("PyErr_Restore");
		py.this_tstate = (ptr_fn)sym("PyGILState_GetThisThreadState");
		py.add_pending = (int (*)(int (*)(void *), void *))sym("Py_AddPendingCall");
		py.code_type = sym("PyCode_Type");
		py.unicode_type = sym("PyUnicode_Type");
		py.bytes_type = sym("PyBytes_Type");
		const unsigned long *ver = sym("Py_Version");
		py.version = ver ? *ver : 0;
		int all = py.is_initialized && py.gil_check && py.tstate && py.get_frame &&
			  py.frame_back && py.frame_code && py.frame_line && py.getattr && py.utf8 &&
			  py.incref && py.decref && py.err_fetch && py.err_restore;
		s = all ? 1 : -1;
		if (s > 0)
			layout_choose();
		__atomic_store_n(&py_state, s, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&resolve_mu);
	return s;
}

/* The thread holds the GIL of an initialised interpreter. */
static int holds_gil(void)
{
	return py.is_initialized() && py.gil_check() == 1 && py.tstate() != NULL;
}

/* ---- code object -> "file" and "name" ----------------------------------------------------------- */

#define CODE_SLOTS 4096 /* power of two */
struct code_name {
	PyObject *code; /* a reference we hold */
	char *text;     /* "file\0name\0", malloc'ed */
};
static struct code_name codes[CODE_SLOTS];
static pthread_mutex_t codes_mu = PTHREAD_MUTEX_INITIALIZER;

/* A new reference's attribute as UTF-8 into buf (an attribute error is cleared by the caller's
 * restore of the saved exception state). */
static size_t attr_text(PyObject *o, const char *attr, char *buf, size_t cap)
{
	buf[0] = 0;
	PyObject *v = py.getattr(o, attr);
	if (!v)
		return 0;
	const char *s = py.utf8(v);
	size_t n = 0;
	if (s) {
		n = strlen(s);
		n = n < cap - 1 ? n : cap - 1;
		memcpy(buf, s, n);
		buf[n] = 0;
	}
	py.decref(v);
	return n;
}

/* file and name of code (GIL held); into the caller's buffers. */
static void code_names(PyObject *code, char *file, size_t fcap, char *name, size_t ncap)
{
	unsigned h = (unsigned)(((uintptr_t)code >> 4) * 0x9e3779b1u) & (CODE_SLOTS - 1);
	pthread_mutex_lock(&codes_mu);
	for (unsigned n = 0; n < 16; n++) {
		struct code_name *c = &codes[(h + n) & (CODE_SLOTS - 1)];
		if (c->code == code) {
			snprintf(file, fcap, "%s", c->text);
			snprintf(name, ncap, "%s", c->text + strlen(c->text) + 1);
			pthread_mutex_unlock(&codes_mu);
			return;
		}
		if (!c->code)
			break;
	}
	pthread_mutex_unlock(&codes_mu);
	size_t fl = attr_text(code, "co_filename", file, fcap);
	size_t nl = attr_text(code, "co_name", name, ncap);
	char *text = malloc(fl + nl + 2);
	if (!text)
		return;
	memcpy(text, file, fl + 1);
	memcpy(text + fl + 1, name, nl + 1);
	pthread_mutex_lock(&codes_mu);
	for (unsigned n = 0; n < 16; n++) {
		struct code_name *c = &codes[(h + n) & (CODE_SLOTS - 1)];
		if (c->code == code)
			break; /* another thread (another interpreter's GIL) added it */
		if (!c->code) {
			py.incref(code);
			c->code = code;
			c->text = text;
			text = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&codes_mu);
	free(text); /* not cached (neighbourhood full): recomputed next time */
}

/* ---- chains, deduplicated by the hash of their text --------------------------------------------- */

#define MAX_PYFRAMES 48
/* The thread's scratch buffer: a chain, then (8-aligned) the layout walk's line cache. */
#define LC_OFFSET ((NVLP_MAX_BLOB + 8) & ~7u)
#define IDC_OFFSET (LC_OFFSET + 512 * 40)
#define IDC_SLOTS 8
struct idcache { /* the layout walk's last chains: their key and PYSTACK id */
	uint64_t key[IDC_SLOTS], id[IDC_SLOTS];
	unsigned next, epoch;
};
#define SCRATCH_BYTES (IDC_OFFSET + sizeof(struct idcache))
#define SIG_FRAMES 4 /* frames in a collective's chain signature (see nvlp_py_nccl) */
#define PYSTACK_SLOTS 16384
#define PROBES 64
static _Atomic uint64_t pystack_ids[PYSTACK_SLOTS];
static unsigned pystack_epoch; /* the fork epoch the set belongs to */

static int seen_before(uint64_t id)
{
	/* A fork child writes its own file: everything is new to it. */
	unsigned ep = __atomic_load_n(&nvlp_tls_epoch, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&pystack_epoch, __ATOMIC_ACQUIRE) != ep) {
		for (unsigned i = 0; i < PYSTACK_SLOTS; i++)
			atomic_store_explicit(&pystack_ids[i], 0, memory_order_relaxed);
		__atomic_store_n(&pystack_epoch, ep, __ATOMIC_RELEASE);
	}
	unsigned i = (unsigned)(id * 0x9e3779b97f4a7c15ull >> 40) & (PYSTACK_SLOTS - 1);
	for (int n = 0; n < PROBES; n++, i = (i + 1) & (PYSTACK_SLOTS - 1)) {
		uint64_t cur = atomic_load_explicit(&pystack_ids[i], memory_order_acquire);
		if (cur == id)
			return 1;
		if (!cur) {
			if (atomic_compare_exchange_strong(&pystack_ids[i], &cur, id))
				return 0;
			if (cur == id)
				return 1;
		}
	}
	return 0; /* full: writing it again is harmless */
}

/* The thread's chain through the C API (GIL held) as "file:line:function\n" lines into blob.
 * @return its length, 0 when there are no frames */
static size_t api_blob(PyObject *frame, char *blob)
{
	size_t len = 0;
	char file[512], name[160];
	PyObject *et, *ev, *etb;
	py.err_fetch(&et, &ev, &etb);
	py.incref(frame);
	for (int depth = 0; frame && depth < MAX_PYFRAMES; depth++) {
		PyObject *code = py.frame_code(frame);
		int line = py.frame_line(frame);
		if (code) {
			code_names(code, file, sizeof file, name, sizeof name);
			py.decref(code);
			int n = snprintf(blob + len, NVLP_MAX_BLOB - len, "%s:%d:%s\n", file, line, name);
			if (n < 0 || (size_t)n >= NVLP_MAX_BLOB - len)
				break;
			len += (size_t)n;
		}
		PyObject *back = py.frame_back(frame);
		py.decref(frame);
		frame = back;
	}
	if (frame)
		py.decref(frame);
	py.err_restore(et, ev, etb);
	return len;
}

static uint64_t chain_hash(const char *blob, size_t len)
{
	uint64_t id = nvlp_hash64(blob, len, 0x7079737461636bull);
	return id ? id : 1;
}

/* The PYSTACK of a chain (written the first time it is seen). @return its id, 0 for none */
static uint64_t chain_id(const char *blob, size_t len)
{
	if (!len)
		return 0;
	uint64_t id = chain_hash(blob, len);
	if (!seen_before(id)) {
		struct nvlp_rec_pystack r = {.id = id};
		nvlp_emit(NVLP_K_PYSTACK, &r, blob, len);
	}
	return id;
}

/* The thread's scratch buffer for chains: up to 48 frames of up to ~700 bytes, off the job's
 * stack (made once per thread, at its first chain). */
struct linecache;
static char *scratch(void)
{
	struct nvlp_tls *t = nvlp_tls();
	if (!t->py_scratch)
		t->py_scratch = calloc(1, SCRATCH_BYTES); /* the chain, then the line cache */
	return t->py_scratch;
}

/* Walk the frames of the thread (GIL held). @return the PYSTACK id, 0 when there are none. */
static uint64_t walk(PyObject *frame)
{
	char *blob = scratch();
	return blob ? chain_id(blob, api_blob(frame, blob)) : 0;
}

/* ---- the layout walk: the calling thread's own frames, without the GIL -------------------------
 *
 * A thread that released the GIL cannot be asked through the C API, but its own chain cannot
 * change while it is inside our hook: only the thread that owns a frame chain pushes and pops its
 * frames (a generator on it is running, so no other thread can resume it), and the frames hold
 * strong references to their code objects, which hold their file and function names and line
 * tables (all immutable). Another thread that holds the GIL meanwhile may read those frames
 * (sys._current_frames) or create frame objects for them, but never changes the fields read here
 * (code, previous, instruction pointer, owner). So the calling thread, and only it, reads its own
 * frames from memory: its PyThreadState from PyGILState_GetThisThreadState() (thread-local
 * storage: no GIL, no lock), then the interpreter frames through the version's struct layout,
 * lines decoded from co_linetable (the 3.11+ location table, CPython's Objects/locations.md).
 * No GIL, no lock, no syscall, no allocation (the thread's scratch buffer is made once); every
 * read is bounded (frames, steps, string and table lengths) and every pointer checked for NULL
 * and alignment and its object for its type before its fields are used.
 *
 * The layouts are CPython's internal structs (Include/internal/pycore_frame.h, cpython/code.h,
 * cpython/pystate.h, cpython/unicodeobject.h of 3.11, 3.12 and 3.13; offsets as gcc lays them out
 * on x86-64 and aarch64), chosen by Py_Version's major.minor. A build whose objects differ (a debug
 * or free-threaded build, a distribution's patch) must not be walked, so none is trusted before a
 * self-check: the first time a thread holding the GIL is captured (or, when none ever is, once
 * through Py_AddPendingCall, which CPython documents as callable without the GIL: the main thread
 * runs the check between two bytecodes), its chain is built both ways and the walk is enabled only
 * when the two agree exactly. The self-check's reads go through process_vm_readv (or a pipe), which
 * fail instead of faulting on a wrong address, so even a wrong layout cannot crash the job. Calls
 * made before the check concluded walk their chain through those same reads and keep it until the
 * check's verdict (tentative chains, below).
 * Known limits: a line set by a tracer (f_lineno under sys.settrace) makes the check disagree (the
 * walk then stays off); a daemon thread still inside a CUDA call while the interpreter finalizes
 * could read a freed thread state (Py_IsInitialized is checked first; the window is the
 * finalizer's own teardown).
 */
struct pylayout {
	unsigned ver;                  /* 0x030b00 ... (major.minor of Py_Version) */
	unsigned ts_cframe, cf_frame;  /* tstate->cframe->current_frame (ts_cframe 0: direct) */
	unsigned ts_frame;             /* tstate->current_frame (3.13) */
	unsigned fr_code, fr_previous, fr_instr, fr_owner;
	unsigned co_firstlineno, co_filename, co_name, co_linetable, co_firsttraceable, co_code;
	/* where a compact str's characters start: sizeof(PyASCIIObject), of PyCompactUnicodeObject */
	unsigned u_ascii_data, u_compact_data;
	int owner_cstack;              /* FRAME_OWNED_BY_CSTACK, -1 where there is none */
};
/* Common to all three: PyObject.ob_type at 8, PyVarObject.ob_size at 16, PyBytesObject.ob_sval at
 * 32, PyASCIIObject.length at 16 and state at 32 (kind bits 2-4, compact bit 5, ascii bit 6),
 * FRAME_OWNED_BY_GENERATOR = 1, sizeof(_Py_CODEUNIT) = 2. */
static const struct pylayout layouts[] = {
    {0x030b00, 56, 8, 0, 32, 48, 56, 69, 72, 112, 120, 136, 168, 184, 48, 72, -1},
    {0x030c00, 56, 0, 0, 0, 8, 56, 70, 68, 112, 120, 136, 176, 192, 40, 56, 3},
    {0x030d00, 0, 0, 72, 0, 8, 56, 70, 68, 112, 120, 136, 184, 200, 40, 56, 3},
};
#define OB_TYPE 8
#define OB_SIZE 16
#define BYTES_DATA 32
#define U_LENGTH 16
#define U_STATE 32
#define OWNER_GENERATOR 1
#define MAX_STEPS 256          /* frames looked at per walk, complete or not */
#define MAX_LINETABLE (1 << 20) /* bytes of a code object's location table */

static struct pylayout lay;  /* the running interpreter's, when one is known */
/* 0 not checked yet, 1 checked and enabled, -1 none or disabled (read inline by the hooks) */
static int lay_state = -1;
static int lay_log;          /* NVLPROF_PYWALK_LOG=1: say what the self-check found */
static int lay_test_pipe;    /* NVLPROF_PYWALK_TEST=pipe: the self-check reads through a pipe */
static int lay_test_refuse;  /* NVLPROF_PYWALK_TEST=refuse: the self-check fails a right layout */
static int lay_pending;      /* the self-check was scheduled through Py_AddPendingCall */
static int lay_tries;        /* inconclusive self-checks so far */
static pthread_mutex_t check_mu = PTHREAD_MUTEX_INITIALIZER;

/* Under resolve_mu, once. NVLPROF_PYWALK=0 turns the walk off; NVLPROF_PYWALK_TEST=skew gives it a
 * wrong layout (the self-check must then refuse it), =pipe makes the self-check read through its
 * fallback, =refuse makes it fail a right layout (the chains kept before it must then be dropped:
 * tests/runtime/test_pywalk.sh). */
static void layout_choose(void)
{
	const struct nvlp_config *cfg = nvlp_cfg();
	lay_log = cfg->pywalk_log;
	unsigned v = (unsigned)(py.version >> 8) & 0xffff00u;
	lay_state = -1;
	if (!cfg->pywalk || !py.this_tstate || !py.add_pending || !py.code_type ||
	    !py.unicode_type || !py.bytes_type)
		return;
	for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
		if (layouts[i].ver == v) {
			lay = layouts[i];
			lay_state = 0;
		}
	if (lay_state == 0 && cfg->pywalk_test == NVLP_PYWALK_SKEW)
		lay.fr_previous += 8;
	lay_test_pipe = cfg->pywalk_test == NVLP_PYWALK_PIPE;
	lay_test_refuse = cfg->pywalk_test == NVLP_PYWALK_REFUSE;
	if (lay_state < 0 && lay_log)
		nvlp_warn("Python %lu.%lu: no frame layout known, GIL-released calls get no Python "
		          "location",
		          (unsigned long)(py.version >> 24), (unsigned long)(py.version >> 16 & 0xff));
}

/* Reads: plain loads once the layout is proven; in the self-check, reads that fail instead of
 * faulting (process_vm_readv on ourselves, or a pipe where that is refused). */
struct rdr {
	int checked;
	pid_t pid;
	int pipe[2];  /* -1: not made */
	int failed;
	uint8_t *tab; /* checked: room for a location table (MAX_LINETABLE bytes) */
	struct linecache *lc; /* unchecked: the thread's line cache */
	struct blocks *bc;    /* checked, the sampler's: blocks read in this pass, or NULL */
};

/* The sampler's reads come in 1 KiB aligned blocks, kept for one pass over a chain (a frame's
 * and a code object's fields are a dozen small reads within one or two blocks: one syscall each
 * instead of one per field). A block lies within one page, so it reads whole or not at all. */
#define BLOCK 1024
#define BLOCK_SLOTS 32
struct blocks {
	uintptr_t addr[BLOCK_SLOTS]; /* 0: empty */
	uint8_t data[BLOCK_SLOTS][BLOCK];
};
static void blocks_reset(struct rdr *r)
{
	if (r->bc)
		memset(r->bc->addr, 0, sizeof r->bc->addr);
}

static int rd_checked(struct rdr *r, void *dst, uintptr_t src, size_t n);
static inline __attribute__((always_inline)) int rd(struct rdr *r, void *dst, uintptr_t src,
                                                    size_t n)
{
	if (!src || src + n < src)
		return -1;
	if (!r->checked) {
		memcpy(dst, (const void *)src, n);
		return 0;
	}
	return rd_checked(r, dst, src, n);
}

static int rd_raw(struct rdr *r, void *dst, uintptr_t src, size_t n);
static int rd_checked(struct rdr *r, void *dst, uintptr_t src, size_t n)
{
	uintptr_t b = src & ~(uintptr_t)(BLOCK - 1);
	/* through the pipe, exact reads only: a sanitizer's write() checks the whole block, which
	 * may reach into freed memory beside the object */
	if (!r->bc || r->pipe[0] >= 0 || ((src + n - 1) & ~(uintptr_t)(BLOCK - 1)) != b)
		return rd_raw(r, dst, src, n);
	unsigned i = (unsigned)((b / BLOCK) * 0x9e3779b1u >> 27) & (BLOCK_SLOTS - 1);
	if (r->bc->addr[i] != b) {
		if (rd_raw(r, r->bc->data[i], b, BLOCK)) {
			r->bc->addr[i] = 0;
			return -1;
		}
		r->bc->addr[i] = b;
	}
	memcpy(dst, r->bc->data[i] + (src - b), n);
	return 0;
}

static int rd_raw(struct rdr *r, void *dst, uintptr_t src, size_t n)
{
	struct iovec l = {dst, n}, rm = {(void *)src, n};
	if (r->pipe[0] < 0) {
		ssize_t got = process_vm_readv(r->pid, &l, 1, &rm, 1, 0);
		if (got == (ssize_t)n)
			return 0;
		if (got >= 0 || errno == EFAULT)
			return -1;
		if (pipe2(r->pipe, O_CLOEXEC) != 0) /* ENOSYS, EPERM: seccomp */
			return r->failed = 1, -1;
	}
	for (size_t at = 0; at < n;) { /* pieces within the pipe's capacity */
		size_t k = n - at < 4096 ? n - at : 4096;
		if (write(r->pipe[1], (const void *)(src + at), k) != (ssize_t)k)
			return -1; /* EFAULT: not mapped (no short write below PIPE_BUF) */
		if (read(r->pipe[0], (char *)dst + at, k) != (ssize_t)k)
			return r->failed = 1, -1;
		at += k;
	}
	return 0;
}

static inline int rd_ptr(struct rdr *r, uintptr_t obj, unsigned off, uintptr_t *out)
{
	return rd(r, out, obj + off, sizeof *out) || (*out & 7) ? -1 : 0;
}

/* obj (8-aligned, non-NULL) is an object of that type. */
static inline int is_a(struct rdr *r, uintptr_t obj, const void *type)
{
	uintptr_t t;
	return obj && !(obj & 7) && !rd_ptr(r, obj, OB_TYPE, &t) && t == (uintptr_t)type;
}

/* A str as UTF-8, cut at cap - 1 bytes as the API path cuts PyUnicode_AsUTF8's text.
 * @return its length, -1 not a compact str (or a lone surrogate, which has no UTF-8) */
static long str_utf8(struct rdr *r, uintptr_t u, char *out, size_t cap)
{
	int64_t len;
	uint32_t state;
	if (!is_a(r, u, py.unicode_type) || rd(r, &len, u + U_LENGTH, 8) ||
	    rd(r, &state, u + U_STATE, 4) || len < 0 || !(state & 0x20))
		return -1;
	size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1; /* characters needed at most */
	if (state & 0x40) { /* compact ASCII: one byte each */
		if (rd(r, out, u + lay.u_ascii_data, n))
			return -1;
		out[n] = 0;
		return (long)n;
	}
	unsigned kind = state >> 2 & 7;
	uint8_t raw[4 * 512];
	if ((kind != 1 && kind != 2 && kind != 4) || n * kind > sizeof raw ||
	    rd(r, raw, u + lay.u_compact_data, n * kind))
		return -1;
	size_t o = 0;
	for (size_t i = 0; i < n && o < cap - 1; i++) {
		uint32_t c = kind == 1   ? raw[i]
		             : kind == 2 ? ((uint16_t *)raw)[i]
		                         : ((uint32_t *)raw)[i];
		uint8_t b[4];
		int k;
		if (c < 0x80)
			b[0] = (uint8_t)c, k = 1;
		else if (c < 0x800)
			b[0] = (uint8_t)(0xc0 | c >> 6), b[1] = (uint8_t)(0x80 | (c & 63)), k = 2;
		else if (c >= 0xd800 && c < 0xe000)
			return -1;
		else if (c < 0x10000)
			b[0] = (uint8_t)(0xe0 | c >> 12), b[1] = (uint8_t)(0x80 | (c >> 6 & 63)),
			b[2] = (uint8_t)(0x80 | (c & 63)), k = 3;
		else
			b[0] = (uint8_t)(0xf0 | c >> 18), b[1] = (uint8_t)(0x80 | (c >> 12 & 63)),
			b[2] = (uint8_t)(0x80 | (c >> 6 & 63)), b[3] = (uint8_t)(0x80 | (c & 63)),
			k = 4;
		for (int j = 0; j < k && o < cap - 1; j++)
			out[o++] = (char)b[j];
	}
	out[o] = 0;
	return (long)o;
}

/* Lines already decoded by this thread, by code object, its table and the offset: a training
 * loop's frames are the same few thousand (code, offset) pairs again and again. Direct-mapped,
 * in the thread's scratch buffer; an entry of a code object since freed can only be hit again by a
 * new code object at the same address with a table at the same address of the same size. */
#define LINE_SLOTS 512
struct linecache {
	struct lc_slot {
		uintptr_t co, tab;
		int64_t size;
		long addr;
		int line;
	} s[LINE_SLOTS];
};
_Static_assert(sizeof(struct linecache) <= SCRATCH_BYTES - LC_OFFSET, "scratch too small");

/* The line of byte offset addr in a code object: PyCode_Addr2Line's answer, from the location
 * table (entries: a first byte with bit 7 set, code = bits 3-6, length - 1 code units = bits 0-2;
 * codes 13 and 14 start with a signed varint line delta, 11 and 12 mean +1 and +2, 15 no line).
 * @return the line, -1 for none, -2 unreadable */
static int code_line(struct rdr *r, uintptr_t co, long addr)
{
	int first;
	uintptr_t tab;
	int64_t size;
	if (rd(r, &first, co + lay.co_firstlineno, sizeof first) ||
	    rd_ptr(r, co, lay.co_linetable, &tab) || !is_a(r, tab, py.bytes_type) ||
	    rd(r, &size, tab + OB_SIZE, 8) || size < 0 || size > MAX_LINETABLE)
		return -2;
	if (addr < 0)
		return first;
	struct lc_slot *c = NULL;
	if (r->lc) {
		c = &r->lc->s[(((uint64_t)co >> 4) * 0x9e3779b97f4a7c15ull + (uint64_t)addr) >> 55 &
		              (LINE_SLOTS - 1)];
		if (c->co == co && c->tab == tab && c->size == size && c->addr == addr)
			return c->line;
	}
	const uint8_t *p = (const uint8_t *)(tab + BYTES_DATA);
	if (r->checked) {
		if (!r->tab || rd(r, r->tab, tab + BYTES_DATA, (size_t)size))
			return -2;
		p = r->tab;
	}
	const uint8_t *e = p + size;
	long line = first, end = 0;
	int found = -1;
	while (p < e) {
		uint8_t b = *p++;
		if (!(b & 0x80))
			return -2;
		unsigned code = b >> 3 & 15;
		long delta = code == 11 ? 1 : code == 12 ? 2 : 0;
		if (code == 13 || code == 14) { /* signed varint: 6 bits a byte, bit 6 = more */
			unsigned long u = 0;
			for (unsigned shift = 0;; shift += 6) {
				if (shift > 30 || p >= e)
					return -2;
				uint8_t v = *p++;
				u |= (unsigned long)(v & 63) << shift;
				if (!(v & 64))
					break;
			}
			delta = u & 1 ? -(long)(u >> 1) : (long)(u >> 1);
		}
		line += delta;
		end += ((b & 7) + 1) * 2;
		if (end > addr) {
			found = code == 15 ? -1 : (int)line;
			break;
		}
		while (p < e && !(*p & 0x80))
			p++;
	}
	if (c)
		*c = (struct lc_slot){co, tab, size, addr, found};
	return found;
}

/* The innermost complete frame at or below f (the API's PyFrame_GetBack and PyEval_GetFrame skip
 * the others: C-stack entry frames, frames whose first instruction has not run). Sets *co.
 * @return the frame, 0 none, or 1 when a read failed */
static uintptr_t complete(struct rdr *r, uintptr_t f, uintptr_t *co, int *steps)
{
	for (; f; (*steps)++) {
		uint8_t owner;
		uintptr_t instr, prev;
		int firsttr;
		if (*steps >= MAX_STEPS || (f & 7) || rd(r, &owner, f + lay.fr_owner, 1) ||
		    rd_ptr(r, f, lay.fr_previous, &prev))
			return 1;
		if ((int)owner == lay.owner_cstack) {
			f = prev;
			continue;
		}
		if (rd_ptr(r, f, lay.fr_code, co) || !is_a(r, *co, py.code_type) ||
		    rd(r, &instr, f + lay.fr_instr, sizeof instr) ||
		    rd(r, &firsttr, *co + lay.co_firsttraceable, sizeof firsttr))
			return 1;
		if (owner == OWNER_GENERATOR || instr >= *co + lay.co_code + 2 * (uintptr_t)firsttr)
			return f;
		f = prev;
	}
	return 0;
}

static int first_frame(struct rdr *r, uintptr_t ts, uintptr_t *f)
{
	if (!lay.ts_cframe)
		return rd_ptr(r, ts, lay.ts_frame, f);
	uintptr_t cf;
	if (rd_ptr(r, ts, lay.ts_cframe, &cf))
		return -1;
	*f = 0;
	return cf ? rd_ptr(r, cf, lay.cf_frame, f) : 0;
}

/* The chain of the thread whose state is ts, in api_blob's format. @return its length (0: no
 * frames), -1 a read failed or an object was not what the layout says */
static long layout_blob(struct rdr *r, uintptr_t ts, char *blob)
{
	uintptr_t f;
	size_t len = 0;
	int steps = 0;
	char file[512], name[160];
	blocks_reset(r);
	if (first_frame(r, ts, &f))
		return -1;
	for (int depth = 0; depth < MAX_PYFRAMES; depth++) {
		uintptr_t co, instr, ufile, uname;
		long fl, nl;
		f = complete(r, f, &co, &steps);
		if (f == 1)
			return -1;
		if (!f)
			break;
		if (rd(r, &instr, f + lay.fr_instr, sizeof instr) ||
		    rd_ptr(r, co, lay.co_filename, &ufile) || rd_ptr(r, co, lay.co_name, &uname) ||
		    (fl = str_utf8(r, ufile, file, sizeof file)) < 0 ||
		    (nl = str_utf8(r, uname, name, sizeof name)) < 0)
			return -1;
		long addr = ((long)instr - (long)(co + lay.co_code)) / 2 * 2;
		int line = code_line(r, co, addr);
		if (line == -2)
			return -1;
		/* "%s:%d:%s\n" as api_blob's snprintf writes it (and stops where it would) */
		char num[12];
		size_t nn = 0;
		unsigned long v = line < 0 ? (unsigned long)-(long)line : (unsigned long)line;
		do
			num[sizeof num - 1 - nn++] = (char)('0' + v % 10);
		while ((v /= 10) && nn < sizeof num - 1);
		if (line < 0)
			num[sizeof num - 1 - nn++] = '-';
		size_t need = (size_t)fl + 1 + nn + 1 + (size_t)nl + 1;
		if (need >= NVLP_MAX_BLOB - len)
			break;
		char *o = blob + len;
		memcpy(o, file, (size_t)fl);
		o += fl;
		*o++ = ':';
		memcpy(o, num + sizeof num - nn, nn);
		o += nn;
		*o++ = ':';
		memcpy(o, name, (size_t)nl);
		o += nl;
		*o++ = '\n';
		len += need;
		if (rd_ptr(r, f, lay.fr_previous, &f))
			return -1;
	}
	return (long)len;
}

/* The calling thread's state when the walk may read it: enabled, interpreter up. */
static uintptr_t own_tstate(void)
{
	if (__atomic_load_n(&lay_state, __ATOMIC_ACQUIRE) <= 0 || !py.is_initialized())
		return 0;
	return (uintptr_t)py.this_tstate();
}

static void emit_ref(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id, uint64_t id);
static void samp_kick(struct nvlp_tls *tls);

/* ---- tentative chains: calls made before the self-check concluded -------------------------------
 *
 * A job whose first interesting calls release the GIL (CuPy's managed allocation, torch's first
 * collective) makes them before any self-check could run, and they are the calls that matter
 * most. Such a call walks its chain at once, through the self-check's fault-safe reads
 * (process_vm_readv or the pipe: syscalls, acceptable because this happens only until the check
 * concludes and for at most TENT_SLOTS calls per process), and keeps it here instead of writing
 * it. When the check passes, the kept chains are written (a PYREF names its record by time or
 * call_id, so writing it late changes nothing); when it fails, they are dropped. So no trace ever
 * holds a chain read through an unproven layout: no format change, earlier traces read as before.
 * A check that never concludes (the process ends first) loses them, as before. Lock-free (a fork
 * child must not inherit a held lock): a slot is settled once, by whichever of its writer and the
 * check sees the other's store (both sequentially consistent).
 */
#define TENT_SLOTS 32
static struct tent {
	int state; /* 0 free or being filled, 2 kept, 3 settled */
	unsigned epoch, kind;
	uint64_t tid, t, call_id;
	char *text;
	size_t len;
} tents[TENT_SLOTS];
static unsigned tent_next; /* slots claimed (never reused): the tentative walks so far */

/* @return 1 when it settled a kept chain */
static int tent_settle(struct tent *e)
{
	int kept = 2;
	if (!__atomic_compare_exchange_n(&e->state, &kept, 3, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return 0;
	/* a fork child's kept calls are its parent's: not in its file */
	if (__atomic_load_n(&lay_state, __ATOMIC_SEQ_CST) > 0 &&
	    e->epoch == __atomic_load_n(&nvlp_tls_epoch, __ATOMIC_ACQUIRE)) {
		emit_ref(e->kind, e->tid, e->t, e->call_id, chain_id(e->text, e->len));
	}
	free(e->text);
	e->text = NULL;
	return 1;
}

/* The calling thread's chain before the check concluded (GIL released), kept for the check's
 * verdict unless its id is skip (a collective's chain already kept). @return its id, 0 none */
static uint64_t tentative(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id, uint64_t skip)
{
	if (__atomic_load_n(&lay_state, __ATOMIC_ACQUIRE) != 0 ||
	    __atomic_load_n(&tent_next, __ATOMIC_RELAXED) >= TENT_SLOTS || !py.is_initialized())
		return 0;
	uintptr_t ts = (uintptr_t)py.this_tstate(); /* NULL: a thread without Python */
	char *blob = ts ? scratch() : NULL;
	if (!blob)
		return 0;
	/* sequentially consistent, as the check's load of it: a slot it does not see is one whose
	 * writer sees the verdict */
	unsigned i = __atomic_fetch_add(&tent_next, 1, __ATOMIC_SEQ_CST);
	if (i >= TENT_SLOTS)
		return 0;
	struct tent *e = &tents[i];
	struct rdr r = {
	    .checked = 1, .pid = getpid(), .pipe = {-1, -1}, .tab = malloc(MAX_LINETABLE)};
	if (lay_test_pipe && pipe2(r.pipe, O_CLOEXEC))
		r.failed = 1;
	long n = r.failed ? -1 : layout_blob(&r, ts, blob);
	free(r.tab);
	if (r.pipe[0] >= 0)
		close(r.pipe[0]), close(r.pipe[1]);
	uint64_t id = n > 0 ? chain_hash(blob, (size_t)n) : 0;
	if (!id || id == skip || !(e->text = malloc((size_t)n))) {
		__atomic_store_n(&e->state, 3, __ATOMIC_RELEASE);
		return id;
	}
	memcpy(e->text, blob, (size_t)n);
	e->len = (size_t)n;
	e->kind = kind, e->tid = tid, e->t = t, e->call_id = call_id;
	e->epoch = __atomic_load_n(&nvlp_tls_epoch, __ATOMIC_ACQUIRE);
	__atomic_store_n(&e->state, 2, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&lay_state, __ATOMIC_SEQ_CST) != 0)
		tent_settle(e); /* the check concluded meanwhile: it may have missed this slot */
	return id;
}

/* tentative(), leaving errno as it was (its reads and allocations may set it) */
static uint64_t walk_tentative(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id,
                               uint64_t skip)
{
	int saved = errno;
	uint64_t id = tentative(kind, tid, t, call_id, skip);
	errno = saved;
	return id;
}

/* Self-check (GIL held, on the thread being checked): its chain both ways. */
static void self_check(void)
{
	if (__atomic_load_n(&lay_state, __ATOMIC_ACQUIRE) != 0 || pthread_mutex_trylock(&check_mu))
		return;
	char *a = NULL, *b = NULL;
	PyObject *frame = py.get_frame();
	uintptr_t ts = (uintptr_t)py.tstate();
	if (!frame || !ts || lay_state != 0 || !(a = malloc(NVLP_MAX_BLOB)) ||
	    !(b = malloc(NVLP_MAX_BLOB)))
		goto out; /* no frames here: another capture checks */
	size_t na = api_blob(frame, a);
	struct rdr r = {
	    .checked = 1, .pid = getpid(), .pipe = {-1, -1}, .tab = malloc(MAX_LINETABLE)};
	if (lay_test_pipe && pipe2(r.pipe, O_CLOEXEC))
		r.failed = 1;
	long nb = layout_blob(&r, ts, b);
	free(r.tab);
	if (r.pipe[0] >= 0)
		close(r.pipe[0]), close(r.pipe[1]);
	int ok = na && nb == (long)na && !memcmp(a, b, na) && !lay_test_refuse;
	if (!na || (r.failed && __atomic_add_fetch(&lay_tries, 1, __ATOMIC_RELAXED) < 3))
		goto out; /* inconclusive: try again at a later capture */
	__atomic_store_n(&lay_state, ok ? 1 : -1, __ATOMIC_SEQ_CST);
	samp_kick(nvlp_tls()); /* proven: the sampler may start */
	unsigned tried = __atomic_load_n(&tent_next, __ATOMIC_SEQ_CST);
	tried = tried < TENT_SLOTS ? tried : TENT_SLOTS;
	unsigned kept = 0;
	for (unsigned i = 0; i < tried; i++)
		kept += (unsigned)tent_settle(&tents[i]);
	if (lay_log && tried)
		nvlp_warn("Python frame layout: %u calls walked before the self-check, %u chains kept: %s",
		          tried, kept, ok ? "written" : "dropped");
	if (lay_log) {
		unsigned frames = 0;
		for (size_t i = 0; i < na; i++)
			frames += a[i] == '\n';
		if (ok)
			nvlp_warn("Python %u.%u frame layout: self-check passed (%u frames agree): "
			          "GIL-released calls get Python locations",
			          lay.ver >> 16, lay.ver >> 8 & 0xff, frames);
		else
			nvlp_warn("Python %u.%u frame layout: self-check failed (%s): GIL-released "
			          "calls get no Python location",
			          lay.ver >> 16, lay.ver >> 8 & 0xff,
			          r.failed          ? "checked reads unavailable"
			          : nb < 0          ? "a read failed or an object was not of its type"
			          : lay_test_refuse ? "refused by NVLPROF_PYWALK_TEST=refuse"
			                            : "the chains differ");
	}
out:
	free(a);
	free(b);
	pthread_mutex_unlock(&check_mu);
}

static int pending_check(void *arg)
{
	(void)arg;
	self_check();
	__atomic_store_n(&lay_pending, 0, __ATOMIC_RELEASE); /* inconclusive: may be asked again */
	return 0;
}

/* A thread without the GIL found the walk not checked yet: the main thread checks it at its next
 * bytecode boundary (asked once at a time, at most a few times). */
static void ask_check(void)
{
	if (__atomic_load_n(&lay_state, __ATOMIC_RELAXED) == 0 &&
	    __atomic_load_n(&lay_tries, __ATOMIC_RELAXED) < 3 &&
	    !__atomic_exchange_n(&lay_pending, 1, __ATOMIC_ACQ_REL) && py.is_initialized()) {
		__atomic_add_fetch(&lay_tries, 1, __ATOMIC_RELAXED);
		if (py.add_pending(pending_check, NULL) != 0)
			__atomic_store_n(&lay_pending, 0, __ATOMIC_RELEASE);
	}
}

/* What a chain's text is made of, frame by frame: code object, instruction, file and function
 * name objects, line table and first line. Equal keys, equal texts: a code object that replaced a
 * freed one at the same address would also need its strings and table at the old ones'
 * addresses and the same first line to be mistaken for it. shape (when asked): the same without
 * the innermost frame's instruction and with the frames' addresses, which a running thread keeps
 * while it stays in its innermost function (the sampler's consistency check). @return the key, 0
 * a read failed */
static uint64_t chain_keys(struct rdr *r, uintptr_t ts, uint64_t *shape)
{
	uintptr_t f, co, v[4];
	int first, steps = 0;
	uint64_t h = 0xcbf29ce484222325ull, s = h;
	blocks_reset(r);
	if (first_frame(r, ts, &f))
		return 0;
	for (int depth = 0; depth < MAX_PYFRAMES; depth++) {
		f = complete(r, f, &co, &steps);
		if (f == 1)
			return 0;
		if (!f)
			break;
		if (rd(r, &v[0], f + lay.fr_instr, 8) || rd(r, &v[1], co + lay.co_filename, 8) ||
		    rd(r, &v[2], co + lay.co_name, 8) || rd(r, &v[3], co + lay.co_linetable, 8) ||
		    rd(r, &first, co + lay.co_firstlineno, sizeof first))
			return 0;
		h = (h ^ co) * 0x100000001b3ull;
		s = (s ^ co ^ f) * 0x100000001b3ull;
		for (int k = 0; k < 4; k++) {
			h = (h ^ v[k]) * 0x100000001b3ull;
			if (k || depth)
				s = (s ^ v[k]) * 0x100000001b3ull;
		}
		h = (h ^ (uint64_t)(unsigned)first) * 0x100000001b3ull;
		if (rd_ptr(r, f, lay.fr_previous, &f))
			return 0;
	}
	if (shape)
		*shape = s ? s : 1;
	return h ? h : 1;
}

static uint64_t chain_key(struct rdr *r, uintptr_t ts)
{
	return chain_keys(r, ts, NULL);
}

static uint64_t walk_own(uintptr_t ts)
{
	char *blob = scratch();
	if (!blob)
		return 0;
	struct rdr r = {.lc = (struct linecache *)(blob + LC_OFFSET)};
	struct idcache *c = (struct idcache *)(blob + IDC_OFFSET);
	unsigned ep = __atomic_load_n(&nvlp_tls_epoch, __ATOMIC_ACQUIRE);
	if (c->epoch != ep) /* a fork child writes its PYSTACKs again */
		memset(c, 0, sizeof *c), c->epoch = ep;
	uint64_t key = chain_key(&r, ts);
	for (unsigned i = 0; key && i < IDC_SLOTS; i++)
		if (c->key[i] == key)
			return c->id[i];
	long n = layout_blob(&r, ts, blob);
	uint64_t id = n > 0 ? chain_id(blob, (size_t)n) : 0;
	if (key && id) {
		c->key[c->next] = key;
		c->id[c->next] = id;
		c->next = (c->next + 1) % IDC_SLOTS;
	}
	return id;
}

/* The signature of the innermost SIG_FRAMES complete frames of the calling thread (see below). */
static uint64_t own_sig(uintptr_t ts)
{
	struct rdr r = {0};
	uintptr_t f, co, instr;
	uint64_t h = 0x84222325cbf29ce4ull;
	int steps = 0;
	if (first_frame(&r, ts, &f))
		return 1;
	for (int i = 0; i < SIG_FRAMES; i++) {
		f = complete(&r, f, &co, &steps);
		if (f <= 1 || rd(&r, &instr, f + lay.fr_instr, sizeof instr))
			break;
		h = (h ^ (uint64_t)f) * 0x100000001b3ull;
		h = (h ^ (uint64_t)instr) * 0x100000001b3ull;
		if (rd_ptr(&r, f, lay.fr_previous, &f))
			break;
	}
	return h ? h : 1;
}

static void emit_ref(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id, uint64_t id)
{
	struct nvlp_rec_pyref r = {.kind = kind, .tid = tid, .t = t, .call_id = call_id, .pystack = id};
	nvlp_emit(NVLP_K_PYREF, &r, NULL, 0);
}

void nvlp_py_attach(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id)
{
	if (!nvlp_cfg()->stacks || resolve() < 0)
		return;
	uint64_t id = 0;
	samp_kick(nvlp_tls());
	if (holds_gil()) {
		self_check();
		PyObject *frame = py.get_frame();
		id = frame ? walk(frame) : 0;
	} else {
		uintptr_t ts = own_tstate();
		if (ts) {
			id = walk_own(ts);
		} else {
			walk_tentative(kind, tid, t, call_id, 0); /* its PYREF waits for the check */
			ask_check();
		}
	}
	if (id)
		emit_ref(kind, tid, t, call_id, id);
}

/*
 * Collectives are the hot path: the chain is walked again only when its signature changed since
 * this thread's last collective, and a PYREF is written only when the chain differs from the last
 * one written (pystack 0: no Python location from this call on). The signature is the address and
 * position of the innermost SIG_FRAMES frames: the innermost alone is not enough (torch's
 * all_reduce wrapper is the innermost frame of every collective, called from many lines).
 */
static uint64_t chain_sig(PyObject *frame)
{
	uint64_t h = 0xcbf29ce484222325ull;
	PyObject *f = frame;
	py.incref(f);
	for (int i = 0; i < SIG_FRAMES && f; i++) {
		int pos = py.frame_lasti ? py.frame_lasti(f) : py.frame_line(f);
		h = (h ^ (uint64_t)(uintptr_t)f) * 0x100000001b3ull;
		h = (h ^ (uint64_t)(unsigned)pos) * 0x100000001b3ull;
		PyObject *back = py.frame_back(f);
		py.decref(f);
		f = back;
	}
	if (f)
		py.decref(f);
	return h ? h : 1;
}

void nvlp_py_nccl(struct nvlp_tls *tls, uint64_t t, uint64_t call_id)
{
	if (NVLP_UNLIKELY(!nvlp_cfg()->stacks) || resolve() < 0)
		return;
	if (NVLP_UNLIKELY(!nvlp_record_gate_open())) {
		/* Outside the capture range nothing is written: the first collective inside gets
		 * its PYREF whatever the chain was before. */
		tls->py_sig = 0;
		tls->py_stack = UINT64_MAX;
		return;
	}
	uint64_t id = 0;
	uintptr_t ts;
	samp_kick(tls);
	if (holds_gil()) {
		self_check();
		PyObject *frame = py.get_frame();
		if (frame) {
			PyObject *et, *ev, *etb;
			py.err_fetch(&et, &ev, &etb);
			uint64_t sig = chain_sig(frame);
			py.err_restore(et, ev, etb);
			if (sig == tls->py_sig)
				return;
			tls->py_sig = sig;
			id = walk(frame);
		}
	} else if ((ts = own_tstate())) {
		/* without the GIL: the same signature rule over the thread's own frames (its
		 * values differ from the API's: a change of method re-walks once) */
		uint64_t sig = own_sig(ts) ^ 0x6c61796f7574ull;
		if (sig == tls->py_sig)
			return;
		tls->py_sig = sig;
		id = walk_own(ts);
	} else {
		tls->py_sig = 0;
		id = walk_tentative(NVLP_K_NCCL, tls->tid, t, call_id, tls->py_stack);
		ask_check();
		if (id) { /* kept (its PYREF waits for the check), or the one already kept */
			tls->py_stack = id;
			return;
		}
	}
	if (id != tls->py_stack) {
		tls->py_stack = id;
		emit_ref(NVLP_K_NCCL, tls->tid, t, call_id, id);
	}
}

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
#define SAMP_SLOTS 256    /* threads inside calls followed at once; more are not sampled */
#define SAMP_TRIES 3      /* reads of a moving chain before the sample is discarded */
#define SAMP_JOIN_MS 20   /* the longest the end of the trace waits for the sampler */

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

static struct nvlp_py_slot *slot_claim(struct nvlp_tls *tls)
{
	pthread_once(&samp_once, samp_init_once);
	if (!samp.key_ok)
		return NULL;
	for (unsigned i = 0; i < SAMP_SLOTS; i++) {
		uint64_t free_ = 0;
		if (__atomic_load_n(&slots[i].tid, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&slots[i].tid, &free_, tls->tid, 0, __ATOMIC_ACQ_REL,
		                                __ATOMIC_RELAXED)) {
			pthread_setspecific(samp.key, &slots[i]);
			return tls->py_slot = &slots[i];
		}
	}
	return NULL;
}

/* A thread entering an intercepted call: publish its state (no syscall, no lock once the thread
 * has its slot); before the layout is proven, ask for the check (a thread blocked in its first call
 * would otherwise delay it until the call returns), and start the sampler once it is. */
void nvlp_py_enter_slow(struct nvlp_tls *tls)
{
	int lay_now;
	if (resolve() < 0 || !nvlp_cfg()->stacks || nvlp_cfg()->pysample_hz <= 0 ||
	    (lay_now = __atomic_load_n(&lay_state, __ATOMIC_ACQUIRE)) < 0) {
		__atomic_store_n(&nvlp_py_sampling, 0, __ATOMIC_RELAXED);
		return;
	}
	if (!py.is_initialized())
		return;
	uintptr_t ts = (uintptr_t)py.this_tstate(); /* thread-local storage: no GIL, no lock */
	struct nvlp_py_slot *s = tls->py_slot;
	if (!ts || (!s && !(s = slot_claim(tls))))
		return;
	__atomic_store_n(&s->ts, ts, __ATOMIC_RELEASE);
	if (NVLP_UNLIKELY(!lay_now))
		ask_check();
	else
		samp_kick(tls);
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
			full = chain_keys(r, ts, &shape1);
			if (full && full == st->full)
				return 0; /* the same chain as at its previous sample */
			long n = full ? layout_blob(r, ts, blob) : -1;
			full2 = n >= 0 ? chain_keys(r, ts, &shape2) : 0;
			if (n >= 0 && full2 && shape1 == shape2) {
				id = n > 0 ? chain_id(blob, (size_t)n) : 0;
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
	emit_ref(NVLP_K_NONE, tid, t, 0, id);
	samp.written++;
	return 1;
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
	struct timespec c0, c1;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* the condition variable's clock (not nvlp_now's) */
	pthread_mutex_lock(&samp.mu);
	for (uint64_t next = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;;) {
		next += period;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t cur = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		if (next < cur)
			next = cur; /* late (the machine was busy): no burst to catch up */
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		while (!__atomic_load_n(&samp.stop, __ATOMIC_ACQUIRE) &&
		       pthread_cond_timedwait(&samp.cv, &samp.mu, &ts) == 0)
			;
		if (__atomic_load_n(&samp.stop, __ATOMIC_ACQUIRE))
			break;
		pthread_mutex_unlock(&samp.mu);
		if (last && blob && r.tab && r.lc && r.bc && !r.failed && nvlp_is_active() &&
		    py.is_initialized()) {
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
			uint64_t t = nvlp_now();
			uintptr_t mts = (uintptr_t)__atomic_load_n(&samp.main_ts, __ATOMIC_ACQUIRE);
			if (mts)
				sample_one(&r, blob, main_tid, mts, &main_last, t);
			for (unsigned i = 0; i < SAMP_SLOTS; i++) {
				uint64_t tid = __atomic_load_n(&slots[i].tid, __ATOMIC_ACQUIRE);
				if (!tid && !last[i].tid)
					continue;
				uintptr_t ts_i = (uintptr_t)__atomic_load_n(&slots[i].ts, __ATOMIC_ACQUIRE);
				if (tid == main_tid)
					continue; /* sampled above, inside a call or not */
				if (tid != last[i].tid && last[i].id) /* the slot's thread ended */
					emit_ref(NVLP_K_NONE, last[i].tid, t, 0, 0);
				if (tid)
					sample_one(&r, blob, tid, ts_i, &last[i], t);
				else
					last[i] = (struct samp_last){0};
			}
			samp.rounds++;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
			samp.cpu_ns += (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000000000ll +
			                          (c1.tv_nsec - c0.tv_nsec));
		}
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
static void samp_kick(struct nvlp_tls *tls)
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
		nvlp_warn("Python sampler: %llu rounds, %llu chain reads, %llu samples written, %llu "
		          "discarded (moving), %.0f ns CPU per round",
		          (unsigned long long)samp.rounds, (unsigned long long)samp.reads,
		          (unsigned long long)samp.written, (unsigned long long)samp.discarded,
		          (double)samp.cpu_ns / (double)samp.rounds);
}

/* The module: at the end, the sampler stops (after recording is off, before the final drain). */
static const struct nvlp_module pystacks_module = {.name = "pystacks", .stop = py_sampler_stop};
NVLP_MODULE(PYSTACKS, pystacks_module)

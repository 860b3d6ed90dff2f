/* pyapi.c: the interpreter asked through its public C API with the GIL held (resolved from the
 * process), code objects' names cached, and chains deduplicated into PYSTACK/PYREF records. */
#include <dlfcn.h>   /* dlsym(RTLD_DEFAULT) */
#include <pthread.h> /* the code-name cache's mutex */
#include <stdatomic.h>
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc */
#include <string.h> /* memcpy, strlen */

#include "pystacks_int.h"
#include "../trace/nvlp_trace.h" /* nvlp_hash64 */

/*
 * The interpreter is asked only through its public C API, resolved from the process (a program
 * without Python resolves nothing and pays one load per call after the first), and only when the
 * calling thread holds the GIL: PyGILState_Check() says so, and the thread's current state must
 * be set (PyGILState_Check answers 1 whenever its checks are off, e.g. with subinterpreters). We
 * never take the GIL and never block. A pending exception is saved and restored around our calls,
 * so the program never sees one of ours. A thread that released the GIL (torch, CuPy and
 * ctypes.CDLL release it around their CUDA and NCCL calls) is read through the layout walk
 * (pywalk.c), or not at all.
 *
 * Frame names: a code object's co_filename and co_name are attributes (no stable accessor exists
 * in 3.11/3.12), read once per code object and cached by its address; the cache keeps a reference
 * so that the address is not reused by another code object while cached.
 */
struct nvlp_py_api py;

static void *sym(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

int nvlp_py_lookup(void)
{
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
	int all = py.is_initialized && py.gil_check && py.tstate && py.get_frame && py.frame_back &&
	          py.frame_code && py.frame_line && py.getattr && py.utf8 && py.incref &&
	          py.decref && py.err_fetch && py.err_restore;
	return all ? 1 : -1;
}

int nvlp_py_holds_gil(void)
{
	return py.is_initialized() && py.gil_check() == 1 && py.tstate() != NULL;
}

/* ---- code object -> "file" and "name" -----------------------------------------------------------
 */

#define CODE_SLOTS 4096 /* power of two */
struct code_name {
	PyObject *code; /* a reference we hold */
	char *text;     /* "file\0name\0", malloc'ed */
};
static struct {
	struct code_name at[CODE_SLOTS];
	pthread_mutex_t mu;
} code_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

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
	pthread_mutex_lock(&code_cache.mu);
	for (unsigned n = 0; n < 16; n++) {
		struct code_name *c = &code_cache.at[(h + n) & (CODE_SLOTS - 1)];
		if (c->code == code) {
			snprintf(file, fcap, "%s", c->text);
			snprintf(name, ncap, "%s", c->text + strlen(c->text) + 1);
			pthread_mutex_unlock(&code_cache.mu);
			return;
		}
		if (!c->code)
			break;
	}
	pthread_mutex_unlock(&code_cache.mu);
	size_t fl = attr_text(code, "co_filename", file, fcap);
	size_t nl = attr_text(code, "co_name", name, ncap);
	char *text = malloc(fl + nl + 2);
	if (!text)
		return;
	memcpy(text, file, fl + 1);
	memcpy(text + fl + 1, name, nl + 1);
	pthread_mutex_lock(&code_cache.mu);
	for (unsigned n = 0; n < 16; n++) {
		struct code_name *c = &code_cache.at[(h + n) & (CODE_SLOTS - 1)];
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
	pthread_mutex_unlock(&code_cache.mu);
	free(text); /* not cached (neighbourhood full): recomputed next time */
}

/* ---- chains, deduplicated by the hash of their text ---------------------------------------------
 */

#define PYSTACK_SLOTS 16384
#define PROBES 64
static struct {
	_Atomic uint64_t ids[PYSTACK_SLOTS];
	unsigned epoch; /* the fork epoch the set belongs to */
} pystacks_seen;

static int seen_before(uint64_t id)
{
	/* A fork child writes its own file: everything is new to it. */
	unsigned ep = __atomic_load_n(&nvlp_tls_epoch, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&pystacks_seen.epoch, __ATOMIC_ACQUIRE) != ep) {
		for (unsigned i = 0; i < PYSTACK_SLOTS; i++)
			atomic_store_explicit(&pystacks_seen.ids[i], 0, memory_order_relaxed);
		__atomic_store_n(&pystacks_seen.epoch, ep, __ATOMIC_RELEASE);
	}
	unsigned i = (unsigned)(id * 0x9e3779b97f4a7c15ull >> 40) & (PYSTACK_SLOTS - 1);
	for (int n = 0; n < PROBES; n++, i = (i + 1) & (PYSTACK_SLOTS - 1)) {
		uint64_t cur = atomic_load_explicit(&pystacks_seen.ids[i], memory_order_acquire);
		if (cur == id)
			return 1;
		if (!cur) {
			if (atomic_compare_exchange_strong(&pystacks_seen.ids[i], &cur, id))
				return 0;
			if (cur == id)
				return 1;
		}
	}
	return 0; /* full: writing it again is harmless */
}

size_t nvlp_py_api_blob(PyObject *frame, char *blob)
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
			int n = snprintf(blob + len, NVLP_MAX_BLOB - len, "%s:%d:%s\n", file, line,
			                 name);
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

uint64_t nvlp_py_chain_hash(const char *blob, size_t len)
{
	uint64_t id = nvlp_hash64(blob, len, 0x7079737461636bull);
	return id ? id : 1;
}

uint64_t nvlp_py_chain_id(const char *blob, size_t len)
{
	if (!len)
		return 0;
	uint64_t id = nvlp_py_chain_hash(blob, len);
	if (!seen_before(id)) {
		struct nvlp_rec_pystack r = {.id = id};
		nvlp_emit(NVLP_K_PYSTACK, &r, blob, len);
	}
	return id;
}

/* The thread's scratch buffer for chains: up to 48 frames of up to ~700 bytes, off the job's
 * stack (made once per thread, at its first chain). */
char *nvlp_py_scratch(void)
{
	struct nvlp_tls *t = nvlp_tls();
	if (!t->py_scratch)
		t->py_scratch = calloc(1, SCRATCH_BYTES); /* the chain, then the line cache */
	return t->py_scratch;
}

void nvlp_py_emit_ref(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id, uint64_t id)
{
	struct nvlp_rec_pyref r = {
	    .kind = kind, .tid = tid, .t = t, .call_id = call_id, .pystack = id};
	nvlp_emit(NVLP_K_PYREF, &r, NULL, 0);
}

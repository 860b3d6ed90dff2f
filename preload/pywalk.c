/* pywalk.c: the layout walk: a thread's own interpreter frames read from memory without the GIL
 * (plain loads once the layout is proven, fault-safe reads in the self-check and the sampler),
 * strings and line tables decoded, a chain's text and keys. */
#include <errno.h>   /* EFAULT */
#include <fcntl.h>   /* O_CLOEXEC */
#include <string.h>  /* memcpy, memset */
#include <sys/uio.h> /* process_vm_readv: the self-check's and the sampler's reads */
#include <unistd.h>  /* pipe2, read, write */

#include "pystacks_int.h"

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

#define MAX_STEPS 256 /* frames looked at per walk, complete or not */

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
	if (state & 0x40) {                                       /* compact ASCII: one byte each */
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

/* The chain of the thread whose state is ts, in nvlp_py_api_blob's format. @return its length
 * (0: no frames), -1 a read failed or an object was not what the layout says */
long nvlp_py_layout_blob(struct rdr *r, uintptr_t ts, char *blob)
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
		/* "%s:%d:%s\n" as nvlp_py_api_blob's snprintf writes it (and stops where it would) */
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
uintptr_t nvlp_py_own_tstate(void)
{
	if (__atomic_load_n(&lay_state, __ATOMIC_ACQUIRE) <= 0 || !py.is_initialized())
		return 0;
	return (uintptr_t)py.this_tstate();
}

/* What a chain's text is made of, frame by frame: code object, instruction, file and function
 * name objects, line table and first line. Equal keys, equal texts: a code object that replaced a
 * freed one at the same address would also need its strings and table at the old ones'
 * addresses and the same first line to be mistaken for it. shape (when asked): the same without
 * the innermost frame's instruction and with the frames' addresses, which a running thread keeps
 * while it stays in its innermost function (the sampler's consistency check). @return the key, 0
 * a read failed */
uint64_t nvlp_py_chain_keys(struct rdr *r, uintptr_t ts, uint64_t *shape)
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

/* The signature of the innermost SIG_FRAMES complete frames of the calling thread (see below). */
uint64_t nvlp_py_own_sig(uintptr_t ts)
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

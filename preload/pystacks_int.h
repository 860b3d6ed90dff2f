/* pystacks_int.h: the Python chains' internals, shared by preload/pystacks.c (entry points, the
 * layout self-check, tentative chains), pyapi.c (the C API, chains as PYSTACK records), pylayout.c
 * (CPython's frame layouts), pywalk.c (the layout walk) and pysampler.c (the sampler thread). */
#ifndef NVLP_PYSTACKS_INT_H
#define NVLP_PYSTACKS_INT_H

#include <stddef.h>    /* size_t */
#include <stdint.h>    /* uint64_t, uintptr_t */
#include <sys/types.h> /* pid_t */

#include "nvlp_pystacks.h"
#include "nvlp_rt.h"

/* ---- pyapi.c: the interpreter's C API, resolved from the process ---- */
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

struct nvlp_py_api {
	int_fn is_initialized, gil_check;
	ptr_fn tstate;    /* _PyThreadState_UncheckedGet / PyThreadState_GetUnchecked */
	ptr_fn get_frame; /* PyEval_GetFrame: borrowed */
	obj_obj_fn frame_back, frame_code;  /* new references */
	int_obj_fn frame_line, frame_lasti; /* lasti: 3.11+, else NULL */
	getattr_fn getattr;
	utf8_fn utf8;
	ref_fn incref, decref;
	fetch_fn err_fetch;
	restore_fn err_restore;
	/* the layout walk's: no GIL needed for any of them */
	ptr_fn this_tstate;                          /* PyGILState_GetThisThreadState */
	int (*add_pending)(int (*)(void *), void *); /* Py_AddPendingCall */
	const void *code_type, *unicode_type, *bytes_type;
	unsigned long version; /* Py_Version, 0 before 3.11 */
};
extern struct nvlp_py_api nvlp_py_api __attribute__((visibility("hidden")));
#define py nvlp_py_api
/*! Look the C API up in the process (under pystacks.c's resolve_mu, once). @return 1 when all of
 * it is there, -1 not a Python process. */
int nvlp_py_lookup(void);
/*! The thread holds the GIL of an initialised interpreter. */
int nvlp_py_holds_gil(void);
/*! The thread's chain through the C API (GIL held) as "file:line:function\n" lines into blob.
 * @return its length, 0 when there are no frames */
size_t nvlp_py_api_blob(PyObject *frame, char *blob);
/*! A chain's id: the hash of its text, never 0. */
uint64_t nvlp_py_chain_hash(const char *blob, size_t len);
/*! The PYSTACK of a chain (written the first time it is seen). @return its id, 0 for none */
uint64_t nvlp_py_chain_id(const char *blob, size_t len);
/*! The thread's scratch buffer (SCRATCH_BYTES, made at its first chain), NULL when out of memory.
 */
char *nvlp_py_scratch(void);
/*! A PYREF naming chain id for the record (kind, tid, t, call_id). */
void nvlp_py_emit_ref(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id, uint64_t id);

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

/* ---- pylayout.c: CPython's frame layouts, the one in use ---- */
struct pylayout {
	unsigned ver;                 /* 0x030b00 ... (major.minor of Py_Version) */
	unsigned ts_cframe, cf_frame; /* tstate->cframe->current_frame (ts_cframe 0: direct) */
	unsigned ts_frame;            /* tstate->current_frame (3.13) */
	unsigned fr_code, fr_previous, fr_instr, fr_owner;
	unsigned co_firstlineno, co_filename, co_name, co_linetable, co_firsttraceable, co_code;
	/* where a compact str's characters start: sizeof(PyASCIIObject), of PyCompactUnicodeObject
	 */
	unsigned u_ascii_data, u_compact_data;
	int owner_cstack; /* FRAME_OWNED_BY_CSTACK, -1 where there is none */
};
/* Common to all three: PyObject.ob_type at 8, PyVarObject.ob_size at 16, PyBytesObject.ob_sval at
 * 32, PyASCIIObject.length at 16 and state at 32 (kind bits 2-4, compact bit 5, ascii bit 6),
 * FRAME_OWNED_BY_GENERATOR = 1, sizeof(_Py_CODEUNIT) = 2. */
#define OB_TYPE 8
#define OB_SIZE 16
#define BYTES_DATA 32
#define U_LENGTH 16
#define U_STATE 32
#define OWNER_GENERATOR 1
#define MAX_LINETABLE (1 << 20) /* bytes of a code object's location table */

extern struct pylayout nvlp_py_lay __attribute__((visibility("hidden")));
/* 0 not checked yet, 1 checked and enabled, -1 none or disabled (read inline by the hooks) */
extern int nvlp_py_lay_state __attribute__((visibility("hidden")));
extern int nvlp_py_lay_log __attribute__((visibility("hidden")));
extern int nvlp_py_lay_test_pipe __attribute__((visibility("hidden")));
extern int nvlp_py_lay_test_refuse __attribute__((visibility("hidden")));
#define lay nvlp_py_lay
#define lay_state nvlp_py_lay_state
#define lay_log nvlp_py_lay_log
#define lay_test_pipe nvlp_py_lay_test_pipe
#define lay_test_refuse nvlp_py_lay_test_refuse
/*! Under resolve_mu, once: the layout of the running interpreter, and the walk's switches. */
void nvlp_py_layout_choose(void);

/* ---- pywalk.c: the layout walk ---- */
/* Reads: plain loads once the layout is proven; in the self-check, reads that fail instead of
 * faulting (process_vm_readv on ourselves, or a pipe where that is refused). */
struct rdr {
	int checked;
	pid_t pid;
	int pipe[2]; /* -1: not made */
	int failed;
	uint8_t *tab;         /* checked: room for a location table (MAX_LINETABLE bytes) */
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

/*! The chain of the thread whose state is ts, in nvlp_py_api_blob's format. @return its length (0:
 * no frames), -1 a read failed or an object was not what the layout says */
long nvlp_py_layout_blob(struct rdr *r, uintptr_t ts, char *blob);
/*! What a chain's text is made of (see pywalk.c), and its shape when asked. @return the key, 0 a
 * read failed */
uint64_t nvlp_py_chain_keys(struct rdr *r, uintptr_t ts, uint64_t *shape);
/*! The signature of the innermost SIG_FRAMES complete frames of the calling thread. */
uint64_t nvlp_py_own_sig(uintptr_t ts);
/*! The calling thread's state when the walk may read it: enabled, interpreter up. */
uintptr_t nvlp_py_own_tstate(void);

/* ---- pysampler.c: the sampler thread ---- */
/*! Start the sampler if it may run and does not (cheap when it runs: two loads). */
void nvlp_py_samp_kick(struct nvlp_tls *tls);
/*! The calling thread's slot, claimed (NULL: none free, or no key). */
struct nvlp_py_slot *nvlp_py_slot_claim(struct nvlp_tls *tls);

#endif /* NVLP_PYSTACKS_INT_H */

/* pystacks.c: the calling thread's Python file:line chain (C API with the GIL, its own frames'
 * memory without), as PYSTACK/PYREF records. */
/*
 * The hooks' entry points, the layout walk's self-check and the chains kept until its verdict.
 * The C API and the chains' records: pyapi.c; CPython's frame layouts: pylayout.c; the walk:
 * pywalk.c; the sampler thread: pysampler.c (shared declarations: pystacks_int.h).
 */
#include <errno.h>   /* errno */
#include <fcntl.h>   /* O_CLOEXEC */
#include <pthread.h> /* resolve_mu, layout_check.mu */
#include <stdlib.h>  /* malloc */
#include <string.h>  /* memcpy, memcmp */
#include <unistd.h>  /* getpid, pipe2 */

#include "nvlp_module.h" /* nvlp_record_gate_open */
#include "nvlp_pystacks.h"
#include "nvlp_rt.h"
#include "pystacks_int.h"

/* 0 not looked up yet, 1 Python is there, -1 not a Python process (read inline by the hooks). */
int nvlp_py_state; /* atomic (__atomic builtins, as the header reads it) */
#define py_state nvlp_py_state
static pthread_mutex_t resolve_mu = PTHREAD_MUTEX_INITIALIZER;

static int resolve(void)
{
	int s = __atomic_load_n(&py_state, __ATOMIC_ACQUIRE);
	if (NVLP_LIKELY(s))
		return s;
	pthread_mutex_lock(&resolve_mu);
	if (!(s = __atomic_load_n(&py_state, __ATOMIC_RELAXED))) {
		s = nvlp_py_lookup();
		if (s > 0)
			nvlp_py_layout_choose();
		__atomic_store_n(&py_state, s, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&resolve_mu);
	return s;
}

/* Walk the frames of the thread (GIL held). @return the PYSTACK id, 0 when there are none. */
static uint64_t walk(PyObject *frame)
{
	char *blob = nvlp_py_scratch();
	return blob ? nvlp_py_chain_id(blob, nvlp_py_api_blob(frame, blob)) : 0;
}

/* The layout's self-check. */
static struct {
	int pending; /* the self-check was scheduled through Py_AddPendingCall */
	int tries;   /* inconclusive self-checks so far */
	pthread_mutex_t mu;
} layout_check = {.mu = PTHREAD_MUTEX_INITIALIZER};

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
struct tent {
	int state; /* 0 free or being filled, 2 kept, 3 settled */
	unsigned epoch, kind;
	uint64_t tid, t, call_id;
	char *text;
	size_t len;
};
static struct {
	struct tent at[TENT_SLOTS];
	unsigned next; /* slots claimed (never reused): the tentative walks so far */
} tent_chains;

/* @return 1 when it settled a kept chain */
static int tent_settle(struct tent *e)
{
	int kept = 2;
	if (!__atomic_compare_exchange_n(&e->state, &kept, 3, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return 0;
	/* a fork child's kept calls are its parent's: not in its file */
	if (__atomic_load_n(&lay_state, __ATOMIC_SEQ_CST) > 0 &&
	    e->epoch == __atomic_load_n(&nvlp_tls_epoch, __ATOMIC_ACQUIRE)) {
		nvlp_py_emit_ref(e->kind, e->tid, e->t, e->call_id,
		                 nvlp_py_chain_id(e->text, e->len));
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
	    __atomic_load_n(&tent_chains.next, __ATOMIC_RELAXED) >= TENT_SLOTS ||
	    !py.is_initialized())
		return 0;
	uintptr_t ts = (uintptr_t)py.this_tstate(); /* NULL: a thread without Python */
	char *blob = ts ? nvlp_py_scratch() : NULL;
	if (!blob)
		return 0;
	/* sequentially consistent, as the check's load of it: a slot it does not see is one whose
	 * writer sees the verdict */
	unsigned i = __atomic_fetch_add(&tent_chains.next, 1, __ATOMIC_SEQ_CST);
	if (i >= TENT_SLOTS)
		return 0;
	struct tent *e = &tent_chains.at[i];
	struct rdr r = {
	    .checked = 1, .pid = getpid(), .pipe = {-1, -1}, .tab = malloc(MAX_LINETABLE)};
	if (lay_test_pipe && pipe2(r.pipe, O_CLOEXEC))
		r.failed = 1;
	long n = r.failed ? -1 : nvlp_py_layout_blob(&r, ts, blob);
	free(r.tab);
	if (r.pipe[0] >= 0)
		close(r.pipe[0]), close(r.pipe[1]);
	uint64_t id = n > 0 ? nvlp_py_chain_hash(blob, (size_t)n) : 0;
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
	if (__atomic_load_n(&lay_state, __ATOMIC_ACQUIRE) != 0 ||
	    pthread_mutex_trylock(&layout_check.mu))
		return;
	char *a = NULL, *b = NULL;
	PyObject *frame = py.get_frame();
	uintptr_t ts = (uintptr_t)py.tstate();
	if (!frame || !ts || lay_state != 0 || !(a = malloc(NVLP_MAX_BLOB)) ||
	    !(b = malloc(NVLP_MAX_BLOB)))
		goto out; /* no frames here: another capture checks */
	size_t na = nvlp_py_api_blob(frame, a);
	struct rdr r = {
	    .checked = 1, .pid = getpid(), .pipe = {-1, -1}, .tab = malloc(MAX_LINETABLE)};
	if (lay_test_pipe && pipe2(r.pipe, O_CLOEXEC))
		r.failed = 1;
	long nb = nvlp_py_layout_blob(&r, ts, b);
	free(r.tab);
	if (r.pipe[0] >= 0)
		close(r.pipe[0]), close(r.pipe[1]);
	int ok = na && nb == (long)na && !memcmp(a, b, na) && !lay_test_refuse;
	if (!na || (r.failed && __atomic_add_fetch(&layout_check.tries, 1, __ATOMIC_RELAXED) < 3))
		goto out; /* inconclusive: try again at a later capture */
	__atomic_store_n(&lay_state, ok ? 1 : -1, __ATOMIC_SEQ_CST);
	nvlp_py_samp_kick(nvlp_tls()); /* proven: the sampler may start */
	unsigned tried = __atomic_load_n(&tent_chains.next, __ATOMIC_SEQ_CST);
	tried = tried < TENT_SLOTS ? tried : TENT_SLOTS;
	unsigned kept = 0;
	for (unsigned i = 0; i < tried; i++)
		kept += (unsigned)tent_settle(&tent_chains.at[i]);
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
	pthread_mutex_unlock(&layout_check.mu);
}

static int pending_check(void *arg)
{
	(void)arg;
	self_check();
	__atomic_store_n(&layout_check.pending, 0,
	                 __ATOMIC_RELEASE); /* inconclusive: may be asked again */
	return 0;
}

/* A thread without the GIL found the walk not checked yet: the main thread checks it at its next
 * bytecode boundary (asked once at a time, at most a few times). */
static void ask_check(void)
{
	if (__atomic_load_n(&lay_state, __ATOMIC_RELAXED) == 0 &&
	    __atomic_load_n(&layout_check.tries, __ATOMIC_RELAXED) < 3 &&
	    !__atomic_exchange_n(&layout_check.pending, 1, __ATOMIC_ACQ_REL) &&
	    py.is_initialized()) {
		__atomic_add_fetch(&layout_check.tries, 1, __ATOMIC_RELAXED);
		if (py.add_pending(pending_check, NULL) != 0)
			__atomic_store_n(&layout_check.pending, 0, __ATOMIC_RELEASE);
	}
}

static uint64_t chain_key(struct rdr *r, uintptr_t ts)
{
	return nvlp_py_chain_keys(r, ts, NULL);
}

static uint64_t walk_own(uintptr_t ts)
{
	char *blob = nvlp_py_scratch();
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
	long n = nvlp_py_layout_blob(&r, ts, blob);
	uint64_t id = n > 0 ? nvlp_py_chain_id(blob, (size_t)n) : 0;
	if (key && id) {
		c->key[c->next] = key;
		c->id[c->next] = id;
		c->next = (c->next + 1) % IDC_SLOTS;
	}
	return id;
}

void nvlp_py_attach(unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id)
{
	if (!nvlp_cfg()->stacks || resolve() < 0)
		return;
	uint64_t id = 0;
	nvlp_py_samp_kick(nvlp_tls());
	if (nvlp_py_holds_gil()) {
		self_check();
		PyObject *frame = py.get_frame();
		id = frame ? walk(frame) : 0;
	} else {
		uintptr_t ts = nvlp_py_own_tstate();
		if (ts) {
			id = walk_own(ts);
		} else {
			walk_tentative(kind, tid, t, call_id, 0); /* its PYREF waits for the check */
			ask_check();
		}
	}
	if (id)
		nvlp_py_emit_ref(kind, tid, t, call_id, id);
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
	nvlp_py_samp_kick(tls);
	if (nvlp_py_holds_gil()) {
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
	} else if ((ts = nvlp_py_own_tstate())) {
		/* without the GIL: the same signature rule over the thread's own frames (its
		 * values differ from the API's: a change of method re-walks once) */
		uint64_t sig = nvlp_py_own_sig(ts) ^ 0x6c61796f7574ull;
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
		nvlp_py_emit_ref(NVLP_K_NCCL, tls->tid, t, call_id, id);
	}
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
	if (!ts || (!s && !(s = nvlp_py_slot_claim(tls))))
		return;
	__atomic_store_n(&s->ts, ts, __ATOMIC_RELEASE);
	if (NVLP_UNLIKELY(!lay_now))
		ask_check();
	else
		nvlp_py_samp_kick(tls);
}

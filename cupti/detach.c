/* detach.c: NVLPROF_CUPTI=startup[:MS]: CUPTI detached (cuptiFinalize) once start-up is recorded;
 * NVLPROF_CUPTI=lazy: CUPTI not attached until something needs it. */
/*
 * Why. CUPTI attached at cuInit costs a launch-bound thread even with nothing enabled but the
 * topology kinds: run 8 (MEASUREMENTS.md) put ~0.9% of the launching thread's CPU in libcupti with
 * the driver callbacks and link sampling off. CUPTI documents detaching as the way to shed its
 * overhead, and PyTorch's Kineto tears CUPTI down after each profiling session for that reason.
 *
 * What stays: the DEVICE/NVLINK topology records (flushed before the detach), NCCL's calls and GPU
 * times (the profiler plugin), the runtime hooks (copies, managed memory and peer access through
 * libcudart), link counters from NVML (startup implies NVLPROF_LINKS=nvml: PM sampling is CUPTI's).
 * What goes, from the detach on: driver-level capture (copies and managed memory of CuPy, JAX,
 * Triton: static or no runtime), CUPTI stream ids. Managed memory allocated through the runtime
 * after the detach attaches CUPTI again (cupti.c: buffers, clock, UM counters, the flush thread),
 * for good: its counters are how page thrashing is seen.
 *
 * When: the flush thread's first tick MS ms (default 2000) after CUPTI attached, unless something
 * needs CUPTI: kernel tracing (NVLPROF_KERNELS not off), unified-memory counters on (managed memory
 * allocated, NVLPROF_UM=1), another client (torch.profiler/Kineto) registered with CUPTI through us
 * (it may start a session again, and its callbacks are registered with us, not with CUPTI), a
 * process without a CUDA runtime library (CuPy, JAX: driver callbacks are their only way in).
 * Such a blocker is noted once and looked at again at every tick. A client that comes after the
 * detach passes through to CUPTI (share.c, subscribe.c: nvlprof no longer collects), which attaches
 * again for it.
 *
 * How: the flush thread sets the exit hook (subscribe.c: every runtime and driver API call then
 * reaches our dispatcher), forces a flush (the topology), turns our kinds off, flushes what was
 * still in flight, then asks. The exit of the next
 * API call, CUPTI's documented place for it, stops collecting (activity.c: ASIDE, then waits for
 * the threads inside a CUPTI call) and calls cuptiFinalize. The flush thread writes the note and
 * ends. An exit before that cancels the request (nvlp_detach_stop) and stops as usual.
 *
 * Not on CUPTI 13.0 (API versions 130000-130099) unless NVLPROF_CUPTI_FINALIZE=1: there
 * cuptiFinalize, called as above, left a heap that glibc found corrupt at a later malloc
 * ("corrupted double-linked list", "malloc(): unsorted double linked list corrupted": SIGABRT)
 * in 20 of 1,396 short PyTorch processes on H100 and H200, and in none of 352 that did not call
 * it (tests/gpu/exit_hunt.sh, runs 11-13: docs/MEASUREMENTS.md). Neither the buffers (CUPTI held
 * none of ours when it finalized) nor the call it finalized at (a runtime call's inner driver
 * call, or a top-level runtime call as Kineto waits for) changed that. CUPTI then stays attached,
 * collecting what NVLPROF_CUPTI=startup keeps, and a NOTE says why. Other versions are not
 * measured and detach as described.
 *
 * NVLPROF_CUPTI=lazy: what startup leaves after its detach, from the start, without the
 * cuptiFinalize that CUPTI 13.0 gets wrong (run 14: a program of CUPTI calls alone, without
 * nvlprof, detaching the same way, aborted in malloc as often). At cuInit nothing of CUPTI is
 * called (libcupti is loaded and its version read, nothing else): the phase starts at DT_DONE, so
 * a profiler reaches CUPTI itself, as after a detach, and the topology comes from the driver and
 * NVML instead of CUPTI's DEVICE/NVLINK records (topo.c, from the link sampler's thread). Managed
 * memory allocated after CUDA came up is noted as unmeasured (NVLPROF_CUPTI=1 measures it): CUPTI
 * attached mid-run, then a later cuInit of another library hung in the driver for good (run 16:
 * torch's runtime coming up inside the allocation; run 17, with that runtime brought up first:
 * NVRTC's cuInit as CuPy compiled its first kernel, 2 of 10 such jobs). NVLPROF_UM=attach still
 * asks for that attach: CUPTI then attaches, for good, at the entry of the first
 * cudaMallocManaged, before the allocation: CUPTI counts no migration of memory allocated before
 * it attached, even with its counters on from then on (run 14: attached at the allocation's exit,
 * no record where CUPTI attached at cuInit measured the job's thrashing; run 15,
 * tests/gpu/um_attach.c: attached before the allocation, after the context, every migration
 * counted; after it, none). Either way, where CUDA comes up inside the first managed allocation,
 * CUPTI attaches at its cuInit, as needed from the start (a note says by what). Where the attach
 * did not happen (none asked, CUPTI refused, CUDA came up without our injection), a NOTE says the
 * migrations are not measured. CUPTI attaches at cuInit as with 1, with a note saying why, where a
 * blocker (below) needs it from the start.
 */
#include <pthread.h> /* pthread_mutex_t */
#include <stdlib.h>  /* getenv */
#include <string.h>  /* strcmp */

#include "cupti_int.h"
#include "nvlp_rt.h"
#include "resolve.h" /* nvlp_cudart_major */

#define QUIESCE_NS 100000000ull /* wait this long in the callback for CUPTI calls to end */
#define RETRY_NS 1000000000ull  /* then try again at a call this much later, */
#define TRIES 5                 /* this many times in all before giving up (a NOTE says so) */

enum { DT_OFF, DT_WAIT, DT_REQUESTED, DT_DONE, DT_AGAIN /* attached again (managed memory) */ };
static struct {
	pthread_mutex_t mu;
	int phase; /* DT_*, read without mu by the callback's first test */
	uint64_t t_attach, due, t_done;
	uint64_t next_try; /* a callback tries no earlier (a thread stayed inside a CUPTI call) */
	int tries;
	int rc; /* cuptiFinalize's CUptiResult */
	int noted_block, noted_done;
	const char *site; /* the API call at whose exit it detached (CUPTI's static string) */
	uint32_t unsafe_ver; /* CUPTI 13.0's version without NVLPROF_CUPTI_FINALIZE=1 (above), 0 */
	int lazy;            /* NVLPROF_CUPTI=lazy left CUPTI out at start (DT_DONE from the start) */
	int noted_um;        /* lazy: managed memory's NOTE written (once) */
} det = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* CUPTI 13.0 without NVLPROF_CUPTI_FINALIZE=1 (above): its API version, else 0. */
static uint32_t finalize_unsafe(void)
{
	const char *e = getenv("NVLPROF_CUPTI_FINALIZE");
	uint32_t ver = 0;
	if ((e && !strcmp(e, "1")) || !nvlp_cu.cuptiGetVersion ||
	    nvlp_cu.cuptiGetVersion(&ver) != CUPTI_SUCCESS)
		return 0;
	return ver >= 130000 && ver < 130100 ? ver : 0;
}

static int phase(void)
{
	return __atomic_load_n(&det.phase, __ATOMIC_ACQUIRE);
}

static void set_phase(int p)
{
	__atomic_store_n(&det.phase, p, __ATOMIC_RELEASE);
}

void nvlp_detach_arm(uint64_t t_attach)
{
	if (nvlp_cfg()->cupti != 2)
		return;
	uint32_t unsafe = finalize_unsafe(); /* once, not at every tick a blocker holds it */
	pthread_mutex_lock(&det.mu);
	det.unsafe_ver = unsafe;
	det.t_attach = t_attach;
	det.due = t_attach + (uint64_t)nvlp_cfg()->cupti_detach_ms * 1000000ull;
	set_phase(DT_WAIT);
	pthread_mutex_unlock(&det.mu);
}

/* The exit of a runtime/driver API call fn (any thread, inside CUPTI's callback). */
static void detach_cb(const char *fn)
{
	if (phase() != DT_REQUESTED || pthread_mutex_trylock(&det.mu) != 0)
		return;
	uint64_t now = nvlp_now();
	if (phase() == DT_REQUESTED && now >= det.next_try) {
		if (nvlp_act_quiesce(QUIESCE_NS) == 0) {
			det.site = fn;
			det.rc = nvlp_sub_finalize();
			det.t_done = nvlp_now();
			set_phase(DT_DONE);
		} else if (++det.tries >= TRIES) {
			set_phase(DT_OFF); /* the flush thread notes it and cancels the hook */
		} else {
			det.next_try = nvlp_now() + RETRY_NS;
		}
	}
	pthread_mutex_unlock(&det.mu);
}

/* What still needs CUPTI attached, or NULL; kernels: kernel tracing on. */
static const char *blocker(int kernels, int um)
{
	/* CuPy (its runtime linked in statically), JAX, Triton: their copies and managed memory
	 * reach nvlprof through the driver callbacks alone */
	if (!nvlp_cudart_major()) /* the runtime the hooks bind to (resolve.c) */
		return "no CUDA runtime library (CuPy, JAX): copies seen only by driver callbacks";
	if (kernels)
		return "kernel tracing (NVLPROF_KERNELS)";
	if (um)
		return "unified-memory counters on";
	if (nvlp_act_client() || nvlp_sub_client())
		return "torch.profiler (another CUPTI client) registered with it";
	return NULL;
}

const char *nvlp_detach_lazy_blocker(void)
{
	/* at start: the parsed NVLPROF_KERNELS (windows.c reads it later), NVLPROF_UM=1 */
	return blocker(nvlp_cfg()->km.mode != NVLP_KM_OFF, nvlp_cfg()->um == NVLP_UM_ON);
}

void nvlp_detach_lazy(uint64_t t_start)
{
	pthread_mutex_lock(&det.mu);
	det.lazy = 1;
	det.noted_done = 1; /* nothing was detached: no CUPTI_DETACHED note */
	det.t_attach = det.t_done = t_start;
	set_phase(DT_DONE);
	pthread_mutex_unlock(&det.mu);
}

int nvlp_detach_is_lazy(void)
{
	return __atomic_load_n(&det.lazy, __ATOMIC_RELAXED);
}

/* Once, from the flush thread or, when the process ends first, from the stop. */
static void note_done(void)
{
	if (__atomic_exchange_n(&det.noted_done, 1, __ATOMIC_ACQ_REL))
		return;
	double after_s = (double)(det.t_done - det.t_attach) / 1e9;
	if (det.rc != CUPTI_SUCCESS) {
		nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, (uint64_t)det.rc,
		          "cuptiFinalize failed %.1f s after CUPTI attached (NVLPROF_CUPTI=startup): "
		          "%s; nothing more collected through CUPTI",
		          after_s, nvlp_cupti_err((CUptiResult)det.rc));
		return;
	}
	nvlp_note(NVLP_NOTE_CUPTI_DETACHED, -1, (uint64_t)(after_s * 1000),
	          "CUPTI detached %.1f s after attaching (NVLPROF_CUPTI=startup:%ld): topology kept; "
	          "no driver-level capture from then on; links from NVML (at the exit of %.64s)%s",
	          after_s, nvlp_cfg()->cupti_detach_ms, det.site ? det.site : "?",
	          nvlp_sub_nofinalize() ? " (NVLPROF_DETACH_TEST=nofinalize: cuptiFinalize not "
	                                     "called)"
	                                   : "");
}

/* Hook set, kinds off, last records flushed, then the request. @return as nvlp_detach_tick. */
static int request(void)
{
	int r = nvlp_sub_exit_hook(detach_cb);
	if (r) {
		set_phase(DT_OFF);
		nvlp_note(NVLP_NOTE_CONFIG, -1, (uint64_t)r,
		          "CUPTI not detached (NVLPROF_CUPTI=startup): no callback to detach from "
		          "(%s); it stays attached",
		          nvlp_cupti_err((CUptiResult)r));
		return 0;
	}
	/* what CUPTI holds (topology), then the kinds off and what was still in flight */
	nvlp_act_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	nvlp_act_disable_ours();
	nvlp_act_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	nvlp_cupti_clock_pair();
	pthread_mutex_lock(&det.mu);
	if (phase() == DT_WAIT)
		set_phase(DT_REQUESTED);
	pthread_mutex_unlock(&det.mu);
	return 1;
}

int nvlp_detach_tick(uint64_t now, int um)
{
	int ph = phase();
	if (ph == DT_REQUESTED)
		return 1;
	if (ph == DT_OFF && det.tries >= TRIES && det.tries++ == TRIES) {
		/* given up in a callback: CUPTI stays attached, its kinds off */
		nvlp_sub_exit_hook_cancel();
		nvlp_note(NVLP_NOTE_CONFIG, -1, TRIES,
		          "CUPTI not detached (NVLPROF_CUPTI=startup): another thread stayed inside a "
		          "CUPTI call %d times; it stays attached, collecting nothing more",
		          TRIES);
		return 0;
	}
	if (ph == DT_DONE) {
		note_done();
		return 2;
	}
	if (ph != DT_WAIT || now < det.due)
		return 0;
	if (det.unsafe_ver) {
		set_phase(DT_OFF);
		nvlp_note(NVLP_NOTE_CONFIG, -1, det.unsafe_ver,
		          NVLP_NOTE_FINALIZE_UNSAFE " CUPTI %u (13.0) corrupted the heap of 20 of 1,396 "
		          "short PyTorch processes on H100 and H200 (none of 352 without it); it stays "
		          "attached, links from NVML. NVLPROF_CUPTI_FINALIZE=1 detaches anyway",
		          det.unsafe_ver);
		return 0;
	}
	const char *b = blocker(nvlp_kw_mode() != NVLP_KM_OFF, um);
	if (b) {
		if (!det.noted_block++)
			nvlp_note(NVLP_NOTE_CONFIG, -1, 0,
			          "CUPTI kept attached for now (NVLPROF_CUPTI=startup): %s", b);
		return 0;
	}
	return request();
}

int nvlp_detach_stop(void)
{
	pthread_mutex_lock(&det.mu); /* a detach in a callback finishes first */
	int ph = phase();
	if (ph != DT_DONE)
		set_phase(DT_OFF);
	pthread_mutex_unlock(&det.mu);
	nvlp_sub_exit_hook_cancel();
	if (ph == DT_DONE)
		note_done(); /* detached just before the end: the flush thread did not see it */
	return ph == DT_DONE;
}

int nvlp_detach_done(void)
{
	return phase() == DT_DONE;
}

int nvlp_detach_again(void)
{
	pthread_mutex_lock(&det.mu);
	int ph = phase();
	if (ph == DT_DONE)
		set_phase(DT_AGAIN);
	pthread_mutex_unlock(&det.mu);
	if (ph == DT_DONE)
		note_done(); /* the flush thread may not have seen the detach yet */
	return ph == DT_DONE;
}

void nvlp_detach_lazy_um(int asked)
{
	if (!det.lazy || __atomic_exchange_n(&det.noted_um, 1, __ATOMIC_ACQ_REL))
		return;
	nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, 0,
	          NVLP_NOTE_CUPTI_LAZY_UM " migrations unmeasured (NVLPROF_CUPTI=1 measures them): %s",
	          asked ? "CUPTI not attached before it (refused, or no injection); it counts none of "
	                  "memory allocated before it attached (run 15)"
	                : "no mid-run attach unless NVLPROF_UM=attach (such an attach hung real jobs "
	                  "at a later cuInit, runs 16-17)");
}

void nvlp_detach_again_note(int ok, double after_s)
{
	int lazy = nvlp_detach_is_lazy();
	if (ok && lazy)
		nvlp_note(NVLP_NOTE_CUPTI_REATTACHED, -1, (uint64_t)(after_s * 1000),
		          "CUPTI attached %.1f s after start (NVLPROF_CUPTI=lazy) before the first managed "
		          "allocation: its counters on, for good",
		          after_s);
	else if (ok)
		nvlp_note(NVLP_NOTE_CUPTI_REATTACHED, -1, (uint64_t)(after_s * 1000),
		          "CUPTI attached again %.1f s after attaching first (NVLPROF_CUPTI=startup): "
		          "managed memory allocated, its counters on",
		          after_s);
	else if (lazy)
		nvlp_detach_lazy_um(1); /* CUPTI refused: the migrations not measured */
	else
		nvlp_note(NVLP_NOTE_CUPTI_UNAVAILABLE, -1, 0,
		          "managed memory allocated after CUPTI detached (NVLPROF_CUPTI=startup) and "
		          "CUPTI refused to attach again: no unified-memory counters");
}

void nvlp_detach_atfork_child(void)
{
	pthread_mutex_init(&det.mu, NULL);
	det.phase = DT_OFF; /* CUDA and CUPTI do not survive fork */
	det.noted_done = det.noted_block = 0;
	det.lazy = det.noted_um = 0;
	det.tries = 0;
}

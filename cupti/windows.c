/* windows.c: kernel tracing (NVLPROF_KERNELS, parsed in preload/rt_config_kernels.c): all the time,
 * never, or in windows that the flush schedule (cupti.c) opens and closes, each closed window
 * recorded (KWINDOW). */
#include <stdio.h>  /* snprintf */
#include <stdint.h> /* uint64_t */

#include "cupti_int.h"
#include "nvlp_rt.h"

/*
 * all: CUPTI kernel and copy activity the whole run (every kernel instrumented: +1000 ns per launch
 * on H200). off: never enabled; collectives still get their GPU time from NCCL's own KernelCh
 * timestamps (ncclprof.c). window:ON/PERIOD (default 20/10000): enabled ON ms out of every PERIOD
 * ms, each window recorded (KWINDOW) so that the analyzer can say what it covers. A window is
 * closed with cuptiActivityDisable, not cuptiFinalize: on H200 a disabled kind left part of its
 * per-launch cost behind (3654 ns never enabled, 4900 on, 4757 then 4112 after disabling) and only
 * cuptiFinalize removed it (3673), but finalize also drops our callbacks, clock and PM setup
 * (tests/gpu/cupti_phases.cu); on the training steps the residue was within noise (+0.30% after a
 * 2 s window vs +0.17% never enabled, GPT-2 step).
 */
/*
 * window:ON/PERIOD+FIRST: the first window opens FIRST ms after the process's first NCCL
 * collective, when training is under way (a window at start sees imports, model building and
 * NCCL setup: a GPT-2 job under torchrun traced 3 s got its only default window there and no
 * training kernel at all), or KM_FALLBACK_NS + FIRST after start in a job without collectives.
 * Without +FIRST the first window opens at start.
 */
#define KM_FALLBACK_NS 2000000000ull
static struct {
	int mode; /* enum nvlp_kmode */
	uint64_t on_ns, period_ns;
	int anchored;
	uint64_t first_ns;
} kernel_tracing = {NVLP_KM_OFF, 20000000ull, 10000000000ull, 1, 500000000ull};
/* The default is off (tests/gpu/results/cost1.txt, one H200): a kernel window costs at its opening
 * (cuptiActivityEnable of CONCURRENT_KERNEL instruments every loaded kernel: nvlprof's threads took
 * 2.00 s of CPU over 21 windows of a GPT-2 job, against 0.21 s with kernels off and 0.52 s with
 * kernels traced all the time) and after its closing (a disabled kind keeps ~0.5 us of a launch's
 * cost until cuptiFinalize: 3.53 us per launch never enabled, 4.02-4.10 after disabling, the whole
 * residue on a launch-bound loop). `window` alone is window:20/10000+500. */
#define KM_DEFAULT NVLP_KERNELS_DEFAULT

/* The kinds a window turns on and off. */
static const CUpti_ActivityKind KW_KINDS[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2};
#define KW_N (sizeof KW_KINDS / sizeof KW_KINDS[0])

/* The windows so far; touched by the flush thread, and by the stop after it joined. */
static struct {
	int win_open;
	uint64_t win_start, windows, covered_ns;
	uint64_t t0;    /* when the schedule started */
	int first_done; /* anchored: the first window has opened */
	int coll_done;  /* anchored: a window opened after the first collective */
} kw;

void nvlp_kw_config(void)
{
	const struct nvlp_config *cfg = nvlp_cfg();
	const struct nvlp_kernels_cfg *km = &cfg->km;
	if (!cfg->kernels[0])
		return;
	if (km->bad) {
		nvlp_warn(
		    "NVLPROF_KERNELS=%s: expected off, all, window or "
		    "window:ON_MS/PERIOD_MS[+FIRST_MS] "
		    "with 0 < ON_MS < PERIOD_MS <= 3600000, FIRST_MS <= 3600000; using " KM_DEFAULT,
		    cfg->kernels);
		nvlp_note(NVLP_NOTE_CONFIG, -1, 0,
		          "NVLPROF_KERNELS=%.100s not understood; using " KM_DEFAULT, cfg->kernels);
		return;
	}
	kernel_tracing.mode = km->mode;
	if (km->mode != NVLP_KM_WINDOW)
		return;
	kernel_tracing.on_ns = (uint64_t)km->on_ms * 1000000ull;
	kernel_tracing.period_ns = (uint64_t)km->period_ms * 1000000ull;
	kernel_tracing.anchored = km->anchored;
	kernel_tracing.first_ns = (uint64_t)km->first_ms * 1000000ull;
}

int nvlp_kw_mode(void)
{
	return kernel_tracing.mode;
}

void nvlp_kw_describe(char *km, size_t len)
{
	if (kernel_tracing.mode == NVLP_KM_WINDOW)
		snprintf(km, len, "kernels and copies traced %llu ms of every %llu ms%s",
		         (unsigned long long)(kernel_tracing.on_ns / 1000000ull),
		         (unsigned long long)(kernel_tracing.period_ns / 1000000ull),
		         kernel_tracing.anchored ? ", from shortly after the first collective"
		                                 : "");
	else
		snprintf(km, len, "kernels and copies %s",
		         kernel_tracing.mode == NVLP_KM_ALL ? "traced all the time" : "not traced");
}

/* Anchored windows: when the first one opens (see kernel_tracing). */
static uint64_t first_window_at(void)
{
	uint64_t fc = __atomic_load_n(&nvlp_first_coll_ns, __ATOMIC_RELAXED);
	uint64_t at = kw.t0 + KM_FALLBACK_NS + kernel_tracing.first_ns;
	if (fc && fc + kernel_tracing.first_ns < at)
		at = fc + kernel_tracing.first_ns;
	return at;
}

/* Turn the window's kinds on or off. Kinds Kineto enabled stay on. */
static void window_kinds(int on)
{
	for (size_t i = 0; i < KW_N; i++) {
		if (!nvlp_cupti_we_enabled((int)KW_KINDS[i]) || nvlp_share_wants((int)KW_KINDS[i]))
			continue;
		if (on)
			nvlp_cu.cuptiActivityEnable(KW_KINDS[i]);
		else
			nvlp_cu.cuptiActivityDisable(KW_KINDS[i]);
	}
}

/* A closed window's KWINDOW record. */
static void window_record(uint64_t start, uint64_t dur)
{
	struct nvlp_rec_kwindow w = {
	    .start = start, .dur = dur, .kinds = KW_N, .period = kernel_tracing.period_ns};
	nvlp_emit_wait(NVLP_K_KWINDOW, &w, NULL, 0, 1000);
	kw.windows++;
	kw.covered_ns += dur;
}

/* Close (emit its KWINDOW) or open a kernel window. */
static void window_edge(uint64_t now)
{
	int open = !kw.win_open;
	window_kinds(open);
	if (!open)
		window_record(kw.win_start, now - kw.win_start);
	kw.win_open = open;
	kw.win_start = now;
}

void nvlp_kw_start(void)
{
	/* start_locked enabled the kinds unless off */
	kw.win_open = kernel_tracing.mode != NVLP_KM_OFF;
	kw.win_start = kw.t0 = nvlp_now();
	kw.first_done = !(kernel_tracing.mode == NVLP_KM_WINDOW && kernel_tracing.anchored);
	kw.coll_done = 0;
	if (!kw.first_done) {
		/* enabled at start only to learn whether CUPTI traces kernels here: closed now, no
		 * window recorded; the first opens at first_window_at() */
		window_kinds(0);
		kw.win_open = 0;
	}
}

uint64_t nvlp_kw_first_wake(void)
{
	return kernel_tracing.mode != NVLP_KM_WINDOW ? UINT64_MAX
	       : kw.first_done                       ? kw.win_start + kernel_tracing.on_ns
	                                             : first_window_at();
}

void nvlp_kw_tick(uint64_t now, uint64_t *next_win)
{
	if (kernel_tracing.mode == NVLP_KM_WINDOW && !kw.first_done)
		*next_win = first_window_at(); /* the first collective may have come since */
	/* A job whose first collective came after the fallback window (torch: CUDA starts
	 * early, model building and imports take seconds before DDP's first broadcast) gets
	 * one window FIRST ms after that collective anyway, the period counted from it: on the
	 * GPU machine the fallback's windows all fell in a HF job's setup, none in its steps. */
	uint64_t fc =
	    kernel_tracing.mode == NVLP_KM_WINDOW && kernel_tracing.anchored && !kw.coll_done
	        ? __atomic_load_n(&nvlp_first_coll_ns, __ATOMIC_RELAXED)
	        : 0;
	if (fc && kw.first_done && !kw.win_open && now >= fc + kernel_tracing.first_ns &&
	    kw.win_start < fc) {
		window_edge(now); /* opens */
		kw.coll_done = 1;
		*next_win = now + kernel_tracing.on_ns;
	} else if (now >= *next_win) {
		window_edge(now);
		if (fc && kw.win_open && kw.win_start >= fc)
			kw.coll_done = 1;
		kw.first_done = 1;
		*next_win = now + (kw.win_open ? kernel_tracing.on_ns
		                               : kernel_tracing.period_ns - kernel_tracing.on_ns);
	}
}

void nvlp_kw_stop(void)
{
	if (kw.win_open && kernel_tracing.mode == NVLP_KM_WINDOW)
		window_edge(nvlp_now()); /* the last window, cut short by the end */
	else if (kernel_tracing.mode == NVLP_KM_WINDOW && !kw.first_done)
		window_record(nvlp_now(),
		              0); /* ended before its first window: says so in the trace */
}

void nvlp_kw_verbose(void)
{
	if (kernel_tracing.mode == NVLP_KM_WINDOW)
		nvlp_warn("kernel windows: %llu, %.1f ms traced", (unsigned long long)kw.windows,
		          kw.covered_ns / 1e6);
}

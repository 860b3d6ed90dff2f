/* nvlp_clock.c: calibration and refresh of the TSC clock behind nvlp_now() (see nvlp_clock.h). */
#include <stdatomic.h> /* atomic_* */
#include <string.h>    /* strcmp */
#if defined(__x86_64__)
#include <cpuid.h> /* __get_cpuid */
#endif

#include "nvlp_clock.h"

enum { MODE_GETTIME, MODE_TSC };

#define CALIB_NS 2000000ll      /* first anchor: TSC rate measured over >= 2 ms */
#define LIMIT_MIN_NS 16000000ll /* an anchor is stale after 8x the calibration span, within */
#define LIMIT_MAX_NS 2000000000ll /* these bounds (the writer refreshes every <= 1 s) */
#define REBASE_NS 60000000000ll /* rate measured over the last minute or so (>= 1 s) */
#define MAX_ERR_NS 1000000ll    /* the TSC disagrees with CLOCK_MONOTONIC: stop using it */
#define MAX_SLEW 200e-6         /* at most 200 us per s of correction */
#define NSLOTS 4

struct nvlp_clock_anchor *nvlp_clock_cur;
static struct {
	_Atomic int mode;
	/* A refresh is in progress: anchors belong to it (readers use the published slot only). */
	_Atomic int busy;
	/* First calibration point (read without busy by callers waiting for calibration). */
	_Atomic uint64_t calib_tsc, calib_mono;
} tsc_clock;
/* The anchors nvlp_clock_cur points into, and what a refresh makes the next one from. */
static struct {
	struct nvlp_clock_anchor slots[NSLOTS];
	uint64_t base_tsc, base_mono; /* the rate is measured from here */
	uint64_t prev_tsc, prev_mono; /* last refresh */
	unsigned next_slot;
} anchors;

#if defined(__x86_64__)
static int tsc_invariant(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007)
		return 0;
	if (!__get_cpuid(0x80000007, &a, &b, &c, &d))
		return 0;
	return (d >> 8) & 1;
}

/* One (tsc, mono) pair: the TSC just before clock_gettime, so that converting with it runs ahead
 * of CLOCK_MONOTONIC by at most the read's width and the switch from clock_gettime never steps
 * back. The narrowest of a few reads. @return 0, -1 if every read was interrupted. */
static int read_pair(uint64_t *tsc, uint64_t *mono)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t t1 = nvlp_rdtsc_ordered(), m = nvlp_clock_gettime(), t2 = nvlp_rdtsc_ordered();
		if (t2 - t1 < best) {
			best = t2 - t1;
			*tsc = t1;
			*mono = m;
		}
	}
	return best < 100000 ? 0 : -1; /* ~50 us at any plausible TSC rate */
}

static uint64_t convert(const struct nvlp_clock_anchor *a, uint64_t tsc)
{
	int64_t d = (int64_t)(tsc - __atomic_load_n(&a->tsc0, __ATOMIC_ACQUIRE));
	__int128 ns = ((__int128)d * (__int128)__atomic_load_n(&a->mult, __ATOMIC_ACQUIRE));
	return __atomic_load_n(&a->mono0, __ATOMIC_ACQUIRE) + (uint64_t)(int64_t)(ns >> 32);
}

static void publish(uint64_t tsc0, uint64_t mono0, double ns_per_tick, double limit_ns)
{
	struct nvlp_clock_anchor *a = &anchors.slots[anchors.next_slot++ % NSLOTS];
	uint64_t g = __atomic_load_n(&a->gen, __ATOMIC_RELAXED);
	/* Release stores (plain moves on x86): none becomes visible before gen turns odd. */
	__atomic_store_n(&a->gen, g + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&a->tsc0, tsc0, __ATOMIC_RELEASE);
	__atomic_store_n(&a->mono0, mono0, __ATOMIC_RELEASE);
	__atomic_store_n(&a->mult, (uint64_t)(ns_per_tick * 4294967296.0 + 0.5), __ATOMIC_RELEASE);
	__atomic_store_n(&a->limit, (uint64_t)(limit_ns / ns_per_tick), __ATOMIC_RELEASE);
	__atomic_store_n(&a->gen, g + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&nvlp_clock_cur, a, __ATOMIC_RELEASE);
}

static void give_up(void)
{
	atomic_store(&tsc_clock.mode, MODE_GETTIME);
	__atomic_store_n(&nvlp_clock_cur, NULL, __ATOMIC_RELEASE);
}

/* Holding busy: the first anchor (after CALIB_NS), then each next one. */
static void refresh_locked(void)
{
	uint64_t t, m;
	if (read_pair(&t, &m) < 0)
		return;
	struct nvlp_clock_anchor *a = __atomic_load_n(&nvlp_clock_cur, __ATOMIC_RELAXED);
	if (!a) {
		anchors.base_tsc = atomic_load(&tsc_clock.calib_tsc);
		anchors.base_mono = atomic_load(&tsc_clock.calib_mono);
		if (m - anchors.base_mono < CALIB_NS)
			return;
	}
	double span = (double)(int64_t)(m - anchors.base_mono),
	       rate = span / (double)(int64_t)(t - anchors.base_tsc);
	if (!(rate > 0.01 && rate < 100)) { /* not a TSC we can use (or it went back) */
		give_up();
		return;
	}
	double limit = span * 8 < LIMIT_MIN_NS ? LIMIT_MIN_NS : span * 8;
	if (limit > LIMIT_MAX_NS)
		limit = LIMIT_MAX_NS;
	uint64_t mono0 = m;
	double slope = rate;
	if (a) {
		/* Continue from where the current anchor is now, and slew off its error over half
		 * the new anchor's life (the next refresh should come before then). */
		mono0 = convert(a, t);
		double err = (double)(int64_t)(mono0 - m);
		if (err > MAX_ERR_NS || err < -MAX_ERR_NS) {
			give_up();
			return;
		}
		double corr = err / (limit / 2);
		if (corr > MAX_SLEW)
			corr = MAX_SLEW;
		if (corr < -MAX_SLEW)
			corr = -MAX_SLEW;
		slope = rate * (1 - corr);
	}
	publish(t, mono0, slope, limit);
	if ((int64_t)(m - anchors.base_mono) > REBASE_NS && anchors.prev_mono &&
	    m - anchors.prev_mono > 1000000000) {
		anchors.base_tsc = anchors.prev_tsc;
		anchors.base_mono = anchors.prev_mono;
	}
	anchors.prev_tsc = t;
	anchors.prev_mono = m;
}

static void try_refresh(void)
{
	int expect = 0;
	if (atomic_load_explicit(&tsc_clock.mode, memory_order_relaxed) != MODE_TSC ||
	    !atomic_compare_exchange_strong(&tsc_clock.busy, &expect, 1))
		return;
	refresh_locked();
	atomic_store_explicit(&tsc_clock.busy, 0, memory_order_release);
}
#endif

int nvlp_clock_init(const char *m)
{
	int rc = 0, want = MODE_TSC;
	if (m && !strcmp(m, "gettime"))
		want = MODE_GETTIME;
	else if (m && *m && strcmp(m, "auto") && strcmp(m, "tsc"))
		rc = -1;
	__atomic_store_n(&nvlp_clock_cur, NULL, __ATOMIC_RELEASE);
	atomic_store(&tsc_clock.mode, MODE_GETTIME);
#if defined(__x86_64__)
	uint64_t t, mono;
	if (want == MODE_TSC && tsc_invariant() && read_pair(&t, &mono) == 0) {
		atomic_store(&tsc_clock.calib_tsc, t);
		atomic_store(&tsc_clock.calib_mono, mono);
		anchors.prev_tsc = anchors.prev_mono = 0;
		atomic_store(&tsc_clock.mode, MODE_TSC);
	}
#else
	(void)want;
#endif
	return rc;
}

void nvlp_clock_refresh(void)
{
#if defined(__x86_64__)
	try_refresh();
#endif
}

void nvlp_clock_atfork_child(void)
{
	atomic_store(&tsc_clock.busy, 0);
}

const char *nvlp_clock_source(void)
{
	return atomic_load(&tsc_clock.mode) == MODE_TSC ? "tsc" : "gettime";
}

uint64_t nvlp_clock_slow(void)
{
#if defined(__x86_64__)
	if (atomic_load_explicit(&tsc_clock.mode, memory_order_relaxed) == MODE_TSC) {
		if (!__atomic_load_n(&nvlp_clock_cur, __ATOMIC_ACQUIRE)) {
			uint64_t m = nvlp_clock_gettime();
			if (m - atomic_load_explicit(&tsc_clock.calib_mono, memory_order_relaxed) >=
			    CALIB_NS)
				try_refresh();
			return m;
		}
		try_refresh(); /* stale: whoever gets here first renews it; the others go on */
		/* The anchor as it is, however old: continuous with every earlier reading. */
		for (int i = 0; i < 8; i++) {
			struct nvlp_clock_anchor *a =
			    __atomic_load_n(&nvlp_clock_cur, __ATOMIC_ACQUIRE);
			if (!a)
				break;
			uint64_t g = __atomic_load_n(&a->gen, __ATOMIC_ACQUIRE);
			if (g & 1)
				continue;
			uint64_t v = convert(a, nvlp_rdtsc_ordered());
			if (__atomic_load_n(&a->gen, __ATOMIC_RELAXED) == g)
				return v;
		}
	}
#endif
	return nvlp_clock_gettime();
}

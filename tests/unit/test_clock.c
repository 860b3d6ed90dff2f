/* test_clock.c: nvlp_now() (TSC or clock_gettime) against CLOCK_MONOTONIC, and monotonic across threads. */
#include <pthread.h>   /* pthread_create */
#include <stdatomic.h> /* atomic_* */
#include <stdint.h>    /* uint64_t */
#include <string.h>    /* strcmp */
#include <time.h>      /* clock_gettime */

#include "check.h"
#include "nvlp_clock.h"

#define NTHREADS 3
#define TOL_NS 20000

static _Atomic uint64_t last_seen; /* the latest nvlp_now() any thread has published */
static _Atomic int stop;

struct result {
	uint64_t reads, max_err, back, max_back;
};

/* Compare with clock_gettime around each read; check against what other threads have seen. */
static void *reader(void *arg)
{
	struct result *res = arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t seen = atomic_load(&last_seen);
		uint64_t m1 = nvlp_clock_gettime(), t = nvlp_now(), m2 = nvlp_clock_gettime();
		uint64_t err = t < m1 ? m1 - t : t > m2 ? t - m2 : 0;
		if (err > res->max_err)
			res->max_err = err;
		if (t < seen) {
			res->back++;
			if (seen - t > res->max_back)
				res->max_back = seen - t;
		}
		uint64_t cur = atomic_load(&last_seen);
		while (cur < t && !atomic_compare_exchange_weak(&last_seen, &cur, t))
			;
		res->reads++;
	}
	return NULL;
}

/* Stands in for the writer thread: refreshes every 10 ms when asked to. */
static void *refresher(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		nvlp_clock_refresh();
		sleep_ms(10);
	}
	return NULL;
}

static void run(const char *what, int with_refresher, long ms)
{
	pthread_t th[NTHREADS], rt;
	struct result res[NTHREADS] = {{0}};
	atomic_store(&stop, 0);
	atomic_store(&last_seen, 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, reader, &res[i]);
	if (with_refresher)
		pthread_create(&rt, NULL, refresher, NULL);
	sleep_ms(ms);
	atomic_store(&stop, 1);
	struct result all = {0};
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		all.reads += res[i].reads;
		all.back += res[i].back;
		if (res[i].max_err > all.max_err)
			all.max_err = res[i].max_err;
		if (res[i].max_back > all.max_back)
			all.max_back = res[i].max_back;
	}
	if (with_refresher)
		pthread_join(rt, NULL);
	CHECK(all.reads > 1000, "%s (%s): %llu reads in %ld ms", what, nvlp_clock_source(),
	      (unsigned long long)all.reads, ms);
	CHECK(all.max_err < TOL_NS, "%s: |nvlp_now - clock_gettime| <= %llu ns (limit %d)", what,
	      (unsigned long long)all.max_err, TOL_NS);
	CHECK(all.back == 0, "%s: never behind a time another thread saw (%llu times, by up to %llu ns)",
	      what, (unsigned long long)all.back, (unsigned long long)all.max_back);
}

int main(void)
{
	CHECK(nvlp_clock_init("bogus") == -1, "NVLPROF_CLOCK=bogus is rejected (auto used)");
	CHECK(nvlp_clock_init("gettime") == 0 && !strcmp(nvlp_clock_source(), "gettime"),
	      "NVLPROF_CLOCK=gettime reads clock_gettime");
	run("gettime", 1, 100);

	CHECK(nvlp_clock_init(NULL) == 0, "NVLPROF_CLOCK unset: auto");
#if defined(__x86_64__)
	printf("note: clock source %s\n", nvlp_clock_source());
#endif
	/* Calibration and self-refresh by readers alone (no writer thread yet), then with one. */
	run("auto, no refresher", 0, 300);
	run("auto, refresher every 10 ms", 1, 300);
	run("auto, no refresher again (anchors go stale)", 0, 200);
	CHECK(nvlp_clock_init("tsc") == 0, "NVLPROF_CLOCK=tsc accepted");
	uint64_t a = nvlp_now();
	sleep_ms(5);
	uint64_t m1 = nvlp_clock_gettime(), b = nvlp_now(), m2 = nvlp_clock_gettime();
	CHECK(b > a && b - a >= 5000000 && b + TOL_NS > m1 && b < m2 + TOL_NS,
	      "after re-init: 5 ms sleep measures %llu ns; read between clock_gettime %llu and %llu",
	      (unsigned long long)(b - a), (unsigned long long)m1, (unsigned long long)m2);
	return CHECK_DONE();
}

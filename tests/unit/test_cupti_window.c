/* test_cupti_window.c: NVLPROF_KERNELS: kernel and copy tracing all the time, never, or in windows. */
/*
 * The parent re-runs itself under the shim with the fake libcupti/libcuda. In window mode the
 * child waits (generous deadline) until nvlprof has turned kernel activity off, generates kernels
 * then (the fake drops records of a disabled kind, as CUPTI does), waits until the next window
 * opens and generates more: only those reach the trace, and each closed window is a KWINDOW
 * record. Off: the kind is never enabled and nothing of it is recorded, CUPTI still attached.
 * A bad value: one warning, a NOTE, and the default windows (20 ms of every 10 s).
 */
#include <cuda.h>   /* cuInit */
#include <cupti.h>  /* CUPTI_ACTIVITY_KIND_* */
#include <nccl.h>   /* the fake NCCL: a first collective */
#include <limits.h> /* PATH_MAX */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* setenv, mkdtemp */
#include <string.h> /* strcmp, strstr */
#include <unistd.h> /* fork, execl */

#include "check.h"
#include "nvlp_trace.h"
#include "shim_child.h"

void fake_cupti_generate(int kind, int n);
void fake_cupti_materialize(void);
int fake_cupti_enabled(int kind);

#define KK CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
#define N_CLOSED 100
#define N_OPEN 50

/* Wait up to 20 s for the kernel kind to be in state on. @return 1 if it got there. */
static int wait_kind(int on)
{
	for (int i = 0; i < 20000; i++) {
		if (!!fake_cupti_enabled(KK) == on)
			return 1;
		sleep_ms(1);
	}
	return 0;
}

/* ---- child: exit 0 ok, 2 never closed, 3 never reopened, 4 a window edge fell inside a batch
 * (inconclusive: the parent runs it again), 5 off but enabled, 6 CUPTI not attached ---- */
static int child(const char *how)
{
	cuInit(0); /* fake driver: InitializeInjection -> nvlprof attaches */
	if (!fake_cupti_enabled(CUPTI_ACTIVITY_KIND_DEVICE))
		return 6;
	if (!strcmp(how, "idle"))
		return 0;
	if (!strcmp(how, "sleep")) { /* outlives its first window, launches nothing */
		sleep_ms(300);
		return 0;
	}
	if (!strcmp(how, "coll")) { /* the fallback window, then a first collective: another */
		if (!wait_kind(1))
			return 3;
		if (!wait_kind(0))
			return 2;
		ncclUniqueId id;
		ncclComm_t comm;
		if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess ||
		    ncclAllReduce(NULL, NULL, 1, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
			return 7;
		if (!wait_kind(1)) /* the period (100 s) would open none before the end */
			return 3;
		fake_cupti_generate(KK, N_OPEN);
		fake_cupti_materialize();
		if (!fake_cupti_enabled(KK))
			return 4;
		return 0;
	}
	if (!strcmp(how, "off")) {
		for (int i = 0; i < 5; i++, sleep_ms(100))
			if (fake_cupti_enabled(KK) || fake_cupti_enabled(CUPTI_ACTIVITY_KIND_MEMCPY))
				return 5;
		fake_cupti_generate(KK, N_CLOSED);
		fake_cupti_materialize();
		return 0;
	}
	if (!wait_kind(0))
		return 2;
	fake_cupti_generate(KK, N_CLOSED);
	fake_cupti_materialize();
	if (fake_cupti_enabled(KK))
		return 4;
	if (!wait_kind(1))
		return 3;
	fake_cupti_generate(KK, N_OPEN);
	fake_cupti_materialize();
	if (!fake_cupti_enabled(KK))
		return 4;
	return 0;
}

struct sc {
	const char *name, *how, *kernels; /* kernels: NVLPROF_KERNELS value */
	/* want_windows: -1 = at least one, -2 = not checked, -3 = at least one, none saw a kernel */
	int want_kernels, want_windows;
	const char *note;                 /* text a NOTE must hold */
};

static int run(const char *self, const char *lib, const struct sc *c)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		char dir[] = "/tmp/nvlp-cupti-window.XXXXXX";
		if (!mkdtemp(dir))
			return 1;
		char kv[128];
		snprintf(kv, sizeof kv, "NVLPROF_KERNELS=%s", c->kernels);
		/* CUPTI attached at cuInit (NVLPROF_CUPTI=1) whatever the default, kernels traced or not */
		const char *env[] = {kv, "NVLPROF_CUPTI=1", NULL};
		int rc = shim_run_child(self, lib, dir, "0", env, c->how);
		struct trace_summary s;
		trace_summarize(dir, &s);
		/* the report says what the windows covered ($BUILD/tests/x -> $BUILD/nvlprof) */
		char rep[3 * PATH_MAX];
		snprintf(rep, sizeof rep,
		         "'%.*s/../nvlprof' report '%s' 2>/dev/null | grep -q 'kernel tracing windows'",
		         (int)(strrchr(self, '/') - self), self, dir);
		int said = system(rep) == 0;
		/* a window-mode run whose windows saw no kernel must not be blamed on CUPTI or the driver */
		snprintf(rep, sizeof rep,
		         "'%.*s/../nvlprof' report '%s' 2>/dev/null | grep -q 'none fell inside'",
		         (int)(strrchr(self, '/') - self), self, dir);
		int said_none = system(rep) == 0;
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
		if (rc == 4)
			continue; /* a window edge fell inside a batch: run it again */
		CHECK(rc == 0, "[%s] child status %d (0)", c->name, rc);
		CHECK(s.files == 1 && s.complete == 1, "[%s] one complete trace", c->name);
		CHECK(s.kinds[NVLP_K_KERNEL] == (unsigned long long)c->want_kernels,
		      "[%s] %d kernel records (%llu)", c->name, c->want_kernels,
		      s.kinds[NVLP_K_KERNEL]);
		if (c->want_windows == -2)
			; /* the process ends before its first window closes: the last is cut short */
		else if (c->want_windows == -3)
			; /* checked below, with the report */
		else if (c->want_windows < 0)
			CHECK(s.kinds[NVLP_K_KWINDOW] >= 1, "[%s] KWINDOW records (%llu)", c->name,
			      s.kinds[NVLP_K_KWINDOW]);
		else
			CHECK(s.kinds[NVLP_K_KWINDOW] == (unsigned long long)c->want_windows,
			      "[%s] %d KWINDOW records (%llu)", c->name, c->want_windows,
			      s.kinds[NVLP_K_KWINDOW]);
		if (c->want_windows == -3) {
			CHECK(s.kinds[NVLP_K_KWINDOW] >= 1, "[%s] KWINDOW records (%llu)", c->name,
			      s.kinds[NVLP_K_KWINDOW]);
			CHECK(said_none, "[%s] the report says no kernel fell inside the windows",
			      c->name);
		}
		if (c->want_windows == -1)
			CHECK(said, "[%s] nvlprof report says how much the windows covered", c->name);
		CHECK(strstr(s.text, c->note) != NULL, "[%s] a NOTE says \"%s\"", c->name, c->note);
		return 0;
	}
	CHECK(0, "[%s] three runs had a window edge inside a batch", c->name);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	static const struct sc scs[] = {
	    {"window:40/300", "window", "window:40/300", N_OPEN, -1,
	     "kernels and copies traced 40 ms of every 300 ms"},
	    {"off", "off", "off", 0, 0, "kernels and copies not traced"},
	    {"bad value", "idle", "window:500/100", 0, -2,
	     "NVLPROF_KERNELS=window:500/100 not understood"},
	    /* the default: no CUPTI kernel or copy activity (a window's cost: cupti.c) */
	    {"default", "off", "", 0, 0, "kernels and copies not traced"},
	    /* `window` alone: 20 ms of every 10 s, the first after the first collective */
	    {"window", "idle", "window", 0, -2,
	     "kernels and copies traced 20 ms of every 10000 ms, from shortly after"},
	    {"window, no kernel in the window", "sleep", "window", 0, -3,
	     "kernels and copies traced 20 ms of every 10000 ms"},
	    /* anchored: closed from the start (kernels then are not traced); without a
	     * collective the first window opens at the fallback (2 s) and traces */
	    {"window:40/300+0, no collective", "window", "window:40/300+0", N_OPEN, -1,
	     "kernels and copies traced 40 ms of every 300 ms, from shortly after the first "
	     "collective"},
	    /* anchored, ended before the fallback: a zero-length window, the report says none saw
	     * a kernel */
	    {"window:40/300+0, ended first", "sleep", "window:40/300+0", 0, -3,
	     "kernels and copies traced 40 ms of every 300 ms, from shortly after"},
	    /* anchored, the first collective after the fallback window: one more window after it */
	    {"window:40/100000+0, collective after the fallback", "coll", "window:40/100000+0", N_OPEN,
	     -1, "from shortly after the first collective"},
	    {"bad first window", "idle", "window:40/300+x", 0, -2,
	     "NVLPROF_KERNELS=window:40/300+x not understood"},
	};
	for (size_t i = 0; i < sizeof scs / sizeof scs[0]; i++)
		if (run(self, lib, &scs[i]))
			return 1;
	return CHECK_DONE();
}

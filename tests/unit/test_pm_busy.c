/* test_pm_busy.c: another tool holds the GPU's performance counters: the link sampler falls back to NVML and the trace and report say where the link bytes came from. */
/*
 * The fake libcupti refuses cuptiPmSamplingEnable with CUPTI_ERROR_HARDWARE_BUSY
 * (FAKE_CUPTI_PM_BUSY), as when DCGM profiling or Nsight Compute owns the counters; the fake
 * libnvidia-ml.so.1 (build/fakes/nvml) has cumulative counters that grow 18 x 64 KiB of NVLink
 * data per read. The child starts CUDA, uses GPU 0 and idles 400 ms; the parent checks the
 * LINKSAMPLE records' source, the NOTE naming the refusal, and the report's source line. The same
 * run without the refusal is PM sampling throughout (the control). A third run leaves
 * NVLPROF_SAMPLE_US unset, with 2 links of 18 (FAKE_NVML_LINKS): NVML is read every 100 ms (not
 * 10), and after the first read only the 10 fields that answered it (the fake logs each read).
 */
#include <cuda_runtime_api.h> /* cudaMallocManaged */
#include <cupti.h>            /* CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL */
#include <limits.h>           /* PATH_MAX */
#include <stdio.h>            /* popen */
#include <stdlib.h>           /* mkdtemp */
#include <string.h>           /* strstr */
#include <time.h>             /* nanosleep */
#include "check.h"
#include "nvlp_trace.h"
#include "shim_child.h"

void fake_cupti_generate(int kind, int n); /* links the fake libcupti in (the shim reuses it) */

static int child(const char *arg)
{
	cuInit(0); /* fake driver: InitializeInjection -> nvlprof attaches, the sampler starts */
	void *m = NULL;
	if (cudaMallocManaged(&m, 1 << 20, cudaMemAttachGlobal) != cudaSuccess)
		return 3;
	fake_cupti_generate(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 10);
	struct timespec ts = {strcmp(arg, "long") ? 0 : 1, 400 * 1000000L};
	nanosleep(&ts, NULL);
	return 0;
}

struct links {
	unsigned long long pm, nvml, nvl_tx, nvl_rx, dur_min, dur_max;
	unsigned long long last; /* the latest NVML sample's length: the one taken at exit is cut
	                          * short, so it counts in dur_max only */
};
static void on_rec(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	(void)r;
	struct links *l = arg;
	if (rec->kind != NVLP_K_LINKSAMPLE)
		return;
	const struct nvlp_rec_linksample *s = (const void *)rec->f;
	l->pm += s->source == NVLP_LINK_PM_SAMPLING;
	l->nvml += s->source == NVLP_LINK_NVML;
	if (s->source == NVLP_LINK_NVML) {
		if (l->last && (!l->dur_min || l->last < l->dur_min))
			l->dur_min = l->last;
		l->last = s->dur;
		if (s->dur > l->dur_max)
			l->dur_max = s->dur;
	}
	l->nvl_tx += s->nvl_tx_user, l->nvl_rx += s->nvl_rx_user;
}

/* @return 1 when `nvlprof report dir` has line */
static int report_has(const char *lib, const char *dir, const char *line)
{
	char cmd[3 * PATH_MAX], buf[1024];
	snprintf(cmd, sizeof cmd, "%.*s/nvlprof report %s 2>&1", (int)(strrchr(lib, '/') - lib), lib,
	         dir);
	FILE *p = popen(cmd, "r");
	int found = 0;
	while (p && fgets(buf, sizeof buf, p))
		found |= !strcmp(buf, line);
	if (p)
		pclose(p);
	return found;
}

/* The NVML reads the fake logged: the first's field count, the fewest and most of the others. */
static int nvml_reads(const char *path, int *first, int *lo, int *hi)
{
	FILE *f = fopen(path, "r");
	int n = 0, x;
	*first = *lo = *hi = 0;
	while (f && fscanf(f, "%d", &x) == 1) {
		if (!n++)
			*first = x;
		else if (n == 2)
			*lo = *hi = x;
		else
			*lo = x < *lo ? x : *lo, *hi = x > *hi ? x : *hi;
	}
	if (f)
		fclose(f);
	return n;
}

/* busy: 0 the control (PM sampling), 1 PM refused, NVLPROF_SAMPLE_US=1000 (NVML at 10 ms),
 * 2 PM refused, NVLPROF_SAMPLE_US unset, 2 links; 3 NVLPROF_CUPTI=startup (NVML, PM sampling
 * not tried) */
static void run(const char *self, const char *lib, unsigned base, int busy)
{
	const char *name = busy == 3   ? "NVLPROF_CUPTI=startup"
	                   : busy == 2 ? "busy, default period"
	                   : busy      ? "busy"
	                               : "control";
	char dir[] = "/tmp/nvlp-pm-busy.XXXXXX", b[64], ldp[PATH_MAX + 64], log[PATH_MAX];
	if (!mkdtemp(dir))
		return;
	snprintf(b, sizeof b, "FAKE_CUDA_UUID_BASE=%u", base);
	snprintf(ldp, sizeof ldp, "LD_LIBRARY_PATH=%.*s/../fakes/nvml", (int)(strrchr(self, '/') - self),
	         self);
	snprintf(log, sizeof log, "FAKE_NVML_LOG=%s/nvml.log", dir);
	const char *env[] = {"FAKE_CUPTI_PM=1",
	                     /* 1, attached for the whole run (the default): PM sampling is CUPTI's */
	                     busy == 3 ? "NVLPROF_CUPTI=startup" : "NVLPROF_CUPTI=1",
	                     b,
	                     ldp,
	                     busy == 1 || busy == 2 ? "FAKE_CUPTI_PM_BUSY=1" : "FAKE_CUPTI_PM_BUSY",
	                     log,
	                     busy == 2 ? "FAKE_NVML_LINKS=2" : "FAKE_NVML_LINKS",
	                     busy == 2 ? "NVLPROF_SAMPLE_US" : NULL, /* else 1000, as passed below */
	                     NULL};
	int rc = shim_run_child(self, lib, dir, "1000", env, busy == 2 ? "long" : "x");
	CHECK(rc == 0, "[%s] the job ran (status %d)", name, rc);
	struct trace_summary s;
	trace_summarize(dir, &s);
	struct links l = {0};
	trace_dir_each(dir, on_rec, NULL, &l);
	CHECK(s.complete == 1, "[%s] trace complete", name);
	int first, lo, hi, reads = nvml_reads(log + strlen("FAKE_NVML_LOG="), &first, &lo, &hi);
	if (busy == 3) {
		CHECK(l.nvml >= 5 && l.pm == 0, "[%s] link samples from NVML only (%llu NVML, %llu PM)",
		      name, l.nvml, l.pm);
		CHECK(s.notes[NVLP_NOTE_NVML_ON] == 1 && s.notes[NVLP_NOTE_PM_SAMPLING_ON] == 0 &&
		          strstr(s.text, "NVML link counters on GPU 0") &&
		          strstr(s.text, "PM sampling unavailable: not tried: NVLPROF_CUPTI=startup "
		                         "detaches CUPTI after start-up; 1 keeps it, with PM sampling"),
		      "[%s] NOTE: NVML on GPU 0, PM sampling not tried: says why and how to keep it", name);
		CHECK(report_has(lib, dir,
		                 "  link bytes from: NVML counters (NVLPROF_CUPTI=startup; "
		                 "NVLPROF_CUPTI=1 samples the GPU's PM counters instead)\n"),
		      "[%s] report: the link bytes came from NVML, by choice, and how to get PM samples",
		      name);
	} else if (busy == 2) {
		/* 1.4 s idle at 100 ms: ~13 samples; at 10 ms it would be ~140. A late read shortens
		 * the next sample (78 ms seen under TSan): 50 ms still tells 100 from 10 */
		CHECK(l.nvml >= 4 && l.nvml <= 20 && l.pm == 0 && l.dur_min >= 50000000ull &&
		          l.dur_max < 400000000ull,
		      "[%s] NVML sampled every ~100 ms (%llu samples of %.1f-%.1f ms)", name, l.nvml,
		      (double)l.dur_min / 1e6, (double)l.dur_max / 1e6);
		CHECK(reads >= 5 && first == 74 && lo == 10 && hi == 10,
		      "[%s] NVML: all 74 fields read once, then only the 10 that answered (%d reads: "
		      "first %d fields, then %d-%d)",
		      name, reads, first, lo, hi);
		CHECK(l.nvl_tx > 0 && l.nvl_tx % (2 * 64 * 1024) == 0 && l.nvl_tx == l.nvl_rx,
		      "[%s] NVLink bytes: the 2 links' counters, KiB made bytes (%llu)", name, l.nvl_tx);
		CHECK(strstr(s.text, "NVML link counters on GPU 0 every 100000 us, 10 of 74 fields"),
		      "[%s] NOTE: NVML every 100 ms, 10 of 74 fields", name);
	} else if (busy) {
		CHECK(l.nvml >= 5 && l.pm == 0, "[%s] link samples from NVML only (%llu NVML, %llu PM)",
		      name, l.nvml, l.pm);
		CHECK(l.dur_max < 60000000ull, "[%s] NVLPROF_SAMPLE_US=1000: NVML every 10 ms (the floor; "
		      "longest sample %.1f ms)", name, (double)l.dur_max / 1e6);
		CHECK(reads >= 5 && first == 74 && lo == 74 && hi == 74,
		      "[%s] NVML: 18 links, every read asks for all 74 fields (%d reads: %d, %d-%d)", name,
		      reads, first, lo, hi);
		CHECK(l.nvl_tx > 0 && l.nvl_tx % (18 * 64 * 1024) == 0 && l.nvl_tx == l.nvl_rx,
		      "[%s] NVLink bytes: every link's counter, KiB made bytes (%llu)", name, l.nvl_tx);
		CHECK(s.notes[NVLP_NOTE_NVML_ON] == 1 &&
		          strstr(s.text, "NVML link counters on GPU 0") &&
		          strstr(s.text, "cuptiPmSamplingEnable"),
		      "[%s] NOTE: NVML on GPU 0, PM sampling refused by cuptiPmSamplingEnable", name);
		CHECK(report_has(lib, dir, "  link bytes from: NVML counters (PM sampling unavailable: see NOTEs)\n"),
		      "[%s] report: the link bytes came from NVML", name);
	} else {
		CHECK(l.pm >= 1 && l.nvml == 0, "[%s] link samples from PM sampling only (%llu PM, %llu NVML)",
		      name, l.pm, l.nvml);
		CHECK(s.notes[NVLP_NOTE_PM_SAMPLING_ON] == 1 && s.notes[NVLP_NOTE_NVML_ON] == 0,
		      "[%s] NOTE: PM sampling on", name);
		CHECK(report_has(lib, dir, "  link bytes from: PM sampling (CUPTI)\n"),
		      "[%s] report: the link bytes came from PM sampling", name);
	}
	if (check_failed_)
		printf("    notes:\n%s", s.text);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("    could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	/* our own fake GPU UUIDs: the per-GPU sampling lock is not shared with parallel tests */
	unsigned base = 0x40 | ((unsigned)getpid() & 0x3f);
	run(self, lib, base, 1);
	run(self, lib, base, 2);
	run(self, lib, base, 0);
	run(self, lib, base, 3);
	shim_unlink_gpu_locks(base);
	return CHECK_DONE();
}

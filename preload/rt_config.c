/* rt_config.c: the shim's configuration from the environment, and the global recording switch. */
#include <errno.h>  /* errno */
#include <limits.h> /* PATH_MAX */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* getenv, strtol */
#include <string.h> /* strcmp */
#include <unistd.h> /* getcwd */

#include "nvlp_rt.h"
#include "rt_internal.h"

volatile int nvlp_active;

int nvlp_rt_active(void)
{
	return __atomic_load_n(&nvlp_active, __ATOMIC_ACQUIRE);
}

void nvlp_rt_set_active(int on)
{
	__atomic_store_n(&nvlp_active, on, __ATOMIC_RELEASE);
}

static struct nvlp_config cfg = {
    .stacks = 1,
    .cupti = 1,
    .cupti_detach_ms = 2000,
    .um = -1,
    .sample_us = 10000,
    .nvml_us = NVLP_NVML_DEFAULT_US,
    .nccl_plugin = 1,
    .buffer_kb = 65536,
    .flush_ms = 500,
    .gpu_flush_ms = 10000,
    .nvtx = 1,
    .pysample_hz = 10,
    .driver = 1,
    .kch = NVLP_KCH_COLL,
    .pywalk = 1,
};
/* Config problems, kept to be written as NOTE(CONFIG) once a trace exists. */
#define MAX_CFG_NOTES 16
static struct {
	char text[MAX_CFG_NOTES][320];
	int n;
} cfg_note_log;

const struct nvlp_config *nvlp_cfg(void)
{
	return &cfg;
}

static void cfg_bad(const char *var, const char *val, const char *expected, const char *def)
{
	char msg[320];
	snprintf(msg, sizeof msg, "%s='%.64s': expected %s; using default %s", var, val, expected,
	         def);
	nvlp_warn("%s", msg);
	if (cfg_note_log.n < MAX_CFG_NOTES)
		snprintf(cfg_note_log.text[cfg_note_log.n++], sizeof cfg_note_log.text[0], "%s",
		         msg);
}

static void cfg_bool(const char *var, int *out)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return;
	if (!strcmp(v, "0") || !strcmp(v, "1")) {
		*out = v[0] == '1';
		return;
	}
	char def[8];
	snprintf(def, sizeof def, "%d", *out);
	cfg_bad(var, v, "0 or 1", def);
}

/* A variable that takes words: *out = the value of the word set (words[i] -> values[i], a
 * NULL-terminated list), or a warning naming expected and the default kept. */
static void cfg_word(const char *var, const char *const *words, const int *values, int *out,
                     const char *expected, const char *def)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return;
	for (int i = 0; words[i]; i++)
		if (!strcmp(v, words[i])) {
			*out = values[i];
			return;
		}
	cfg_bad(var, v, expected, def);
}

/* @return 1 when var was set to a valid value (now in *out) */
static int cfg_long(const char *var, long *out, long lo, long hi)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return 0;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || *end || end == v || x < lo || x > hi) {
		char exp[64], def[32];
		snprintf(exp, sizeof exp, "an integer %ld..%ld", lo, hi);
		snprintf(def, sizeof def, "%ld", *out);
		cfg_bad(var, v, exp, def);
		return 0;
	}
	*out = x;
	return 1;
}

/* NVLPROF_CUPTI: 0, 1, startup[:MS] (CUPTI detached MS ms after it attached, default 2000:
 * link counters then come from NVML, so PM sampling is not started) or lazy (CUPTI not attached
 * until something needs it: cupti/detach.c). */
static void cfg_cupti(void)
{
	const char *v = getenv("NVLPROF_CUPTI");
	if (!v || !*v)
		return;
	if (!strcmp(v, "lazy")) {
		cfg.cupti = 3;
		return;
	}
	if (!strcmp(v, "0") || !strcmp(v, "1")) {
		cfg_bool("NVLPROF_CUPTI", &cfg.cupti);
		return;
	}
	if (strncmp(v, "startup", 7) != 0) {
		cfg_bad("NVLPROF_CUPTI", v, "0, 1, lazy, startup or startup:MS (MS 0..3600000)", "1");
		return;
	}
	char *end = NULL;
	long ms = v[7] == ':' ? strtol(v + 8, &end, 10) : cfg.cupti_detach_ms;
	if ((v[7] && v[7] != ':') ||
	    (v[7] == ':' && (end == v + 8 || *end || ms < 0 || ms > 3600000))) {
		cfg_bad("NVLPROF_CUPTI", v, "0, 1, lazy, startup or startup:MS (MS 0..3600000)", "1");
		return;
	}
	cfg.cupti = 2;
	cfg.cupti_detach_ms = ms;
}

/* NVLPROF_UM's words and their modes */
static const char *const um_words[] = {"auto", "0", "1", "attach", NULL};
static const int um_modes[] = {NVLP_UM_AUTO, NVLP_UM_OFF, NVLP_UM_ON, NVLP_UM_ATTACH};

const char *nvlp_cfg_um_word(int um)
{
	for (int i = 0; um_words[i]; i++)
		if (um_modes[i] == um)
			return um_words[i];
	return "?";
}

/* NVLPROF_UM, NVLPROF_LINKS and NVLPROF_KCH: words, not numbers. */
static void cfg_words(void)
{
	cfg_word("NVLPROF_UM", um_words, um_modes, &cfg.um, "auto, 0, 1 or attach", "auto");
	static const char *const links[] = {"auto", "nvml", NULL};
	static const int links_v[] = {0, 1};
	cfg_word("NVLPROF_LINKS", links, links_v, &cfg.links_nvml, "auto or nvml", "auto");
	/* 1: one KCOLL record per collective (the default), channels: one KCH per channel */
	static const char *const kch[] = {"0", "1", "channels", NULL};
	static const int kch_v[] = {NVLP_KCH_OFF, NVLP_KCH_COLL, NVLP_KCH_CHANNELS};
	cfg_word("NVLPROF_KCH", kch, kch_v, &cfg.kch, "0, 1 or channels", "1");
}

static void cfg_capture(void)
{
	const char *cap = getenv("NVLPROF_CAPTURE");
	if (cap && *cap) {
		if (!strcmp(cap, "cudaProfilerApi")) {
			cfg.capture = 1;
		} else if (!strncmp(cap, "nvtx:", 5) && cap[5] && strlen(cap + 5) < sizeof cfg.capture_name) {
			cfg.capture = 2;
			snprintf(cfg.capture_name, sizeof cfg.capture_name, "%s", cap + 5);
		} else {
			cfg_bad("NVLPROF_CAPTURE", cap, "cudaProfilerApi or nvtx:NAME", "the whole run");
		}
	}
}

/* NVLPROF_PYWALK and the tests' switches. */
static void cfg_pywalk(void)
{
	const char *pw = getenv("NVLPROF_PYWALK"), *pwt = getenv("NVLPROF_PYWALK_TEST");
	const char *pwl = getenv("NVLPROF_PYWALK_LOG"), *cg = getenv("NVLPROF_TEST_CGROUP_EVENTS");
	cfg.pywalk = !(pw && *pw == '0');
	cfg.pywalk_log = pwl && *pwl == '1';
	cfg.pywalk_test = !pwt                     ? NVLP_PYWALK_TEST_NONE
	                  : !strcmp(pwt, "skew")   ? NVLP_PYWALK_SKEW
	                  : !strcmp(pwt, "pipe")   ? NVLP_PYWALK_PIPE
	                  : !strcmp(pwt, "refuse") ? NVLP_PYWALK_REFUSE
	                                           : NVLP_PYWALK_TEST_NONE;
	snprintf(cfg.test_cgroup_events, sizeof cfg.test_cgroup_events, "%s", cg ? cg : "");
}

/* NVLPROF_DIR, resolved against the start-up directory, so a later chdir() does not move the
 * traces. */
static void cfg_dir(void)
{
	const char *dir = getenv("NVLPROF_DIR");
	if (!dir || !*dir)
		dir = "./nvlprof-traces";
	char cwd[PATH_MAX];
	const char *rel = dir[0] == '.' && dir[1] == '/' ? dir + 2 : dir;
	if (dir[0] == '/' || !getcwd(cwd, sizeof cwd) ||
	    snprintf(cfg.dir, sizeof cfg.dir, "%s/%s", cwd, rel) >= (int)sizeof cfg.dir)
		snprintf(cfg.dir, sizeof cfg.dir, "%s", dir);
}

void nvlp_cfg_parse(void)
{
	cfg_bool("NVLPROF_DISABLE", &cfg.disable);
	cfg_bool("NVLPROF_STACKS", &cfg.stacks);
	cfg_cupti();
	cfg_bool("NVLPROF_VERBOSE", &cfg.verbose);
	cfg_bool("NVLPROF_NCCL_PLUGIN", &cfg.nccl_plugin);
	cfg_words();
	if (cfg.cupti >= 2)
		cfg.links_nvml = 1; /* PM sampling lives in CUPTI, which startup detaches, lazy defers */
	const char *clk = getenv("NVLPROF_CLOCK");
	if (nvlp_clock_init(clk) < 0)
		cfg_bad("NVLPROF_CLOCK", clk, "auto, tsc or gettime", "auto");
	if (cfg_long("NVLPROF_SAMPLE_US", &cfg.sample_us, 0, 10000000)) /* NVML: 10 ms at least */
		cfg.nvml_us = cfg.sample_us < 10000 ? 10000 : cfg.sample_us;
	/* 64 KiB floor: a ring must hold the largest ordinary record several times over. */
	cfg_long("NVLPROF_BUFFER_KB", &cfg.buffer_kb, 64, 4L << 20);
	cfg_long("NVLPROF_FLUSH_MS", &cfg.flush_ms, 1, 1000);
	cfg_long("NVLPROF_GPU_FLUSH_MS", &cfg.gpu_flush_ms, 0, 3600000);
	cfg_bool("NVLPROF_NVTX", &cfg.nvtx);
	cfg_long("NVLPROF_PYSAMPLE_HZ", &cfg.pysample_hz, 0, 1000);
	cfg_bool("NVLPROF_DRIVER", &cfg.driver);
	const char *k = getenv("NVLPROF_KERNELS");
	snprintf(cfg.kernels, sizeof cfg.kernels, "%s", k ? k : "");
	nvlp_cfg_kernels(cfg.kernels, &cfg.km);
	cfg_capture();
	cfg_pywalk();
	cfg_dir();
}

unsigned nvlp_cfg_note_count(void)
{
	return (unsigned)cfg_note_log.n;
}

const char *nvlp_cfg_note(unsigned i)
{
	return i < (unsigned)cfg_note_log.n ? cfg_note_log.text[i] : "";
}

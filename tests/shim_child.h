/* shim_child.h: for C tests that re-run themselves under LD_PRELOAD=libnvlprof.so and read the
 * traces. */
#ifndef NVLP_SHIM_CHILD_H
#define NVLP_SHIM_CHILD_H
#include <dirent.h>   /* opendir */
#include <link.h>     /* dl_iterate_phdr */
#include <limits.h>   /* PATH_MAX */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* setenv, unsetenv */
#include <string.h>   /* strstr */
#include <sys/stat.h> /* stat */
#include <sys/wait.h> /* waitpid */
#include <unistd.h>   /* readlink */

#include "nvlp_trace.h"

/* This test binary (self) and the shim beside it ($BUILD/tests/X -> $BUILD/libnvlprof.so).
 * @return 0, or -1 if /proc/self/exe cannot be read */
static inline int shim_paths(char *self, size_t self_len, char *lib, size_t lib_len)
{
	ssize_t n = readlink("/proc/self/exe", self, self_len - 1);
	if (n <= 0)
		return -1;
	self[n] = 0;
	snprintf(lib, lib_len, "%.*s/../libnvlprof.so", (int)(strrchr(self, '/') - self), self);
	return 0;
}

static inline int shim_san_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const char *n = info->dlpi_name;
	if (n &&
	    (strstr(n, "/libasan.so") || strstr(n, "/libtsan.so") || strstr(n, "/libubsan.so"))) {
		snprintf(arg, PATH_MAX, "%s", n);
		return 1;
	}
	return 0;
}

/* LD_PRELOAD value for the child: the shim, after this process's sanitizer runtime if any (a
 * sanitized shim needs it first in the initial library list). */
static inline void shim_preload_value(char *out, size_t len, const char *lib)
{
	char san[PATH_MAX] = "";
	dl_iterate_phdr(shim_san_cb, san);
	snprintf(out, len, "%s%s%s", san, san[0] ? ":" : "", lib);
}

/* In a forked child, before exec: run under the shim (after the sanitizer runtime if any), trace
 * into dir, link counters every sample_us (the string as the variable takes it), everything else
 * at its default (no inherited NVLPROF_UM/FLUSH_MS/GPU_FLUSH_MS/DISABLE, no injection path). */
static inline void shim_child_env(const char *lib, const char *dir, const char *sample_us)
{
	char pre[2 * PATH_MAX + 64];
	shim_preload_value(pre, sizeof pre, lib);
	setenv("LD_PRELOAD", pre, 1);
	setenv("NVLPROF_DIR", dir, 1);
	setenv("NVLPROF_SAMPLE_US", sample_us, 1);
	unsetenv("NVLPROF_UM");
	unsetenv("NVLPROF_FLUSH_MS");
	unsetenv("NVLPROF_GPU_FLUSH_MS");
	unsetenv("NVLPROF_DISABLE");
	unsetenv("CUDA_INJECTION64_PATH");
}

/* Wait for a child: its exit status, or 128 + the signal that killed it. */
static inline int shim_wait(pid_t pid)
{
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run this test binary again as `self child [arg]` under the shim (shim_child_env), with env
 * applied in order after it: "NAME=VALUE" sets, a bare "NAME" unsets (NULL-terminated list, or
 * NULL).
 * @return its status (shim_wait) */
static inline int shim_run_child(const char *self, const char *lib, const char *dir,
                                 const char *sample_us, const char *const *env, const char *arg)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		shim_child_env(lib, dir, sample_us);
		for (; env && *env; env++) {
			const char *eq = strchr(*env, '=');
			char name[256];
			snprintf(name, sizeof name, "%.*s",
			         eq ? (int)(eq - *env) : (int)strlen(*env), *env);
			if (eq)
				setenv(name, eq + 1, 1);
			else
				unsetenv(name);
		}
		execl(self, self, "child", arg, (char *)NULL);
		_exit(127);
	}
	return shim_wait(pid);
}

/* Read every *.nvlp trace in dir: on_record for each record, then on_file (may be NULL) once the
 * file is read (e.g. for nvlp_reader_complete). Unreadable files are named on stdout.
 * @return the number of files read */
static inline int trace_dir_each(const char *dir,
                                 void (*on_record)(nvlp_reader *, const struct nvlp_record *,
                                                   void *),
                                 void (*on_file)(nvlp_reader *, void *), void *arg)
{
	int files = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strstr(e->d_name, ".nvlp"))
			continue;
		char path[PATH_MAX], err[512];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		nvlp_reader *r = nvlp_reader_open(path, err, sizeof err);
		if (!r) {
			printf("    %s\n", err);
			continue;
		}
		files++;
		struct nvlp_record rec;
		while (nvlp_reader_next(r, &rec) == 1)
			on_record(r, &rec, arg);
		if (on_file)
			on_file(r, arg);
		nvlp_reader_close(r);
	}
	if (d)
		closedir(d);
	return files;
}

/* What the tests check in a directory of traces: records by kind, NOTEs by code (with the value of
 * the last one of each code and every message as "name: text" lines), files read and complete. */
struct trace_summary {
	unsigned long long kinds[NVLP_K_COUNT], notes[NVLP_NOTE_CODE_COUNT];
	uint64_t note_value[NVLP_NOTE_CODE_COUNT];
	int files, complete;
	char text[4096];
};

static inline void trace_summary_record(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	(void)r;
	struct trace_summary *s = arg;
	if (rec->kind < NVLP_K_COUNT)
		s->kinds[rec->kind]++;
	if (rec->kind == NVLP_K_NOTE) {
		const struct nvlp_rec_note *n = (const void *)rec->f;
		if (n->code < NVLP_NOTE_CODE_COUNT) {
			s->notes[n->code]++;
			s->note_value[n->code] = n->value;
		}
		size_t l = strlen(s->text);
		snprintf(s->text + l, sizeof s->text - l, "%s: %.*s\n",
		         nvlp_note_name((unsigned)n->code), (int)rec->blob_len,
		         (const char *)rec->blob);
	}
}

static inline void trace_summary_file(nvlp_reader *r, void *arg)
{
	((struct trace_summary *)arg)->complete += nvlp_reader_complete(r);
}

static inline void trace_summarize(const char *dir, struct trace_summary *s)
{
	memset(s, 0, sizeof *s);
	s->files = trace_dir_each(dir, trace_summary_record, trace_summary_file, s);
}
/* The bytes of the *.nvlp traces in dir (0 if it cannot be read). */
static inline long long trace_dir_bytes(const char *dir)
{
	long long n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[PATH_MAX + 300];
		struct stat st;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (strstr(e->d_name, ".nvlp") && stat(p, &st) == 0)
			n += st.st_size;
	}
	if (d)
		closedir(d);
	return n;
}

/* Remove the link-sampling lock files of the fake GPUs 0 and 1 whose UUIDs start at base
 * (FAKE_CUDA_UUID_BASE): a test's own, so parallel suites never share a lock. */
static inline void shim_unlink_gpu_locks(unsigned base)
{
	for (int dev = 0; dev < 2; dev++) {
		char path[128];
		int o = snprintf(path, sizeof path, "/dev/shm/nvlprof-link-");
		for (int b = 0; b < 16; b++)
			o += snprintf(path + o, sizeof path - (size_t)o, "%02x",
			              (base + (unsigned)dev * 16 + (unsigned)b) & 0xff);
		snprintf(path + o, sizeof path - (size_t)o, ".lock");
		unlink(path);
	}
}
/* Remove a child's trace directory (a line when it cannot). */
static inline void shim_rm_rf(const char *dir)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("    could not remove %s\n", dir);
}

#endif

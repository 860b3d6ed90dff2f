/* util.h: small helpers shared by the nvlprof subcommands: trace file lists, JSON strings, human units. */
#ifndef NVLP_UTIL_H
#define NVLP_UTIL_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */

/* Trace paths expanded from command-line arguments (FILE or DIR). */
struct nvlp_paths {
	char **v;
	size_t n, cap;
};
/*! Add one argument: a file is added as given (whatever its name); a directory adds every *.nvlp
 * file in it, in natural order (rank2 before rank10).
 * @return the number of paths added, or -1 with a one-line message naming arg in err */
int nvlp_paths_add(struct nvlp_paths *p, const char *arg, char *err, size_t errlen);
void nvlp_paths_free(struct nvlp_paths *p);

/*! Write s[0..len) as a JSON string literal, quotes included. Control characters are escaped and
 * bytes that are not valid UTF-8 become \u00XX, so the output is always valid JSON. */
void nvlp_json_string(FILE *f, const char *s, size_t len);
/*! Same for a NUL-terminated string; NULL writes null. */
void nvlp_json_cstr(FILE *f, const char *s);

/*! "0 B", "512 B", "1.5 KiB", "3.25 GiB". @return buf */
const char *nvlp_human_bytes(uint64_t n, char *buf, size_t len);
/*! "850 ns", "12.3 us", "4.56 ms", "7.89 s". @return buf */
const char *nvlp_human_ns(uint64_t ns, char *buf, size_t len);
/*! v in unit for people, the one formatter of text, HTML cards and JSON's human fields: bytes
 * ("B", "KiB", "MiB", "GiB") in binary units, times ("ns", "us", "ms", "s") in the unit they
 * reach, three significant digits ("47.5 GiB", "69.2 s", "200 us"); other units ("GB/s") and
 * none as the number with three significant digits, whole numbers whole. @return buf */
const char *an_fmt_value(char *buf, size_t len, double v, const char *unit);
/*! End of a command's output to f (named name in messages, "standard output" for stdout): flushes,
 * closes f unless it is stdout, and says on stderr why writing failed (full disk, closed pipe).
 * @return 0, or -1 the output is incomplete (the command then exits 2) */
int nvlp_out_finish(FILE *f, const char *name);
/*! Run fn(arg) on the calling thread and on nthreads - 1 more (nthreads is clamped to 1..256),
 * and wait for them all: fn takes its share of the work from arg (a shared counter). */
void nvlp_run_parallel(void *(*fn)(void *), void *arg, size_t nthreads);
/* > 0: nvlp_run_parallel uses at most this many threads (the fuzz target sets 1, so every pass
 * runs on the caller: no thread start per execution, and a crash replays the same way). */
extern int nvlp_max_threads;
/*! The part of path after its last '/'. */
const char *nvlp_basename(const char *path);

#endif

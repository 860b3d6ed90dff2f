/* test_findings_oom.c: out of memory while drawing the findings (findings.c and the detectors).
 * Each allocation an_findings_compute makes on a shipped trace fails in turn: it must return -1
 * with no findings, or, where the code copes with the failure, the findings it draws without it
 * (as many of each id, as much evidence); never a finding dropped or cut short without -1. The
 * allocator is replaced in this program (glibc's own underneath): not under a sanitizer. */
#include <stdio.h>    /* printf */
#include <stdlib.h>   /* malloc */
#include <string.h>   /* memcmp */
#include <dirent.h>   /* scandir */
#include <sys/stat.h> /* stat */
#include <unistd.h>   /* access */

#include "check.h"
#include "findings/findings.h"
#include "model/model.h" /* an_job_load */
#include "pipeline.h"    /* an_job_analyze */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REPLACED 0
#else
#define REPLACED 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

/* armed: count the allocations; fail_at: the one that fails (0 none) */
static int armed;
static long calls, fail_at;

static int fails(void)
{
	return armed && ++calls == fail_at;
}
void *malloc(size_t n)
{
	return fails() ? NULL : __libc_malloc(n);
}
void *calloc(size_t n, size_t size)
{
	return fails() ? NULL : __libc_calloc(n, size);
}
void *realloc(void *p, size_t n)
{
	return fails() ? NULL : __libc_realloc(p, n);
}
#endif

/* What must stay: per finding id, how many and how much evidence. Not the place_* keys: where a
 * main thread was comes from model/places.c's an_places_top, which tells no places when out of
 * memory (no error to pass on) */
struct shape {
	size_t n[AN_F_COUNT], nev[AN_F_COUNT];
};

static void shape_of(const struct an_findings *f, struct shape *s)
{
	memset(s, 0, sizeof *s);
	for (size_t i = 0; i < f->n; i++) {
		s->n[f->v[i].fid]++;
		for (int k = 0; k < f->v[i].nev; k++)
			s->nev[f->v[i].fid] += strncmp(f->v[i].ev[k].key, "place_", 6) != 0;
	}
}

#if REPLACED
static void trace_oom(const char *dir)
{
	struct an_job job;
	char err[256];
	char *p = (char *)dir;
	if (an_job_load(&job, &p, 1, 1, err, sizeof err) != 0) {
		CHECK(0, "%s loads: %s", dir, err);
		return;
	}
	an_job_analyze(&job);
	struct an_findings f;
	struct shape ref, got;
	armed = 1, calls = 0, fail_at = 0;
	int rc = an_findings_compute(&job, an_threshold_defaults, &f);
	armed = 0;
	long total = calls;
	shape_of(&f, &ref);
	an_findings_free(&f);
	CHECK(rc == 0 && total > 0, "%s: findings drawn with %ld allocations", dir, total);
	long oom = 0, same = 0, bad = 0;
	for (long k = 1; k <= total; k++) {
		armed = 1, calls = 0, fail_at = k;
		rc = an_findings_compute(&job, an_threshold_defaults, &f);
		armed = 0;
		shape_of(&f, &got);
		if (rc == -1 && !f.n && !f.v)
			oom++;
		else if (rc == 0 && !memcmp(&got, &ref, sizeof ref))
			same++;
		else if (!bad++)
			printf("allocation %ld of %ld failing: rc %d, %zu findings\n", k, total, rc,
			       f.n);
		an_findings_free(&f);
	}
	CHECK(!bad && oom > 0,
	      "%s: each of %ld allocations failing: -1 and no findings (%ld) or the same findings "
	      "(%ld), never fewer (%ld)",
	      dir, total, oom, same, bad);
	an_job_free(&job);
}
#endif

/* an_gen jobs: a mismatch before the hang it causes, dropped_records, a fallback that explains */
static void gen_oom(void)
{
	static const char *const args[] = {
	    "--steps 10 --kill-rank 1 --mismatch count:37 --python",
	    "--ranks 4 --drop-rank 2 --late-rank 1 --late-ms 30 --thrash --staged", "--fallback"};
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char gen[256], tmp[] = "/tmp/nvlp-oom-XXXXXX", cmd[768];
	snprintf(gen, sizeof gen, "%s/tests/progs/an_gen", build);
	if (access(gen, X_OK) || !mkdtemp(tmp)) {
		printf("SKIP: findings out of memory on an_gen jobs: no %s\n", gen);
		return;
	}
	for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
		char dir[64];
		snprintf(dir, sizeof dir, "%s/%zu", tmp, i);
		snprintf(cmd, sizeof cmd, "%s -o %s %s >/dev/null", gen, dir, args[i]);
		if (system(cmd) == 0)
			trace_oom(dir);
		else
			CHECK(0, "an_gen %s", args[i]);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	CHECK(system(cmd) == 0, "an_gen jobs removed");
}

/* Every job directory under dir (shipped and recorded traces) */
static void dir_oom(const char *dir)
{
	struct dirent **v;
	int n = scandir(dir, &v, NULL, alphasort);
	CHECK(n > 0, "%s: trace directories", dir);
	for (int i = 0; i < n; i++) {
		char path[512];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, v[i]->d_name);
		if (v[i]->d_name[0] != '.' && !stat(path, &st) && S_ISDIR(st.st_mode))
			trace_oom(path);
		free(v[i]);
	}
	free(v);
}

int main(void)
{
#if REPLACED
	dir_oom("examples/traces");
	dir_oom("tests/analyzer/traces");
	gen_oom();
#else
	printf("SKIP: findings out of memory: the allocator is the sanitizer's\n");
#endif
	return CHECK_DONE();
}

/* test_analyzer_partial.c: a partial whose indexes point outside its own tables (a file put
 * together by hand: the zstd checksum holds) is refused in one line, not used. */
#include <stdio.h>  /* fopen */
#include <stdlib.h> /* free */
#include <string.h> /* strstr */
#include <unistd.h> /* dup2 */

#include "check.h"
#include "model/model.h"
#include "out/partial.h"
#include "util/diag.h" /* an_diag_set_sink */

/* The layers say their errors through util/diag.h: on stderr here, as cli/main.c prints them */
static void diag_to_stderr(const char *msg)
{
	fputs(msg, stderr);
}

/* 0 if the partial of dir, changed by edit (NULL: as loaded), reads back; -1 if refused; stderr's
 * first line into msg */
static int roundtrip(const char *dir, void (*edit)(struct an_job *), char *msg, size_t len)
{
	struct an_job job;
	char err[256], path[] = "/tmp/nvlp-partial-XXXXXX";
	char *paths[] = {(char *)dir};
	if (an_job_load(&job, paths, 1, 1, err, sizeof err) != 0)
		return -2;
	if (edit)
		edit(&job);
	uint8_t *z = NULL;
	size_t n = an_partial_encode(&job, &z);
	an_job_free(&job);
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	if (!n || !f || fwrite(z, 1, n, f) != n || fclose(f))
		return -2;
	free(z);
	FILE *e = tmpfile();
	fflush(stderr);
	int saved = dup(2);
	dup2(fileno(e), 2);
	struct an_rank *v = NULL;
	size_t nv = 0;
	int rc = an_partial_read(path, &v, &nv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(e);
	if (!fgets(msg, (int)len, e))
		*msg = 0;
	msg[strcspn(msg, "\n")] = 0;
	fclose(e);
	remove(path);
	struct an_job back = {.ranks = v, .nranks = nv};
	an_job_free(&back);
	return rc;
}

static void bad_comm(struct an_job *job)
{
	job->ranks[0].calls[0].comm = (uint16_t)job->ranks[0].ncomms;
}
static void bad_sig(struct an_job *job)
{
	job->ranks[0].csig[3] = (uint16_t)job->ranks[0].ncsigs;
}
static void bad_inflight(struct an_job *job)
{
	struct an_rank *r = &job->ranks[0];
	for (size_t i = 0; i < job->nranks; i++)
		if (job->ranks[i].ninflight)
			r = &job->ranks[i];
	if (r->ninflight)
		r->inflight[0].call = (int64_t)r->ncalls;
}

int main(void)
{
	an_diag_set_sink(diag_to_stderr);
	const char *dir = "examples/traces/ddp_killed";
	char msg[512];
	CHECK(roundtrip(dir, NULL, msg, sizeof msg) == 0 && !*msg, "a partial as written reads back");
	int rc = roundtrip(dir, bad_comm, msg, sizeof msg);
	CHECK(rc == -1 && strstr(msg, "is corrupt (its contents do not decode)"),
	      "a call of a communicator the process does not have: refused (%s)", msg);
	rc = roundtrip(dir, bad_sig, msg, sizeof msg);
	CHECK(rc == -1 && strstr(msg, "is corrupt"), "a call signature past the table: refused");
	rc = roundtrip("tests/analyzer/traces/fail2_barrier", NULL, msg, sizeof msg);
	CHECK(rc == 0, "a partial with in-flight calls reads back");
	rc = roundtrip("tests/analyzer/traces/fail2_barrier", bad_inflight, msg, sizeof msg);
	CHECK(rc == -1 && strstr(msg, "is corrupt"), "an in-flight call past the calls: refused");
	return CHECK_DONE();
}

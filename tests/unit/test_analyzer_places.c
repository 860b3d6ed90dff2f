/* test_analyzer_places.c: where a thread was (places.c) from synthetic samples; with trace paths as arguments, the places of each process's main thread and other sampled threads printed (tests/runtime/test_pysample.sh). */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* atof, getenv */
#include <string.h> /* strcmp */

#include "check.h"
#include "model/model.h"
#include "pipeline.h" /* an_job_analyze */
#include "model/places.h"

static struct an_pystack stacks[] = {
    {11, "/w/train.py:23:load_next_batch\n/w/train.py:40:main\n/w/train.py:50:<module>\n"},
    {12, "/usr/lib/python3.12/threading.py:320:wait\n/w/train.py:41:step\n"},
    {13, "/usr/lib/python3.12/site-packages/torch/x.py:9:f\n"},
};

static void test_synthetic(void)
{
	/* main thread 100: chain 11 from 1 s, 12 from 3 s, none from 4 s, 11 again from 5 s; thread
	 * 7 in a call (12) from 2 s; a collective's attachment is not a sample */
	struct an_pyref refs[] = {
	    {100, 1000000000, 0, 11, NVLP_K_NONE}, {7, 2000000000, 0, 12, NVLP_K_NONE},
	    {100, 3000000000, 0, 12, NVLP_K_NONE}, {100, 3500000000, 9, 13, NVLP_K_NCCL},
	    {100, 4000000000, 0, 0, NVLP_K_NONE},  {100, 5000000000, 0, 11, NVLP_K_NONE},
	};
	struct an_rank r = {.ok = 1, .pid = 100, .offset = 1000, .t_last = 8000000000};
	r.pystacks = stacks, r.npystacks = 3;
	r.pyrefs = refs, r.npyrefs = sizeof refs / sizeof refs[0];
	struct an_place p;
	char line[200];
	CHECK(!an_place_at(&r, AN_PLACE_MAIN, 500001000, &p), "before the first sample: nothing");
	CHECK(an_place_at(&r, AN_PLACE_MAIN, 3600001000, &p) && p.pystack == 12 &&
	          p.since == 3000001000 && p.tid == 100,
	      "the main thread's chain at 3.6 s: since 3 s (job time), the collective's PYREF ignored");
	an_place_text(&p, line, sizeof line);
	CHECK(!strcmp(line, "0.6 s in step (train.py:41)"), "its line names the job's frame: '%s'", line);
	CHECK(an_place_at(&r, AN_PLACE_MAIN, 4500001000, &p) && p.pystack == 0,
	      "no Python location from 4 s");
	CHECK(an_place_at(&r, AN_PLACE_MAIN, 20000000000, &p) && p.pystack == 11 &&
	          p.at == 8000001000,
	      "asked past the end: the rank's last record bounds it");
	an_place_text(&p, line, sizeof line);
	CHECK(!strcmp(line, "3.0 s in load_next_batch (train.py:23) <- main (train.py:40) <- <module> "
	                    "(train.py:50)"),
	      "a chain of the job's frames: '%s'", line);
	CHECK(an_place_at(&r, AN_PLACE_MAIN, 7000001000, &p) && p.pystack == 11 && p.since == 5000001000,
	      "a sample holds until the next: at 7 s, the one from 5 s");
	CHECK(an_place_at(&r, 7, 6000001000, &p) && p.pystack == 12 && p.since == 2000001000,
	      "another thread by its tid");
	struct an_place_top top[4];
	uint64_t total;
	size_t n = an_places_top(&r, AN_PLACE_MAIN, 0, 8000001000, top, 4, &total);
	CHECK(n == 2 && top[0].pystack == 11 && top[0].ns == 5000000000ull && top[0].changes == 2 &&
	          top[1].pystack == 12 && top[1].ns == 1000000000ull && total == 7000000000ull,
	      "top locations over the whole run: 11 for 5 s (twice), 12 for 1 s, 7 s covered");
	n = an_places_top(&r, AN_PLACE_MAIN, 3200001000, 4200001000, top, 4, &total);
	CHECK(n == 1 && top[0].pystack == 12 && top[0].ns == 800000000ull && total == 1000000000ull,
	      "an interval inside a sample: cut at both ends");
	CHECK(an_places_top(&r, 99, 0, 8000001000, top, 4, &total) == 0 && total == 0,
	      "a thread never sampled: nothing");
	struct an_pystack lib = {13, "/usr/lib/python3.12/site-packages/torch/x.py:9:f\n"};
	p = (struct an_place){.pystack = 13, .text = lib.text, .since = 0, .at = 2500000000};
	an_place_text(&p, line, sizeof line);
	CHECK(!strcmp(line, "2.5 s in f (x.py:9)"), "library frames only: the innermost: '%s'", line);
}

/* Each process's main thread at its end, and its top places; then the other sampled threads'. */
static int print_job(char **paths, int n)
{
	struct an_job job;
	char err[256];
	if (an_job_load(&job, paths, n, 1, err, sizeof err) != 0) {
		printf("load failed: %s\n", err);
		return 1;
	}
	an_job_analyze(&job);
	for (size_t i = 0; i < job.nranks; i++) {
		const struct an_rank *r = &job.ranks[i];
		struct an_place p;
		char line[300];
		uint64_t end = (uint64_t)((int64_t)r->t_last + r->offset);
		uint64_t at = (uint64_t)((int64_t)r->t_first + r->offset) +
		              (uint64_t)(atof(getenv("PLACE_AT_S") ? getenv("PLACE_AT_S") : "0") * 1e9);
		if (an_place_at(r, AN_PLACE_MAIN, at, &p)) {
			an_place_text(&p, line, sizeof line);
			printf("place pid=%d main at %s s: %s\n", r->pid, getenv("PLACE_AT_S"), line);
		}
		if (an_place_at(r, AN_PLACE_MAIN, end, &p)) {
			an_place_text(&p, line, sizeof line);
			printf("place pid=%d main at end: %s\n", r->pid, line);
		}
		struct an_place_top top[5];
		uint64_t total;
		size_t k = an_places_top(r, AN_PLACE_MAIN, 0, end, top, 5, &total);
		for (size_t j = 0; j < k; j++) {
			struct an_place q = {.pystack = top[j].pystack, .text = top[j].text, .at = top[j].ns};
			an_place_text(&q, line, sizeof line);
			printf("top pid=%d main: %s\n", r->pid, line);
		}
		for (size_t j = 0; j < r->npyrefs; j++) {
			const struct an_pyref *x = &r->pyrefs[j];
			if (x->kind != NVLP_K_NONE || x->tid == (uint64_t)r->pid || !x->pystack)
				continue;
			struct an_place q = {.tid = x->tid, .pystack = x->pystack,
			                     .text = an_pystack_text(r, x->pystack)};
			an_place_text(&q, line, sizeof line);
			printf("sample pid=%d tid=%llu: %s\n", r->pid, (unsigned long long)x->tid,
			       line + strlen("0.0 s in "));
		}
	}
	an_job_free(&job);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return print_job(argv + 1, argc - 1);
	test_synthetic();
	return CHECK_DONE();
}

/* test_analyzer_hosts.c: hosts.c on its own: hosts numbered by name, clock offsets solved through
 * hosts that share no collective with the first (breadth first, both directions of an edge), the
 * hosts that cannot be reached counted as not corrected; the several-jobs check finds the same
 * first pair the pairwise scan did; hang members looked up in any number. */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcpy */

#include "check.h"
#include "model/model.h"
#include "model/stages.h"

static struct an_rank *add_rank(struct an_job *j, const char *host, int rank, const char *hdr)
{
	struct an_rank *r = &j->ranks[j->nranks++];
	memset(r, 0, sizeof *r);
	r->ok = 1;
	snprintf(r->host, sizeof r->host, "%s", host);
	r->rank = rank;
	r->pid = 1000 + rank;
	r->header = strdup(hdr);
	return r;
}

static void free_ranks(struct an_job *j)
{
	for (size_t i = 0; i < j->nranks; i++)
		free(j->ranks[i].header);
	free(j->ranks);
	free(j->by_host);
	free(j->host_at);
	an_index_free(&j->rank_ix);
}

static void pair3(struct an_clock_pairs *p, uint32_t a, uint32_t h, int64_t d)
{
	for (int i = 0; i < 3; i++)
		CHECK(an_clock_pair_add(p, a, h, d + (i == 1 ? 0 : i ? 9 : -9), 0) == 0, "pair added");
}

static void test_clocks(void)
{
	struct an_job j = {0};
	j.ranks = calloc(8, sizeof *j.ranks);
	static const char *const hosts[] = {"a", "c", "b", "d", "e", "a"};
	for (int i = 0; i < 6; i++)
		add_rank(&j, hosts[i], i, "cmdline=python3 train.py\nppid=1\n");
	CHECK(an_hosts_number(&j) == 0 && j.nhosts == 5, "5 hosts numbered (%zu)", j.nhosts);
	CHECK(j.ranks[0].host_ix == j.ranks[5].host_ix && j.ranks[0].host_ix != j.ranks[1].host_ix,
	      "one host, one number");
	uint32_t a = j.ranks[0].host_ix, c = j.ranks[1].host_ix, b = j.ranks[2].host_ix;
	uint32_t e = j.ranks[4].host_ix;
	struct an_clock_pairs p = {0};
	pair3(&p, a, b, 5000);  /* b's clock 5 us ahead of a's */
	pair3(&p, b, c, 7000);  /* c's 7 us ahead of b's: 12 us ahead of a's, through b */
	pair3(&p, e, b, 3000);  /* b's 3 us ahead of e's: e 2 us ahead of a's */
	CHECK(an_clock_pair_add(&p, a, j.ranks[3].host_ix, 1, 0) == 0, "one difference for d");
	an_clock_solve(&j, &p, a);
	CHECK(j.ranks[2].refine == -5000 && j.ranks[2].offset == -5000, "b corrected by its median (%lld)",
	      (long long)j.ranks[2].refine);
	CHECK(j.ranks[1].refine == -12000, "c corrected through b (%lld)", (long long)j.ranks[1].refine);
	CHECK(j.ranks[4].refine == -2000, "e corrected through b, the edge read backwards (%lld)",
	      (long long)j.ranks[4].refine);
	CHECK(j.ranks[3].refine == 0 && j.ranks[0].refine == 0 && j.ranks[5].refine == 0,
	      "d (one difference) and the reference host not corrected");
	CHECK(j.hosts_by_gpu == 3 && j.hosts_uncorrected == 1 && j.hosts_by_exit == 0,
	      "3 hosts by completions, 1 not corrected (%zu %zu %zu)", j.hosts_by_gpu,
	      j.hosts_uncorrected, j.hosts_by_exit);
	CHECK(j.max_refine_ns == 12000, "largest correction 12 us (%.0f)", j.max_refine_ns);
	free_ranks(&j);
}

static void test_mix(void)
{
	struct an_job j = {0};
	j.ranks = calloc(8, sizeof *j.ranks);
	for (int i = 0; i < 5; i++)
		add_rank(&j, i < 3 ? "h0" : "h1", i, "cmdline=/usr/bin/python3 train.py\nppid=77\n");
	an_hosts_number(&j);
	size_t x = 9, y = 9;
	char why[320];
	CHECK(an_job_mix(&j, &x, &y, why, sizeof why) == 0, "one job: no pair");
	free(j.ranks[4].header); /* rank 4: another launcher on h1 than rank 3's */
	j.ranks[4].header = strdup("cmdline=python3 train.py\nppid=78\n");
	free(j.ranks[2].header); /* rank 2: another program */
	j.ranks[2].header = strdup("cmdline=/opt/bin/torchrun x\nppid=77\n");
	CHECK(an_job_mix(&j, &x, &y, why, sizeof why) == 1 && x == 0 && y == 2 &&
	          !strcmp(why, "pid 1000 ran python3, pid 1002 ran torchrun"),
	      "first pair (0, 2): different programs (%zu %zu %s)", x, y, why);
	free(j.ranks[2].header);
	j.ranks[2].header = strdup("cmdline=python3 train.py\nppid=77\n");
	CHECK(an_job_mix(&j, &x, &y, why, sizeof why) == 1 && x == 3 && y == 4 &&
	          !strcmp(why, "pids 1003 and 1004 on h1 have different parents (77, 78)"),
	      "then (3, 4): different parents on one host (%zu %zu %s)", x, y, why);
	j.ranks[1].t_real0 = 1;
	j.ranks[3].t_real0 = 1 + 601 * 1000000000ull;
	CHECK(an_job_mix(&j, &x, &y, why, sizeof why) == 1 && x == 1 && y == 3 &&
	          !strcmp(why, "pids 1001 and 1003 started 601 s apart"),
	      "then (1, 3): started far apart (%zu %zu %s)", x, y, why);
	free_ranks(&j);
}

static void test_members(void)
{
	struct an_hang h = {.nmissing = 3, .npresent = 5000};
	h.missing = malloc(3 * sizeof(int));
	h.present = malloc(5000 * sizeof(int));
	h.missing[0] = 4999, h.missing[1] = 17, h.missing[2] = 300;
	for (int i = 0; i < 5000; i++)
		h.present[i] = 5000 + 4999 - i;
	an_hang_sort(&h);
	CHECK(h.missing[0] == 17 && h.present[0] == 5000, "lists sorted");
	CHECK(an_hang_member(&h, 300) == AN_HANG_MISSING && an_hang_member(&h, 9999) == AN_HANG_PRESENT &&
	          an_hang_member(&h, 7000) == AN_HANG_PRESENT && an_hang_member(&h, 18) == 0 &&
	          an_hang_member(&h, 10000) == 0,
	      "members of a 5,003-rank hang found, others not");
	free(h.missing);
	free(h.present);
	struct an_call c = {.comm = 70000};
	CHECK(c.comm == 70000 && AN_MAX_COMMS > 65535, "a call's communicator index holds 70,000");
}

int main(void)
{
	test_clocks();
	test_mix();
	test_members();
	return CHECK_DONE();
}

/* merge.c: `nvlprof merge`: the job's report from the partials `report --partial` wrote on each
 * node, the same as `report` over all the traces at once. */
#include <errno.h>  /* errno */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* qsort */
#include <string.h> /* strcmp */

#include "cli/argparse.h"
#include "cli/commands.h"
#include "out/partial.h"
#include "out/report.h"
#include "model/stages.h" /* an_hosts_number */
#include "util/util.h" /* nvlp_out_finish */
#include "util/containers.h" /* AN_CMP_KEY */

/* A process of the merged job, for the checks across partials: its partial, its key. */
struct owner {
	uint64_t key;
	const char *host;
	int pid;
	int part;
};

/* by key, then host and pid: 0 for one process */
static int owner_cmp_key(const struct owner *x, const struct owner *y)
{
	AN_CMP_KEY(x, y, key);
	int c = x->host && y->host ? strcmp(x->host, y->host) : 0;
	if (c)
		return c;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int owner_cmp(const void *a, const void *b)
{
	const struct owner *x = a, *y = b;
	int c = owner_cmp_key(x, y);
	return c ? c : x->part - y->part;
}

/* The first process found in two partials of o (k of them, sorted): one line. @return -1 if so */
static int first_twice(const struct owner *o, size_t k, char **names)
{
	for (size_t i = 1; i < k; i++) {
		const struct owner *a = &o[i - 1], *b = &o[i];
		if (a->part == b->part || owner_cmp_key(a, b))
			continue;
		if (a->key != UINT64_MAX)
			fprintf(stderr,
			        "nvlprof: merge: rank %llu is in both %s and %s (give each node's traces "
			        "to one partial, and each partial once)\n",
			        (unsigned long long)a->key, names[a->part], names[b->part]);
		else
			fprintf(stderr,
			        "nvlprof: merge: process %d on %s is in both %s and %s (give each node's "
			        "traces to one partial, and each partial once)\n",
			        a->pid, a->host, names[a->part], names[b->part]);
		return -1;
	}
	return 0;
}

/* A rank in two partials (the processes that did a rank's work: a launcher shares its child's
 * RANK), or a process (host and pid) in two. @return -1 after the error */
static int check_duplicates(const struct an_rank *v, const int *part, size_t n, char **names)
{
	struct owner *o = malloc((n ? n : 1) * sizeof *o);
	if (!o)
		return 0;
	int bad = 0;
	for (int pass = 0; pass < 2 && !bad; pass++) {
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			const struct an_rank *r = &v[i];
			int by_rank = r->rank >= 0 && an_rank_is_worker(r->kind_count, r->truncated);
			if (r->ok && (pass || by_rank))
				o[k++] = (struct owner){pass ? UINT64_MAX : (uint64_t)r->rank,
				                        pass ? r->host : NULL, pass ? r->pid : 0, part[i]};
		}
		qsort(o, k, sizeof *o, owner_cmp);
		bad = first_twice(o, k, names);
	}
	free(o);
	return bad;
}

static int find(int *up, int x)
{
	while (up[x] != x)
		x = up[x] = up[up[x]];
	return x;
}

/* The world size a partial's processes were started with: the first header's that gives one */
static long world_of(const struct an_rank *r)
{
	char b[32];
	const char *w = r->ok ? an_header_get(r, "world_size", b, sizeof b) : NULL;
	long n = w ? strtol(w, NULL, 10) : -1;
	return n > 0 ? n : -1;
}

/* Partials of different jobs: world sizes that differ, or partials that share no communicator
 * with the others, directly or through a third (a job's ranks share its world communicator).
 * Partials without communicators are left out of the second test. @return -1 after the error */
static int check_one_job(const struct an_rank *v, const int *part, size_t n, int np,
                         char **names)
{
	long *world = malloc((size_t)np * sizeof *world);
	int *up = malloc((size_t)np * sizeof *up), *has = calloc((size_t)np, sizeof *has);
	size_t nc = 0;
	for (size_t i = 0; i < n; i++)
		nc += v[i].ok ? v[i].ncomms : 0;
	struct owner *o = malloc((nc ? nc : 1) * sizeof *o);
	int bad = 0;
	if (!world || !up || !has || !o)
		goto out;
	for (int p = 0; p < np; p++)
		world[p] = -1, up[p] = p;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		long w = world_of(&v[i]);
		int p = part[i];
		if (w > 0 && world[p] < 0)
			world[p] = w;
		for (size_t c = 0; v[i].ok && c < v[i].ncomms; c++)
			o[k++] = (struct owner){v[i].comms[c].hash, NULL, 0, p}, has[p] = 1;
	}
	qsort(o, k, sizeof *o, owner_cmp);
	for (size_t i = 1; i < k; i++)
		if (o[i].key == o[i - 1].key)
			up[find(up, o[i].part)] = find(up, o[i - 1].part);
	int first_w = -1, first_c = -1;
	for (int p = 0; p < np && !bad; p++) {
		if (world[p] > 0 && first_w >= 0 && world[p] != world[first_w])
			bad = fprintf(stderr,
			              "nvlprof: merge: %s and %s are from different jobs (world size "
			              "%ld and %ld)\n",
			              names[first_w], names[p], world[first_w], world[p]);
		else if (has[p] && first_c >= 0 && find(up, p) != find(up, first_c))
			bad = fprintf(stderr,
			              "nvlprof: merge: %s and %s are from different jobs (no "
			              "communicator in common)\n",
			              names[first_c], names[p]);
		if (world[p] > 0 && first_w < 0)
			first_w = p;
		if (has[p] && first_c < 0)
			first_c = p;
	}
out:
	free(world), free(up), free(has), free(o);
	return bad ? -1 : 0;
}

/* The processes of the np partials, checked to be of one job and each once, into job (ordered as
 * an_job_load orders them). @return 0, -1 after the error */
static int merge_load(char **names, int np, struct an_job *job)
{
	memset(job, 0, sizeof *job);
	int *part = NULL;
	size_t n = 0;
	for (int p = 0; p < np; p++) {
		struct an_rank *v;
		size_t m;
		if (an_partial_read(names[p], &v, &m) != 0)
			goto fail;
		struct an_rank *all = realloc(job->ranks, (n + m + 1) * sizeof *all);
		int *pp = realloc(part, (n + m + 1) * sizeof *pp);
		if (all)
			job->ranks = all;
		if (pp)
			part = pp;
		if (!all || !pp) {
			struct an_job j = {.ranks = v, .nranks = m};
			an_job_free(&j);
			fprintf(stderr, "nvlprof: merge: out of memory\n");
			goto fail;
		}
		memcpy(job->ranks + n, v, m * sizeof *v);
		for (size_t i = 0; i < m; i++)
			part[n + i] = p;
		free(v);
		n += m;
		job->nranks = n;
	}
	if (check_duplicates(job->ranks, part, n, names) || check_one_job(job->ranks, part, n, np, names))
		goto fail;
	free(part);
	an_job_order(job);
	if (!job->nok) {
		fprintf(stderr, "nvlprof: merge: no readable trace in the partials (%zu process(es))\n",
		        n);
		an_job_free(job);
		return -1;
	}
	/* as an_job_load ends: the hosts numbered once, for every later stage */
	if (an_hosts_number(job) < 0) {
		fprintf(stderr, "nvlprof: merge: out of memory numbering the hosts of %zu process(es)\n",
		        n);
		an_job_free(job);
		return -1;
	}
	return 0;
fail:
	free(part);
	an_job_free(job);
	return -1;
}

static void usage(FILE *o)
{
	fprintf(o, "usage: nvlprof merge [--json] [-o FILE] [--threshold NAME=VALUE]... "
	           "PARTIAL...\n"
	           "The job's report from the partials `nvlprof report --partial OUT.part DIR` "
	           "wrote where the\ntraces are (one per node): the same report as `nvlprof "
	           "report` over all the traces.\n"
	           "  --json               JSON output (analyzer/REPORT_JSON.md)\n"
	           "  -o FILE              write the report to FILE\n"
	           "  --threshold N=V      change a threshold (as report; the names: report "
	           "--help)\n"
	           "  --symbols DIR        as report --symbols\n"
	           "Exit status: 0 report written, 2 usage error, a partial unreadable, damaged, "
	           "of another\nversion or of another job, or the report could not be written.\n"
	           "See docs/DISTRIBUTED.md.\n");
}

int nvlp_cmd_merge(int argc, char **argv)
{
	double th[AN_TH_COUNT];
	memcpy(th, an_threshold_defaults, sizeof th);
	int json = 0, threads = 0; /* -j: accepted, not used */
	const char *outpath = NULL;
	const struct an_opt opts[] = {
	    {"--json", NULL, AN_OPT_FLAG, &json},
	    {"-o", NULL, AN_OPT_VALUE, &outpath}, /* no value: an unknown option */
	    {NULL},
	};
	struct an_cmdline c = {
	    .opts = opts,
	    .th = th,
	    .threads = &threads,
	    .help = usage,
	    .usage = usage,
	    .unknown = {"nvlprof: merge: unknown option ",
	                " (--json, -o FILE, --threshold NAME=VALUE, --symbols DIR; see --help)"},
	    .none = {"nvlprof: merge: no input: give the partials report --partial wrote", NULL, 1},
	};
	int rc = an_parse_args(&c, argc, argv);
	if (rc >= 0)
		return rc;
	struct an_job job;
	struct an_findings f;
	if (merge_load(c.args, c.nargs, &job) != 0 || an_open_loaded(th, &job, &f) != 0)
		return 2;
	return an_report_write("merge", outpath, json, &job, &f);
}

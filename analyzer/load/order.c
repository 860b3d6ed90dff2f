/* order.c: the loaded processes made a job: each one's header values and rank, the processes put
 * in report order (ranks first, launchers and helpers last), the hosts numbered and the rank
 * numbers indexed once, for every later stage. */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* malloc, qsort, bsearch, strtol */
#include <string.h> /* strcmp */

#include "load/load.h"
#include "model/model.h"
#include "nvlp_trace.h"
#include "util/containers.h" /* AN_CMP_KEY */

/* ---- a process's header and rank ---- */
const char *an_header_get(const struct an_rank *r, const char *key, char *buf, size_t len)
{
	if (!r->header)
		return NULL;
	size_t kl = strlen(key);
	for (const char *p = r->header; *p;) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		if (ll > kl && p[kl] == '=' && !strncmp(p, key, kl)) {
			size_t vl = ll - kl - 1;
			if (vl >= len)
				vl = len - 1;
			memcpy(buf, p + kl + 1, vl);
			buf[vl] = 0;
			return buf;
		}
		p += ll + (nl ? 1 : 0);
	}
	return NULL;
}

static int hdr_int(const char *s)
{
	char *end;
	long v = s && *s ? strtol(s, &end, 10) : -1;
	return s && *s && !*end && v >= 0 && v < AN_MAX_NRANKS ? (int)v : -1;
}

void an_rank_guess_init(struct an_rank_guess *g, const char *header_rank, const char *header_world)
{
	g->header_rank = hdr_int(header_rank);
	g->header_world = hdr_int(header_world);
	g->best_nranks = 0;
	g->comm_rank = -1;
}

int an_rank_guess_overrides(const struct an_rank_guess *g)
{
	return g->header_rank >= 0 && g->comm_rank >= 0 && g->comm_rank != g->header_rank &&
	       g->header_world > 1 && g->best_nranks == g->header_world;
}

void an_rank_guess_comm(struct an_rank_guess *g, int rank, int nranks)
{
	if (rank >= 0 && nranks > g->best_nranks && rank < nranks) {
		g->best_nranks = nranks;
		g->comm_rank = rank;
	}
}

int an_rank_guess_get(const struct an_rank_guess *g)
{
	return g->header_rank >= 0 && !an_rank_guess_overrides(g) ? g->header_rank : g->comm_rank;
}

int an_rank_is_worker(const uint64_t kind_count[NVLP_K_COUNT], int truncated)
{
	if (truncated)
		return 1;
	static const unsigned work[] = {NVLP_K_NCCL,    NVLP_K_COPY, NVLP_K_MANAGED, NVLP_K_PEER,
	                                NVLP_K_KERNEL,  NVLP_K_GPUCOPY, NVLP_K_UM, NVLP_K_NCCLPROF,
	                                NVLP_K_LINKSAMPLE};
	for (size_t i = 0; i < sizeof work / sizeof work[0]; i++)
		if (kind_count[work[i]])
			return 1;
	return 0;
}

/* ---- the job's processes in report order ---- */
static int cmp_rank(const void *a, const void *b)
{
	const struct an_rank *x = a, *y = b;
	if (x->ok != y->ok)
		return y->ok - x->ok;
	AN_CMP_KEY(x, y, rank);
	int c = strcmp(x->host, y->host);
	if (c)
		return c;
	AN_CMP_KEY(x, y, pid);
	return strcmp(x->path, y->path);
}

/* The traces' parents, sorted by (ppid, host): a launcher is found by its pid in O(log n). */
struct parent {
	long ppid;
	const char *host;
};
static int cmp_parent(const void *a, const void *b)
{
	const struct parent *x = a, *y = b;
	return x->ppid != y->ppid ? (x->ppid < y->ppid ? -1 : 1) : strcmp(x->host, y->host);
}
static struct parent *parents_of(const struct an_job *job, size_t nf)
{
	struct parent *p = malloc((nf ? nf : 1) * sizeof *p);
	for (size_t i = 0; p && i < nf; i++) {
		char b[32];
		const char *x = job->ranks[i].ok ? an_header_get(&job->ranks[i], NVLP_HDR_PPID, b, sizeof b)
		                                 : NULL;
		p[i] = (struct parent){x ? strtol(x, NULL, 10) : -1, job->ranks[i].host};
	}
	if (p)
		qsort(p, nf, sizeof *p, cmp_parent);
	return p;
}

/* A trace cut short keeps its place among the ranks (it may have lost its work), unless it did
 * none and is the parent of a traced process of its host: a launcher killed with its job
 * (kill -9 of the tree, a time limit) is a launcher, not a rank. */
static int is_worker(const struct an_rank *r, const struct parent *par, size_t nf)
{
	if (!an_rank_is_worker(r->kind_count, 0))
		return r->truncated && !(par && bsearch(&(struct parent){r->pid, r->host}, par, nf,
		                                        sizeof *par, cmp_parent));
	return 1;
}

/* Processes that did no rank's work go last, out of every table; when none did any (a trace
 * without GPU or NCCL records at all) all stay, so the report still shows them. */
static void workers_first(struct an_job *job, size_t nf)
{
	size_t nw = 0;
	struct parent *par = parents_of(job, nf);
	for (size_t i = 0; i < nf; i++)
		nw += job->ranks[i].ok && is_worker(&job->ranks[i], par, nf);
	if (nw) {
		struct an_rank *tmp = malloc(nf * sizeof *tmp);
		if (tmp) {
			size_t a = 0, b = 0;
			for (int pass = 0; pass < 3; pass++)
				for (size_t i = 0; i < nf; i++) {
					struct an_rank *r = &job->ranks[i];
					int cls = !r->ok ? 1 : is_worker(r, par, nf) ? 0 : 2;
					if (cls == pass)
						tmp[a++] = *r;
					b += pass == 2 && cls == 2;
				}
			memcpy(job->ranks, tmp, nf * sizeof *tmp);
			free(tmp);
			job->nothers = b;
			job->nranks = nf - b;
		}
	}
	free(par);
}

void an_job_order(struct an_job *job)
{
	size_t nf = job->nranks + job->nothers;
	job->nranks = nf;
	job->nothers = 0;
	job->nok = 0;
	qsort(job->ranks, nf, sizeof *job->ranks, cmp_rank);
	workers_first(job, nf);
	for (size_t i = 0; i < job->nranks; i++)
		job->nok += job->ranks[i].ok;
}

/* ---- host numbers ---- */
static int cmp_host(const void *a, const void *b, void *arg)
{
	const struct an_rank *r = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(r[x].host, r[y].host);
	return c ? c : (x > y) - (x < y);
}

int an_hosts_number(struct an_job *job)
{
	size_t n = job->nranks + job->nothers;
	size_t *ix = malloc((n ? n : 1) * sizeof *ix);
	if (!ix)
		return -1;
	for (size_t i = 0; i < n; i++)
		ix[i] = i;
	qsort_r(ix, n, sizeof *ix, cmp_host, job->ranks);
	uint32_t h = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && strcmp(job->ranks[ix[i]].host, job->ranks[ix[i - 1]].host))
			h++;
		job->ranks[ix[i]].host_ix = h;
	}
	job->nhosts = n ? h + 1 : 0;
	job->by_host = ix;
	job->host_at = calloc(job->nhosts + 1, sizeof *job->host_at);
	if (!job->host_at)
		return -1;
	for (size_t i = 0; i < n; i++)
		job->host_at[job->ranks[ix[i]].host_ix + 1]++;
	for (size_t k = 0; k < job->nhosts; k++)
		job->host_at[k + 1] += job->host_at[k];
	for (size_t f = 0; f < job->nranks; f++) { /* the rank numbers' first processes */
		int id = job->ranks[f].rank >= 0 ? job->ranks[f].rank : (int)f;
		if (an_index_get(&job->rank_ix, (uint64_t)id, 0) < 0 &&
		    an_index_put(&job->rank_ix, (uint64_t)id, 0, (uint32_t)f))
			return -1;
	}
	return 0;
}

size_t an_hosts_of_ok(const struct an_job *job)
{
	size_t n = 0;
	for (size_t h = 0; h < job->nhosts; h++) {
		int any = 0;
		for (size_t p = job->host_at[h]; p < job->host_at[h + 1] && !any; p++)
			any = job->by_host[p] < job->nranks && job->ranks[job->by_host[p]].ok;
		n += any != 0;
	}
	return n;
}

/* hosts.c: the hosts' clock offsets solved from the completion differences of collectives that cross
 * hosts (the hosts are numbered by load/order.c), the several-jobs check and the hang and rank
 * look-ups, all in time linear (or n log n) in the ranks. */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* qsort, strtol */
#include <string.h> /* strcmp, strcspn */

#include "model/model.h"
#include "nvlp_trace.h"
#include "model/stages.h"

/* ---- clock offsets per host ---- */
static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

int an_clock_pair_add(struct an_clock_pairs *p, uint32_t anchor, uint32_t host, int64_t d,
                      int by_exit)
{
	long e = an_index_get(&p->ix, anchor, host);
	if (e < 0) {
		struct an_clock_edge *x = PUSH(p->e, p->n, p->cap);
		if (!x || an_index_put(&p->ix, anchor, host, (uint32_t)(p->n - 1)))
			return -1;
		*x = (struct an_clock_edge){.a = anchor, .h = host};
		e = (long)(p->n - 1);
	}
	struct an_clock_edge *x = &p->e[e];
	int64_t *v = PUSH(x->v, x->n, x->cap);
	if (!v)
		return -1;
	*v = d;
	x->nexit += by_exit != 0;
	return 0;
}

void an_clock_pairs_free(struct an_clock_pairs *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->e[i].v);
	free(p->e);
	an_index_free(&p->ix);
	memset(p, 0, sizeof *p);
}

/* Each edge's median (edges of fewer than 3 differences: none), and the edges of each host in
 * adj[at[h] .. at[h + 1]). @return 0, or -1 out of memory */
static int edge_medians(struct an_clock_pairs *p, size_t nh, size_t **at, size_t **adj)
{
	*at = calloc(nh + 2, sizeof **at);
	*adj = malloc((2 * p->n + 1) * sizeof **adj);
	if (!*at || !*adj)
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		struct an_clock_edge *x = &p->e[i];
		x->ok = x->n >= 3;
		if (x->ok) {
			qsort(x->v, x->n, sizeof *x->v, cmp_i64);
			x->med = x->v[x->n / 2];
			(*at)[x->a + 2]++;
			(*at)[x->h + 2]++;
		}
	}
	for (size_t h = 0; h < nh; h++)
		(*at)[h + 2] += (*at)[h + 1];
	for (size_t i = 0; i < p->n; i++) /* in edge order, each host's list */
		if (p->e[i].ok) {
			(*adj)[(*at)[p->e[i].a + 1]++] = i;
			(*adj)[(*at)[p->e[i].h + 1]++] = i;
		}
	return 0;
}

/* Host offsets from the reference host outward (breadth first: the hosts sharing a collective
 * with it first, each from its own differences, as they always were; then hosts reached only
 * through others), applied to every rank of each; the report's counts of how. */
void an_clock_solve(struct an_job *job, struct an_clock_pairs *p, uint32_t ref)
{
	size_t nh = job->nhosts, *at = NULL, *adj = NULL;
	int64_t *m = calloc(nh ? nh : 1, sizeof *m); /* per host: the median to subtract */
	int8_t *how = calloc(nh ? nh : 1, sizeof *how); /* 0 not reached, 1 GPU, 2 exits, 3 ref */
	uint32_t *q = malloc((nh ? nh : 1) * sizeof *q);
	if (!m || !how || !q || ref >= nh || edge_medians(p, nh, &at, &adj) < 0)
		goto out;
	size_t qh = 0, qt = 0;
	how[ref] = 3;
	q[qt++] = ref;
	while (qh < qt) {
		uint32_t u = q[qh++];
		for (size_t k = at[u]; k < at[u + 1]; k++) {
			const struct an_clock_edge *x = &p->e[adj[k]];
			uint32_t v = x->a == u ? x->h : x->a;
			if (how[v])
				continue;
			/* a difference is (v's clock - u's): v's median is u's plus it */
			m[v] = u == ref ? x->med
			                : x->a == u ? an_add_i64(m[u], x->med) : an_sub_i64(m[u], x->med);
			how[v] = x->nexit * 2 > x->n ? 2 : 1;
			q[qt++] = v;
		}
	}
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (how[r->host_ix] == 1 || how[r->host_ix] == 2) {
			r->offset = an_sub_i64(r->offset, m[r->host_ix]);
			r->refine = an_sub_i64(0, m[r->host_ix]);
		}
	}
	for (size_t h = 0; h < nh; h++) {
		double a = m[h] < 0 ? -(double)m[h] : (double)m[h];
		if ((how[h] == 1 || how[h] == 2) && a > job->max_refine_ns)
			job->max_refine_ns = a;
	}
	for (size_t f = 0; f < job->nranks; f++) { /* counted per host with a readable rank */
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok || how[r->host_ix] < 0 || how[r->host_ix] == 3)
			continue;
		job->hosts_by_gpu += how[r->host_ix] == 1;
		job->hosts_by_exit += how[r->host_ix] == 2;
		job->hosts_uncorrected += how[r->host_ix] == 0;
		how[r->host_ix] = -1;
	}
out:
	free(at);
	free(adj);
	free(m);
	free(how);
	free(q);
	an_clock_pairs_free(p);
}

/* ---- several jobs in one directory ---- */
/* What the check compares of each rank, read from its header once. */
struct mixr {
	char prog[128], ppid[32];
	int has_ppid;
	long launcher;
};
static void program_of(const struct an_rank *r, char *out, size_t len)
{
	char cmd[256];
	const char *c = an_header_get(r, NVLP_HDR_CMDLINE, cmd, sizeof cmd);
	size_t n = c ? strcspn(c, " ") : 0;
	const char *slash = c ? memrchr(c, '/', n) : NULL;
	if (slash) {
		n -= (size_t)(slash + 1 - c);
		c = slash + 1;
	}
	snprintf(out, len, "%.*s", (int)n, c ? c : "");
}
/* The parent of r's launcher: r's parent, or, when that is another rank of r's host (Lightning's
 * strategy="ddp" re-executes the script from rank 0), that rank's, and so on; pids: (host, pid)
 * -> the first readable rank that is it */
static long launcher_of(const struct an_job *job, const struct an_index *pids, size_t f)
{
	const struct an_rank *at = &job->ranks[f];
	long p = -1;
	for (int hop = 0; at && hop < 64; hop++) {
		char b[32];
		const char *x = an_header_get(at, NVLP_HDR_PPID, b, sizeof b);
		p = x ? strtol(x, NULL, 10) : -1;
		long k = p > 0 ? an_index_get(pids, job->ranks[f].host_ix, (uint64_t)p) : -1;
		at = k >= 0 ? &job->ranks[k] : NULL; /* go up through the rank that is p */
	}
	return p;
}
/* The reason pair (a, r) looks like two jobs, the three tests in their order. @return 1 */
static int mix_why(const struct an_job *job, const struct mixr *m, size_t j, size_t i, char *why,
                   size_t len)
{
	const struct an_rank *a = &job->ranks[j], *r = &job->ranks[i];
	uint64_t d = r->t_real0 > a->t_real0 ? r->t_real0 - a->t_real0 : a->t_real0 - r->t_real0;
	if (*m[j].prog && *m[i].prog && strcmp(m[j].prog, m[i].prog))
		snprintf(why, len, "pid %d ran %s, pid %d ran %s", a->pid, m[j].prog, r->pid,
		         m[i].prog);
	else if (m[j].has_ppid && m[i].has_ppid && a->host_ix == r->host_ix &&
	         strcmp(m[j].ppid, m[i].ppid) && m[j].launcher != m[i].launcher)
		snprintf(why, len, "pids %d and %d on %s have different parents (%s, %s)", a->pid,
		         r->pid, r->host, m[j].ppid, m[i].ppid);
	else if (r->t_real0 && a->t_real0 && d > AN_MIX_START_S * 1000000000ull)
		snprintf(why, len, "pids %d and %d started %.0f s apart", a->pid, r->pid,
		         (double)d / 1e9);
	else
		return 0;
	return 1;
}

/* Per rank what the check compares; pids filled. @return the table, or NULL out of memory */
static struct mixr *mix_prepare(const struct an_job *job, struct an_index *pids)
{
	struct mixr *m = calloc(job->nranks ? job->nranks : 1, sizeof *m);
	for (size_t f = 0; m && f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (r->ok && r->pid > 0 && an_index_get(pids, r->host_ix, (uint64_t)r->pid) < 0 &&
		    an_index_put(pids, r->host_ix, (uint64_t)r->pid, (uint32_t)f)) {
			free(m);
			return NULL;
		}
	}
	for (size_t f = 0; m && f < job->nranks; f++) {
		if (!job->ranks[f].ok)
			continue;
		program_of(&job->ranks[f], m[f].prog, sizeof m[f].prog);
		m[f].has_ppid = an_header_get(&job->ranks[f], NVLP_HDR_PPID, m[f].ppid,
		                              sizeof m[f].ppid) != NULL;
		m[f].launcher = m[f].has_ppid ? launcher_of(job, pids, f) : -1;
	}
	return m;
}

/* The first readers of a value and the first with another: is there an earlier one unlike v? */
struct firsts {
	size_t a, b; /* SIZE_MAX: none */
};
#define NONE_YET ((size_t)-1)
static int unlike_before(const struct firsts *x, int differs_from_a)
{
	return x->a != NONE_YET && (differs_from_a || x->b != NONE_YET);
}
static void firsts_add(struct firsts *x, size_t i, int differs_from_a)
{
	if (x->a == NONE_YET)
		x->a = i;
	else if (x->b == NONE_YET && differs_from_a)
		x->b = i;
}

int an_job_mix(const struct an_job *job, size_t *pa, size_t *pr, char *why, size_t len)
{
	struct an_index pids = {0};
	struct mixr *m = mix_prepare(job, &pids);
	struct firsts prog = {NONE_YET, NONE_YET}, *host = malloc((job->nhosts + 1) * sizeof *host);
	uint64_t tmin = UINT64_MAX, tmax = 0, far = AN_MIX_START_S * 1000000000ull;
	int found = 0;
	for (size_t h = 0; host && h <= job->nhosts; h++)
		host[h] = (struct firsts){NONE_YET, NONE_YET};
	for (size_t i = 0; m && host && i < job->nranks && !found; i++) {
		const struct an_rank *r = &job->ranks[i];
		if (!r->ok)
			continue;
		/* an earlier rank unlike this one in some test: then the first such pair, in order */
		int dp = *m[i].prog && prog.a != NONE_YET && strcmp(m[prog.a].prog, m[i].prog);
		struct firsts *hx = &host[r->host_ix < job->nhosts ? r->host_ix : job->nhosts];
		int dl = m[i].has_ppid && hx->a != NONE_YET && m[hx->a].launcher != m[i].launcher;
		int maybe = (*m[i].prog && unlike_before(&prog, dp)) ||
		            (m[i].has_ppid && unlike_before(hx, dl)) ||
		            (r->t_real0 && tmin != UINT64_MAX &&
		             ((r->t_real0 > tmin && r->t_real0 - tmin > far) ||
		              (tmax > r->t_real0 && tmax - r->t_real0 > far)));
		for (size_t j = 0; maybe && j < i && !found; j++)
			if (job->ranks[j].ok && mix_why(job, m, j, i, why, len)) {
				*pa = j;
				*pr = i;
				found = 1;
			}
		if (*m[i].prog)
			firsts_add(&prog, i, dp);
		if (m[i].has_ppid)
			firsts_add(hx, i, dl);
		if (r->t_real0) {
			tmin = r->t_real0 < tmin ? r->t_real0 : tmin;
			tmax = r->t_real0 > tmax ? r->t_real0 : tmax;
		}
	}
	free(m);
	free(host);
	an_index_free(&pids);
	return found;
}

/* ---- rank numbers and hang members ---- */
int an_file_of_rank(const struct an_job *job, int id)
{
	long f = id >= 0 ? an_index_get(&job->rank_ix, (uint64_t)id, 0) : -1;
	return (int)f;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int an_hang_member(const struct an_hang *h, int id)
{
	if (h->nmissing && bsearch(&id, h->missing, (size_t)h->nmissing, sizeof id, cmp_int))
		return AN_HANG_MISSING;
	if (h->npresent && bsearch(&id, h->present, (size_t)h->npresent, sizeof id, cmp_int))
		return AN_HANG_PRESENT;
	return 0;
}

void an_hang_sort(struct an_hang *h)
{
	if (h->nmissing > 1)
		qsort(h->missing, (size_t)h->nmissing, sizeof *h->missing, cmp_int);
	if (h->npresent > 1)
		qsort(h->present, (size_t)h->npresent, sizeof *h->present, cmp_int);
}

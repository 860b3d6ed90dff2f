/* rankview.c: how a job of many ranks is shown: the ranks that matter as rows, a distribution of
 * the others, the headline arrival skew per communicator kind (rankview.h). */
#include <ctype.h>  /* isdigit */
#include <limits.h> /* INT_MAX */
#include <math.h>   /* NAN */
#include <stdlib.h> /* calloc, qsort */
#include <string.h> /* strcmp */

#include "model/rankview.h"

const char *an_ckind_name(int kind)
{
	static const char *const n[AN_CK_COUNT] = {"world", "per host", "groups"};
	return kind >= 0 && kind < AN_CK_COUNT ? n[kind] : "?";
}

const char *an_ckind_id(int kind)
{
	static const char *const n[AN_CK_COUNT] = {"world", "per_host", "groups"};
	return kind >= 0 && kind < AN_CK_COUNT ? n[kind] : "?";
}

/* World: every rank of the job; per host: one host's (not the world); groups: the others */
int an_ckind_of(const struct an_comm *c, size_t nranks)
{
	if (c->nranks >= (int)nranks)
		return AN_CK_WORLD;
	return c->single_host ? AN_CK_HOST : AN_CK_GROUP;
}

void an_skew_kinds(const struct an_job *job, size_t nranks, struct an_skew_kinds *s)
{
	memset(s, 0, sizeof *s);
	double sum[AN_CK_COUNT] = {0};
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		const struct an_comm *c = &job->comms[ci];
		if (!c->skew_n)
			continue;
		struct an_skew_kind *k = &s->k[an_ckind_of(c, nranks)];
		if (!k->ncomms++ || c->nranks < k->min_ranks)
			k->min_ranks = c->nranks;
		if (c->nranks > k->max_ranks)
			k->max_ranks = c->nranks;
		k->n += c->skew_n;
		sum[an_ckind_of(c, nranks)] += c->skew_sum_ns;
		if (c->skew_max_ns > k->max_ns)
			k->max_ns = c->skew_max_ns;
	}
	static const int widest[AN_CK_COUNT] = {AN_CK_HOST, AN_CK_GROUP, AN_CK_WORLD};
	s->head = -1;
	for (int i = 0; i < AN_CK_COUNT; i++) {
		struct an_skew_kind *k = &s->k[widest[i]];
		if (!k->n)
			continue;
		k->mean_ns = sum[widest[i]] / (double)k->n;
		s->nkinds++;
		s->head = widest[i];
	}
}

double an_rank_col(const struct an_rrow *w, int col)
{
	const struct an_rank_x *x = w->x;
	switch (col) {
	case AN_RV_WALL:
		return w->wall_ns / 1e6;
	case AN_RV_COMM:
		return w->comm.ns / 1e6;
	case AN_RV_EXPOSED:
		return w->gpu ? w->exposed_ns / 1e6 : NAN;
	case AN_RV_EXPOSED_SHARE:
		return w->gpu ? (w->span_ns > 0 ? w->exposed_ns / w->span_ns * 100 : 0) : NAN;
	case AN_RV_LAST:
		return x->colls ? 100.0 * (double)x->last_count / (double)x->colls : 0.0;
	case AN_RV_LEAD:
		return x->median_lead_ns / 1e6;
	default:
		return x->wait_ns / 1e6;
	}
}

/* ---- which rows: the findings' ranks, the slowest, the extremes, the host outliers ---- */
enum { NAMED_PER_LIST = 16, NAMED_MAX = 48, LAST_ROWS = 3, HOST_ROWS = 3 };

struct rank_ix {
	int rank;
	size_t row;
};
static int cmp_rank_ix(const void *a, const void *b)
{
	const struct rank_ix *x = a, *y = b;
	return x->rank != y->rank ? (x->rank < y->rank ? -1 : 1) : (x->row > y->row) - (x->row < y->row);
}

struct pick {
	struct an_rank_view *v;
	const struct an_tables *t;
	struct rank_ix *ix; /* by rank number */
	size_t named;       /* rows kept for the findings */
	unsigned *why;      /* per row of t */
	char (*what)[48];   /* per row of t */
	uint8_t *over;      /* per row of t: named by a finding beyond the rows kept for them */
};

/* Keep row i for a reason: its bit, and a word for the reader ("straggler", "max wall") */
static void keep(struct pick *p, size_t i, unsigned why, const char *word)
{
	if (p->v->kept[i] && strstr(p->what[i], word))
		return;
	p->v->kept[i] = 1;
	p->why[i] |= why;
	size_t l = strlen(p->what[i]);
	if (l + strlen(word) + 2 < sizeof p->what[i])
		snprintf(p->what[i] + l, sizeof p->what[i] - l, "%s%s", l ? ", " : "", word);
}

/* The first entry of ix whose rank number is at least rank (nranks: none) */
static size_t ix_first(const struct pick *p, long rank)
{
	size_t lo = 0, hi = p->t->nranks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->ix[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* A rank a finding names: its first row, while the findings' share of rows lasts */
static void keep_named(struct pick *p, long rank, const char *id, int room)
{
	if (rank < 0 || rank > INT_MAX)
		return;
	size_t n = p->t->nranks, lo = ix_first(p, rank);
	if (lo >= n || p->ix[lo].rank != (int)rank)
		return;
	size_t row = p->ix[lo].row;
	if (!p->v->kept[row] && (p->named >= NAMED_MAX || !room)) {
		p->over[row] = 1; /* named, no row for it (unless kept for another reason) */
		return;
	}
	p->named += !p->v->kept[row];
	keep(p, row, AN_WHY_FINDING, id);
}

/* A rank list as findings write it ("3", "0,2", "700-899"), up to NAMED_PER_LIST ranks */
static void keep_list(struct pick *p, const char *s, const char *id)
{
	int n = 0;
	while (isdigit((unsigned char)*s)) {
		char *e;
		long a = strtol(s, &e, 10), b = a;
		if (*e == '-' && isdigit((unsigned char)e[1]))
			b = strtol(e + 1, &e, 10);
		/* the job's ranks in [a, b], each once: as many steps as there are ranks, whatever
		 * the numbers; past NAMED_PER_LIST they are counted, not kept */
		for (size_t k = ix_first(p, a); k < p->t->nranks && p->ix[k].rank <= b; k++)
			if (!k || p->ix[k].rank != p->ix[k - 1].rank)
				keep_named(p, p->ix[k].rank, id, n++ < NAMED_PER_LIST);
		s = *e == ',' ? e + 1 : e;
	}
}

static void pick_findings(struct pick *p, const struct an_findings *f)
{
	for (size_t i = 0; f && i < f->n; i++) {
		const struct an_finding *x = &f->v[i];
		keep_named(p, x->rank, x->id, 1);
		keep_named(p, x->root_rank, x->id, 1);
		for (int k = 0; k < x->nev; k++) {
			const struct an_ev *e = &x->ev[k];
			if (!e->is_str && !strcmp(e->key, AN_EV_RANK) && e->num >= 0 &&
			    e->num <= INT_MAX)
				keep_named(p, (long)e->num, x->id, 1);
			/* the waiting ranks of a hang are all the others: not the ones that matter */
			else if (an_ev_ranks(e) && strcmp(e->key, AN_EV_WAITING_RANKS))
				keep_list(p, e->str, x->id);
		}
	}
}

/* The LAST_ROWS ranks last to arrive most often (then by lead) */
static void pick_last(struct pick *p)
{
	const struct an_tables *t = p->t;
	for (int k = 0; k < LAST_ROWS; k++) {
		long best = -1;
		double bl = 0, bd = 0;
		for (size_t i = 0; i < t->nranks; i++) {
			double l = an_rank_col(&t->ranks[i], AN_RV_LAST),
			       d = an_rank_col(&t->ranks[i], AN_RV_LEAD);
			if (!(l > 0) || (p->why[i] & AN_WHY_LAST))
				continue;
			if (best < 0 || l > bl || (l == bl && d > bd))
				best = (long)i, bl = l, bd = d;
		}
		if (best < 0)
			return;
		keep(p, (size_t)best, AN_WHY_LAST, "last most");
	}
}

/* The highest and lowest of the columns a reader scans first */
static void pick_extremes(struct pick *p)
{
	static const struct {
		int col, max;
		const char *word;
	} ex[] = {{AN_RV_WALL, 1, "max wall"},     {AN_RV_COMM, 1, "max comm"},
	          {AN_RV_COMM, 0, "min comm"},     {AN_RV_EXPOSED, 1, "max exposed"},
	          {AN_RV_WAITED, 1, "max waited"}, {AN_RV_WAITED, 0, "min waited"}};
	const struct an_tables *t = p->t;
	for (size_t e = 0; e < sizeof ex / sizeof ex[0]; e++) {
		long best = -1;
		double bv = 0;
		for (size_t i = 0; i < t->nranks; i++) {
			double v = an_rank_col(&t->ranks[i], ex[e].col);
			if (isnan(v))
				continue;
			if (best < 0 || (ex[e].max ? v > bv : v < bv))
				best = (long)i, bv = v;
		}
		if (best >= 0)
			keep(p, (size_t)best, ex[e].max ? AN_WHY_MAX : AN_WHY_MIN, ex[e].word);
	}
}

static const struct an_tables *host_sort_t; /* qsort has no context argument */
static int cmp_host(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(host_sort_t->ranks[x].r->host, host_sort_t->ranks[y].r->host);
	return c ? c : (x > y) - (x < y);
}
static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* dev[i]: how far row i's comm ms is from its host's median, 0 alone on its host */
static int host_devs(const struct an_tables *t, double *dev)
{
	size_t n = t->nranks, *o = malloc(n * sizeof *o);
	double *v = malloc(n * sizeof *v);
	if (!o || !v) {
		free(o);
		free(v);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		o[i] = i;
	host_sort_t = t;
	qsort(o, n, sizeof *o, cmp_host);
	for (size_t a = 0, b; a < n; a = b) {
		for (b = a; b < n && !strcmp(t->ranks[o[b]].r->host, t->ranks[o[a]].r->host); b++)
			v[b - a] = an_rank_col(&t->ranks[o[b]], AN_RV_COMM);
		qsort(v, b - a, sizeof *v, cmp_dbl);
		double med = v[(b - a) / 2];
		for (size_t k = a; k < b; k++)
			dev[o[k]] = fabs(an_rank_col(&t->ranks[o[k]], AN_RV_COMM) - med);
	}
	free(o);
	free(v);
	return 0;
}

/* The HOST_ROWS ranks whose comm ms departs most from their own host's median (one slow GPU or
 * link among its host's) */
static int pick_host(struct pick *p)
{
	const struct an_tables *t = p->t;
	double *dev = malloc(t->nranks * sizeof *dev);
	if (!dev || host_devs(t, dev) < 0) {
		free(dev);
		return -1;
	}
	for (int k = 0; k < HOST_ROWS; k++) {
		long best = -1;
		for (size_t i = 0; i < t->nranks; i++)
			if (dev[i] > 0 && !(p->why[i] & AN_WHY_HOST) && (best < 0 || dev[i] > dev[best]))
				best = (long)i;
		if (best < 0)
			break;
		keep(p, (size_t)best, AN_WHY_HOST, "host outlier");
	}
	free(dev);
	return 0;
}

/* min, p50, p90, max of each column over the rows not kept */
static int rest_dist(const struct an_tables *t, struct an_rank_view *v)
{
	double *x = malloc((t->nranks ? t->nranks : 1) * sizeof *x);
	if (!x)
		return -1;
	for (int c = 0; c < AN_RV_COLS; c++) {
		size_t n = 0;
		for (size_t i = 0; i < t->nranks; i++) {
			double y = an_rank_col(&t->ranks[i], c);
			if (!v->kept[i] && !isnan(y))
				x[n++] = y;
		}
		qsort(x, n, sizeof *x, cmp_dbl);
		v->dist[c][0] = n ? x[0] : NAN;
		v->dist[c][1] = n ? x[(n - 1) * 50 / 100] : NAN;
		v->dist[c][2] = n ? x[(n - 1) * 90 / 100] : NAN;
		v->dist[c][3] = n ? x[n - 1] : NAN;
		if (c == AN_RV_EXPOSED)
			v->rest_gpu = n > 0;
	}
	free(x);
	return 0;
}

/* The kept rows in table order, with their reasons */
static int collect(struct pick *p)
{
	struct an_rank_view *v = p->v;
	size_t n = p->t->nranks;
	for (size_t i = 0; i < n; i++) {
		v->nshown += v->kept[i];
		v->named_more += p->over[i] && !v->kept[i];
	}
	v->shown = malloc((v->nshown ? v->nshown : 1) * sizeof *v->shown);
	v->why = malloc((v->nshown ? v->nshown : 1) * sizeof *v->why);
	v->what = malloc((v->nshown ? v->nshown : 1) * sizeof *v->what);
	if (!v->shown || !v->why || !v->what)
		return -1;
	for (size_t i = 0, k = 0; i < n; i++)
		if (v->kept[i]) {
			v->shown[k] = i;
			v->why[k] = p->why[i];
			memcpy(v->what[k++], p->what[i], sizeof *v->what);
		}
	v->nrest = n - v->nshown;
	return 0;
}

static int pick_all(struct pick *p, const struct an_findings *f)
{
	const struct an_tables *t = p->t;
	for (size_t i = 0; i < t->nranks; i++)
		p->ix[i] = (struct rank_ix){t->ranks[i].rank, i};
	qsort(p->ix, t->nranks, sizeof *p->ix, cmp_rank_ix);
	pick_findings(p, f);
	pick_last(p);
	pick_extremes(p);
	if (pick_host(p) < 0 || collect(p) < 0)
		return -1;
	return rest_dist(t, p->v);
}

int an_rank_view_build(const struct an_job *job, const struct an_tables *t,
                       const struct an_findings *f, struct an_rank_view *v)
{
	memset(v, 0, sizeof *v);
	v->nrows = t->nranks;
	const double *th = job->th ? job->th : an_threshold_defaults;
	v->all = !((double)t->nranks > th[AN_TH_ranks_shown]);
	if (v->all)
		return 0;
	size_t n = t->nranks;
	struct pick p = {.v = v, .t = t};
	v->kept = calloc(n, 1);
	p.ix = malloc(n * sizeof *p.ix);
	p.why = calloc(n, sizeof *p.why);
	p.what = calloc(n, sizeof *p.what);
	p.over = calloc(n, 1);
	int rc = v->kept && p.ix && p.why && p.what && p.over ? pick_all(&p, f) : -1;
	free(p.over);
	free(p.ix);
	free(p.why);
	free(p.what);
	if (rc < 0) {
		an_rank_view_free(v);
		v->all = 1;
		v->nrows = n;
	}
	return rc;
}

void an_rank_view_free(struct an_rank_view *v)
{
	free(v->shown);
	free(v->why);
	free(v->what);
	free(v->kept);
	memset(v, 0, sizeof *v);
}

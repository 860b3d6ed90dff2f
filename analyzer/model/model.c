/* model.c: the analyzer's pipeline over one job (ingest -> match -> align -> steps, see stages.h),
 * the per-GPU time split, NCCL's choices, and the helpers findings and printers read the model with.
 */
#include "load/graphs.h"
#include "load/kernelch.h"
#include "model/model.h"

#include <stdatomic.h> /* atomic_fetch_add */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, qsort */
#include <string.h>    /* strcmp */
#include <unistd.h>    /* sysconf */

#include "nvlp_trace.h"
#include "model/stages.h"
#include "util/util.h" /* nvlp_run_parallel */

/* ---- thresholds ---- */
const char *const an_threshold_names[AN_TH_COUNT] = {
#define AN_T_NAME(name, def, doc) #name,
    AN_THRESHOLDS(AN_T_NAME)
#undef AN_T_NAME
};
const char *const an_threshold_docs[AN_TH_COUNT] = {
#define AN_T_DOC(name, def, doc) doc,
    AN_THRESHOLDS(AN_T_DOC)
#undef AN_T_DOC
};
const double an_threshold_defaults[AN_TH_COUNT] = {
#define AN_T_DEF(name, def, doc) def,
    AN_THRESHOLDS(AN_T_DEF)
#undef AN_T_DEF
};

int an_threshold_set(double *th, const char *assign)
{
	const char *eq = strchr(assign, '=');
	if (!eq)
		return -1;
	for (int i = 0; i < AN_TH_COUNT; i++) {
		size_t n = strlen(an_threshold_names[i]);
		if ((size_t)(eq - assign) == n && !strncmp(assign, an_threshold_names[i], n)) {
			char *end;
			double v = strtod(eq + 1, &end);
			if (end == eq + 1 || *end)
				return -1;
			th[i] = v;
			return 0;
		}
	}
	return -1;
}

/* ---- small growable arrays ---- */
void *an_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			return NULL;
		nc *= 2;
	}
	if (nc > SIZE_MAX / elem)
		return NULL;
	/* plain realloc, which extends in place when it can (the earlier 2 MiB-aligned copy for
	 * transparent huge pages always copied into fresh pages) */
	void *q = realloc(p, nc * elem);
	if (!q)
		return NULL;
	*cap = nc;
	return q;
}

/* ---- index ---- */
static inline size_t slot_of(uint64_t a, uint64_t b, size_t cap)
{
	uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

long an_index_get(const struct an_index *ix, uint64_t a, uint64_t b)
{
	if (!ix->cap)
		return -1;
	for (size_t i = slot_of(a, b, ix->cap);; i = (i + 1) & (ix->cap - 1)) {
		const struct an_slot *s = &ix->slot[i];
		if (!s->v)
			return -1;
		if (s->a == a && s->b == b)
			return (long)s->v - 1;
	}
}

int an_index_put(struct an_index *ix, uint64_t a, uint64_t b, uint32_t v)
{
	if ((ix->n + 1) * 2 > ix->cap) { /* at most half full */
		size_t nc = ix->cap ? ix->cap * 2 : 64;
		struct an_slot *ns = calloc(nc, sizeof *ns);
		if (!ns)
			return -1;
		for (size_t i = 0; i < ix->cap; i++) {
			struct an_slot *o = &ix->slot[i];
			if (!o->v)
				continue;
			size_t k = slot_of(o->a, o->b, nc);
			while (ns[k].v)
				k = (k + 1) & (nc - 1);
			ns[k] = *o;
		}
		free(ix->slot);
		ix->slot = ns;
		ix->cap = nc;
	}
	size_t k = slot_of(a, b, ix->cap);
	while (ix->slot[k].v)
		k = (k + 1) & (ix->cap - 1);
	ix->slot[k] = (struct an_slot){a, b, v + 1};
	ix->n++;
	return 0;
}

void an_index_free(struct an_index *ix)
{
	free(ix->slot);
	memset(ix, 0, sizeof *ix);
}

/* ---- analysis ---- */
static int cmp_ival(const void *a, const void *b)
{
	const struct an_ival *x = a, *y = b;
	return x->s < y->s ? -1 : x->s > y->s;
}

/* Sort (only when needed: CUPTI mostly delivers in order) and merge overlapping intervals in
 * place. */
static uint64_t ivals_union(struct an_ivals *iv)
{
	size_t n = iv->n;
	for (size_t i = 1; i < n; i++)
		if (iv->v[i].s < iv->v[i - 1].s) {
			qsort(iv->v, n, sizeof *iv->v, cmp_ival);
			break;
		}
	size_t o = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (o && iv->v[i].s <= iv->v[o - 1].e) {
			if (iv->v[i].e > iv->v[o - 1].e)
				iv->v[o - 1].e = iv->v[i].e;
		} else
			iv->v[o++] = iv->v[i];
	}
	iv->n = o;
	for (size_t i = 0; i < o; i++)
		total += iv->v[i].e - iv->v[i].s;
	return total;
}

/* inlined in analyze_dev's loops (one call per collective and per link sample: perf put 3% of an
 * 8-rank report in the call) */
static inline __attribute__((always_inline)) uint64_t
ivals_covered(const struct an_ivals *iv, size_t *pos, uint64_t s, uint64_t e)
{
	uint64_t c = 0;
	size_t i = *pos;
	while (i < iv->n && iv->v[i].e <= s)
		i++;
	*pos = i;
	for (; i < iv->n && iv->v[i].s < e; i++) {
		uint64_t a = iv->v[i].s > s ? iv->v[i].s : s;
		uint64_t b = iv->v[i].e < e ? iv->v[i].e : e;
		if (b > a)
			c += b - a;
	}
	return c;
}

uint64_t an_ivals_covered(const struct an_ivals *iv, size_t *pos, uint64_t s, uint64_t e)
{
	return ivals_covered(iv, pos, s, e);
}

static int cmp_sample(const void *a, const void *b)
{
	const struct an_sample *x = a, *y = b;
	return x->s < y->s ? -1 : x->s > y->s;
}

/* The GPU intervals of r's calls on device dev (those NCCL's kernel channels timed, and CUPTI's,
 * already in nccl: a union takes them once) appended to iv (out of memory: fewer) */
static void push_calls(struct an_ivals *iv, const struct an_rank *r, int dev)
{
	for (size_t k = 0; k < r->ncalls; k++) {
		const struct an_call *c = &r->calls[k];
		if (c->gpu_start && c->gpu_dur && c->device == dev)
			an_ivals_push(iv, c->gpu_start, c->gpu_start + c->gpu_dur);
	}
}

static void analyze_dev(const struct an_rank *r, struct an_dev *d)
{
	ivals_union(&d->compute);
	d->union_nccl_ns = ivals_union(&d->nccl);
	d->union_comm_ns = d->union_nccl_ns;
	if (r->kch_timed) {
		/* the calls' intervals (in call order: a sort only when streams interleave), merged
		 * with the kernels' in one pass */
		struct an_ivals c = {0};
		push_calls(&c, r, d->device);
		ivals_union(&c);
		size_t i = 0, j = 0;
		while (i < c.n || j < d->nccl.n) {
			const struct an_ival *x =
			    j >= d->nccl.n || (i < c.n && c.v[i].s < d->nccl.v[j].s) ? &c.v[i++]
			                                                             : &d->nccl.v[j++];
			an_ivals_push(&d->comm, x->s, x->e);
		}
		free(c.v);
		if (d->comm.n)
			d->union_comm_ns = ivals_union(&d->comm);
	}
	size_t pos = 0;
	uint64_t hidden = 0;
	for (size_t i = 0; i < d->nccl.n; i++)
		hidden += ivals_covered(&d->compute, &pos, d->nccl.v[i].s, d->nccl.v[i].e);
	d->exposed_ns = d->union_nccl_ns - hidden;
	for (size_t i = 1; i < d->nsamples; i++)
		if (d->samples[i].s < d->samples[i - 1].s) {
			qsort(d->samples, d->nsamples, sizeof *d->samples, cmp_sample);
			break;
		}
	pos = 0;
	for (size_t i = 0; i < d->nsamples; i++) {
		struct an_sample *s = &d->samples[i];
		if (s->e <= s->s)
			continue;
		/* Samples (1-20 ms) are coarser than most collectives (0.1-1 ms), so a
		 * time-weighted split would hide collective traffic: a sample that overlaps a
		 * collective counts whole. */
		if (ivals_covered(d->comm.n ? &d->comm : &d->nccl, &pos, s->s, s->e)) {
			d->nvl_coll += s->nvl;
			d->pcie_coll += s->pcie;
		}
	}
}

struct dev_worker_arg {
	struct an_job *job;
	atomic_size_t next;
};
static void *dev_worker(void *arg)
{
	struct dev_worker_arg *a = arg;
	size_t i;
	while ((i = atomic_fetch_add(&a->next, 1)) < a->job->nranks) {
		struct an_rank *r = &a->job->ranks[i];
		for (size_t d = 0; d < r->ndevs; d++)
			analyze_dev(r, &r->devs[d]);
	}
	return NULL;
}

const char *an_choice_channels(const struct an_jchoice *x, char *buf, size_t len)
{
	if (x->ch_min == x->ch_max)
		snprintf(buf, len, "%d", x->ch_min);
	else
		snprintf(buf, len, "%d-%d", x->ch_min, x->ch_max);
	return buf;
}

static int choice_cmp(const void *a, const void *b)
{
	const struct an_jchoice *x = a, *y = b;
	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	if (x->fn != y->fn)
		return x->fn < y->fn ? -1 : 1;
	return x->calls > y->calls ? -1 : x->calls < y->calls;
}

/* NCCL's choices over the job: communicators identified through the shim's hash (records made
 * before it was known take it from the others of the same NCCL communicator). */
static void build_choices(struct an_job *job)
{
	size_t cap = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->nchoices; i++)
			for (size_t k = 0; !r->choices[i].comm && k < r->nchoices; k++)
				if (r->choices[k].comm && r->choices[k].nccl_comm == r->choices[i].nccl_comm)
					r->choices[i].comm = r->choices[k].comm;
		for (size_t i = 0; i < r->nchoices; i++) {
			const struct an_choice *x = &r->choices[i];
			int ci = -1;
			for (size_t k = 0; x->comm && k < job->ncomms; k++)
				if (job->comms[k].hash == x->comm)
					ci = (int)k;
			struct an_jchoice *j = NULL;
			for (size_t k = 0; k < job->nchoices && !j; k++)
				if (job->choices[k].comm == ci && job->choices[k].fn == x->fn &&
				    !strcmp(job->choices[k].algo, x->algo) &&
				    !strcmp(job->choices[k].proto, x->proto))
					j = &job->choices[k];
			if (!j) {
				j = PUSH(job->choices, job->nchoices, cap);
				if (!j)
					return;
				memset(j, 0, sizeof *j);
				j->comm = ci;
				j->fn = x->fn;
				memcpy(j->algo, x->algo, sizeof j->algo);
				memcpy(j->proto, x->proto, sizeof j->proto);
				j->ch_min = j->ch_max = x->channels;
			}
			j->calls += x->calls;
			if (x->channels < j->ch_min)
				j->ch_min = x->channels;
			if (x->channels > j->ch_max)
				j->ch_max = x->channels;
		}
	}
	if (job->nchoices > 1)
		qsort(job->choices, job->nchoices, sizeof *job->choices, choice_cmp);
}

/* Aggregates per (comm, fn) over all ranks. */
static void aggregate(struct an_job *job)
{
	size_t na = job->ncomms * NVLP_NCCL_FN_COUNT;
	struct an_agg *all = job->agg_host; /* the sums, if align.c made them */
	job->agg_host = NULL;
	int pass = !all || job->agg_gpu; /* no sums yet, or GPU times to add: all in one pass */
	if (all && pass)
		memset(all, 0, (na ? na : 1) * sizeof *all);
	if (!all && !(all = calloc(na ? na : 1, sizeof *all)))
		return;
	for (size_t f = 0; pass && f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		for (size_t k = 0; k < r->ncalls; k++) {
			struct an_call *c = &r->calls[k];
			struct an_agg *a = &all[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
			a->calls++;
			a->bytes += c->bytes;
			a->host_ns += c->host_dur;
			if (c->gpu_start) {
				a->calls_gpu++;
				a->gpu_ns += c->gpu_dur;
				a->xfer_ns += an_call_xfer_ns(job, c);
				a->bytes_gpu += c->bytes;
			}
		}
	}
	uint64_t gpu_calls = 0;
	for (size_t i = 0; i < na; i++)
		gpu_calls += all[i].calls_gpu;
	job->calls_gpu_none = !gpu_calls; /* without a pass: align.c's sums were of such calls */
	for (size_t i = 0; i < na; i++)
		if (all[i].calls) {
			all[i].comm = (int32_t)(i / NVLP_NCCL_FN_COUNT);
			all[i].fn = (uint8_t)(i % NVLP_NCCL_FN_COUNT);
			all[job->naggs++] = all[i];
		}
	job->aggs = all;
}

void an_job_analyze(struct an_job *job)
{
	if (an_align_comms(job) < 0)
		return;
	an_kch_apply(job); /* collectives' GPU times from NCCL's kernel-channel stamps */
	an_graphs_apply(job); /* captured calls executed per graph replay */
	/* per-GPU interval work, in parallel */
	{
		struct dev_worker_arg a = {.job = job};
		atomic_init(&a.next, 0);
		long np = sysconf(_SC_NPROCESSORS_ONLN);
		size_t nt = np > 1 ? (size_t)np : 1;
		nt = nt < 64 ? nt : 64;
		nvlp_run_parallel(dev_worker, &a, nt < job->nranks ? nt : job->nranks);
	}
	an_align_cross_rank(job);
	/* job time span */
	job->t0 = UINT64_MAX;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (!r->ok || !r->t_last)
			continue;
		uint64_t a = an_job_time(r, r->t_first), b = an_job_time(r, r->t_last);
		if (a < job->t0)
			job->t0 = a;
		if (b > job->t1)
			job->t1 = b;
	}
	if (job->t0 == UINT64_MAX)
		job->t0 = job->t1 = 0;
	job->t_alive1 = job->t1; /* ends told ms after t0 stay inside [t0, t_alive1] */
	for (size_t f = 0; job->t1 && f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		uint64_t b = r->ok && r->t_last ? an_job_time(r, r->t_alive) : 0;
		if (b > job->t_alive1 && b - job->t1 <= AN_MAX_LIFE_NS)
			job->t_alive1 = b;
	}
	aggregate(job);
	an_steps_find(job);
	build_choices(job);
}

int an_rank_exposure(const struct an_job *job, const struct an_rank *r, double *exposed_ns,
                     double *span_ns, double *comm_ns)
{
	double e = 0, c = 0;
	int win = job->win1 > job->win0;
	for (size_t d = 0; d < r->ndevs; d++) {
		e += (double)(win ? r->devs[d].win_exposed_ns : r->devs[d].exposed_ns);
		c += (double)(win ? r->devs[d].win_comm_ns : r->devs[d].union_comm_ns);
	}
	*exposed_ns = e;
	*span_ns = win ? (double)(job->win1 - job->win0) : (double)an_rank_wall(r);
	if (comm_ns)
		*comm_ns = c;
	return win;
}

/* The hangs' rank lists, the host and rank-number tables (hosts.c's) */
static void free_hosts_hangs(struct an_job *job)
{
	for (size_t i = 0; i < job->nhangs; i++) {
		free(job->hangs[i].missing);
		free(job->hangs[i].present);
	}
	free(job->hangs);
	an_index_free(&job->rank_ix);
	free(job->by_host);
	free(job->host_at);
}

void an_job_free(struct an_job *job)
{
	free(job->agg_host);
	an_kch_free(job);
	an_graphs_free(job);
	for (size_t f = 0; f < job->nranks + job->nothers; f++) {
		struct an_rank *r = &job->ranks[f];
		free(r->path);
		free(r->header);
		free(r->calls);
		free(r->csig);
		free(r->csigs);
		free(r->comms);
		for (size_t d = 0; d < r->ndevs; d++) {
			free(r->devs[d].compute.v);
			free(r->devs[d].nccl.v);
			free(r->devs[d].comm.v);
			free(r->devs[d].samples);
		}
		free(r->devs);
		free(r->pairs);
		free(r->allocs);
		free(r->notes);
		free(r->inflight);
		free(r->links);
		for (size_t i = 0; i < r->nmodules; i++)
			free(r->modules[i].path);
		free(r->modules);
		for (size_t i = 0; i < r->nstacks; i++)
			free(r->stacks[i].pc);
		free(r->stacks);
		an_sym_free(r);
		free(r->choices);
		an_kch_file_free(r);
		an_graphs_file_free(r);
		free(r->marks);
		free(r->umarks);
		free(r->cnames);
		free(r->failed);
		for (size_t i = 0; i < r->npystacks; i++)
			free(r->pystacks[i].text);
		free(r->pystacks);
		free(r->pyrefs);
	}
	free(job->ranks);
	free(job->choices);
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		free(job->comms[ci].xfer);
		free(job->comms[ci].xfer_seq);
	}
	free(job->comms);
	free(job->aggs);
	free_hosts_hangs(job);
	free(job->mismatches);
	free(job->rx);
	memset(job, 0, sizeof *job);
}

/* ---- helpers ---- */

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

/* The one NVLink peak: NVIDIA's data rate per link and direction, 25 GB/s for NVLink 2 to 4
 * (H200: 18 links = 450 GB/s each way, the 900 GB/s "bidirectional" of its specification).
 * nvidia-smi nvlink -s shows 26.562 GB/s per link on NVLink 4: the signalling rate, encoding
 * included, which no payload reaches (x 18 = 478); NCCL's topology model assumes 20.6 GB/s per
 * link on sm_90 (src/graph/topo.h), an achievable ring rate rather than the link's. */
double an_nvlink_link_Bps(uint64_t version)
{
	static const double per_version[] = {0, 20e9, 25e9, 25e9, 25e9, 50e9};
	return version < sizeof per_version / sizeof per_version[0] ? per_version[version] : 0;
}

const char *an_peak_basis(void)
{
	return "NVIDIA's spec, 25 GB/s per link each way (H200: 18 x 25 = 450); nvidia-smi's "
	       "26.562 is the signalling rate, encoding included";
}

static double dev_peak_in(const struct an_rank *r, int device)
{
	double pk = 0;
	for (size_t i = 0; i < r->nlinks; i++) {
		const struct an_link *l = &r->links[i];
		if ((l->type0 == NVLP_DEV_TYPE_GPU && l->dev0 == device) ||
		    (l->type1 == NVLP_DEV_TYPE_GPU && l->dev1 == device))
			pk += (double)l->links * (double)l->bw_Bps;
	}
	return pk;
}

double an_dev_peak(const struct an_job *job, const struct an_rank *r, int device)
{
	double pk = dev_peak_in(r, device);
	/* processes on one host share the topology: borrow it from one that recorded it */
	if (!pk && job->host_at && r->host_ix < job->nhosts)
		for (size_t i = job->host_at[r->host_ix]; !pk && i < job->host_at[r->host_ix + 1]; i++) {
			size_t f = job->by_host[i];
			if (f < job->nranks && job->ranks[f].ok)
				pk = dev_peak_in(&job->ranks[f], device);
		}
	for (size_t f = 0; !pk && !job->host_at && f < job->nranks; f++) /* hosts not numbered */
		if (job->ranks[f].ok && !strcmp(job->ranks[f].host, r->host))
			pk = dev_peak_in(&job->ranks[f], device);
	return pk;
}

int an_nvlink_between(const struct an_rank *r, int a, int b)
{
	int da = 0, db = 0;
	for (size_t i = 0; i < r->nlinks; i++) {
		const struct an_link *l = &r->links[i];
		if (!l->links)
			continue;
		if ((l->dev0 == a && l->dev1 == b) || (l->dev0 == b && l->dev1 == a))
			return 1;
		/* GPU to NVSwitch links: both GPUs on the fabric */
		if (l->type0 == NVLP_DEV_TYPE_GPU && l->type1 != NVLP_DEV_TYPE_GPU) {
			da |= l->dev0 == a;
			db |= l->dev0 == b;
		}
		if (l->type1 == NVLP_DEV_TYPE_GPU && l->type0 != NVLP_DEV_TYPE_GPU) {
			da |= l->dev1 == a;
			db |= l->dev1 == b;
		}
	}
	return da && db;
}

uint64_t an_rank_wall(const struct an_rank *r)
{
	return r->t_last > r->t_first ? r->t_last - r->t_first : 0;
}

uint64_t an_rank_comm_ns(const struct an_rank *r, int *host_only)
{
	uint64_t g = 0, h = r->host_sum;
	for (size_t d = 0; d < r->ndevs; d++)
		g += r->devs[d].union_comm_ns;
	if (r->host_sum_n != r->ncalls) { /* calls not kept by ingest: summed here */
		h = 0;
		for (size_t k = 0; k < r->ncalls; k++)
			h += r->calls[k].host_dur;
	}
	/* GPU time where NCCL's work was traced; else (no kernels at all, or kernels of compute
	 * only: the calls' kernels were never seen) the host time the calls took, as COLLECTIVES
	 * then shows it, never 0 beside a table of collective time */
	int gpu = (r->kind_count[NVLP_K_KERNEL] || r->kch_timed) && (g || !r->ncalls);
	if (host_only)
		*host_only = !gpu;
	return gpu ? g : h;
}

/* Compute time of the sorted, merged intervals iv inside [s, e) (binary search for the start). */
static uint64_t covered_at(const struct an_ivals *iv, uint64_t s, uint64_t e)
{
	size_t lo = 0, hi = iv->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (iv->v[mid].e <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return an_ivals_covered(iv, &lo, s, e);
}

double an_comm_exposed_ns(const struct an_job *job, int comm, double *all_ns)
{
	double mine = 0, all = 0;
	int win = job->win1 > job->win0;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok)
			continue;
		uint64_t a = win ? (uint64_t)((int64_t)job->win0 - r->offset) : 0,
		         b = win ? (uint64_t)((int64_t)job->win1 - r->offset) : UINT64_MAX;
		for (size_t k = 0; k < r->ncalls; k++) {
			const struct an_call *c = &r->calls[k];
			if (!c->gpu_start || !c->gpu_dur)
				continue;
			const struct an_dev *d = NULL;
			for (size_t i = 0; i < r->ndevs && !d; i++)
				if (r->devs[i].device == c->device)
					d = &r->devs[i];
			if (!d && r->ndevs == 1)
				d = &r->devs[0];
			if (!d)
				continue;
			uint64_t s = c->gpu_start > a ? c->gpu_start : a;
			uint64_t e = c->gpu_start + c->gpu_dur < b ? c->gpu_start + c->gpu_dur : b;
			if (e <= s)
				continue;
			double x = (double)((e - s) - covered_at(&d->compute, s, e));
			all += x;
			if (c->comm == comm)
				mine += x;
		}
	}
	if (all_ns)
		*all_ns = all;
	return mine;
}

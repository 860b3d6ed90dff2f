/* export_model.c: the adapter between today's analyzer model (model.h, findings.h, report.h) and
 * the exporters / HTML report; the only file of export/html that reads struct an_job. */
#include <math.h>   /* NAN */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "util/diag.h"
#include "out/export_model.h"
#include "findings/findings.h"
#include "model/model.h"
#include "nvlp_trace.h"
#include "model/rankview.h"
#include "out/report.h"
#include "findings/story.h"

struct xm_job {
	struct an_job job;
	struct an_findings f;
	struct xm_rank *r;
	int main_comm;
	struct an_tables t; /* the report's tables, built once: the page shows what text shows */
	int have_t;
	double th[AN_TH_COUNT]; /* the job's thresholds (job.th points here) */
	struct an_rank_view rv; /* the rows a large job keeps (rankview.h), as text keeps them */
	uint8_t *kept;          /* per process (xm_rank index): 1 a row of rv, or rv.all */
};

_Static_assert(AN_TH_COUNT <= 64, "struct xm_opts holds every threshold");

void xm_opts_init(struct xm_opts *o)
{
	memset(o, 0, sizeof *o);
	memcpy(o->th, an_threshold_defaults, sizeof an_threshold_defaults);
}

/* The main communicator: most calls over all processes (-1 none) */
static int main_comm_of(const struct an_job *j)
{
	int best = -1;
	size_t *cnt = calloc(j->ncomms + 1, sizeof *cnt);
	if (cnt) {
		for (size_t i = 0; i < j->nranks; i++)
			for (size_t k = 0; k < j->ranks[i].ncalls; k++)
				if (j->ranks[i].calls[k].comm >= 0 &&
				    (size_t)j->ranks[i].calls[k].comm < j->ncomms)
					cnt[j->ranks[i].calls[k].comm]++;
		for (size_t c = 0; c < j->ncomms; c++)
			if (cnt[c] && (best < 0 || cnt[c] > cnt[best]))
				best = (int)c;
		free(cnt);
	}
	return best;
}

/* The rows a large job keeps (as RANKS keeps them), and which processes they are */
static int view_init(struct xm_job *x)
{
	const struct an_job *j = &x->job;
	x->kept = calloc(j->nranks ? j->nranks : 1, 1);
	if (!x->kept)
		return -1;
	an_rank_view_build(j, &x->t, &x->f, &x->rv); /* out of memory: every rank */
	for (size_t i = 0; i < x->t.nranks; i++)
		x->kept[x->t.ranks[i].r - j->ranks] = x->rv.all || x->rv.kept[i];
	return 0;
}

struct xm_job *xm_new(const struct xm_opts *o, double **th, struct an_job **job,
                      struct an_findings **f)
{
	struct xm_job *x = calloc(1, sizeof *x);
	if (!x) {
		an_diag("nvlprof: out of memory\n");
		return NULL;
	}
	memcpy(x->th, o->th, sizeof x->th); /* the job keeps a pointer: they live as long as it */
	*th = x->th;
	*job = &x->job;
	*f = &x->f;
	return x;
}

void xm_discard(struct xm_job *x)
{
	free(x);
}

struct xm_job *xm_ready(struct xm_job *x)
{
	const struct an_job *j = &x->job;
	if (an_tables_build(j, &x->t) < 0) {
		an_tables_free(&x->t);
		an_diag("nvlprof: out of memory\n");
		xm_close(x);
		return NULL;
	}
	x->have_t = 1;
	x->r = calloc(j->nranks ? j->nranks : 1, sizeof *x->r);
	if (!x->r || view_init(x) < 0) {
		an_diag("nvlprof: out of memory\n");
		xm_close(x);
		return NULL;
	}
	for (size_t i = 0; i < j->nranks; i++) {
		const struct an_rank *a = &j->ranks[i];
		struct xm_rank *o = &x->r[i];
		o->ok = a->ok;
		o->rank = a->rank;
		o->pid = a->pid;
		o->host = a->host;
		o->path = a->path;
		o->offset = a->offset;
		o->t_mono0 = a->t_mono0;
		o->t_real0 = a->t_real0;
		if (a->rank >= 0)
			snprintf(o->label, sizeof o->label, "rank %d", a->rank);
		else
			snprintf(o->label, sizeof o->label, "pid %d", a->pid);
	}
	x->main_comm = main_comm_of(j);
	return x;
}

void xm_close(struct xm_job *x)
{
	if (!x)
		return;
	if (x->have_t)
		an_tables_free(&x->t);
	an_rank_view_free(&x->rv);
	free(x->kept);
	an_findings_free(&x->f);
	an_job_free(&x->job);
	free(x->r);
	free(x);
}

size_t xm_nranks(const struct xm_job *x)
{
	return x->job.nranks;
}
const struct xm_rank *xm_rank(const struct xm_job *x, size_t i)
{
	return &x->r[i];
}
void xm_span(const struct xm_job *x, uint64_t *t0, uint64_t *t1)
{
	*t0 = x->job.t0;
	*t1 = x->job.t1;
}

size_t xm_ncomms(const struct xm_job *x)
{
	return x->job.ncomms;
}
int xm_comm_of_hash(const struct xm_job *x, uint64_t hash)
{
	for (size_t c = 0; c < x->job.ncomms; c++)
		if (x->job.comms[c].hash == hash)
			return (int)c;
	return -1;
}
uint64_t xm_comm_hash(const struct xm_job *x, int comm)
{
	return comm >= 0 && (size_t)comm < x->job.ncomms ? x->job.comms[comm].hash : 0;
}
int xm_comm_nranks(const struct xm_job *x, int comm)
{
	return comm >= 0 && (size_t)comm < x->job.ncomms ? x->job.comms[comm].nranks : 0;
}
int xm_main_comm(const struct xm_job *x)
{
	return x->main_comm;
}

int xm_steps(const struct xm_job *x, uint64_t *s0, uint64_t *len)
{
	const struct an_job *j = &x->job;
	*s0 = *len = 0;
	if (j->step_ns <= 0 || j->win1 <= j->win0)
		return 0;
	*s0 = j->win0;
	*len = (uint64_t)j->step_ns;
	if (!*len)
		return 0;
	uint64_t n = (j->win1 - j->win0) / *len;
	return n > 1000000 ? 1000000 : (int)n;
}

size_t xm_ncalls(const struct xm_job *x, size_t rank)
{
	return x->job.ranks[rank].ncalls;
}
void xm_call(const struct xm_job *x, size_t rank, size_t k, struct xm_call *c)
{
	const struct an_rank *r = &x->job.ranks[rank];
	const struct an_call *a = &r->calls[k];
	c->t = a->t_enter + (uint64_t)r->offset;
	c->host_dur = a->host_dur;
	c->gpu_start = a->gpu_start ? a->gpu_start + (uint64_t)r->offset : 0;
	c->gpu_dur = a->gpu_dur;
	c->bytes = a->bytes;
	c->seq = a->seq;
	c->comm = (size_t)a->comm < x->job.ncomms ? a->comm : -1; /* the job's index once analyzed */
	c->fn = a->fn;
	c->device = a->device;
}

size_t xm_nfindings(const struct xm_job *x)
{
	return x->f.n;
}
void xm_finding(const struct xm_job *x, size_t i, struct xm_finding *o)
{
	const struct an_finding *f = &x->f.v[i];
	o->id = f->id;
	o->sev = an_sev_name(f->sev);
	o->sev_level = f->sev;
	o->title = f->title;
	o->advice = f->advice;
	o->explained_by = f->explained_by;
	o->nev = f->nev;
	o->root_rank = (int)an_ev_num(f, AN_EV_RANK, -1);
	if (o->root_rank < 0)
		o->root_rank = f->root_rank;
}
void xm_finding_ev(const struct xm_job *x, size_t i, int k, char *buf, size_t len)
{
	const struct an_ev *e = &x->f.v[i].ev[k];
	char v[256];
	snprintf(buf, len, "%s: %s", e->key, an_ev_value(e, v, sizeof v));
}
int xm_finding_card(const struct xm_job *x, size_t i, int k, char *buf, size_t len)
{
	return an_ev_card(&x->f.v[i].ev[k], buf, len);
}
int xm_has_finding(const struct xm_job *x, const char *id)
{
	return an_findings_get(&x->f, id) != NULL;
}

size_t xm_nhangs(const struct xm_job *x)
{
	return x->job.nhangs;
}
void xm_hang(const struct xm_job *x, size_t i, struct xm_hang *h)
{
	const struct an_hang *a = &x->job.hangs[i];
	h->comm = a->comm;
	h->fn = a->fn;
	h->seq = a->seq;
	h->wait_ms = a->wait_ms;
	h->nmissing = a->nmissing;
	h->npresent = a->npresent;
	h->missing = a->missing;
	h->present = a->present;
}

size_t xm_ndevs(const struct xm_job *x, size_t rank)
{
	return x->job.ranks[rank].ndevs;
}
int xm_dev(const struct xm_job *x, size_t rank, size_t d)
{
	return x->job.ranks[rank].devs[d].device;
}
size_t xm_nsamples(const struct xm_job *x, size_t rank, size_t d)
{
	return x->job.ranks[rank].devs[d].nsamples;
}
void xm_sample(const struct xm_job *x, size_t rank, size_t d, size_t k, struct xm_sample *s)
{
	const struct an_rank *r = &x->job.ranks[rank];
	const struct an_sample *a = &r->devs[d].samples[k];
	s->s = a->s + (uint64_t)r->offset;
	s->e = a->e + (uint64_t)r->offset;
	s->nvl = a->nvl;
	s->pcie = a->pcie;
	s->gap = a->gap;
}
size_t xm_ncoll_ivals(const struct xm_job *x, size_t rank, size_t d)
{
	return x->job.ranks[rank].devs[d].nccl.n;
}
void xm_coll_ival(const struct xm_job *x, size_t rank, size_t d, size_t k, uint64_t *s, uint64_t *e)
{
	const struct an_rank *r = &x->job.ranks[rank];
	const struct an_ival *v = &r->devs[d].nccl.v[k];
	*s = v->s + (uint64_t)r->offset;
	*e = v->e + (uint64_t)r->offset;
}
double xm_dev_peak(const struct xm_job *x, size_t rank, int device)
{
	return an_dev_peak(&x->job, &x->job.ranks[rank], device);
}

size_t xm_nallocs(const struct xm_job *x, size_t rank)
{
	return x->job.ranks[rank].nallocs;
}
void xm_alloc(const struct xm_job *x, size_t rank, size_t k, struct xm_alloc *o)
{
	const struct an_alloc *a = &x->job.ranks[rank].allocs[k];
	o->ptr = a->ptr;
	o->bytes = a->bytes;
	o->migrations = a->migrations;
	o->flips = a->flips;
	o->htod = a->htod;
	o->dtoh = a->dtoh;
	o->device = a->device;
}
long xm_alloc_of(const struct xm_job *x, size_t rank, uint64_t addr)
{
	return an_alloc_index(&x->job.ranks[rank], addr);
}

void xm_rank_last(const struct xm_job *x, size_t rank, uint64_t *last, uint64_t *colls)
{
	*last = *colls = 0;
	if (x->job.rx) {
		*last = x->job.rx[rank].last_count;
		*colls = x->job.rx[rank].colls;
	}
}

void xm_story(const struct xm_job *x, char *buf, size_t len)
{
	struct an_story s;
	buf[0] = 0;
	if (an_story_build(&x->job, &x->f, &s) == 0) {
		snprintf(buf, len, "%s", s.text);
		an_story_free(&s);
	}
}

void xm_report_text(FILE *o, const struct xm_job *x)
{
	an_report_text(o, &x->job, &x->f);
}

void xm_summary(const struct xm_job *x, struct xm_summary *s)
{
	struct an_summary a;
	an_summarize(&x->job, &a);
	s->wall_ms = a.wall_ms;
	s->step_ms = a.step_ms;
	s->comm_ms = a.comm_ms;
	s->exposed_ms = a.exposed_ms;
	s->exposed_share = a.exposed_share;
	s->nvlink_mib = a.nvlink_bytes / 1048576.0;
	s->pcie_mib = a.pcie_bytes / 1048576.0;
	s->copy_p2p_mib = a.copy_p2p_bytes / 1048576.0;
	s->copy_staged_mib = a.copy_staged_bytes / 1048576.0;
	s->steps = a.steps;
	s->processes = a.processes;
}

const char *xm_fn_name(int fn)
{
	return nvlp_nccl_fn_name((unsigned)fn);
}
const char *xm_fn_coll(int fn)
{
	static const char *const n[AN_C_COUNT] = {
	    "", "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "send_recv"};
	int c = an_coll_of_fn((unsigned)fn);
	return c > 0 && c < AN_C_COUNT ? n[c] : "";
}

int xm_is_nccl_kernel(const char *name)
{
	return name && an_coll_of_kernel(name) != 0;
}

/* ---- kernel names, demangled once per distinct name ---- */
struct xm_names {
	struct xm_name {
		uint64_t h;
		char *full, *shortn;
	} * v;
	size_t n, cap;
};

struct xm_names *xm_names_new(void)
{
	return calloc(1, sizeof(struct xm_names));
}

void xm_names_free(struct xm_names *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->cap; i++)
		if (c->v[i].h) {
			free(c->v[i].full);
			free(c->v[i].shortn);
		}
	free(c->v);
	free(c);
}

/* room for one more entry (the table doubled at half full). @return 0, -1 out of memory */
static int names_grow(struct xm_names *c)
{
	if (2 * (c->n + 1) <= c->cap)
		return 0;
	size_t cap = c->cap ? 2 * c->cap : 256;
	struct xm_name *v = calloc(cap, sizeof *v);
	if (!v)
		return -1;
	for (size_t i = 0; i < c->cap; i++)
		if (c->v[i].h) {
			size_t j = c->v[i].h & (cap - 1);
			while (v[j].h)
				j = (j + 1) & (cap - 1);
			v[j] = c->v[i];
		}
	free(c->v);
	c->v = v;
	c->cap = cap;
	return 0;
}

int xm_kernel_names(struct xm_names *c, const char *name, const char **full, const char **shortn)
{
	*full = *shortn = name;
	if (!name)
		return 0;
	if (!c || names_grow(c))
		return -1;
	uint64_t h = nvlp_hash64(name, strlen(name), 0x6b6e616d65ULL) | 1;
	size_t j = h & (c->cap - 1);
	while (c->v[j].h && c->v[j].h != h) /* 64-bit hash of the name: a collision is not a concern */
		j = (j + 1) & (c->cap - 1);
	if (!c->v[j].h) {
		if (an_demangle(name, &c->v[j].full, &c->v[j].shortn))
			return -1;
		c->v[j].h = h;
		c->n++;
	}
	*full = c->v[j].full;
	*shortn = c->v[j].shortn;
	return 0;
}

/* ---- the report's tables as rows (copied from an_tables_build's, never recomputed) ---- */
void xm_head_text(FILE *o, const struct xm_job *x)
{
	an_report_head(o, &x->job, &x->t);
}

int xm_diff_view(const struct xm_job *b, const struct xm_job *a, struct an_diff_view *v)
{
	struct an_summary sb, sa;
	an_summarize(&b->job, &sb);
	an_summarize(&a->job, &sa);
	return an_diff_view(&b->job, &b->f, &sb, &a->job, &a->f, &sa, v);
}

const char *xm_coll_time_kind(const struct xm_job *x)
{
	return x->job.have_gpu || x->job.have_kch_gpu ? "GPU kernel time" : "host call time";
}

size_t xm_ncoll_rows(const struct xm_job *x)
{
	return x->job.naggs;
}
void xm_coll_row(const struct xm_job *x, size_t i, struct xm_coll_row *r)
{
	const struct an_arow *a = &x->t.coll[i];
	r->comm_hash = a->c->hash;
	r->comm_name = a->c->name;
	r->fn = nvlp_nccl_fn_name(a->a->fn);
	r->nranks = a->c->nranks;
	r->host_time = a->host_time;
	r->calls_per_rank = a->calls_per_rank;
	r->bytes_per_call = a->bytes_per_call;
	r->ms_per_rank = a->time_ms_per_rank;
	r->algbw = a->algbw;
	r->busbw = a->busbw;
	r->peak_share = a->peak_share;
}

size_t xm_nrank_rows(const struct xm_job *x)
{
	return x->t.nranks;
}
void xm_rank_row(const struct xm_job *x, size_t i, struct xm_rank_row *r)
{
	const struct an_rrow *w = &x->t.ranks[i];
	r->rank = w->rank;
	r->pid = w->r->pid;
	r->host = w->r->host;
	r->gpu = w->gpu;
	r->truncated = w->r->truncated;
	r->wall_ms = w->wall_ns / 1e6;
	r->comm_ms = w->comm.ns / 1e6;
	r->comm_host = w->comm.host > 0;
	r->exposed_ms = w->gpu ? w->exposed_ns / 1e6 : NAN;
	r->exposed_share = w->gpu ? (w->span_ns > 0 ? w->exposed_ns / w->span_ns : 0) : NAN;
	r->last_share = w->x->colls ? (double)w->x->last_count / (double)w->x->colls : 0;
	r->lead_ms = w->x->median_lead_ns / 1e6;
	r->waited_ms = w->x->wait_ns / 1e6;
}

void xm_rank_view(const struct xm_job *x, struct xm_rank_view *v)
{
	const struct an_rank_view *w = &x->rv;
	memset(v, 0, sizeof *v);
	v->all = w->all;
	v->nshown = w->all ? x->t.nranks : w->nshown;
	v->nrest = w->nrest;
	v->named_more = w->named_more;
	v->rest_gpu = w->rest_gpu;
	v->heat_rows = x->th[AN_TH_heatmap_rows];
	for (int c = 0; c < AN_RV_COLS; c++)
		for (int q = 0; q < 4; q++) /* shares as xm_rank_row gives them: fractions */
			v->dist[c][q] = w->dist[c][q] /
			                (c == AN_RV_EXPOSED_SHARE || c == AN_RV_LAST ? 100 : 1);
}
size_t xm_rank_view_row(const struct xm_job *x, size_t k, const char **why)
{
	*why = x->rv.all ? "" : x->rv.what[k];
	return x->rv.all ? k : x->rv.shown[k];
}
int xm_rank_kept(const struct xm_job *x, size_t r)
{
	return r < x->job.nranks && x->kept[r];
}

size_t xm_link_rows(const struct xm_job *x, struct xm_link_row *v, size_t cap)
{
	const struct an_job *j = &x->job;
	size_t n = 0;
	if (!j->have_links)
		return 0;
	for (size_t i = 0; i < j->nranks; i++)
		for (size_t d = 0; d < j->ranks[i].ndevs; d++) {
			const struct an_dev *e = &j->ranks[i].devs[d];
			if (!e->nsamples)
				continue;
			if (n < cap)
				v[n] = (struct xm_link_row){j->ranks[i].rank >= 0 ? j->ranks[i].rank
				                                                  : (int)i,
				                            e->device,
				                            (double)(e->nvl_tx + e->nvl_rx),
				                            (double)e->nvl_coll,
				                            (double)(e->pcie_rd + e->pcie_wr),
				                            (double)e->pcie_coll, i};
			n++;
		}
	return n;
}

size_t xm_nchoice_rows(const struct xm_job *x)
{
	return x->job.nchoices;
}
void xm_choice_row(const struct xm_job *x, size_t i, struct xm_choice_row *r)
{
	const struct an_job *j = &x->job;
	const struct an_jchoice *c = &j->choices[i];
	r->comm_known = c->comm >= 0;
	r->comm_hash = c->comm >= 0 ? j->comms[c->comm].hash : 0;
	r->fn = an_choice_fn_name(j, c);
	snprintf(r->algo_proto, sizeof r->algo_proto, "%s/%s", c->algo, c->proto);
	r->calls = c->calls;
	an_choice_channels(c, r->channels, sizeof r->channels);
}

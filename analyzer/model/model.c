/* model.c: the helpers findings and printers read the model with: thresholds, NCCL's channel
 * ranges, exposure per rank and per communicator, NVLink peaks and topology, wall and
 * communication time of a process. The stages that build the model are listed in pipeline.c. */
#include "model/model.h"

#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* strtod */
#include <string.h> /* strcmp */

#include "nvlp_trace.h"
#include "model/stages.h"

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

const char *an_choice_channels(const struct an_jchoice *x, char *buf, size_t len)
{
	if (x->ch_min == x->ch_max)
		snprintf(buf, len, "%d", x->ch_min);
	else
		snprintf(buf, len, "%d-%d", x->ch_min, x->ch_max);
	return buf;
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

/* ---- helpers ---- */

/* Device's NVLink peak in r's records: its direct links summed, and its NVSwitch links once (a
 * record per pair of GPUs on the switch names the same ports: the largest). */
static double dev_peak_in(const struct an_rank *r, int device)
{
	double direct = 0, fabric = 0;
	for (size_t i = 0; i < r->nlinks; i++) {
		const struct an_link *l = &r->links[i];
		if (!(l->type0 == NVLP_DEV_TYPE_GPU && l->dev0 == device) &&
		    !(l->type1 == NVLP_DEV_TYPE_GPU && l->dev1 == device))
			continue;
		double pk = (double)l->links * (double)l->bw_Bps;
		if (!l->nvswitch)
			direct += pk;
		else if (pk > fabric)
			fabric = pk;
	}
	return direct + fabric;
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
	if (a < 0 || b < 0) /* dev1 -1: links beyond the process, not a GPU of it */
		return 0;
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

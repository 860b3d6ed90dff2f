/* align.c: the align stage's two steps (stages.h): the job's communicator table (every process's
 * communicators numbered into it, their calls renumbered and counted; members, host locality,
 * NVLink peak and names) with the clock anchors; then the cross-rank step, which builds each
 * communicator's collective table (ctab.c), refines the clocks across hosts (clocks.c) and
 * computes the cross-rank figures (waits.c). */
#include <stdio.h>  /* snprintf, sscanf */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "model/align_int.h"
#include "model/model.h"
#include "model/stages.h"

/* ---- the job's communicators ---- */
/* A process's calls renumbered to the job's comms and counted; dropped: some of its comms are
 * beyond AN_MAX_COMMS, their calls go. */
static void renumber_calls(struct an_job *job, struct an_rank *r, int dropped)
{
	size_t o = 0;
	int valid = r->host_sum_n == r->ncalls;
	for (size_t k = 0; k < r->ncalls; k++) {
		struct an_call *c = &r->calls[k];
		uint32_t jc = r->comms[c->comm].job_comm;
		if (jc == AN_COMM_NONE) { /* beyond AN_MAX_COMMS in the job */
			job->calls_dropped++;
			if (valid) /* the sum stays that of the calls kept */
				r->host_sum -= c->host_dur;
			continue;
		}
		c->comm = jc;
		job->comms[jc].ncalls++;
		if (dropped) {
			r->calls[o] = *c;
			if (r->csig)
				r->csig[o] = r->csig[k];
		}
		o++;
	}
	r->ncalls = o;
	if (valid)
		r->host_sum_n = o;
}

/* A process whose CUPTI detached after start-up (NVLPROF_CUPTI=startup), counted once. */
static void cupti_detach(struct an_job *job, const struct an_rank *r)
{
	static const char unsafe[] = NVLP_NOTE_FINALIZE_UNSAFE, lazy[] = NVLP_NOTE_CUPTI_LAZY,
	                  needed[] = NVLP_NOTE_CUPTI_LAZY_NEEDED, lum[] = NVLP_NOTE_CUPTI_LAZY_UM;
	int det = 0, again = 0, kept = 0, lz = 0, nd = 0, um = 0;
	for (size_t i = 0; i < r->nnotes; i++) {
		const struct an_note *n = &r->notes[i];
		if (n->code == NVLP_NOTE_CUPTI_DETACHED && !det++ && n->value > job->cupti_detach_ms)
			job->cupti_detach_ms = n->value;
		again |= n->code == NVLP_NOTE_CUPTI_REATTACHED;
		int cfg = n->code == NVLP_NOTE_CONFIG;
		kept |= cfg && !strncmp(n->msg, unsafe, sizeof unsafe - 1);
		lz |= cfg && !strncmp(n->msg, lazy, sizeof lazy - 1);
		nd |= cfg && !strncmp(n->msg, needed, sizeof needed - 1);
		um |= n->code == NVLP_NOTE_CUPTI_UNAVAILABLE && !strncmp(n->msg, lum, sizeof lum - 1);
	}
	job->cupti_detached += det > 0;
	job->cupti_kept_unsafe += kept;
	job->cupti_lazy += lz;
	job->cupti_lazy_needed += nd;
	job->cupti_lazy_um += um;
	job->cupti_reattached += again;
}

/* Whether r saw two GPUs or more, or one in a communicator of several ranks (NVLink to the
 * other ranks' GPUs matters), given the devices its topology NOTE counted */
static int topo_matters(const struct an_rank *r, int devs)
{
	for (size_t i = 0; devs == 1 && i < r->ncomms; i++)
		if (r->comms[i].nranks > 1)
			return 1;
	return devs > 1;
}

/* Under NVLPROF_CUPTI=lazy: why this process, which saw two GPUs or more (or one, in a
 * communicator of several ranks), recorded no NVLink pair when that was NVML's silence, not the
 * hardware (no NVML, or no link's state answered), into job->lazy_topo_why (the first such
 * process's). The notes: NVML_UNAVAILABLE "<none> WHY; N device(s) recorded from the driver",
 * CONFIG "<got> N device(s), 0 NVLink pair(s); <state> A active, I inactive, U unanswered". */
static void lazy_topology(struct an_job *job, const struct an_rank *r)
{
	static const char none[] = NVLP_NOTE_TOPO_LAZY_NONE, got[] = NVLP_NOTE_TOPO_LAZY,
	                  st[] = NVLP_NOTE_TOPO_LAZY_STATE;
	for (size_t i = 0; i < r->nnotes && !job->lazy_topo_why[0]; i++) {
		const struct an_note *n = &r->notes[i];
		_Static_assert(sizeof NVLP_NOTE_TOPO_LAZY_NONE < sizeof n->msg, "why within msg");
		const char *s = n->msg, *why = s + sizeof none - 1, *end;
		int devs = 0, a = 0, in = 0, un = 0;
		if (n->code == NVLP_NOTE_NVML_UNAVAILABLE && !strncmp(s, none, sizeof none - 1) &&
		    (end = strstr(why, "; ")) && sscanf(end, "; %d device", &devs) == 1 &&
		    topo_matters(r, devs))
			snprintf(job->lazy_topo_why, sizeof job->lazy_topo_why, "NVML gave none:%.*s",
			         (int)(end - why), why);
		else if (n->code == NVLP_NOTE_CONFIG && n->value == 0 &&
		         !strncmp(s, got, sizeof got - 1) &&
		         sscanf(s + sizeof got - 1, " %d device", &devs) == 1 &&
		         topo_matters(r, devs) &&
		         (s = strstr(s, st)) &&
		         sscanf(s + sizeof st - 1, " %d active, %d inactive, %d unanswered", &a, &in,
		                &un) == 3 &&
		         a == 0 && un > 0)
			snprintf(job->lazy_topo_why, sizeof job->lazy_topo_why,
			         "NVML answered the state of %d of %d links", in, in + un);
	}
}

/* The job's comm table from every process's comms; calls renumbered to it (those beyond
 * AN_MAX_COMMS dropped and counted) and counted per comm. @return 0, or -1 out of memory */
static int comm_table(struct an_job *job)
{
	size_t capc = 0;
	struct an_index ix = {0};
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (r->kind_count[NVLP_K_KERNEL])
			job->have_gpu = 1;
		if (r->kind_count[NVLP_K_KERNEL] || r->kind_count[NVLP_K_GPUCOPY] ||
		    r->kind_count[NVLP_K_UM])
			job->have_gpu_any = 1;
		if (r->kind_count[NVLP_K_LINKSAMPLE])
			job->have_links = 1;
		if (r->nlinks)
			job->have_topo = 1;
		cupti_detach(job, r);
		lazy_topology(job, r);
		int dropped = 0;
		for (size_t i = 0; i < r->ncomms; i++) {
			long j = an_index_get(&ix, r->comms[i].hash, 0);
			if (j < 0 && job->ncomms < AN_MAX_COMMS) {
				struct an_comm *c = PUSH(job->comms, job->ncomms, capc);
				if (!c || an_index_put(&ix, r->comms[i].hash, 0,
				                       (uint32_t)(job->ncomms - 1))) {
					an_index_free(&ix);
					return -1;
				}
				memset(c, 0, sizeof *c);
				c->hash = r->comms[i].hash;
				c->nranks = r->comms[i].nranks;
				c->single_host = 1;
				c->peak_Bps = -1;
				j = (long)(job->ncomms - 1);
			}
			if (j < 0)
				dropped = 1;
			r->comms[i].job_comm = j < 0 ? AN_COMM_NONE : (uint32_t)j;
		}
		/* a pass over every call is dear on a trace of millions: none when the process's
		 * comm numbers are the job's already (one comm, the first) */
		int same = !dropped;
		for (size_t i = 0; same && i < r->ncomms; i++)
			same = r->comms[i].job_comm == i;
		if (same && r->ncomms == 1) {
			job->comms[0].ncalls += r->ncalls;
			continue;
		}
		renumber_calls(job, r, dropped);
	}
	an_index_free(&ix);
	return 0;
}

/* Comm membership, host locality and NVLink peak, in one pass over the processes' comms.
 * @return 0, or -1 out of memory */
static int comm_members(struct an_job *job)
{
	const char **host0 = calloc(job->ncomms ? job->ncomms : 1, sizeof *host0);
	double *peak = malloc((AN_MAX_DEVICE + 2) * sizeof *peak);
	if (!host0 || !peak) {
		free(host0);
		free(peak);
		return -1;
	}
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		for (int d = 0; d < AN_MAX_DEVICE + 2; d++)
			peak[d] = -1;
		for (size_t i = 0; i < r->ncomms; i++) {
			if (r->comms[i].job_comm == AN_COMM_NONE)
				continue;
			struct an_comm *c = &job->comms[r->comms[i].job_comm];
			c->nmembers++;
			if (!host0[r->comms[i].job_comm])
				host0[r->comms[i].job_comm] = r->host;
			else if (strcmp(host0[r->comms[i].job_comm], r->host))
				c->single_host = 0;
			int d = r->comms[i].device; /* -1 .. AN_MAX_DEVICE (ingest checked) */
			if (peak[d + 1] < 0)
				peak[d + 1] = an_dev_peak(job, r, d);
			double pk = peak[d + 1];
			if (c->peak_Bps < 0 || pk < c->peak_Bps)
				c->peak_Bps = pk;
		}
	}
	free(host0);
	free(peak);
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		struct an_comm *c = &job->comms[ci];
		if (!c->single_host || c->peak_Bps < 0)
			c->peak_Bps = 0;
	}
	return 0;
}

/* Names the job gave its communicators: the first process naming one names it (its first
 * record for it), in one pass over the names. @return 0, or -1 out of memory */
static int comm_names(struct an_job *job)
{
	struct an_index ix = {0};
	size_t *by = NULL; /* per comm: the process that named it, + 1 */
	int rc = 0;
	for (size_t f = 0; f < job->nranks && !rc; f++)
		for (size_t i = 0; i < job->ranks[f].ncnames && !rc; i++) {
			if (!by) { /* only when some process names one */
				by = calloc(job->ncomms + 1, sizeof *by);
				for (size_t ci = 0; by && !rc && ci < job->ncomms; ci++)
					rc = an_index_put(&ix, job->comms[ci].hash, 0, (uint32_t)ci);
				if (!by || rc) {
					rc = -1;
					break;
				}
			}
			long ci = an_index_get(&ix, job->ranks[f].cnames[i].hash, 0);
			struct an_comm *c = ci >= 0 ? &job->comms[ci] : NULL;
			if (!c || c->name[0] || by[ci] == f + 1)
				continue;
			memcpy(c->name, job->ranks[f].cnames[i].name, sizeof c->name);
			by[ci] = f + 1;
		}
	an_index_free(&ix);
	free(by);
	return rc;
}

int an_align_comms(struct an_job *job)
{
	if (comm_table(job) < 0 || comm_members(job) < 0)
		return -1;
	if (comm_names(job) < 0)
		return -1;
	/* clocks: realtime anchors first */
	an_clock_anchors(job);
	return 0;
}

int an_align_cross_rank(struct an_job *job)
{
	job->rx = calloc(job->nranks, sizeof *job->rx);
	struct ctab *tabs = calloc(job->ncomms ? job->ncomms : 1, sizeof *tabs);
	struct centry *all = NULL;
	int rc = -1;
	if (tabs && job->rx && an_ctab_build_all(job, tabs, &all) == 0) {
		an_clock_refine(job, tabs);
		an_cross_rank(job, tabs);
		rc = 0;
	} else if (job->ncomms)
		job->comms_unmatched = job->ncomms;
	for (size_t ci = 0; tabs && ci < job->ncomms; ci++)
		an_ctab_free(&tabs[ci]);
	free(all);
	free(tabs);
	return rc;
}

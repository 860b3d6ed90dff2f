/* det_gaps.c: the collection_gaps finding: data that was not collected (unreadable or missing
 * traces, GPU activity, link counters, topology, collection notes). */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "model/kernelch.h" /* window coverage */
#include "util/containers.h" /* an_index */

/* The collection_gaps finding being told: added at its first piece of evidence (x NULL until
 * then); oom: adding it failed (no later piece tries again) */
struct gaps {
	struct an_findings *out;
	struct an_finding *x;
	int oom;
};
static struct an_finding *gap_finding(struct gaps *g)
{
	if (!g->x && !g->oom) {
		g->x = an_f_add(g->out, AN_F_collection_gaps, AN_SEV_INFO,
		                "Some data was not collected; related figures are partial");
		g->oom = !g->x;
	}
	return g->x;
}
#define GAP(...) an_f_str(gap_finding(g), __VA_ARGS__)

/* Traces that mix jobs, cannot be read, were cut short, or are missing */
static void gaps_traces(const struct an_job *job, struct gaps *g)
{
	if (job->several_jobs[0])
		GAP("several_jobs", "%s: figures mix those jobs; give each run its own directory",
		    job->several_jobs);
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok)
			GAP("unreadable", "%s", r->err);
		else if (r->truncated)
			GAP("truncated", "rank %d: %s", r->rank, r->err);
	}
	for (size_t ci = 0; ci < job->ncomms; ci++) /* a rank without a trace cannot be judged */
		if (job->comms[ci].nranks > job->comms[ci].nmembers)
			GAP("missing_traces", "comm %016llx has %d ranks, traces hold %d of them",
			    (unsigned long long)job->comms[ci].hash, job->comms[ci].nranks,
			    job->comms[ci].nmembers);
}

/* 1 if a host has two GPUs (over its processes' devices): an NVLink peer to find. A single
 * GPU per host, one process or several sharing it, has no NVLink topology to record. */
static int has_gpu_peer(const struct an_job *job)
{
	for (size_t h = 0; h < job->nhosts; h++) /* pairs of one host's processes only */
		for (size_t p = job->host_at[h]; p < job->host_at[h + 1]; p++)
			for (size_t q = p; q < job->host_at[h + 1]; q++) {
				size_t f = job->by_host[p], g = job->by_host[q];
				if (f >= job->nranks || g >= job->nranks)
					continue;
				const struct an_rank *a = &job->ranks[f], *b = &job->ranks[g];
				if (!a->ok || !b->ok)
					continue;
				for (size_t i = 0; i < a->ndevs; i++)
					for (size_t k = 0; k < b->ndevs; k++)
						if (a->devs[i].device != b->devs[k].device)
							return 1;
			}
	return 0;
}

/* GPU activity, link counters and topology that were not recorded */
static void gaps_gpu(const struct an_job *job, struct gaps *g)
{
	if (!job->have_gpu_any && job->kch && job->kch->windows)
		GAP("gpu_activity",
		    "no GPU activity records: kernels and copies were traced only in %llu window(s) "
		    "(%.2f%% of the run, NVLPROF_KERNELS), none fell inside; %s "
		    "(NVLPROF_KERNELS=all: every kernel)",
		    (unsigned long long)job->kch->windows,
		    job->kch->span_ns ? 100.0 * (double)job->kch->window_ns / (double)job->kch->span_ns
		                      : 0.0,
		    job->have_kch_gpu ? "collectives timed by NCCL's kernel channels, compute overlap "
		                        "unknown"
		                      : "communication times are host call times");
	else if (!job->have_gpu_any)
		GAP("gpu_activity", "no GPU activity records (CUPTI off or no driver): %s",
		    job->have_kch_gpu ? "collectives timed by NCCL's kernel channels, compute overlap "
		                        "unknown"
		                      : "communication times are host call times");
	else if (!job->have_gpu && job->ncomms)
		GAP("gpu_activity", "no KERNEL records: %s",
		    job->have_kch_gpu ? "collectives timed by NCCL's kernel channels, compute overlap "
		                        "unknown"
		                      : "communication times are host call times");
	if (job->have_gpu_any && !job->have_links)
		GAP("link_counters", "no LINKSAMPLE records: NVLink/PCIe bytes unknown");
	if (job->have_gpu_any && !job->have_topo && has_gpu_peer(job))
		GAP("topology",
		    "no NVLINK topology records: link peak unknown, bandwidth not judged");
	else if (job->lazy_topo_why[0] && !job->have_topo) /* 2+ GPUs, or 1 among ranks */
		GAP("topology",
		    "no NVLink topology under NVLPROF_CUPTI=lazy (%s): NVLink between the GPUs "
		    "unknown, so staged copies and fallbacks are judged without it; "
		    "NVLPROF_CUPTI=1 takes the topology from CUPTI",
		    job->lazy_topo_why);
}

/* NCCL kernels that never finished or could not be matched to their calls */
static void gaps_kernels(const struct an_job *job, struct gaps *g)
{
	uint64_t unmatched = 0, resync = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		unmatched += job->ranks[f].gpu_unmatched_kernels;
		resync += job->ranks[f].gpu_resync;
	}
	uint64_t unfinished = 0;
	for (size_t f = 0; f < job->nranks; f++)
		unfinished += job->ranks[f].gpu_unfinished;
	if (unfinished)
		GAP("unfinished_kernels",
		    "%llu NCCL kernels never finished (the job hung or was killed)",
		    (unsigned long long)unfinished);
	if (unmatched || resync)
		GAP("kernel_matching",
		    "%llu NCCL kernels without a call, %llu calls skipped to resynchronise",
		    (unsigned long long)unmatched, (unsigned long long)resync);
}

/* A note that says what was collected, not what is missing */
static int note_is_status(unsigned code)
{
	return code == NVLP_NOTE_INFO || code == NVLP_NOTE_ACTIVITY_ON ||
	       code == NVLP_NOTE_PM_SAMPLING_ON || code == NVLP_NOTE_NVML_ON ||
	       code == NVLP_NOTE_UM_ON || code == NVLP_NOTE_CONFIG || code == NVLP_NOTE_NCCL_PLUGIN ||
	       code == NVLP_NOTE_CUPTI_DETACHED || code == NVLP_NOTE_CUPTI_REATTACHED;
}

/* A GPU sampled by another process of this job (the NOTE's value is its pid): its counters
 * are in the job */
static int note_sampled_elsewhere(const struct an_job *job, size_t f, const struct an_note *n)
{
	const struct an_rank *r = &job->ranks[f];
	int sampled_here = 0;
	if (n->code == NVLP_NOTE_PM_SAMPLING_UNAVAILABLE && n->value) /* r's host's processes */
		for (size_t p = job->host_at[r->host_ix]; p < job->host_at[r->host_ix + 1] && !sampled_here; p++) {
			size_t g = job->by_host[p];
			sampled_here = g < job->nranks && g != f && job->ranks[g].ok &&
			               (uint64_t)job->ranks[g].pid == n->value;
		}
	return sampled_here;
}

/* The same (code, message) came earlier: in an earlier trace or before note i of trace f */
static int note_seen_before(const struct an_job *job, size_t f, size_t i)
{
	const struct an_note *n = &job->ranks[f].notes[i];
	for (size_t g = 0; g <= f; g++)
		for (size_t j = 0; j < (g == f ? i : job->ranks[g].nnotes); j++)
			if (job->ranks[g].notes[j].code == n->code &&
			    !strcmp(job->ranks[g].notes[j].msg, n->msg))
				return 1;
	return 0;
}

/* Notes of what could not be collected: each distinct (code, message) once */
/* Each (code, message) the first time it comes, by a hash of both (at[]: where each came
 * first); a hash met again with another message falls back to the scan, and so does every note
 * once out of memory (scan: the index misses the notes since). @return 1 if note i of trace f
 * came before */
struct notes_seen {
	struct an_index ix;
	struct note_at {
		size_t f, i;
	} *at;
	size_t n, cap;
	int scan;
};
static int note_seen(struct notes_seen *s, const struct an_job *job, size_t f, size_t i)
{
	if (s->scan)
		return note_seen_before(job, f, i);
	const struct an_note *n = &job->ranks[f].notes[i];
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (const char *c = n->msg; *c; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	long e = an_index_get(&s->ix, n->code, h);
	if (e >= 0) {
		const struct note_at *o = &s->at[e];
		return !strcmp(job->ranks[o->f].notes[o->i].msg, n->msg) || note_seen_before(job, f, i);
	}
	struct note_at *x = PUSH(s->at, s->n, s->cap);
	if (!x || an_index_put(&s->ix, n->code, h, (uint32_t)(s->n - 1))) {
		s->scan = 1; /* out of memory: as it always was */
		return note_seen_before(job, f, i);
	}
	*x = (struct note_at){f, i};
	return 0;
}

static void gaps_notes(const struct an_job *job, struct gaps *g)
{
	struct notes_seen seen = {0};
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->nnotes; i++) {
			const struct an_note *n = &r->notes[i];
			int before = note_seen(&seen, job, f, i); /* every note is remembered */
			if (note_is_status(n->code) || note_sampled_elsewhere(job, f, n) || before)
				continue;
			GAP(nvlp_note_name(n->code), "%s", n->msg);
		}
	}
	an_index_free(&seen.ix);
	free(seen.at);
}
#undef GAP

int an_detect_collection_gaps(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	struct gaps g = {.out = out};
	gaps_traces(ctx->job, &g);
	gaps_gpu(ctx->job, &g);
	gaps_kernels(ctx->job, &g);
	gaps_notes(ctx->job, &g);
	an_f_advice(g.x, AN_ADV_PLAIN);
	return g.oom ? -1 : 0;
}

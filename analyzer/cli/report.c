/* report.c: `nvlprof report`: findings first, then attribution tables, as text or --json. */
#include "load/kernelch.h"
#include "out/report.h"
#include "model/rankview.h"
#include "findings/story.h"

#include <errno.h>  /* errno */
#include <math.h>   /* NAN */
#include <stdlib.h> /* atoi */
#include <string.h> /* strcmp */

#include "cli/commands.h"
#include "model/cost.h"
#include "out/export.h" /* xh_wanted, xh_cmd */
#include "load/graphs.h"
#include "util/json.h"
#include "nvlp_trace.h"
#include "out/partial.h" /* an_partial_write */
#include "model/stages.h"
#include "util/util.h"

#define MIB (1024.0 * 1024.0)

static int nhosts(const struct an_job *job)
{
	return (int)an_hosts_of_ok(job);
}

static int rank_id(const struct an_job *job, size_t f)
{
	return job->ranks[f].rank >= 0 ? job->ranks[f].rank : (int)f;
}

/* Which (comm, fn) aggregates have no GPU execution anywhere in the job: COLLECTIVES' "h" rows
 * (a single-rank in-place AllReduce, which NCCL runs as nothing; calls outside every kernel
 * window). calloc'd, NULL when there is none or no memory (then no host part is added). */
static uint8_t *host_aggs(const struct an_job *job)
{
	size_t n = 0;
	for (size_t i = 0; i < job->naggs; i++)
		n += job->aggs[i].calls_gpu == 0;
	uint8_t *m = n ? calloc((size_t)job->ncomms * NVLP_NCCL_FN_COUNT, 1) : NULL;
	for (size_t i = 0; m && i < job->naggs; i++)
		if (job->aggs[i].calls_gpu == 0)
			m[(size_t)job->aggs[i].comm * NVLP_NCCL_FN_COUNT + job->aggs[i].fn] = 1;
	return m;
}

/* A rank's communication time, the one definition behind the summary line, RANKS, the JSON and
 * diff: its NCCL GPU time (an_rank_comm_ns: the union of NCCL's kernels and copies per device)
 * plus the host call time of its calls in collectives that have no GPU execution (host_aggs), so
 * that it adds up with COLLECTIVES. Without NCCL GPU time it is all host time. host: the host
 * part; win_host: the host part of calls entered inside the step window. */
static struct an_rank_comm rank_comm(const struct an_job *job, const struct an_rank *r,
                              const uint8_t *hagg)
{
	struct an_rank_comm c = {0};
	c.ns = (double)an_rank_comm_ns(r, &c.host_only);
	if (c.host_only) {
		c.host = c.ns;
		return c;
	}
	int win = job->win1 > job->win0;
	uint64_t a = win ? (uint64_t)((int64_t)job->win0 - r->offset) : 0,
	         b = win ? (uint64_t)((int64_t)job->win1 - r->offset) : UINT64_MAX;
	for (size_t k = 0; hagg && k < r->ncalls; k++) {
		const struct an_call *cl = &r->calls[k];
		if (!hagg[(size_t)cl->comm * NVLP_NCCL_FN_COUNT + cl->fn])
			continue;
		c.host += (double)cl->host_dur;
		if (cl->t_enter >= a && cl->t_enter < b)
			c.win_host += (double)cl->host_dur;
	}
	c.ns += c.host;
	return c;
}

/* an_summarize, and each process's rank_comm into rcs[file index] when rcs is not NULL (RANKS
 * and the JSON's ranks show the figures the summary adds up, computed once) */
static void summarize(const struct an_job *job, struct an_summary *s, struct an_rank_comm *rcs)
{
	memset(s, 0, sizeof *s);
	s->processes = (int)job->nok;
	s->hosts = nhosts(job);
	s->gpu_data = job->have_gpu;
	s->wall_ms = (double)(job->t1 - job->t0) / 1e6;
	s->step_ms = job->step_ns > 0 ? job->step_ns / 1e6 : NAN;
	s->steps = (int)job->steps;
	double e = 0, w = 0, c = 0, cw = 0, ch = 0;
	size_t nh = 0;
	uint8_t *hagg = host_aggs(job);
	double sb[AN_C_COUNT][AN_SIZE_CLASSES] = {{0}}, st[AN_C_COUNT][AN_SIZE_CLASSES] = {{0}};
	double hn[AN_C_COUNT][AN_SIZE_CLASSES] = {{0}}, ht[AN_C_COUNT][AN_SIZE_CLASSES] = {{0}};
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok)
			continue;
		double re, rw, rwc;
		an_rank_exposure(job, r, &re, &rw, &rwc);
		e += re;
		w += rw;
		struct an_rank_comm rc = rank_comm(job, r, hagg);
		if (rcs)
			rcs[f] = rc;
		c += rc.ns;
		ch += rc.host;
		cw += rwc + rc.win_host;
		nh += rc.host_only;
		for (size_t k = 0; k < r->ncalls; k++) {
			const struct an_call *cl = &r->calls[k];
			int cc = an_coll_of_fn(cl->fn), sc = an_size_class(cl->bytes);
			if (cc > 0) {
				hn[cc][sc]++;
				ht[cc][sc] += cl->host_dur;
			}
			if (!cl->gpu_start || !cl->gpu_dur || cc <= 0)
				continue;
			sb[cc][sc] += (double)cl->bytes *
			              an_busbw_factor(cl->fn, job->comms[cl->comm].nranks);
			st[cc][sc] += an_call_xfer_ns(job, cl);
			s->bw_bytes[cc][sc] += (double)cl->bytes;
		}
		for (size_t d = 0; d < r->ndevs; d++) {
			s->nvlink_bytes += (double)(r->devs[d].nvl_tx + r->devs[d].nvl_rx);
			s->pcie_bytes += (double)(r->devs[d].pcie_rd + r->devs[d].pcie_wr);
		}
		for (size_t p = 0; p < r->npairs; p++) {
			s->copy_staged_bytes += (double)r->pairs[p].staged_bytes;
			s->copy_p2p_bytes +=
			    (double)(r->pairs[p].api_bytes - r->pairs[p].staged_bytes);
		}
	}
	for (int cc = 0; cc < AN_C_COUNT; cc++)
		for (int sc = 0; sc < AN_SIZE_CLASSES; sc++)
		{
			s->busbw[cc][sc] = st[cc][sc] > 0 ? sb[cc][sc] / st[cc][sc] : NAN;
			s->host_ms_per_call[cc][sc] = hn[cc][sc] > 0 ? ht[cc][sc] / hn[cc][sc] / 1e6 : NAN;
		}
	int n = job->nok ? (int)job->nok : 1;
	free(hagg);
	s->comm_ms = c / 1e6 / n;
	s->comm_host_ms = ch / 1e6 / n;
	s->comm_host = job->nok && nh == job->nok;
	s->comm_win_ms =
	    (job->have_gpu || job->have_kch_gpu) && job->win1 && !s->comm_host ? cw / 1e6 / n : NAN;
	s->exposed_ms = job->have_gpu ? e / 1e6 / n : NAN;
	s->exposed_share = job->have_gpu && w > 0 ? e / w : NAN;
}

void an_summarize(const struct an_job *job, struct an_summary *s)
{
	summarize(job, s, NULL);
}

static double max_peak(const struct an_job *job)
{
	double p = 0;
	for (size_t i = 0; i < job->ncomms; i++)
		if (job->comms[i].peak_Bps > p)
			p = job->comms[i].peak_Bps;
	for (size_t f = 0; f < job->nranks && !p; f++)
		for (size_t d = 0; d < job->ranks[f].ndevs; d++) {
			double x = an_dev_peak(job, &job->ranks[f], job->ranks[f].devs[d].device);
			if (x > p)
				p = x;
		}
	return p;
}

/* Append to a row array (an_grow, see stages.h): the row, or NULL with the array unchanged. */
#define PUSH_ROW(arr, n, cap)                                                                      \
	({                                                                                         \
		__typeof__(arr) q_ = an_grow((arr), &(cap), (n) + 1, sizeof *(arr));               \
		q_ ? ((arr) = q_, &q_[(n)++]) : NULL;                                              \
	})

static void arow_of(const struct an_job *job, const struct an_agg *a, struct an_arow *r)
{
	r->a = a;
	r->c = &job->comms[a->comm];
	int m = r->c->nmembers ? r->c->nmembers : 1;
	r->host_time = a->calls_gpu == 0;
	r->calls_per_rank = (double)a->calls / m;
	r->bytes_per_call = a->calls ? (double)a->bytes / a->calls : 0;
	double ns = r->host_time ? (double)a->host_ns : (double)a->gpu_ns;
	r->time_ms_per_rank = ns / 1e6 / m;
	r->algbw = r->busbw = r->peak_share = NAN;
	if (!r->host_time && a->xfer_ns) { /* transfer time: see an_call_xfer_ns */
		r->algbw = an_algbw_gbps((double)a->bytes_gpu, (double)a->xfer_ns);
		r->busbw = an_busbw_gbps((double)a->bytes_gpu, (double)a->xfer_ns, a->fn, r->c->nranks);
		if (r->c->peak_Bps > 0)
			r->peak_share = r->busbw * 1e9 / r->c->peak_Bps;
	}
}

static void by_rank_rows(const struct an_job *job, struct an_tables *t)
{
	size_t ncell = job->ncomms * NVLP_NCCL_FN_COUNT, cap = 0;
	struct an_crow *cells = calloc(ncell ? ncell : 1, sizeof *cells);
	for (size_t i = 0; cells && i < job->nranks; i++) {
		const struct an_rank *r = &job->ranks[i];
		memset(cells, 0, (ncell ? ncell : 1) * sizeof *cells);
		for (size_t k = 0; k < r->ncalls; k++) { /* one pass per rank */
			const struct an_call *c = &r->calls[k];
			struct an_crow *x = &cells[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
			x->calls++;
			x->bytes += (double)c->bytes;
			x->hns += c->host_dur;
			if (c->gpu_start) {
				x->gcalls++;
				x->gbytes += (double)c->bytes;
				x->gns += c->gpu_dur;
				x->xns += an_call_xfer_ns(job, c);
			}
		}
		for (size_t ci = 0; ci < job->ncomms; ci++)
			for (unsigned fn = 0; fn < NVLP_NCCL_FN_COUNT; fn++) {
				struct an_crow *x = &cells[ci * NVLP_NCCL_FN_COUNT + fn];
				if (!x->calls)
					continue;
				struct an_crow *y = PUSH_ROW(t->by_rank, t->nby_rank, cap);
				if (!y)
					break;
				*y = *x;
				y->rank = rank_id(job, i);
				y->comm = ci;
				y->fn = fn;
				y->algbw = an_algbw_gbps(x->gbytes, x->xns);
				y->busbw = y->algbw * an_busbw_factor(fn, job->comms[ci].nranks);
			}
	}
	free(cells);
}

int an_tables_build(const struct an_job *job, struct an_tables *t)
{
	memset(t, 0, sizeof *t);
	struct an_rank_comm *rc = calloc(job->nranks ? job->nranks : 1, sizeof *rc);
	if (!rc)
		return -1;
	summarize(job, &t->s, rc);
	t->peak = max_peak(job);
	t->coll = calloc(job->naggs ? job->naggs : 1, sizeof *t->coll);
	t->ranks = calloc(job->nranks ? job->nranks : 1, sizeof *t->ranks);
	if (!t->coll || !t->ranks) {
		free(rc);
		return -1;
	}
	for (size_t i = 0; i < job->naggs; i++)
		arow_of(job, &job->aggs[i], &t->coll[i]);
	for (size_t i = 0; i < job->nranks; i++) {
		const struct an_rank *r = &job->ranks[i];
		if (!r->ok)
			continue;
		struct an_rrow *w = &t->ranks[t->nranks++];
		w->r = r;
		w->x = &job->rx[i];
		w->rank = rank_id(job, i);
		w->gpu = r->kind_count[NVLP_K_KERNEL] != 0;
		w->wall_ns = (double)an_rank_wall(r);
		w->comm = rc[i];
		an_rank_exposure(job, r, &w->exposed_ns, &w->span_ns, NULL);
	}
	free(rc);
	by_rank_rows(job, t);
	return 0;
}

void an_tables_free(struct an_tables *t)
{
	free(t->coll);
	free(t->ranks);
	free(t->by_rank);
}

static const char *pair_path(const struct an_pair *p)
{
	if (p->staged_copies && p->staged_copies < p->api_copies)
		return "mixed";
	if (p->staged_copies)
		return "staged-host";
	return "nvlink-p2p";
}
static double pair_gbps(const struct an_pair *p)
{
	if (p->p2p_gpu_ns && !p->staged_copies)
		return (double)p->p2p_bytes / (double)p->p2p_gpu_ns;
	if (p->staged_copies == p->api_copies && p->staged_ns)
		return (double)p->staged_bytes / (double)p->staged_ns; /* host time in the calls */
	if (p->sync_ns)
		return (double)p->sync_bytes / (double)p->sync_ns;
	return NAN;
}

/* The first lines: processes, steps, what data the traces hold. */
static void text_header(FILE *o, const struct an_job *job, const struct an_tables *t)
{
	const struct an_summary *s = &t->s;
	fprintf(o, "nvlprof report: %zu process%s on %d host%s, wall %.1f ms", job->nok,
	        job->nok == 1 ? "" : "es", s->hosts, s->hosts == 1 ? "" : "s", s->wall_ms);
	if (job->step_ns > 0)
		fprintf(o, ", %llu steps of %.2f ms%s", (unsigned long long)job->steps,
		        job->step_ns / 1e6,
		        job->step_source && !strcmp(job->step_source, "marks") ? " (marked by the job)"
		                                                                : "");
	else if (job->ncomms)
		fprintf(o, ", no steps recognised");
	fputc('\n', o);
	if (job->step_ns <= 0 && job->ncomms && strcmp(job->steps_why, "no repeating pattern of collectives"))
		fprintf(o, "steps: none recognised: %s\n", job->steps_why);
	double pk = t->peak;
	int win = job->kch && job->kch->windows;
	fprintf(o, "data: GPU activity %s, link counters %s, topology %s",
	        job->have_gpu && job->have_kch_gpu && win
	            ? "yes (kernels in the kernel windows; every collective from NCCL's kernel "
	              "channels)"
	        : job->have_gpu     ? "yes"
	        : job->have_kch_gpu ? "collectives only (NCCL's kernel channels; no CUPTI kernel)"
	        : job->have_gpu_any ? "yes (copies/unified memory; no kernels)"
	                            : "NO (host times)",
	        job->have_links ? "yes" : "no",
	        job->have_topo ? "yes" : "no");
	if (pk > 0)
		fprintf(o, " (NVLink %.0f GB/s per GPU each way)", pk / 1e9);
	fputc('\n', o);
}

/* The summary line: time in NCCL per rank and how much of it the job waited on. */
static void text_comm(FILE *o, const struct an_job *job, const struct an_tables *t)
{
	const struct an_summary *s = &t->s;
	int gpu = job->have_gpu || job->have_kch_gpu;
	/* kernels traced in windows only: exposure is the windows' (the kernel-window lines) */
	int winx = job->kch && job->kch->windows;
	if (!job->ncomms)
		fprintf(o, "communication: no NCCL calls\n");
	else if (gpu && s->comm_host)
		fprintf(o,
		        "communication: %.2f ms per rank in NCCL calls (host time: no NCCL kernel "
		        "traced; exposure unknown)\n",
		        s->comm_ms);
	else if (gpu) {
		fprintf(o, "communication: %.2f ms per rank", s->comm_ms);
		if (!isnan(s->comm_win_ms))
			fprintf(o, " (%.2f ms in the steps)", s->comm_win_ms);
		if (winx || !job->have_gpu)
			fprintf(o, "; exposure %s",
			        job->have_gpu ? "from the kernel windows only (below)"
			                      : "unknown (no compute kernel traced: NVLPROF_KERNELS=window "
			                        "measures it, at a cost)");
		else if (!isnan(s->comm_win_ms))
			fprintf(o, "; exposed %.2f ms = %.1f%% of the steps' time", s->exposed_ms,
			        s->exposed_share * 100);
		else
			fprintf(o, "; exposed %.2f ms = %.1f%% of wall time", s->exposed_ms,
			        s->exposed_share * 100);
		if (s->comm_host_ms > 0) /* rank_comm: collectives with no GPU execution */
			fprintf(o,
			        "; %.2f ms of it is host call time of collectives NCCL ran without GPU "
			        "work (h in COLLECTIVES; exposure unknown)",
			        s->comm_host_ms);
		fputc('\n', o);
	} else
		fprintf(
		    o,
		    "communication: %.2f ms per rank in NCCL calls (host time; exposure unknown)\n",
		    s->comm_ms);
}

static void text_choices(FILE *o, const struct an_job *job)
{
	if (!job->nchoices)
		return;
	fprintf(o, "\nNCCL CHOICES (from NCCL's profiler plugin; calls summed over ranks)\n");
	fprintf(o, "  %-16s %-18s %-22s %8s %9s\n", "comm", "call", "algorithm/protocol",
	        "calls", "channels");
	for (size_t i = 0; i < job->nchoices; i++) {
		const struct an_jchoice *x = &job->choices[i];
		char h[20], ap[40], ch[24];
		if (x->comm >= 0)
			snprintf(h, sizeof h, "%016llx",
			         (unsigned long long)job->comms[x->comm].hash);
		else
			snprintf(h, sizeof h, "?");
		snprintf(ap, sizeof ap, "%s/%s", x->algo, x->proto);
		fprintf(o, "  %-16s %-18s %-22s %8llu %9s\n", h, an_choice_fn_name(job, x), ap,
		        (unsigned long long)x->calls, an_choice_channels(x, ch, sizeof ch));
	}
}

static void text_others(FILE *o, const struct an_job *job)
{
	if (!job->nothers)
		return;
	fprintf(o, "\nOTHER PROCESSES (no GPU work and no NCCL call: launchers, workers; not "
	           "ranks)\n");
	for (size_t i = job->nranks; i < job->nranks + job->nothers; i++) {
		const struct an_rank *r = &job->ranks[i];
		char cmd[96];
		const char *c = an_header_get(r, NVLP_HDR_CMDLINE, cmd, sizeof cmd);
		fprintf(o, "  %-12.12s pid %-8d wall %9.1f ms  %s\n", r->host, r->pid,
		        an_rank_wall(r) / 1e6, c ? c : "?");
	}
}

static void text_copies(FILE *o, const struct an_job *job)
{
	int any = 0;
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t k = 0; k < job->ranks[i].npairs; k++) {
			const struct an_pair *p = &job->ranks[i].pairs[k];
			if (!any++)
				fprintf(o,
				        "\nCOPIES (cross-device)\n  %4s %8s %-12s %7s %10s %8s\n",
				        "rank", "src->dst", "path", "copies", "MiB", "GB/s");
			char g[16], sd[16];
			an_fmt_gbps(g, sizeof g, pair_gbps(p));
			snprintf(sd, sizeof sd, "%d->%d", p->src, p->dst);
			fprintf(o, "  %4d %8s %-12s %7llu %10.1f %8s\n", rank_id(job, i), sd,
			        pair_path(p),
			        (unsigned long long)(p->api_copies ? p->api_copies : p->p2p_copies),
			        (double)(p->api_bytes ? p->api_bytes : p->p2p_bytes) / MIB, g);
		}
	if (any)
		fprintf(o, "  (GB/s: nvlink-p2p over the copies' GPU time; staged-host over the host "
		           "time in the calls, which stage through host memory)\n");
}

/* Where the link bytes came from: one source for every GPU, or each GPU's. */
static void text_link_sources(FILE *o, const struct an_job *job)
{
	unsigned all = 0;
	int ndev = 0;
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t d = 0; d < job->ranks[i].ndevs; d++)
			if (job->ranks[i].devs[d].nsamples)
				all |= job->ranks[i].devs[d].link_sources, ndev++;
	fprintf(o, "  link bytes from:");
	for (unsigned s = 0; s < 32; s++) {
		if (!(all & (1u << s)))
			continue;
		fprintf(o, "%s %s", s == (unsigned)__builtin_ctz(all) ? "" : ";",
		        s == NVLP_LINK_PM_SAMPLING ? "PM sampling (CUPTI)"
		        : s == NVLP_LINK_NVML      ? "NVML counters (PM sampling unavailable: see NOTEs)"
		                                   : "a source this nvlprof does not know");
		if (all == (1u << s) || ndev < 2)
			continue;
		for (size_t i = 0; i < job->nranks; i++)
			for (size_t d = 0; d < job->ranks[i].ndevs; d++)
				if (job->ranks[i].devs[d].link_sources & (1u << s))
					fprintf(o, " r%d/%d", rank_id(job, i), job->ranks[i].devs[d].device);
	}
	fputc('\n', o);
}

/* keep: per process, 1 for the ranks RANKS shows (a large job), NULL every one */
static void text_links(FILE *o, const struct an_job *job, const uint8_t *keep)
{
	if (!job->have_links)
		return;
	fprintf(o, "\nLINKS (bytes per GPU: total / during collectives%s)\n  %4s %6s %21s %21s\n",
	        keep ? "; the GPUs of the ranks RANKS shows, --all-ranks prints every one" : "",
	        "rank", "device", "NVLink MiB", "PCIe MiB");
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t d = 0; (!keep || keep[i]) && d < job->ranks[i].ndevs; d++) {
			const struct an_dev *v = &job->ranks[i].devs[d];
			if (!v->nsamples)
				continue;
			fprintf(o, "  %4d %6d %10.1f / %8.1f %10.1f / %8.1f\n",
			        rank_id(job, i), v->device,
			        (double)(v->nvl_tx + v->nvl_rx) / MIB,
			        (double)v->nvl_coll / MIB,
			        (double)(v->pcie_rd + v->pcie_wr) / MIB,
			        (double)v->pcie_coll / MIB);
		}
	text_link_sources(o, job);
}

static void text_managed(FILE *o, const struct an_job *job)
{
	int any = 0;
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t k = 0; k < job->ranks[i].nallocs; k++) {
			const struct an_alloc *a = &job->ranks[i].allocs[k];
			if (!a->migrations && !a->gpu_faults)
				continue;
			if (!any++)
				fprintf(o, "\nMANAGED MEMORY\n  %4s %-16s %9s %12s %7s %10s %8s\n",
				        "rank", "address", "MiB", "migrated MiB", "flips",
				        "gpu faults", "lost ms");
			fprintf(o, "  %4d 0x%-14llx %9.1f %12.1f %7llu %10llu %8.2f\n",
			        rank_id(job, i), (unsigned long long)a->ptr, (double)a->bytes / MIB,
			        (double)(a->htod + a->dtoh + a->dtod) / MIB,
			        (unsigned long long)a->flips, (unsigned long long)a->gpu_faults,
			        (double)a->migrate_ns / 1e6);
		}
}

void an_report_head(FILE *o, const struct an_job *job, const struct an_tables *t)
{
	text_header(o, job, t);
	text_comm(o, job, t);
	an_cost_text(o, job);
}

void an_report_text(FILE *o, const struct an_job *job, const struct an_findings *f)
{
	struct an_tables t;
	if (an_tables_build(job, &t) < 0) {
		an_tables_free(&t);
		fprintf(stderr, "nvlprof: out of memory\n");
		return;
	}
	struct an_story st;
	if (an_story_build(job, f, &st) == 0) { /* a job that failed: its story first */
		an_story_print(o, &st);
		an_story_free(&st);
	}
	an_report_head(o, job, &t);
	an_kch_report_text(o, job);
	an_graphs_report_text(o, job);
	fprintf(o, "\nFINDINGS\n");
	an_findings_print(o, f);
	an_collectives_print(o, job, &t);
	text_choices(o, job);
	struct an_rank_view v;
	an_rank_view_build(job, &t, f, &v); /* out of memory: every rank */
	an_ranks_print(o, job, &t, &v);
	text_others(o, job);
	text_copies(o, job);
	uint8_t *keep = v.all ? NULL : calloc(job->nranks ? job->nranks : 1, 1);
	for (size_t i = 0; keep && i < t.nranks; i++)
		keep[t.ranks[i].r - job->ranks] = v.kept[i];
	if (v.all || keep) /* out of memory: no LINKS rather than 16,384 lines of them */
		text_links(o, job, keep);
	free(keep);
	an_rank_view_free(&v);
	text_managed(o, job);
	an_tables_free(&t);
}

/* The "job" object: the summary, with what data the traces hold. */
static void json_job(struct jw *w, const struct an_job *job, const struct an_tables *t)
{
	const struct an_summary *s = &t->s;
	jw_obj(w, "job");
	jw_int(w, "processes", (int64_t)job->nok);
	jw_int(w, "hosts", s->hosts);
	jw_num(w, "wall_ms", s->wall_ms);
	jw_int(w, "steps", (int64_t)job->steps);
	jw_num(w, "step_ms", s->step_ms);
	jw_str(w, "step_source", job->step_source ? job->step_source : "none");
	jw_str(w, "steps_why", job->steps_why);
	jw_bool(w, "gpu_data", job->have_gpu);
	jw_bool(w, "link_counters", job->have_links);
	jw_bool(w, "topology", job->have_topo);
	double pk = t->peak;
	jw_num(w, "nvlink_peak_gbps", pk > 0 ? pk / 1e9 : NAN);
	if (pk > 0)
		jw_str(w, "peak_basis", an_peak_basis());
	jw_num(w, "comm_ms_per_rank", s->comm_ms);
	jw_num(w, "comm_in_steps_ms_per_rank", s->comm_win_ms);
	jw_num(w, "comm_host_ms_per_rank", s->comm_host_ms);
	jw_str(w, "collective_gpu_times", job->have_gpu && job->have_kch_gpu ? "cupti+kernel_channels"
	                                  : job->have_gpu                   ? "cupti"
	                                  : job->have_kch_gpu ? "kernel_channels"
	                                                      : "none");
	jw_str(w, "comm_time_source", !(job->have_gpu || job->have_kch_gpu) || s->comm_host ? "host"
	                              : s->comm_host_ms > 0          ? "gpu+host"
	                                                             : "gpu");
	jw_num(w, "exposed_ms_per_rank", s->exposed_ms);
	jw_num(w, "exposed_share", s->exposed_share);
	jw_str(w, "exposed_over", job->kch && job->kch->windows && job->have_gpu ? "kernel_windows"
	                          : job->win1                                   ? "steps"
	                                                                        : "trace");
	jw_int(w, "matched_collectives", (int64_t)job->matched_colls);
	an_skew_json(w, job, t->nranks);
	jw_num(w, "first_collective_skew_ms", job->first_comm >= 0 ? job->first_skew_ns / 1e6 : NAN);
	jw_num(w, "clock_correction_ms", job->max_refine_ns / 1e6);
	an_cost_json(w, job);
	jw_obj_end(w);
}

static void json_collectives(struct jw *w, const struct an_job *job, const struct an_tables *t)
{
	jw_arr(w, "collectives");
	for (size_t i = 0; i < job->naggs; i++) {
		const struct an_arow r = t->coll[i];
		char h[32];
		snprintf(h, sizeof h, "%016llx", (unsigned long long)r.c->hash);
		jw_obj(w, NULL);
		jw_str(w, "comm", h);
		jw_str(w, "comm_name", r.c->name);
		jw_str(w, "collective", nvlp_nccl_fn_name(r.a->fn));
		jw_int(w, "nranks", r.c->nranks);
		jw_int(w, "calls", (int64_t)r.a->calls);
		jw_num(w, "calls_per_rank", r.calls_per_rank);
		jw_num(w, "bytes", (double)r.a->bytes);
		jw_num(w, "bytes_per_call", r.bytes_per_call);
		jw_num(w, "time_ms_per_rank", r.time_ms_per_rank);
		jw_str(w, "time_source", r.host_time ? "host" : "gpu");
		jw_num(w, "algbw_gbps", r.algbw);
		jw_num(w, "busbw_gbps", r.busbw);
		jw_num(w, "peak_share", r.peak_share);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_ranks(struct jw *w, const struct an_tables *t)
{
	jw_arr(w, "ranks");
	for (size_t i = 0; i < t->nranks; i++) {
		const struct an_rrow *rw = &t->ranks[i];
		const struct an_rank *r = rw->r;
		const struct an_rank_x *x = rw->x;
		int gpu = rw->gpu;
		double wall = rw->wall_ns, ex = rw->exposed_ns, span = rw->span_ns;
		jw_obj(w, NULL);
		jw_int(w, "rank", rw->rank);
		jw_str(w, "host", r->host);
		jw_int(w, "pid", r->pid);
		jw_bool(w, "complete", r->complete);
		jw_num(w, "wall_ms", wall / 1e6);
		jw_num(w, "comm_ms", rw->comm.ns / 1e6);
		jw_num(w, "comm_host_ms", rw->comm.host / 1e6);
		jw_str(w, "comm_time_source", rw->comm.host_only ? "host"
		                              : rw->comm.host > 0 ? "gpu+host"
		                                                  : "gpu");
		jw_num(w, "exposed_ms", gpu ? ex / 1e6 : NAN);
		jw_num(w, "exposed_share", gpu && span > 0 ? ex / span : NAN);
		jw_int(w, "collectives", (int64_t)x->colls);
		jw_int(w, "arrived_last", (int64_t)x->last_count);
		jw_num(w, "median_lead_ms", x->median_lead_ns / 1e6);
		jw_num(w, "mean_lead_ms",
		       x->last_count ? x->lead_ns_sum / x->last_count / 1e6 : 0);
		jw_num(w, "waited_ms", x->wait_ns / 1e6);
		jw_num(w, "waited_first_collective_ms", x->first_wait_ns / 1e6);
		jw_num(w, "wait_caused_ms", x->caused_wait_ns / 1e6);
		jw_num(w, "clock_correction_ms", (double)r->refine / 1e6);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_others(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "other_processes");
	for (size_t i = job->nranks; i < job->nranks + job->nothers; i++) {
		const struct an_rank *r = &job->ranks[i];
		char cmd[256];
		const char *c = an_header_get(r, NVLP_HDR_CMDLINE, cmd, sizeof cmd);
		jw_obj(w, NULL);
		jw_str(w, "host", r->host);
		jw_int(w, "pid", r->pid);
		jw_str(w, "cmdline", c ? c : "");
		jw_str(w, "role", "not a rank: no GPU work, no NCCL call");
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

/* per rank x communicator x function: the attribution behind the "collectives" table */
static void json_by_rank(struct jw *w, const struct an_job *job, const struct an_tables *t)
{
	jw_arr(w, "collectives_by_rank");
	for (size_t i = 0; i < t->nby_rank; i++) {
		const struct an_crow *x = &t->by_rank[i];
		char h[32];
		snprintf(h, sizeof h, "%016llx", (unsigned long long)job->comms[x->comm].hash);
		jw_obj(w, NULL);
		jw_int(w, "rank", x->rank);
		jw_str(w, "comm", h);
		jw_str(w, "collective", nvlp_nccl_fn_name(x->fn));
		jw_int(w, "calls", (int64_t)x->calls);
		jw_num(w, "bytes", x->bytes);
		jw_num(w, "time_ms", (x->gcalls ? x->gns : x->hns) / 1e6);
		jw_str(w, "time_source", x->gcalls ? "gpu" : "host");
		jw_num(w, "algbw_gbps", x->algbw);
		jw_num(w, "busbw_gbps", x->busbw);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_choices(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "nccl_choices");
	for (size_t i = 0; i < job->nchoices; i++) {
		const struct an_jchoice *x = &job->choices[i];
		char h[20];
		snprintf(h, sizeof h, "%016llx",
		         x->comm >= 0 ? (unsigned long long)job->comms[x->comm].hash : 0ull);
		jw_obj(w, NULL);
		if (x->comm >= 0)
			jw_str(w, "comm", h);
		else
			jw_null(w, "comm");
		jw_str(w, "collective", an_choice_fn_name(job, x));
		jw_str(w, "algorithm", x->algo);
		jw_str(w, "protocol", x->proto);
		jw_int(w, "calls", (int64_t)x->calls);
		jw_int(w, "channels_min", x->ch_min);
		jw_int(w, "channels_max", x->ch_max);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void json_copies(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "copies");
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t k = 0; k < job->ranks[i].npairs; k++) {
			const struct an_pair *p = &job->ranks[i].pairs[k];
			jw_obj(w, NULL);
			jw_int(w, "rank", rank_id(job, i));
			jw_int(w, "src_device", p->src);
			jw_int(w, "dst_device", p->dst);
			jw_str(w, "path", pair_path(p));
			jw_int(w, "copies",
			       (int64_t)(p->api_copies ? p->api_copies : p->p2p_copies));
			jw_num(w, "bytes", (double)(p->api_bytes ? p->api_bytes : p->p2p_bytes));
			jw_num(w, "gbps", pair_gbps(p));
			jw_obj_end(w);
		}
	jw_arr_end(w);
}

static void json_links(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "links");
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t d = 0; d < job->ranks[i].ndevs; d++) {
			const struct an_dev *v = &job->ranks[i].devs[d];
			if (!v->nsamples)
				continue;
			jw_obj(w, NULL);
			jw_int(w, "rank", rank_id(job, i));
			jw_int(w, "device", v->device);
			jw_num(w, "nvlink_bytes", (double)(v->nvl_tx + v->nvl_rx));
			jw_num(w, "nvlink_bytes_in_collectives", (double)v->nvl_coll);
			jw_num(w, "pcie_bytes", (double)(v->pcie_rd + v->pcie_wr));
			jw_num(w, "pcie_bytes_in_collectives", (double)v->pcie_coll);
			jw_obj_end(w);
		}
	jw_arr_end(w);
}

static void json_managed(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "managed");
	for (size_t i = 0; i < job->nranks; i++)
		for (size_t k = 0; k < job->ranks[i].nallocs; k++) {
			const struct an_alloc *a = &job->ranks[i].allocs[k];
			char h[32];
			snprintf(h, sizeof h, "0x%llx", (unsigned long long)a->ptr);
			jw_obj(w, NULL);
			jw_int(w, "rank", rank_id(job, i));
			jw_int(w, "device", a->device);
			jw_str(w, "address", h);
			jw_num(w, "size", (double)a->bytes);
			jw_num(w, "bytes_migrated", (double)(a->htod + a->dtoh + a->dtod));
			jw_int(w, "direction_changes", (int64_t)a->flips);
			jw_int(w, "gpu_page_faults", (int64_t)a->gpu_faults);
			jw_num(w, "time_lost_ms", (double)a->migrate_ns / 1e6);
			jw_obj_end(w);
		}
	jw_arr_end(w);
}

static void json_files(struct jw *w, const struct an_job *job)
{
	jw_arr(w, "files");
	for (size_t i = 0; i < job->nranks; i++) {
		const struct an_rank *r = &job->ranks[i];
		jw_obj(w, NULL);
		jw_str(w, "path", r->path);
		jw_bool(w, "ok", r->ok);
		jw_bool(w, "complete", r->ok && r->complete);
		jw_int(w, "records", (int64_t)r->records);
		if (!r->ok || r->truncated)
			jw_str(w, "error", r->err);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

void an_report_json(FILE *o, const struct an_job *job, const struct an_findings *f)
{
	struct an_tables t;
	if (an_tables_build(job, &t) < 0) {
		an_tables_free(&t);
		fprintf(stderr, "nvlprof: out of memory\n");
		return;
	}
	struct jw w;
	jw_init(&w, o);
	jw_obj(&w, NULL);
	jw_str(&w, "tool", "nvlprof");
	jw_str(&w, "kind", "report");
	jw_int(&w, "schema", 1);
	json_job(&w, job, &t);
	struct an_story st;
	if (an_story_build(job, f, &st) == 0) {
		an_story_json(&w, &st);
		an_story_free(&st);
	}
	an_findings_json(&w, "findings", f);
	an_graphs_json(&w, job);
	an_kch_json(&w, job);
	json_collectives(&w, job, &t);
	json_ranks(&w, &t);
	json_others(&w, job);
	json_by_rank(&w, job, &t);
	json_choices(&w, job);
	json_copies(&w, job);
	json_links(&w, job);
	json_managed(&w, job);
	json_files(&w, job);
	jw_obj_end(&w);
	an_tables_free(&t);
}

static void usage(FILE *o)
{
	fprintf(
	    o,
	    "usage: nvlprof report [--json] [-o FILE] [-j THREADS] [--all-ranks] [--threshold NAME=VALUE]... "
	    "TRACE_DIR|FILE...\n"
	    "       nvlprof report --html FILE TRACE_DIR|FILE...  (one self-contained HTML page, "
	    "plots included)\n"
	    "Explains where the communication time of a multi-GPU job went: findings first, then "
	    "tables.\n"
	    "A finding explained by a root cause is listed right after it as \"[info] ID "
	    "(explained "
	    "by ROOT)\":\n"
	    "pcie_fallback explains low_bus_bandwidth on its communicator, and "
	    "exposed_communication "
	    "when\n"
	    "its communicator holds >= explained_share of the exposed time; straggler explains "
	    "exposed_communication\n"
	    "when the others' wait for it is >= explained_share of the exposed time (tried "
	    "first).\n"
	    "  --json               JSON output (documented in analyzer/REPORT_JSON.md)\n"
	    "  -o FILE              write the report to FILE\n"
	    "  --partial OUT        write the traces as loaded to OUT instead, for `nvlprof merge`\n"
	    "                       (one partial per node; docs/DISTRIBUTED.md)\n"
	    "  --symbols DIR        also look for the recorded modules' files under DIR (DIR/path,\n"
	    "                       DIR/basename, DIR/.build-id/xx/rest.debug), like perf --symfs;\n"
	    "                       a file is used only if its build-id is the one in the trace\n"
	    "  --all-ranks          every rank a row in RANKS and the page's rank table (a job of "
	    "more than\n"
	    "                       ranks_shown ranks shows the ranks that matter and a "
	    "distribution)\n"
	    "  -j N                 reader threads (default: one per file, up to the number of "
	    "CPUs)\n"
	    "  --threshold N=V      change a threshold (repeatable); thresholds and defaults:\n");
	for (int i = 0; i < AN_TH_COUNT; i++)
		fprintf(o, "      %-22s %-8g %s\n", an_threshold_names[i], an_threshold_defaults[i],
		        an_threshold_docs[i]);
	fprintf(o, "Exit status: 0 report written, 2 usage error, no readable trace, or the report could "
	           "not be written.\n");
}

/* Why --threshold v was refused: no '=', a name we do not have, or a value that is no number */
static void threshold_error(const char *v)
{
	const char *eq = strchr(v, '=');
	if (!eq) {
		fprintf(stderr,
		        "nvlprof: bad threshold '%s': NAME=VALUE is needed (the names: --help)\n",
		        v);
		return;
	}
	for (int k = 0; k < AN_TH_COUNT; k++)
		if ((size_t)(eq - v) == strlen(an_threshold_names[k]) &&
		    !strncmp(v, an_threshold_names[k], (size_t)(eq - v))) {
			fprintf(stderr,
			        "nvlprof: bad threshold '%s': the value of %s must be a number\n",
			        v, an_threshold_names[k]);
			return;
		}
	fprintf(stderr, "nvlprof: unknown threshold '%.*s' in '%s' (the names: --help)\n",
	        (int)(eq - v), v, v);
}

int an_common_opt(int argc, char **argv, int *i, double *th, int *threads)
{
	const char *a = argv[*i], *v = NULL;
	if (!strcmp(a, "--threshold") || !strcmp(a, "-t")) {
		if (*i + 1 >= argc) {
			fprintf(stderr, "nvlprof: %s needs NAME=VALUE (the names: --help)\n", a);
			return -1;
		}
		v = argv[++*i];
	} else if (!strncmp(a, "--threshold=", 12))
		v = a + 12;
	if (v) {
		if (an_threshold_set(th, v) != 0) {
			threshold_error(v);
			return -1;
		}
		return 1;
	}
	if (!strcmp(a, "--all-ranks")) { /* every rank a row, however many */
		th[AN_TH_ranks_shown] = INFINITY;
		return 1;
	}
	if (!strcmp(a, "--symbols") || !strncmp(a, "--symbols=", 10)) {
		if (a[9] == '=')
			an_symbols_dir(a + 10);
		else if (*i + 1 >= argc) {
			fprintf(stderr, "nvlprof: --symbols needs a directory\n");
			return -1;
		} else
			an_symbols_dir(argv[++*i]);
		return 1;
	}
	if (!strcmp(a, "-j")) {
		char *end = NULL;
		long n = *i + 1 < argc ? strtol(argv[*i + 1], &end, 10) : -1;
		if (*i + 1 >= argc || end == argv[*i + 1] || *end || n < 0 || n > 256) {
			fprintf(
			    stderr,
			    "nvlprof: -j needs a thread count, 0 to 256 (0: the default)%s%s%s\n",
			    *i + 1 < argc ? ", not '" : "", *i + 1 < argc ? argv[*i + 1] : "",
			    *i + 1 < argc ? "'" : "");
			return -1;
		}
		*threads = (int)n;
		++*i;
		return 1;
	}
	return 0;
}

int an_report_write(const char *cmd, const char *outpath, int json, struct an_job *job,
                    struct an_findings *f)
{
	FILE *o = stdout;
	int rc = 0;
	if (outpath && !(o = fopen(outpath, "w"))) {
		fprintf(stderr, "nvlprof: %s: cannot write %s: %s\n", cmd, outpath, strerror(errno));
		rc = 2;
	} else {
		if (json)
			an_report_json(o, job, f);
		else
			an_report_text(o, job, f);
		if (nvlp_out_finish(o, outpath ? outpath : "standard output") < 0)
			rc = 2;
	}
	an_findings_free(f);
	an_job_free(job);
	return rc;
}

int nvlp_cmd_report(int argc, char **argv)
{
	if (xh_wanted(argc, argv)) /* the HTML report: html.c */
		return xh_cmd(argc, argv, 0);
	double th[AN_TH_COUNT];
	memcpy(th, an_threshold_defaults, sizeof th);
	int json = 0, threads = 0;
	const char *outpath = NULL, *partial = NULL;
	char **paths = calloc((size_t)argc + 1, sizeof *paths);
	int np = 0;
	if (!paths)
		return 2;
	for (int i = 1; i < argc; i++) {
		int c = an_common_opt(argc, argv, &i, th, &threads);
		if (c < 0) {
			free(paths);
			return 2;
		}
		if (c)
			continue;
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--partial") && i + 1 < argc)
			partial = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			outpath = argv[++i];
		else if (!strcmp(argv[i], "-o")) {
			fprintf(stderr, "nvlprof: report: -o needs a file name\n");
			free(paths);
			return 2;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			free(paths);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr,
			        "nvlprof: report: unknown option %s (--json, -o FILE, --html FILE, "
			        "--threshold NAME=VALUE, -j N, --symbols DIR; see --help)\n",
			        argv[i]);
			usage(stderr);
			free(paths);
			return 2;
		} else
			paths[np++] = argv[i];
	}
	if (!np) {
		fprintf(stderr,
		        "nvlprof: report: no input: give a trace directory or .nvlp files\n");
		usage(stderr);
		free(paths);
		return 2;
	}
	if (partial) { /* the loaded traces only, for merge (partial.c) */
		int prc = an_partial_write(paths, np, threads, partial, json || outpath);
		free(paths);
		return prc;
	}
	struct an_job job;
	struct an_findings f;
	if (an_open_job(paths, np, threads, th, &job, &f) != 0) {
		free(paths);
		return 2;
	}
	int rc = an_report_write("report", outpath, json, &job, &f);
	free(paths);
	return rc;
}

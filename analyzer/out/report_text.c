/* report_text.c: the text report: the job's story when it failed, the summary lines, findings,
 * then the tables (COLLECTIVES, NCCL CHOICES, RANKS, OTHER PROCESSES, COPIES, LINKS, MANAGED
 * MEMORY), printed from the figures model/summary.c computed. */
#include <math.h>   /* isnan */
#include <stdint.h> /* uint8_t */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/story.h"
#include "model/cost.h"     /* an_cost_text, an_capture_setting */
#include "model/kernelch.h" /* struct an_kch: the kernel windows */
#include "model/rankview.h"
#include "model/summary.h"
#include "nvlp_trace.h"
#include "out/graphs_print.h"   /* an_graphs_report_text */
#include "out/kernelch_print.h" /* an_kch_report_text */
#include "out/report.h"
#include "util/diag.h"

#define MIB (1024.0 * 1024.0)

/* The data: lines of NVLPROF_CUPTI=startup and lazy: where CUPTI was detached, kept, left out. */
static void text_cupti_modes(FILE *o, const struct an_job *job)
{
	if (job->cupti_detached) {
		fprintf(o,
		        "data: CUPTI detached after start-up in %d of %zu process%s (NVLPROF_CUPTI=startup, "
		        "by %.1f s): later copies seen by the CUDA runtime hooks only, links from NVML",
		        job->cupti_detached, job->nok, job->nok == 1 ? "" : "es",
		        (double)job->cupti_detach_ms / 1e3);
		if (job->cupti_reattached)
			fprintf(o, "; attached again for managed memory in %d", job->cupti_reattached);
		fputc('\n', o);
	}
	if (job->cupti_kept_unsafe)
		fprintf(o,
		        "data: CUPTI kept attached in %d of %zu process%s despite NVLPROF_CUPTI=startup: "
		        "cuptiFinalize corrupts the heap with CUPTI 13.0 (NVLPROF_CUPTI_FINALIZE=1 "
		        "detaches anyway)\n",
		        job->cupti_kept_unsafe, job->nok, job->nok == 1 ? "" : "es");
	if (job->cupti_lazy || job->cupti_lazy_needed) {
		fprintf(o,
		        "data: CUPTI not attached in %d of %zu process%s (NVLPROF_CUPTI=lazy): topology "
		        "from the driver and NVML, links from NVML, copies seen by the CUDA runtime "
		        "hooks only",
		        job->cupti_lazy, job->nok, job->nok == 1 ? "" : "es");
		if (job->cupti_reattached)
			fprintf(o, "; attached for managed memory in %d (before its first allocation: "
			           "page migrations measured)",
			        job->cupti_reattached);
		if (job->cupti_lazy_um)
			fprintf(o, "; managed memory allocated in %d: its page migrations not measured "
			           "(NVLPROF_CUPTI=1 measures them)",
			        job->cupti_lazy_um);
		if (job->cupti_lazy_needed)
			fprintf(o, "; attached from the start in %d (needed there: the NOTE says by what)",
			        job->cupti_lazy_needed);
		fputc('\n', o);
	}
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
	text_cupti_modes(o, job);
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
			an_fmt_gbps(g, sizeof g, an_pair_gbps(p));
			snprintf(sd, sizeof sd, "%d->%d", p->src, p->dst);
			fprintf(o, "  %4d %8s %-12s %7llu %10.1f %8s\n", an_rank_id(job, i), sd,
			        an_pair_path(p),
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
	/* NVML by choice: NVLPROF_CUPTI=startup (PM sampling is not started, whether CUPTI then
	 * detaches or is kept), as the capture key says; else PM sampling was tried and failed, as the
	 * NOTEs say */
	char cupti[32];
	int startup = an_capture_setting(job, "cupti", cupti, sizeof cupti) &&
	              !strncmp(cupti, "startup:", 8);
	fprintf(o, "  link bytes from:");
	for (unsigned s = 0; s < 32; s++) {
		if (!(all & (1u << s)))
			continue;
		fprintf(o, "%s %s", s == (unsigned)__builtin_ctz(all) ? "" : ";",
		        s == NVLP_LINK_PM_SAMPLING ? "PM sampling (CUPTI)"
		        : s == NVLP_LINK_NVML && startup
		            ? "NVML counters (NVLPROF_CUPTI=startup; NVLPROF_CUPTI=1 samples the "
		              "GPU's PM counters instead)"
		        : s == NVLP_LINK_NVML ? "NVML counters (PM sampling unavailable: see NOTEs)"
		                              : "a source this nvlprof does not know");
		if (all == (1u << s) || ndev < 2)
			continue;
		for (size_t i = 0; i < job->nranks; i++)
			for (size_t d = 0; d < job->ranks[i].ndevs; d++)
				if (job->ranks[i].devs[d].link_sources & (1u << s))
					fprintf(o, " r%d/%d", an_rank_id(job, i), job->ranks[i].devs[d].device);
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
			        an_rank_id(job, i), v->device,
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
			        an_rank_id(job, i), (unsigned long long)a->ptr, (double)a->bytes / MIB,
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
		an_diag("nvlprof: out of memory\n");
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

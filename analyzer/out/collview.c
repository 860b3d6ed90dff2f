/* collview.c: the COLLECTIVES table: one row per communicator and call, or, for a job of more rows
 * than the collective_rows threshold (a per-host or per-group communicator on every host), one row
 * per kind of communicator, call and size, with the range of its communicators under it. */
#include <math.h>   /* isnan, isinf */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* calloc */

#include "model/model.h"
#include "nvlp_trace.h" /* nvlp_nccl_fn_name */
#include "model/rankview.h"

#define MIB (1024.0 * 1024.0)

static void row(FILE *o, const char *comm, const struct an_arow *r, double calls, double bytes,
                double ms, int host, double algbw, double busbw, double peak)
{
	char a[16], b[16], p[16];
	an_fmt_gbps(a, sizeof a, algbw);
	an_fmt_gbps(b, sizeof b, busbw);
	if (isnan(peak))
		snprintf(p, sizeof p, "-");
	else
		snprintf(p, sizeof p, "%.0f", peak * 100);
	fprintf(o, "  %-16s %-18s %5d %10.1f %10.3f %11.2f%s %8s %8s %6s\n", comm,
	        nvlp_nccl_fn_name(r->a->fn), r->c->nranks, calls, bytes / MIB, ms, host ? "h" : " ",
	        a, b, p);
}

static void one_row(FILE *o, const struct an_arow *r)
{
	char h[20];
	snprintf(h, sizeof h, "%016llx", (unsigned long long)r->c->hash);
	row(o, h, r, r->calls_per_rank, r->bytes_per_call, r->time_ms_per_rank, r->host_time,
	    r->algbw, r->busbw, r->peak_share);
}

/* Communicators of one kind, call and size */
struct group {
	int kind, fn, nranks, host;
	size_t n, first;
	double calls, bytes, ms, algbw, busbw, peak;
	double ms_lo, ms_hi, bw_lo, bw_hi;
};

static void group_add(struct group *g, const struct an_arow *r, size_t i)
{
	if (!g->n++) {
		g->first = i;
		g->ms_lo = g->ms_hi = r->time_ms_per_rank;
		g->bw_lo = g->bw_hi = r->busbw;
	}
	g->calls += r->calls_per_rank, g->bytes += r->bytes_per_call, g->ms += r->time_ms_per_rank;
	g->algbw += r->algbw, g->busbw += r->busbw, g->peak += r->peak_share;
	g->host |= r->host_time;
	g->ms_lo = fmin(g->ms_lo, r->time_ms_per_rank), g->ms_hi = fmax(g->ms_hi, r->time_ms_per_rank);
	if (!isnan(r->busbw))
		g->bw_lo = isnan(g->bw_lo) ? r->busbw : fmin(g->bw_lo, r->busbw),
		g->bw_hi = isnan(g->bw_hi) ? r->busbw : fmax(g->bw_hi, r->busbw);
}

static void group_print(FILE *o, const struct an_tables *t, const struct group *g)
{
	const struct an_arow *r = &t->coll[g->first];
	if (g->n == 1) {
		one_row(o, r);
		return;
	}
	char label[24];
	snprintf(label, sizeof label, "%zu %s", g->n, an_ckind_name(g->kind));
	double n = (double)g->n;
	row(o, label, r, g->calls / n, g->bytes / n, g->ms / n, g->host, g->algbw / n, g->busbw / n,
	    g->peak / n);
	char lo[16], hi[16];
	an_fmt_gbps(lo, sizeof lo, g->bw_lo);
	an_fmt_gbps(hi, sizeof hi, g->bw_hi);
	fprintf(o, "    (their mean; over the %zu communicators ms/rank %.2f-%.2f, busbw %s-%s)\n",
	        g->n, g->ms_lo, g->ms_hi, lo, hi);
}

/* One row per group. @return 0, -1 out of memory (nothing printed) */
static int print_groups(FILE *o, const struct an_job *job, const struct an_tables *t)
{
	struct group *g = calloc(job->naggs, sizeof *g);
	if (!g)
		return -1;
	size_t ng = 0;
	for (size_t i = 0; i < job->naggs; i++) {
		const struct an_arow *r = &t->coll[i];
		int kind = an_ckind_of(r->c, t->nranks), fn = (int)r->a->fn, nr = r->c->nranks;
		size_t k = 0;
		while (k < ng && !(g[k].kind == kind && g[k].fn == fn && g[k].nranks == nr))
			k++;
		if (k == ng)
			g[ng++] = (struct group){.kind = kind, .fn = fn, .nranks = nr};
		group_add(&g[k], r, i);
	}
	for (size_t k = 0; k < ng; k++)
		group_print(o, t, &g[k]);
	size_t named = 0;
	for (size_t ci = 0; ci < job->ncomms; ci++)
		named += job->comms[ci].name[0] != 0;
	if (named)
		fprintf(o, "  (%zu communicators have names the job gave them: report --all-ranks or "
		           "--json lists them)\n", named);
	fprintf(o, "  (%zu rows of communicators and calls in %zu: one per kind of communicator, call "
	           "and size; --all-ranks prints every one)\n", job->naggs, ng);
	free(g);
	return 0;
}

void an_collectives_print(FILE *o, const struct an_job *job, const struct an_tables *t)
{
	if (!job->naggs)
		return;
	fprintf(o, "\nCOLLECTIVES (per communicator; time is %s)\n",
	        job->have_gpu || job->have_kch_gpu ? "GPU kernel time" : "host call time");
	fprintf(o, "  %-16s %-18s %5s %10s %10s %12s %8s %8s %6s\n", "comm", "call",
	        "ranks", "calls/rank", "MiB/call", "ms/rank", "algbw", "busbw", "%peak");
	const double *th = job->th;
	int every = !th || isinf(th[AN_TH_ranks_shown]) ||
	            (double)job->naggs <= th[AN_TH_collective_rows];
	if (every || print_groups(o, job, t) < 0)
		for (size_t i = 0; i < job->naggs; i++)
			one_row(o, &t->coll[i]);
	fprintf(
	    o,
	    "  (algbw/busbw in GB/s as nccl-tests, over transfer time: the shortest rank's "
	    "time per matched collective; a time ending in h, as 1.26h, is host call time (no GPU "
	    "data), not hours)\n");
	if (t->peak > 0)
		fprintf(o, "  (%%peak: busbw of the NVLink peak, %.0f GB/s per GPU each way: %s)\n",
		        t->peak / 1e9, an_peak_basis());
	for (size_t ci = 0; every && ci < job->ncomms; ci++)
		if (job->comms[ci].name[0])
			fprintf(o, "  comm %016llx is \"%s\" (the name the job gave it)\n",
			        (unsigned long long)job->comms[ci].hash, job->comms[ci].name);
}

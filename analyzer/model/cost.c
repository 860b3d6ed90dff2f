/* cost.c: what recording cost the job, from each process's last COST record, and the capture
 * settings two runs were recorded with (header key NVLP_HDR_CAPTURE). */
#include <stdio.h>  /* snprintf */
#include <string.h> /* strcmp */

#include "model/cost.h"
#include "util/json.h"
#include "model/model.h"
#include "nvlp_trace.h"
#include "util/diag.h" /* an_diag */

#define MIB (1024.0 * 1024.0)

size_t an_cost_sum(const struct an_job *job, struct an_cost *c)
{
	memset(c, 0, sizeof *c);
	double bps = 0;
	for (size_t i = 0; i < job->nranks; i++) {
		const struct an_rank *r = &job->ranks[i];
		if (!r->ok)
			continue;
		c->um_migrations += r->um_transfers;
		if (!r->have_cost)
			continue;
		const struct nvlp_rec_cost *x = &r->cost;
		c->ranks++;
		c->proc_cpu += x->proc_cpu;
		c->own_cpu += x->own_cpu;
		c->role_cpu[0] += x->writer_cpu;
		c->role_cpu[1] += x->flush_cpu;
		c->role_cpu[2] += x->sampler_cpu;
		c->role_cpu[3] += x->pysample_cpu;
		c->hook_ns += x->hook_ns;
		if (x->mem_peak > c->mem_peak)
			c->mem_peak = x->mem_peak;
		if (x->wall)
			bps += (double)x->file_bytes / (x->wall / 1e9);
	}
	if (c->ranks)
		c->bytes_per_s = bps / (double)c->ranks;
	c->share = c->proc_cpu ? (double)(c->own_cpu + c->hook_ns) / (double)c->proc_cpu : 0;
	return c->ranks;
}

/* A CPU time: ms under a second, else s. */
static const char *cpu_time(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000000000ull)
		snprintf(buf, len, "%.1f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
	return buf;
}

void an_cost_text(FILE *o, const struct an_job *job)
{
	struct an_cost c;
	if (!an_cost_sum(job, &c))
		return;
	char a[32], b[32], p[32];
	fprintf(o,
	        "nvlprof cost: %.1f%% of CPU (its threads %s, in the job's calls ~%s, of %s), "
	        "%.1f MiB, %.2f MB/min per rank (%.0f MB/h)",
	        c.share * 100, cpu_time(a, sizeof a, c.own_cpu), cpu_time(b, sizeof b, c.hook_ns),
	        cpu_time(p, sizeof p, c.proc_cpu), c.mem_peak / MIB, c.bytes_per_s * 60 / 1e6,
	        c.bytes_per_s * 3600 / 1e6);
	if (c.ranks < job->nok)
		fprintf(o, " (%zu of %zu processes recorded it)", c.ranks, job->nok);
	/* not CPU: CUPTI's unified-memory counters slow the migrations themselves (run 18) */
	if (c.um_migrations)
		fprintf(o, "; counting its %llu managed-memory migrations slows them (1.5x on a GPU/CPU "
		           "ping-pong): NVLPROF_UM=0 times the job without",
		        (unsigned long long)c.um_migrations);
	fputc('\n', o);
}

void an_cost_json(struct jw *w, const struct an_job *job)
{
	struct an_cost c;
	if (!an_cost_sum(job, &c))
		return;
	jw_obj(w, "cost");
	jw_int(w, "processes", (int64_t)c.ranks);
	jw_num(w, "cpu_share", c.share);
	jw_num(w, "process_cpu_s", c.proc_cpu / 1e9);
	jw_num(w, "nvlprof_threads_cpu_s", c.own_cpu / 1e9);
	static const char *const role[4] = {"writer", "cupti_flush", "link_sampler",
	                                    "python_sampler"};
	jw_obj(w, "threads_cpu_s");
	for (int i = 0; i < 4; i++)
		jw_num(w, role[i], c.role_cpu[i] / 1e9);
	jw_obj_end(w);
	jw_num(w, "hooks_s", c.hook_ns / 1e9);
	jw_num(w, "memory_peak_mib", c.mem_peak / MIB);
	jw_num(w, "trace_mb_per_hour_per_rank", c.bytes_per_s * 3600 / 1e6);
	if (c.um_migrations)
		jw_int(w, "um_migrations_counted", (int64_t)c.um_migrations);
	jw_obj_end(w);
}

/* The capture settings of a job's first process that has them. */
static const char *capture_of(const struct an_job *j, char *buf, size_t len)
{
	for (size_t i = 0; i < j->nranks; i++)
		if (j->ranks[i].ok && an_header_get(&j->ranks[i], NVLP_HDR_CAPTURE, buf, len))
			return buf;
	return NULL;
}

/* The value of name=... in a capture string (into v), or NULL. */
static const char *setting(const char *cap, const char *name, size_t nlen, char *v, size_t len)
{
	for (const char *p = cap; p && *p;) {
		while (*p == ' ')
			p++;
		const char *sp = strchr(p, ' ');
		size_t l = sp ? (size_t)(sp - p) : strlen(p);
		if (l > nlen && p[nlen] == '=' && !strncmp(p, name, nlen)) {
			snprintf(v, len, "%.*s", (int)(l - nlen - 1), p + nlen + 1);
			return v;
		}
		p += l;
	}
	return NULL;
}

const char *an_capture_setting(const struct an_job *j, const char *name, char *v, size_t len)
{
	char cap[512];
	return setting(capture_of(j, cap, sizeof cap), name, strlen(name), v, len);
}

/* Appends to what (at *n) each setting of `from` that `to` differs in ("name from -> to"), or,
 * into only (at *m), each that `to` does not record (a trace of another nvlprof version). */
static void capture_cmp(const char *from, const char *to, int report_diff, char *what, size_t *n,
                        size_t wlen, char *only, size_t *m, size_t olen)
{
	for (const char *p = from; *p;) {
		while (*p == ' ')
			p++;
		const char *eq = strchr(p, '='), *sp = strchr(p, ' ');
		size_t l = sp ? (size_t)(sp - p) : strlen(p);
		if (eq && (!sp || eq < sp)) {
			size_t nl = (size_t)(eq - p);
			char vf[96], vt[96];
			setting(from, p, nl, vf, sizeof vf);
			const char *y = setting(to, p, nl, vt, sizeof vt);
			if (!y && *m < olen)
				*m += (size_t)snprintf(only + *m, olen - *m, "%s%.*s", *m ? ", " : "",
				                       (int)nl, p);
			else if (y && report_diff && strcmp(vf, vt) && *n < wlen)
				*n += (size_t)snprintf(what + *n, wlen - *n, "%s%.*s %s -> %s",
				                       *n ? ", " : "", (int)nl, p, vf, vt);
		}
		p += l;
	}
}

void an_cost_warn_capture(const struct an_job *before, const struct an_job *after)
{
	char cb[512], ca[512], what[512] = "", only_b[256] = "", only_a[256] = "";
	const char *b = capture_of(before, cb, sizeof cb), *a = capture_of(after, ca, sizeof ca);
	if (!b || !a || !strcmp(a, b))
		return;
	size_t n = 0, mb = 0, ma = 0, dummy = 0;
	capture_cmp(b, a, 1, what, &n, sizeof what, only_b, &mb, sizeof only_b);
	capture_cmp(a, b, 0, what, &dummy, 0, only_a, &ma, sizeof only_a);
	if (what[0] || (!only_b[0] && !only_a[0]))
		an_diag("nvlprof: diff: warning: the two sides were recorded with different capture "
		        "settings (%s): part of a difference may be nvlprof's own\n",
		        what[0] ? what : "settings unknown to this version");
	/* a setting one side's nvlprof did not record yet is not a difference: say so, once */
	if (only_b[0] || only_a[0])
		an_diag("nvlprof: diff: note: capture settings recorded on one side only (%s%s%s%s%s; "
		        "traces of different nvlprof versions): compared without them\n",
		        only_b[0] ? "before: " : "", only_b, only_b[0] && only_a[0] ? "; " : "",
		        only_a[0] ? "after: " : "", only_a);
}

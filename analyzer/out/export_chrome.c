/* export_chrome.c: the Chrome/Kineto JSON sink, laid out as torch.profiler writes it so that
 * HTA's loaders take it: distributedInfo.rank, baseTimeNanoseconds, traceEvents (ph X) with cat
 * kernel / gpu_memcpy / cuda_runtime / cpu_op / user_annotation, args.stream, args.correlation
 * and the communication args of Kineto's record_param_comms; the events: export_chrome_ev.c. */
#include <errno.h>  /* errno */
#include <stdlib.h> /* malloc */
#include <string.h> /* strerror */

#include "util/diag.h"
#include "out/export.h"
#include "out/export_chrome.h"
#include "out/export_chrome_int.h"

/* the writers for tests/unit/test_export_chrome.c */
char *xc_u(char *o, uint64_t v)
{
	return w_u(o, v);
}
char *xc_i(char *o, int64_t v)
{
	return w_i(o, v);
}
char *xc_milli(char *o, uint64_t v)
{
	return w_milli(o, v);
}
char *xc_fix3(char *o, double v)
{
	return w_fix3(o, v);
}

/* An event with a name made at run time (written quoted, escaped where it must be) */
static char *head(struct ch *s, char *o, const char *name, int pid, uint64_t tid, uint64_t ts,
                  uint64_t base)
{
	o = w_q(s, o, name, EV_ROOM);
	return w_where(s, o, pid, tid, ts, base);
}

static void open_file(struct ch *s, const struct xm_job *x, int rank, int world)
{
	uint64_t t0, t1;
	xm_span(x, &t0, &t1);
	s->base = t0;
	s->nev = 0;
	/* real time of job time t0, from the first readable process */
	uint64_t real = 0;
	for (size_t i = 0; i < xm_nranks(x) && !real; i++) {
		const struct xm_rank *R = xm_rank(x, i);
		if (R->ok && R->t_real0)
			real = R->t_real0 + (t0 - (R->t_mono0 + (uint64_t)R->offset));
	}
	put_f(s, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":%llu",
	      (unsigned long long)real);
	/* spaced as torch.profiler writes it: HTA finds the rank with the regex "rank":\s+(\d+) */
	if (rank >= 0)
		put_f(s,
		      ",\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %d, \"world_size\": "
		      "%d}",
		      rank, world);
	PUT_LIT(s, ",\"traceName\":\"nvlprof\",\"traceEvents\":[");
}

/* deviceProperties as Kineto writes it (HTA reads name, computeMajor/Minor, totalGlobalMem,
 * numSms); what DEVICE records do not hold is left out. */
static void close_file(struct ch *s, const struct devs *d)
{
	PUT_LIT(s, "\n]");
	if (d && d->n) {
		PUT_LIT(s, ",\"deviceProperties\":[");
		for (int i = 0; i < d->n; i++) {
			const struct nvlp_rec_device *v = &d->d[i];
			put_f(s, "%s\n{\"id\":%lld,\"name\":", i ? "," : "",
			      (long long)(int64_t)v->device);
			put_q(s, d->name[i]);
			put_f(
			    s,
			    ",\"totalGlobalMem\":%llu,\"computeMajor\":%llu,\"computeMinor\":%llu,"
			    "\"numSms\":%llu,\"pciDomainID\":%llu,\"pciBusID\":%llu,"
			    "\"pciDeviceID\":%llu}",
			    (unsigned long long)v->global_mem, (unsigned long long)v->cc_major,
			    (unsigned long long)v->cc_minor, (unsigned long long)v->sm_count,
			    (unsigned long long)v->pci_domain, (unsigned long long)v->pci_bus,
			    (unsigned long long)v->pci_dev);
		}
		PUT_LIT(s, "]");
	}
	PUT_LIT(s, "}\n");
	ch_flush(s);
}

static void meta_sort(struct ch *s, const char *what, int pid, uint64_t tid, long long ix)
{
	put_s(s, s->nev++ ? ",\n{" : "\n{");
	put_f(
	    s,
	    "\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%llu,\"args\":{\"sort_index\":%lld}}",
	    what, pid, (unsigned long long)tid, ix);
}

static void meta(struct ch *s, const char *what, int pid, uint64_t tid, const char *name)
{
	put_s(s, s->nev++ ? ",\n{" : "\n{");
	put_f(s, "\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%llu,\"args\":{\"name\":", what,
	      pid, (unsigned long long)tid);
	put_q(s, name);
	PUT_LIT(s, "}}");
}

/* The -o DIR/ file of trace r: rank<N>.json (pid<P>.json when the rank is unknown). Two traces
 * that claim one rank (two runs in one directory, a relaunched rank) must not write one file from
 * two threads: the later trace gets rank<N>.<r>.json, and its thread says so once. */
static void dir_file(struct ch *s, const struct xm_job *x, size_t r, char *path, size_t n)
{
	const struct xm_rank *R = xm_rank(x, r);
	size_t first = r;
	for (size_t i = 0; i < r && first == r; i++) {
		const struct xm_rank *Q = xm_rank(x, i);
		if (R->rank >= 0 ? Q->rank == R->rank : Q->rank < 0 && Q->pid == R->pid)
			first = i;
	}
	const char *what = R->rank >= 0 ? "rank" : "pid";
	int id = R->rank >= 0 ? R->rank : R->pid;
	if (first == r) {
		snprintf(path, n, "%s/%s%d.json", s->dir, what, id);
		return;
	}
	snprintf(path, n, "%s/%s%d.%zu.json", s->dir, what, id, r);
	an_diag("nvlprof: export: %s and %s are both %s %d: the second is written as %s\n",
	        xm_rank(x, first)->path ? xm_rank(x, first)->path : "?", R->path ? R->path : "?",
	        what, id, path);
}

static void ch_rank(void *ctx, const struct xm_job *x, size_t r)
{
	struct ch *s = ctx;
	const struct xm_rank *R = xm_rank(x, r);
	s->pid = R->pid > 0 ? R->pid : (int)r + 1;
	s->tid0 = 0;
	if (s->dir) {
		char path[4096];
		dir_file(s, x, r, path, sizeof path);
		if (!(s->f = fopen(path, "w"))) {
			an_diag("nvlprof: export: %s: cannot write: %s\n", path, strerror(errno));
			s->err = 1;
			s->f = fopen("/dev/null", "w");
			if (!s->f)
				return;
		}
		int world = 0;
		for (size_t i = 0; i < xm_nranks(x); i++)
			world += xm_rank(x, i)->ok;
		open_file(s, x, R->rank >= 0 ? R->rank : (int)r, world);
	}
	char nm[200];
	snprintf(nm, sizeof nm, "%s (%s pid %d)", R->label, R->host, R->pid);
	meta(s, "process_name", s->pid, 0, nm);
	s->rank_ix = r;
	meta_sort(s, "process_sort_index", s->pid, 0, (long long)r * 256);
}

/* After a process: its steps (Step#N on its first NCCL thread) and its findings. Not named
 * ProfilerStep#N: with two of those HTA keeps only the GPU kernels whose correlation matches a CPU
 * launch event inside the steps, and the shim records no kernel launches, so HTA would drop every
 * kernel (its breakdowns came out empty); without them it analyses all kernels. */
/* Names and order of every process, thread and GPU stream written (Kineto's M events): a
 * process's GPUs sort right after it, host threads in the order first seen, streams by id. */
static void thread_meta(struct ch *s)
{
	for (int g = 0; g < s->ngp; g++) {
		char nm[64];
		snprintf(nm, sizeof nm, "GPU %lld", (long long)s->gp[g].dev);
		meta(s, "process_name", s->gp[g].pid, 0, nm);
		meta_sort(s, "process_sort_index", s->gp[g].pid, 0,
		          (long long)s->rank_ix * 256 + 1 + (s->gp[g].dev & 127));
	}
	for (size_t i = 0; i < s->capseen; i++) {
		const struct seen *t = &s->seen[i];
		if (!t->used)
			continue;
		char nm[64];
		long long ix;
		if (t->pid != s->pid) { /* a GPU's stream */
			snprintf(nm, sizeof nm, "stream %llu", (unsigned long long)t->tid);
			ix = (long long)t->tid;
		} else if (t->tid <= 1) { /* ch_sample's and ch_um's own rows */
			snprintf(nm, sizeof nm, "%s", t->tid ? "unified memory" : "link counters");
			ix = 1000000 + (long long)t->tid;
		} else {
			snprintf(nm, sizeof nm, "thread %llu", (unsigned long long)t->tid);
			ix = (long long)t->ord;
		}
		meta(s, "thread_name", t->pid, t->tid, nm);
		meta_sort(s, "thread_sort_index", t->pid, t->tid, ix);
	}
}

static void tail(struct ch *s, const struct xm_job *x, size_t r)
{
	uint64_t s0, len;
	int n = xm_steps(x, &s0, &len);
	int pid = xm_rank(x, r)->pid > 0 ? xm_rank(x, r)->pid : (int)r + 1;
	for (int k = 0; k < n; k++) {
		char *o = EV_OPEN(s, "X", "user_annotation", EV_ROOM);
		W_LIT(o, "\"Step#");
		o = w_i(o, k);
		*o++ = '"';
		o = w_where(s, o, pid, s->tid0, s0 + (uint64_t)k * len, s->base);
		W_US(o, "dur", len);
		*o++ = '}';
		done(s, o);
	}
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		int mine = f.root_rank < 0 ? r == 0 : xm_rank(x, r)->rank == f.root_rank;
		if (!mine)
			continue;
		uint64_t t0, t1;
		xm_span(x, &t0, &t1);
		char nm[256];
		snprintf(nm, sizeof nm, "%s: %s", f.id, f.title);
		char *o = EV_OPEN(s, "i", "finding", 0);
		o = head(s, o, nm, pid, s->tid0, n ? s0 : t0, s->base);
		done(s, o);
		put_f(s, ",\"s\":\"%s\",\"args\":{\"severity\":\"%s\",\"advice\":",
		      f.root_rank < 0 ? "g" : "p", f.sev);
		put_q(s, f.advice);
		PUT_LIT(s, "}}");
	}
}

static void free_names(struct ch *s)
{
	for (size_t i = 0; i < s->kn.n; i++)
		free(s->kn.v[i].q);
	free(s->kn.v);
	s->kn.v = NULL;
	s->kn.n = 0;
}

static void ch_rank_end(void *ctx, const struct xm_job *x, size_t r)
{
	struct ch *s = ctx;
	if (!s->f && !s->xo)
		return;
	tail(s, x, r);
	thread_meta(s);
	free_names(s); /* name ids are per trace file */
	if (s->dir) {
		close_file(s, s->devs);
		if (s->devs)
			s->devs->n = 0;
		if (fclose(s->f) != 0)
			s->err = 1;
		s->f = NULL;
	}
}

/* Processes are written in parallel: into their own files (per-rank layout), or in process order
 * into the one file through the parallel writer (every part but the first starts with a comma) */
struct ch_job {
	const char *dir;
	uint64_t base;
	int single_rank;
	size_t first;
	struct devs devs; /* the one process's GPUs (one file, single_rank): written by its part */
};

static int ch_part(void *ctx, size_t r, struct xo *o, uint64_t *recs)
{
	const struct xm_job *x = ((void **)ctx)[0];
	struct ch_job *j = ((void **)ctx)[1];
	struct ch *s = calloc(1, sizeof *s); /* the function name caches: 3 KiB */
	char *b = malloc(CH_BUF);
	struct xm_names *names = xm_names_new();
	struct devs *devs = j->dir ? calloc(1, sizeof *devs) : NULL;
	if (!s || !b || !names || (j->dir && !devs)) {
		free(s);
		free(b);
		free(devs);
		xm_names_free(names);
		an_diag("nvlprof: export: out of memory\n");
		return 1;
	}
	*s = (struct ch){.b = b,
	                 .xo = j->dir ? NULL : o,
	                 .part = r,
	                 .dir = j->dir,
	                 .base = j->base,
	                 .single_rank = j->single_rank,
	                 .nev = !j->dir && r != j->first,
	                 .names = names,
	                 /* the one file's deviceProperties: its one process's (the part writes
	                  * only its own struct ch_job field, read after every part ended) */
	                 .devs = j->dir                            ? devs
	                         : j->single_rank && r == j->first ? &j->devs
	                                                           : NULL};
	struct xe_sink sink = {.ctx = s, .rank = ch_rank, .ev = xc_ev, .rank_end = ch_rank_end};
	int rc = xe_stream_rank(x, &sink, r, recs) != 0;
	ch_flush(s);
	if (s->f) /* a trace failed in the middle: its file still gets closed */
		fclose(s->f);
	free_names(s);
	for (int t = 0; t < 2; t++)
		for (int i = 0; i < 64; i++)
			free(s->fn[t][i].q);
	xm_names_free(s->names);
	free(s->seen);
	free(devs);
	rc |= s->err ? 2 : 0;
	free(s->b);
	free(s);
	return rc;
}

int xe_chrome(const struct xm_job *x, FILE *o, const char *out_dir, uint64_t *records)
{
	static __thread char buf[CH_BUF]; /* the header and the closing bracket */
	struct ch s = {.b = buf, .f = o, .dir = out_dir};
	size_t n = xm_nranks(x), nok = 0, one = 0, first = n;
	for (size_t i = 0; i < n; i++)
		if (xm_rank(x, i)->ok) {
			nok++, one = i;
			if (first == n)
				first = i;
		}
	s.single_rank = nok == 1;
	uint64_t t0, t1;
	xm_span(x, &t0, &t1);
	if (!out_dir) {
		const struct xm_rank *R = xm_rank(x, one);
		/* distributedInfo names one rank: only when the file holds one process */
		open_file(&s, x, nok == 1 ? (R->rank >= 0 ? R->rank : 0) : -1, (int)nok);
		ch_flush(&s);
	}
	struct ch_job j = {
	    .dir = out_dir, .base = t0, .single_rank = s.single_rank, .first = first};
	void *ctx[2] = {(void *)x, &j};
	int rc = xo_run(x, o, ch_part, ctx, records);
	if (rc > 0) {
		if (rc & 2)
			s.err = 1;
		rc = rc & 1 ? -1 : 0;
	}
	if (!out_dir)
		close_file(&s, s.single_rank ? &j.devs : NULL);
	if (s.err && !rc)
		an_diag("nvlprof: export: write error (chrome)%s%s\n", errno ? ": " : "",
		        errno ? strerror(errno)
		              : ""); /* errno: the failed write's (out/formats.c clears it) */
	return rc || s.err ? -1 : 0;
}

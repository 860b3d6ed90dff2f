/* export.c: `nvlprof export`: streams each trace's records in job time (aligned as `report`
 * aligns them), with the analyzer's call/kernel matches attached, into one format's sink. */
#include <errno.h>    /* errno */
#include <stdlib.h>   /* malloc */
#include <string.h>   /* strcmp */
#include <sys/stat.h> /* stat */
#include <time.h>     /* clock_gettime */

#include "out/export.h"
#include "nvlp_trace.h"

static inline uint64_t mix(uint64_t x) /* splitmix64's finaliser */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}
uint64_t xe_flow_call(size_t r, long k)
{
	return mix(mix((uint64_t)r ^ 0x63616c6cULL) ^ (uint64_t)k) | 1;
}
uint64_t xe_flow_coll(uint64_t comm_hash, uint64_t seq)
{
	return mix(mix(comm_hash ^ 0x636f6c6cULL) ^ seq) | 1;
}

/* NCCL calls with GPU time, by (device, gpu start): a kernel finds the calls it ran */
struct gcall {
	int device;
	uint64_t s, d;
	long k;
};
static int cmp_gcall(const void *a, const void *b)
{
	const struct gcall *x = a, *y = b;
	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	return x->s < y->s ? -1 : x->s > y->s;
}

/* per trace: NCCL kernel or not, by kernel name id (0 unknown, 1 no, 2 yes) */
struct kname {
	uint8_t *v;
	size_t n;
};
static int is_nccl(struct kname *c, uint64_t id, const char *name)
{
	if (id < c->n && c->v[id])
		return c->v[id] == 2;
	int y = xm_is_nccl_kernel(name);
	if (id < (1u << 24)) { /* ids are small and dense (STRING records, per file) */
		if (id >= c->n) {
			size_t n = c->n ? c->n : 64;
			while (n <= id)
				n *= 2;
			uint8_t *v = realloc(c->v, n);
			if (v) {
				memset(v + c->n, 0, n - c->n);
				c->v = v;
				c->n = n;
			}
		}
		if (id < c->n)
			c->v[id] = (uint8_t)(1 + y);
	}
	return y;
}

static inline uint64_t job_t(const struct xm_rank *r, uint64_t local)
{
	return local + (uint64_t)r->offset;
}

/* One rank's stream: its calls with GPU time in GPU order (g), the kernel names' classes (kn),
 * and the current kernel's calls (kc, reused from kernel to kernel). */
struct xstream {
	const struct xm_job *x;
	size_t ri;
	const struct xm_rank *R;
	nvlp_reader *rd;
	struct gcall *g;
	size_t ng, nc;
	long ncall; /* NCCL records that became calls, in file order (as the model) */
	struct kname kn;
	long *kc;
	size_t kcap;
	char dev[256]; /* the name of the last DEVICE record */
};

/* The rank's calls that have GPU time, by (device, start); NULL when out of memory. */
static struct gcall *gpu_calls(const struct xm_job *x, size_t ri, size_t nc, size_t *ngp)
{
	size_t ng = 0;
	struct gcall *g = malloc((nc ? nc : 1) * sizeof *g);
	if (!g)
		return NULL;
	for (size_t k = 0; k < nc; k++) {
		struct xm_call c;
		xm_call(x, ri, k, &c);
		if (c.gpu_start)
			g[ng++] = (struct gcall){c.device, c.gpu_start, c.gpu_dur, (long)k};
	}
	size_t sorted = 1; /* the model's calls mostly come in GPU order already */
	while (sorted < ng && cmp_gcall(&g[sorted - 1], &g[sorted]) <= 0)
		sorted++;
	if (sorted < ng)
		qsort(g, ng, sizeof *g, cmp_gcall);
	*ngp = ng;
	return g;
}

static void ev_nccl(struct xstream *t, const struct nvlp_rec_nccl *n, struct xe_ev *e)
{
	char cls = nvlp_nccl_fn_class((unsigned)n->fn);
	e->type = XE_NCCL;
	e->ts = job_t(t->R, n->t_enter);
	e->dur = n->dur;
	e->name = nvlp_nccl_fn_name((unsigned)n->fn);
	if ((cls == 'C' || cls == 'P') && (int64_t)n->rc == 0 && (size_t)t->ncall < t->nc) {
		e->call = t->ncall++;
		struct xm_call c;
		xm_call(t->x, t->ri, (size_t)e->call, &c);
		e->comm = c.comm;
		e->has_gpu = c.gpu_start != 0;
	} else if (n->comm)
		e->comm = xm_comm_of_hash(t->x, n->comm);
}

static void ev_kernel(struct xstream *t, const struct nvlp_rec_kernel *k, struct xe_ev *e)
{
	e->type = XE_KERNEL;
	e->ts = job_t(t->R, k->start);
	e->dur = k->dur;
	const char *nm = nvlp_reader_string(t->rd, k->name);
	e->name = nm ? nm : "";
	/* the calls this kernel ran: the model gives a kernel's first call its start and the
	 * group's next calls the following shares, back to back */
	const struct gcall *g = t->g;
	size_t ng = t->ng;
	struct gcall key = {(int)(int64_t)k->device, e->ts, 0, 0};
	size_t lo = 0, hi = ng;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cmp_gcall(&g[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t n = 0;
	uint64_t next = e->ts;
	if (!is_nccl(&t->kn, k->name, e->name))
		lo = ng; /* another stream's kernel starting at the same ns */
	for (size_t i = lo; i < ng && g[i].device == key.device && g[i].s == next &&
	                    (n == 0 || g[i].s < e->ts + e->dur);
	     i++) {
		if (n == t->kcap) {
			size_t nk = t->kcap ? 2 * t->kcap : 16;
			long *p = realloc(t->kc, nk * sizeof *p);
			if (!p)
				break;
			t->kc = p;
			t->kcap = nk;
		}
		t->kc[n++] = g[i].k;
		next = g[i].s + g[i].d;
	}
	e->calls = t->kc;
	e->ncalls = n;
}

/* An API call's event (cudaMemcpy*, cudaMemAdvise/Prefetch, cudaDeviceEnablePeerAccess...). */
static void api_ev(struct xe_ev *e, int type, const struct xm_rank *R, uint64_t t_enter,
                   uint64_t dur, unsigned fn)
{
	e->type = type;
	e->ts = job_t(R, t_enter);
	e->dur = dur;
	e->name = nvlp_cuda_fn_name(fn);
}
/* A GPU activity's event. */
static void gpu_ev(struct xe_ev *e, int type, const struct xm_rank *R, uint64_t start,
                   uint64_t dur)
{
	e->type = type;
	e->ts = job_t(R, start);
	e->dur = dur;
}

/* The event of a record; 0 for a record the timeline does not show. */
static int ev_of(struct xstream *t, const struct nvlp_record *rec, struct xe_ev *e)
{
	const struct xm_rank *R = t->R;
	switch (rec->kind) {
	case NVLP_K_NCCL:
		ev_nccl(t, (const void *)rec->f, e);
		return 1;
	case NVLP_K_COPY: {
		const struct nvlp_rec_copy *c = (const void *)rec->f;
		api_ev(e, XE_COPY, R, c->t_enter, c->dur, (unsigned)c->fn);
		return 1;
	}
	case NVLP_K_MANAGED: {
		const struct nvlp_rec_managed *m = (const void *)rec->f;
		api_ev(e, XE_MANAGED, R, m->t_enter, m->dur, (unsigned)m->fn);
		return 1;
	}
	case NVLP_K_PEER: {
		const struct nvlp_rec_peer *p = (const void *)rec->f;
		api_ev(e, XE_PEER, R, p->t_enter, p->dur, (unsigned)p->fn);
		return 1;
	}
	case NVLP_K_KERNEL:
		ev_kernel(t, (const void *)rec->f, e);
		return 1;
	case NVLP_K_GPUCOPY: {
		const struct nvlp_rec_gpucopy *c = (const void *)rec->f;
		gpu_ev(e, XE_GPUCOPY, R, c->start, c->dur);
		return 1;
	}
	case NVLP_K_UM: {
		const struct nvlp_rec_um *u = (const void *)rec->f;
		gpu_ev(e, XE_UM, R, u->start, u->dur);
		e->alloc = xm_alloc_of(t->x, t->ri, u->address);
		return 1;
	}
	case NVLP_K_LINKSAMPLE: {
		const struct nvlp_rec_linksample *l = (const void *)rec->f;
		gpu_ev(e, XE_SAMPLE, R, l->start, l->dur);
		return 1;
	}
	case NVLP_K_DEVICE:
		e->type = XE_DEVICE;
		snprintf(t->dev, sizeof t->dev, "%.*s", (int)rec->blob_len,
		         rec->blob ? (const char *)rec->blob : "");
		e->name = t->dev;
		return 1;
	default:
		return 0;
	}
}

int xe_stream_rank(const struct xm_job *x, struct xe_sink *s, size_t ri, uint64_t *records)
{
	struct xstream t = {.x = x, .ri = ri, .R = xm_rank(x, ri)};
	if (!t.R->ok)
		return 0;
	char err[320];
	t.rd = nvlp_reader_open(t.R->path, err, sizeof err);
	if (!t.rd) {
		fprintf(stderr, "nvlprof: export: %s\n", err);
		return -1;
	}
	t.nc = xm_ncalls(x, ri);
	t.g = gpu_calls(x, ri, t.nc, &t.ng);
	if (!t.g) {
		nvlp_reader_close(t.rd);
		fprintf(stderr, "nvlprof: export: out of memory\n");
		return -1;
	}
	if (s->rank)
		s->rank(s->ctx, x, ri);
	struct nvlp_record rec;
	int rc;
	while ((rc = nvlp_reader_next(t.rd, &rec)) == 1) {
		(*records)++;
		struct xe_ev e = {
		    .rank = ri, .f = rec.f, .name = "", .comm = -1, .call = -1, .alloc = -1};
		if (ev_of(&t, &rec, &e))
			s->ev(s->ctx, x, &e);
	}
	if (rc < 0)
		fprintf(stderr, "nvlprof: export: %s\n", nvlp_reader_error(t.rd));
	if (s->rank_end)
		s->rank_end(s->ctx, x, ri);
	free(t.g);
	free(t.kn.v);
	nvlp_reader_close(t.rd);
	free(t.kc);
	return 0;
}

int xe_stream(const struct xm_job *x, struct xe_sink *s, uint64_t *records)
{
	*records = 0;
	for (size_t ri = 0; ri < xm_nranks(x); ri++)
		if (xe_stream_rank(x, s, ri, records) != 0)
			return -1;
	return 0;
}

static void usage(FILE *o)
{
	fprintf(
	    o,
	    "usage: nvlprof export --format perfetto|chrome|sqlite [-o FILE] [options] "
	    "FILE|DIR...\n"
	    "  Writes the job's timeline, hosts aligned as in `report`:\n"
	    "    perfetto  Perfetto protobuf (open in https://ui.perfetto.dev); default "
	    "nvlprof.pftrace\n"
	    "    chrome    Chrome/Kineto JSON (Perfetto, chrome://tracing, HTA); -o DIR/ writes\n"
	    "              one file per rank (rank<N>.json), the layout HTA's TraceAnalysis "
	    "reads;\n"
	    "              default nvlprof.json\n"
	    "    sqlite    SQLite database (schema: docs/EXPORTS.md); default nvlprof.sqlite\n"
	    "  -o -  writes perfetto/chrome to stdout.\n"
	    "  --threshold NAME=VALUE, -j N: as for report (the findings become events).\n"
	    "Exit status: 0 written, 2 usage error, no readable trace or write error.\n");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

enum { F_PERFETTO, F_CHROME, F_SQLITE };

struct export_args {
	struct xm_opts opts;
	int quiet, fmt; /* F_*, -1 unknown */
	const char *out;
	char **paths;
	int np;
};

/* Parse the options and inputs into a (paths: argc + 1 entries); -1 to go on, else the exit
 * status. */
static int export_args(int argc, char **argv, struct export_args *a)
{
	const char *fmt = NULL;
	for (int i = 1; i < argc; i++) {
		int c = xm_opt(argc, argv, &i, &a->opts);
		if (c < 0)
			return 2;
		if (c)
			continue;
		const char *s = argv[i];
		if ((!strcmp(s, "--format") || !strcmp(s, "-f") || !strcmp(s, "-o")) &&
		    i + 1 >= argc) {
			fprintf(stderr, "nvlprof: export: %s needs %s\n", s,
			        s[1] == 'o' ? "a file name (or - for standard output)"
			                    : "a format: perfetto, chrome or sqlite");
			return 2;
		}
		if (!strcmp(s, "--format") || !strcmp(s, "-f"))
			fmt = argv[++i];
		else if (!strncmp(s, "--format=", 9))
			fmt = s + 9;
		else if (!strcmp(s, "-o"))
			a->out = argv[++i];
		else if (!strcmp(s, "-q") || !strcmp(s, "--quiet"))
			a->quiet = 1;
		else if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			usage(stdout);
			return 0;
		} else if (s[0] == '-' && s[1]) {
			fprintf(stderr,
			        "nvlprof: export: unknown option %s (--format FMT, -o OUT, -q, "
			        "--threshold NAME=VALUE, -j N, --symbols DIR; see --help)\n",
			        s);
			usage(stderr);
			return 2;
		} else
			a->paths[a->np++] = argv[i];
	}
	a->fmt = !fmt                       ? -1
	         : !strcmp(fmt, "perfetto") ? F_PERFETTO
	         : !strcmp(fmt, "chrome")   ? F_CHROME
	         : !strcmp(fmt, "sqlite")   ? F_SQLITE
	                                    : -1;
	if (fmt && a->fmt < 0) {
		fprintf(stderr,
		        "nvlprof: export: unknown format '%s' (perfetto, chrome or sqlite)\n", fmt);
		return 2;
	}
	return -1;
}

/* The format and output are usable (the default output filled in); else the exit status */
static int export_check(struct export_args *a)
{
	if (a->fmt < 0 || !a->np) {
		fprintf(stderr, a->fmt < 0
		                    ? "nvlprof: export: no format: --format perfetto, chrome or "
		                      "sqlite is needed\n"
		                    : "nvlprof: export: no input: give a trace directory or .nvlp "
		                      "files\n");
		usage(stderr);
		return 2;
	}
	static const char *const defaults[] = {"nvlprof.pftrace", "nvlprof.json", "nvlprof.sqlite"};
	if (!a->out)
		a->out = defaults[a->fmt];
	if (a->fmt == F_SQLITE && !strcmp(a->out, "-")) {
		fprintf(stderr, "nvlprof: export: sqlite needs a file (-o FILE), not stdout\n");
		return 2;
	}
	return -1;
}

/* Perfetto or Chrome JSON to out (a file, "-" for stdout, or for chrome a directory of one
 * file per rank); 0 written */
static int export_stream(const struct xm_job *x, int fmt, const char *out, uint64_t *recs)
{
	size_t ol = strlen(out);
	struct stat st;
	int dir =
	    fmt == F_CHROME && (out[ol - 1] == '/' || (!stat(out, &st) && S_ISDIR(st.st_mode)));
	if (dir && mkdir(out, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "nvlprof: export: %s: cannot create directory: %s\n", out,
		        strerror(errno));
		return -1;
	}
	FILE *o = stdout;
	if (!dir && strcmp(out, "-") && !(o = fopen(out, "wb"))) {
		fprintf(stderr, "nvlprof: export: %s: cannot write: %s\n", out, strerror(errno));
		return -1;
	}
	errno = 0; /* the writers say errno's reason for a failed write: none stale from above */
	int rc = fmt == F_PERFETTO ? xe_perfetto(x, o, recs)
	                           : xe_chrome(x, dir ? NULL : o, dir ? out : NULL, recs);
	if (o != stdout && fclose(o) != 0 && !rc) {
		fprintf(stderr, "nvlprof: export: %s: write error: %s\n", out, strerror(errno));
		rc = -1;
	}
	return rc;
}

int nvlp_cmd_export(int argc, char **argv)
{
	struct export_args a = {.paths = calloc((size_t)argc + 1, sizeof *a.paths)};
	xm_opts_init(&a.opts);
	if (!a.paths)
		return 2;
	int rc = export_args(argc, argv, &a);
	if (rc < 0)
		rc = export_check(&a);
	if (rc >= 0) {
		free(a.paths);
		return rc;
	}
	double t = now_s();
	struct xm_job *x = xm_open(a.paths, a.np, &a.opts);
	free(a.paths);
	if (!x)
		return 2;
	double tload = now_s() - t;
	uint64_t recs = 0;
	rc = a.fmt == F_SQLITE ? xe_sqlite(x, a.out, a.opts.threads, &recs) : export_stream(x, a.fmt, a.out, &recs);
	double tall = now_s() - t;
	if (!rc && !a.quiet && strcmp(a.out, "-"))
		fprintf(stderr,
		        "nvlprof: export: %s written: %llu records in %.2f s (load and analysis "
		        "%.2f s)\n",
		        a.out, (unsigned long long)recs, tall, tload);
	xm_close(x);
	return rc ? 2 : 0;
}

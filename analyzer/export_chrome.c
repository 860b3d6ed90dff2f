/* export_chrome.c: the Chrome/Kineto JSON sink, laid out as torch.profiler writes it so that
 * HTA's loaders take it: distributedInfo.rank, baseTimeNanoseconds, traceEvents (ph X) with cat
 * kernel / gpu_memcpy / cuda_runtime / cpu_op / user_annotation, args.stream, args.correlation
 * and the communication args of Kineto's record_param_comms. */
#include <errno.h>   /* errno */
#include <pthread.h> /* pthread_mutex_t */
#include <stdlib.h>  /* malloc */
#include <string.h>  /* strerror */
#include <unistd.h>  /* sysconf */

#include "export.h"
#include "json.h" /* jw_quote */
#include "nvlp_trace.h"
#include "util.h" /* nvlp_run_parallel */

struct ch {
	FILE *o;         /* current output */
	const char *dir; /* per-rank files into this directory, NULL: one file */
	int err, nev, single_rank;
	uint64_t base; /* job time of ts 0 */
	uint64_t tid0; /* first NCCL thread of the process: where ProfilerStep#N go */
	int pid;
};

/* Formatting by hand, unlocked: fprintf's parsing and locking were most of the export's time */
static inline void put_s(FILE *o, const char *t)
{
	fputs_unlocked(t, o);
}
static inline void put_u(FILE *o, uint64_t v)
{
	char b[24];
	int i = 24;
	do
		b[--i] = (char)('0' + v % 10);
	while (v /= 10);
	fwrite_unlocked(b + i, 1, (size_t)(24 - i), o);
}
static inline void put_i(FILE *o, int64_t v)
{
	if (v < 0) {
		putc_unlocked('-', o);
		put_u(o, (uint64_t)0 - (uint64_t)v);
	} else
		put_u(o, (uint64_t)v);
}
static inline void put_milli(FILE *o, uint64_t v) /* v / 1000 with 3 decimals */
{
	put_u(o, v / 1000);
	char b[4] = {'.', (char)('0' + v / 100 % 10), (char)('0' + v / 10 % 10),
	             (char)('0' + v % 10)};
	fwrite_unlocked(b, 1, 4, o);
}
static inline void put_fix3(FILE *o, double v) /* v >= 0, 3 decimals */
{
	put_milli(o, v > 0 && v < 1e15 ? (uint64_t)(v * 1000 + 0.5) : 0);
}
static void put_q(FILE *o, const char *t) /* a JSON string */
{
	for (const char *c = t; *c; c++)
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
			jw_quote(o, t);
			return;
		}
	putc_unlocked('"', o);
	fputs_unlocked(t, o);
	putc_unlocked('"', o);
}

/* µs with ns precision, relative to the base, as Kineto writes them */
static void ts_us(FILE *o, const char *key, uint64_t t)
{
	putc_unlocked(',', o);
	putc_unlocked('"', o);
	put_s(o, key);
	put_s(o, "\":");
	put_milli(o, t);
}

static void head(struct ch *s, const char *ph, const char *cat, const char *name, int pid,
                 uint64_t tid, uint64_t ts, uint64_t base)
{
	FILE *o = s->o;
	put_s(o, s->nev++ ? ",\n{\"ph\":\"" : "\n{\"ph\":\"");
	put_s(o, ph);
	put_s(o, "\",\"cat\":\"");
	put_s(o, cat);
	put_s(o, "\",\"name\":");
	put_q(o, name);
	put_s(o, ",\"pid\":");
	put_i(o, pid);
	put_s(o, ",\"tid\":");
	put_u(o, tid);
	ts_us(o, "ts", ts >= base ? ts - base : 0);
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
			real = R->t_real0 + (t0 - (uint64_t)((int64_t)R->t_mono0 + R->offset));
	}
	fprintf(s->o,
	        "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":%llu",
	        (unsigned long long)real);
	if (rank >= 0)
		fprintf(s->o,
		        ",\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":%d,\"world_size\":%d}",
		        rank, world);
	fprintf(s->o, ",\"traceName\":\"nvlprof\",\"traceEvents\":[");
}

static void close_file(struct ch *s)
{
	fputs("\n]}\n", s->o);
	if (ferror(s->o))
		s->err = 1;
}

static void meta(struct ch *s, const char *what, int pid, uint64_t tid, const char *name)
{
	fputs(s->nev++ ? ",\n{" : "\n{", s->o);
	fprintf(s->o,
	        "\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%llu,\"args\":{\"name\":", what,
	        pid, (unsigned long long)tid);
	jw_quote(s->o, name);
	fputs("}}", s->o);
}

static void ch_rank(void *ctx, const struct xm_job *x, size_t r)
{
	struct ch *s = ctx;
	const struct xm_rank *R = xm_rank(x, r);
	s->pid = R->pid > 0 ? R->pid : (int)r + 1;
	s->tid0 = 0;
	if (s->dir) {
		char path[4096];
		if (R->rank >= 0)
			snprintf(path, sizeof path, "%s/rank%d.json", s->dir, R->rank);
		else
			snprintf(path, sizeof path, "%s/pid%d.json", s->dir, R->pid);
		if (!(s->o = fopen(path, "w"))) {
			fprintf(stderr, "nvlprof: export: %s: cannot write: %s\n", path,
			        strerror(errno));
			s->err = 1;
			s->o = fopen("/dev/null", "w");
			if (!s->o)
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
}

static int gpu_pid(struct ch *s, int64_t dev)
{
	/* Kineto gives each GPU its own pid (the device index); in one file holding several
	 * processes the GPU pids are kept apart from each other and from host pids */
	return s->dir || s->single_rank ? (int)dev : s->pid * 100 + 100000000 + (int)dev;
}

static void ch_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	(void)x;
	struct ch *s = ctx;
	FILE *o = s->o;
	if (!o)
		return;
	switch (e->type) {
	case XE_NCCL: {
		const struct nvlp_rec_nccl *n = e->f;
		if (!s->tid0)
			s->tid0 = n->tid;
		/* the host call as Kineto's record_param_comms cpu_op */
		head(s, "X", "cpu_op", e->name, s->pid, n->tid, e->ts, s->base);
		ts_us(o, "dur", e->dur);
		put_s(o, ",\"args\":{\"External id\":");
		put_i(o, e->call >= 0 ? e->call + 1 : 0);
		if (e->call >= 0) {
			char cls = nvlp_nccl_fn_class((unsigned)n->fn);
			unsigned sz = nvlp_nccl_dtype_size((int)(int64_t)n->dtype);
			uint64_t nel = n->count, out = n->count;
			if (n->fn == NVLP_NCCL_ALL_GATHER)
				out = n->count * (n->nranks ? n->nranks : 1);
			else if (n->fn == NVLP_NCCL_REDUCE_SCATTER)
				nel = n->count * (n->nranks ? n->nranks : 1);
			put_s(o, ",\"Collective name\":\"");
			put_s(o, xm_fn_coll((int)n->fn));
			put_s(o, "\",\"In msg nelems\":");
			put_u(o, nel);
			put_s(o, ",\"Out msg nelems\":");
			put_u(o, out);
			put_s(o, ",\"In msg size\":");
			put_u(o, nel * sz);
			put_s(o, ",\"Group size\":");
			put_i(o, (int64_t)n->nranks);
			put_s(o, ",\"dtype\":\"");
			put_s(o, nvlp_nccl_dtype_name((int)(int64_t)n->dtype));
			put_s(o, "\",\"Process Group Name\":\"");
			put_i(o, e->comm);
			char hx[96];
			snprintf(hx, sizeof hx, "\",\"Process Group Description\":\"comm %016llx\"",
			         (unsigned long long)n->comm);
			put_s(o, hx);
			put_s(o, ",\"Rank\":");
			put_i(o, (int64_t)n->rank);
			put_s(o, ",\"Seq\":");
			put_u(o, n->seq);
			if (cls == 'P') {
				put_s(o, ",\"Peer\":");
				put_i(o, (int64_t)n->peer);
			}
		}
		fputs("}}", o);
		if (e->call >= 0 && e->has_gpu) {
			head(s, "s", "ac2g", "ac2g", s->pid, n->tid, e->ts, s->base);
			put_s(o, ",\"id\":");
			put_u(o, xe_flow_call(e->rank, e->call));
			putc_unlocked('}', o);
		}
		break;
	}
	case XE_COPY:
	case XE_MANAGED:
	case XE_PEER: {
		uint64_t tid = 0, corr = 0;
		if (e->type == XE_COPY) {
			tid = ((const struct nvlp_rec_copy *)e->f)->tid;
			corr = ((const struct nvlp_rec_copy *)e->f)->call_id;
		} else if (e->type == XE_MANAGED)
			tid = ((const struct nvlp_rec_managed *)e->f)->tid;
		else
			tid = ((const struct nvlp_rec_peer *)e->f)->tid;
		head(s, "X", "cuda_runtime", e->name, s->pid, tid, e->ts, s->base);
		ts_us(o, "dur", e->dur);
		fprintf(o, ",\"args\":{\"correlation\":%llu", (unsigned long long)corr);
		if (e->type == XE_COPY)
			fprintf(o, ",\"bytes\":%llu",
			        (unsigned long long)((const struct nvlp_rec_copy *)e->f)->bytes);
		fputs("}}", o);
		break;
	}
	case XE_KERNEL: {
		const struct nvlp_rec_kernel *k = e->f;
		const char *nm = e->name[0] ? e->name : "kernel";
		char buf[300];
		const char *p = strstr(nm, "nccl");
		if (p && p != nm) {
			/* tools look for the nccl prefix: "_Z39ncclDevKernel_AllReduce_..." becomes
			 * "ncclDevKernel_AllReduce_..." (its identifier) */
			size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			                     "0123456789_");
			char *end;
			unsigned long len =
			    nm[0] == '_' && nm[1] == 'Z' ? strtoul(nm + 2, &end, 10) : 0;
			if (len && end == p && len <= n) /* Itanium mangling: _Z<len><name>... */
				n = len;
			snprintf(buf, sizeof buf, "%.*s",
			         (int)(n < sizeof buf ? n : sizeof buf - 1), p);
			nm = buf;
		} else if (e->ncalls && !p) {
			snprintf(buf, sizeof buf, "nccl:%s", nm);
			nm = buf;
		}
		int pid = gpu_pid(s, (int64_t)k->device);
		head(s, "X", "kernel", nm, pid, k->stream, e->ts, s->base);
		ts_us(o, "dur", e->dur);
		put_s(o, ",\"args\":{\"device\":");
		put_i(o, (int64_t)k->device);
		put_s(o, ",\"stream\":");
		put_u(o, k->stream);
		put_s(o, ",\"correlation\":");
		put_u(o, k->correlation);
		put_s(o, ",\"External id\":");
		put_i(o, e->ncalls ? e->calls[0] + 1 : 0);
		put_s(o, ",\"grid\":[");
		put_u(o, k->grid_x);
		putc_unlocked(',', o);
		put_u(o, k->grid_y);
		putc_unlocked(',', o);
		put_u(o, k->grid_z);
		put_s(o, "],\"block\":[");
		put_u(o, k->block_x);
		putc_unlocked(',', o);
		put_u(o, k->block_y);
		putc_unlocked(',', o);
		put_u(o, k->block_z);
		put_s(o, "]}}");
		for (size_t i = 0; i < e->ncalls; i++) {
			head(s, "f", "ac2g", "ac2g", pid, k->stream, e->ts, s->base);
			put_s(o, ",\"bp\":\"e\",\"id\":");
			put_u(o, xe_flow_call(e->rank, e->calls[i]));
			putc_unlocked('}', o);
		}
		break;
	}
	case XE_GPUCOPY: {
		const struct nvlp_rec_gpucopy *c = e->f;
		char nm[64];
		snprintf(nm, sizeof nm, "Memcpy %lld -> %lld", (long long)(int64_t)c->src_device,
		         (long long)(int64_t)c->dst_device);
		head(s, "X", "gpu_memcpy", nm, gpu_pid(s, (int64_t)c->device), c->stream, e->ts,
		     s->base);
		ts_us(o, "dur", e->dur);
		put_s(o, ",\"args\":{\"device\":");
		put_i(o, (int64_t)c->device);
		put_s(o, ",\"stream\":");
		put_u(o, c->stream);
		put_s(o, ",\"correlation\":");
		put_u(o, c->call_id ? c->call_id : c->correlation);
		put_s(o, ",\"bytes\":");
		put_u(o, c->bytes);
		put_s(o, ",\"copy_kind\":");
		put_u(o, c->copy_kind);
		put_s(o, "}}");
		break;
	}
	case XE_SAMPLE: {
		const struct nvlp_rec_linksample *l = e->f;
		if (!e->dur)
			break;
		static const char *const gpu_nm[] = {
		    "GPU 0 link GB/s", "GPU 1 link GB/s", "GPU 2 link GB/s", "GPU 3 link GB/s",
		    "GPU 4 link GB/s", "GPU 5 link GB/s", "GPU 6 link GB/s", "GPU 7 link GB/s"};
		char nm[48];
		int64_t dv = (int64_t)l->device;
		if (dv < 0 || dv >= 8)
			snprintf(nm, sizeof nm, "GPU %lld link GB/s", (long long)dv);
		head(s, "C", "link", dv >= 0 && dv < 8 ? gpu_nm[dv] : nm, s->pid, 0, e->ts,
		     s->base);
		put_s(o, ",\"args\":{\"NVLink\":");
		put_fix3(o, (double)(l->nvl_tx + l->nvl_rx) / (double)e->dur);
		put_s(o, ",\"PCIe\":");
		put_fix3(o, (double)(l->pcie_rd + l->pcie_wr) / (double)e->dur);
		put_s(o, "}}");
		break;
	}
	case XE_UM: {
		const struct nvlp_rec_um *u = e->f;
		if (u->counter < 1 || (u->counter > 2 && u->counter != 8))
			break;
		head(s, "X", "um_migration",
		     u->counter == 2   ? "UM DtoH"
		     : u->counter == 1 ? "UM HtoD"
		                       : "UM DtoD",
		     s->pid, 1, e->ts, s->base);
		ts_us(o, "dur", e->dur);
		fprintf(o, ",\"args\":{\"bytes\":%llu,\"address\":%llu,\"allocation\":%ld}}",
		        (unsigned long long)u->value, (unsigned long long)u->address, e->alloc);
		break;
	}
	}
	if (ferror(o))
		s->err = 1;
}

/* After a process: its steps (ProfilerStep#N on its first NCCL thread) and its findings */
static void tail(struct ch *s, const struct xm_job *x, size_t r)
{
	uint64_t s0, len;
	int n = xm_steps(x, &s0, &len);
	int pid = xm_rank(x, r)->pid > 0 ? xm_rank(x, r)->pid : (int)r + 1;
	for (int k = 0; k < n; k++) {
		char nm[32];
		snprintf(nm, sizeof nm, "ProfilerStep#%d", k);
		head(s, "X", "user_annotation", nm, pid, s->tid0, s0 + (uint64_t)k * len, s->base);
		ts_us(s->o, "dur", len);
		fputs("}", s->o);
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
		head(s, "i", "finding", nm, pid, s->tid0, n ? s0 : t0, s->base);
		fprintf(s->o, ",\"s\":\"%s\",\"args\":{\"severity\":\"%s\",\"advice\":",
		        f.root_rank < 0 ? "g" : "p", f.sev);
		jw_quote(s->o, f.advice);
		fputs("}}", s->o);
	}
}

static void ch_rank_end(void *ctx, const struct xm_job *x, size_t r)
{
	struct ch *s = ctx;
	if (!s->o)
		return;
	tail(s, x, r);
	if (s->dir) {
		close_file(s);
		if (fclose(s->o) != 0)
			s->err = 1;
		s->o = NULL;
	}
}

/* Processes are written in parallel: into their own files (per-rank layout), or into temporary
 * files concatenated in order (one file; every chunk but the first starts with a comma). */
struct ch_pool {
	const struct xm_job *x;
	const char *dir;
	FILE **tmp;
	uint64_t *recs, base;
	int *err, single_rank;
	size_t next, first;
	pthread_mutex_t mu;
};

static void *ch_worker(void *arg)
{
	struct ch_pool *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		size_t r = p->next++;
		pthread_mutex_unlock(&p->mu);
		if (r >= xm_nranks(p->x))
			return NULL;
		if (!xm_rank(p->x, r)->ok)
			continue;
		struct ch s = {.o = p->dir ? NULL : p->tmp[r],
		               .dir = p->dir,
		               .base = p->base,
		               .single_rank = p->single_rank,
		               .nev = !p->dir && r != p->first};
		struct xe_sink sink = {
		    .ctx = &s, .rank = ch_rank, .ev = ch_ev, .rank_end = ch_rank_end};
		if (xe_stream_rank(p->x, &sink, r, &p->recs[r]) != 0)
			p->err[r] = 1;
		if (s.err || (s.o && fflush(s.o) != 0))
			p->err[r] = 2;
	}
}

int xe_chrome(const struct xm_job *x, FILE *o, const char *out_dir, uint64_t *records)
{
	struct ch s = {.o = o, .dir = out_dir};
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
	}
	struct ch_pool pool = {.x = x,
	                       .dir = out_dir,
	                       .base = t0,
	                       .single_rank = s.single_rank,
	                       .first = first,
	                       .tmp = calloc(n + 1, sizeof(FILE *)),
	                       .recs = calloc(n + 1, sizeof(uint64_t)),
	                       .err = calloc(n + 1, sizeof(int))};
	int rc = 0;
	*records = 0;
	if (!pool.tmp || !pool.recs || !pool.err) {
		fprintf(stderr, "nvlprof: export: out of memory\n");
		rc = -1;
	}
	for (size_t r = 0; !rc && !out_dir && r < n; r++)
		if (xm_rank(x, r)->ok && !(pool.tmp[r] = tmpfile())) {
			fprintf(stderr, "nvlprof: export: cannot create a temporary file\n");
			rc = -1;
		}
	if (!rc) {
		pthread_mutex_init(&pool.mu, NULL);
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		size_t nt = ncpu > 0 && (size_t)ncpu < n ? (size_t)ncpu : n;
		if (nt > 64)
			nt = 64;
		nvlp_run_parallel(ch_worker, &pool, nt);
		pthread_mutex_destroy(&pool.mu);
		char *buf = out_dir ? NULL : malloc(1 << 20);
		for (size_t r = 0; r < n; r++) {
			*records += pool.recs[r];
			if (pool.err[r] == 1)
				rc = -1;
			else if (pool.err[r] == 2)
				s.err = 1;
			if (!pool.tmp[r] || !buf)
				continue;
			rewind(pool.tmp[r]);
			size_t k;
			while ((k = fread(buf, 1, 1 << 20, pool.tmp[r])) > 0)
				if (fwrite(buf, 1, k, o) != k)
					s.err = 1;
		}
		if (!out_dir && !buf)
			rc = -1;
		free(buf);
	}
	for (size_t r = 0; pool.tmp && r < n; r++)
		if (pool.tmp[r])
			fclose(pool.tmp[r]);
	free(pool.tmp);
	free(pool.recs);
	free(pool.err);
	if (!out_dir)
		close_file(&s);
	if (s.err && !rc)
		fprintf(stderr, "nvlprof: export: write error (chrome)\n");
	return rc || s.err ? -1 : 0;
}

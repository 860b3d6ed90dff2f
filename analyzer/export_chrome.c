/* export_chrome.c: the Chrome/Kineto JSON sink, laid out as torch.profiler writes it so that
 * HTA's loaders take it: distributedInfo.rank, baseTimeNanoseconds, traceEvents (ph X) with cat
 * kernel / gpu_memcpy / cuda_runtime / cpu_op / user_annotation, args.stream, args.correlation
 * and the communication args of Kineto's record_param_comms. */
#include <errno.h>  /* errno */
#include <stdarg.h> /* va_list */
#include <stdlib.h> /* malloc */
#include <string.h> /* strerror */

#include "export.h"
#include "json.h" /* jw_quote */
#include "nvlp_trace.h"

struct ch {
	/* output: a buffer flushed to f (the one file's header and tail, a per-rank file) or
	 * through the parallel writer (a process's part of the one file) */
	char *b;
	size_t n;
	FILE *f;
	struct xo *xo;
	size_t part;
	const char *dir; /* per-rank files into this directory, NULL: one file */
	int err, nev, single_rank;
	uint64_t base; /* job time of ts 0 */
	uint64_t tid0; /* first NCCL thread of the process: where Step#N go */
	int pid;
	struct kn { /* per kernel name id: the name as written (NULL not yet made) */
		char **v;
		size_t n;
	} kn;
};

/* Formatting by hand into a buffer: stdio's per-call cost (fputs' strlen, fwrite's locking and
 * copying) was most of the export's time */
enum { CH_BUF = 1 << 16 };
static void ch_flush(struct ch *s)
{
	if (s->n && (s->xo                                 ? xo_write(s->xo, s->part, s->b, s->n)
	             : fwrite(s->b, 1, s->n, s->f) != s->n ? -1
	                                                   : 0) != 0)
		s->err = 1;
	s->n = 0;
}
static inline char *room(struct ch *s, size_t need) /* need <= CH_BUF */
{
	if (__builtin_expect(s->n + need > CH_BUF, 0))
		ch_flush(s);
	return s->b + s->n;
}
static void put_long(struct ch *s, const char *t, size_t len) /* past the buffer */
{
	ch_flush(s);
	if (s->xo ? xo_write(s->xo, s->part, t, len) != 0 : fwrite(t, 1, len, s->f) != len)
		s->err = 1;
}
static inline void put_mem(struct ch *s, const char *t, size_t len)
{
	if (len > CH_BUF / 2) {
		put_long(s, t, len);
		return;
	}
	memcpy(room(s, len), t, len); /* a literal's constant length: inlined */
	s->n += len;
}
#define PUT_LIT(s, lit) put_mem(s, lit, sizeof lit - 1)
static inline void put_c(struct ch *s, char c)
{
	*room(s, 1) = c;
	s->n++;
}
static void put_s(struct ch *s, const char *t)
{
	put_mem(s, t, strlen(t));
}
static inline void put_u(struct ch *s, uint64_t v) /* two digits a step */
{
	static const char d2[] =
	    "00010203040506070809101112131415161718192021222324252627282930313233"
	    "34353637383940414243444546474849505152535455565758596061626364656667"
	    "6869707172737475767778798081828384858687888990919293949596979899";
	char b[24];
	int i = 24;
	while (v >= 100) {
		unsigned k = (unsigned)(v % 100) * 2;
		v /= 100;
		b[--i] = d2[k + 1];
		b[--i] = d2[k];
	}
	if (v >= 10) {
		b[--i] = d2[v * 2 + 1];
		b[--i] = d2[v * 2];
	} else
		b[--i] = (char)('0' + v);
	char *o = room(s, 24);
	memcpy(o, b + i, (size_t)(24 - i));
	s->n += (size_t)(24 - i);
}
static inline void put_i(struct ch *s, int64_t v)
{
	if (v < 0) {
		put_c(s, '-');
		put_u(s, (uint64_t)0 - (uint64_t)v);
	} else
		put_u(s, (uint64_t)v);
}
static inline void put_milli(struct ch *s, uint64_t v) /* v / 1000 with 3 decimals */
{
	put_u(s, v / 1000);
	char *o = room(s, 4);
	o[0] = '.';
	o[1] = (char)('0' + v / 100 % 10);
	o[2] = (char)('0' + v / 10 % 10);
	o[3] = (char)('0' + v % 10);
	s->n += 4;
}
static inline void put_fix3(struct ch *s, double v) /* v >= 0, 3 decimals */
{
	put_milli(s, v > 0 && v < 1e15 ? (uint64_t)(v * 1000 + 0.5) : 0);
}
static void put_hex16(struct ch *s, uint64_t v) /* %016llx */
{
	char *o = room(s, 16);
	for (int i = 15; i >= 0; i--, v >>= 4)
		o[i] = "0123456789abcdef"[v & 15];
	s->n += 16;
}
static void put_f(struct ch *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_f(struct ch *s, const char *fmt, ...) /* the rare lines */
{
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	if (k > 0)
		put_mem(s, b, (size_t)k < sizeof b ? (size_t)k : sizeof b - 1);
}
static char *quote_dup(const char *text);
static void put_q(struct ch *s, const char *t) /* a JSON string */
{
	const char *c = t;
	for (; *c; c++)
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
			char *m = quote_dup(t); /* the rare string to escape */
			if (m)
				put_s(s, m);
			else
				s->err = 1;
			free(m);
			return;
		}
	put_c(s, '"');
	put_mem(s, t, (size_t)(c - t));
	put_c(s, '"');
}

/* µs with ns precision, relative to the base, as Kineto writes them */
#define ts_us(s, key, t) (PUT_LIT(s, ",\"" key "\":"), put_milli(s, t))

/* An event's opening up to ts; qlen > 0: name is already a JSON string of that length */
static void head_q(struct ch *s, const char *ph, const char *cat, const char *name, size_t qlen,
                   int pid, uint64_t tid, uint64_t ts, uint64_t base)
{
	if (s->nev++)
		PUT_LIT(s, ",\n{\"ph\":\"");
	else
		PUT_LIT(s, "\n{\"ph\":\"");
	put_s(s, ph);
	PUT_LIT(s, "\",\"cat\":\"");
	put_s(s, cat);
	PUT_LIT(s, "\",\"name\":");
	if (qlen)
		put_mem(s, name, qlen);
	else
		put_q(s, name);
	PUT_LIT(s, ",\"pid\":");
	put_i(s, pid);
	PUT_LIT(s, ",\"tid\":");
	put_u(s, tid);
	ts_us(s, "ts", ts >= base ? ts - base : 0);
}
static void head(struct ch *s, const char *ph, const char *cat, const char *name, int pid,
                 uint64_t tid, uint64_t ts, uint64_t base)
{
	head_q(s, ph, cat, name, 0, pid, tid, ts, base);
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

static void close_file(struct ch *s)
{
	PUT_LIT(s, "\n]}\n");
	ch_flush(s);
}

static void meta(struct ch *s, const char *what, int pid, uint64_t tid, const char *name)
{
	put_s(s, s->nev++ ? ",\n{" : "\n{");
	put_f(s, "\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%llu,\"args\":{\"name\":", what,
	      pid, (unsigned long long)tid);
	put_q(s, name);
	PUT_LIT(s, "}}");
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
		if (!(s->f = fopen(path, "w"))) {
			fprintf(stderr, "nvlprof: export: %s: cannot write: %s\n", path,
			        strerror(errno));
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
}

static int gpu_pid(struct ch *s, int64_t dev)
{
	/* Kineto gives each GPU its own pid (the device index); in one file holding several
	 * processes the GPU pids are kept apart from each other and from host pids (unsigned: a
	 * corrupt trace's pid near INT_MAX wraps instead of overflowing) */
	return s->dir || s->single_rank ? (int)dev
	                                : (int)((unsigned)s->pid * 100u + 100000000u + (unsigned)dev);
}

/* text as a JSON string in a fresh allocation (the analyzer's one quoting), NULL out of memory */
static char *quote_dup(const char *text)
{
	char *m = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&m, &len);
	if (!f)
		return NULL;
	jw_quote(f, text);
	if (fclose(f) != 0) {
		free(m);
		return NULL;
	}
	return m;
}

/* The kernel's name as written. Tools look for the nccl prefix: "_Z39ncclDevKernel_AllReduce_..."
 * becomes "ncclDevKernel_AllReduce_..." (its identifier); another kernel that ran NCCL calls gets
 * "nccl:" before its name. Kept quoted per name id: kernels repeat a few names millions of times.
 * @return the quoted name, or NULL with the plain name in *plain (not kept) */
static const char *kernel_name(struct ch *s, uint64_t id, const char *nm, int ran_calls,
                               char buf[300], const char **plain)
{
	size_t slot = (size_t)id * 2 + (ran_calls != 0);
	if (slot < s->kn.n && s->kn.v[slot])
		return s->kn.v[slot];
	const char *p = strstr(nm, "nccl");
	if (p && p != nm) {
		size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                     "0123456789_");
		char *end;
		unsigned long len = nm[0] == '_' && nm[1] == 'Z' ? strtoul(nm + 2, &end, 10) : 0;
		if (len && end == p && len <= n) /* Itanium mangling: _Z<len><name>... */
			n = len;
		snprintf(buf, 300, "%.*s", (int)(n < 300 ? n : 299), p);
		*plain = buf;
	} else if (ran_calls && !p) {
		snprintf(buf, 300, "nccl:%s", nm);
		*plain = buf;
	} else
		*plain = nm;
	if (id >= (1u << 24)) /* ids are small and dense (STRING records, per file) */
		return NULL;
	if (slot >= s->kn.n) {
		size_t n = s->kn.n ? s->kn.n : 64;
		while (n <= slot)
			n *= 2;
		char **v = realloc(s->kn.v, n * sizeof *v);
		if (!v)
			return NULL;
		memset(v + s->kn.n, 0, (n - s->kn.n) * sizeof *v);
		s->kn.v = v;
		s->kn.n = n;
	}
	return s->kn.v[slot] = quote_dup(*plain);
}

static void put_dim3(struct ch *s, uint64_t x, uint64_t y, uint64_t z) /* [x,y,z] */
{
	put_c(s, '[');
	put_u(s, x);
	put_c(s, ',');
	put_u(s, y);
	put_c(s, ',');
	put_u(s, z);
	put_c(s, ']');
}

/* A GPU event's dur and first args (Kineto's: device, stream, correlation), args left open */
static void gpu_args(struct ch *s, uint64_t dur, int64_t dev, uint64_t stream, uint64_t corr)
{
	ts_us(s, "dur", dur);
	PUT_LIT(s, ",\"args\":{\"device\":");
	put_i(s, dev);
	PUT_LIT(s, ",\"stream\":");
	put_u(s, stream);
	PUT_LIT(s, ",\"correlation\":");
	put_u(s, corr);
}

/* A matched call's record_param_comms args, as Kineto names them. */
static void ch_comm_args(struct ch *s, const struct xe_ev *e, const struct nvlp_rec_nccl *n)
{
	char cls = nvlp_nccl_fn_class((unsigned)n->fn);
	unsigned sz = nvlp_nccl_dtype_size((int)(int64_t)n->dtype);
	uint64_t nel = n->count, out = n->count;
	if (n->fn == NVLP_NCCL_ALL_GATHER)
		out = n->count * (n->nranks ? n->nranks : 1);
	else if (n->fn == NVLP_NCCL_REDUCE_SCATTER)
		nel = n->count * (n->nranks ? n->nranks : 1);
	PUT_LIT(s, ",\"Collective name\":\"");
	put_s(s, xm_fn_coll((int)n->fn));
	PUT_LIT(s, "\",\"In msg nelems\":");
	put_u(s, nel);
	PUT_LIT(s, ",\"Out msg nelems\":");
	put_u(s, out);
	PUT_LIT(s, ",\"In msg size\":");
	put_u(s, nel * sz);
	PUT_LIT(s, ",\"Group size\":");
	put_i(s, (int64_t)n->nranks);
	PUT_LIT(s, ",\"dtype\":\"");
	put_s(s, nvlp_nccl_dtype_name((int)(int64_t)n->dtype));
	PUT_LIT(s, "\",\"Process Group Name\":\"");
	put_i(s, e->comm);
	PUT_LIT(s, "\",\"Process Group Description\":\"comm ");
	put_hex16(s, n->comm);
	put_c(s, '"');
	PUT_LIT(s, ",\"Rank\":");
	put_i(s, (int64_t)n->rank);
	PUT_LIT(s, ",\"Seq\":");
	put_u(s, n->seq);
	if (cls == 'P') {
		PUT_LIT(s, ",\"Peer\":");
		put_i(s, (int64_t)n->peer);
	}
}

/* An NCCL call, and the start of its flow to the kernel that ran it. */
static void ch_nccl(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_nccl *n = e->f;
	if (!s->tid0)
		s->tid0 = n->tid;
	/* the host call as Kineto's record_param_comms cpu_op */
	head(s, "X", "cpu_op", e->name, s->pid, n->tid, e->ts, s->base);
	ts_us(s, "dur", e->dur);
	PUT_LIT(s, ",\"args\":{\"External id\":");
	put_i(s, e->call >= 0 ? e->call + 1 : 0);
	if (e->call >= 0)
		ch_comm_args(s, e, n);
	PUT_LIT(s, "}}");
	if (e->call >= 0 && e->has_gpu) {
		head(s, "s", "ac2g", "ac2g", s->pid, n->tid, e->ts, s->base);
		PUT_LIT(s, ",\"id\":");
		put_u(s, xe_flow_call(e->rank, e->call));
		put_c(s, '}');
	}
}

/* A CUDA runtime call that moves or places memory. */
static void ch_api(struct ch *s, const struct xe_ev *e)
{
	uint64_t tid = 0, corr = 0;
	if (e->type == XE_COPY) {
		tid = ((const struct nvlp_rec_copy *)e->f)->tid;
		corr = ((const struct nvlp_rec_copy *)e->f)->call_id;
	} else if (e->type == XE_MANAGED)
		tid = ((const struct nvlp_rec_managed *)e->f)->tid;
	else
		tid = ((const struct nvlp_rec_peer *)e->f)->tid;
	head(s, "X", "cuda_runtime", e->name, s->pid, tid, e->ts, s->base);
	ts_us(s, "dur", e->dur);
	put_f(s, ",\"args\":{\"correlation\":%llu", (unsigned long long)corr);
	if (e->type == XE_COPY)
		put_f(s, ",\"bytes\":%llu",
		      (unsigned long long)((const struct nvlp_rec_copy *)e->f)->bytes);
	PUT_LIT(s, "}}");
}

/* A kernel, with the ends of the flows from the NCCL calls it ran. */
static void ch_kernel(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_kernel *k = e->f;
	char buf[300];
	const char *raw = "";
	const char *q = kernel_name(s, k->name, e->name[0] ? e->name : "kernel",
	                            e->ncalls != 0, buf, &raw);
	int pid = gpu_pid(s, (int64_t)k->device);
	head_q(s, "X", "kernel", q ? q : raw, q ? strlen(q) : 0, pid, k->stream, e->ts,
	       s->base);
	gpu_args(s, e->dur, (int64_t)k->device, k->stream, k->correlation);
	PUT_LIT(s, ",\"External id\":");
	put_i(s, e->ncalls ? e->calls[0] + 1 : 0);
	PUT_LIT(s, ",\"grid\":");
	put_dim3(s, k->grid_x, k->grid_y, k->grid_z);
	PUT_LIT(s, ",\"block\":");
	put_dim3(s, k->block_x, k->block_y, k->block_z);
	PUT_LIT(s, "}}");
	for (size_t i = 0; i < e->ncalls; i++) {
		head(s, "f", "ac2g", "ac2g", pid, k->stream, e->ts, s->base);
		PUT_LIT(s, ",\"bp\":\"e\",\"id\":");
		put_u(s, xe_flow_call(e->rank, e->calls[i]));
		put_c(s, '}');
	}
}

/* A GPU copy. */
static void ch_gpucopy(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_gpucopy *c = e->f;
	char nm[64];
	snprintf(nm, sizeof nm, "Memcpy %lld -> %lld", (long long)(int64_t)c->src_device,
	         (long long)(int64_t)c->dst_device);
	head(s, "X", "gpu_memcpy", nm, gpu_pid(s, (int64_t)c->device), c->stream, e->ts,
	     s->base);
	gpu_args(s, e->dur, (int64_t)c->device, c->stream,
	         c->call_id ? c->call_id : c->correlation);
	PUT_LIT(s, ",\"bytes\":");
	put_u(s, c->bytes);
	PUT_LIT(s, ",\"copy_kind\":");
	put_u(s, c->copy_kind);
	PUT_LIT(s, "}}");
}

/* A link counter sample: a counter track per GPU, in GB/s. */
static void ch_sample(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_linksample *l = e->f;
	if (!e->dur)
		return;
	static const char *const gpu_nm[] = {
	    "GPU 0 link GB/s", "GPU 1 link GB/s", "GPU 2 link GB/s", "GPU 3 link GB/s",
	    "GPU 4 link GB/s", "GPU 5 link GB/s", "GPU 6 link GB/s", "GPU 7 link GB/s"};
	char nm[48];
	int64_t dv = (int64_t)l->device;
	if (dv < 0 || dv >= 8)
		snprintf(nm, sizeof nm, "GPU %lld link GB/s", (long long)dv);
	head(s, "C", "link", dv >= 0 && dv < 8 ? gpu_nm[dv] : nm, s->pid, 0, e->ts,
	     s->base);
	PUT_LIT(s, ",\"args\":{\"NVLink\":");
	put_fix3(s, (double)(l->nvl_tx + l->nvl_rx) / (double)e->dur);
	PUT_LIT(s, ",\"PCIe\":");
	put_fix3(s, (double)(l->pcie_rd + l->pcie_wr) / (double)e->dur);
	PUT_LIT(s, "}}");
}

/* A unified memory migration (the byte counters; faults are not shown). */
static void ch_um(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_um *u = e->f;
	if (u->counter < 1 || (u->counter > 2 && u->counter != 8))
		return;
	head(s, "X", "um_migration",
	     u->counter == 2   ? "UM DtoH"
	     : u->counter == 1 ? "UM HtoD"
	                       : "UM DtoD",
	     s->pid, 1, e->ts, s->base);
	ts_us(s, "dur", e->dur);
	put_f(s, ",\"args\":{\"bytes\":%llu,\"address\":%llu,\"allocation\":%ld}}",
	      (unsigned long long)u->value, (unsigned long long)u->address, e->alloc);
}

static void ch_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	(void)x;
	struct ch *s = ctx;
	if (!s->f && !s->xo)
		return;
	switch (e->type) {
	case XE_NCCL:
		ch_nccl(s, e);
		break;
	case XE_COPY:
	case XE_MANAGED:
	case XE_PEER:
		ch_api(s, e);
		break;
	case XE_KERNEL:
		ch_kernel(s, e);
		break;
	case XE_GPUCOPY:
		ch_gpucopy(s, e);
		break;
	case XE_SAMPLE:
		ch_sample(s, e);
		break;
	case XE_UM:
		ch_um(s, e);
		break;
	}
}

/* After a process: its steps (Step#N on its first NCCL thread) and its findings. Not named
 * ProfilerStep#N: with two of those HTA keeps only the GPU kernels whose correlation matches a CPU
 * launch event inside the steps, and the shim records no kernel launches, so HTA would drop every
 * kernel (its breakdowns came out empty); without them it analyses all kernels. */
static void tail(struct ch *s, const struct xm_job *x, size_t r)
{
	uint64_t s0, len;
	int n = xm_steps(x, &s0, &len);
	int pid = xm_rank(x, r)->pid > 0 ? xm_rank(x, r)->pid : (int)r + 1;
	for (int k = 0; k < n; k++) {
		char nm[32];
		snprintf(nm, sizeof nm, "Step#%d", k);
		head(s, "X", "user_annotation", nm, pid, s->tid0, s0 + (uint64_t)k * len, s->base);
		ts_us(s, "dur", len);
		PUT_LIT(s, "}");
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
		put_f(s, ",\"s\":\"%s\",\"args\":{\"severity\":\"%s\",\"advice\":",
		      f.root_rank < 0 ? "g" : "p", f.sev);
		put_q(s, f.advice);
		PUT_LIT(s, "}}");
	}
}

static void free_names(struct ch *s)
{
	for (size_t i = 0; i < s->kn.n; i++)
		free(s->kn.v[i]);
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
	free_names(s); /* name ids are per trace file */
	if (s->dir) {
		close_file(s);
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
};

static int ch_part(void *ctx, size_t r, struct xo *o, uint64_t *recs)
{
	const struct xm_job *x = ((void **)ctx)[0];
	const struct ch_job *j = ((void **)ctx)[1];
	struct ch s = {.b = malloc(CH_BUF),
	               .xo = j->dir ? NULL : o,
	               .part = r,
	               .dir = j->dir,
	               .base = j->base,
	               .single_rank = j->single_rank,
	               .nev = !j->dir && r != j->first};
	if (!s.b) {
		fprintf(stderr, "nvlprof: export: out of memory\n");
		return 1;
	}
	struct xe_sink sink = {.ctx = &s, .rank = ch_rank, .ev = ch_ev, .rank_end = ch_rank_end};
	int rc = xe_stream_rank(x, &sink, r, recs) != 0;
	ch_flush(&s);
	if (s.f) /* a trace failed in the middle: its file still gets closed */
		fclose(s.f);
	free_names(&s);
	free(s.b);
	return rc | (s.err ? 2 : 0);
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
		close_file(&s);
	if (s.err && !rc)
		fprintf(stderr, "nvlprof: export: write error (chrome)\n");
	return rc || s.err ? -1 : 0;
}

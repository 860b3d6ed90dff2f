/* export_chrome.c: the Chrome/Kineto JSON sink, laid out as torch.profiler writes it so that
 * HTA's loaders take it: distributedInfo.rank, baseTimeNanoseconds, traceEvents (ph X) with cat
 * kernel / gpu_memcpy / cuda_runtime / cpu_op / user_annotation, args.stream, args.correlation
 * and the communication args of Kineto's record_param_comms. */
#include <errno.h>  /* errno */
#include <stdarg.h> /* va_list */
#include <stdlib.h> /* malloc */
#include <string.h> /* strerror */

#include "util/diag.h"
#include "out/export.h"
#include "out/export_chrome.h"
#include "util/json.h" /* jw_quote */
#include "nvlp_trace.h"

/* A quoted name kept (a kernel name per name id, an NCCL or CUDA function name per fn) */
struct qn {
	char *q; /* the JSON string, NULL not made */
	size_t len;
	const char *key; /* the name it was made from (function names: static tables) */
};

struct devs { /* a process's GPUs as its DEVICE records give them (Kineto's deviceProperties) */
	int n;
	struct nvlp_rec_device d[32];
	char name[32][128];
};

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
	struct kn { /* per kernel name id: the name as written */
		struct qn *v;
		size_t n;
	} kn;
	struct qn fn[2][64]; /* NCCL [0] and CUDA [1] function names, per fn */
	/* Fragments kept formatted for the values they were made from: most events repeat the
	 * pid and tid, a kernel its device, stream and launch shape, a call its communicator */
	struct pt { /* `,"pid":P,"tid":T,"ts":` */
		int pid;
		uint64_t tid;
		size_t len; /* 0: not made */
		char t[64];
	} pt[16];
	struct kf { /* `,"args":{"device":D,"stream":S,"correlation":` and grid, block */
		int64_t dev;
		uint64_t stream, dim[6];
		size_t alen, glen; /* 0: not made */
		char a[96], g[160];
	} kf[8];
	struct fl { /* a flow id, written at both of its ends */
		long call;
		size_t rank, len; /* len 0: not made */
		char t[24];
	} fl[64];
	struct cf { /* `,"Group size":N,"dtype":"T",...,"Rank":R,"Seq":` */
		uint64_t nranks, dtype, hash, rank;
		int comm;
		size_t len; /* 0: not made */
		char t[224];
	} cf;
	struct xm_names *names; /* kernel names demangled */
	struct seen { /* every (pid, tid) written, for their M events; open addressing */
		int pid, used;
		uint64_t tid;
		size_t ord; /* order first seen */
	} * seen;
	size_t nseen, capseen;
	struct gp { /* GPU pids written and their device */
		int pid;
		int64_t dev;
	} gp[64];
	int ngp;
	struct devs *devs; /* DEVICE records, for deviceProperties (NULL: none kept) */
	size_t rank_ix;    /* the process being written */
};

/* Formatting by hand into a buffer: stdio's per-call cost (fputs' strlen, fwrite's locking and
 * copying) was most of the export's time. An event is written through a local pointer o into
 * room reserved once (more()): stores through the buffer's char pointer could alias s->n, and
 * a check and update of s->n per field cost more than the digits (issue 17: 341-409 CPU ns per
 * record before). */
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
/* o: the write position; at least need bytes of room from the returned one */
static inline char *more(struct ch *s, char *o, size_t need)
{
	if (__builtin_expect((size_t)(o - s->b) + need > CH_BUF, 0)) {
		s->n = (size_t)(o - s->b);
		ch_flush(s);
		return s->b;
	}
	return o;
}
static inline void done(struct ch *s, char *o)
{
	s->n = (size_t)(o - s->b);
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
/* text of len bytes at o, and afterwards room for after more. @return the write position */
static inline char *w_mem(struct ch *s, char *o, const char *t, size_t len, size_t after)
{
	if (__builtin_expect(len + after <= CH_BUF / 2, 1)) {
		o = more(s, o, len + after);
		memcpy(o, t, len);
		return o + len;
	}
	done(s, o);
	put_mem(s, t, len);
	return room(s, after);
}
#define W_LIT(o, lit) (memcpy(o, lit, sizeof lit - 1), (o) += sizeof lit - 1)

/* The number writers: each writes at o (room reserved by the caller) and returns past it. */
static const char d2[] = "00010203040506070809101112131415161718192021222324252627282930313233"
                         "34353637383940414243444546474849505152535455565758596061626364656667"
                         "6869707172737475767778798081828384858687888990919293949596979899";
static inline int ndigits(uint64_t v)
{
	static const uint64_t p10[20] = {1ull,
	                                 10ull,
	                                 100ull,
	                                 1000ull,
	                                 10000ull,
	                                 100000ull,
	                                 1000000ull,
	                                 10000000ull,
	                                 100000000ull,
	                                 1000000000ull,
	                                 10000000000ull,
	                                 100000000000ull,
	                                 1000000000000ull,
	                                 10000000000000ull,
	                                 100000000000000ull,
	                                 1000000000000000ull,
	                                 10000000000000000ull,
	                                 100000000000000000ull,
	                                 1000000000000000000ull,
	                                 10000000000000000000ull};
	/* floor(log2(v)+1) * 1233/4096 is log10 rounded down or one short */
	int t = (64 - __builtin_clzll(v | 1)) * 1233 >> 12;
	return t + 1 - ((v | 1) < p10[t]);
}
static inline char *w_u(char *o, uint64_t v) /* %llu, two digits a step */
{
	char *e = o + ndigits(v), *p = e;
	while (v >> 32) { /* 8 digits at a time in 32 bits: cheaper division (flow ids) */
		uint64_t q = v / 100000000;
		uint32_t r = (uint32_t)(v - q * 100000000);
		for (int i = 0; i < 4; i++, r /= 100) {
			p -= 2;
			memcpy(p, d2 + (r % 100) * 2, 2);
		}
		v = q;
	}
	uint32_t u = (uint32_t)v; /* most numbers (times in µs, ids) start here */
	while (u >= 100) {
		unsigned k = (u % 100) * 2;
		u /= 100;
		p -= 2;
		memcpy(p, d2 + k, 2);
	}
	if (u >= 10)
		memcpy(p - 2, d2 + u * 2, 2);
	else
		p[-1] = (char)('0' + u);
	return e;
}
static inline char *w_i(char *o, int64_t v) /* %lld */
{
	if (v < 0) {
		*o++ = '-';
		return w_u(o, (uint64_t)0 - (uint64_t)v);
	}
	return w_u(o, (uint64_t)v);
}
static inline char *w_milli(char *o, uint64_t v) /* v / 1000 with 3 decimals: µs of ns */
{
	uint64_t q = v / 1000;
	unsigned r = (unsigned)(v - q * 1000);
	o = w_u(o, q);
	o[0] = '.';
	o[1] = (char)('0' + r / 100);
	memcpy(o + 2, d2 + (r % 100) * 2, 2);
	return o + 4;
}
static inline char *w_fix3(char *o, double v) /* v >= 0 with 3 decimals, else 0.000 */
{
	return w_milli(o, v > 0 && v < 1e15 ? (uint64_t)(v * 1000 + 0.5) : 0);
}
static inline char *w_hex16(char *o, uint64_t v) /* %016llx */
{
	for (int i = 15; i >= 0; i--, v >>= 4)
		o[i] = "0123456789abcdef"[v & 15];
	return o + 16;
}
enum { W_NUM = 24 }; /* the most one number writer writes */
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
/* put_q at o, with room for after more bytes afterwards */
static char *w_q(struct ch *s, char *o, const char *t, size_t after)
{
	done(s, o);
	put_q(s, t);
	return room(s, after);
}

/* An event's opening: the comma before every event but a part's first, then lit (its ph, cat
 * and "name":), with room for need more bytes */
static inline char *ev_open(struct ch *s, const char *lit, size_t len, size_t need)
{
	char *o = room(s, len + 1 + need);
	*o = ',';
	o += s->nev++ != 0;
	memcpy(o, lit, len);
	return o + len;
}
#define EV_LIT(ph, cat) "\n{\"ph\":\"" ph "\",\"cat\":\"" cat "\",\"name\":"
#define EV_OPEN(s, ph, cat, need) ev_open(s, EV_LIT(ph, cat), sizeof EV_LIT(ph, cat) - 1, need)
enum { EV_ROOM = 512 }; /* an event's bytes but its name and the comm args' names */

/* µs with ns precision, relative to the base, as Kineto writes them */
#define W_US(o, key, t) (W_LIT(o, ",\"" key "\":"), (o) = w_milli(o, t))

/* An event's pid, tid and ts, after its name (64 bytes of room besides the ts) */
/* (pid, tid) written: kept for its process_name/thread_name M events (a table full or out of
 * memory: that thread goes unnamed) */
static void note_thread(struct ch *s, int pid, uint64_t tid)
{
	if (2 * (s->nseen + 1) > s->capseen) {
		size_t cap = s->capseen ? 2 * s->capseen : 64;
		struct seen *v = cap <= (1u << 20) ? calloc(cap, sizeof *v) : NULL;
		if (!v)
			return;
		for (size_t i = 0; i < s->capseen; i++)
			if (s->seen[i].used) {
				size_t j = (s->seen[i].tid * 31 + (uint64_t)s->seen[i].pid) & (cap - 1);
				while (v[j].used)
					j = (j + 1) & (cap - 1);
				v[j] = s->seen[i];
			}
		free(s->seen);
		s->seen = v;
		s->capseen = cap;
	}
	size_t j = (tid * 31 + (uint64_t)pid) & (s->capseen - 1);
	while (s->seen[j].used) {
		if (s->seen[j].pid == pid && s->seen[j].tid == tid)
			return;
		j = (j + 1) & (s->capseen - 1);
	}
	s->seen[j] = (struct seen){.pid = pid, .used = 1, .tid = tid, .ord = s->nseen++};
}

static inline char *w_where(struct ch *s, char *o, int pid, uint64_t tid, uint64_t ts,
                            uint64_t base)
{
	struct pt *f = &s->pt[(tid ^ (uint64_t)pid) & 15];
	if (!f->len || f->pid != pid || f->tid != tid) {
		note_thread(s, pid, tid);
		char *p = f->t;
		W_LIT(p, ",\"pid\":");
		p = w_i(p, pid);
		W_LIT(p, ",\"tid\":");
		p = w_u(p, tid);
		W_LIT(p, ",\"ts\":");
		f->len = (size_t)(p - f->t);
		f->pid = pid;
		f->tid = tid;
	}
	memcpy(o, f->t, sizeof f->t); /* a constant length: one copy, no call */
	return w_milli(o + f->len, ts >= base ? ts - base : 0);
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
			put_f(s, "%s\n{\"id\":%lld,\"name\":", i ? "," : "", (long long)(int64_t)v->device);
			put_q(s, d->name[i]);
			put_f(s,
			      ",\"totalGlobalMem\":%llu,\"computeMajor\":%llu,\"computeMinor\":%llu,"
			      "\"numSms\":%llu,\"pciDomainID\":%llu,\"pciBusID\":%llu,\"pciDeviceID\":%llu}",
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

/* A DEVICE record: kept once per device id (the last one wins) */
static void ch_device(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_device *v = e->f;
	if (!s->devs)
		return;
	int k = 0;
	while (k < s->devs->n && s->devs->d[k].device != v->device)
		k++;
	if (k == 32)
		return;
	s->devs->n += k == s->devs->n;
	s->devs->d[k] = *v;
	snprintf(s->devs->name[k], sizeof s->devs->name[k], "%s", e->name);
}

static void meta_sort(struct ch *s, const char *what, int pid, uint64_t tid, long long ix)
{
	put_s(s, s->nev++ ? ",\n{" : "\n{");
	put_f(s, "\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%llu,\"args\":{\"sort_index\":%lld}}",
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
	an_diag(
	        "nvlprof: export: %s and %s are both %s %d: the second is written as %s\n",
	        xm_rank(x, first)->path ? xm_rank(x, first)->path : "?", R->path ? R->path : "?", what,
	        id, path);
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
			an_diag("nvlprof: export: %s: cannot write: %s\n", path,
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
	s->rank_ix = r;
	meta_sort(s, "process_sort_index", s->pid, 0, (long long)r * 256);
}

static int gpu_pid(struct ch *s, int64_t dev)
{
	/* Kineto gives each GPU its own pid (the device index); in one file holding several
	 * processes the GPU pids are kept apart from each other and from host pids (unsigned: a
	 * corrupt trace's pid near INT_MAX wraps instead of overflowing) */
	int pid = s->dir || s->single_rank
	              ? (int)dev
	              : (int)((unsigned)s->pid * 100u + 100000000u + (unsigned)dev);
	if (!s->ngp || s->gp[s->ngp - 1].pid != pid) { /* kept for its process_name */
		int k = 0;
		while (k < s->ngp && s->gp[k].pid != pid)
			k++;
		if (k == s->ngp && k < 64)
			s->gp[s->ngp++] = (struct gp){pid, dev};
	}
	return pid;
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

/* text as put_q writes it, kept in q (NULL out of memory) */
static void qn_make(struct qn *q, const char *text)
{
	const char *c = text;
	while (*c && *c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
		c++;
	free(q->q);
	q->key = text;
	if (*c) { /* the rare string to escape */
		q->q = quote_dup(text);
		q->len = q->q ? strlen(q->q) : 0;
		return;
	}
	size_t n = (size_t)(c - text);
	if ((q->q = malloc(n + 2))) {
		q->q[0] = '"';
		memcpy(q->q + 1, text, n);
		q->q[n + 1] = '"';
	}
	q->len = n + 2;
}

/* A function name (NCCL: t 0, CUDA: t 1) at o, quoted once per fn: the names come from the
 * format's static tables (export.c's ev_nccl, api_ev), so the pointer names the text */
static char *w_fn_name(struct ch *s, char *o, int t, uint64_t fn, const char *name)
{
	struct qn *q = fn < 64 ? &s->fn[t][fn] : NULL;
	if (q && q->key != name)
		qn_make(q, name);
	if (!q || !q->q)
		return w_q(s, o, name, EV_ROOM);
	return w_mem(s, o, q->q, q->len, EV_ROOM);
}

/* The kernel's name as written: demangled, as Kineto writes it ("_Z39ncclDevKernel_AllReduce_..."
 * becomes "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"). Tools
 * look for "nccl": another kernel that ran NCCL calls gets "nccl:" before its name. Kept quoted
 * per name id: kernels repeat a few names millions of times.
 * @return the quoted name, or NULL with the plain name in *plain (not kept) */
enum { KN_BUF = 2048 };
static const struct qn *kernel_name(struct ch *s, uint64_t id, const char *nm, int ran_calls,
                                    char buf[KN_BUF], const char **plain)
{
	size_t slot = (size_t)id * 2 + (ran_calls != 0);
	if (slot < s->kn.n && s->kn.v[slot].q)
		return &s->kn.v[slot];
	const char *full, *shortn;
	if (xm_kernel_names(s->names, nm, &full, &shortn))
		full = nm; /* out of memory: as recorded */
	if (ran_calls && !strstr(full, "nccl")) {
		snprintf(buf, KN_BUF, "nccl:%s", full);
		*plain = buf;
	} else
		*plain = full;
	/* ids are small and dense (STRING records, per file): up to 2^18 of them are cached (12 MB
	 * of slots at most); a corrupt trace's huge id is quoted per event, not given 800 MB */
	if (id >= (1u << 18))
		return NULL;
	if (slot >= s->kn.n) {
		size_t n = s->kn.n ? s->kn.n : 64;
		while (n <= slot)
			n *= 2;
		struct qn *v = realloc(s->kn.v, n * sizeof *v);
		if (!v)
			return NULL;
		memset(v + s->kn.n, 0, (n - s->kn.n) * sizeof *v);
		s->kn.v = v;
		s->kn.n = n;
	}
	struct qn *q = &s->kn.v[slot];
	/* always the analyzer's quoting, as before: kernel names were never put_q's */
	q->q = quote_dup(*plain);
	q->len = q->q ? strlen(q->q) : 0;
	return q->q ? q : NULL;
}

static inline char *w_dim3(char *o, uint64_t x, uint64_t y, uint64_t z) /* [x,y,z] */
{
	*o++ = '[';
	o = w_u(o, x);
	*o++ = ',';
	o = w_u(o, y);
	*o++ = ',';
	o = w_u(o, z);
	*o++ = ']';
	return o;
}

/* A GPU event's dur and first args (Kineto's: device, stream, correlation), args left open */
static inline char *w_gpu_args(char *o, uint64_t dur, int64_t dev, uint64_t stream, uint64_t corr)
{
	W_US(o, "dur", dur);
	W_LIT(o, ",\"args\":{\"device\":");
	o = w_i(o, dev);
	W_LIT(o, ",\"stream\":");
	o = w_u(o, stream);
	W_LIT(o, ",\"correlation\":");
	return w_u(o, corr);
}

/* A call's communicator args, up to "Seq": (ld + 190 bytes at most) */
static char *w_group(char *p, const struct nvlp_rec_nccl *n, const char *dt, size_t ld, int comm)
{
	W_LIT(p, ",\"Group size\":");
	p = w_i(p, (int64_t)n->nranks);
	W_LIT(p, ",\"dtype\":\"");
	memcpy(p, dt, ld);
	p += ld;
	W_LIT(p, "\",\"Process Group Name\":\"");
	p = w_i(p, comm);
	W_LIT(p, "\",\"Process Group Description\":\"comm ");
	p = w_hex16(p, n->comm);
	W_LIT(p, "\",\"Rank\":");
	p = w_i(p, (int64_t)n->rank);
	W_LIT(p, ",\"Seq\":");
	return p;
}

/* The flow id of the process's call k (24 bytes of room) */
static inline char *w_flow(struct ch *s, char *o, size_t rank, long k)
{
	struct fl *f = &s->fl[(unsigned long)k & 63];
	if (!f->len || f->call != k || f->rank != rank) {
		f->len = (size_t)(w_u(f->t, xe_flow_call(rank, k)) - f->t);
		f->call = k;
		f->rank = rank;
	}
	memcpy(o, f->t, sizeof f->t);
	return o + f->len;
}

/* A matched call's record_param_comms args, as Kineto names them. */
static char *w_comm_args(struct ch *s, char *o, const struct xe_ev *e,
                         const struct nvlp_rec_nccl *n)
{
	char cls = nvlp_nccl_fn_class((unsigned)n->fn);
	unsigned sz = nvlp_nccl_dtype_size((int)(int64_t)n->dtype);
	uint64_t nel = n->count, out = n->count;
	if (n->fn == NVLP_NCCL_ALL_GATHER)
		out = n->count * (n->nranks ? n->nranks : 1);
	else if (n->fn == NVLP_NCCL_REDUCE_SCATTER)
		nel = n->count * (n->nranks ? n->nranks : 1);
	const char *coll = xm_fn_coll((int)n->fn);
	const char *dt = nvlp_nccl_dtype_name((int)(int64_t)n->dtype);
	W_LIT(o, ",\"Collective name\":\"");
	o = w_mem(s, o, coll, strlen(coll), EV_ROOM);
	W_LIT(o, "\",\"In msg nelems\":");
	o = w_u(o, nel);
	W_LIT(o, ",\"Out msg nelems\":");
	o = w_u(o, out);
	W_LIT(o, ",\"In msg size\":");
	o = w_u(o, nel * sz);
	struct cf *f = &s->cf;
	size_t ld = strlen(dt);
	if (ld > 32) { /* not a name of the table: not kept */
		o = more(s, o, ld + EV_ROOM);
		o = w_u(w_group(o, n, dt, ld, e->comm), n->seq);
	} else {
		if (!f->len || f->nranks != n->nranks || f->dtype != n->dtype ||
		    f->hash != n->comm || f->rank != n->rank || f->comm != e->comm) {
			f->len = (size_t)(w_group(f->t, n, dt, ld, e->comm) - f->t);
			f->nranks = n->nranks;
			f->dtype = n->dtype;
			f->hash = n->comm;
			f->rank = n->rank;
			f->comm = e->comm;
		}
		memcpy(o, f->t, sizeof f->t);
		o = w_u(o + f->len, n->seq);
	}
	if (cls == 'P') {
		W_LIT(o, ",\"Peer\":");
		o = w_i(o, (int64_t)n->peer);
	}
	return o;
}

/* An NCCL call, and the start of its flow to the kernel that ran it. */
static void ch_nccl(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_nccl *n = e->f;
	if (!s->tid0)
		s->tid0 = n->tid;
	/* the host call as Kineto's record_param_comms cpu_op */
	char *o = EV_OPEN(s, "X", "cpu_op", 0);
	o = w_fn_name(s, o, 0, n->fn, e->name);
	o = w_where(s, o, s->pid, n->tid, e->ts, s->base);
	W_US(o, "dur", e->dur);
	W_LIT(o, ",\"args\":{\"External id\":");
	o = w_i(o, e->call >= 0 ? e->call + 1 : 0);
	if (e->call >= 0)
		o = w_comm_args(s, o, e, n);
	W_LIT(o, "}}");
	done(s, o);
	if (e->call >= 0 && e->has_gpu) {
		o = EV_OPEN(s, "s", "ac2g", EV_ROOM);
		W_LIT(o, "\"ac2g\"");
		o = w_where(s, o, s->pid, n->tid, e->ts, s->base);
		W_LIT(o, ",\"id\":");
		o = w_flow(s, o, e->rank, e->call);
		*o++ = '}';
		done(s, o);
	}
}

/* A CUDA runtime call that moves or places memory. */
static void ch_api(struct ch *s, const struct xe_ev *e)
{
	uint64_t tid = 0, corr = 0, fn;
	if (e->type == XE_COPY) {
		tid = ((const struct nvlp_rec_copy *)e->f)->tid;
		corr = ((const struct nvlp_rec_copy *)e->f)->call_id;
		fn = ((const struct nvlp_rec_copy *)e->f)->fn;
	} else if (e->type == XE_MANAGED) {
		tid = ((const struct nvlp_rec_managed *)e->f)->tid;
		fn = ((const struct nvlp_rec_managed *)e->f)->fn;
	} else {
		tid = ((const struct nvlp_rec_peer *)e->f)->tid;
		fn = ((const struct nvlp_rec_peer *)e->f)->fn;
	}
	char *o = EV_OPEN(s, "X", "cuda_runtime", 0);
	o = w_fn_name(s, o, 1, fn, e->name);
	o = w_where(s, o, s->pid, tid, e->ts, s->base);
	W_US(o, "dur", e->dur);
	W_LIT(o, ",\"args\":{\"correlation\":");
	o = w_u(o, corr);
	if (e->type == XE_COPY) {
		W_LIT(o, ",\"bytes\":");
		o = w_u(o, ((const struct nvlp_rec_copy *)e->f)->bytes);
	}
	W_LIT(o, "}}");
	done(s, o);
}

/* A kernel, with the ends of the flows from the NCCL calls it ran. */
static void ch_kernel(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_kernel *k = e->f;
	char buf[KN_BUF];
	const char *raw = "";
	const struct qn *q = kernel_name(s, k->name, e->name[0] ? e->name : "kernel",
	                                 e->ncalls != 0, buf, &raw);
	int pid = gpu_pid(s, (int64_t)k->device);
	char *o = EV_OPEN(s, "X", "kernel", 0);
	o = q ? w_mem(s, o, q->q, q->len, EV_ROOM) : w_q(s, o, raw, EV_ROOM);
	o = w_where(s, o, pid, k->stream, e->ts, s->base);
	W_US(o, "dur", e->dur);
	int64_t dev = (int64_t)k->device;
	struct kf *f = &s->kf[(k->stream ^ (uint64_t)dev) & 7];
	if (!f->alen || f->dev != dev || f->stream != k->stream) {
		char *p = f->a;
		W_LIT(p, ",\"args\":{\"device\":");
		p = w_i(p, dev);
		W_LIT(p, ",\"stream\":");
		p = w_u(p, k->stream);
		W_LIT(p, ",\"correlation\":");
		f->alen = (size_t)(p - f->a);
		f->dev = dev;
		f->stream = k->stream;
		f->glen = 0;
	}
	memcpy(o, f->a, sizeof f->a);
	o = w_u(o + f->alen, k->correlation);
	W_LIT(o, ",\"External id\":");
	o = w_i(o, e->ncalls ? e->calls[0] + 1 : 0);
	const uint64_t dim[6] = {k->grid_x,  k->grid_y,  k->grid_z,
	                         k->block_x, k->block_y, k->block_z};
	if (!f->glen || memcmp(f->dim, dim, sizeof dim)) {
		char *p = f->g;
		W_LIT(p, ",\"grid\":");
		p = w_dim3(p, dim[0], dim[1], dim[2]);
		W_LIT(p, ",\"block\":");
		p = w_dim3(p, dim[3], dim[4], dim[5]);
		W_LIT(p, "}}");
		f->glen = (size_t)(p - f->g);
		memcpy(f->dim, dim, sizeof dim);
	}
	memcpy(o, f->g, sizeof f->g);
	done(s, o + f->glen);
	for (size_t i = 0; i < e->ncalls; i++) {
		o = EV_OPEN(s, "f", "ac2g", EV_ROOM);
		W_LIT(o, "\"ac2g\"");
		o = w_where(s, o, pid, k->stream, e->ts, s->base);
		W_LIT(o, ",\"bp\":\"e\",\"id\":");
		o = w_flow(s, o, e->rank, e->calls[i]);
		*o++ = '}';
		done(s, o);
	}
}

/* A GPU copy, named "Memcpy <src> -> <dst>" (nothing in it to escape). */
static void ch_gpucopy(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_gpucopy *c = e->f;
	char *o = EV_OPEN(s, "X", "gpu_memcpy", EV_ROOM);
	W_LIT(o, "\"Memcpy ");
	o = w_i(o, (int64_t)c->src_device);
	W_LIT(o, " -> ");
	o = w_i(o, (int64_t)c->dst_device);
	*o++ = '"';
	o = w_where(s, o, gpu_pid(s, (int64_t)c->device), c->stream, e->ts, s->base);
	o = w_gpu_args(o, e->dur, (int64_t)c->device, c->stream,
	               c->call_id ? c->call_id : c->correlation);
	W_LIT(o, ",\"bytes\":");
	o = w_u(o, c->bytes);
	W_LIT(o, ",\"copy_kind\":");
	o = w_u(o, c->copy_kind);
	W_LIT(o, "}}");
	done(s, o);
}

/* A link counter sample: a counter track per GPU ("GPU <dev> link GB/s"), in GB/s. */
static void ch_sample(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_linksample *l = e->f;
	if (!e->dur)
		return;
	char *o = EV_OPEN(s, "C", "link", EV_ROOM);
	W_LIT(o, "\"GPU ");
	o = w_i(o, (int64_t)l->device);
	W_LIT(o, " link GB/s\"");
	o = w_where(s, o, s->pid, 0, e->ts, s->base);
	W_LIT(o, ",\"args\":{\"NVLink\":");
	o = w_fix3(o, (double)(l->nvl_tx + l->nvl_rx) / (double)e->dur);
	W_LIT(o, ",\"PCIe\":");
	o = w_fix3(o, (double)(l->pcie_rd + l->pcie_wr) / (double)e->dur);
	W_LIT(o, "}}");
	done(s, o);
}

/* A unified memory migration (the byte counters; faults are not shown). */
static void ch_um(struct ch *s, const struct xe_ev *e)
{
	const struct nvlp_rec_um *u = e->f;
	if (!xe_um_migration(u->counter))
		return;
	char *o = EV_OPEN(s, "X", "um_migration", EV_ROOM);
	if (u->counter == NVLP_UM_BYTES_TRANSFER_DTOH)
		W_LIT(o, "\"UM DtoH\"");
	else if (u->counter == NVLP_UM_BYTES_TRANSFER_HTOD)
		W_LIT(o, "\"UM HtoD\"");
	else
		W_LIT(o, "\"UM DtoD\"");
	o = w_where(s, o, s->pid, 1, e->ts, s->base);
	W_US(o, "dur", e->dur);
	W_LIT(o, ",\"args\":{\"bytes\":");
	o = w_u(o, u->value);
	W_LIT(o, ",\"address\":");
	o = w_u(o, u->address);
	W_LIT(o, ",\"allocation\":");
	o = w_i(o, e->alloc);
	W_LIT(o, "}}");
	done(s, o);
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
	case XE_DEVICE:
		ch_device(s, e);
		break;
	}
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
	                 .devs = j->dir ? devs : j->single_rank && r == j->first
	                                             ? &j->devs
	                                             : NULL};
	struct xe_sink sink = {.ctx = s, .rank = ch_rank, .ev = ch_ev, .rank_end = ch_rank_end};
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
		              : ""); /* errno: the failed write's (cli/cmd_export.c clears it) */
	return rc || s.err ? -1 : 0;
}

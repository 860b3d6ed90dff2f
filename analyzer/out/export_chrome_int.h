/* export_chrome_int.h: what the Chrome/Kineto JSON sink's files share (export_chrome.c: files,
 * metadata and the parallel parts; export_chrome_ev.c: the events): its state, the output buffer
 * and the number and string writers. */
#ifndef NVLP_AN_EXPORT_CHROME_INT_H
#define NVLP_AN_EXPORT_CHROME_INT_H

#include <stdarg.h> /* va_list */
#include <stdlib.h> /* malloc */
#include <string.h> /* memcpy */

#include "out/export.h"
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
	struct seen {           /* every (pid, tid) written, for their M events; open addressing */
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
static inline void ch_flush(struct ch *s)
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
static inline void put_long(struct ch *s, const char *t, size_t len) /* past the buffer */
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
static inline void put_s(struct ch *s, const char *t)
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

static inline void put_f(struct ch *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void put_f(struct ch *s, const char *fmt, ...) /* the rare lines */
{
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	if (k > 0)
		put_mem(s, b, (size_t)k < sizeof b ? (size_t)k : sizeof b - 1);
}

/* text as a JSON string in a fresh allocation (the analyzer's one quoting), NULL out of memory */
static inline char *quote_dup(const char *text)
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
static inline void put_q(struct ch *s, const char *t) /* a JSON string */
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
static inline char *w_q(struct ch *s, char *o, const char *t, size_t after)
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
static inline void note_thread(struct ch *s, int pid, uint64_t tid)
{
	if (2 * (s->nseen + 1) > s->capseen) {
		size_t cap = s->capseen ? 2 * s->capseen : 64;
		struct seen *v = cap <= (1u << 20) ? calloc(cap, sizeof *v) : NULL;
		if (!v)
			return;
		for (size_t i = 0; i < s->capseen; i++)
			if (s->seen[i].used) {
				size_t j =
				    (s->seen[i].tid * 31 + (uint64_t)s->seen[i].pid) & (cap - 1);
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

/*! The sink's event handler (xe_sink.ev) */
void xc_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e);

#endif

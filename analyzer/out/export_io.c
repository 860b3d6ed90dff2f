/* export_io.c: the exporters' one parallel writer: processes encoded on several threads, their
 * bytes landing in the output in process order, straight through while it is their turn, else
 * held in memory (up to XO_HOLD in all) or a temporary file until the processes before them are
 * written. */
#include <pthread.h> /* pthread_mutex_t */
#include <stdlib.h>  /* calloc */
#include <string.h>  /* memcpy */
#include <unistd.h>  /* sysconf, copy_file_range */

#include "util/diag.h"
#include "out/export.h"
#include "util/util.h" /* nvlp_run_parallel */

/* Held bytes in memory first: a temporary file costs its bytes twice more in the kernel (written
 * into it, then copied to the output: 363 MB of page cache for a 242 MB chrome export of 2 ranks) */
enum { XO_HOLD = 256 << 20, XO_CHUNK = (4 << 20) - 16 };
struct xo_chunk { /* 4 MiB (madvise'd huge pages, tried: more system time, not less) */
	struct xo_chunk *next;
	size_t len;
	char b[XO_CHUNK];
};

struct xo {
	const struct xm_job *x;
	FILE *out;
	xo_fn fn;
	void *ctx;
	pthread_mutex_t mu;
	size_t next; /* the next process a worker takes */
	size_t turn; /* the process whose bytes go to out now */
	size_t n;
	struct xo_part {
		struct xo_chunk *mem, *last; /* bytes written before its turn, first */
		FILE *tmp;                   /* then these (once memory ran out) */
		int own, done;  /* own: writes go straight to out */
		int rc;         /* what fn returned */
		int werr, terr; /* its own writes failed / it got no temporary file */
		uint64_t recs;
	} * p;
	int werr;    /* appending held bytes to out failed (under mu) */
	size_t held; /* bytes in memory chunks, all parts (atomic) */
};

/* Append part r's held bytes to out (called by the one writer holding the turn). In-kernel
 * copy where out is a file; read and write where it is not (a pipe, an O_APPEND file). */
static void drain(struct xo *o, size_t r)
{
	for (struct xo_chunk *c = o->p[r].mem, *next; c; c = next) {
		next = c->next;
		if (!o->werr && fwrite(c->b, 1, c->len, o->out) != c->len)
			o->werr = 1;
		__atomic_fetch_sub(&o->held, sizeof *c, __ATOMIC_RELAXED);
		free(c);
	}
	o->p[r].mem = o->p[r].last = NULL;
	FILE *t = o->p[r].tmp;
	if (!t)
		return;
	if (fflush(t) != 0 || fflush(o->out) != 0) {
		o->werr = 1;
		goto done;
	}
	off_t len = ftello(t), off = 0;
	while (off < len) {
		ssize_t k =
		    copy_file_range(fileno(t), &off, fileno(o->out), NULL, (size_t)(len - off), 0);
		if (k <= 0)
			break;
	}
	if (off < len) {
		static char buf[1 << 20]; /* under the turn: one user at a time */
		if (fseeko(t, off, SEEK_SET) != 0)
			o->werr = 1;
		size_t k;
		while (!o->werr && (k = fread(buf, 1, sizeof buf, t)) > 0)
			if (fwrite(buf, 1, k, o->out) != k)
				o->werr = 1;
	}
done:
	fclose(t);
	o->p[r].tmp = NULL;
}

/* With o->mu held: part r may be the turn now; held bytes go first */
static void take_turn(struct xo *o, size_t r)
{
	if (!o->p[r].own && o->turn == r) {
		drain(o, r);
		o->p[r].own = 1;
	}
}

/* Keep buf in part p's memory chunks. @return how many of its bytes: the rest go to its file */
static size_t hold(struct xo *o, struct xo_part *p, const char *buf, size_t len)
{
	size_t n = len;
	while (len) {
		struct xo_chunk *c = p->last;
		if (!c || c->len == XO_CHUNK) {
			if (__atomic_add_fetch(&o->held, sizeof *c, __ATOMIC_RELAXED) > XO_HOLD ||
			    !(c = malloc(sizeof *c))) {
				__atomic_fetch_sub(&o->held, sizeof *c, __ATOMIC_RELAXED);
				return n - len;
			}
			c->next = NULL;
			c->len = 0;
			if (p->last)
				p->last->next = c;
			else
				p->mem = c;
			p->last = c;
		}
		size_t k = XO_CHUNK - c->len < len ? XO_CHUNK - c->len : len;
		memcpy(c->b + c->len, buf, k);
		c->len += k;
		buf += k;
		len -= k;
	}
	return n;
}

int xo_write(struct xo *o, size_t r, const void *buf, size_t len)
{
	struct xo_part *p = &o->p[r];
	if (!len)
		return 0;
	if (!p->own) {
		pthread_mutex_lock(&o->mu);
		take_turn(o, r);
		pthread_mutex_unlock(&o->mu);
	}
	if (!p->own && !p->tmp) {
		size_t k = hold(o, p, buf, len);
		buf = (const char *)buf + k;
		if (!(len -= k))
			return 0;
	}
	FILE *f = p->own ? o->out : p->tmp;
	if (!f && !(f = p->tmp = tmpfile())) {
		p->terr = 1;
		return -1;
	}
	if (fwrite(buf, 1, len, f) != len) {
		p->werr = 1;
		return -1;
	}
	return 0;
}

/* Part r is finished: the turn moves past it and past every finished part after it */
static void finish(struct xo *o, size_t r)
{
	pthread_mutex_lock(&o->mu);
	o->p[r].done = 1;
	take_turn(o, r);
	while (o->turn < o->n && o->p[o->turn].done) {
		drain(o, o->turn);
		o->turn++;
	}
	pthread_mutex_unlock(&o->mu);
}

static void *worker(void *arg)
{
	struct xo *o = arg;
	for (;;) {
		pthread_mutex_lock(&o->mu);
		size_t r = o->next++;
		pthread_mutex_unlock(&o->mu);
		if (r >= o->n)
			return NULL;
		if (xm_rank(o->x, r)->ok)
			o->p[r].rc = o->fn(o->ctx, r, o, &o->p[r].recs);
		finish(o, r);
	}
}

int xo_run(const struct xm_job *x, FILE *out, xo_fn fn, void *ctx, uint64_t *records)
{
	struct xo o = {.x = x, .out = out, .fn = fn, .ctx = ctx, .n = xm_nranks(x)};
	*records = 0;
	if (!(o.p = calloc(o.n + 1, sizeof *o.p))) {
		an_diag("nvlprof: export: out of memory\n");
		return -1;
	}
	pthread_mutex_init(&o.mu, NULL);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = ncpu > 0 && (size_t)ncpu < o.n ? (size_t)ncpu : o.n;
	if (nt > 64)
		nt = 64;
	nvlp_run_parallel(worker, &o, nt ? nt : 1);
	pthread_mutex_destroy(&o.mu);
	int rc = 0, terr = 0;
	for (size_t r = 0; r < o.n; r++) {
		*records += o.p[r].recs;
		if (o.p[r].rc > 0)
			rc |= o.p[r].rc;
		rc |= o.p[r].werr ? 2 : 0;
		terr |= o.p[r].terr;
		if (o.p[r].tmp) /* not reached by the turn: only after an error */
			fclose(o.p[r].tmp);
		for (struct xo_chunk *c = o.p[r].mem, *next; c; c = next) {
			next = c->next;
			free(c);
		}
	}
	free(o.p);
	if (terr) {
		an_diag("nvlprof: export: cannot create a temporary file\n");
		return -1;
	}
	return rc | (o.werr ? 2 : 0);
}

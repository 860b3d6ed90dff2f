/* sqlite_file.c: an SQLite 3 database file written page by page (file format:
 * https://www.sqlite.org/fileformat2.html): table B-trees bottom-up as rows stream in, index
 * B-trees from sorted keys at the end, sqlite_schema on page 1, the header last. */
#include "sqlite_file.h"

#include <errno.h>    /* errno */
#include <fcntl.h>    /* open */
#include <stdarg.h>   /* va_list */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc */
#include <string.h>   /* memcpy */
#include <sys/mman.h> /* mremap */
#include <sys/stat.h> /* fchmod, umask */
#include <unistd.h>   /* pwrite */

/* written at header offset 96 (the library version that last wrote the file): the release the
 * files are checked against in tests/export (sqlite3 3.40.1) */
#define SQF_LIBVERSION 3040001

enum { MAX_TABLES = 32, MAX_INDEXES = 32, OUTBUF = 1 << 20 };
enum { HDR_ROOM = 9 + SQF_MAX_COLS * 9 }; /* the largest record header */
enum { LEAF_TABLE = 0x0D, INTERIOR_TABLE = 0x05, LEAF_INDEX = 0x0A, INTERIOR_INDEX = 0x02 };
#define KEY_BIAS 0x8000000000000000ULL /* int64 -> uint64 keeping the order */
#define ROWID_BITS 56                  /* index entries: rowid below, key NULL flags above */
enum { MERGE_MAX = 64 };               /* sets of index entries merged in one pass */

/* A page being built: header at hoff, cell pointers after it, cells from the end down */
struct page {
	uint8_t *b;
	unsigned hoff, hlen, nc, top;
};

struct kid { /* a finished child of a table B-tree level: its page, its largest rowid */
	uint32_t pgno;
	int64_t key;
};

struct table {
	char *name, *sql;
	int ncols, ipk, nidx;
	int idx[MAX_INDEXES];
	int64_t last; /* rowid of the last row */
	uint64_t rows;
	struct page leaf; /* the leaf being filled (its own buffer, leaf.b) */
	struct kid *kids; /* finished leaves, in rowid order */
	size_t nkids, capkids;
	uint32_t root;
};

struct index {
	char *name, *sql;
	int table, nk, cols[SQF_MAX_KEYS];
	/* e.n entries of nk+1 words: key + KEY_BIAS (0 for NULL), rowid | NULL flags */
	struct sqf_keys e;
	struct kset { /* sets handed over by sqf_index_add, not yet in e */
		struct sqf_keys k;
		int64_t base;
	} * sets;
	size_t nsets, capsets;
	uint8_t *pages; /* its B-tree built ahead (sqf_index_sort): npg pages numbered 1.. */
	size_t npg, pgbytes;
	uint32_t proot;  /* the root among them, 0 not built */
	int sorted, err; /* err: a failure of the index's own work (sqf_index_add, _sort: any
	                    thread), its message in msg, taken over by sqf_close */
	char msg[160];
	uint32_t root;
};

struct sqf {
	int fd;
	char *path, *tmp;
	unsigned U;      /* page size = usable size (no reserved bytes) */
	uint32_t npages; /* pages numbered so far, page 1 included */
	uint8_t *out;    /* pages 2.. on their way to the file, written at outoff */
	size_t outn;
	off_t outoff;
	uint8_t *page1, *pg; /* page 1 (written last); a page being built */
	uint8_t *payload;    /* the record being encoded */
	size_t paycap;
	int err;
	char msg[200];
	struct index *pre; /* a shell building pre's pages in memory: emit appends them there */
	int nt, nix;
	struct table t[MAX_TABLES];
	struct index ix[MAX_INDEXES];
};

static void fail(struct sqf *f, const char *fmt, ...)
{
	if (f->err)
		return;
	f->err = 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof f->msg, fmt, ap);
	va_end(ap);
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Index entries live in their own mappings: mremap grows them without copying, where glibc's
 * realloc copies once its mmap threshold has risen (11% of the instructions of an export). */
static void *map_grow(void *p, size_t old, size_t len)
{
#ifdef __SANITIZE_THREAD__
	/* TSan does not follow mremap: a range moved away keeps its threads' history, and another
	 * thread's mapping landing there reads as a race; a new mapping and a copy under TSan */
	void *q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q != MAP_FAILED && p) {
		memcpy(q, p, old < len ? old : len);
		munmap(p, old);
	}
#else
	void *q = p ? mremap(p, old, len, MREMAP_MAYMOVE)
	            : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#endif
	return q == MAP_FAILED ? NULL : q;
}

static void map_free(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

static unsigned vlen(uint64_t v)
{
	if (v > 0x00ffffffffffffffULL)
		return 9;
	unsigned n = 1;
	while (v >>= 7)
		n++;
	return n;
}

/* SQLite's varint: big-endian groups of 7 bits, high bit = more; a 9th byte carries 8 bits */
static unsigned putv(uint8_t *p, uint64_t v)
{
	if (v <= 0x7f) {
		p[0] = (uint8_t)v;
		return 1;
	}
	if (v <= 0x3fff) {
		p[0] = (uint8_t)(0x80 | (v >> 7));
		p[1] = (uint8_t)(v & 0x7f);
		return 2;
	}
	if (v > 0x00ffffffffffffffULL) {
		p[8] = (uint8_t)v;
		v >>= 8;
		for (int i = 7; i >= 0; i--, v >>= 7)
			p[i] = (uint8_t)(0x80 | (v & 0x7f));
		return 9;
	}
	unsigned n = vlen(v);
	for (unsigned i = n; i-- > 0; v >>= 7)
		p[i] = (uint8_t)(0x80 | (v & 0x7f));
	p[n - 1] &= 0x7f;
	return n;
}

/* The serial type SQLite gives an integer (schema format 4: 0 and 1 take no body): the
 * smallest of 1, 2, 3, 4, 6, 8 bytes holding it with its sign */
static inline unsigned int_type(int64_t v, unsigned *len)
{
	static const uint8_t type_of[9] = {0, 1, 2, 3, 4, 5, 5, 6, 6};
	static const uint8_t len_of[7] = {0, 1, 2, 3, 4, 6, 8};
	if ((uint64_t)v <= 1) {
		*len = 0;
		return 8 + (unsigned)v;
	}
	uint64_t u = (uint64_t)(v ^ (v >> 63)); /* ~v for a negative */
	unsigned t = type_of[(64 - (unsigned)__builtin_clzll(u | 1) + 8) / 8];
	*len = len_of[t];
	return t;
}

/* len (1..8) bytes of v, big-endian; writes 8 bytes: p has room for them */
static inline uint8_t *put_int(uint8_t *p, int64_t v, unsigned len)
{
	uint64_t be = __builtin_bswap64((uint64_t)v << (64 - 8 * len));
	memcpy(p, &be, 8);
	return p + len;
}

/* Bytes of a payload of size P kept in its cell (the rest goes to overflow pages): the X, M, K
 * of the file format, where X differs for table leaves and index pages. */
static size_t local_size(unsigned U, size_t P, int index)
{
	size_t X = index ? (size_t)(U - 12) * 64 / 255 - 23 : U - 35;
	if (P <= X)
		return P;
	size_t M = (size_t)(U - 12) * 32 / 255 - 23;
	size_t K = M + (P - M) % (U - 4);
	return K <= X ? K : M;
}

/* ---- the file: pages 2.. appended in the order they are numbered -------------------------- */

static void flush(struct sqf *f)
{
	size_t done = 0;
	while (done < f->outn && !f->err) {
		ssize_t w = pwrite(f->fd, f->out + done, f->outn - done, f->outoff + (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail(f, "write failed: %s", w < 0 ? strerror(errno) : "no progress");
		else
			done += (size_t)w;
	}
	f->outoff += (off_t)f->outn;
	f->outn = 0;
}

/* the next page number, the page's bytes queued for it */
static uint32_t emit(struct sqf *f, const uint8_t *page)
{
	struct index *x = f->pre;
	if (x) {
		if ((x->npg + 1) * f->U > x->pgbytes) {
			size_t len = x->pgbytes ? 2 * x->pgbytes : 64 * (size_t)f->U;
			uint8_t *b = map_grow(x->pages, x->pgbytes, len);
			if (!b) {
				fail(f, "out of memory building index %s", x->name);
				return 0;
			}
			x->pages = b;
			x->pgbytes = len;
		}
		memcpy(x->pages + x->npg * f->U, page, f->U);
		return (uint32_t)++x->npg;
	}
	if (f->outn + f->U > OUTBUF)
		flush(f);
	memcpy(f->out + f->outn, page, f->U);
	f->outn += f->U;
	if (f->npages == UINT32_MAX - 1)
		fail(f, "database larger than 2^32 pages");
	return ++f->npages;
}

/* The part of a payload beyond its local bytes as a chain of overflow pages (4 bytes: the next
 * page, then U - 4 bytes of payload). @return the first page */
static uint32_t overflow(struct sqf *f, const uint8_t *p, size_t n)
{
	size_t per = f->U - 4, npg = (n + per - 1) / per;
	uint32_t first = f->npages + 1;
	for (size_t i = 0; i < npg; i++) {
		size_t k = i + 1 < npg ? per : n - i * per;
		memset(f->pg, 0, f->U);
		put32(f->pg, i + 1 < npg ? first + (uint32_t)i + 1 : 0);
		memcpy(f->pg + 4, p + i * per, k);
		emit(f, f->pg);
	}
	return first;
}

/* ---- pages being built (struct page above): page_start, page_fits, page_cell, page_end -- */

static void page_start(struct page *p, uint8_t *b, unsigned U, unsigned hoff, int flag)
{
	p->b = b;
	p->hoff = hoff;
	p->hlen = flag == LEAF_TABLE || flag == LEAF_INDEX ? 8 : 12;
	p->nc = 0;
	p->top = U;
	memset(b + hoff, 0, p->hlen); /* the rest: cells, pointers, and the gap page_end clears */
	b[hoff] = (uint8_t)flag;
}

static int page_fits(const struct page *p, size_t cell)
{
	return p->hoff + p->hlen + 2 * (p->nc + 1) + cell <= p->top;
}

/* room for a cell of len bytes: @return where it goes */
static uint8_t *page_cell(struct page *p, size_t len)
{
	p->top -= (unsigned)len;
	put16(p->b + p->hoff + p->hlen + 2 * p->nc, p->top);
	p->nc++;
	return p->b + p->top;
}

static void page_end(struct page *p, uint32_t right)
{
	uint8_t *h = p->b + p->hoff;
	unsigned gap = p->hoff + p->hlen + 2 * p->nc;
	memset(p->b + gap, 0, p->top - gap);
	put16(h + 3, p->nc);
	put16(h + 5, p->top & 0xffff); /* 65536 is written 0 */
	if (p->hlen == 12)
		put32(h + 8, right);
}

/* ---- tables ----------------------------------------------------------------------------- */

static char *sdup(struct sqf *f, const char *s)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		fail(f, "out of memory");
	return d;
}

int sqf_table(struct sqf *f, const char *name, int ncols, int ipk, const char *sql)
{
	if (f->nt == MAX_TABLES || ncols < 1 || ncols > SQF_MAX_COLS || ipk >= ncols) {
		fail(f, "table %s: too many tables or columns", name);
		return -1;
	}
	struct table *t = &f->t[f->nt];
	memset(t, 0, sizeof *t);
	t->name = sdup(f, name);
	t->sql = sdup(f, sql);
	t->ncols = ncols;
	t->ipk = ipk;
	uint8_t *b = malloc(f->U);
	if (!b) {
		fail(f, "out of memory");
		free(t->name); /* not counted in nt: sqf_close would not free them */
		free(t->sql);
		t->name = t->sql = NULL;
		return -1;
	}
	page_start(&t->leaf, b, f->U, 0, LEAF_TABLE);
	return f->nt++;
}

int sqf_index(struct sqf *f, int table, const char *name, const char *sql, const int *cols,
              int nkeys)
{
	struct table *t = table >= 0 && table < f->nt ? &f->t[table] : NULL;
	if (!t || f->nix == MAX_INDEXES || nkeys < 1 || nkeys > SQF_MAX_KEYS || t->rows) {
		fail(f, "index %s: no such table, too many keys or declared after rows", name);
		return -1;
	}
	struct index *x = &f->ix[f->nix];
	memset(x, 0, sizeof *x);
	x->name = sdup(f, name);
	x->sql = sdup(f, sql);
	x->table = table;
	x->nk = nkeys;
	for (int k = 0; k < nkeys; k++) {
		if (cols[k] < 0 || cols[k] >= t->ncols) {
			fail(f, "index %s: no column %d", name, cols[k]);
			return -1;
		}
		x->cols[k] = cols[k];
	}
	t->idx[t->nidx++] = f->nix++;
	return 0;
}

static void leaf_done(struct sqf *f, struct table *t)
{
	page_end(&t->leaf, 0);
	if (t->nkids == t->capkids) {
		size_t cap = t->capkids ? 2 * t->capkids : 64;
		struct kid *k = realloc(t->kids, cap * sizeof *k);
		if (!k) {
			fail(f, "out of memory");
			return;
		}
		t->kids = k;
		t->capkids = cap;
	}
	t->kids[t->nkids].pgno = emit(f, t->leaf.b);
	t->kids[t->nkids++].key = t->last;
	page_start(&t->leaf, t->leaf.b, f->U, 0, LEAF_TABLE);
}

/* x's entry of row v (rowid) of a table whose INTEGER PRIMARY KEY is column ipk, onto k.
 * @return 0, -1 (out of memory), -2 (a key that is not an integer), -3 (rowid out of range) */
static int keys_push(struct sqf_keys *k, const struct index *x, int ipk, const struct sqf_val *v,
                     int64_t rowid)
{
	size_t s = (size_t)x->nk + 1;
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 4096;
		uint64_t *w = map_grow(k->w, k->bytes, cap * s * sizeof *w);
		if (!w)
			return -1;
		k->w = w;
		k->cap = cap;
		k->bytes = cap * s * sizeof *w;
	}
	uint64_t *e = k->w + k->n * s, nulls = 0;
	for (int j = 0; j < x->nk; j++) {
		int c = x->cols[j];
		if (c == ipk)
			e[j] = (uint64_t)rowid ^ KEY_BIAS;
		else if (v[c].type == SQF_INT)
			e[j] = (uint64_t)v[c].i ^ KEY_BIAS;
		else if (v[c].type == SQF_NULL) {
			e[j] = 0;
			nulls |= 1ULL << j;
		} else
			return -2;
	}
	if (rowid < 0 || rowid >= (int64_t)1 << ROWID_BITS)
		return -3;
	e[x->nk] = (uint64_t)rowid | nulls << ROWID_BITS;
	k->n++;
	return 0;
}

/* one index entry of the row just added */
static void index_add(struct sqf *f, struct index *x, const struct table *t,
                      const struct sqf_val *v, int64_t rowid)
{
	int rc = keys_push(&x->e, x, t->ipk, v, rowid);
	x->sorted = 0;
	if (rc == -1)
		fail(f, "out of memory");
	else if (rc == -2)
		fail(f, "index %s: a key that is not an integer", x->name);
	else if (rc == -3)
		fail(f, "index %s: rowid %lld out of range", x->name, (long long)rowid);
}

int sqf_keys_add(const struct sqf *f, int ix, struct sqf_keys *k, const struct sqf_val *v,
                 int64_t rowid)
{
	const struct index *x = &f->ix[ix];
	return keys_push(k, x, f->t[x->table].ipk, v, rowid) ? -1 : 0;
}

void sqf_keys_free(struct sqf_keys *k)
{
	map_free(k->w, k->bytes);
	memset(k, 0, sizeof *k);
}

static void ix_fail(struct index *x, const char *fmt, ...)
{
	if (x->err)
		return;
	x->err = 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->msg, sizeof x->msg, fmt, ap);
	va_end(ap);
}

/* k's entries after x's, their rowids + base (k emptied). @return 0, -1 (failed: in x) */
static int keys_append(struct index *x, struct sqf_keys *k, int64_t base)
{
	size_t s = (size_t)x->nk + 1, n = k->n;
	const uint64_t lim = (uint64_t)1 << ROWID_BITS, low = lim - 1;
	if (!n || x->err) {
		sqf_keys_free(k);
		return x->err ? -1 : 0;
	}
	x->sorted = 0;
	if (!x->e.n && !base) { /* the first set as it is: no copy */
		map_free(x->e.w, x->e.bytes);
		x->e = *k;
		memset(k, 0, sizeof *k);
		return 0;
	}
	if (x->e.n + n > x->e.cap) {
		size_t cap = x->e.n + n;
		uint64_t *w = map_grow(x->e.w, x->e.bytes, cap * s * sizeof *w);
		if (!w) {
			sqf_keys_free(k);
			ix_fail(x, "out of memory");
			return -1;
		}
		x->e.w = w;
		x->e.cap = cap;
		x->e.bytes = cap * s * sizeof *w;
	}
	uint64_t *o = x->e.w + x->e.n * s;
	const uint64_t *e = k->w;
	for (size_t i = 0; i < n; i++, o += s, e += s) {
		for (size_t j = 0; j + 1 < s; j++)
			o[j] = e[j];
		uint64_t r = (e[s - 1] & low) + (uint64_t)base;
		if (base < 0 || r >= lim) {
			sqf_keys_free(k);
			ix_fail(x, "index %s: rowid %llu out of range", x->name,
			        (unsigned long long)r);
			return -1;
		}
		o[s - 1] = (e[s - 1] & ~low) | r;
	}
	x->e.n += n;
	sqf_keys_free(k);
	return 0;
}

int sqf_index_add(struct sqf *f, int ix, struct sqf_keys *k, int64_t base)
{
	struct index *x = &f->ix[ix];
	if (!k->n || x->err) {
		sqf_keys_free(k);
		return x->err ? -1 : 0;
	}
	if (x->nsets == x->capsets) {
		size_t cap = x->capsets ? 2 * x->capsets : 16;
		struct kset *v = realloc(x->sets, cap * sizeof *v);
		if (!v) {
			sqf_keys_free(k);
			ix_fail(x, "out of memory");
			return -1;
		}
		x->sets = v;
		x->capsets = cap;
	}
	x->sets[x->nsets++] = (struct kset){*k, base};
	memset(k, 0, sizeof *k);
	x->sorted = 0;
	return 0;
}

/* the size of the record of v (what sqf_record writes) */
static size_t record_size(int ncols, int ipk, const struct sqf_val *v)
{
	size_t nty = 0, body = 0;
	for (int c = 0; c < ncols; c++) {
		unsigned len = 0;
		if (v[c].type == SQF_INT && c != ipk)
			int_type(v[c].i, &len), nty++;
		else if (v[c].type == SQF_TEXT && c != ipk)
			nty += vlen(2 * (uint64_t)v[c].n + 13), len = v[c].n;
		else
			nty++;
		body += len;
	}
	size_t hdr = nty + 1;
	if (hdr > 127)
		while (vlen(hdr) > hdr - nty)
			hdr++;
	return hdr + body;
}

/* sqf_record's body, inlined into sqf_insert too: the one encoding of a row, on the writer and on
 * the encoders' threads (a call from sqf_insert cost 1.6% more instructions in a -j 1 export of 4
 * x 20000 records than sqf_insert's own encoder did; inlined, 1.2% more) */
static inline __attribute__((always_inline)) size_t
record_encode(uint8_t *out, size_t cap, int ncols, int ipk, const struct sqf_val *v)
{
	/* one pass: serial types into ty, bodies after room for the smallest header (a byte a
	 * column, and its size); the bodies moved on when the header is longer */
	uint8_t ty[SQF_MAX_COLS * 9 + 9], *h = ty;
	size_t est = (size_t)ncols + 1;
	if (est > 127 || cap < est + 8 * (size_t)ncols + 8)
		return record_size(ncols, ipk, v);
	uint8_t *body = out + est, *o = body;
	for (int c = 0; c < ncols; c++) {
		if (v[c].type == SQF_INT && c != ipk) {
			unsigned len;
			*h++ = (uint8_t)int_type(v[c].i, &len);
			if (len)
				o = put_int(o, v[c].i, len);
		} else if (v[c].type == SQF_TEXT && c != ipk) {
			/* room: this text, 8 bytes each column after it, 9 more header bytes */
			if ((size_t)(o - out) + v[c].n + 8 * (size_t)(ncols - c) + 9 > cap)
				return record_size(ncols, ipk, v);
			h += putv(h, 2 * (uint64_t)v[c].n + 13);
			memcpy(o, v[c].s, v[c].n);
			o += v[c].n;
		} else
			*h++ = 0;
	}
	size_t nty = (size_t)(h - ty), hdr = nty + 1, nb = (size_t)(o - body);
	if (hdr > 127)
		while (vlen(hdr) > hdr - nty)
			hdr++;
	if (hdr != est) {
		if (hdr + nb > cap)
			return hdr + nb;
		memmove(out + hdr, body, nb);
	}
	memcpy(out + putv(out, hdr), ty, nty);
	return hdr + nb;
}

/* sqf_insert's own parts are always_inline: it runs once a row, and gcc -O2 left a part out of
 * line, 2.5 M more instructions in sqf_insert (+4.5%) exporting an an_gen job of 4 ranks x
 * 20000 records (cachegrind). Its record is sqf_record's, the encoders' one encoding. */

/* The rowid of the row v of t: its INTEGER PRIMARY KEY, or the one after the last. @return 0, or
 * -1 (failed) */
static inline __attribute__((always_inline)) int row_id(struct sqf *f, const struct table *t,
                                                        const struct sqf_val *v, int64_t *rowid)
{
	if (t->ipk >= 0) {
		if (v[t->ipk].type != SQF_INT) {
			fail(f, "%s: INTEGER PRIMARY KEY is not an integer", t->name);
			return -1;
		}
		*rowid = v[t->ipk].i;
	} else {
		if (t->rows && t->last == INT64_MAX) {
			fail(f, "%s: rowids exhausted", t->name);
			return -1;
		}
		*rowid = t->rows ? t->last + 1 : 1;
	}
	if (t->rows && *rowid <= t->last) {
		fail(f, "%s: rowid %lld after %lld (rows must come in rowid order)", t->name,
		     (long long)*rowid, (long long)t->last);
		return -1;
	}
	return 0;
}

/* The cell of record rec[0..P) with rowid on t's leaf (a new leaf when it is full), what does
 * not fit locally on overflow pages */
static inline __attribute__((always_inline)) void
cell_add(struct sqf *f, struct table *t, const uint8_t *rec, size_t P, int64_t rowid)
{
	size_t local = local_size(f->U, P, 0);
	size_t cell = vlen(P) + vlen((uint64_t)rowid) + local + (local < P ? 4 : 0);
	if (!page_fits(&t->leaf, cell))
		leaf_done(f, t);
	uint32_t first = local < P ? overflow(f, rec + local, P - local) : 0;
	uint8_t *c = page_cell(&t->leaf, cell);
	c += putv(c, P);
	c += putv(c, (uint64_t)rowid);
	memcpy(c, rec, local);
	if (local < P)
		put32(c + local, first);
}

void sqf_insert(struct sqf *f, int table, const struct sqf_val *v)
{
	if (f->err)
		return;
	struct table *t = &f->t[table];
	int64_t rowid;
	if (row_id(f, t, v, &rowid) < 0)
		return;
	/* the record in f->payload, grown when a text needs more than its room */
	size_t P = record_encode(f->payload, f->paycap, t->ncols, t->ipk, v);
	if (SQF_RECORD_ROOM(P, t->ncols) > f->paycap) {
		size_t cap = SQF_RECORD_ROOM(P, t->ncols) * 3 / 2;
		uint8_t *b = realloc(f->payload, cap);
		if (!b) {
			fail(f, "out of memory");
			return;
		}
		f->payload = b;
		f->paycap = cap;
		P = record_encode(f->payload, f->paycap, t->ncols, t->ipk, v);
	}
	cell_add(f, t, f->payload, P, rowid);
	t->last = rowid;
	t->rows++;
	for (int k = 0; k < t->nidx; k++)
		index_add(f, &f->ix[t->idx[k]], t, v, rowid);
}

/* ---- rows encoded on other threads: sqf_record, sqf_record_set, sqf_insert_record ------- */

size_t sqf_record(uint8_t *out, size_t cap, int ncols, int ipk, const struct sqf_val *v)
{
	return record_encode(out, cap, ncols, ipk, v);
}

/* a varint of at most 9 bytes from p (before end): its value, its size in *k (0: cut short) */
static uint64_t getv(const uint8_t *p, const uint8_t *end, unsigned *k)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 9 && p + i < end; i++) {
		if (i == 8) {
			*k = 9;
			return v << 8 | p[i];
		}
		v = v << 7 | (p[i] & 0x7f);
		if (!(p[i] & 0x80)) {
			*k = i + 1;
			return v;
		}
	}
	*k = 0;
	return 0;
}

/* bytes of a value of serial type t in the record's body */
static size_t type_size(uint64_t t)
{
	static const uint8_t sz[12] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0};
	return t < 12 ? sz[t] : (size_t)(t - 12 - (t & 1)) / 2;
}

size_t sqf_record_set_last(const uint8_t *rec, size_t len, int64_t val, uint8_t *out)
{
	unsigned k;
	uint64_t hdr = getv(rec, rec + len, &k);
	if (!k || hdr > len || hdr < 2 || rec[hdr - 1] > 9 || (hdr > 1 && rec[hdr - 2] & 0x80))
		return 0; /* the last type: one byte (an integer's or a NULL's) */
	size_t sz = type_size(rec[hdr - 1]), keep = len - sz;
	if (sz > len - hdr)
		return 0;
	unsigned nl;
	memcpy(out, rec, keep);
	out[hdr - 1] = (uint8_t)int_type(val, &nl);
	return nl ? (size_t)(put_int(out + keep, val, nl) - out) : keep;
}

size_t sqf_record_set(const uint8_t *rec, size_t len, const int *col, const int64_t *val, int n,
                      uint8_t *out)
{
	enum { MAX_SET = 8 };
	unsigned k;
	uint64_t hdr = getv(rec, rec + len, &k);
	if (!k || hdr > len || k > hdr || n > MAX_SET)
		return 0;
	/* the header with the set columns' new types; where their old bodies are */
	uint8_t ty[SQF_MAX_COLS * 9 + 9], *h = ty;
	size_t off[MAX_SET], sz[MAX_SET], boff = (size_t)hdr;
	unsigned nlen[MAX_SET];
	int j = 0, c = 0;
	for (const uint8_t *p = rec + k, *hend = rec + hdr; p < hend; c++) {
		uint64_t t = getv(p, hend, &k);
		if (!k || c == SQF_MAX_COLS)
			return 0;
		size_t s = type_size(t);
		if (j < n && col[j] == c) {
			off[j] = boff;
			sz[j] = s;
			*h++ = (uint8_t)int_type(val[j], &nlen[j]);
			j++;
		} else {
			memcpy(h, p, k);
			h += k;
		}
		p += k;
		boff += s;
	}
	if (j < n || boff != len)
		return 0;
	size_t nty = (size_t)(h - ty), nh = nty + 1;
	if (nh > 127)
		while (vlen(nh) > nh - nty)
			nh++;
	uint8_t *o = out + putv(out, nh);
	memcpy(o, ty, nty);
	o += nty;
	size_t from = (size_t)hdr;
	for (j = 0; j < n; j++) {
		memcpy(o, rec + from, off[j] - from);
		o += off[j] - from;
		if (nlen[j])
			o = put_int(o, val[j], nlen[j]);
		from = off[j] + sz[j];
	}
	memcpy(o, rec + from, len - from);
	return (size_t)(o - out) + (len - from);
}

void sqf_insert_record(struct sqf *f, int table, const uint8_t *rec, size_t len)
{
	if (f->err)
		return;
	struct table *t = &f->t[table];
	if (t->rows && t->last == INT64_MAX) {
		fail(f, "%s: rowids exhausted", t->name);
		return;
	}
	int64_t rowid = t->rows ? t->last + 1 : 1;
	cell_add(f, t, rec, len, rowid);
	t->last = rowid;
	t->rows++;
}

void sqf_fail(struct sqf *f, const char *why)
{
	fail(f, "%s", why);
}

int sqf_failed(const struct sqf *f)
{
	return f->err;
}

/* The levels above a table's leaves, from its finished children k[0..n) (rewritten in place);
 * root_hoff 100: the root is page 1, after the file header (sqlite_schema). @return the root */
static uint32_t table_interior(struct sqf *f, struct kid *k, size_t n, unsigned root_hoff)
{
	unsigned U = f->U;
	struct page p;
	if (n == 1 && root_hoff) { /* one leaf too large for page 1: SQLite's own shape then */
		page_start(&p, f->page1, U, root_hoff, INTERIOR_TABLE);
		page_end(&p, k[0].pgno);
		return 1;
	}
	size_t *ends = malloc(n * sizeof *ends);
	if (!ends) {
		fail(f, "out of memory");
		return 0;
	}
	while (n > 1 && !f->err) {
		/* nodes [a, e]: cells (child, largest rowid) for a..e-1, child e on the right */
		size_t nn = 0, used = 0;
		for (size_t a = 0; a < n;) {
			size_t e = a;
			used = 12;
			while (e + 1 < n && used + 6 + vlen((uint64_t)k[e].key) <= U)
				used += 6 + vlen((uint64_t)k[e++].key);
			ends[nn++] = e;
			a = e + 1;
		}
		if (nn > 1 && ends[nn - 1] == ends[nn - 2] + 1)
			ends[nn - 2]--; /* a node needs a cell: the last one takes a child of the
			                   one before */
		if (nn == 1 && root_hoff && used + root_hoff > U) { /* page 1 holds less */
			ends[0] = n / 2 - 1;
			ends[1] = n - 1;
			nn = 2;
		}
		for (size_t j = 0, a = 0; j < nn; j++) {
			int root = nn == 1;
			page_start(&p, root && root_hoff ? f->page1 : f->pg, U,
			           root ? root_hoff : 0, INTERIOR_TABLE);
			for (size_t i = a; i < ends[j]; i++) {
				uint8_t *c = page_cell(&p, 4 + vlen((uint64_t)k[i].key));
				put32(c, k[i].pgno);
				putv(c + 4, (uint64_t)k[i].key);
			}
			page_end(&p, k[ends[j]].pgno);
			struct kid up = {root && root_hoff ? 1 : emit(f, p.b), k[ends[j]].key};
			a = ends[j] + 1;
			k[j] = up; /* j < a: read already */
		}
		n = nn;
	}
	free(ends);
	return k[0].pgno;
}

static void table_finish(struct sqf *f, struct table *t, unsigned root_hoff)
{
	if (!t->nkids) { /* one leaf, maybe empty: the root */
		const struct page *p = &t->leaf;
		page_end(&t->leaf, 0);
		if (!root_hoff) {
			t->root = emit(f, p->b);
			return;
		}
		if (root_hoff + 8 + 2 * p->nc <= p->top) {
			memcpy(f->page1, p->b, f->U);
			memmove(f->page1 + root_hoff, f->page1, 8 + 2 * p->nc);
			t->root = 1;
			return;
		}
	}
	leaf_done(f, t);
	t->root = table_interior(f, t->kids, t->nkids, root_hoff);
}

/* ---- indexes: entries sorted as SQLite orders them, then the B-tree from the bottom up ---- */

/* NULL first, then integers (biased: unsigned order; a NULL's word is 0, so only a tie with
 * INT64_MIN needs the flag), ties in rowid (= insertion) order */
static inline int entry_le(const uint64_t *a, const uint64_t *b, int nk)
{
	for (int k = 0; k < nk; k++) {
		if (a[k] != b[k])
			return a[k] < b[k];
		uint64_t na = a[nk] >> (ROWID_BITS + k) & 1, nb = b[nk] >> (ROWID_BITS + k) & 1;
		if (na != nb)
			return na > nb;
	}
	return 1;
}

static inline void entry_copy(uint64_t *o, const uint64_t *e, size_t s)
{
	for (size_t w = 0; w < s; w++)
		o[w] = e[w];
}

/* Bottom-up merges of the sorted runs that start at run[0..nr) (run[nr] = n), stable; the
 * common case: each process's records come in time order. @return where the result is */
static uint64_t *merge_runs(uint64_t *src, uint64_t *dst, size_t *run, size_t nr, int nk)
{
	size_t s = (size_t)nk + 1;
	while (nr > 1) {
		size_t j = 0;
		for (size_t r = 0; r < nr; r += 2) {
			size_t a = run[r], m = run[r + 1], e = r + 2 <= nr ? run[r + 2] : m;
			size_t i = a, k = m, o = a;
			if (r + 1 < nr)
				while (i < m && k < e) {
					if (entry_le(src + i * s, src + k * s, nk))
						entry_copy(dst + o++ * s, src + i++ * s, s);
					else
						entry_copy(dst + o++ * s, src + k++ * s, s);
				}
			memcpy(dst + o * s, src + i * s, (m - i) * s * sizeof *src);
			o += m - i;
			memcpy(dst + o * s, src + k * s, (e - k) * s * sizeof *src);
			run[j++] = a;
		}
		run[j] = run[nr];
		nr = j;
		uint64_t *t = src;
		src = dst;
		dst = t;
	}
	return src;
}

/* LSD radix sort of key columns [0, nk) of entries of nk0 keys, stable (equal keys keep their
 * order): a pass per key byte that varies, last column first, and a pass per NULL flag.
 * @return where the result is */
static uint64_t *radix(uint64_t *src, uint64_t *dst, size_t n, int nk0, int nk, uint32_t (*h)[256])
{
	size_t s = (size_t)nk0 + 1;
	size_t nulls[SQF_MAX_KEYS] = {0};
	uint64_t diff[SQF_MAX_KEYS] = {0};
	for (size_t i = 0; i < n; i++) {
		const uint64_t *e = src + i * s;
		for (int k = 0; k < nk; k++) {
			diff[k] |= e[k] ^ src[k];
			nulls[k] += e[nk0] >> (ROWID_BITS + k) & 1;
		}
	}
	memset(h, 0, (size_t)nk * 8 * sizeof *h);
	for (size_t i = 0; i < n; i++) {
		const uint64_t *e = src + i * s;
		for (int k = 0; k < nk; k++)
			for (int b = 0; b < 8; b++)
				if (diff[k] >> (8 * b) & 255)
					h[k * 8 + b][e[k] >> (8 * b) & 255]++;
	}
	for (int k = nk - 1; k >= 0; k--) {
		for (int b = 0; b < 8; b++) {
			if (!(diff[k] >> (8 * b) & 255))
				continue; /* every entry has this byte */
			uint32_t *c = h[k * 8 + b];
			size_t off[256], sum = 0;
			for (int d = 0; d < 256; d++) {
				off[d] = sum;
				sum += c[d];
			}
			for (size_t i = 0; i < n; i++) {
				const uint64_t *e = src + i * s;
				entry_copy(dst + off[e[k] >> (8 * b) & 255]++ * s, e, s);
			}
			uint64_t *t = src;
			src = dst;
			dst = t;
		}
		if (nulls[k] && nulls[k] < n) {
			size_t o0 = 0, o1 = nulls[k];
			for (size_t i = 0; i < n; i++) {
				const uint64_t *e = src + i * s;
				entry_copy(dst + (e[nk0] >> (ROWID_BITS + k) & 1 ? o0++ : o1++) * s,
				           e, s);
			}
			uint64_t *t = src;
			src = dst;
			dst = t;
		}
	}
	return src;
}

/* the sorted runs of x[0..n): their starts in run[0..nr), nr > max: more than max */
static size_t count_runs(const uint64_t *w, size_t n, int nk, size_t *run, size_t max)
{
	size_t s = (size_t)nk + 1, nr = 1;
	run[0] = 0;
	for (size_t i = 1; i < n; i++)
		if (!entry_le(w + (i - 1) * s, w + i * s, nk)) {
			if (nr == max)
				return max + 1;
			run[nr++] = i;
		}
	run[nr] = n;
	return nr;
}

/* entry a of a set with rowid base ba before entry b (base bb): keys, then rowid */
static inline int head_less(const uint64_t *a, int64_t ba, const uint64_t *b, int64_t bb, int nk)
{
	const uint64_t low = ((uint64_t)1 << ROWID_BITS) - 1;
	for (int k = 0; k < nk; k++) {
		if (a[k] != b[k])
			return a[k] < b[k];
		uint64_t na = a[nk] >> (ROWID_BITS + k) & 1, nb = b[nk] >> (ROWID_BITS + k) & 1;
		if (na != nb)
			return na > nb;
	}
	return (a[nk] & low) + (uint64_t)ba < (b[nk] & low) + (uint64_t)bb;
}

/* x's sets, each sorted, merged into e in one pass (a heap of their heads), rowids rebased.
 * @return 0, -1 (out of memory: nothing changed) */
static int kmerge(struct index *x)
{
	size_t s = (size_t)x->nk + 1, n = 0, ns = x->nsets;
	const uint64_t lim = (uint64_t)1 << ROWID_BITS, low = lim - 1;
	for (size_t i = 0; i < ns; i++)
		n += x->sets[i].k.n;
	size_t bytes = n * s * sizeof(uint64_t);
	uint64_t *dst = map_grow(NULL, 0, bytes), *o = dst;
	if (!dst)
		return -1;
	/* each set's head and end; the heap orders the sets by their heads, the first key word
	 * deciding most comparisons */
	const uint64_t *h[MERGE_MAX], *end[MERGE_MAX];
	int64_t base[MERGE_MAX];
	int heap[MERGE_MAX], hn = 0, nk = x->nk;
	for (size_t i = 0; i < ns; i++) {
		h[i] = x->sets[i].k.w;
		end[i] = h[i] + x->sets[i].k.n * s;
		base[i] = x->sets[i].base;
	}
#define LESS(i, j)                                                                                 \
	(h[i][0] != h[j][0] ? h[i][0] < h[j][0] : head_less(h[i], base[i], h[j], base[j], nk))
	for (size_t i = 0; i < ns; i++) { /* sift up */
		int c = hn++;
		heap[c] = (int)i;
		while (c && LESS(heap[c], heap[(c - 1) / 2])) {
			int t = heap[c];
			heap[c] = heap[(c - 1) / 2];
			heap[(c - 1) / 2] = t;
			c = (c - 1) / 2;
		}
	}
	while (hn) {
		int i = heap[0];
		const uint64_t *e = h[i];
		uint64_t r = (e[s - 1] & low) + (uint64_t)base[i];
		if (base[i] < 0 || r >= lim) {
			map_free(dst, bytes);
			ix_fail(x, "index %s: rowid %llu out of range", x->name,
			        (unsigned long long)r);
			return 0;
		}
		for (size_t j = 0; j + 1 < s; j++)
			o[j] = e[j];
		o[s - 1] = (e[s - 1] & ~low) | r;
		o += s;
		if ((h[i] += s) == end[i])
			heap[0] = heap[--hn];
		for (int c = 0;;) { /* sift down */
			int l = 2 * c + 1, m = c;
			if (l < hn && LESS(heap[l], heap[m]))
				m = l;
			if (l + 1 < hn && LESS(heap[l + 1], heap[m]))
				m = l + 1;
			if (m == c)
				break;
			int t = heap[c];
			heap[c] = heap[m];
			heap[m] = t;
			c = m;
		}
	}
#undef LESS
	map_free(x->e.w, x->e.bytes);
	x->e = (struct sqf_keys){dst, n, n, bytes};
	return 0;
}

static size_t count_runs(const uint64_t *w, size_t n, int nk, size_t *run, size_t max);

/* x's sets into e: merged when each is sorted (a process's entries mostly are), else appended.
 * @return 1 (e sorted), 0 */
static int gather(struct index *x)
{
	int sorted = 0;
	size_t run[2];
	if (!x->e.n && x->nsets <= MERGE_MAX) {
		sorted = 1;
		for (size_t i = 0; i < x->nsets && sorted; i++)
			sorted = count_runs(x->sets[i].k.w, x->sets[i].k.n, x->nk, run, 1) == 1;
		if (sorted && kmerge(x) != 0)
			sorted = 0;
	}
	for (size_t i = 0; i < x->nsets; i++) {
		if (!sorted && !x->err)
			keys_append(x, &x->sets[i].k, x->sets[i].base);
		sqf_keys_free(&x->sets[i].k);
	}
	free(x->sets);
	x->sets = NULL;
	x->nsets = x->capsets = 0;
	return sorted;
}

/* SQLite's index order: already sorted runs (each process's records come in time order) are
 * merged; else a radix sort on the leading key columns, which is enough where the last column
 * is in order within each group (a process's devices, each in time order), then merges or a
 * full radix sort. Memory: a second copy of the entries while sorting, nk * 8 KiB of counts. */
enum { MERGE_RUNS = 64 };
static void index_sort(struct index *x)
{
	x->sorted = 1;
	if (x->nsets && (gather(x) || x->err))
		return;
	size_t n = x->e.n, s = (size_t)x->nk + 1, run[MERGE_RUNS + 1];
	size_t nr = count_runs(x->e.w, n, x->nk, run, MERGE_RUNS);
	if (nr == 1)
		return;
	size_t tbytes = n * s * sizeof *x->e.w;
	uint64_t *tmp = map_grow(NULL, 0, tbytes), *res = x->e.w;
	uint32_t(*h)[256] = nr > MERGE_RUNS ? malloc((size_t)x->nk * 8 * sizeof *h) : NULL;
	if (!tmp || (nr > MERGE_RUNS && !h)) {
		map_free(tmp, tbytes);
		free(h);
		ix_fail(x, "out of memory sorting index %s", x->name);
		return;
	}
	if (nr > MERGE_RUNS && x->nk > 1) {
		res = radix(res, res == x->e.w ? tmp : x->e.w, n, x->nk, x->nk - 1, h);
		nr = count_runs(res, n, x->nk, run, MERGE_RUNS);
	}
	if (nr > MERGE_RUNS)
		res = radix(res, res == x->e.w ? tmp : x->e.w, n, x->nk, x->nk, h);
	else if (nr > 1)
		res = merge_runs(res, res == x->e.w ? tmp : x->e.w, run, nr, x->nk);
	if (res == x->e.w)
		map_free(tmp, tbytes);
	else {
		map_free(x->e.w, x->e.bytes);
		x->e.w = res;
		x->e.bytes = tbytes;
		x->e.cap = n;
	}
	free(h);
}

static uint32_t index_build(struct sqf *f, struct index *x);

/* x's B-tree built now into x->pages, its pages numbered from 1 (the writer adds where they
 * land), on the caller's thread: a shell of f with its own scratch page and error */
static void index_prebuild(const struct sqf *f, struct index *x)
{
	struct sqf *p = calloc(1, sizeof *p);
	if (!p || !(p->pg = malloc(f->U))) {
		free(p);
		ix_fail(x, "out of memory building index %s", x->name);
		return;
	}
	p->U = f->U;
	p->pre = x;
	uint32_t root = index_build(p, x);
	if (p->err)
		ix_fail(x, "%s", p->msg);
	else
		x->proot = root;
	free(p->pg);
	free(p);
}

void sqf_index_sort(struct sqf *f, int ix, int build)
{
	struct index *x = &f->ix[ix];
	if (!x->err && !x->sorted)
		index_sort(x);
	if (build && !x->err && !x->proot)
		index_prebuild(f, x);
}

/* x's pages built ahead, into the file after those numbered so far: child numbers of its
 * interior pages made the file's. @return its root */
static uint32_t index_place(struct sqf *f, struct index *x)
{
	uint32_t base = f->npages;
	for (size_t k = 0; k < x->npg && !f->err; k++) {
		uint8_t *p = x->pages + k * f->U;
		if (p[0] == INTERIOR_INDEX) {
			unsigned nc = (unsigned)p[3] << 8 | p[4];
			put32(p + 8, get32(p + 8) + base);
			for (unsigned i = 0; i < nc; i++) {
				unsigned off = (unsigned)p[12 + 2 * i] << 8 | p[13 + 2 * i];
				put32(p + off, get32(p + off) + base);
			}
		}
		emit(f, p);
	}
	map_free(x->pages, x->pgbytes);
	x->pages = NULL;
	return base + x->proot;
}

/* entry e's record (keys, then rowid) into r: @return its size, at most ENTRY_MAX (the header
 * has nk + 2 bytes: every serial type is one byte); writes up to 8 bytes past it */
static size_t entry_record(const struct index *x, const uint64_t *e, uint8_t *r)
{
	int nk = x->nk;
	uint64_t nulls = e[nk] >> ROWID_BITS;
	uint8_t *o = r + nk + 2;
	r[0] = (uint8_t)(nk + 2);
	for (int k = 0; k <= nk; k++) {
		unsigned len;
		if (k < nk && nulls >> k & 1) {
			r[1 + k] = 0;
			continue;
		}
		int64_t v = k < nk ? (int64_t)(e[k] ^ KEY_BIAS)
		                   : (int64_t)(e[nk] & (((uint64_t)1 << ROWID_BITS) - 1));
		r[1 + k] = (uint8_t)int_type(v, &len);
		if (len)
			o = put_int(o, v, len);
	}
	return (size_t)(o - r);
}

/* the largest record of an index entry: header, NULL/integer types, 8-byte bodies */
enum { ENTRY_MAX = 1 + SQF_MAX_KEYS + 1 + 8 * (SQF_MAX_KEYS + 1) };

/* an index's tree being built, level by level from the leaves */
struct ibuild {
	size_t *item, *ends;  /* the entries that go up a level; where each run of a level ends */
	uint32_t *child, *up; /* the pages of the level built; of the one above it */
	uint8_t *other;       /* a second leaf (f->pg the first): one is held back while filling */
	size_t m;             /* entries in item */
};

/* nothing after the last entry gone up, item[m - 1]: the entry before it (q's last) goes up
 * instead, the last one to the empty leaf p. @return 0, or -1 (failed) */
static int last_up_back(struct sqf *f, const struct index *x, size_t *item, size_t m,
                        struct page *p, struct page *q)
{
	size_t s = (size_t)x->nk + 1, last = item[m - 1];
	uint8_t r[ENTRY_MAX + 8];
	size_t len = entry_record(x, x->e.w + (last - 1) * s, r);
	if (q->nc < 2) {
		fail(f, "index %s: page too small", x->name);
		return -1;
	}
	memset(q->b + q->top, 0, 1 + len);
	q->top += (unsigned)(1 + len);
	q->nc--;
	put16(q->b + 8 + 2 * q->nc, 0);
	item[m - 1] = last - 1;
	len = entry_record(x, x->e.w + last * s, r);
	uint8_t *c = page_cell(p, 1 + len);
	c[0] = (uint8_t)len;
	memcpy(c + 1, r, len);
	return 0;
}

/* the leaves of sorted x, filled in order (their pages in b->child); an entry that does not fit
 * goes up between two leaves (into b->item). @return 0, or -1 (failed) */
static int index_leaves(struct sqf *f, const struct index *x, struct ibuild *b)
{
	struct page p, q = {0}; /* the leaf being filled; the one before it, held back */
	size_t n = x->e.n, s = (size_t)x->nk + 1, m = 0, nleaf = 0;
	uint8_t r[ENTRY_MAX + 8];
	int held = 0;
	page_start(&p, f->pg, f->U, 0, LEAF_INDEX);
	for (size_t i = 0; i < n; i++) {
		size_t len = entry_record(x, x->e.w + i * s, r);
		if (!page_fits(&p, 1 + len)) {
			if (held) {
				page_end(&q, 0);
				b->child[nleaf++] = emit(f, q.b);
			}
			q = p;
			held = 1;
			page_start(&p, q.b == f->pg ? b->other : f->pg, f->U, 0, LEAF_INDEX);
			b->item[m++] = i;
			continue;
		}
		uint8_t *c = page_cell(&p, 1 + len);
		c[0] = (uint8_t)len; /* < 128: a one-byte varint */
		memcpy(c + 1, r, len);
	}
	b->m = m;
	if (!p.nc && held && last_up_back(f, x, b->item, m, &p, &q) < 0)
		return -1;
	if (held) {
		page_end(&q, 0);
		b->child[nleaf++] = emit(f, q.b);
	}
	page_end(&p, 0);
	b->child[nleaf++] = emit(f, p.b);
	return 0;
}

/* where the runs of the level above b->item[0..m) end: in b->ends, the last one at m.
 * @return their number, or 0 (failed) */
static size_t level_runs(struct sqf *f, const struct index *x, struct ibuild *b)
{
	unsigned cap = f->U - 12;
	size_t s = (size_t)x->nk + 1, m = b->m, nr = 0, used = 0, start = 0, last_start = 0;
	uint8_t r[ENTRY_MAX + 8];
	for (size_t i = 0; i < m; i++) {
		/* pointer, child, size varint, record */
		size_t c = 2 + 4 + 1 + entry_record(x, x->e.w + b->item[i] * s, r);
		if (used + c <= cap)
			used += c;
		else { /* item i goes up; a run of at least one cell is done */
			b->ends[nr++] = i;
			last_start = start;
			start = i + 1;
			used = 0;
		}
	}
	if (nr && b->ends[nr - 1] == m - 1) { /* nothing after the last one moved up */
		if (b->ends[nr - 1] - last_start < 2) {
			fail(f, "index %s: page too small", x->name);
			return 0;
		}
		b->ends[nr - 1]--;
	}
	b->ends[nr++] = m;
	return nr;
}

/* the pages of the level above, one a run of b->ends[0..nr): their numbers in b->up */
static void level_emit(struct sqf *f, const struct index *x, struct ibuild *b, size_t nr)
{
	struct page p;
	size_t s = (size_t)x->nk + 1;
	uint8_t r[ENTRY_MAX + 8];
	for (size_t j = 0, a = 0; j < nr; j++) {
		page_start(&p, f->pg, f->U, 0, INTERIOR_INDEX);
		for (size_t i = a; i < b->ends[j]; i++) {
			size_t len = entry_record(x, x->e.w + b->item[i] * s, r);
			uint8_t *c = page_cell(&p, 4 + 1 + len);
			put32(c, b->child[i]);
			c[4] = (uint8_t)len;
			memcpy(c + 5, r, len);
		}
		page_end(&p, b->child[b->ends[j]]);
		b->up[j] = emit(f, f->pg);
		a = b->ends[j] + 1;
	}
}

/* each level above the leaves: runs of cells (child, entry), one entry moved up between two
 * runs, each run's right child the child of the entry after it; the last run ends at m.
 * @return the root */
static uint32_t index_levels(struct sqf *f, const struct index *x, struct ibuild *b)
{
	uint32_t root = b->child[0];
	while (b->m && !f->err) {
		size_t nr = level_runs(f, x, b);
		if (!nr)
			break;
		level_emit(f, x, b, nr);
		root = b->up[0];
		for (size_t j = 0; j + 1 < nr; j++)
			b->item[j] = b->item[b->ends[j]];
		uint32_t *t = b->child;
		b->child = b->up;
		b->up = t;
		b->m = nr - 1;
	}
	return root;
}

static uint32_t index_build(struct sqf *f, struct index *x)
{
	uint32_t root = 0;
	if (x->err) {
		fail(f, "%s", x->msg);
		return 0;
	}
	if (local_size(f->U, ENTRY_MAX, 1) < ENTRY_MAX) { /* never at 512 bytes and more */
		fail(f, "index %s: page too small", x->name);
		return 0;
	}
	if (!x->sorted)
		index_sort(x);
	if (x->err) {
		fail(f, "%s", x->msg);
		map_free(x->e.w, x->e.bytes);
		x->e.w = NULL;
		return 0;
	}
	if (!x->e.n) {
		struct page p;
		page_start(&p, f->pg, f->U, 0, LEAF_INDEX);
		page_end(&p, 0);
		return emit(f, f->pg);
	}
	/* a leaf holds 10 entries or more: at most n / 2 go up from the leaves */
	size_t nup = x->e.n / 2 + 2;
	struct ibuild b = {0};
	b.item = malloc(nup * sizeof *b.item);
	b.ends = malloc((nup + 1) * sizeof *b.ends);
	b.child = malloc((nup + 1) * sizeof *b.child);
	b.up = malloc((nup + 1) * sizeof *b.up);
	b.other = malloc(f->U);
	if (!b.item || !b.ends || !b.child || !b.up || !b.other)
		fail(f, "out of memory building index %s", x->name);
	else if (index_leaves(f, x, &b) == 0)
		root = index_levels(f, x, &b);
	free(b.item);
	free(b.ends);
	free(b.child);
	free(b.up);
	free(b.other);
	map_free(x->e.w, x->e.bytes);
	x->e.w = NULL;
	return root;
}

/* ---- the file as a whole --------------------------------------------------------------- */

struct sqf *sqf_open(const char *path, unsigned page_size)
{
	if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1))) {
		errno = EINVAL;
		return NULL;
	}
	struct sqf *f = calloc(1, sizeof *f);
	size_t n = strlen(path);
	if (!f || !(f->path = strdup(path)) || !(f->tmp = malloc(n + 16)) ||
	    !(f->out = malloc(OUTBUF)) || !(f->page1 = calloc(1, page_size)) ||
	    !(f->pg = malloc(page_size)))
		goto fail;
	/* next to the target, so that the rename stays in one file system */
	snprintf(f->tmp, n + 16, "%s.tmp-XXXXXX", path);
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd < 0)
		goto fail;
	/* the mode a plain create gives, not mkstemp's 0600 (umask is read by setting it: the
	 * export writes the database on one thread) */
	mode_t um = umask(0);
	umask(um);
	if (fchmod(f->fd, 0666 & ~um) != 0) {
		int e = errno;
		close(f->fd);
		unlink(f->tmp);
		errno = e;
		goto fail;
	}
	f->paycap = HDR_ROOM + 8 * SQF_MAX_COLS + 8;
	if (!(f->payload = malloc(f->paycap))) {
		close(f->fd);
		unlink(f->tmp);
		errno = ENOMEM;
		goto fail;
	}
	f->U = page_size;
	f->npages = 1;
	f->outoff = page_size;
	return f;
fail:;
	int e = errno ? errno : ENOMEM;
	if (f) {
		free(f->path);
		free(f->tmp);
		free(f->out);
		free(f->page1);
		free(f->pg);
		free(f);
	}
	errno = e;
	return NULL;
}

static void sqf_free(struct sqf *f)
{
	for (int i = 0; i < f->nt; i++) {
		free(f->t[i].name);
		free(f->t[i].sql);
		free(f->t[i].leaf.b);
		free(f->t[i].kids);
	}
	for (int i = 0; i < f->nix; i++) {
		free(f->ix[i].name);
		free(f->ix[i].sql);
		map_free(f->ix[i].e.w, f->ix[i].e.bytes);
		map_free(f->ix[i].pages, f->ix[i].pgbytes);
		for (size_t k = 0; k < f->ix[i].nsets; k++)
			sqf_keys_free(&f->ix[i].sets[k].k);
		free(f->ix[i].sets);
	}
	free(f->path);
	free(f->tmp);
	free(f->out);
	free(f->page1);
	free(f->pg);
	free(f->payload);
	free(f);
}

static void schema_row(struct sqf *f, int schema, const char *type, const char *name,
                       const char *tbl, uint32_t root, const char *sql)
{
	struct sqf_val v[5] = {SQF_S(type), SQF_S(name), SQF_S(tbl), SQF_I(root),
	                       sql ? SQF_S(sql) : SQF_N};
	sqf_insert(f, schema, v);
}

/* the tables' and indexes' trees, then sqlite_schema (its root page 1) */
static void trees_finish(struct sqf *f)
{
	int nt = f->nt;
	for (int i = 0; i < nt && !f->err; i++)
		table_finish(f, &f->t[i], 0);
	for (int i = 0; i < f->nix && !f->err; i++)
		f->ix[i].root = f->ix[i].err     ? (fail(f, "%s", f->ix[i].msg), 0)
		                : f->ix[i].proot ? index_place(f, &f->ix[i])
		                                 : index_build(f, &f->ix[i]);
	/* sqlite_schema as libsqlite3 fills it: each table, its automatic indexes after it, then
	 * the CREATE INDEXes in their order */
	int sch = f->err ? -1 : sqf_table(f, "sqlite_schema", 5, -1, NULL);
	for (int i = 0; i < nt && sch >= 0; i++) {
		const struct table *t = &f->t[i];
		schema_row(f, sch, "table", t->name, t->name, t->root, t->sql);
		for (int k = 0; k < t->nidx; k++)
			if (!f->ix[t->idx[k]].sql)
				schema_row(f, sch, "index", f->ix[t->idx[k]].name, t->name,
				           f->ix[t->idx[k]].root, NULL);
	}
	for (int i = 0; i < f->nix && sch >= 0; i++)
		if (f->ix[i].sql)
			schema_row(f, sch, "index", f->ix[i].name, f->t[f->ix[i].table].name,
			           f->ix[i].root, f->ix[i].sql);
	if (sch >= 0)
		table_finish(f, &f->t[sch], 100);
}

/* the 100-byte file header at the start of page 1 */
static void file_header(struct sqf *f)
{
	uint8_t *h = f->page1;
	memcpy(h, "SQLite format 3", 16);
	put16(h + 16, f->U == 65536 ? 1 : f->U);
	h[18] = h[19] = 1; /* legacy journal: readable and writable by any SQLite 3 */
	h[20] = 0;         /* no reserved bytes per page */
	h[21] = 64;        /* payload fractions, fixed by the format */
	h[22] = 32;
	h[23] = 32;
	put32(h + 24, 1);         /* change counter */
	put32(h + 28, f->npages); /* valid: 92 holds the same change counter */
	memset(h + 32, 0, 8);     /* no freelist */
	put32(h + 40, 1);         /* schema cookie */
	put32(h + 44, 4);         /* schema format 4 */
	memset(h + 48, 0, 8);     /* default cache size, no auto-vacuum */
	put32(h + 56, 1);         /* UTF-8 */
	memset(h + 60, 0, 32);    /* user version, incremental vacuum, application id, reserved */
	put32(h + 92, 1);
	put32(h + 96, SQF_LIBVERSION);
}

/* page 1, written last at offset 0 */
static void page1_write(struct sqf *f)
{
	const uint8_t *h = f->page1;
	size_t done = 0;
	while (done < f->U && !f->err) {
		ssize_t w = pwrite(f->fd, h + done, f->U - done, (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail(f, "write failed: %s", w < 0 ? strerror(errno) : "no progress");
		else
			done += (size_t)w;
	}
}

int sqf_close(struct sqf *f, char *msg, size_t size)
{
	trees_finish(f);
	flush(f);
	file_header(f);
	if (!f->err)
		page1_write(f);
	int fd = f->fd;
	f->fd = -1;
	if (close(fd) != 0 && !f->err)
		fail(f, "write failed: %s", strerror(errno));
	if (!f->err && rename(f->tmp, f->path) != 0)
		fail(f, "cannot rename %s to it: %s", f->tmp, strerror(errno));
	int rc = f->err ? -1 : 0;
	if (rc) {
		unlink(f->tmp);
		snprintf(msg, size, "%s", f->msg);
	}
	sqf_free(f);
	return rc;
}

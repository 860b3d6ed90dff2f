/* export_sqlite.c: the SQLite sink: tables named and laid out like nsys' export where they
 * overlap (CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _RUNTIME, StringIds), plus NCCL calls with
 * communicator and sequence, unified-memory events, link samples, allocations, findings, ranks
 * and steps (schema and example queries: analyzer/EXPORT.md), written as a database file by
 * sqlite_file.c. */
#include <errno.h>    /* errno */
#include <pthread.h>  /* pthread_create */
#include <sys/stat.h> /* lstat */
#include <stdlib.h>   /* calloc */
#include <string.h>   /* strcmp */
#include <unistd.h>   /* sysconf */

#include "export.h"
#include "nvlp_trace.h"
#include "sqlite_file.h"
#include "util.h" /* nvlp_max_threads */

/* 4096, SQLite's default: 64 KiB pages made the export no faster here (README) */
#ifndef XS_PAGE_SIZE
#define XS_PAGE_SIZE 4096
#endif

enum {
	T_RANKS,
	T_STRING,
	T_KERNEL,
	T_MEMCPY,
	T_RUNTIME,
	T_NCCL,
	T_UM,
	T_ALLOC,
	T_LINK,
	T_FINDINGS,
	T_STEPS,
	T_COUNT
};
static const struct {
	const char *name;
	int ncols, ipk; /* ipk: the INTEGER PRIMARY KEY column, -1 none */
	const char *sql;
} tables[T_COUNT] = {
    {"RANKS", 6, 0,
     "CREATE TABLE RANKS(rankId INTEGER PRIMARY KEY, rank INTEGER, host TEXT, pid INTEGER,"
     " path TEXT, offsetNs INTEGER)"},
    {"StringIds", 2, 0, "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL)"},
    {"CUPTI_ACTIVITY_KIND_KERNEL", 17, -1,
     "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,"
     " deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,"
     " demangledName INTEGER REFERENCES StringIds(id), shortName INTEGER REFERENCES"
     " StringIds(id), gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER,"
     " blockY INTEGER, blockZ INTEGER, rankId INTEGER REFERENCES RANKS(rankId),"
     " ncclCallId INTEGER, mangledName INTEGER REFERENCES StringIds(id))"},
    {"CUPTI_ACTIVITY_KIND_MEMCPY", 13, -1,
     "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL,"
     " deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,"
     " bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,"
     " dstDeviceId INTEGER, rankId INTEGER)"},
    {"CUPTI_ACTIVITY_KIND_RUNTIME", 13, -1,
     "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL,"
     " globalTid INTEGER, correlationId INTEGER, nameId INTEGER REFERENCES StringIds(id),"
     " returnValue INTEGER, rankId INTEGER, deviceId INTEGER, bytes INTEGER,"
     " srcDeviceId INTEGER, dstDeviceId INTEGER, peerEnabled INTEGER, ptr INTEGER)"},
    {"NCCL_CALLS", 21, 0,
     "CREATE TABLE NCCL_CALLS(id INTEGER PRIMARY KEY, rankId INTEGER, start INTEGER,"
     " end INTEGER, globalTid INTEGER, nameId INTEGER REFERENCES StringIds(id),"
     " collective TEXT, commHash INTEGER, commId INTEGER, seq INTEGER, count INTEGER,"
     " dtype TEXT, bytes INTEGER, peer INTEGER, rank INTEGER, nranks INTEGER,"
     " deviceId INTEGER, streamId INTEGER, groupDepth INTEGER, gpuStart INTEGER,"
     " gpuEnd INTEGER)"},
    {"UNIFIED_MEMORY_EVENTS", 10, -1,
     "CREATE TABLE UNIFIED_MEMORY_EVENTS(start INTEGER, end INTEGER, counterKind INTEGER,"
     " kind TEXT, address INTEGER, value INTEGER, srcId INTEGER, dstId INTEGER,"
     " rankId INTEGER, allocId INTEGER)"},
    {"ALLOCATIONS", 9, -1,
     "CREATE TABLE ALLOCATIONS(rankId INTEGER, allocId INTEGER, ptr INTEGER, bytes INTEGER,"
     " deviceId INTEGER, migrations INTEGER, flips INTEGER, htodBytes INTEGER,"
     " dtohBytes INTEGER, PRIMARY KEY(rankId, allocId))"},
    {"LINK_SAMPLES", 10, -1,
     "CREATE TABLE LINK_SAMPLES(rankId INTEGER, deviceId INTEGER, start INTEGER, end INTEGER,"
     " nvlTx INTEGER, nvlRx INTEGER, pcieRd INTEGER, pcieWr INTEGER, source INTEGER,"
     " flags INTEGER)"},
    {"FINDINGS", 8, 0,
     "CREATE TABLE FINDINGS(id INTEGER PRIMARY KEY, finding TEXT, severity TEXT, title TEXT,"
     " advice TEXT, rank INTEGER, explainedBy TEXT, evidence TEXT)"},
    {"STEPS", 3, 0, "CREATE TABLE STEPS(step INTEGER PRIMARY KEY, start INTEGER, end INTEGER)"},
};

/* the automatic index of ALLOCATIONS' PRIMARY KEY (sql NULL), then the CREATE INDEXes */
static const struct {
	int table;
	const char *name;
	int nk, cols[3];
	const char *sql;
} indexes[] = {
    {T_ALLOC, "sqlite_autoindex_ALLOCATIONS_1", 2, {0, 1}, NULL},
    {T_KERNEL,
     "kernel_start",
     1,
     {0},
     "CREATE INDEX kernel_start ON CUPTI_ACTIVITY_KIND_KERNEL(start)"},
    {T_KERNEL,
     "kernel_dev",
     3,
     {14, 2, 0},
     "CREATE INDEX kernel_dev ON CUPTI_ACTIVITY_KIND_KERNEL(rankId, deviceId, start)"},
    {T_MEMCPY,
     "memcpy_start",
     1,
     {0},
     "CREATE INDEX memcpy_start ON CUPTI_ACTIVITY_KIND_MEMCPY(start)"},
    {T_RUNTIME,
     "runtime_start",
     1,
     {0},
     "CREATE INDEX runtime_start ON CUPTI_ACTIVITY_KIND_RUNTIME(start)"},
    {T_NCCL, "nccl_coll", 2, {8, 9}, "CREATE INDEX nccl_coll ON NCCL_CALLS(commId, seq)"},
    {T_NCCL, "nccl_start", 1, {2}, "CREATE INDEX nccl_start ON NCCL_CALLS(start)"},
    {T_UM,
     "um_alloc",
     3,
     {8, 9, 0},
     "CREATE INDEX um_alloc ON UNIFIED_MEMORY_EVENTS(rankId, allocId, start)"},
    {T_UM, "um_address", 1, {4}, "CREATE INDEX um_address ON UNIFIED_MEMORY_EVENTS(address)"},
    {T_LINK,
     "link_dev",
     3,
     {0, 1, 2},
     "CREATE INDEX link_dev ON LINK_SAMPLES(rankId, deviceId, start)"},
};

enum { NIX = sizeof indexes / sizeof *indexes };

/* ---- the pipeline: one encoder per process (its rows and index entries, on up to -j threads),
 * one writer (the calling thread) appending each process's rows in process order, the rows of
 * a process in its event order: the file is the one a single thread writes, byte for byte. ---- */

/* Encoded rows travel in chunks of 1 MiB. Bound: encoders of processes after the writer's wait
 * while HOLD bytes are queued in all; the writer's own process waits while TURN_HOLD of its are
 * (it never waits on the others', so the writer always has work coming). */
/* 256 MiB, as the other exports hold (export_io.c's XO_HOLD): with 32 the encoders of later
 * processes waited most of the time, 2.9-3.1 M records/s of wall on 16 cores (8 x 1 M records,
 * tests/gpu/results/run9.txt); 256: 6.5-6.8; 1024: 7.9 */
#ifndef XS_HOLD_MB /* -DXS_HOLD_MB=2: the bound reached by small jobs (its waits tested) */
#define XS_HOLD_MB 256
#endif
enum { CHUNK = 1 << 20, HOLD = XS_HOLD_MB << 20, TURN_HOLD = (XS_HOLD_MB / 8 + 1) << 20 };
enum { POOL = XS_HOLD_MB + 8 }; /* chunks kept for reuse: about as many as may be queued */
struct chunk {
	struct chunk *next;
	size_t len, cap;
	uint8_t b[];
};

/* A chunk holds entries: a kind byte, a 4-byte length, then for a row (kind: its table) the
 * local values the writer maps (extra_of), then the record; for E_STRING a text first seen in
 * the process: its hash (8 bytes), then the text. */
enum { E_STRING = 0xff };
enum { KNAMES = 3 }; /* a kernel's texts: demangledName, shortName, mangledName */
static const int kname_col[KNAMES] = {6, 7, 16};
enum { K_CALL_COL = 15 };
static size_t extra_of(int t) /* KERNEL: 3 name ids, NCCL call id; RUNTIME, NCCL: name id */
{
	return t == T_KERNEL ? 4 * KNAMES + 8 : t == T_RUNTIME || t == T_NCCL ? 4 : 0;
}

struct strtab { /* text hash -> id, open addressing */
	struct sstr {
		uint64_t h;
		int64_t id;
	} * v;
	size_t n, cap;
};

/* the slot of hash h (*fresh: a new one, its id 0). @return NULL (out of memory) */
static int64_t *str_slot(struct strtab *t, uint64_t h, int *fresh)
{
	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct sstr *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		for (size_t i = 0; i < t->cap; i++)
			if (t->v[i].h) {
				size_t j = t->v[i].h & (cap - 1);
				while (v[j].h)
					j = (j + 1) & (cap - 1);
				v[j] = t->v[i];
			}
		free(t->v);
		t->v = v;
		t->cap = cap;
	}
	size_t j = h & (t->cap - 1);
	while (t->v[j].h) {
		if (t->v[j].h == h) { /* 64-bit hash of the text: a collision is not a concern */
			*fresh = 0;
			return &t->v[j].id;
		}
		j = (j + 1) & (t->cap - 1);
	}
	t->v[j].h = h;
	t->n++;
	*fresh = 1;
	return &t->v[j].id;
}

struct sq;
struct sqw { /* one process: its encoder's state, its queue of chunks for the writer */
	struct sq *s;
	size_t r;
	struct strtab str; /* its texts -> local ids 1, 2, ... in the order first seen */
	int64_t nstr, ncall;
	long *kcall; /* NCCL_CALLS local id of each xm_call index */
	struct xm_names *names; /* kernel names demangled */
	size_t nk;
	int64_t rows[T_COUNT]; /* rows so far: the local rowid of each */
	struct sqf_keys keys[NIX];
	struct chunk *cur;       /* being filled */
	struct chunk *q, *qlast; /* for the writer (under s->mu) */
	size_t qbytes;
	int done, rc, oom; /* rc: xe_stream_rank's */
	int direct; /* on the writer's thread, its turn: rows go straight into the database */
	uint64_t recs;
};

struct sq {
	struct sqf *db;
	const struct xm_job *x;
	int tix[T_COUNT][NIX], ntix[T_COUNT]; /* the indexes of each table */
	/* the writer's */
	struct strtab str; /* texts -> StringIds.id */
	int64_t next_id;
	int64_t *map; /* the current process's local text ids -> StringIds.id */
	size_t nmap, capmap;
	int64_t call_base; /* NCCL_CALLS rows of the processes before the current one */
	uint8_t *patch;
	size_t patchcap;
	/* shared, under mu */
	struct sqw *w;
	size_t n, stop; /* processes; the first one not written (a trace failed), n none */
	int threaded;
	pthread_mutex_t mu;
	pthread_cond_t cv_w, cv_p; /* the writer waits on cv_w, the encoders on cv_p */
	size_t next, turn, ndone, held, next_ix, ix_done;
	struct chunk *pool; /* chunks written, for the encoders to fill again (fewer page faults) */
	size_t npool;
	int cancel;               /* atomic: the writer stopped: encoders drop what they make */
	int fatal;                /* atomic: the output failed: index tasks skip their work too */
	int base_oom;             /* no memory for base */
	int64_t (*base)[T_COUNT]; /* rows of each table before each process */
};

#define I SQF_I
#define N SQF_N
#define S SQF_S

/* ---- the writer: a process's entries into the database ------------------------------------ */

/* the StringIds.id of a text (a row of StringIds when it is new). @return it, 0 (failed) */
static int64_t text_global(struct sq *s, uint64_t h, const char *text, size_t len)
{
	int fresh;
	int64_t *id = str_slot(&s->str, h, &fresh);
	if (!id) {
		sqf_fail(s->db, "out of memory");
		return 0;
	}
	if (fresh) {
		*id = ++s->next_id;
		struct sqf_val v[2] = {I(*id), {.type = SQF_TEXT, .n = (uint32_t)len, .s = text}};
		sqf_insert(s->db, T_STRING, v);
	}
	return *id;
}

static void text_def(struct sq *s, uint64_t h, const uint8_t *text, uint32_t len)
{
	int64_t id = text_global(s, h, (const char *)text, len);
	if (!id)
		return;
	if (s->nmap == s->capmap) {
		size_t cap = s->capmap ? 2 * s->capmap : 256;
		int64_t *m = realloc(s->map, cap * sizeof *m);
		if (!m) {
			sqf_fail(s->db, "out of memory");
			return;
		}
		s->map = m;
		s->capmap = cap;
	}
	s->map[s->nmap++] = id;
}

/* a row's record with its local ids made the database's (texts: StringIds.id; NCCL call: +
 * the rows of the processes before). @return the record to store, NULL (failed) */
static const uint8_t *row_ids(struct sq *s, int t, const uint8_t *ex, const uint8_t *rec,
                              size_t *len)
{
	int nn = t == T_KERNEL ? KNAMES : 1, cols[KNAMES + 1], nc = 0;
	int64_t val[KNAMES + 1], call = 0;
	if (t == T_KERNEL)
		memcpy(&call, ex + 4 * KNAMES, 8);
	for (int k = 0; k < nn; k++) {
		uint32_t name;
		memcpy(&name, ex + 4 * k, 4);
		if (!name || name > s->nmap) {
			sqf_fail(s->db, "internal error: a text id out of range");
			return NULL;
		}
		int64_t g = s->map[name - 1];
		if (g == name)
			continue;
		cols[nc] = t == T_KERNEL ? kname_col[k] : t == T_RUNTIME ? 4 : 5;
		val[nc++] = g;
	}
	if (call && s->call_base) { /* columns in increasing order: ncclCallId before mangledName */
		int at = nc;
		while (at && cols[at - 1] > K_CALL_COL) {
			cols[at] = cols[at - 1];
			val[at] = val[at - 1];
			at--;
		}
		cols[at] = K_CALL_COL;
		val[at] = call + s->call_base;
		nc++;
	}
	if (!nc)
		return rec; /* as encoded: the common case */
	size_t need = *len + 9 * (size_t)nc + 9;
	if (need > s->patchcap) {
		uint8_t *b = realloc(s->patch, 2 * need);
		if (!b) {
			sqf_fail(s->db, "out of memory");
			return NULL;
		}
		s->patch = b;
		s->patchcap = 2 * need;
	}
	*len = sqf_record_set(rec, *len, cols, val, nc, s->patch);
	if (!*len) {
		sqf_fail(s->db, "internal error: a malformed record");
		return NULL;
	}
	return s->patch;
}

static void consume(struct sq *s, const struct chunk *c)
{
	for (const uint8_t *p = c->b, *e = c->b + c->len; p < e && !sqf_failed(s->db);) {
		int kind = *p;
		uint32_t len;
		memcpy(&len, p + 1, 4);
		p += 5;
		if (kind == E_STRING) {
			uint64_t h;
			memcpy(&h, p, 8);
			text_def(s, h, p + 8, len);
			p += 8 + len;
			continue;
		}
		size_t x = extra_of(kind), P = len;
		const uint8_t *rec = x ? row_ids(s, kind, p, p + x, &P) : p;
		if (rec)
			sqf_insert_record(s->db, kind, rec, P);
		p += x + len;
	}
}

/* ---- an encoder: a process's events into entries ------------------------------------------ */

/* room for need bytes in w's chunk (the full one handed on). @return where, NULL (no memory) */
static void publish(struct sqw *w);
static uint8_t *room(struct sqw *w, size_t need)
{
	if (w->cur && w->cur->cap - w->cur->len >= need)
		return w->cur->b + w->cur->len;
	publish(w);
	struct sq *s = w->s;
	struct chunk *c = NULL;
	size_t cap = need > CHUNK - sizeof(struct chunk) ? need : CHUNK - sizeof(struct chunk);
	if (s->threaded && cap == CHUNK - sizeof(struct chunk)) {
		pthread_mutex_lock(&s->mu);
		if ((c = s->pool)) {
			s->pool = c->next;
			s->npool--;
		}
		pthread_mutex_unlock(&s->mu);
	}
	if (!c)
		c = malloc(sizeof *c + cap);
	if (!c) {
		w->oom = 1;
		return NULL;
	}
	c->next = NULL;
	c->len = 0;
	c->cap = cap;
	w->cur = c;
	return c->b;
}

static int cancelled(const struct sq *s)
{
	return __atomic_load_n(&s->cancel, __ATOMIC_RELAXED);
}

/* the full chunk to the writer: at once on one thread, else queued (waiting for room) */
static void publish(struct sqw *w)
{
	struct chunk *c = w->cur;
	struct sq *s = w->s;
	w->cur = NULL;
	if (!c || !c->len || !s->threaded) {
		if (c && c->len && !cancelled(s))
			consume(s, c);
		free(c);
		return;
	}
	pthread_mutex_lock(&s->mu);
	if (cancelled(s)) {
		pthread_mutex_unlock(&s->mu);
		free(c);
		return;
	}
	if (w->qlast)
		w->qlast->next = c;
	else
		w->q = c;
	w->qlast = c;
	w->qbytes += c->cap;
	s->held += c->cap;
	pthread_cond_signal(&s->cv_w);
	while (!cancelled(s) && (s->turn == w->r ? w->qbytes > TURN_HOLD : s->held > HOLD))
		pthread_cond_wait(&s->cv_p, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

static int64_t text_id(struct sqw *w, const char *v)
{
	size_t n = strlen(v);
	uint64_t h = nvlp_hash64(v, n, 0x737472ULL) | 1;
	if (w->direct)
		return text_global(w->s, h, v, n);
	int fresh;
	int64_t *id = str_slot(&w->str, h, &fresh);
	if (!id || n > UINT32_MAX || w->nstr == UINT32_MAX) {
		w->oom = 1;
		return 0;
	}
	if (fresh) {
		*id = ++w->nstr;
		uint8_t *p = room(w, 13 + n);
		if (!p)
			return 0;
		uint32_t len = (uint32_t)n;
		p[0] = E_STRING;
		memcpy(p + 1, &len, 4);
		memcpy(p + 5, &h, 8);
		memcpy(p + 13, v, n);
		w->cur->len += 13 + n;
	}
	return *id;
}

/* row v of table t: its index entries, its entry (names (KNAMES of a kernel, else one), call:
 * the local ids the writer maps) */
static void row(struct sqw *w, int t, const struct sqf_val *v, const int64_t *name, int64_t call)
{
	struct sq *s = w->s;
	if (w->oom)
		return;
	if (w->direct) { /* the ids are the database's already */
		w->rows[t]++;
		sqf_insert(s->db, t, v);
		return;
	}
	int64_t rowid = ++w->rows[t];
	for (int k = 0; k < s->ntix[t]; k++)
		if (sqf_keys_add(s->db, s->tix[t][k], &w->keys[s->tix[t][k]], v, rowid)) {
			w->oom = 1;
			return;
		}
	int nc = tables[t].ncols, ipk = tables[t].ipk;
	size_t x = extra_of(t), avail = w->cur ? w->cur->cap - w->cur->len : 0;
	uint8_t *p = w->cur ? w->cur->b + w->cur->len : NULL;
	size_t P = avail > 5 + x ? sqf_record(p + 5 + x, avail - 5 - x, nc, ipk, v) : 0;
	if (!P || 5 + x + SQF_RECORD_ROOM(P, nc) > avail) { /* a new chunk */
		if (!P)
			P = sqf_record(NULL, 0, nc, ipk, v);
		if (P > UINT32_MAX || !(p = room(w, 5 + x + SQF_RECORD_ROOM(P, nc)))) {
			w->oom = 1;
			return;
		}
		sqf_record(p + 5 + x, SQF_RECORD_ROOM(P, nc), nc, ipk, v);
	}
	uint32_t len = (uint32_t)P;
	p[0] = (uint8_t)t;
	memcpy(p + 1, &len, 4);
	for (size_t k = 0; k < (t == T_KERNEL ? KNAMES : x / 4); k++) {
		uint32_t nm = (uint32_t)name[k];
		memcpy(p + 5 + 4 * k, &nm, 4);
	}
	if (t == T_KERNEL)
		memcpy(p + 5 + 4 * KNAMES, &call, 8);
	w->cur->len += 5 + x + P;
}

static void sq_rank(void *ctx, const struct xm_job *x, size_t r)
{
	struct sqw *w = ctx;
	w->nk = xm_ncalls(x, r);
	if (!(w->kcall = calloc(w->nk ? w->nk : 1, sizeof *w->kcall)))
		w->oom = 1;
}

/* An NCCL call: a row of NCCL_CALLS. */
static void sq_nccl(struct sqw *w, const struct xm_job *x, const struct xe_ev *e)
{
	const struct nvlp_rec_nccl *n = e->f;
	/* NCCL_CALLS.id: counted in the process (the writer adds the processes before), or at
	 * once the database's */
	int64_t id = ++w->ncall + (w->direct ? w->s->call_base : 0);
	if (e->call >= 0 && (size_t)e->call < w->nk && w->kcall)
		w->kcall[e->call] = (long)id;
	int64_t name = text_id(w, e->name);
	struct xm_call c = {0};
	if (e->call >= 0)
		xm_call(x, e->rank, (size_t)e->call, &c);
	struct sqf_val v[21] = {I(id),
	                        I(e->rank),
	                        I(e->ts),
	                        I(e->ts + e->dur),
	                        I(n->tid),
	                        I(name),
	                        S(xm_fn_coll((int)n->fn)),
	                        I(n->comm),
	                        e->comm >= 0 ? I(e->comm) : N,
	                        I(n->seq),
	                        I(n->count),
	                        S(nvlp_nccl_dtype_name((int)(int64_t)n->dtype)),
	                        I(n->bytes),
	                        I((int64_t)n->peer),
	                        I((int64_t)n->rank),
	                        I((int64_t)n->nranks),
	                        I((int64_t)n->device),
	                        I(n->cupti_stream),
	                        I(n->group_depth),
	                        c.gpu_start ? I(c.gpu_start) : N,
	                        c.gpu_start ? I(c.gpu_start + c.gpu_dur) : N};
	row(w, T_NCCL, v, &name, 0);
}

/* A CUDA runtime call that moves or places memory: a row of CUPTI_ACTIVITY_KIND_RUNTIME. */
static void sq_api(struct sqw *w, const struct xe_ev *e)
{
	int64_t name = text_id(w, e->name);
	struct sqf_val v[13] = {
	    I(e->ts), I(e->ts + e->dur), N, N, I(name), N, I(e->rank), N, N, N, N, N, N};
	if (e->type == XE_COPY) {
		const struct nvlp_rec_copy *c = e->f;
		v[2] = I(c->tid);
		v[3] = I(c->call_id);
		v[5] = I((int64_t)c->rc);
		v[7] = I((int64_t)c->device);
		v[8] = I(c->bytes);
		v[9] = I((int64_t)c->src_device);
		v[10] = I((int64_t)c->dst_device);
		v[11] = I((int64_t)c->peer_enabled);
		v[12] = I(c->dst);
	} else if (e->type == XE_MANAGED) {
		const struct nvlp_rec_managed *m = e->f;
		v[2] = I(m->tid);
		v[5] = I((int64_t)m->rc);
		v[7] = I((int64_t)m->device);
		v[8] = I(m->bytes);
		v[12] = I(m->ptr);
	} else {
		const struct nvlp_rec_peer *p = e->f;
		v[2] = I(p->tid);
		v[5] = I((int64_t)p->rc);
		v[7] = I((int64_t)p->device);
		v[10] = I((int64_t)p->peer_device);
	}
	row(w, T_RUNTIME, v, &name, 0);
}

/* A kernel: a row of CUPTI_ACTIVITY_KIND_KERNEL, linked to its first NCCL call. */
static void sq_kernel(struct sqw *w, const struct xe_ev *e)
{
	const struct nvlp_rec_kernel *k = e->f;
	const char *full, *shortn;
	if (xm_kernel_names(w->names, e->name, &full, &shortn)) {
		w->oom = 1;
		return;
	}
	int64_t nm[KNAMES] = {text_id(w, full), text_id(w, shortn), text_id(w, e->name)};
	int call = e->ncalls && w->kcall && (size_t)e->calls[0] < w->nk && w->kcall[e->calls[0]];
	int64_t cid = call ? w->kcall[e->calls[0]] : 0;
	struct sqf_val v[17] = {I(e->ts),
	                        I(e->ts + e->dur),
	                        I((int64_t)k->device),
	                        I(k->context),
	                        I(k->stream),
	                        I(k->correlation),
	                        I(nm[0]),
	                        I(nm[1]),
	                        I(k->grid_x),
	                        I(k->grid_y),
	                        I(k->grid_z),
	                        I(k->block_x),
	                        I(k->block_y),
	                        I(k->block_z),
	                        I(e->rank),
	                        call ? I(cid) : N,
	                        I(nm[2])};
	row(w, T_KERNEL, v, nm, cid);
}

/* A GPU copy: a row of CUPTI_ACTIVITY_KIND_MEMCPY. */
static void sq_gpucopy(struct sqw *w, const struct xe_ev *e)
{
	const struct nvlp_rec_gpucopy *c = e->f;
	struct sqf_val v[13] = {I(e->ts),
	                        I(e->ts + e->dur),
	                        I((int64_t)c->device),
	                        I(c->context),
	                        I(c->stream),
	                        I(c->correlation),
	                        I(c->bytes),
	                        I(c->copy_kind),
	                        I(c->src_kind),
	                        I(c->dst_kind),
	                        I((int64_t)c->src_device),
	                        I((int64_t)c->dst_device),
	                        I(e->rank)};
	row(w, T_MEMCPY, v, NULL, 0);
}

/* A unified memory counter: a row of UNIFIED_MEMORY_EVENTS. */
static void sq_um(struct sqw *w, const struct xe_ev *e)
{
	const struct nvlp_rec_um *u = e->f;
	static const char *const kinds[] = {"",           "bytes_htod", "bytes_dtoh",
	                                    "cpu_fault",  "gpu_fault",  "thrashing",
	                                    "throttling", "remote_map", "bytes_dtod"};
	struct sqf_val v[10] = {I(e->ts),           I(e->ts + e->dur),
	                        I(u->counter),      S(u->counter < 9 ? kinds[u->counter] : "other"),
	                        I(u->address),      I(u->value),
	                        I((int64_t)u->src), I((int64_t)u->dst),
	                        I(e->rank),         e->alloc >= 0 ? I(e->alloc) : N};
	row(w, T_UM, v, 0, 0);
}

/* A link counter sample: a row of LINK_SAMPLES. */
static void sq_sample(struct sqw *w, const struct xe_ev *e)
{
	const struct nvlp_rec_linksample *l = e->f;
	struct sqf_val v[10] = {
	    I(e->rank),   I((int64_t)l->device), I(e->ts),      I(e->ts + e->dur), I(l->nvl_tx),
	    I(l->nvl_rx), I(l->pcie_rd),         I(l->pcie_wr), I(l->source),      I(l->flags)};
	row(w, T_LINK, v, 0, 0);
}

static void sq_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	struct sqw *w = ctx;
	if (w->oom || cancelled(w->s))
		return;
	switch (e->type) {
	case XE_NCCL:
		sq_nccl(w, x, e);
		break;
	case XE_COPY:
	case XE_MANAGED:
	case XE_PEER:
		sq_api(w, e);
		break;
	case XE_KERNEL:
		sq_kernel(w, e);
		break;
	case XE_GPUCOPY:
		sq_gpucopy(w, e);
		break;
	case XE_UM:
		sq_um(w, e);
		break;
	case XE_SAMPLE:
		sq_sample(w, e);
		break;
	}
}

/* Process r encoded (on one thread: written as it goes) */
static void encode(struct sq *s, size_t r)
{
	struct sqw *w = &s->w[r];
	struct xe_sink sink = {.ctx = w, .rank = sq_rank, .ev = sq_ev};
	if (!(w->names = xm_names_new()))
		w->oom = 1;
	w->rc = xe_stream_rank(s->x, &sink, r, &w->recs);
	xm_names_free(w->names);
	w->names = NULL;
	if (!w->oom)
		publish(w);
	free(w->cur);
	w->cur = NULL;
	free(w->kcall);
	w->kcall = NULL;
	free(w->str.v);
	w->str.v = NULL;
	pthread_mutex_lock(&s->mu);
	w->done = 1;
	s->ndone++;
	pthread_cond_broadcast(&s->cv_w);
	pthread_cond_broadcast(&s->cv_p);
	pthread_mutex_unlock(&s->mu);
}

/* ---- indexes: each process's entries, rowids made the database's, then sorted; one task per
 * index of an event table, on any thread once every process is encoded ---------------------- */

static int event_index(int i)
{
	return indexes[i].table != T_ALLOC;
}

/* with s->mu held, every process encoded: where the written processes end, and their bases */
static void bases(struct sq *s)
{
	if (s->base)
		return;
	s->stop = s->n;
	for (size_t r = 0; r < s->n; r++)
		if (s->w[r].rc) {
			s->stop = r;
			break;
		}
	s->base = calloc(s->n + 1, sizeof *s->base);
	if (!s->base)
		s->base_oom = 1;
	for (size_t r = 0; r < s->n; r++)
		for (int t = 0; t < T_COUNT; t++)
			s->base[r + 1][t] = s->base[r][t] + s->w[r].rows[t];
}

static void index_task(struct sq *s, int i)
{
	int t = indexes[i].table;
	for (size_t r = 0; r < s->n; r++) {
		if (r < s->stop && s->base && !__atomic_load_n(&s->fatal, __ATOMIC_RELAXED))
			sqf_index_add(s->db, i, &s->w[r].keys[i], s->base[r][t]);
		else
			sqf_keys_free(&s->w[r].keys[i]);
	}
	/* with threads, the B-tree too: the writer then only places its pages */
	if (!__atomic_load_n(&s->fatal, __ATOMIC_RELAXED))
		sqf_index_sort(s->db, i, s->threaded);
}

/* Take index tasks until none is left; waits until every process is encoded */
static void index_tasks(struct sq *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->ndone < s->n)
		pthread_cond_wait(&s->cv_p, &s->mu);
	bases(s);
	for (;;) {
		while (s->next_ix < NIX && !event_index((int)s->next_ix))
			s->next_ix++, s->ix_done++;
		if (s->next_ix >= NIX)
			break;
		int i = (int)s->next_ix++;
		pthread_mutex_unlock(&s->mu);
		index_task(s, i);
		pthread_mutex_lock(&s->mu);
		s->ix_done++;
	}
	pthread_cond_broadcast(&s->cv_w);
	pthread_mutex_unlock(&s->mu);
}

static void *encoder(void *arg)
{
	struct sq *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		size_t r = s->next++;
		pthread_mutex_unlock(&s->mu);
		if (r >= s->n)
			break;
		encode(s, r);
	}
	index_tasks(s);
	return NULL;
}

/* after process r's rows: the next one's NCCL call ids follow; a failure stops the writer */
static int turn_end(struct sq *s, struct sqw *w)
{
	s->call_base += w->rows[T_NCCL];
	s->nmap = 0;
	if (w->oom)
		sqf_fail(s->db, "out of memory");
	return w->rc || sqf_failed(s->db) ? -1 : 0;
}

static void cancel(struct sq *s, int fatal)
{
	pthread_mutex_lock(&s->mu);
	__atomic_store_n(&s->cancel, 1, __ATOMIC_RELAXED);
	if (fatal)
		__atomic_store_n(&s->fatal, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&s->cv_p);
	pthread_mutex_unlock(&s->mu);
}

/* The writer's loop with encoders on other threads: each process's chunks as they come */
static void write_queued(struct sq *s)
{
	for (size_t r = 0; r < s->n; r++) {
		struct sqw *w = &s->w[r];
		pthread_mutex_lock(&s->mu);
		s->turn = r;
		pthread_cond_broadcast(&s->cv_p);
		for (;;) {
			while (!w->q && !w->done)
				pthread_cond_wait(&s->cv_w, &s->mu);
			struct chunk *c = w->q;
			if (!c)
				break;
			w->q = w->qlast = NULL;
			pthread_mutex_unlock(&s->mu);
			size_t freed = 0;
			for (struct chunk *k = c; k; k = k->next) {
				if (!sqf_failed(s->db))
					consume(s, k);
				freed += k->cap;
			}
			pthread_mutex_lock(&s->mu);
			w->qbytes -= freed;
			s->held -= freed;
			for (struct chunk *next; c; c = next) {
				next = c->next;
				if (s->npool < POOL && c->cap == CHUNK - sizeof(struct chunk)) {
					c->next = s->pool;
					c->len = 0;
					s->pool = c;
					s->npool++;
				} else
					free(c);
			}
			pthread_cond_broadcast(&s->cv_p);
		}
		pthread_mutex_unlock(&s->mu);
		if (turn_end(s, w) != 0) {
			cancel(s, sqf_failed(s->db));
			break;
		}
	}
	index_tasks(s);
	pthread_mutex_lock(&s->mu);
	while (s->ix_done < NIX)
		pthread_cond_wait(&s->cv_w, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

/* The same on this thread alone: each process written as it is encoded */
static void write_inline(struct sq *s)
{
	for (size_t r = 0; r < s->n; r++) {
		s->turn = r;
		s->w[r].direct = 1;
		encode(s, r);
		if (turn_end(s, &s->w[r]) != 0) {
			__atomic_store_n(&s->cancel, 1, __ATOMIC_RELAXED);
			if (sqf_failed(s->db))
				__atomic_store_n(&s->fatal, 1, __ATOMIC_RELAXED);
			for (size_t q = r + 1; q < s->n; q++)
				s->w[q].done = 1, s->ndone++;
			break;
		}
	}
	index_tasks(s);
}

/* Encoder threads: -j N, else one per CPU; at most one per process (and 64) */
static size_t encoders(size_t n, int threads)
{
	long ncpu = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = ncpu > 0 ? (size_t)ncpu : 1;
	if (nvlp_max_threads > 0 && nt > (size_t)nvlp_max_threads)
		nt = (size_t)nvlp_max_threads;
	if (nt > n)
		nt = n;
	return nt > 64 ? 64 : nt;
}

/* Every process's rows, through encoders on up to nt threads and this thread writing */
static void stream_all(struct sq *s, size_t nt)
{
	pthread_t th[64];
	size_t started = 0;
	s->threaded = nt > 1;
	if (nt > 1)
		for (size_t i = 0; i < nt; i++)
			if (pthread_create(&th[started], NULL, encoder, s) == 0)
				started++;
	if (!started)
		s->threaded = 0; /* no thread started: no other reader of it */
	if (s->threaded)
		write_queued(s);
	else
		write_inline(s);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

/* A finding's evidence lines joined with "; ", cut at the buffer's end. */
static void finding_evidence(const struct xm_job *x, size_t i, int nev, char *ev, size_t size)
{
	size_t n = 0;
	ev[0] = 0;
	for (int k = 0; k < nev && n < size - 1; k++) {
		char one[300];
		xm_finding_ev(x, i, k, one, sizeof one);
		n += (size_t)snprintf(ev + n, size - n, "%s%s", k ? "; " : "", one);
	}
}

/* The tables of the job as a whole: ranks, allocations, findings, steps. */
static void job_tables(struct sqf *db, const struct xm_job *x)
{
	for (size_t r = 0; r < xm_nranks(x); r++) {
		const struct xm_rank *R = xm_rank(x, r);
		sqf_insert(db, T_RANKS,
		           (struct sqf_val[]){I(r), I(R->rank), S(R->host), I(R->pid), S(R->path),
		                              I(R->offset)});
	}
	for (size_t r = 0; r < xm_nranks(x); r++)
		for (size_t k = 0; k < xm_nallocs(x, r); k++) {
			struct xm_alloc a;
			xm_alloc(x, r, k, &a);
			sqf_insert(db, T_ALLOC,
			           (struct sqf_val[]){I(r), I(k), I(a.ptr), I(a.bytes), I(a.device),
			                              I(a.migrations), I(a.flips), I(a.htod),
			                              I(a.dtoh)});
		}
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		char ev[4096];
		finding_evidence(x, i, f.nev, ev, sizeof ev);
		sqf_insert(db, T_FINDINGS,
		           (struct sqf_val[]){I(i + 1), S(f.id), S(f.sev), S(f.title), S(f.advice),
		                              f.root_rank >= 0 ? I(f.root_rank) : N,
		                              f.explained_by ? S(f.explained_by) : N, S(ev)});
	}
	uint64_t s0, len;
	int n = xm_steps(x, &s0, &len);
	for (int k = 0; k < n; k++)
		sqf_insert(db, T_STEPS,
		           (struct sqf_val[]){I(k), I(s0 + (uint64_t)k * len),
		                              I(s0 + (uint64_t)(k + 1) * len)});
}

static void sq_free(struct sq *s)
{
	for (size_t r = 0; r < s->n; r++) {
		struct sqw *w = &s->w[r];
		for (struct chunk *c = w->q, *next; c; c = next) {
			next = c->next;
			free(c);
		}
		for (int i = 0; i < NIX; i++)
			sqf_keys_free(&w->keys[i]);
		free(w->cur);
		free(w->kcall);
		free(w->str.v);
	}
	for (struct chunk *c = s->pool, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	free(s->w);
	free(s->base);
	free(s->str.v);
	free(s->map);
	free(s->patch);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv_w);
	pthread_cond_destroy(&s->cv_p);
}

int xe_sqlite(const struct xm_job *x, const char *path, int threads, uint64_t *records)
{
	struct sq s = {.x = x, .n = xm_nranks(x)};
	*records = 0;
	/* a fresh database, not rows added to an old one; but only a regular file (or a link) is
	 * replaced: run as root, replacing /dev/null or another device would remove it */
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		fprintf(stderr,
		        "nvlprof: export: %s: not a regular file (sqlite writes a database file)\n",
		        path);
		return -1;
	}
	if (!(s.w = calloc(s.n + 1, sizeof *s.w))) {
		fprintf(stderr, "nvlprof: export: out of memory\n");
		return -1;
	}
	s.db = sqf_open(path, XS_PAGE_SIZE);
	if (!s.db) {
		fprintf(stderr, "nvlprof: export: %s: cannot create database: %s\n", path,
		        strerror(errno));
		free(s.w);
		return -1;
	}
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv_w, NULL);
	pthread_cond_init(&s.cv_p, NULL);
	for (size_t r = 0; r < s.n; r++)
		s.w[r].s = &s, s.w[r].r = r;
	for (int t = 0; t < T_COUNT; t++)
		sqf_table(s.db, tables[t].name, tables[t].ncols, tables[t].ipk, tables[t].sql);
	for (int i = 0; i < NIX; i++) {
		sqf_index(s.db, indexes[i].table, indexes[i].name, indexes[i].sql, indexes[i].cols,
		          indexes[i].nk);
		s.tix[indexes[i].table][s.ntix[indexes[i].table]++] = i;
	}
	s.stop = s.n;
	/* the job's tables first, as one thread writes them: with threads, while the encoders
	 * start on the processes */
	size_t nt = encoders(s.n, threads);
	job_tables(s.db, x);
	stream_all(&s, nt);
	if (s.base_oom)
		sqf_fail(s.db, "out of memory");
	int rc = 0;
	for (size_t r = 0; r < s.n && r <= s.stop; r++) {
		*records += s.w[r].recs;
		rc |= s.w[r].rc;
	}
	char msg[256];
	int err = sqf_close(s.db, msg, sizeof msg);
	if (err)
		fprintf(stderr, "nvlprof: export: %s: %s\n", path, msg);
	sq_free(&s);
	return rc || err ? -1 : 0;
}

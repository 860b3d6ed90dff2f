/* export_sqlite.c: the SQLite sink: tables named and laid out like nsys' export where they
 * overlap (CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _RUNTIME, StringIds), plus NCCL calls with
 * communicator and sequence, unified-memory events, link samples, allocations, findings, ranks
 * and steps (schema and example queries: docs/EXPORTS.md), written through libsqlite3. */
#include <errno.h>    /* errno */
#include <fcntl.h>    /* O_CLOEXEC */
#include <sqlite3.h>  /* sqlite3_open_v2 */
#include <sys/stat.h> /* lstat, fchmod */
#include <stdlib.h>   /* mkostemp */
#include <string.h>   /* strerror */
#include <unistd.h>   /* unlink */

#include "util/diag.h"
#include "out/export.h"
#include "nvlp_trace.h"

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
/* in the order of sqlite_schema (and so of .dump) */
static const struct {
	const char *name;
	int ncols;
	const char *sql;
} tables[T_COUNT] = {
    {"RANKS", 6,
     "CREATE TABLE RANKS(rankId INTEGER PRIMARY KEY, rank INTEGER, host TEXT, pid INTEGER,"
     " path TEXT, offsetNs INTEGER)"},
    {"StringIds", 2, "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL)"},
    {"CUPTI_ACTIVITY_KIND_KERNEL", 17,
     "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,"
     " deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,"
     " demangledName INTEGER REFERENCES StringIds(id), shortName INTEGER REFERENCES"
     " StringIds(id), gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER,"
     " blockY INTEGER, blockZ INTEGER, rankId INTEGER REFERENCES RANKS(rankId),"
     " ncclCallId INTEGER, mangledName INTEGER REFERENCES StringIds(id))"},
    {"CUPTI_ACTIVITY_KIND_MEMCPY", 13,
     "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL,"
     " deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,"
     " bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,"
     " dstDeviceId INTEGER, rankId INTEGER)"},
    {"CUPTI_ACTIVITY_KIND_RUNTIME", 13,
     "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL,"
     " globalTid INTEGER, correlationId INTEGER, nameId INTEGER REFERENCES StringIds(id),"
     " returnValue INTEGER, rankId INTEGER, deviceId INTEGER, bytes INTEGER,"
     " srcDeviceId INTEGER, dstDeviceId INTEGER, peerEnabled INTEGER, ptr INTEGER)"},
    {"NCCL_CALLS", 21,
     "CREATE TABLE NCCL_CALLS(id INTEGER PRIMARY KEY, rankId INTEGER, start INTEGER,"
     " end INTEGER, globalTid INTEGER, nameId INTEGER REFERENCES StringIds(id),"
     " collective TEXT, commHash INTEGER, commId INTEGER, seq INTEGER, count INTEGER,"
     " dtype TEXT, bytes INTEGER, peer INTEGER, rank INTEGER, nranks INTEGER,"
     " deviceId INTEGER, streamId INTEGER, groupDepth INTEGER, gpuStart INTEGER,"
     " gpuEnd INTEGER)"},
    {"UNIFIED_MEMORY_EVENTS", 10,
     "CREATE TABLE UNIFIED_MEMORY_EVENTS(start INTEGER, end INTEGER, counterKind INTEGER,"
     " kind TEXT, address INTEGER, value INTEGER, srcId INTEGER, dstId INTEGER,"
     " rankId INTEGER, allocId INTEGER)"},
    {"ALLOCATIONS", 9,
     "CREATE TABLE ALLOCATIONS(rankId INTEGER, allocId INTEGER, ptr INTEGER, bytes INTEGER,"
     " deviceId INTEGER, migrations INTEGER, flips INTEGER, htodBytes INTEGER,"
     " dtohBytes INTEGER, PRIMARY KEY(rankId, allocId))"},
    {"LINK_SAMPLES", 10,
     "CREATE TABLE LINK_SAMPLES(rankId INTEGER, deviceId INTEGER, start INTEGER, end INTEGER,"
     " nvlTx INTEGER, nvlRx INTEGER, pcieRd INTEGER, pcieWr INTEGER, source INTEGER,"
     " flags INTEGER)"},
    {"FINDINGS", 8,
     "CREATE TABLE FINDINGS(id INTEGER PRIMARY KEY, finding TEXT, severity TEXT, title TEXT,"
     " advice TEXT, rank INTEGER, explainedBy TEXT, evidence TEXT)"},
    {"STEPS", 3, "CREATE TABLE STEPS(step INTEGER PRIMARY KEY, start INTEGER, end INTEGER)"},
};

/* built after the rows are in (one sort each instead of a B-tree insert per row) */
static const char indexes[] =
    "CREATE INDEX kernel_start ON CUPTI_ACTIVITY_KIND_KERNEL(start);"
    "CREATE INDEX kernel_dev ON CUPTI_ACTIVITY_KIND_KERNEL(rankId, deviceId, start);"
    "CREATE INDEX memcpy_start ON CUPTI_ACTIVITY_KIND_MEMCPY(start);"
    "CREATE INDEX runtime_start ON CUPTI_ACTIVITY_KIND_RUNTIME(start);"
    "CREATE INDEX nccl_coll ON NCCL_CALLS(commId, seq);"
    "CREATE INDEX nccl_start ON NCCL_CALLS(start);"
    "CREATE INDEX um_alloc ON UNIFIED_MEMORY_EVENTS(rankId, allocId, start);"
    "CREATE INDEX um_address ON UNIFIED_MEMORY_EVENTS(address);"
    "CREATE INDEX link_dev ON LINK_SAMPLES(rankId, deviceId, start);";

/* One column value of a row (text not copied: bound SQLITE_STATIC, used before it changes) */
enum { V_NULL, V_INT, V_TEXT };
struct val {
	int type;
	union {
		int64_t i;
		const char *s;
	};
};
#define I(v) ((struct val){.type = V_INT, .i = (int64_t)(v)})
#define S(v) ((struct val){.type = V_TEXT, .s = (v)})
#define N ((struct val){.type = V_NULL})

struct strtab { /* text hash -> StringIds.id, open addressing */
	struct sstr {
		uint64_t h;
		int64_t id;
	} * v;
	size_t n, cap;
};

struct sq {
	sqlite3 *db;
	sqlite3_stmt *st[T_COUNT];
	const char *path;
	char *tmp; /* the database until it is complete, renamed over path */
	int err;   /* the first failure, said in msg */
	char msg[256];
	struct strtab str;
	int64_t next_id; /* StringIds rows */
	int64_t ncall;   /* NCCL_CALLS rows */
	long *kcall;     /* the current process: NCCL_CALLS.id of each xm_call index */
	size_t nk;
	struct xm_names *names; /* kernel names demangled, per process */
};

/* ---- failures: the first one kept as a one-line reason ----------------------------------- */

static void sq_fail(struct sq *s, const char *why)
{
	if (!s->err)
		snprintf(s->msg, sizeof s->msg, "%s", why);
	s->err = 1;
}

/* The errno of the database file's failed write or read: unix VFS keeps it per file (SQLite's
 * own sqlite3_system_errno reads errno later, when a call since may have changed it). 0: none
 * (SQLITE_FULL: the disk full, or a write cut short) */
static int file_errno(struct sq *s)
{
	int e = 0;
	if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_LAST_ERRNO, &e) != SQLITE_OK)
		e = 0;
	return e ? e : sqlite3_system_errno(s->db);
}

/* SQLite's result code rc said as what happened: memory, a write (errno's words), else
 * SQLite's own message */
static void sq_fail_db(struct sq *s, int rc)
{
	if (s->err)
		return;
	int prim = rc & 0xff, e = file_errno(s);
	s->err = 1;
	if (prim == SQLITE_NOMEM || rc == SQLITE_IOERR_NOMEM)
		snprintf(s->msg, sizeof s->msg, "out of memory");
	else if (prim == SQLITE_FULL || prim == SQLITE_IOERR)
		snprintf(s->msg, sizeof s->msg, "write failed: %s",
		         e                     ? strerror(e)
		         : prim == SQLITE_FULL ? strerror(ENOSPC)
		                               : sqlite3_errstr(rc));
	else
		snprintf(s->msg, sizeof s->msg, "sqlite: %s", sqlite3_errmsg(s->db));
}

static int exec(struct sq *s, const char *sql)
{
	int rc = s->err ? SQLITE_ERROR : sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		sq_fail_db(s, rc);
	return s->err ? -1 : 0;
}

/* A row of table t: ncols values bound to its statement and stepped */
static void row(struct sq *s, int t, const struct val *v)
{
	sqlite3_stmt *st = s->st[t];
	if (s->err)
		return;
	for (int c = 0; c < tables[t].ncols; c++)
		if (v[c].type == V_INT)
			sqlite3_bind_int64(st, c + 1, v[c].i);
		else if (v[c].type == V_TEXT)
			sqlite3_bind_text(st, c + 1, v[c].s, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, c + 1);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		sq_fail_db(s, sqlite3_reset(st));
	else
		sqlite3_reset(st);
}

/* ---- texts: each distinct one a row of StringIds, in the order first seen ----------------- */

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

/* the StringIds.id of a text. @return it, 0 (failed) */
static int64_t text_id(struct sq *s, const char *text)
{
	uint64_t h = nvlp_hash64(text, strlen(text), 0x737472ULL) | 1;
	int fresh;
	int64_t *id = str_slot(&s->str, h, &fresh);
	if (!id) {
		sq_fail(s, "out of memory");
		return 0;
	}
	if (fresh) {
		*id = ++s->next_id;
		row(s, T_STRING, (struct val[]){I(*id), S(text)});
	}
	return *id;
}

/* ---- the events of each process: a row each ---------------------------------------------- */

static void sq_rank(void *ctx, const struct xm_job *x, size_t r)
{
	struct sq *s = ctx;
	free(s->kcall);
	s->nk = xm_ncalls(x, r);
	if (!(s->kcall = calloc(s->nk ? s->nk : 1, sizeof *s->kcall)))
		sq_fail(s, "out of memory");
}

/* An NCCL call: a row of NCCL_CALLS. */
static void sq_nccl(struct sq *s, const struct xm_job *x, const struct xe_ev *e)
{
	const struct nvlp_rec_nccl *n = e->f;
	int64_t id = ++s->ncall;
	if (e->call >= 0 && (size_t)e->call < s->nk)
		s->kcall[e->call] = (long)id;
	int64_t name = text_id(s, e->name);
	struct xm_call c = {0};
	if (e->call >= 0)
		xm_call(x, e->rank, (size_t)e->call, &c);
	struct val v[21] = {I(id),
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
	row(s, T_NCCL, v);
}

/* A CUDA runtime call that moves or places memory: a row of CUPTI_ACTIVITY_KIND_RUNTIME. */
static void sq_api(struct sq *s, const struct xe_ev *e)
{
	int64_t name = text_id(s, e->name);
	struct val v[13] = {
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
	row(s, T_RUNTIME, v);
}

/* A kernel: a row of CUPTI_ACTIVITY_KIND_KERNEL, linked to its first NCCL call. */
static void sq_kernel(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_kernel *k = e->f;
	const char *full, *shortn;
	if (xm_kernel_names(s->names, e->name, &full, &shortn)) {
		sq_fail(s, "out of memory");
		return;
	}
	int64_t nm[3] = {text_id(s, full), text_id(s, shortn), text_id(s, e->name)};
	int call = e->ncalls && (size_t)e->calls[0] < s->nk && s->kcall[e->calls[0]];
	struct val v[17] = {I(e->ts),
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
	                    call ? I(s->kcall[e->calls[0]]) : N,
	                    I(nm[2])};
	row(s, T_KERNEL, v);
}

/* A GPU copy: a row of CUPTI_ACTIVITY_KIND_MEMCPY. */
static void sq_gpucopy(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_gpucopy *c = e->f;
	struct val v[13] = {I(e->ts),
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
	row(s, T_MEMCPY, v);
}

/* A unified memory counter: a row of UNIFIED_MEMORY_EVENTS. */
static void sq_um(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_um *u = e->f;
	static const char *const kinds[] = {"",           "bytes_htod", "bytes_dtoh",
	                                    "cpu_fault",  "gpu_fault",  "thrashing",
	                                    "throttling", "remote_map", "bytes_dtod"};
	struct val v[10] = {I(e->ts),           I(e->ts + e->dur),
	                    I(u->counter),      S(u->counter < 9 ? kinds[u->counter] : "other"),
	                    I(u->address),      I(u->value),
	                    I((int64_t)u->src), I((int64_t)u->dst),
	                    I(e->rank),         e->alloc >= 0 ? I(e->alloc) : N};
	row(s, T_UM, v);
}

/* A link counter sample: a row of LINK_SAMPLES. */
static void sq_sample(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_linksample *l = e->f;
	struct val v[10] = {
	    I(e->rank),   I((int64_t)l->device), I(e->ts),      I(e->ts + e->dur), I(l->nvl_tx),
	    I(l->nvl_rx), I(l->pcie_rd),         I(l->pcie_wr), I(l->source),      I(l->flags)};
	row(s, T_LINK, v);
}

static void sq_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	struct sq *s = ctx;
	if (s->err)
		return;
	switch (e->type) {
	case XE_NCCL:
		sq_nccl(s, x, e);
		break;
	case XE_COPY:
	case XE_MANAGED:
	case XE_PEER:
		sq_api(s, e);
		break;
	case XE_KERNEL:
		sq_kernel(s, e);
		break;
	case XE_GPUCOPY:
		sq_gpucopy(s, e);
		break;
	case XE_UM:
		sq_um(s, e);
		break;
	case XE_SAMPLE:
		sq_sample(s, e);
		break;
	}
}

/* ---- the tables of the job as a whole: ranks, allocations, findings, steps ---------------- */

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

static void job_tables(struct sq *s, const struct xm_job *x)
{
	for (size_t r = 0; r < xm_nranks(x); r++) {
		const struct xm_rank *R = xm_rank(x, r);
		row(s, T_RANKS,
		    (struct val[]){I(r), I(R->rank), S(R->host), I(R->pid), S(R->path),
		                   I(R->offset)});
	}
	for (size_t r = 0; r < xm_nranks(x); r++)
		for (size_t k = 0; k < xm_nallocs(x, r); k++) {
			struct xm_alloc a;
			xm_alloc(x, r, k, &a);
			row(s, T_ALLOC,
			    (struct val[]){I(r), I(k), I(a.ptr), I(a.bytes), I(a.device),
			                   I(a.migrations), I(a.flips), I(a.htod), I(a.dtoh)});
		}
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		char ev[4096];
		finding_evidence(x, i, f.nev, ev, sizeof ev);
		row(s, T_FINDINGS,
		    (struct val[]){I(i + 1), S(f.id), S(f.sev), S(f.title), S(f.advice),
		                   f.root_rank >= 0 ? I(f.root_rank) : N,
		                   f.explained_by ? S(f.explained_by) : N, S(ev)});
	}
	uint64_t s0, len;
	int n = xm_steps(x, &s0, &len);
	for (int k = 0; k < n; k++)
		row(s, T_STEPS,
		    (struct val[]){I(k), I(s0 + (uint64_t)k * len),
		                   I(s0 + (uint64_t)(k + 1) * len)});
}

/* Every process's rows, one after the other (the ids of texts and NCCL calls follow process
 * order). @return 0, -1 (a trace failed: said; the processes before it are written) */
static int event_rows(struct sq *s, const struct xm_job *x, uint64_t *records)
{
	struct xe_sink sink = {.ctx = s, .rank = sq_rank, .ev = sq_ev};
	for (size_t r = 0; r < xm_nranks(x) && !s->err; r++) {
		if (!(s->names = xm_names_new())) {
			sq_fail(s, "out of memory");
			break;
		}
		int rc = xe_stream_rank(x, &sink, r, records);
		xm_names_free(s->names);
		s->names = NULL;
		if (rc)
			return -1;
	}
	return 0;
}

/* ---- the file -------------------------------------------------------------------------- */

/* The temporary file next to path (one file system for the rename), with the mode a plain
 * create gives, not mkstemp's 0600. @return 0, -1 (errno set) */
static int make_tmp(struct sq *s)
{
	size_t n = strlen(s->path) + 16;
	if (!(s->tmp = malloc(n))) {
		errno = ENOMEM;
		return -1;
	}
	snprintf(s->tmp, n, "%s.tmp-XXXXXX", s->path);
	int fd = mkostemp(s->tmp, O_CLOEXEC);
	if (fd < 0)
		return -1;
	mode_t um = umask(0); /* read by setting it: the export runs on one thread here */
	umask(um);
	int rc = fchmod(fd, 0666 & ~um);
	int e = errno;
	close(fd);
	if (rc) {
		unlink(s->tmp);
		errno = e;
	}
	return rc;
}

/* The empty database in s->tmp: no journal, no syncs (a file made from scratch, replaced whole
 * if anything fails), the schema, one transaction, a statement per table. @return 0, -1 */
static int sq_open(struct sq *s)
{
	/* no allocation statistics: each of SQLite's mallocs took a global mutex for them. Takes
	 * effect only before SQLite is first used in the process (later refused, harmlessly) */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	int rc = sqlite3_open_v2(s->tmp, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		if (s->db)
			sq_fail_db(s, rc);
		else
			sq_fail(s, "out of memory");
		return -1;
	}
	/* temp_store left to files: the index sorts then work in blocks within cache_size and
	 * spill to a deleted temporary file (temp_store=MEMORY kept every key in memory, one malloc
	 * each: 4-8% more CPU, memory in proportion to the rows) */
	exec(s, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE;"
	        "PRAGMA cache_size=-65536");
	for (int t = 0; t < T_COUNT; t++)
		exec(s, tables[t].sql);
	exec(s, "BEGIN");
	for (int t = 0; t < T_COUNT && !s->err; t++) {
		char sql[256];
		int n = snprintf(sql, sizeof sql, "INSERT INTO %s VALUES(?", tables[t].name);
		for (int c = 1; c < tables[t].ncols; c++)
			n += snprintf(sql + n, sizeof sql - (size_t)n, ",?");
		snprintf(sql + n, sizeof sql - (size_t)n, ")");
		rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st[t], NULL);
		if (rc != SQLITE_OK)
			sq_fail_db(s, rc);
	}
	return s->err ? -1 : 0;
}

/* The indexes, the commit, the close, then the rename over the path (on any failure the
 * temporary file removed, the path untouched). @return 0, -1 (s->msg says why) */
static int sq_close(struct sq *s)
{
	for (int t = 0; t < T_COUNT; t++)
		sqlite3_finalize(s->st[t]);
	exec(s, indexes);
	exec(s, "COMMIT");
	int rc = sqlite3_close(s->db);
	if (rc != SQLITE_OK && !s->err) {
		snprintf(s->msg, sizeof s->msg, "cannot close database: %s", sqlite3_errstr(rc));
		s->err = 1;
	}
	if (!s->err && rename(s->tmp, s->path) != 0) {
		snprintf(s->msg, sizeof s->msg, "cannot rename %s to it: %s", s->tmp,
		         strerror(errno));
		s->err = 1;
	}
	if (s->err)
		unlink(s->tmp);
	return s->err ? -1 : 0;
}

int xe_sqlite(const struct xm_job *x, const char *path, int threads, uint64_t *records)
{
	(void)threads;
	struct sq s = {.path = path};
	*records = 0;
	/* a fresh database, not rows added to an old one; but only a regular file (or a link) is
	 * replaced: run as root, replacing /dev/null or another device would remove it */
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		an_diag(
		        "nvlprof: export: %s: not a regular file (sqlite writes a database file)\n",
		        path);
		return -1;
	}
	if (make_tmp(&s) != 0) {
		an_diag("nvlprof: export: %s: cannot create database: %s\n", path,
		        strerror(errno));
		free(s.tmp);
		return -1;
	}
	int rc = 0;
	if (sq_open(&s) == 0) {
		job_tables(&s, x);
		rc = event_rows(&s, x, records);
	}
	int err = sq_close(&s);
	if (err)
		an_diag("nvlprof: export: %s: %s\n", path, s.msg);
	free(s.tmp);
	free(s.str.v);
	free(s.kcall);
	return rc || err ? -1 : 0;
}

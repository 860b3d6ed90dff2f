/* export_sqlite.c: the SQLite sink: tables named and laid out like nsys' export where they
 * overlap (CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _RUNTIME, StringIds), plus NCCL calls with
 * communicator and sequence, unified-memory events, link samples, allocations, findings, ranks
 * and steps (schema and example queries: analyzer/EXPORT.md). */
#include <sqlite3.h>   /* sqlite3_open */
#include <sys/stat.h> /* lstat */
#include <stdlib.h>  /* calloc */
#include <string.h>  /* strcmp */
#include <unistd.h>  /* unlink */

#include "export.h"
#include "nvlp_trace.h"

static const char schema[] =
    "CREATE TABLE RANKS(rankId INTEGER PRIMARY KEY, rank INTEGER, host TEXT, pid INTEGER,"
    " path TEXT, offsetNs INTEGER);\n"
    "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,"
    " demangledName INTEGER REFERENCES StringIds(id), shortName INTEGER REFERENCES"
    " StringIds(id), gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER,"
    " blockY INTEGER, blockZ INTEGER, rankId INTEGER REFERENCES RANKS(rankId),"
    " ncclCallId INTEGER);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,"
    " bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,"
    " dstDeviceId INTEGER, rankId INTEGER);\n"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL,"
    " globalTid INTEGER, correlationId INTEGER, nameId INTEGER REFERENCES StringIds(id),"
    " returnValue INTEGER, rankId INTEGER, deviceId INTEGER, bytes INTEGER,"
    " srcDeviceId INTEGER, dstDeviceId INTEGER, peerEnabled INTEGER, ptr INTEGER);\n"
    "CREATE TABLE NCCL_CALLS(id INTEGER PRIMARY KEY, rankId INTEGER, start INTEGER,"
    " end INTEGER, globalTid INTEGER, nameId INTEGER REFERENCES StringIds(id),"
    " collective TEXT, commHash INTEGER, commId INTEGER, seq INTEGER, count INTEGER,"
    " dtype TEXT, bytes INTEGER, peer INTEGER, rank INTEGER, nranks INTEGER,"
    " deviceId INTEGER, streamId INTEGER, groupDepth INTEGER, gpuStart INTEGER,"
    " gpuEnd INTEGER);\n"
    "CREATE TABLE UNIFIED_MEMORY_EVENTS(start INTEGER, end INTEGER, counterKind INTEGER,"
    " kind TEXT, address INTEGER, value INTEGER, srcId INTEGER, dstId INTEGER,"
    " rankId INTEGER, allocId INTEGER);\n"
    "CREATE TABLE ALLOCATIONS(rankId INTEGER, allocId INTEGER, ptr INTEGER, bytes INTEGER,"
    " deviceId INTEGER, migrations INTEGER, flips INTEGER, htodBytes INTEGER,"
    " dtohBytes INTEGER, PRIMARY KEY(rankId, allocId));\n"
    "CREATE TABLE LINK_SAMPLES(rankId INTEGER, deviceId INTEGER, start INTEGER, end INTEGER,"
    " nvlTx INTEGER, nvlRx INTEGER, pcieRd INTEGER, pcieWr INTEGER, source INTEGER,"
    " flags INTEGER);\n"
    "CREATE TABLE FINDINGS(id INTEGER PRIMARY KEY, finding TEXT, severity TEXT, title TEXT,"
    " advice TEXT, rank INTEGER, explainedBy TEXT, evidence TEXT);\n"
    "CREATE TABLE STEPS(step INTEGER PRIMARY KEY, start INTEGER, end INTEGER);\n";

static const char indexes[] =
    "CREATE INDEX kernel_start ON CUPTI_ACTIVITY_KIND_KERNEL(start);\n"
    "CREATE INDEX kernel_dev ON CUPTI_ACTIVITY_KIND_KERNEL(rankId, deviceId, start);\n"
    "CREATE INDEX memcpy_start ON CUPTI_ACTIVITY_KIND_MEMCPY(start);\n"
    "CREATE INDEX runtime_start ON CUPTI_ACTIVITY_KIND_RUNTIME(start);\n"
    "CREATE INDEX nccl_coll ON NCCL_CALLS(commId, seq);\n"
    "CREATE INDEX nccl_start ON NCCL_CALLS(start);\n"
    "CREATE INDEX um_alloc ON UNIFIED_MEMORY_EVENTS(rankId, allocId, start);\n"
    "CREATE INDEX um_address ON UNIFIED_MEMORY_EVENTS(address);\n"
    "CREATE INDEX link_dev ON LINK_SAMPLES(rankId, deviceId, start);\n";

enum { S_KERNEL, S_MEMCPY, S_RUNTIME, S_NCCL, S_UM, S_LINK, S_STRING, S_COUNT };
static const char *const stmts[S_COUNT] = {
    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO NCCL_CALLS VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO UNIFIED_MEMORY_EVENTS VALUES(?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO LINK_SAMPLES VALUES(?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO StringIds VALUES(?,?)",
};

struct sq {
	sqlite3 *db;
	sqlite3_stmt *st[S_COUNT];
	int err;
	/* strings: name -> id, open addressing on the pointer's text hash */
	struct sstr {
		uint64_t h;
		int64_t id;
	} * str;
	size_t nstr, capstr;
	int64_t next_id, ncall;
	long *kcall; /* per process: NCCL_CALLS.id of each xm_call index */
	size_t nk;
};

static void fail(struct sq *s, const char *what)
{
	if (!s->err)
		fprintf(stderr, "nvlprof: export: sqlite: %s: %s\n", what, sqlite3_errmsg(s->db));
	s->err = 1;
}

static void run(struct sq *s, sqlite3_stmt *st)
{
	if (sqlite3_step(st) != SQLITE_DONE)
		fail(s, "insert");
	sqlite3_reset(st);
}

static int64_t string_id(struct sq *s, const char *v)
{
	uint64_t h = nvlp_hash64(v, strlen(v), 0x737472ULL) | 1;
	if (2 * (s->nstr + 1) > s->capstr) {
		size_t cap = s->capstr ? 2 * s->capstr : 1024;
		struct sstr *t = calloc(cap, sizeof *t);
		if (!t)
			return 0;
		for (size_t i = 0; i < s->capstr; i++)
			if (s->str[i].h) {
				size_t j = s->str[i].h & (cap - 1);
				while (t[j].h)
					j = (j + 1) & (cap - 1);
				t[j] = s->str[i];
			}
		free(s->str);
		s->str = t;
		s->capstr = cap;
	}
	size_t j = h & (s->capstr - 1);
	while (s->str[j].h) {
		if (s->str[j].h == h) /* 64-bit hash of the text: a collision is not a concern */
			return s->str[j].id;
		j = (j + 1) & (s->capstr - 1);
	}
	s->str[j].h = h;
	s->str[j].id = ++s->next_id;
	s->nstr++;
	sqlite3_stmt *st = s->st[S_STRING];
	sqlite3_bind_int64(st, 1, s->next_id);
	sqlite3_bind_text(st, 2, v, -1, SQLITE_TRANSIENT);
	run(s, st);
	return s->next_id;
}

#define BI(st, i, v) sqlite3_bind_int64(st, i, (sqlite3_int64)(v))

static void sq_rank(void *ctx, const struct xm_job *x, size_t r)
{
	struct sq *s = ctx;
	free(s->kcall);
	s->nk = xm_ncalls(x, r);
	s->kcall = calloc(s->nk ? s->nk : 1, sizeof *s->kcall);
}

/* An NCCL call: a row of NCCL_CALLS. */
static void sq_nccl(struct sq *s, const struct xm_job *x, const struct xe_ev *e)
{
	const struct nvlp_rec_nccl *n = e->f;
	sqlite3_stmt *st = s->st[S_NCCL];
	int64_t id = ++s->ncall;
	if (e->call >= 0 && (size_t)e->call < s->nk && s->kcall)
		s->kcall[e->call] = (long)id;
	BI(st, 1, id);
	BI(st, 2, e->rank);
	BI(st, 3, e->ts);
	BI(st, 4, e->ts + e->dur);
	BI(st, 5, n->tid);
	BI(st, 6, string_id(s, e->name));
	sqlite3_bind_text(st, 7, xm_fn_coll((int)n->fn), -1, SQLITE_STATIC);
	BI(st, 8, n->comm);
	if (e->comm >= 0)
		BI(st, 9, e->comm);
	else
		sqlite3_bind_null(st, 9);
	BI(st, 10, n->seq);
	BI(st, 11, n->count);
	sqlite3_bind_text(st, 12, nvlp_nccl_dtype_name((int)(int64_t)n->dtype), -1,
	                  SQLITE_STATIC);
	BI(st, 13, n->bytes);
	BI(st, 14, (int64_t)n->peer);
	BI(st, 15, (int64_t)n->rank);
	BI(st, 16, (int64_t)n->nranks);
	BI(st, 17, (int64_t)n->device);
	BI(st, 18, n->cupti_stream);
	BI(st, 19, n->group_depth);
	struct xm_call c = {0};
	if (e->call >= 0)
		xm_call(x, e->rank, (size_t)e->call, &c);
	if (c.gpu_start) {
		BI(st, 20, c.gpu_start);
		BI(st, 21, c.gpu_start + c.gpu_dur);
	} else {
		sqlite3_bind_null(st, 20);
		sqlite3_bind_null(st, 21);
	}
	run(s, st);
}

/* A CUDA runtime call that moves or places memory: a row of CUPTI_ACTIVITY_KIND_RUNTIME. */
static void sq_api(struct sq *s, const struct xe_ev *e)
{
	sqlite3_stmt *st = s->st[S_RUNTIME];
	for (int i = 1; i <= 13; i++)
		sqlite3_bind_null(st, i);
	BI(st, 1, e->ts);
	BI(st, 2, e->ts + e->dur);
	BI(st, 5, string_id(s, e->name));
	BI(st, 7, e->rank);
	if (e->type == XE_COPY) {
		const struct nvlp_rec_copy *c = e->f;
		BI(st, 3, c->tid);
		BI(st, 4, c->call_id);
		BI(st, 6, (int64_t)c->rc);
		BI(st, 8, (int64_t)c->device);
		BI(st, 9, c->bytes);
		BI(st, 10, (int64_t)c->src_device);
		BI(st, 11, (int64_t)c->dst_device);
		BI(st, 12, (int64_t)c->peer_enabled);
		BI(st, 13, c->dst);
	} else if (e->type == XE_MANAGED) {
		const struct nvlp_rec_managed *m = e->f;
		BI(st, 3, m->tid);
		BI(st, 6, (int64_t)m->rc);
		BI(st, 8, (int64_t)m->device);
		BI(st, 9, m->bytes);
		BI(st, 13, m->ptr);
	} else {
		const struct nvlp_rec_peer *p = e->f;
		BI(st, 3, p->tid);
		BI(st, 6, (int64_t)p->rc);
		BI(st, 8, (int64_t)p->device);
		BI(st, 11, (int64_t)p->peer_device);
	}
	run(s, st);
}

/* A kernel: a row of CUPTI_ACTIVITY_KIND_KERNEL, linked to its first NCCL call. */
static void sq_kernel(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_kernel *k = e->f;
	sqlite3_stmt *st = s->st[S_KERNEL];
	int64_t nm = string_id(s, e->name);
	BI(st, 1, e->ts);
	BI(st, 2, e->ts + e->dur);
	BI(st, 3, (int64_t)k->device);
	BI(st, 4, k->context);
	BI(st, 5, k->stream);
	BI(st, 6, k->correlation);
	BI(st, 7, nm);
	BI(st, 8, nm);
	BI(st, 9, k->grid_x);
	BI(st, 10, k->grid_y);
	BI(st, 11, k->grid_z);
	BI(st, 12, k->block_x);
	BI(st, 13, k->block_y);
	BI(st, 14, k->block_z);
	BI(st, 15, e->rank);
	if (e->ncalls && s->kcall && (size_t)e->calls[0] < s->nk && s->kcall[e->calls[0]])
		BI(st, 16, s->kcall[e->calls[0]]);
	else
		sqlite3_bind_null(st, 16);
	run(s, st);
}

/* A GPU copy: a row of CUPTI_ACTIVITY_KIND_MEMCPY. */
static void sq_gpucopy(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_gpucopy *c = e->f;
	sqlite3_stmt *st = s->st[S_MEMCPY];
	BI(st, 1, e->ts);
	BI(st, 2, e->ts + e->dur);
	BI(st, 3, (int64_t)c->device);
	BI(st, 4, c->context);
	BI(st, 5, c->stream);
	BI(st, 6, c->correlation);
	BI(st, 7, c->bytes);
	BI(st, 8, c->copy_kind);
	BI(st, 9, c->src_kind);
	BI(st, 10, c->dst_kind);
	BI(st, 11, (int64_t)c->src_device);
	BI(st, 12, (int64_t)c->dst_device);
	BI(st, 13, e->rank);
	run(s, st);
}

/* A unified memory counter: a row of UNIFIED_MEMORY_EVENTS. */
static void sq_um(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_um *u = e->f;
	static const char *const kinds[] = {"",           "bytes_htod", "bytes_dtoh",
	                                    "cpu_fault",  "gpu_fault",  "thrashing",
	                                    "throttling", "remote_map", "bytes_dtod"};
	sqlite3_stmt *st = s->st[S_UM];
	BI(st, 1, e->ts);
	BI(st, 2, e->ts + e->dur);
	BI(st, 3, u->counter);
	sqlite3_bind_text(st, 4, u->counter < 9 ? kinds[u->counter] : "other", -1,
	                  SQLITE_STATIC);
	BI(st, 5, u->address);
	BI(st, 6, u->value);
	BI(st, 7, (int64_t)u->src);
	BI(st, 8, (int64_t)u->dst);
	BI(st, 9, e->rank);
	if (e->alloc >= 0)
		BI(st, 10, e->alloc);
	else
		sqlite3_bind_null(st, 10);
	run(s, st);
}

/* A link counter sample: a row of LINK_SAMPLES. */
static void sq_sample(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_linksample *l = e->f;
	sqlite3_stmt *st = s->st[S_LINK];
	BI(st, 1, e->rank);
	BI(st, 2, (int64_t)l->device);
	BI(st, 3, e->ts);
	BI(st, 4, e->ts + e->dur);
	BI(st, 5, l->nvl_tx);
	BI(st, 6, l->nvl_rx);
	BI(st, 7, l->pcie_rd);
	BI(st, 8, l->pcie_wr);
	BI(st, 9, l->source);
	BI(st, 10, l->flags);
	run(s, st);
}

static void sq_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	struct sq *s = ctx;
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

static int exec(struct sq *s, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		if (!s->err)
			fprintf(stderr, "nvlprof: export: sqlite: %s\n", msg ? msg : "error");
		sqlite3_free(msg);
		s->err = 1;
		return -1;
	}
	return 0;
}

/* Each table's rows: @return 0, -1 its statement did not prepare (said; no later table) */
static int rank_rows(struct sq *s, const struct xm_job *x)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "INSERT INTO RANKS VALUES(?,?,?,?,?,?)", -1, &st, NULL)) {
		fail(s, "prepare");
		return -1;
	}
	for (size_t r = 0; r < xm_nranks(x); r++) {
		const struct xm_rank *R = xm_rank(x, r);
		BI(st, 1, r);
		BI(st, 2, R->rank);
		sqlite3_bind_text(st, 3, R->host, -1, SQLITE_STATIC);
		BI(st, 4, R->pid);
		sqlite3_bind_text(st, 5, R->path, -1, SQLITE_STATIC);
		BI(st, 6, R->offset);
		run(s, st);
	}
	sqlite3_finalize(st);
	return 0;
}

static int allocation_rows(struct sq *s, const struct xm_job *x)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "INSERT INTO ALLOCATIONS VALUES(?,?,?,?,?,?,?,?,?)", -1, &st,
	                       NULL)) {
		fail(s, "prepare");
		return -1;
	}
	for (size_t r = 0; r < xm_nranks(x); r++)
		for (size_t k = 0; k < xm_nallocs(x, r); k++) {
			struct xm_alloc a;
			xm_alloc(x, r, k, &a);
			BI(st, 1, r);
			BI(st, 2, k);
			BI(st, 3, a.ptr);
			BI(st, 4, a.bytes);
			BI(st, 5, a.device);
			BI(st, 6, a.migrations);
			BI(st, 7, a.flips);
			BI(st, 8, a.htod);
			BI(st, 9, a.dtoh);
			run(s, st);
		}
	sqlite3_finalize(st);
	return 0;
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

static int finding_rows(struct sq *s, const struct xm_job *x)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "INSERT INTO FINDINGS VALUES(?,?,?,?,?,?,?,?)", -1, &st,
	                       NULL)) {
		fail(s, "prepare");
		return -1;
	}
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		char ev[4096];
		finding_evidence(x, i, f.nev, ev, sizeof ev);
		BI(st, 1, i + 1);
		sqlite3_bind_text(st, 2, f.id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, f.sev, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, f.title, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 5, f.advice, -1, SQLITE_STATIC);
		if (f.root_rank >= 0)
			BI(st, 6, f.root_rank);
		else
			sqlite3_bind_null(st, 6);
		if (f.explained_by)
			sqlite3_bind_text(st, 7, f.explained_by, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 7);
		sqlite3_bind_text(st, 8, ev, -1, SQLITE_TRANSIENT);
		run(s, st);
	}
	sqlite3_finalize(st);
	return 0;
}

static int step_rows(struct sq *s, const struct xm_job *x)
{
	sqlite3_stmt *st;
	uint64_t s0, len;
	int n = xm_steps(x, &s0, &len);
	if (sqlite3_prepare_v2(s->db, "INSERT INTO STEPS VALUES(?,?,?)", -1, &st, NULL)) {
		fail(s, "prepare");
		return -1;
	}
	for (int k = 0; k < n; k++) {
		BI(st, 1, k);
		BI(st, 2, s0 + (uint64_t)k * len);
		BI(st, 3, s0 + (uint64_t)(k + 1) * len);
		run(s, st);
	}
	sqlite3_finalize(st);
	return 0;
}

static void job_tables(struct sq *s, const struct xm_job *x)
{
	if (rank_rows(s, x) || allocation_rows(s, x) || finding_rows(s, x))
		return;
	step_rows(s, x);
}

int xe_sqlite(const struct xm_job *x, const char *path, uint64_t *records)
{
	struct sq s = {0};
	*records = 0;
	/* a fresh database, not rows added to an old one; but only a regular file (or a link) is
	 * replaced: run as root, unlinking /dev/null or another device would remove it */
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		fprintf(stderr, "nvlprof: export: %s: not a regular file (sqlite writes a database file)\n",
		        path);
		return -1;
	}
	unlink(path);
	/* no allocation statistics: each of SQLite's mallocs took a global mutex for them. Takes
	 * effect only before SQLite is first used in the process (later it is refused, harmlessly)
	 */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	/* one connection on one thread: no mutex around every bind and step (a fifth of the time
	 * in serialized mode) */
	if (sqlite3_open_v2(path, &s.db,
	                    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
	                    NULL) != SQLITE_OK) {
		fprintf(stderr, "nvlprof: export: %s: cannot create database: %s\n", path,
		        s.db ? sqlite3_errmsg(s.db) : "out of memory");
		sqlite3_close(s.db);
		return -1;
	}
	/* one writer, a file made from scratch: no journal, no syncs, one transaction */
	exec(&s, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA temp_store=MEMORY;"
	         "PRAGMA cache_size=-65536; PRAGMA locking_mode=EXCLUSIVE;");
	exec(&s, schema);
	exec(&s, "BEGIN");
	for (int i = 0; i < S_COUNT && !s.err; i++)
		if (sqlite3_prepare_v3(s.db, stmts[i], -1, SQLITE_PREPARE_PERSISTENT, &s.st[i],
		                       NULL))
			fail(&s, "prepare");
	int rc = -1;
	if (!s.err) {
		job_tables(&s, x);
		struct xe_sink sink = {.ctx = &s, .rank = sq_rank, .ev = sq_ev};
		rc = xe_stream(x, &sink, records);
	}
	for (int i = 0; i < S_COUNT; i++)
		sqlite3_finalize(s.st[i]);
	if (!s.err)
		exec(&s, indexes);
	if (!s.err)
		exec(&s, "COMMIT");
	if (sqlite3_close(s.db) != SQLITE_OK && !s.err) {
		fprintf(stderr, "nvlprof: export: %s: cannot close database\n", path);
		s.err = 1;
	}
	free(s.str);
	free(s.kcall);
	return rc || s.err ? -1 : 0;
}

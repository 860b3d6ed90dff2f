/* export_sqlite.c: the SQLite sink: tables named and laid out like nsys' export where they
 * overlap (CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _RUNTIME, StringIds), plus NCCL calls with
 * communicator and sequence, unified-memory events, link samples, allocations, findings, ranks
 * and steps (schema and example queries: analyzer/EXPORT.md), written as a database file by
 * sqlite_file.c. */
#include <errno.h>    /* errno */
#include <sys/stat.h> /* lstat */
#include <stdlib.h>   /* calloc */
#include <string.h>   /* strcmp */

#include "export.h"
#include "nvlp_trace.h"
#include "sqlite_file.h"

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
    {"CUPTI_ACTIVITY_KIND_KERNEL", 16, -1,
     "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,"
     " deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,"
     " demangledName INTEGER REFERENCES StringIds(id), shortName INTEGER REFERENCES"
     " StringIds(id), gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER,"
     " blockY INTEGER, blockZ INTEGER, rankId INTEGER REFERENCES RANKS(rankId),"
     " ncclCallId INTEGER)"},
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

struct sq {
	struct sqf *db;
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

#define I SQF_I
#define N SQF_N
#define S SQF_S

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
	sqf_insert(s->db, T_STRING, (struct sqf_val[]){I(s->next_id), S(v)});
	return s->next_id;
}

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
	int64_t id = ++s->ncall;
	if (e->call >= 0 && (size_t)e->call < s->nk && s->kcall)
		s->kcall[e->call] = (long)id;
	int64_t name = string_id(s, e->name);
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
	sqf_insert(s->db, T_NCCL, v);
}

/* A CUDA runtime call that moves or places memory: a row of CUPTI_ACTIVITY_KIND_RUNTIME. */
static void sq_api(struct sq *s, const struct xe_ev *e)
{
	struct sqf_val v[13] = {I(e->ts),
	                        I(e->ts + e->dur),
	                        N,
	                        N,
	                        I(string_id(s, e->name)),
	                        N,
	                        I(e->rank),
	                        N,
	                        N,
	                        N,
	                        N,
	                        N,
	                        N};
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
	sqf_insert(s->db, T_RUNTIME, v);
}

/* A kernel: a row of CUPTI_ACTIVITY_KIND_KERNEL, linked to its first NCCL call. */
static void sq_kernel(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_kernel *k = e->f;
	int64_t nm = string_id(s, e->name);
	int call = e->ncalls && s->kcall && (size_t)e->calls[0] < s->nk && s->kcall[e->calls[0]];
	struct sqf_val v[16] = {I(e->ts),
	                        I(e->ts + e->dur),
	                        I((int64_t)k->device),
	                        I(k->context),
	                        I(k->stream),
	                        I(k->correlation),
	                        I(nm),
	                        I(nm),
	                        I(k->grid_x),
	                        I(k->grid_y),
	                        I(k->grid_z),
	                        I(k->block_x),
	                        I(k->block_y),
	                        I(k->block_z),
	                        I(e->rank),
	                        call ? I(s->kcall[e->calls[0]]) : N};
	sqf_insert(s->db, T_KERNEL, v);
}

/* A GPU copy: a row of CUPTI_ACTIVITY_KIND_MEMCPY. */
static void sq_gpucopy(struct sq *s, const struct xe_ev *e)
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
	sqf_insert(s->db, T_MEMCPY, v);
}

/* A unified memory counter: a row of UNIFIED_MEMORY_EVENTS. */
static void sq_um(struct sq *s, const struct xe_ev *e)
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
	sqf_insert(s->db, T_UM, v);
}

/* A link counter sample: a row of LINK_SAMPLES. */
static void sq_sample(struct sq *s, const struct xe_ev *e)
{
	const struct nvlp_rec_linksample *l = e->f;
	struct sqf_val v[10] = {
	    I(e->rank),   I((int64_t)l->device), I(e->ts),      I(e->ts + e->dur), I(l->nvl_tx),
	    I(l->nvl_rx), I(l->pcie_rd),         I(l->pcie_wr), I(l->source),      I(l->flags)};
	sqf_insert(s->db, T_LINK, v);
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
static void job_tables(struct sq *s, const struct xm_job *x)
{
	for (size_t r = 0; r < xm_nranks(x); r++) {
		const struct xm_rank *R = xm_rank(x, r);
		sqf_insert(s->db, T_RANKS,
		           (struct sqf_val[]){I(r), I(R->rank), S(R->host), I(R->pid), S(R->path),
		                              I(R->offset)});
	}
	for (size_t r = 0; r < xm_nranks(x); r++)
		for (size_t k = 0; k < xm_nallocs(x, r); k++) {
			struct xm_alloc a;
			xm_alloc(x, r, k, &a);
			sqf_insert(s->db, T_ALLOC,
			           (struct sqf_val[]){I(r), I(k), I(a.ptr), I(a.bytes), I(a.device),
			                              I(a.migrations), I(a.flips), I(a.htod),
			                              I(a.dtoh)});
		}
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		char ev[4096];
		finding_evidence(x, i, f.nev, ev, sizeof ev);
		sqf_insert(s->db, T_FINDINGS,
		           (struct sqf_val[]){I(i + 1), S(f.id), S(f.sev), S(f.title), S(f.advice),
		                              f.root_rank >= 0 ? I(f.root_rank) : N,
		                              f.explained_by ? S(f.explained_by) : N, S(ev)});
	}
	uint64_t s0, len;
	int n = xm_steps(x, &s0, &len);
	for (int k = 0; k < n; k++)
		sqf_insert(s->db, T_STEPS,
		           (struct sqf_val[]){I(k), I(s0 + (uint64_t)k * len),
		                              I(s0 + (uint64_t)(k + 1) * len)});
}

int xe_sqlite(const struct xm_job *x, const char *path, uint64_t *records)
{
	struct sq s = {0};
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
	s.db = sqf_open(path, XS_PAGE_SIZE);
	if (!s.db) {
		fprintf(stderr, "nvlprof: export: %s: cannot create database: %s\n", path,
		        strerror(errno));
		return -1;
	}
	for (int t = 0; t < T_COUNT; t++)
		sqf_table(s.db, tables[t].name, tables[t].ncols, tables[t].ipk, tables[t].sql);
	for (size_t i = 0; i < sizeof indexes / sizeof *indexes; i++)
		sqf_index(s.db, indexes[i].table, indexes[i].name, indexes[i].sql, indexes[i].cols,
		          indexes[i].nk);
	job_tables(&s, x);
	struct xe_sink sink = {.ctx = &s, .rank = sq_rank, .ev = sq_ev};
	int rc = xe_stream(x, &sink, records);
	char msg[256];
	int err = sqf_close(s.db, msg, sizeof msg);
	if (err)
		fprintf(stderr, "nvlprof: export: %s: %s\n", path, msg);
	free(s.str);
	free(s.kcall);
	return rc || err ? -1 : 0;
}

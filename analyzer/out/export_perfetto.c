/* export_perfetto.c: the Perfetto protobuf sink: a process track per rank, thread tracks for the
 * API calls, GPU tracks per stream, counter tracks for link bandwidth and UM migrations, flows
 * from NCCL calls to their kernels and across the ranks of a collective, findings as instants. */
#include <errno.h> /* errno */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "util/diag.h"
#include "out/export.h"
#include "nvlp_trace.h"
#include "out/pb.h"

/* Perfetto field numbers (see perfetto_trace.proto for the sources) */
enum {
	TRACE_PACKET = 1,
	TP_TIMESTAMP = 8,
	TP_SEQ_ID = 10,
	TP_TRACK_EVENT = 11,
	TP_INTERNED = 12,
	TP_SEQ_FLAGS = 13,
	TP_TRACK_DESC = 60,
	TE_DEBUG = 4,
	TE_CATEGORY_IID = 3,
	TE_NAME_IID = 10,
	TE_TYPE = 9,
	TE_TRACK = 11,
	TE_CATEGORIES = 22,
	TE_NAME = 23,
	TE_DCOUNTER = 44,
	TE_FLOW = 47,
	TE_TFLOW = 48,
	DA_NAME_IID = 1,
	DA_UINT = 3,
	DA_INT = 4,
	DA_DOUBLE = 5,
	DA_STRING = 6,
	DA_NAME = 10,
	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT = 5,
	TD_COUNTER = 8,
	PD_PID = 1,
	PD_NAME = 6,
	THD_PID = 1,
	THD_TID = 2,
	THD_NAME = 5,
	CD_UNIT_NAME = 6,
	SLICE_BEGIN = 1,
	SLICE_END = 2,
	INSTANT = 3,
	COUNTER = 4,
	ID_CATEGORIES = 1, /* InternedData: EventCategory, EventName, DebugAnnotationName */
	ID_NAMES = 2,
	ID_ANN_NAMES = 3,
	IE_IID = 1, /* each of them: iid = 1, name = 2 */
	IE_NAME = 2,
	SEQ_INCREMENTAL_STATE_CLEARED = 1,
	SEQ_NEEDS_INCREMENTAL_STATE = 2,
};

struct ctr { /* a counter track: its last sample's end gets a closing 0 */
	uint64_t uuid, last_e;
};

/* open addressing, key -> value, keys never 0 */
struct map {
	struct slot {
		uint64_t k, v;
	} * s;
	size_t n, cap;
};

/* @return the slot of k (v = 0 when new: the caller sets it), NULL out of memory */
static struct slot *map_get(struct map *m, uint64_t k)
{
	if (2 * (m->n + 1) > m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 256;
		struct slot *t = calloc(cap, sizeof *t);
		if (!t)
			return NULL;
		for (size_t i = 0; i < m->cap; i++)
			if (m->s[i].k) {
				size_t j = xe_mix64(m->s[i].k) & (cap - 1);
				while (t[j].k)
					j = (j + 1) & (cap - 1);
				t[j] = m->s[i];
			}
		free(m->s);
		m->s = t;
		m->cap = cap;
	}
	size_t j = xe_mix64(k) & (m->cap - 1);
	while (m->s[j].k) {
		if (m->s[j].k == k)
			return &m->s[j];
		j = (j + 1) & (m->cap - 1);
	}
	m->s[j].k = k;
	m->s[j].v = 0;
	m->n++;
	return &m->s[j];
}

struct pf {
	FILE *o;       /* the job's sequence: straight to the output */
	struct xo *xo; /* a process's: through the parallel writer, as part */
	size_t part;
	unsigned seq; /* packet sequence: 1 for the job's packets, 2 + r for process r */
	struct pb p;
	int err;
	struct map tracks; /* track uuid -> 1 + index into ctr (counter tracks), or 1 */
	struct map names;  /* interning key -> iid, for event names, categories, arg names */
	uint64_t next_iid;
	/* the last thread and stream tracks: most events land on the track of the one before */
	uint64_t th_key, th_uuid, st_key, st_uuid;
	/* the last link-sample device's two counter tracks (indices into ctr + 1, 0 none):
	 * samples are a third of a trace's records */
	int64_t smp_dev;
	size_t smp_nvl, smp_pcie;
	struct ctr *ctr;
	size_t nctr, capctr;
	int pid; /* Perfetto pid of the current process */
};

static uint64_t uuid_of(size_t r, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t h = xe_mix64(xe_mix64((uint64_t)r + 0x9e3779b97f4a7c15ULL) ^ a);
	return xe_mix64(xe_mix64(h ^ b) ^ c) | 1;
}

static int seen_add(struct pf *s, uint64_t u) /* 1 if newly added */
{
	struct slot *x = map_get(&s->tracks, u);
	if (!x || x->v)
		return 0;
	x->v = 1;
	return 1;
}

/* Interning (Perfetto's InternedData): key -> iid; a new entry is written in a packet of its own
 * just before the packet that uses it. kind: ID_NAMES, ID_CATEGORIES or ID_ANN_NAMES. */
static uint64_t intern(struct pf *s, int kind, uint64_t key, const char *text)
{
	struct slot *x = map_get(&s->names, key << 2 | (uint64_t)kind);
	if (x && x->v)
		return x->v;
	uint64_t iid = ++s->next_iid; /* one counter: iids are never reused, even across kinds */
	if (x)
		x->v = iid;
	size_t pk = pb_begin(&s->p, TRACE_PACKET);
	pb_varint(&s->p, TP_SEQ_ID, s->seq);
	pb_varint(&s->p, TP_SEQ_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
	size_t id = pb_begin(&s->p, TP_INTERNED);
	size_t e = pb_begin(&s->p, (unsigned)kind);
	pb_varint(&s->p, IE_IID, iid);
	pb_str(&s->p, IE_NAME, text);
	pb_end(&s->p, e);
	pb_end(&s->p, id);
	pb_end(&s->p, pk);
	return iid;
}

/* keys for intern(): a tag in the top byte */
#define K_STATIC(p) ((uint64_t)(uintptr_t)(p)) /* static strings: their address */
#define K_KERNEL(rank, id) (1ULL << 58 | (uint64_t)(rank) << 32 | (id))
#define K_COPY(src, dst) (2ULL << 58 | (uint64_t)((src)&0xffff) << 16 | ((dst)&0xffff))

static void flush(struct pf *s)
{
	if (s->p.oom ||
	    (s->xo ? xo_write(s->xo, s->part, s->p.buf, s->p.n) : pb_flush(&s->p, s->o)) != 0)
		s->err = 1;
	s->p.n = 0;
}
static void maybe_flush(struct pf *s)
{
	if (s->p.n >= (1u << 20))
		flush(s);
}

/* A track descriptor packet: kind 0 plain child track, 1 process, 2 thread, 3 counter */
static void desc(struct pf *s, uint64_t uuid, uint64_t parent, int kind, const char *name, int tid,
                 const char *unit)
{
	size_t pk = pb_begin(&s->p, TRACE_PACKET);
	pb_varint(&s->p, TP_SEQ_ID, s->seq);
	size_t td = pb_begin(&s->p, TP_TRACK_DESC);
	pb_varint(&s->p, TD_UUID, uuid);
	if (parent)
		pb_varint(&s->p, TD_PARENT, parent);
	if (kind == 1) {
		size_t m = pb_begin(&s->p, TD_PROCESS);
		pb_varint(&s->p, PD_PID, (uint64_t)s->pid);
		pb_str(&s->p, PD_NAME, name);
		pb_end(&s->p, m);
	} else if (kind == 2) {
		size_t m = pb_begin(&s->p, TD_THREAD);
		pb_varint(&s->p, THD_PID, (uint64_t)s->pid);
		pb_varint(&s->p, THD_TID, (uint64_t)tid);
		pb_str(&s->p, THD_NAME, name);
		pb_end(&s->p, m);
	} else {
		pb_str(&s->p, TD_NAME, name);
		if (kind == 3) {
			size_t m = pb_begin(&s->p, TD_COUNTER);
			pb_str(&s->p, CD_UNIT_NAME, unit);
			pb_end(&s->p, m);
		}
	}
	pb_end(&s->p, td);
	pb_end(&s->p, pk);
}

static uint64_t proc_uuid(size_t r)
{
	return uuid_of(r, 'P', 0, 0);
}

static uint64_t thread_track(struct pf *s, size_t r, uint64_t tid)
{
	if (s->th_uuid && s->th_key == tid)
		return s->th_uuid;
	uint64_t u = uuid_of(r, 'T', tid, 0);
	s->th_key = tid;
	s->th_uuid = u;
	if (seen_add(s, u)) {
		char nm[64];
		snprintf(nm, sizeof nm, "host thread %llu", (unsigned long long)tid);
		desc(s, u, proc_uuid(r), 2, nm, (int)tid, NULL);
	}
	return u;
}

static uint64_t stream_track(struct pf *s, size_t r, int64_t dev, uint64_t stream)
{
	uint64_t key = (uint64_t)dev << 48 ^ stream;
	if (s->st_uuid && s->st_key == key)
		return s->st_uuid;
	uint64_t u = uuid_of(r, 'S', (uint64_t)dev, stream);
	s->st_key = key;
	s->st_uuid = u;
	if (seen_add(s, u)) {
		char nm[64];
		snprintf(nm, sizeof nm, "GPU %lld stream %llu", (long long)dev,
		         (unsigned long long)stream);
		desc(s, u, proc_uuid(r), 0, nm, 0, NULL);
	}
	return u;
}

static struct ctr *counter_track(struct pf *s, size_t r, int what, int64_t dev)
{
	uint64_t u = uuid_of(r, 'C', (uint64_t)what, (uint64_t)dev);
	struct slot *x = map_get(&s->tracks, u);
	if (!x)
		return NULL;
	if (x->v)
		return x->v > 1 ? &s->ctr[x->v - 2] : NULL;
	char nm[64];
	if (what == 'U')
		snprintf(nm, sizeof nm, "UM migration GB/s");
	else
		snprintf(nm, sizeof nm, "GPU %lld %s GB/s", (long long)dev,
		         what == 'N' ? "NVLink" : "PCIe");
	desc(s, u, proc_uuid(r), 3, nm, 0, "GB/s");
	if (s->nctr == s->capctr) {
		size_t cap = s->capctr ? 2 * s->capctr : 16;
		struct ctr *c = realloc(s->ctr, cap * sizeof *c);
		if (!c) {
			x->v = 1;
			return NULL;
		}
		s->ctr = c;
		s->capctr = cap;
	}
	s->ctr[s->nctr] = (struct ctr){u, 0};
	x->v = 2 + s->nctr++;
	return &s->ctr[x->v - 2];
}

static size_t ev_begin(struct pf *s, uint64_t ts, size_t *te)
{
	size_t pk = pb_begin(&s->p, TRACE_PACKET);
	pb_varint(&s->p, TP_TIMESTAMP, ts);
	pb_varint(&s->p, TP_SEQ_ID, s->seq);
	pb_varint(&s->p, TP_SEQ_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
	*te = pb_begin(&s->p, TP_TRACK_EVENT);
	return pk;
}
static void ev_end(struct pf *s, size_t pk, size_t te)
{
	pb_end(&s->p, te);
	pb_end(&s->p, pk);
}

/* Argument names and categories, interned once at the start (iid = index + 1) */
enum ann {
	A_SEQ,
	A_COMM,
	A_BYTES,
	A_COUNT,
	A_DTYPE,
	A_RANK,
	A_NRANKS,
	A_PEER,
	A_SRC,
	A_DST,
	A_PEER_EN,
	A_PTR,
	A_STREAM,
	A_CORR,
	A_COPY_KIND,
	A_SEV,
	A_ADVICE,
	A_COUNT_
};
static const char *const ann_names[A_COUNT_] = {
    "seq",    "comm",        "bytes",      "count",      "dtype",        "rank",
    "nranks", "peer",        "src_device", "dst_device", "peer_enabled", "ptr",
    "stream", "correlation", "copy_kind",  "severity",   "advice"};
enum cat { C_NCCL, C_CUDA, C_KERNEL, C_NCCL_KERNEL, C_MEMCPY, C_FINDING, C_COUNT };
static const char *const cat_names[C_COUNT] = {"nccl",        "cuda_runtime", "kernel",
                                               "nccl_kernel", "gpu_memcpy",   "finding"};
#define CAT_IID(c) ((uint64_t)A_COUNT_ + 1 + (c))

static void intern_fixed(struct pf *s)
{
	size_t pk = pb_begin(&s->p, TRACE_PACKET);
	pb_varint(&s->p, TP_SEQ_ID, s->seq);
	pb_varint(&s->p, TP_SEQ_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
	size_t id = pb_begin(&s->p, TP_INTERNED);
	for (int i = 0; i < C_COUNT; i++) {
		size_t e = pb_begin(&s->p, ID_CATEGORIES);
		pb_varint(&s->p, IE_IID, CAT_IID(i));
		pb_str(&s->p, IE_NAME, cat_names[i]);
		pb_end(&s->p, e);
	}
	for (int i = 0; i < A_COUNT_; i++) {
		size_t e = pb_begin(&s->p, ID_ANN_NAMES);
		pb_varint(&s->p, IE_IID, (uint64_t)i + 1);
		pb_str(&s->p, IE_NAME, ann_names[i]);
		pb_end(&s->p, e);
	}
	pb_end(&s->p, id);
	pb_end(&s->p, pk);
	s->next_iid = CAT_IID(C_COUNT);
}

static void ann_u(struct pf *s, int a, uint64_t v)
{
	size_t m = pb_begin(&s->p, TE_DEBUG);
	pb_varint(&s->p, DA_NAME_IID, (uint64_t)a + 1);
	pb_varint(&s->p, DA_UINT, v);
	pb_end(&s->p, m);
}
static void ann_i(struct pf *s, int a, int64_t v)
{
	size_t m = pb_begin(&s->p, TE_DEBUG);
	pb_varint(&s->p, DA_NAME_IID, (uint64_t)a + 1);
	pb_sint(&s->p, DA_INT, v);
	pb_end(&s->p, m);
}
static void ann_s(struct pf *s, int a, const char *v)
{
	size_t m = pb_begin(&s->p, TE_DEBUG);
	pb_varint(&s->p, DA_NAME_IID, (uint64_t)a + 1);
	pb_str(&s->p, DA_STRING, v);
	pb_end(&s->p, m);
}
static void ann_named(struct pf *s, const char *k, const char *v) /* a name not interned */
{
	size_t m = pb_begin(&s->p, TE_DEBUG);
	pb_str(&s->p, DA_NAME, k);
	pb_str(&s->p, DA_STRING, v);
	pb_end(&s->p, m);
}

/* A slice's begin packet: name (interned under key) and category; the packet stays open for
 * args and flows. */
static size_t slice_begin(struct pf *s, uint64_t ts, uint64_t track, int cat, uint64_t name_iid,
                          size_t *te)
{
	size_t pk = ev_begin(s, ts, te);
	pb_varint(&s->p, TE_TYPE, SLICE_BEGIN);
	pb_varint(&s->p, TE_TRACK, track);
	pb_varint(&s->p, TE_CATEGORY_IID, CAT_IID(cat));
	pb_varint(&s->p, TE_NAME_IID, name_iid);
	return pk;
}

/* The end half of a slice [ts, ts + dur) */
static void slice_end(struct pf *s, uint64_t track, uint64_t t)
{
	size_t te, pk = ev_begin(s, t, &te);
	pb_varint(&s->p, TE_TYPE, SLICE_END);
	pb_varint(&s->p, TE_TRACK, track);
	ev_end(s, pk, te);
}

static void counter(struct pf *s, struct ctr *c, uint64_t t, double v)
{
	if (!c)
		return;
	size_t te, pk = ev_begin(s, t, &te);
	pb_varint(&s->p, TE_TYPE, COUNTER);
	pb_varint(&s->p, TE_TRACK, c->uuid);
	pb_double(&s->p, TE_DCOUNTER, v);
	ev_end(s, pk, te);
}

static void pf_rank(void *ctx, const struct xm_job *x, size_t r)
{
	struct pf *s = ctx;
	const struct xm_rank *R = xm_rank(x, r);
	s->th_uuid = s->st_uuid = 0; /* the caches hold tracks of one process */
	s->smp_nvl = s->smp_pcie = 0;
	s->pid = R->pid > 0 ? R->pid : (int)r + 1;
	for (size_t i = 0; i < r; i++) /* the same pid on two hosts: keep the processes apart */
		if (xm_rank(x, i)->pid == R->pid)
			s->pid = (int)(r + 1) * 10000000 + R->pid % 10000000;
	char nm[200];
	snprintf(nm, sizeof nm, "%s (%s pid %d)", R->label, R->host, R->pid);
	seen_add(s, proc_uuid(r));
	desc(s, proc_uuid(r), 0, 1, nm, 0, NULL);
}

/* An NCCL call: a slice on its thread, with the flows to its kernel and across ranks. */
static void pf_nccl(struct pf *s, const struct xe_ev *e)
{
	const struct nvlp_rec_nccl *n = e->f;
	uint64_t track, nm;
	size_t te, pk;
	track = thread_track(s, e->rank, n->tid);
	nm = intern(s, ID_NAMES, K_STATIC(e->name), e->name);
	pk = slice_begin(s, e->ts, track, C_NCCL, nm, &te);
	if (e->call >= 0) {
		ann_u(s, A_SEQ, n->seq);
		ann_u(s, A_COMM, n->comm);
		ann_u(s, A_BYTES, n->bytes);
		ann_u(s, A_COUNT, n->count);
		ann_s(s, A_DTYPE, nvlp_nccl_dtype_name((int)(int64_t)n->dtype));
		ann_i(s, A_RANK, (int64_t)n->rank);
		ann_i(s, A_NRANKS, (int64_t)n->nranks);
		if ((int64_t)n->peer >= 0)
			ann_i(s, A_PEER, (int64_t)n->peer);
		if (e->has_gpu)
			pb_fixed64(&s->p, TE_FLOW, xe_flow_call(e->rank, e->call));
		if (nvlp_nccl_fn_class((unsigned)n->fn) == 'C' && n->comm)
			pb_fixed64(&s->p, TE_FLOW, xe_flow_coll(n->comm, n->seq));
	}
	ev_end(s, pk, te);
	slice_end(s, track, e->ts + e->dur);
}

/* A CUDA runtime call that moves or places memory: a slice on its thread. */
static void pf_api(struct pf *s, const struct xe_ev *e)
{
	uint64_t track, nm;
	size_t te, pk;
	uint64_t tid = e->type == XE_COPY ? ((const struct nvlp_rec_copy *)e->f)->tid
	               : e->type == XE_MANAGED
	                   ? ((const struct nvlp_rec_managed *)e->f)->tid
	                   : ((const struct nvlp_rec_peer *)e->f)->tid;
	track = thread_track(s, e->rank, tid);
	nm = intern(s, ID_NAMES, K_STATIC(e->name), e->name);
	pk = slice_begin(s, e->ts, track, C_CUDA, nm, &te);
	if (e->type == XE_COPY) {
		const struct nvlp_rec_copy *c = e->f;
		ann_u(s, A_BYTES, c->bytes);
		ann_i(s, A_SRC, (int64_t)c->src_device);
		ann_i(s, A_DST, (int64_t)c->dst_device);
		ann_i(s, A_PEER_EN, (int64_t)c->peer_enabled);
	} else if (e->type == XE_MANAGED) {
		const struct nvlp_rec_managed *m = e->f;
		ann_u(s, A_PTR, m->ptr);
		ann_u(s, A_BYTES, m->bytes);
	}
	ev_end(s, pk, te);
	slice_end(s, track, e->ts + e->dur);
}

/* A kernel: a slice on its stream, ending the flows of the NCCL calls it ran. */
static void pf_kernel(struct pf *s, const struct xe_ev *e)
{
	const struct nvlp_rec_kernel *k = e->f;
	uint64_t track, nm;
	size_t te, pk;
	track = stream_track(s, e->rank, (int64_t)k->device, k->stream);
	nm = intern(s, ID_NAMES, K_KERNEL(e->rank, k->name),
	            e->name[0] ? e->name : "kernel");
	pk = slice_begin(s, e->ts, track, e->ncalls ? C_NCCL_KERNEL : C_KERNEL, nm, &te);
	ann_u(s, A_STREAM, k->stream);
	ann_u(s, A_CORR, k->correlation);
	for (size_t i = 0; i < e->ncalls; i++)
		pb_fixed64(&s->p, TE_TFLOW, xe_flow_call(e->rank, e->calls[i]));
	ev_end(s, pk, te);
	slice_end(s, track, e->ts + e->dur);
}

/* A GPU copy: a slice on its stream. */
static void pf_gpucopy(struct pf *s, const struct xe_ev *e)
{
	const struct nvlp_rec_gpucopy *c = e->f;
	uint64_t track, nm;
	size_t te, pk;
	track = stream_track(s, e->rank, (int64_t)c->device, c->stream);
	uint64_t key = K_COPY((uint64_t)c->src_device, (uint64_t)c->dst_device);
	struct slot *x = map_get(&s->names, key << 2 | ID_NAMES);
	if (x && x->v)
		nm = x->v;
	else {
		char t[64];
		snprintf(t, sizeof t, "Memcpy %lld -> %lld",
		         (long long)(int64_t)c->src_device,
		         (long long)(int64_t)c->dst_device);
		nm = intern(s, ID_NAMES, key, t);
	}
	pk = slice_begin(s, e->ts, track, C_MEMCPY, nm, &te);
	ann_u(s, A_BYTES, c->bytes);
	ann_u(s, A_COPY_KIND, c->copy_kind);
	ann_u(s, A_CORR, c->correlation);
	ev_end(s, pk, te);
	slice_end(s, track, e->ts + e->dur);
}

/* Unified memory bytes migrated: a counter, as a rate over the record. */
static void pf_um(struct pf *s, const struct xe_ev *e)
{
	const struct nvlp_rec_um *u = e->f;
	if (!xe_um_migration(u->counter))
		return;
	struct ctr *c = counter_track(s, e->rank, 'U', -1);
	double dur = e->dur ? (double)e->dur : 1;
	counter(s, c, e->ts, (double)u->value / dur);
	counter(s, c, e->ts + e->dur, 0);
}

/* A link counter sample: the NVLink and PCIe counters of its device. */
static void pf_sample(struct pf *s, const struct xe_ev *e)
{
	const struct nvlp_rec_linksample *l = e->f;
	if (!e->dur)
		return;
	if (s->smp_dev != (int64_t)l->device) {
		s->smp_dev = (int64_t)l->device;
		s->smp_nvl = s->smp_pcie = 0;
	}
	struct ctr *c = s->smp_nvl ? &s->ctr[s->smp_nvl - 1]
	                           : counter_track(s, e->rank, 'N', (int64_t)l->device);
	if (c && !s->smp_nvl)
		s->smp_nvl = (size_t)(c - s->ctr) + 1;
	if (c) {
		counter(s, c, e->ts, (double)(l->nvl_tx + l->nvl_rx) / (double)e->dur);
		if (e->ts + e->dur > c->last_e)
			c->last_e = e->ts + e->dur;
	}
	c = s->smp_pcie ? &s->ctr[s->smp_pcie - 1]
	                : counter_track(s, e->rank, 'E', (int64_t)l->device);
	if (c && !s->smp_pcie)
		s->smp_pcie = (size_t)(c - s->ctr) + 1;
	if (c) {
		counter(s, c, e->ts, (double)(l->pcie_rd + l->pcie_wr) / (double)e->dur);
		if (e->ts + e->dur > c->last_e)
			c->last_e = e->ts + e->dur;
	}
}

static void pf_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	(void)x;
	struct pf *s = ctx;
	switch (e->type) {
	case XE_NCCL:
		pf_nccl(s, e);
		break;
	case XE_COPY:
	case XE_MANAGED:
	case XE_PEER:
		pf_api(s, e);
		break;
	case XE_KERNEL:
		pf_kernel(s, e);
		break;
	case XE_GPUCOPY:
		pf_gpucopy(s, e);
		break;
	case XE_UM:
		pf_um(s, e);
		break;
	case XE_SAMPLE:
		pf_sample(s, e);
		break;
	}
	maybe_flush(s);
}

/* When a finding happened: a hang at the hung collective, else the start of the step window (or
 * of the job) */
static uint64_t finding_time(const struct xm_job *x, const struct xm_finding *f, size_t *rank)
{
	uint64_t t0, t1, s0, len;
	xm_span(x, &t0, &t1);
	*rank = (size_t)-1;
	if (f->root_rank >= 0)
		for (size_t r = 0; r < xm_nranks(x); r++)
			if (xm_rank(x, r)->ok && xm_rank(x, r)->rank == f->root_rank)
				*rank = r;
	if (!strcmp(f->id, "hang_suspect") && xm_nhangs(x)) {
		struct xm_hang h;
		xm_hang(x, 0, &h);
		for (size_t r = 0; r < xm_nranks(x); r++)
			for (size_t k = 0; k < xm_ncalls(x, r); k++) {
				struct xm_call c;
				xm_call(x, r, k, &c);
				if (c.comm == h.comm && c.seq == h.seq)
					return c.t;
			}
	}
	return xm_steps(x, &s0, &len) ? s0 : t0;
}

/* A sequence starts with clean incremental state and the fixed interned names */
static void seq_start(struct pf *s)
{
	size_t pk = pb_begin(&s->p, TRACE_PACKET);
	pb_varint(&s->p, TP_SEQ_ID, s->seq);
	pb_varint(&s->p, TP_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	pb_end(&s->p, pk);
	intern_fixed(s);
}

/* Processes are encoded in parallel, each on its own packet sequence (each sequence has its
 * own interning state), and written in process order (export_io.c). */
static int pf_part(void *ctx, size_t r, struct xo *o, uint64_t *recs)
{
	const struct xm_job *x = ctx;
	struct pf s = {.xo = o, .part = r, .seq = 2 + (unsigned)r};
	int rc = 0;
	pb_init(&s.p);
	seq_start(&s);
	struct xe_sink sink = {.ctx = &s, .rank = pf_rank, .ev = pf_ev};
	if (xe_stream_rank(x, &sink, r, recs) != 0)
		rc = 1;
	for (size_t i = 0; i < s.nctr; i++)
		if (s.ctr[i].last_e)
			counter(&s, &s.ctr[i], s.ctr[i].last_e, 0);
	flush(&s);
	if (s.err)
		rc |= 2;
	pb_free(&s.p);
	free(s.tracks.s);
	free(s.names.s);
	free(s.ctr);
	return rc;
}

int xe_perfetto(const struct xm_job *x, FILE *o, uint64_t *records)
{
	struct pf s = {.o = o, .seq = 1};
	pb_init(&s.p);
	seq_start(&s);
	size_t pk;
	if (pb_flush(&s.p, o) != 0)
		s.err = 1;
	int rc = xo_run(x, o, pf_part, (void *)x, records);
	if (rc > 0) {
		if (rc & 2)
			s.err = 1;
		rc = rc & 1 ? -1 : 0;
	}
	/* findings: instants on the process they concern, or on a job-wide track */
	uint64_t job_track = uuid_of((size_t)-1, 'F', 0, 0);
	int have_job_track = 0;
	for (size_t i = 0; i < xm_nfindings(x); i++) {
		struct xm_finding f;
		xm_finding(x, i, &f);
		size_t r;
		uint64_t t = finding_time(x, &f, &r);
		uint64_t track = r != (size_t)-1 ? proc_uuid(r) : job_track;
		if (track == job_track && !have_job_track) {
			desc(&s, job_track, 0, 0, "nvlprof findings", 0, NULL);
			have_job_track = 1;
		}
		size_t te;
		pk = ev_begin(&s, t, &te);
		pb_varint(&s.p, TE_TYPE, INSTANT);
		pb_varint(&s.p, TE_TRACK, track);
		pb_varint(&s.p, TE_CATEGORY_IID, CAT_IID(C_FINDING));
		char nm[256];
		snprintf(nm, sizeof nm, "%s: %s", f.id, f.title);
		pb_str(&s.p, TE_NAME, nm);
		ann_s(&s, A_SEV, f.sev);
		ann_s(&s, A_ADVICE, f.advice);
		for (int k = 0; k < f.nev; k++) {
			char ev[300], key[24];
			xm_finding_ev(x, i, k, ev, sizeof ev);
			snprintf(key, sizeof key, "ev%02d", k);
			ann_named(&s, key, ev);
		}
		ev_end(&s, pk, te);
	}
	if (pb_flush(&s.p, o) != 0)
		s.err = 1;
	if (s.err && !rc)
		an_diag("nvlprof: export: write error (perfetto)%s%s\n", errno ? ": " : "",
		        errno ? strerror(errno)
		              : ""); /* errno: the failed write's (out/formats.c clears it) */
	pb_free(&s.p);
	free(s.tracks.s);
	free(s.names.s);
	free(s.ctr);
	return rc || s.err ? -1 : 0;
}

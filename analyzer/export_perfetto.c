/* export_perfetto.c: the Perfetto protobuf sink: a process track per rank, thread tracks for the
 * API calls, GPU tracks per stream, counter tracks for link bandwidth and UM migrations, flows
 * from NCCL calls to their kernels and across the ranks of a collective, findings as instants. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "export.h"
#include "nvlp_trace.h"
#include "pb.h"

/* Perfetto field numbers (see perfetto_trace.proto for the sources) */
enum {
	TRACE_PACKET = 1,
	TP_TIMESTAMP = 8,
	TP_SEQ_ID = 10,
	TP_TRACK_EVENT = 11,
	TP_SEQ_FLAGS = 13,
	TP_TRACK_DESC = 60,
	TE_DEBUG = 4,
	TE_TYPE = 9,
	TE_TRACK = 11,
	TE_CATEGORIES = 22,
	TE_NAME = 23,
	TE_DCOUNTER = 44,
	TE_FLOW = 47,
	TE_TFLOW = 48,
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
	SEQ_INCREMENTAL_STATE_CLEARED = 1,
	SEQ = 1, /* one packet sequence for the whole file */
};

struct ctr { /* a counter track: its last sample's end gets a closing 0 */
	uint64_t uuid, last_e;
};

struct pf {
	FILE *o;
	struct pb p;
	int err;
	uint64_t *seen; /* open-addressing set of track uuids with a descriptor written */
	size_t nseen, capseen;
	struct ctr *ctr;
	size_t nctr, capctr;
	int pid; /* Perfetto pid of the current process */
};

static uint64_t uuid_of(size_t r, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t v[4] = {(uint64_t)r, a, b, c};
	return nvlp_hash64(v, sizeof v, 0x7566ULL) | 1;
}

static int seen_add(struct pf *s, uint64_t u) /* 1 if newly added */
{
	if (2 * (s->nseen + 1) > s->capseen) {
		size_t cap = s->capseen ? 2 * s->capseen : 256;
		uint64_t *t = calloc(cap, sizeof *t);
		if (!t)
			return 0;
		for (size_t i = 0; i < s->capseen; i++)
			if (s->seen[i]) {
				size_t j = s->seen[i] & (cap - 1);
				while (t[j])
					j = (j + 1) & (cap - 1);
				t[j] = s->seen[i];
			}
		free(s->seen);
		s->seen = t;
		s->capseen = cap;
	}
	size_t j = u & (s->capseen - 1);
	while (s->seen[j]) {
		if (s->seen[j] == u)
			return 0;
		j = (j + 1) & (s->capseen - 1);
	}
	s->seen[j] = u;
	s->nseen++;
	return 1;
}

static void maybe_flush(struct pf *s)
{
	if (s->p.n >= (1u << 20) && pb_flush(&s->p, s->o) != 0)
		s->err = 1;
}

/* A track descriptor packet: kind 0 plain child track, 1 process, 2 thread, 3 counter */
static void desc(struct pf *s, uint64_t uuid, uint64_t parent, int kind, const char *name,
                 int tid, const char *unit)
{
	size_t pk = pb_begin(&s->p, TRACE_PACKET);
	pb_varint(&s->p, TP_SEQ_ID, SEQ);
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

static uint64_t proc_uuid(size_t r) { return uuid_of(r, 'P', 0, 0); }

static uint64_t thread_track(struct pf *s, size_t r, uint64_t tid)
{
	uint64_t u = uuid_of(r, 'T', tid, 0);
	if (seen_add(s, u)) {
		char nm[64];
		snprintf(nm, sizeof nm, "host thread %llu", (unsigned long long)tid);
		desc(s, u, proc_uuid(r), 2, nm, (int)tid, NULL);
	}
	return u;
}

static uint64_t stream_track(struct pf *s, size_t r, int64_t dev, uint64_t stream)
{
	uint64_t u = uuid_of(r, 'S', (uint64_t)dev, stream);
	if (seen_add(s, u)) {
		char nm[64];
		snprintf(nm, sizeof nm, "GPU %lld stream %llu", (long long)dev,
		         (unsigned long long)stream);
		desc(s, u, proc_uuid(r), 0, nm, 0, NULL);
	}
	return u;
}

static struct ctr *counter_track(struct pf *s, size_t r, int what, int64_t dev, const char *name)
{
	uint64_t u = uuid_of(r, 'C', (uint64_t)what, (uint64_t)dev);
	if (seen_add(s, u)) {
		desc(s, u, proc_uuid(r), 3, name, 0, "GB/s");
		if (s->nctr == s->capctr) {
			size_t cap = s->capctr ? 2 * s->capctr : 16;
			struct ctr *c = realloc(s->ctr, cap * sizeof *c);
			if (!c)
				return NULL;
			s->ctr = c;
			s->capctr = cap;
		}
		s->ctr[s->nctr++] = (struct ctr){u, 0};
	}
	for (size_t i = s->nctr; i-- > 0;)
		if (s->ctr[i].uuid == u)
			return &s->ctr[i];
	return NULL;
}

static size_t ev_begin(struct pf *s, uint64_t ts, size_t *te)
{
	size_t pk = pb_begin(&s->p, TRACE_PACKET);
	pb_varint(&s->p, TP_TIMESTAMP, ts);
	pb_varint(&s->p, TP_SEQ_ID, SEQ);
	*te = pb_begin(&s->p, TP_TRACK_EVENT);
	return pk;
}
static void ev_end(struct pf *s, size_t pk, size_t te)
{
	pb_end(&s->p, te);
	pb_end(&s->p, pk);
}

static void ann_u(struct pf *s, const char *k, uint64_t v)
{
	size_t m = pb_begin(&s->p, TE_DEBUG);
	pb_str(&s->p, DA_NAME, k);
	pb_varint(&s->p, DA_UINT, v);
	pb_end(&s->p, m);
}
static void ann_i(struct pf *s, const char *k, int64_t v)
{
	size_t m = pb_begin(&s->p, TE_DEBUG);
	pb_str(&s->p, DA_NAME, k);
	pb_sint(&s->p, DA_INT, v);
	pb_end(&s->p, m);
}
static void ann_s(struct pf *s, const char *k, const char *v)
{
	size_t m = pb_begin(&s->p, TE_DEBUG);
	pb_str(&s->p, DA_NAME, k);
	pb_str(&s->p, DA_STRING, v);
	pb_end(&s->p, m);
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
	s->pid = R->pid > 0 ? R->pid : (int)r + 1;
	for (size_t i = 0; i < r; i++) /* the same pid on two hosts: keep the processes apart */
		if (xm_rank(x, i)->pid == R->pid)
			s->pid = (int)(r + 1) * 10000000 + R->pid % 10000000;
	char nm[200];
	snprintf(nm, sizeof nm, "%s (%s pid %d)", R->label, R->host, R->pid);
	seen_add(s, proc_uuid(r));
	desc(s, proc_uuid(r), 0, 1, nm, 0, NULL);
}

static void pf_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
{
	(void)x;
	struct pf *s = ctx;
	uint64_t track = 0;
	size_t te, pk;
	switch (e->type) {
	case XE_NCCL: {
		const struct nvlp_rec_nccl *n = e->f;
		track = thread_track(s, e->rank, n->tid);
		pk = ev_begin(s, e->ts, &te);
		pb_varint(&s->p, TE_TYPE, SLICE_BEGIN);
		pb_varint(&s->p, TE_TRACK, track);
		pb_str(&s->p, TE_CATEGORIES, "nccl");
		pb_str(&s->p, TE_NAME, e->name);
		if (e->call >= 0) {
			ann_u(s, "seq", n->seq);
			ann_u(s, "comm", n->comm);
			ann_u(s, "bytes", n->bytes);
			ann_u(s, "count", n->count);
			ann_s(s, "dtype", nvlp_nccl_dtype_name((int)(int64_t)n->dtype));
			ann_i(s, "rank", (int64_t)n->rank);
			ann_i(s, "nranks", (int64_t)n->nranks);
			if ((int64_t)n->peer >= 0)
				ann_i(s, "peer", (int64_t)n->peer);
			if (e->has_gpu)
				pb_fixed64(&s->p, TE_FLOW, xe_flow_call(e->rank, e->call));
			if (nvlp_nccl_fn_class((unsigned)n->fn) == 'C' && n->comm)
				pb_fixed64(&s->p, TE_FLOW, xe_flow_coll(n->comm, n->seq));
		}
		ev_end(s, pk, te);
		slice_end(s, track, e->ts + e->dur);
		break;
	}
	case XE_COPY:
	case XE_MANAGED:
	case XE_PEER: {
		uint64_t tid = e->type == XE_COPY      ? ((const struct nvlp_rec_copy *)e->f)->tid
		               : e->type == XE_MANAGED ? ((const struct nvlp_rec_managed *)e->f)->tid
		                                       : ((const struct nvlp_rec_peer *)e->f)->tid;
		track = thread_track(s, e->rank, tid);
		pk = ev_begin(s, e->ts, &te);
		pb_varint(&s->p, TE_TYPE, SLICE_BEGIN);
		pb_varint(&s->p, TE_TRACK, track);
		pb_str(&s->p, TE_CATEGORIES, "cuda_runtime");
		pb_str(&s->p, TE_NAME, e->name);
		if (e->type == XE_COPY) {
			const struct nvlp_rec_copy *c = e->f;
			ann_u(s, "bytes", c->bytes);
			ann_i(s, "src_device", (int64_t)c->src_device);
			ann_i(s, "dst_device", (int64_t)c->dst_device);
			ann_i(s, "peer_enabled", (int64_t)c->peer_enabled);
		} else if (e->type == XE_MANAGED) {
			const struct nvlp_rec_managed *m = e->f;
			ann_u(s, "ptr", m->ptr);
			ann_u(s, "bytes", m->bytes);
		}
		ev_end(s, pk, te);
		slice_end(s, track, e->ts + e->dur);
		break;
	}
	case XE_KERNEL: {
		const struct nvlp_rec_kernel *k = e->f;
		track = stream_track(s, e->rank, (int64_t)k->device, k->stream);
		pk = ev_begin(s, e->ts, &te);
		pb_varint(&s->p, TE_TYPE, SLICE_BEGIN);
		pb_varint(&s->p, TE_TRACK, track);
		pb_str(&s->p, TE_CATEGORIES, e->ncalls ? "nccl_kernel" : "kernel");
		pb_str(&s->p, TE_NAME, e->name[0] ? e->name : "kernel");
		ann_u(s, "stream", k->stream);
		ann_u(s, "correlation", k->correlation);
		for (size_t i = 0; i < e->ncalls; i++)
			pb_fixed64(&s->p, TE_TFLOW, xe_flow_call(e->rank, e->calls[i]));
		ev_end(s, pk, te);
		slice_end(s, track, e->ts + e->dur);
		break;
	}
	case XE_GPUCOPY: {
		const struct nvlp_rec_gpucopy *c = e->f;
		track = stream_track(s, e->rank, (int64_t)c->device, c->stream);
		pk = ev_begin(s, e->ts, &te);
		pb_varint(&s->p, TE_TYPE, SLICE_BEGIN);
		pb_varint(&s->p, TE_TRACK, track);
		pb_str(&s->p, TE_CATEGORIES, "gpu_memcpy");
		char nm[64];
		snprintf(nm, sizeof nm, "Memcpy %lld -> %lld", (long long)(int64_t)c->src_device,
		         (long long)(int64_t)c->dst_device);
		pb_str(&s->p, TE_NAME, nm);
		ann_u(s, "bytes", c->bytes);
		ann_u(s, "copy_kind", c->copy_kind);
		ann_u(s, "correlation", c->correlation);
		ev_end(s, pk, te);
		slice_end(s, track, e->ts + e->dur);
		break;
	}
	case XE_UM: {
		const struct nvlp_rec_um *u = e->f;
		if (u->counter < 1 || (u->counter > 2 && u->counter != 8)) /* bytes transferred */
			break;
		struct ctr *c = counter_track(s, e->rank, 'U', -1, "UM migration GB/s");
		double dur = e->dur ? (double)e->dur : 1;
		counter(s, c, e->ts, (double)u->value / dur);
		counter(s, c, e->ts + e->dur, 0);
		break;
	}
	case XE_SAMPLE: {
		const struct nvlp_rec_linksample *l = e->f;
		if (!e->dur)
			break;
		char nm[64];
		snprintf(nm, sizeof nm, "GPU %lld NVLink GB/s", (long long)(int64_t)l->device);
		struct ctr *c = counter_track(s, e->rank, 'N', (int64_t)l->device, nm);
		if (c) {
			counter(s, c, e->ts, (double)(l->nvl_tx + l->nvl_rx) / (double)e->dur);
			if (e->ts + e->dur > c->last_e)
				c->last_e = e->ts + e->dur;
		}
		snprintf(nm, sizeof nm, "GPU %lld PCIe GB/s", (long long)(int64_t)l->device);
		c = counter_track(s, e->rank, 'E', (int64_t)l->device, nm);
		if (c) {
			counter(s, c, e->ts, (double)(l->pcie_rd + l->pcie_wr) / (double)e->dur);
			if (e->ts + e->dur > c->last_e)
				c->last_e = e->ts + e->dur;
		}
		break;
	}
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

int xe_perfetto(const struct xm_job *x, FILE *o, uint64_t *records)
{
	struct pf s = {.o = o};
	pb_init(&s.p);
	/* first packet: the sequence starts with clean incremental state */
	size_t pk = pb_begin(&s.p, TRACE_PACKET);
	pb_varint(&s.p, TP_SEQ_ID, SEQ);
	pb_varint(&s.p, TP_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	pb_end(&s.p, pk);
	struct xe_sink sink = {.ctx = &s, .rank = pf_rank, .ev = pf_ev};
	int rc = xe_stream(x, &sink, records);
	for (size_t i = 0; i < s.nctr; i++)
		if (s.ctr[i].last_e)
			counter(&s, &s.ctr[i], s.ctr[i].last_e, 0);
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
		pb_str(&s.p, TE_CATEGORIES, "finding");
		char nm[256];
		snprintf(nm, sizeof nm, "%s: %s", f.id, f.title);
		pb_str(&s.p, TE_NAME, nm);
		ann_s(&s, "severity", f.sev);
		ann_s(&s, "advice", f.advice);
		for (int k = 0; k < f.nev; k++) {
			char ev[300], key[24];
			xm_finding_ev(x, i, k, ev, sizeof ev);
			snprintf(key, sizeof key, "ev%02d", k);
			ann_s(&s, key, ev);
		}
		ev_end(&s, pk, te);
	}
	if (pb_flush(&s.p, o) != 0)
		s.err = 1;
	if (s.err && !rc)
		fprintf(stderr, "nvlprof: export: write error (perfetto)\n");
	pb_free(&s.p);
	free(s.seen);
	free(s.ctr);
	return rc || s.err ? -1 : 0;
}

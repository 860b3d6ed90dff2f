/* export_chrome_ev.c: the Chrome/Kineto JSON sink's events: NCCL calls with Kineto's
 * record_param_comms args, CUDA API calls, kernels, GPU copies, link samples, unified-memory
 * migrations and the DEVICE records kept for deviceProperties (export_chrome_int.h). */
#include <stdlib.h> /* malloc */
#include <string.h> /* strcmp */

#include "out/export_chrome_int.h"

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
	const struct qn *q =
	    kernel_name(s, k->name, e->name[0] ? e->name : "kernel", e->ncalls != 0, buf, &raw);
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

void xc_ev(void *ctx, const struct xm_job *x, const struct xe_ev *e)
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

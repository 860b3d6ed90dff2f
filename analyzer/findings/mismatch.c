/* mismatch.c: the collective_mismatch finding: ranks of one communicator whose calls at one
 * sequence number differ in function, count, datatype, reduction op or root (NCCL then hangs or
 * returns wrong data). The cross-rank walk over each communicator's rows (model/waits.c,
 * hangs.c) notes the first such row (model/mismatch.c); the finding names each side's values,
 * ranks and Python line, and a hang that follows on that communicator gets it as its cause.
 * Not compared: Send/Recv (the shim numbers them per peer, not with the collectives) and the
 * collectives NCCL runs as SendRecv kernels (AlltoAll, Gather, Scatter), which the collective
 * table leaves out; calls whose arguments were not kept (AN_CSIG_NONE) are compared by function
 * only. */
#include <stdio.h>  /* snprintf */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"

/* ---- the finding ---- */

enum { D_FN, D_COUNT, D_DTYPE, D_OP, D_ROOT, D_COUNT_ };
static const char *const diff_names[D_COUNT_] = {"function", "count", "dtype", "op", "root"};

/* Field d of side s as text */
static void side_value(const struct an_mside *s, int d, char *buf, size_t len)
{
	if (d == D_FN)
		snprintf(buf, len, "%s", nvlp_nccl_fn_name(s->fn));
	else if (!s->sig_known)
		snprintf(buf, len, "?");
	else if (d == D_COUNT)
		snprintf(buf, len, "%llu", (unsigned long long)s->sig.count);
	else if (d == D_DTYPE && nvlp_nccl_dtype_size(s->sig.dtype))
		snprintf(buf, len, "%s", nvlp_nccl_dtype_name(s->sig.dtype));
	else if (d == D_OP && s->sig.op >= 0)
		snprintf(buf, len, "%s", nvlp_nccl_op_name(s->sig.op));
	else if (d == D_ROOT && s->sig.root >= 0)
		snprintf(buf, len, "%d", (int)s->sig.root);
	else if (d == D_DTYPE)
		snprintf(buf, len, "%d", s->sig.dtype);
	else
		snprintf(buf, len, "none");
}

/* Which fields differ between the sides (bit per D_*) */
static unsigned differs(const struct an_mismatch *m)
{
	unsigned bits = 0;
	for (int i = 1; i < m->nsides; i++)
		for (int d = 0; d < D_COUNT_; d++) {
			char a[64], b[64];
			side_value(&m->side[0], d, a, sizeof a);
			side_value(&m->side[i], d, b, sizeof b);
			/* an op or root one function has and the other lacks follows from the
			 * function: not a difference of its own */
			if (d == D_FN ? an_fn_collective(m->side[0].fn) != an_fn_collective(m->side[i].fn)
			              : strcmp(a, b) && strcmp(a, "?") && strcmp(b, "?") &&
			                    strcmp(a, "none") && strcmp(b, "none"))
				bits |= 1u << d;
		}
	return bits;
}

static void ranks_text(const struct an_mside *s, char *buf, size_t len)
{
	buf[0] = 0;
	for (int i = 0; i < s->nranks; i++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%d", i ? "," : "", s->ranks[i]);
}

/* "count 2048 on rank 0, 1024 on rank 1; dtype ..." for the differing fields */
static void diff_text(const struct an_mismatch *m, unsigned bits, char *buf, size_t len)
{
	buf[0] = 0;
	for (int d = 0; d < D_COUNT_; d++) {
		if (!(bits & (1u << d)))
			continue;
		size_t o = strlen(buf);
		snprintf(buf + o, len - o, "%s%s ", o ? "; " : "", diff_names[d]);
		for (int i = 0; i < m->nsides; i++) {
			char v[64], rk[96];
			side_value(&m->side[i], d, v, sizeof v);
			ranks_text(&m->side[i], rk, sizeof rk);
			o = strlen(buf);
			snprintf(buf + o, len - o, "%s%s on rank%s %s", i ? ", " : "", v,
			         m->side[i].nranks > 1 ? "s" : "", rk);
		}
	}
}

/* The NCCL PYREF in force at call k of r: the thread's chain changes only at a PYREF, so the
 * latest at or before the call's entry (any thread: the calls keep no thread id; the first
 * collectives of a job come from one). @return its PYSTACK, 0 none */
static uint64_t py_of_call(const struct an_rank *r, uint32_t k)
{
	uint64_t t = r->calls[k].t_enter, best_t = 0, id = 0;
	for (size_t i = 0; i < r->npyrefs; i++) {
		const struct an_pyref *p = &r->pyrefs[i];
		if (p->kind == NVLP_K_NCCL && p->t <= t && p->t >= best_t) {
			best_t = p->t;
			id = p->pystack;
		}
	}
	return id;
}

/* The step (1-based) call k of file f was in, as steps.c counts a rank's end: its marks up to
 * then, or its calls of the steps' communicator before it over the calls per step; 0 unknown */
static uint64_t step_of_call(const struct an_job *job, size_t f, uint32_t k)
{
	const struct an_rank *r = &job->ranks[f];
	const struct an_call *c = &r->calls[k];
	uint64_t n = 0;
	if (!job->steps)
		return 0;
	if (job->step_comm < 0) {
		for (size_t i = 0; i < r->nmarks; i++)
			n += r->marks[i] <= c->t_enter;
		return n <= job->steps ? n : 0;
	}
	if (job->step_calls <= 0 || c->comm != job->step_comm)
		return 0;
	for (size_t i = 0; i < r->ncalls; i++)
		n += r->calls[i].comm == c->comm && r->calls[i].seq < c->seq;
	n = n / (uint64_t)job->step_calls + 1;
	return n <= job->steps ? n : 0;
}

/* Evidence of each side: ranks, then the values of the fields that apply */
static void side_evidence(struct an_finding *x, const struct an_mismatch *m, unsigned bits)
{
	int has_op = 0, has_root = 0;
	for (int i = 0; i < m->nsides; i++) {
		has_op |= m->side[i].sig_known && m->side[i].sig.op >= 0;
		has_root |= m->side[i].sig_known && m->side[i].sig.root >= 0;
	}
	for (int i = 0; i < m->nsides; i++) {
		const struct an_mside *s = &m->side[i];
		char key[32], v[96];
		snprintf(key, sizeof key, "side%d_ranks", i + 1);
		ranks_text(s, v, sizeof v);
		an_f_str(x, key, "%s", v);
		for (int d = 0; d < D_COUNT_; d++) {
			if ((d == D_FN && !(bits & (1u << D_FN))) || (d == D_OP && !has_op) ||
			    (d == D_ROOT && !has_root))
				continue;
			snprintf(key, sizeof key, "side%d_%s", i + 1,
			         d == D_FN ? "collective" : diff_names[d]);
			side_value(s, d, v, sizeof v);
			if (d == D_COUNT && s->sig_known)
				an_f_num(x, key, (double)s->sig.count, NULL);
			else
				an_f_str(x, key, "%s", v);
		}
	}
}

/* The printed hang_suspect on m's communicator at or after its seq (the first), or NULL */
static struct an_finding *hang_after(const struct an_job *job, const struct an_mismatch *m,
                                     struct an_findings *out, uint32_t *seq)
{
	for (size_t i = 0; i < out->n; i++) {
		struct an_finding *h = &out->v[i];
		if (h->fid != AN_F_hang_suspect || h->comm != m->comm)
			continue;
		const struct an_ev *e = an_ev_find(h, AN_EV_SEQ, 0);
		if (e && e->num >= m->seq) {
			*seq = (uint32_t)e->num;
			return h;
		}
	}
	(void)job;
	return NULL;
}

/* The collective_mismatch finding of m. @return 0, or -1 out of memory */
static int mismatch_finding(const struct an_job *job, const struct an_mismatch *m,
                            struct an_findings *out)
{
	const struct an_comm *cm = &job->comms[m->comm];
	unsigned bits = differs(m);
	char what[200], title[200], cname[80] = "";
	diff_text(m, bits, what, sizeof what);
	if (cm->name[0])
		snprintf(cname, sizeof cname, " (\"%s\")", cm->name);
	snprintf(title, sizeof title, "%s #%u on comm %016llx%s called differently: %s",
	         nvlp_nccl_fn_name(m->side[0].fn), m->seq, (unsigned long long)cm->hash, cname, what);
	/* found before the hang it causes is added: the hang's index may move as findings grow */
	uint32_t hseq = 0;
	int hung = hang_after(job, m, out, &hseq) != NULL;
	struct an_finding *x = an_f_add(out, AN_F_collective_mismatch, AN_SEV_CRITICAL, "%s", title);
	if (!x)
		return -1;
	x->comm = m->comm;
	char v[96];
	snprintf(v, sizeof v, "%016llx", (unsigned long long)cm->hash);
	an_f_str(x, "comm", "%s", v);
	if (cm->name[0])
		an_f_str(x, "comm_name", "%s", cm->name);
	an_f_num(x, AN_EV_SEQ, m->seq, NULL);
	uint64_t step = step_of_call(job, (size_t)m->side[0].file, m->side[0].k);
	if (step)
		an_f_num(x, AN_EV_STEP, (double)step, NULL);
	v[0] = 0;
	for (int d = 0; d < D_COUNT_; d++)
		if (bits & (1u << d))
			snprintf(v + strlen(v), sizeof v - strlen(v), "%s%s", v[0] ? "," : "",
			         diff_names[d]);
	an_f_str(x, "differs", "%s", v);
	side_evidence(x, m, bits);
	if (m->more)
		an_f_num(x, "ranks_not_shown", m->more, NULL);
	for (int i = 0; i < m->nsides; i++) {
		const struct an_rank *r = &job->ranks[m->side[i].file];
		char key[32];
		snprintf(key, sizeof key, AN_EV_PYTHON_RANK, m->side[i].ranks[0]);
		if (r->npyrefs)
			an_f_python(x, key, "calls it at", r, py_of_call(r, m->side[i].k));
	}
	if (hung)
		an_f_num(x, "then_hung_at_seq", hseq, NULL);
	an_f_advice(x, AN_ADV_PLAIN);
	/* the hang that follows has this as its cause */
	struct an_finding *h = hung ? hang_after(job, m, out, &hseq) : NULL;
	if (h) {
		char cause[240];
		snprintf(cause, sizeof cause, "collective_mismatch at #%u: %s", m->seq, what);
		an_f_str(h, "cause", "%s", cause);
	}
	return 0;
}

int an_detect_collective_mismatch(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	for (size_t i = 0; i < ctx->job->nmismatches; i++)
		if (mismatch_finding(ctx->job, &ctx->job->mismatches[i], out))
			return -1;
	return 0;
}

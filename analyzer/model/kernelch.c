/* kernelch.c: the kernel-channel analysis stage: every collective's GPU time from NCCL's own
 * kernel-channel timestamps (what load/kernelch.c kept of the KCH records), checked against CUPTI
 * where both exist. */
/*
 * Input, per trace (kept by load/kernelch.c in r->kch_file): KCH records (one per channel of a
 * collective: GPU globaltimer start/stop, the host time the stop was reported), CLOCK pairs
 * (REALTIME: mono vs CLOCK_REALTIME), NCCLPROF records (NCCL's commHash -> the shim's
 * communicator), KWINDOW records (when CUPTI kernel tracing was on).
 *
 * Clock fit. The H100/H200 globaltimer runs on the driver-synchronised PTIMER, whose ns are
 * CLOCK_REALTIME's (the PM samples' time base, FACTS.md), so mono = gt + (mono - realtime) from
 * the nearest REALTIME pair. The fit is then checked against what must hold: a channel stops before
 * the host hears of it (gt_stop + off <= host, every record) and starts after its call entered
 * NCCL (gt_start + off >= t_enter). A violated upper bound shifts the offset down by the largest
 * violation, then a violated lower bound shifts it up as far as the upper bound allows (the fit is
 * reported with those corrections); without REALTIME pairs the offset is the tightest upper bound.
 *
 * Per collective: the channels' span (latest stop - earliest start). Channels repeating within
 * one (communicator, seq) are graph replays (counted, not attributed: the call was made once, at
 * capture); stamps shared by several seqs on one channel are collectives fused into one kernel,
 * whose span is split evenly among them (as model.c splits a group's CUPTI kernel). Records with
 * zero or reversed stamps, channels that never stopped and channels without a parent collective
 * are dropped and counted (load/kernelch.c). Calls match by communicator, function and sequence
 * number: NCCL numbers a communicator's collectives per function (comm->seqNumber[func], from 0;
 * ncclBcast and ncclBroadcast are both its Broadcast), the shim per communicator over every
 * function (from 1), so NCCL's AllReduce #0 of a DDP job is the shim's #5 after an AllGather and
 * three Broadcasts. The k-th call of a function (in shim seq order) is NCCL's #k of it; the
 * per-communicator reading (shim seq - 1) is tried too and kept where more calls agree with it.
 */
#include <stdlib.h> /* calloc, qsort */
#include <string.h> /* memset */

#include "load/kernelch.h" /* struct an_kch_file, an_nccl_func */
#include "model/kernelch.h"
#include "model/model.h"
#include "util/containers.h" /* PUSH, an_lower_bound */
#include "nvlp_trace.h"

static int by_comm_seq(const void *a, const void *b)
{
	const struct an_kch_chan *x = a, *y = b;
	AN_CMP_KEY(x, y, comm);
	AN_CMP_KEY(x, y, fn);
	AN_CMP_KEY(x, y, seq);
	AN_CMP_KEY(x, y, gs);
	return x->ch < y->ch ? -1 : x->ch > y->ch;
}
static int by_stamp(const void *a, const void *b)
{
	const struct an_kch_chan *x = *(struct an_kch_chan *const *)a;
	const struct an_kch_chan *y = *(struct an_kch_chan *const *)b;
	AN_CMP_KEY(x, y, comm);
	AN_CMP_KEY(x, y, ch);
	AN_CMP_KEY(x, y, gs);
	AN_CMP_KEY(x, y, ge);
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}
static int by_other(const void *a, const void *b)
{
	const struct an_kch_rtpair *x = a, *y = b;
	return x->other < y->other ? -1 : x->other > y->other;
}
static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Channels that several collectives of one fused kernel share, of the entries v[i..j) with one
 * kernel's stamps: KCH entries are one channel each; a KCOLL entry stands for n channels, counted
 * from channel 0 as NCCL assigns them (channel c is shared when two of the entries reach it). */
static uint64_t shared_channels(struct an_kch_chan **v, size_t i, size_t j)
{
	uint64_t n = 0;
	for (uint32_t c = 0;; c++) {
		uint64_t k = 0;
		for (size_t x = i; x < j; x++)
			k += v[x]->n > c;
		if (k < 2)
			return n;
		n += k;
	}
}

/* Fused collectives: the same stamps on one channel for several seqs; each gets share = how
 * many. */
static void mark_shared(struct an_kch_file *d, struct an_kch *s)
{
	struct an_kch_chan **v = malloc(d->nk * sizeof *v);
	if (!v)
		return;
	for (size_t i = 0; i < d->nk; i++)
		v[i] = &d->k[i];
	qsort(v, d->nk, sizeof *v, by_stamp);
	for (size_t i = 0; i < d->nk;) {
		size_t j = i + 1;
		while (j < d->nk && v[j]->comm == v[i]->comm && v[j]->ch == v[i]->ch &&
		       v[j]->gs == v[i]->gs && v[j]->ge == v[i]->ge)
			j++;
		if (j - i > 1) {
			for (size_t k = i; k < j; k++)
				v[k]->share = (uint32_t)(j - i);
			s->shared_channels += shared_channels(v, i, j);
		}
		i = j;
	}
	free(v);
}

/* The globaltimer -> local mono offset nearest (in GPU time) to gt. */
static int64_t rt_offset(const struct an_kch_file *d, uint64_t gt)
{
	size_t lo = 0, hi = d->nrt;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (d->rt[mid].other <= gt)
			lo = mid;
		else
			hi = mid;
	}
	size_t b = lo;
	if (lo + 1 < d->nrt && d->rt[lo + 1].other - gt < gt - d->rt[lo].other)
		b = lo + 1;
	return (int64_t)(d->rt[b].mono - d->rt[b].other); /* wraps, never overflows */
}

/* A collective call of rank r under one of the two numberings: key = (function, NCCL's number
 * for it) with fn = its NCCL function, or (0, shim seq) for the per-communicator reading. */
struct cidx {
	uint64_t comm; /* the communicator's hash */
	uint32_t seq;
	uint32_t call;
	uint8_t fn;
};
static int by_key(const void *a, const void *b)
{
	const struct cidx *x = a, *y = b;
	AN_CMP_KEY(x, y, comm);
	AN_CMP_KEY(x, y, fn);
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}
static const struct cidx *find_key(const struct cidx *v, size_t n, uint64_t comm, uint8_t fn,
                                   uint64_t seq)
{
	struct cidx key = {comm, (uint32_t)seq, 0, fn};
	if (seq > UINT32_MAX)
		return NULL;
	size_t lo = an_lower_bound(v, n, sizeof *v, &key, by_key);
	return lo < n && !by_key(&v[lo], &key) ? &v[lo] : NULL;
}

size_t an_nccl_numbers(const struct an_job *job, const struct an_rank *r, struct an_ncclnum **out)
{
	size_t n = 0;
	*out = NULL;
	for (size_t k = 0; k < r->ncalls; k++)
		n += nvlp_nccl_fn_class(r->calls[k].fn) == 'C';
	struct an_ncclnum *v = n ? malloc(n * sizeof *v) : NULL;
	if (!v)
		return 0;
	n = 0;
	for (size_t k = 0; k < r->ncalls; k++) {
		const struct an_call *c = &r->calls[k];
		if (nvlp_nccl_fn_class(c->fn) == 'C')
			v[n++] = (struct an_ncclnum){job->comms[c->comm].hash, c->seq, 0, (uint32_t)k,
			                             an_nccl_func(c->fn)};
	}
	qsort(v, n, sizeof *v, an_ncclnum_cmp);
	uint32_t count[NVLP_NCCL_FN_COUNT];
	for (size_t i = 0; i < n; i++) {
		if (!i || v[i].comm != v[i - 1].comm)
			memset(count, 0, sizeof count);
		v[i].nseq = v[i].fn < NVLP_NCCL_FN_COUNT ? count[v[i].fn]++ : 0;
	}
	*out = v;
	return n;
}

int an_ncclnum_cmp(const void *a, const void *b)
{
	const struct an_ncclnum *x = a, *y = b;
	AN_CMP_KEY(x, y, comm);
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One collective instance: d->k[i..j) (one comm, one seq, each channel once). */
struct inst {
	uint64_t comm, seq, gs, ge, host;
	uint32_t share;
	uint8_t fn;
	int64_t call; /* matched call index, -1 none */
	int64_t off;  /* globaltimer -> local mono */
};
static int by_fused(const void *a, const void *b)
{
	const struct inst *x = a, *y = b;
	AN_CMP_KEY(x, y, comm);
	AN_CMP_KEY(x, y, gs);
	AN_CMP_KEY(x, y, ge);
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Give an instance's time to its call (or check CUPTI's). part: its share of a fused kernel. */
static void give(struct an_rank *r, const struct inst *x, uint64_t start, uint64_t part,
                 struct an_kch *s, int64_t **diffs, size_t *ndiffs, size_t *capdiffs)
{
	struct an_call *c = &r->calls[x->call];
	if (start < c->t_enter)
		s->before_call++; /* the fit puts the kernel before its call */
	s->matched++;
	uint64_t sd = !c->gpu_start      ? 0
	              : start > c->gpu_start ? start - c->gpu_start
	                                     : c->gpu_start - start;
	/* CUPTI's kernel starts elsewhere: match.c gave this call another call's kernel (in kernel
	 * windows a call launched before the window has none traced and the window's first kernel
	 * can go to it); NCCL's own numbering is exact, so its time replaces CUPTI's */
	int other = c->gpu_start && sd > AN_KCH_SAME_NS && sd > part;
	if (!c->gpu_start || other) {
		c->gpu_start = start ? start : 1;
		c->gpu_dur = part > UINT32_MAX ? UINT32_MAX : (uint32_t)part;
		s->timed++;
		s->timed_ns += part;
		s->retimed += other;
		r->kch_timed++;
		return;
	}
	int64_t *p = PUSH(*diffs, *ndiffs, *capdiffs);
	if (p)
		*p = (int64_t)(part - (uint64_t)c->gpu_dur);
	if (sd > s->xcheck_max_start_ns)
		s->xcheck_max_start_ns = sd;
}

/* The channels of one collective: NCCL's (communicator, function, seqNumber) */
static inline int same_coll(const struct an_kch_chan *x, const struct an_kch_chan *y)
{
	return x->comm == y->comm && x->fn == y->fn && x->seq == y->seq;
}

/* One graph replay of a (comm, fn, seq) from d->k[a]: its bounds over the channels up to the first
 * that repeats. Returns the index past them. */
static size_t one_instance(const struct an_kch_file *d, size_t a, struct inst *x)
{
	uint64_t seen[4] = {0}; /* channels 0..255 */
	*x = (struct inst){d->k[a].comm, d->k[a].seq, d->k[a].gs, d->k[a].ge,
	                   d->k[a].host, 1,          d->k[a].fn, -1, 0};
	size_t j = a;
	for (; j < d->nk && same_coll(&d->k[j], &d->k[a]); j++) {
		uint32_t c = d->k[j].ch & 255;
		if (seen[c / 64] >> (c % 64) & 1)
			break; /* the same channel again: the next replay */
		seen[c / 64] |= 1ull << (c % 64);
		if (d->k[j].gs < x->gs)
			x->gs = d->k[j].gs;
		if (d->k[j].ge > x->ge)
			x->ge = d->k[j].ge;
		if (d->k[j].host > x->host)
			x->host = d->k[j].host;
		if (d->k[j].share > x->share)
			x->share = d->k[j].share;
	}
	return j;
}

/* instances: a channel that repeats within (comm, fn, seq) starts a graph replay; the first replay
 * is the collective, the others are counted */
static struct inst *instances(const struct an_kch_file *d, struct an_kch *s, size_t *nout)
{
	struct inst *in = NULL;
	size_t nin = 0, capin = 0;
	for (size_t i = 0; i < d->nk;) {
		size_t j = i;
		int instance = 0;
		while (j < d->nk && same_coll(&d->k[j], &d->k[i])) {
			struct inst x;
			j = one_instance(d, j, &x);
			if (instance++) {
				s->replays++;
				s->replay_ns += x.ge - x.gs;
				continue;
			}
			struct inst *p = PUSH(in, nin, capin);
			if (p)
				*p = x;
		}
		i = j;
	}
	s->collectives += nin;
	*nout = nin;
	return in;
}

/* A rank's globaltimer -> local mono fit: REALTIME pairs (have_rt) or the stop bound (tight),
 * plus corr, the correction the stop bound asks of the pairs. */
struct fit {
	int have_rt;
	int64_t corr, tight;
};
static int64_t fit_off(const struct an_kch_file *d, const struct fit *f, uint64_t ge)
{
	/* unsigned arithmetic: a corrupt stamp wraps instead of overflowing (the fuzzer found
	 * -1.8e18 + -7.4e18 here); the pairs' sanity checks then reject what it produces */
	return (int64_t)((uint64_t)(f->have_rt ? rt_offset(d, ge) : f->tight) + (uint64_t)f->corr);
}

/* clock: REALTIME pairs, checked against the stop bound */
static struct fit clock_fit(const struct an_kch_file *d, const struct inst *in, size_t nin,
                            struct an_kch *s)
{
	struct fit f = {d->nrt > 0, 0, INT64_MAX};
	int64_t worst = INT64_MIN;
	for (size_t i = 0; i < nin; i++) {
		int64_t off = f.have_rt ? rt_offset(d, in[i].ge) : 0;
		/* must be <= 0; unsigned arithmetic: a corrupt stamp wraps instead of overflowing */
		int64_t v = (int64_t)(in[i].ge + (uint64_t)off - in[i].host);
		if (v > worst)
			worst = v;
		int64_t ub = (int64_t)(in[i].host - in[i].ge);
		if (ub < f.tight)
			f.tight = ub;
	}
	if (nin) {
		if (!f.have_rt) {
			s->fit_bound_only = 1;
		} else if (worst > 0) {
			f.corr = -worst;
			s->fit_corrections++;
			if ((uint64_t)worst > s->fit_max_corr_ns)
				s->fit_max_corr_ns = (uint64_t)worst;
		}
		if (f.have_rt)
			s->fit_pairs += d->nrt;
	}
	return f;
}

/* How many of the instances in[i..j) of one communicator find a call of their function under
 * numbering ci with offset dd (at most 1000 looked at: the numbering holds from the start). */
static size_t agree(const struct an_rank *r, const struct inst *in, size_t i, size_t j,
                    const struct cidx *ci, size_t nc, int per_fn, int64_t dd)
{
	size_t ok = 0;
	for (size_t k = i; k < j && k < i + 1000; k++) {
		if (per_fn && !in[k].fn)
			continue;
		const struct cidx *x = find_key(ci, nc, in[k].comm, per_fn ? in[k].fn : 0,
		                                in[k].seq + (uint64_t)dd);
		if (x && (!in[k].fn || an_nccl_func(r->calls[x->call].fn) == in[k].fn))
			ok++;
	}
	return ok;
}

/* Each instance to the rank's call on its communicator hash, by NCCL's per-function numbering
 * (or, where more agree, the per-communicator one: see the top of this file); -1 when out of
 * memory. */
static int match_calls(const struct an_job *job, const struct an_rank *r,
                       const struct an_kch_file *d, struct inst *in, size_t nin,
                       const struct fit *f, struct an_kch *s)
{
	struct an_ncclnum *num;
	size_t nc = an_nccl_numbers(job, r, &num);
	struct cidx *cf = calloc(nc ? nc : 1, sizeof *cf), *cs = calloc(nc ? nc : 1, sizeof *cs);
	if (!cf || !cs || (nc && !num)) {
		free(cf), free(cs), free(num);
		return -1;
	}
	for (size_t k = 0; k < nc; k++) {
		cf[k] = (struct cidx){num[k].comm, num[k].nseq, num[k].call, num[k].fn};
		cs[k] = (struct cidx){num[k].comm, num[k].seq, num[k].call, 0};
	}
	free(num);
	if (nc > 1) /* cs is in num's (comm, seq) order already */
		qsort(cf, nc, sizeof *cf, by_key);
	for (size_t i = 0; i < nin;) {
		size_t j = i;
		while (j < nin && in[j].comm == in[i].comm)
			j++;
		/* per function from 0 (NCCL 2.23 on: every profiler-plugin NCCL) first, ties to it */
		int best_fn = 1;
		int64_t best = 0;
		size_t best_ok = 0;
		for (int per_fn = 1; per_fn >= 0; per_fn--) /* offsets: 0 and 1 expected */
			for (int64_t dd = -1; dd <= (per_fn ? 1 : 2); dd++) {
				size_t ok = agree(r, in, i, j, per_fn ? cf : cs, nc, per_fn, dd);
				if (ok > best_ok)
					best_ok = ok, best = dd, best_fn = per_fn;
			}
		if (!best_ok) /* nothing agrees: the per-communicator reading, as before */
			best_fn = 0, best = 1;
		for (size_t k = i; k < j; k++) {
			const struct cidx *x = find_key(best_fn ? cf : cs, nc, in[k].comm,
			                                best_fn ? in[k].fn : 0, in[k].seq + (uint64_t)best);
			if (!x || (in[k].fn && an_nccl_func(r->calls[x->call].fn) != in[k].fn)) {
				s->unmatched++;
				continue;
			}
			in[k].call = x->call;
			in[k].off = fit_off(d, f, in[k].ge);
		}
		i = j;
	}
	free(cf), free(cs);
	return 0;
}

/* The other bound: a channel starts after its call entered NCCL. A REALTIME pair read while
 * the thread was preempted, or realtime slewed by NTP, can put kernels before their calls;
 * shift the offset up by the largest such violation, as far as the stop bound allows. */
static void raise_to_calls(const struct an_rank *r, struct inst *in, size_t nin, struct an_kch *s)
{
	int64_t need = 0, slack = INT64_MAX;
	for (size_t k = 0; k < nin; k++) {
		if (in[k].call < 0)
			continue;
		int64_t v = (int64_t)(r->calls[in[k].call].t_enter - (in[k].gs + (uint64_t)in[k].off));
		if (v > need)
			need = v;
		int64_t u = (int64_t)(in[k].host - (in[k].ge + (uint64_t)in[k].off));
		if (u < slack)
			slack = u;
	}
	int64_t up = need < slack ? need : slack;
	if (up > 0) {
		for (size_t k = 0; k < nin; k++) /* stamps of a corrupt trace: saturate */
			if (__builtin_add_overflow(in[k].off, up, &in[k].off))
				in[k].off = INT64_MAX;
		s->fit_corrections++;
		if ((uint64_t)up > s->fit_max_corr_ns)
			s->fit_max_corr_ns = (uint64_t)up;
	}
}

/* fused collectives (one kernel, shared stamps) split its time by bytes, laid end to end, as
 * model.c splits a group's CUPTI kernel */
static void give_all(struct an_rank *r, struct inst *in, size_t nin, struct an_kch *s,
                     int64_t **diffs, size_t *ndiffs, size_t *capdiffs)
{
	if (nin > 1)
		qsort(in, nin, sizeof *in, by_fused);
	for (size_t i = 0; i < nin;) {
		size_t j = i + 1;
		while (j < nin && in[j].comm == in[i].comm && in[j].gs == in[i].gs &&
		       in[j].ge == in[i].ge)
			j++;
		uint64_t total = 0, dur = in[i].ge - in[i].gs;
		size_t n = 0;
		for (size_t k = i; k < j; k++)
			if (in[k].call >= 0)
				total += r->calls[in[k].call].bytes, n++;
		uint64_t at = in[i].gs + (uint64_t)in[i].off;
		for (size_t k = i; k < j; k++) {
			if (in[k].call < 0)
				continue;
			uint64_t b = r->calls[in[k].call].bytes;
			uint64_t part = n == 1 ? dur
			                : total ? (uint64_t)((double)dur * (double)b / (double)total)
			                        : dur / n;
			give(r, &in[k], at, part, s, diffs, ndiffs, capdiffs);
			at += part;
		}
		i = j;
	}
}

static void apply_rank(struct an_job *job, struct an_rank *r, struct an_kch_file *d,
                       struct an_kch *s, int64_t **diffs, size_t *ndiffs, size_t *capdiffs)
{
	if (d->nk > 1) /* qsort of a NULL table (a rank with no kernels) is UB, even for 0 items */
		qsort(d->k, d->nk, sizeof *d->k, by_comm_seq);
	mark_shared(d, s);
	if (d->nrt > 1)
		qsort(d->rt, d->nrt, sizeof *d->rt, by_other);
	size_t nin;
	struct inst *in = instances(d, s, &nin);
	struct fit f = clock_fit(d, in, nin, s);
	if (match_calls(job, r, d, in, nin, &f, s) < 0) {
		free(in);
		return;
	}
	if (f.have_rt && nin)
		raise_to_calls(r, in, nin, s);
	give_all(r, in, nin, s, diffs, ndiffs, capdiffs);
	free(in);
}

/* An an_dev for every device a call was timed on (a process that never sampled its links nor had
 * a kernel in a window has none): model.c keeps communication time per device. */
static void add_call_devices(struct an_rank *r)
{
	uint64_t seen = 0; /* devices 0..63 already checked */
	for (size_t k = 0; k < r->ncalls; k++) {
		int dev = r->calls[k].device;
		if (!r->calls[k].gpu_start || dev < 0 || dev >= 64 || (seen >> dev & 1))
			continue;
		seen |= 1ull << dev;
		int known = 0;
		for (size_t d = 0; d < r->ndevs && !known; d++)
			known = r->devs[d].device == dev;
		if (known)
			continue;
		struct an_dev *v = realloc(r->devs, (r->ndevs + 1) * sizeof *v);
		if (!v)
			return; /* out of memory: that device's calls count as host time */
		r->devs = v;
		memset(&v[r->ndevs], 0, sizeof *v);
		v[r->ndevs++].device = dev;
	}
}

int an_kch_apply(struct an_job *job)
{
	struct an_kch *s = calloc(1, sizeof *s);
	if (!s)
		return -1;
	job->kch = s;
	int64_t *diffs = NULL;
	size_t ndiffs = 0, capdiffs = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		if (!r->ok || (!r->kind_count[NVLP_K_KCH] && !r->kind_count[NVLP_K_KCOLL] &&
		               !r->kind_count[NVLP_K_KWINDOW]))
			continue;
		struct an_kch_file *d = r->kch_file;
		if (d) {
			s->channels += d->channels;
			s->zero += d->zero;
			s->reversed += d->reversed;
			s->nostop += d->nostop;
			s->noparent += d->noparent;
			s->windows += d->windows;
			s->window_ns += d->window_ns;
		}
		if (r->kind_count[NVLP_K_KWINDOW] && r->t_last > r->t_first)
			s->span_ns += r->t_last - r->t_first;
		struct an_kch_file none = {0};
		apply_rank(job, r, d ? d : &none, s, &diffs, &ndiffs, &capdiffs);
		if (r->kch_timed)
			add_call_devices(r);
		for (size_t k = 0; k < r->ncalls; k++)
			if (nvlp_nccl_fn_class(r->calls[k].fn) == 'C') {
				s->calls++;
				if (!r->calls[k].gpu_start)
					s->untimed++;
			}
	}
	s->xcheck = ndiffs;
	job->have_kch_gpu = s->timed > 0;
	if (ndiffs) {
		qsort(diffs, ndiffs, sizeof *diffs, cmp_i64);
		s->xcheck_median_ns = diffs[ndiffs / 2];
		uint64_t lo = diffs[0] < 0 ? 0 - (uint64_t)diffs[0] : (uint64_t)diffs[0];
		uint64_t hi = diffs[ndiffs - 1] < 0 ? 0 - (uint64_t)diffs[ndiffs - 1]
		                                    : (uint64_t)diffs[ndiffs - 1];
		s->xcheck_max_ns = lo > hi ? lo : hi;
	}
	free(diffs);
	return 0;
}

void an_kch_free(struct an_job *job)
{
	free(job->kch);
	job->kch = NULL;
}

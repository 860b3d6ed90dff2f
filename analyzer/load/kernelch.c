/* kernelch.c: what the kernel-channel timing keeps of one trace as ingest decodes it (r->kch_file):
 * KCH records checked and kept, CLOCK pairs, the communicator map; model/kernelch.c turns them
 * into GPU times. */
/*
 * Input, per trace: KCH records (one per channel of a collective: GPU globaltimer start/stop, the
 * host time the stop was reported), CLOCK pairs (source REALTIME: mono vs CLOCK_REALTIME; source
 * KCH: a stop stamp and when the host got it), NCCLPROF records (NCCL's commHash -> the shim's
 * communicator), KWINDOW records (when CUPTI kernel tracing was on). Records with zero or reversed
 * stamps, channels that never stopped and channels without a parent collective are dropped here
 * and counted.
 */
#include <stdlib.h> /* calloc, malloc */

#include "load/kernelch.h"
#include "load/pio.h" /* an_pio, PIO_ARRC */
#include "model/model.h"
#include "util/containers.h" /* PUSH */
#include "nvlp_trace.h"

uint8_t an_nccl_func(uint8_t fn)
{
	return fn == NVLP_NCCL_BCAST ? NVLP_NCCL_BROADCAST : fn;
}

static uint64_t map_comm(const struct an_kch_file *d, uint64_t nccl_comm)
{
	for (size_t i = 0; i < d->ncm; i++)
		if (d->cm[i].nccl_comm == nccl_comm)
			return d->cm[i].comm;
	return 0;
}

/* r's kernelch data, made on its first record; NULL when out of memory or full. */
static struct an_kch_file *kfile(struct an_rank *r)
{
	if (!r->kch_file)
		r->kch_file = calloc(1, sizeof *r->kch_file);
	return r->kch_file && !r->kch_file->full ? r->kch_file : NULL;
}

/* One entry kept: ch a channel (KCH) or a part (KCOLL), standing for n channels */
static void keep(struct an_kch_file *d, uint64_t comm, uint64_t nccl_comm, uint64_t seq,
                 uint64_t fn, uint64_t gs, uint64_t ge, uint64_t host, uint32_t ch, uint32_t n)
{
	struct an_kch_chan *x = PUSH(d->k, d->nk, d->capk);
	if (!x) {
		d->full = 1;
		return;
	}
	*x = (struct an_kch_chan){comm ? comm : map_comm(d, nccl_comm),
	                          seq,
	                          gs,
	                          ge,
	                          host,
	                          ch,
	                          1,
	                          an_nccl_func((uint8_t)fn),
	                          n};
	if (!x->comm)
		x->comm = nccl_comm | 1ull << 63; /* resolved at the end of the file */
}

void an_kch_on_kch(struct an_rank *r, const struct nvlp_rec_kch *k)
{
	struct an_kch_file *d = kfile(r);
	if (!d)
		return;
	d->channels++;
	if (k->flags & NVLP_KCH_NOSTOP) {
		d->nostop++;
		return;
	}
	if (k->flags & NVLP_KCH_NOPARENT) {
		d->noparent++;
		return;
	}
	enum an_kch_stamps st = an_kch_stamps(k->gpu_start, k->gpu_stop);
	if ((k->flags & NVLP_KCH_ZERO) || st == AN_KCH_ZERO) {
		d->zero++;
		return;
	}
	if ((k->flags & NVLP_KCH_REVERSED) || st == AN_KCH_REVERSED) {
		d->reversed++;
		return;
	}
	keep(d, k->comm, k->nccl_comm, k->seq, k->fn, k->gpu_start, k->gpu_stop, k->host,
	     (uint32_t)k->channel, 1);
}

/* v, at most what is left of *left (which loses it) */
static uint64_t take(uint64_t *left, uint64_t v)
{
	uint64_t t = v < *left ? v : *left;
	*left -= t;
	return t;
}

struct an_kcoll_split an_kcoll_split(const struct nvlp_rec_kcoll *k)
{
	struct an_kcoll_split x = {.chans = k->chans > 4096 ? 4096 : k->chans};
	uint64_t left = x.chans;
	x.zero = take(&left, k->zero);
	x.reversed = take(&left, k->reversed);
	x.nostop = take(&left, k->nostop);
	x.noparent = take(&left, k->noparent);
	x.good = left;
	return x;
}

void an_kch_on_kcoll(struct an_rank *r, const struct nvlp_rec_kcoll *k,
                     const struct an_kcoll_split *x)
{
	struct an_kch_file *d = kfile(r);
	if (!d)
		return;
	/* counted as the channels' own KCH records are */
	d->channels += x->chans;
	d->zero += x->zero;
	d->reversed += x->reversed;
	d->nostop += x->nostop;
	d->noparent += x->noparent;
	if (!x->good)
		return;
	switch (an_kch_stamps(k->gpu_start, k->gpu_stop)) {
	case AN_KCH_ZERO:
		d->zero += x->good;
		return;
	case AN_KCH_REVERSED:
		d->reversed += x->good;
		return;
	case AN_KCH_OK:
		break;
	}
	keep(d, k->comm, k->nccl_comm, k->seq, k->fn, k->gpu_start, k->gpu_stop, k->host,
	     (uint32_t)(k->part & 255), (uint32_t)x->good);
}

void an_kch_on_clock(struct an_rank *r, const struct nvlp_rec_clock *c)
{
	struct an_kch_file *d = c->source == NVLP_CLOCK_REALTIME ? kfile(r) : NULL;
	struct an_kch_rtpair *p = d ? PUSH(d->rt, d->nrt, d->caprt) : NULL;
	if (p)
		*p = (struct an_kch_rtpair){c->mono, c->other};
}

void an_kch_on_ncclprof(struct an_rank *r, const struct nvlp_rec_ncclprof *n)
{
	if (!n->comm)
		return;
	struct an_kch_file *d = kfile(r);
	if (!d || map_comm(d, n->nccl_comm))
		return;
	struct an_kch_cmap *m = PUSH(d->cm, d->ncm, d->capcm);
	if (m)
		*m = (struct an_kch_cmap){n->nccl_comm, n->comm};
}

void an_kch_on_kwindow(struct an_rank *r, const struct nvlp_rec_kwindow *w)
{
	struct an_kch_file *d = kfile(r);
	if (!d)
		return;
	d->windows++;
	d->window_ns += w->dur;
}

void an_kch_file_end(struct an_rank *r)
{
	struct an_kch_file *d = r->kch_file;
	for (size_t i = 0; d && i < d->nk; i++)
		if (d->k[i].comm >> 63) {
			uint64_t c = map_comm(d, d->k[i].comm & ~(1ull << 63));
			d->k[i].comm = c ? c : d->k[i].comm;
		}
}

void an_kch_file_io(struct an_pio *io, struct an_rank *r)
{
	uint8_t have = r->kch_file != NULL;
	an_pio_bytes(io, &have, 1);
	if (io->rd)
		r->kch_file = have && !io->err ? malloc(sizeof *r->kch_file) : NULL;
	struct an_kch_file *d = r->kch_file;
	if (!d)
		return;
	an_pio_bytes(io, d, sizeof *d);
	PIO_ARRC(io, d->k, d->nk, d->capk);
	PIO_ARRC(io, d->rt, d->nrt, d->caprt);
	PIO_ARRC(io, d->cm, d->ncm, d->capcm);
}

void an_kch_file_free(struct an_rank *r)
{
	struct an_kch_file *d = r->kch_file;
	if (d)
		free(d->k), free(d->rt), free(d->cm);
	free(d);
	r->kch_file = NULL;
}

/* kernelch.h: the load layer's part of the kernel-channel timing: what ingest keeps of one trace's
 * KCH, CLOCK, NCCLPROF and KWINDOW records (r->kch_file), which the analysis stage
 * (model/kernelch.h) reads, and the handlers that fill it. */
#ifndef AN_KERNELCH_H
#define AN_KERNELCH_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "nvlp_format.h" /* NVLP_KCH_MAX_NS */

struct an_rank;
struct an_pio;
struct nvlp_rec_kch;
struct nvlp_rec_kcoll;
struct nvlp_rec_clock;
struct nvlp_rec_ncclprof;
struct nvlp_rec_kwindow;

/* A channel longer than this is not a real stamp pair. */
#define AN_KCH_MAX_NS NVLP_KCH_MAX_NS

/* What a channel's GPU stamps (or a KCOLL record's span) are worth: usable, or why not. */
enum an_kch_stamps { AN_KCH_OK, AN_KCH_ZERO, AN_KCH_REVERSED };
static inline enum an_kch_stamps an_kch_stamps(uint64_t gs, uint64_t ge)
{
	if (!gs || !ge)
		return AN_KCH_ZERO;
	return ge < gs || ge - gs > AN_KCH_MAX_NS ? AN_KCH_REVERSED : AN_KCH_OK;
}

/* A KCOLL record's channels by what became of them (a corrupt count bounded: the shim writes at
 * most 4096 on one record); good = those whose stamps the span holds. */
struct an_kcoll_split {
	uint64_t chans, zero, reversed, nostop, noparent, good;
};

/* One KCH record kept: a channel of a collective (the shim's communicator, NCCL's seq); or one
 * KCOLL record: n channels folded (ch = its part: a repeated part starts the next execution, as a
 * repeated channel does). */
struct an_kch_chan {
	uint64_t comm, seq, gs, ge, host;
	uint32_t ch, share;
	uint8_t fn;
	uint32_t n; /* channels it stands for: 1 for KCH */
};
/* A CLOCK pair of source REALTIME: mono vs CLOCK_REALTIME. */
struct an_kch_rtpair {
	uint64_t mono, other;
};
/* NCCL's communicator hash -> the shim's (NCCLPROF). */
struct an_kch_cmap {
	uint64_t nccl_comm, comm;
};

/* What kernelch keeps of one trace, filled by ingest's handlers as the file is decoded once
 * (r->kch_file); kept until the job is freed, so the results can be computed again. */
struct an_kch_file {
	struct an_kch_chan *k;
	size_t nk, capk;
	struct an_kch_rtpair *rt;
	size_t nrt, caprt;
	struct an_kch_cmap *cm;
	size_t ncm, capcm;
	int full; /* out of memory: the rest of the file is not read (as a reader that stopped) */
	/* counted as read, summed into job->kch by an_kch_apply */
	uint64_t channels, zero, reversed, nostop, noparent, windows, window_ns;
};

/*! The function as NCCL counts it (ncclBcast is its Broadcast). */
uint8_t an_nccl_func(uint8_t fn);

/* ---- ingest's handlers: what one trace's KCH, CLOCK, NCCLPROF and KWINDOW records tell
 * kernelch, kept in r->kch_file (the file is decoded once, by ingest) ---- */
/*! A KCH record: kept, or counted as dropped (zero, reversed, never stopped, no parent). */
void an_kch_on_kch(struct an_rank *r, const struct nvlp_rec_kch *k);
/*! A KCOLL record's channels split by what became of them. */
struct an_kcoll_split an_kcoll_split(const struct nvlp_rec_kcoll *k);
/*! A KCOLL record (x: its split): its channels counted as their KCH records would be, its span
 * kept. */
void an_kch_on_kcoll(struct an_rank *r, const struct nvlp_rec_kcoll *k,
                     const struct an_kcoll_split *x);
/*! A CLOCK record: its REALTIME pairs kept for the clock fit. */
void an_kch_on_clock(struct an_rank *r, const struct nvlp_rec_clock *c);
/*! An NCCLPROF record: NCCL's communicator hash -> the shim's. */
void an_kch_on_ncclprof(struct an_rank *r, const struct nvlp_rec_ncclprof *n);
/*! A KWINDOW record: one more kernel tracing window, counted with its length. */
void an_kch_on_kwindow(struct an_rank *r, const struct nvlp_rec_kwindow *w);
/*! End of r's file: channels named by NCCL's communicator get the shim's (NCCLPROF map). */
void an_kch_file_end(struct an_rank *r);
/*! r->kch_file freed (NULL after). */
void an_kch_file_free(struct an_rank *r);
/*! r's KCH state written to or read from a partial (partial.h) */
void an_kch_file_io(struct an_pio *io, struct an_rank *r);

#endif /* AN_KERNELCH_H */

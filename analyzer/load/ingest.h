/* ingest.h: what ingest.c and ingest_meta.c share: the loading state of one file and the checks
 * every record handler makes. Internal to load/. */
#ifndef NVLP_AN_INGEST_H
#define NVLP_AN_INGEST_H

#include <stdint.h> /* uint64_t */

#include "load/load.h"
#include "model/model.h"
#include "nvlp_trace.h"

struct tdrop {
	uint64_t tid, dropped;
};
/* Loading state of one file (freed after it). */
struct lctx {
	struct an_rank *r;
	nvlp_reader *rd;
	const struct nvlp_record *rec; /* the record being handled */
	struct an_match *m;
	int8_t *scls; /* per string id: an_coll_of_kernel + 2, 0 = not looked up */
	size_t nscls;
	struct tdrop *drops;
	size_t ndrops, capdrops;
	struct an_index comm_ix, pair_ix, drop_ix;
	int lastcomm; /* the latest communicator found (most calls are on one) */
	struct an_index sig_ix; /* struct an_csig -> its entry in r->csigs */
	long lastsig;           /* the latest call's entry (a DDP job repeats a few in a row) */
	size_t capdevs, cappairs, capallocs, capnotes, caplinks, capmods, capstacks, capcomms;
	size_t capchoices, capsyms;
	int lastdev;
	/* NCCL runs a single-rank communicator's collectives as device copies on the call's stream:
	 * those calls and the device-to-device copies, matched at the end of the file */
	struct srcall {
		uint32_t idx;
		int dev;
		uint64_t cs, t, bytes;
	} *sr;
	size_t nsr, capsr;
	struct dcopy {
		int dev;
		uint64_t stream, s, d, bytes;
		int used;
	} *dc;
	size_t ndc, capdc;
	/* calls that lasted long enough to have been written as in flight first (tid, t_enter):
	 * an INFLIGHT record of one of them names a call that returned */
	struct longcall {
		uint64_t tid, t_enter;
	} *longs;
	size_t nlongs, caplongs;
};
/* INFLIGHT is written for calls in progress for more than 1 s: a call that returned after a
 * shorter time never had one */
#define LONG_CALL_NS 500000000ull

/*! The record is unusable: skip it, and say so once per file (the count says how many).
 * @return -1 */
int an_ingest_bad(struct lctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A call that may have had an INFLIGHT record before it returned (kept when over LONG_CALL_NS). */
void an_ingest_long_call(struct lctx *c, uint64_t tid, uint64_t t_enter, uint64_t dur);

static inline int dev_ok(uint64_t d)
{
	int64_t v = (int64_t)d;
	return v >= -1 && v <= AN_MAX_DEVICE;
}

/* A time of process r's own clock it could have lived to (see AN_MAX_LIFE_NS) */
static inline int life_ok(const struct an_rank *r, uint64_t t)
{
	return !r->t_mono0 || t - r->t_mono0 <= AN_MAX_LIFE_NS || t < r->t_mono0;
}

static inline void seen_time(struct an_rank *r, uint64_t s, uint64_t e)
{
	if (!s)
		return;
	if (s < r->t_first || !r->t_first)
		r->t_first = s;
	if (e > r->t_last && life_ok(r, e))
		r->t_last = e;
}

/* A record of a kind that seen_time does not take: the process was alive at t. */
static inline void alive_at(struct an_rank *r, uint64_t t)
{
	if (t > r->t_alive && life_ok(r, t))
		r->t_alive = t;
}

/* The handlers of the kinds that come a few per process (ingest_meta.c): one per record kind,
 * each 0, or -1 the record was skipped (an_ingest_bad said why). ingest.c keeps those that come
 * by the million, for its dispatch switch to inline. */
int an_ingest_ncclcomm(struct lctx *c);
int an_ingest_managed(struct lctx *c);
int an_ingest_um(struct lctx *c);
int an_ingest_peer(struct lctx *c);
int an_ingest_nvlink(struct lctx *c);
int an_ingest_note(struct lctx *c);
int an_ingest_stack(struct lctx *c);
int an_ingest_module(struct lctx *c);
int an_ingest_buildid(struct lctx *c);
int an_ingest_symbol(struct lctx *c);
int an_ingest_drops(struct lctx *c);
int an_ingest_end(struct lctx *c);
int an_ingest_cost(struct lctx *c);
int an_ingest_exitinfo(struct lctx *c);
int an_ingest_header(struct lctx *c);
int an_ingest_commname(struct lctx *c);
int an_ingest_mark(struct lctx *c);
int an_ingest_inflight(struct lctx *c);
int an_ingest_fatal(struct lctx *c);
int an_ingest_pystack(struct lctx *c);
int an_ingest_pyref(struct lctx *c);

#endif

/* fake_profiler.c: a second NCCL profiler plugin for the chaining tests: logs every call it receives, with its own ids for contexts and handles. */
/*
 * FAKE_PROF_LOG=PATH   appends one line per call (no pointers, no times: two runs compare equal)
 * FAKE_PROF_MASK=N     the event mask init sets (default Coll | KernelCh, as NCCL Inspector)
 * FAKE_PROF_MASK2=N    ... set instead after FAKE_PROF_FLIP (default 20) events: a run-time change
 * FAKE_PROF_INIT_RC=N  init fails with N
 * Built as v5 (libnccl-profiler-fakelog.so), -DFAKE_PROF_V4 (only ncclProfiler_v4),
 * -DFAKE_PROF_V2 (only a v2-named table) and -DFAKE_PROF_NONE (no table at all).
 */
#include <nccl.h>
#include <pthread.h> /* pthread_mutex_t */
#include <stdarg.h>  /* va_list */
#include <stdio.h>   /* fprintf */
#include <stdlib.h>  /* getenv, strtol */
#include <string.h>  /* strlen */

#include "nccl/profiler.h"

#if defined(FAKE_PROF_V2) || defined(FAKE_PROF_NONE)
#pragma GCC diagnostic ignored "-Wunused-function" /* a table-less build */
#endif
#define EXPORT __attribute__((visibility("default")))
#define NH 65536
#define NC 64

struct h {
	uint64_t type; /* the type word first, as NCCL's plugins do */
	int id;
};
static struct h pool[NH];
static struct h ctxs[NC];
static int nh, nc, nstarts;
static int *mask_ptr;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int env_int(const char *n, int dflt)
{
	const char *v = getenv(n);
	return v && *v ? (int)strtol(v, NULL, 0) : dflt;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	const char *p = getenv("FAKE_PROF_LOG");
	FILE *f = p ? fopen(p, "a") : NULL;
	if (!f)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

/* "H<id>" for one of this plugin's handles, "-" for none, FOREIGN for anything else */
static const char *hid(const void *p, char *buf)
{
	if (!p)
		return "-";
	if ((const struct h *)p >= pool && (const struct h *)p < pool + NH) {
		snprintf(buf, 24, "H%d", ((const struct h *)p)->id);
		return buf;
	}
	if ((const struct h *)p >= ctxs && (const struct h *)p < ctxs + NC) {
		snprintf(buf, 24, "C%d", ((const struct h *)p)->id);
		return buf;
	}
	return "FOREIGN";
}

static ncclResult_t init_(void **ctx, uint64_t commId, int *mask, const char *name, int nNodes,
                          int nranks, int rank)
{
	pthread_mutex_lock(&mu);
	int in = mask ? *mask : -1, rc = env_int("FAKE_PROF_INIT_RC", 0);
	struct h *c = &ctxs[nc % NC];
	c->id = nc++;
	if (!rc && mask)
		*mask = env_int("FAKE_PROF_MASK", ncclProfileColl | ncclProfileKernelCh);
	mask_ptr = mask;
	*ctx = rc ? NULL : c;
	logf_("init C%d comm=%llx name=%s nodes=%d nranks=%d rank=%d mask_in=%d mask=%d rc=%d", c->id,
	      (unsigned long long)commId, name ? name : "-", nNodes, nranks, rank, in,
	      mask ? *mask : -1, rc);
	pthread_mutex_unlock(&mu);
	return (ncclResult_t)rc;
}

static const char *tname(uint64_t t)
{
	static const char *n[] = {"Group", "Coll", "P2p", "ProxyOp", "ProxyStep", "ProxyCtrl",
	                          "KernelCh", "NetPlugin", "GroupApi", "CollApi", "P2pApi",
	                          "KernelLaunch"};
	for (int i = 0; i < 12; i++)
		if (t == 1ull << i)
			return n[i];
	return "?";
}

/* type, parent, the fields both layouts share */
static ncclResult_t start_(void *ctx, void **eh, uint64_t type, void *parent, const char *what)
{
	pthread_mutex_lock(&mu);
	char b1[24], b2[24];
	struct h *e = &pool[nh % NH];
	e->type = type;
	e->id = nh++;
	logf_("start %s %s parent=%s %s -> H%d", hid(ctx, b1), tname(type), hid(parent, b2), what,
	      e->id);
	*eh = e;
	if (++nstarts == env_int("FAKE_PROF_FLIP", 20) && getenv("FAKE_PROF_MASK2") && mask_ptr)
		__atomic_store_n(mask_ptr, env_int("FAKE_PROF_MASK2", 0), __ATOMIC_RELAXED);
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

static ncclResult_t stop_(void *eh)
{
	char b[24];
	pthread_mutex_lock(&mu);
	logf_("stop %s", hid(eh, b));
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

static ncclResult_t state_(void *eh, int s, uint64_t ptimer)
{
	char b[24];
	pthread_mutex_lock(&mu);
	logf_("state %s s=%d ptimer=%s", hid(eh, b), s, ptimer ? "set" : "0");
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

static ncclResult_t fin_(void *ctx)
{
	char b[24];
	pthread_mutex_lock(&mu);
	logf_("finalize %s", hid(ctx, b));
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

/* what the common members say, for the log */
#define COLL_FIELDS(d, nch)                                                                        \
	snprintf(w, sizeof w, "seq=%llu func=%s count=%zu dt=%s nch=%d warps=%d algo=%s proto=%s",   \
	         (unsigned long long)(d)->coll.seqNumber, (d)->coll.func, (d)->coll.count,          \
	         (d)->coll.datatype, (int)(nch), (int)(d)->coll.nWarps, (d)->coll.algo, (d)->coll.proto)

#if defined(FAKE_PROF_V4)
static ncclResult_t s4(void *ctx, void **eh, ncclProfilerEventDescr_v4_t *d)
{
	char w[256] = "";
	if (d->type == ncclProfileColl)
		COLL_FIELDS(d, d->coll.nChannels);
	else if (d->type == ncclProfileKernelCh)
		snprintf(w, sizeof w, "ch=%d ptimer=%s", d->kernelCh.channelId, d->kernelCh.pTimer ? "set" : "0");
	return start_(ctx, eh, d->type, d->parentObj, w);
}
static ncclResult_t i4(void **ctx, int *mask, const char *name, uint64_t commId, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn)
{
	(void)logfn;
	return init_(ctx, commId, mask, name, nNodes, nranks, rank);
}
static ncclResult_t r4(void *eh, ncclProfilerEventState_v4_t s, ncclProfilerEventStateArgs_v4_t *a)
{
	return state_(eh, s, s == ncclProfilerKernelChStop && a ? a->kernelCh.pTimer : 0);
}
EXPORT ncclProfiler_v4_t ncclProfiler_v4 = {"fakelog4", i4, s4, stop_, r4, fin_};
#elif defined(FAKE_PROF_V2)
EXPORT ncclProfiler_v4_t ncclProfiler_v2 = {"fakelog2", NULL, NULL, NULL, NULL, NULL};
#elif !defined(FAKE_PROF_NONE)
static ncclResult_t s5(void *ctx, void **eh, ncclProfilerEventDescr_v5_t *d)
{
	char w[256] = "", b[24];
	if (d->type == ncclProfileColl) {
		COLL_FIELDS(d, d->coll.nChannels);
		snprintf(w + strlen(w), sizeof w - strlen(w), " group=%s", hid(d->coll.parentGroup, b));
	} else if (d->type == ncclProfileKernelCh) {
		snprintf(w, sizeof w, "ch=%d ptimer=%s", d->kernelCh.channelId, d->kernelCh.pTimer ? "set" : "0");
	} else if (d->type == ncclProfileCollApi) {
		snprintf(w, sizeof w, "func=%s count=%zu dt=%s", d->collApi.func, d->collApi.count,
		         d->collApi.datatype);
	} else if (d->type == ncclProfileGroupApi) {
		snprintf(w, sizeof w, "depth=%d", d->groupApi.groupDepth);
	}
	return start_(ctx, eh, d->type, d->parentObj, w);
}
static ncclResult_t i5(void **ctx, uint64_t commId, int *mask, const char *name, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn)
{
	(void)logfn;
	return init_(ctx, commId, mask, name, nNodes, nranks, rank);
}
static ncclResult_t r5(void *eh, ncclProfilerEventState_v5_t s, ncclProfilerEventStateArgs_v5_t *a)
{
	return state_(eh, s, s == ncclProfilerKernelChStop && a ? a->kernelCh.pTimer : 0);
}
EXPORT ncclProfiler_v5_t ncclProfiler_v5 = {"fakelog", i5, s5, stop_, r5, fin_};
#endif

/* test_kcoll_threads.c: the shim folds kernel channels per collective (KCOLL) while one thread starts collectives and another reports their channels, as NCCL's proxy thread does. */
/*
 * The child runs under the shim and drives its profiler plugin table (ncclProfiler_v5) from two
 * threads: the job's thread starts collectives (a Coll event each, 4 channels declared, every
 * seventh declares 5), the proxy thread reports each collective's 4 channels (KernelCh start, stop
 * state, stop) up to 1,000 collectives behind. Twice the proxy thread starts a collective's
 * channels, lets the job's thread start 4,100 more (the collective's handle is reused: NCCL's
 * handles live in a ring of 4,096), and only then stops them; the collectives in between report
 * no channel. The trace must hold every channel once, each collective's span exact (channel 0
 * spans the kernel, the others lie inside it), one record per collective where nothing odd
 * happened, the reused handle's channels on records of their own under their own collective,
 * and no KCH record. Every tenth collective the proxy thread also reports 3 channels without a
 * parent (as NCCL reports point-to-point channels when only collective events are asked for):
 * counted on a few KCOLL records, not one record each. Run under ThreadSanitizer too (make
 * SAN=thread).
 */
#include <limits.h>  /* PATH_MAX */
#include <pthread.h> /* pthread_create */
#include <sched.h>   /* sched_yield */
#include <stdio.h>   /* printf */
#include <stdlib.h>  /* calloc */
#include <string.h>  /* memset */
#include <unistd.h>  /* rmdir */
#include <dlfcn.h>   /* dlsym */

#include "check.h"
#include "model/kernelch.h" /* struct an_kch */
#include "model/model.h"
#include "pipeline.h" /* an_job_analyze */
#include "nvlp_trace.h"
#include "shim_child.h"
#include "fakes/fake.h" /* fake_descr_v5, fake_profiler_v5 */

#define NCOLL 30000
#define NCH 4
#define LAG 1000                 /* the proxy thread's furthest lag behind the job's thread */
#define REUSE 4100               /* collectives started while a held collective's channels run */
#define HELD(i) ((i) == 5000 || (i) == 17000)
#define SKIPPED(i) (((i) > 5000 && (i) <= 5000 + REUSE) || ((i) > 17000 && (i) <= 17000 + REUSE))
#define G(i) (1790000000000000000ull + (uint64_t)(i) * 20000ull) /* collective i's kernel start */
#define DUR 5000ull
#define ORPHANS(i) ((i) % 10 == 0 && !SKIPPED(i) ? 3 : 0) /* channels without a parent */

static const fake_profiler_v5 *plugin;
static void *ctx;
static void *handles[NCOLL];
static int started;  /* collectives the job's thread started (atomic) */
static int reported; /* collectives the proxy thread is done with (atomic) */
static int holding;  /* the proxy thread holds a collective's channels (atomic) */

static void *job_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < NCOLL; i++) {
		/* relaxed: the proxy thread's progress orders nothing here, so that ThreadSanitizer
		 * sees the plugin's own locking, not this test's */
		int lag = __atomic_load_n(&holding, __ATOMIC_RELAXED) ? REUSE + LAG : LAG;
		while (i - __atomic_load_n(&reported, __ATOMIC_RELAXED) > lag)
			sched_yield();
		fake_descr_v5 d;
		memset(&d, 0, sizeof d);
		d.type = 1 << 1; /* ncclProfileColl */
		d.coll.seqNumber = (uint64_t)i;
		d.coll.func = "AllReduce";
		d.coll.count = 1 << 20;
		d.coll.datatype = "ncclFloat32";
		d.coll.nChannels = i % 7 == 3 ? NCH + 1 : NCH; /* one never comes: written later */
		d.coll.algo = "RING";
		d.coll.proto = "SIMPLE";
		void *h = NULL;
		plugin->startEvent(ctx, &h, &d);
		handles[i] = h;
		__atomic_store_n(&started, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *channel_start(void *parent, int c, uint64_t g)
{
	fake_descr_v5 k;
	memset(&k, 0, sizeof k);
	k.type = 1 << 6; /* ncclProfileKernelCh */
	k.parentObj = parent;
	k.kernelCh.channelId = (uint8_t)c;
	k.kernelCh.pTimer = g + (c ? 100ull * (uint64_t)c : 0);
	void *kh = NULL;
	plugin->startEvent(ctx, &kh, &k);
	return kh;
}

static void channel_stop(void *kh, int c, uint64_t g)
{
	uint64_t st[2] = {g + DUR - (c ? 50ull * (uint64_t)c : 0), 0};
	plugin->recordEventState(kh, 22 /* ncclProfilerKernelChStop */, st);
	plugin->stopEvent(kh);
}

static void *proxy_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < NCOLL; i++) {
		while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) <= i)
			sched_yield();
		if (SKIPPED(i)) {
			__atomic_store_n(&reported, i + 1, __ATOMIC_RELAXED);
			continue;
		}
		void *kh[NCH];
		for (int c = 0; c < NCH; c++)
			kh[c] = channel_start(handles[i], c, G(i));
		if (HELD(i)) { /* until the job's thread reused this collective's handle */
			__atomic_store_n(&holding, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&reported, i + 1, __ATOMIC_RELAXED);
			while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) <= i + REUSE)
				sched_yield();
		}
		for (int c = 0; c < NCH; c++)
			channel_stop(kh[c], c, G(i));
		for (int c = 0; c < ORPHANS(i); c++)
			channel_stop(channel_start(NULL, 60 + c, G(i)), 60 + c, G(i));
		__atomic_store_n(&holding, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&reported, i + 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int child(void)
{
	plugin = dlsym(RTLD_DEFAULT, "ncclProfiler_v5");
	if (!plugin)
		return 2;
	int mask = 0;
	if (plugin->init(&ctx, 0x5eed, &mask, "kcoll", 1, 2, 0, NULL) != 0 || !ctx ||
	    !(mask & (1 << 6)))
		return 3;
	pthread_t j, p;
	pthread_create(&j, NULL, job_thread, NULL);
	pthread_create(&p, NULL, proxy_thread, NULL);
	pthread_join(j, NULL);
	pthread_join(p, NULL);
	plugin->finalize(ctx);
	return 0;
}

/* ---- the parent: what the trace says of each collective ---- */
struct seen {
	uint64_t chans, records, gs, ge, alone;
};
struct totals {
	struct seen *s;
	uint64_t kcoll, kch, bad_seq, bad_counts, orphans, orphan_records;
};

static void on_record(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	(void)r;
	struct totals *t = arg;
	if (rec->kind == NVLP_K_KCH)
		t->kch++;
	if (rec->kind != NVLP_K_KCOLL)
		return;
	const struct nvlp_rec_kcoll *k = (const void *)rec->f;
	t->kcoll++;
	if (k->noparent) {
		t->orphans += k->noparent;
		t->orphan_records++;
		t->bad_counts += k->chans != k->noparent || k->gpu_start || k->gpu_stop;
		return;
	}
	if (k->seq >= NCOLL) {
		t->bad_seq++;
		return;
	}
	struct seen *s = &t->s[k->seq];
	t->bad_counts += k->zero + k->reversed + k->nostop != 0;
	s->chans += k->chans;
	s->records++;
	s->alone += k->part >= NVLP_KCOLL_PART_ALONE;
	if (!s->gs || k->gpu_start < s->gs)
		s->gs = k->gpu_start;
	if (k->gpu_stop > s->ge)
		s->ge = k->gpu_stop;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child"))
		return child();
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	char dir[] = "/tmp/nvlp-kcoll.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	const char *env[] = {"NVLPROF_CUPTI=0", "NCCL_PROFILER_PLUGIN", "NVLPROF_KCH", NULL};
	int rc = shim_run_child(self, lib, dir, "0", env, NULL);
	CHECK(rc == 0, "the two threads drove the plugin (status %d)", rc);
	struct totals t = {calloc(NCOLL, sizeof(struct seen)), 0, 0, 0, 0, 0, 0};
	if (!t.s)
		return 1;
	CHECK(trace_dir_each(dir, on_record, NULL, &t) == 1, "one trace");
	uint64_t with = 0, exact = 0, one = 0, held_ok = 0, skipped_none = 0, orphans = 0;
	for (int i = 0; i < NCOLL; i++) {
		const struct seen *s = &t.s[i];
		orphans += (uint64_t)ORPHANS(i);
		if (SKIPPED(i)) {
			skipped_none += s->records == 0;
			continue;
		}
		with++;
		exact += s->chans == NCH && s->gs == G(i) && s->ge == G(i) + DUR;
		one += s->records == 1;
		if (HELD(i))
			held_ok += s->alone == NCH && s->records == NCH;
	}
	CHECK(exact == with, "every collective: its %d channels once, its span exact (%llu of %llu)",
	      NCH, (unsigned long long)exact, (unsigned long long)with);
	CHECK(one == with - 2, "one record per collective but the two held (%llu of %llu)",
	      (unsigned long long)one, (unsigned long long)with);
	CHECK(held_ok == 2,
	      "a reused handle's channels: a record each, under their collective (%llu of 2)",
	      (unsigned long long)held_ok);
	CHECK(skipped_none == 2 * REUSE, "no record for the collectives without channels (%llu of %d)",
	      (unsigned long long)skipped_none, 2 * REUSE);
	CHECK(t.orphans == orphans && t.orphan_records == (orphans + 4095) / 4096,
	      "channels without a parent: %llu counted (%llu) on %llu records",
	      (unsigned long long)t.orphans, (unsigned long long)orphans,
	      (unsigned long long)t.orphan_records);
	CHECK(t.kch == 0 && t.bad_seq == 0 && t.bad_counts == 0,
	      "no KCH record, no record of a collective never started, no bad channel counted "
	      "(%llu, %llu, %llu)",
	      (unsigned long long)t.kch, (unsigned long long)t.bad_seq,
	      (unsigned long long)t.bad_counts);
	/* the analyzer counts them as it counts KCH records: every channel, the orphans apart */
	char *paths[1] = {dir};
	struct an_job job;
	memset(&job, 0, sizeof job);
	char err[512] = "";
	CHECK(an_job_load(&job, paths, 1, 1, err, sizeof err) == 0, "the job loads (%s)", err);
	an_job_analyze(&job);
	const struct an_kch *k = job.kch;
	CHECK(k && k->channels == with * NCH + orphans && k->noparent == orphans &&
	          k->collectives == with && k->replays == 0,
	      "analyzer: %llu channels (%llu), %llu without parent, %llu collectives (%llu), %llu "
	      "replays",
	      k ? (unsigned long long)k->channels : 0, (unsigned long long)(with * NCH + orphans),
	      k ? (unsigned long long)k->noparent : 0, k ? (unsigned long long)k->collectives : 0,
	      (unsigned long long)with, k ? (unsigned long long)k->replays : 0);
	an_job_free(&job);
	free(t.s);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return CHECK_DONE();
}

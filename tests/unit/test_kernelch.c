/* test_kernelch.c: every collective of a two-rank run of the fakes gets its GPU time from NCCL's kernel-channel stamps. */
/*
 * The parent runs itself twice under the shim (ranks 0 and 1 of one communicator of the fake
 * NCCL, FAKE_NCCL_KCH=1: KernelCh events for every collective, collectives in a group share one
 * fused kernel's stamps; rank 1 also gets the bad cases: zero and reversed stamps, a channel that
 * never stops, graph replays). The fake logs each collective's true kernel span; the analyzer
 * (kernelch.c via an_job_analyze) must give every collective call exactly that GPU time (a fused
 * kernel split by bytes, as CUPTI group kernels are), drop and count the bad channels, count the
 * replays, and keep the shim's seq / NCCL's seqNumber match.
 *
 * The same checks run on every way the shim records the channels: folded into one KCOLL record
 * per collective (the default), one KCH record per channel (NVLPROF_KCH=channels), KCOLL when
 * NCCL reports more channels than its Coll event declared (each collective then has a record of
 * its late channel too), and KCOLL when it reports fewer, in a process that exits without
 * ncclCommDestroy (records are written when the next collective's channels come, the last one
 * by the end of the trace). 24 channels with scattered stamps, as NVLink collectives have.
 * NCCLPROF records: no start of their own inside a call the shim recorded, one where a call
 * reached NCCL around the hook (run_direct).
 */
#include <dlfcn.h>  /* dlsym */
#include <limits.h> /* PATH_MAX */
#include <nccl.h>   /* ncclAllReduce */
#include <stdio.h>  /* fopen */
#include <stdlib.h> /* setenv, mkdtemp */
#include <string.h> /* strcmp */
#include <unistd.h> /* fork */

#include "check.h"
#include "util/json.h"
#include "model/kernelch.h"     /* an_kch_apply, an_nccl_numbers */
#include "out/kernelch_print.h" /* an_kch_report_text, an_kch_json */
#include "model/model.h"
#include "pipeline.h" /* an_job_analyze */
#include "nvlp_trace.h"
#include "shim_child.h"

#define NCOLL 300

/* ---- child: rank r of 2 ---- */
static int child(int rank)
{
	ncclUniqueId id;
	ncclComm_t comm;
	memset(&id, 0, sizeof id);
	if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess)
		return 3;
	static float buf[1 << 20];
	for (int i = 0; i < NCOLL; i++) {
		size_t n = 1024u << (i % 9); /* 4 KiB .. 1 MiB: 2 and 16 channels */
		if (i % 10 == 9) {           /* a group: two collectives, one kernel */
			ncclGroupStart();
			ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, NULL);
			ncclAllReduce(buf, buf, n / 2, ncclFloat32, ncclSum, comm, NULL);
			ncclGroupEnd();
		} else if (i % 7 == 3) {
			ncclAllGather(buf, buf, n / 2, ncclFloat32, comm, NULL);
		} else {
			ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, NULL);
		}
	}
	if (getenv("TEST_KCH_DIRECT")) {
		/* NCCL reached without the shim's hook (as by a library that looks it up in
		 * libnccl itself): its NCCLPROF record keeps a start of its own */
		void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
		__typeof__(&ncclAllReduce) f = h ? (__typeof__(&ncclAllReduce))dlsym(h, "ncclAllReduce")
		                                 : NULL;
		if (!f || f == ncclAllReduce)
			return 4;
		f(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL);
	}
	if (getenv("TEST_KCH_NO_DESTROY"))
		return 0; /* no finalize: what the shim holds is written at the end of the trace */
	ncclCommDestroy(comm); /* the plugin's finalize: channels never stopped are recorded */
	return 0;
}

struct truth {
	uint64_t span;
	int share;
	int seen;
};

/* In one trace, file order: KCOLL records after the last collective call's NCCL record */
struct late {
	unsigned long long kcoll_since_nccl, late;
};
static void count_late(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	(void)r;
	struct late *l = arg;
	if (rec->kind == NVLP_K_NCCL && nvlp_nccl_fn_class((unsigned)rec->f[0]) == 'C')
		l->kcoll_since_nccl = 0;
	else if (rec->kind == NVLP_K_KCOLL)
		l->kcoll_since_nccl++;
}
static void file_late(nvlp_reader *r, void *arg)
{
	(void)r;
	struct late *l = arg;
	if (l->kcoll_since_nccl > l->late)
		l->late = l->kcoll_since_nccl;
	l->kcoll_since_nccl = 0;
}

/* NCCLPROF records, and those with a start (none when every collective came through the shim's
 * NCCL hooks, whose NCCL records have the time) */
struct profs {
	unsigned long long n, with_start;
};
static void count_profs(nvlp_reader *r, const struct nvlp_record *rec, void *arg)
{
	(void)r;
	struct profs *p = arg;
	if (rec->kind == NVLP_K_NCCLPROF) {
		p->n++;
		p->with_start += ((const struct nvlp_rec_ncclprof *)rec->f)->start != 0;
	}
}

/* trace_dir_each over the traces of both ranks (dir/r0, dir/r1) */
static void both_ranks(const char *dir,
                       void (*on_rec)(nvlp_reader *, const struct nvlp_record *, void *),
                       void (*on_file)(nvlp_reader *, void *), void *arg)
{
	for (int r = 0; r < 2; r++) {
		char rd[256];
		snprintf(rd, sizeof rd, "%s/r%d", dir, r);
		trace_dir_each(rd, on_rec, on_file, arg);
	}
}

/* One way of recording: env for both ranks; destroyed: the child calls ncclCommDestroy */
struct mode {
	const char *name;
	const char *env[4];
	int destroyed, kcoll;
};

static int run_mode(const char *self, const char *lib, const struct mode *m, uint64_t *shared)
{
	printf("== %s\n", m->name);
	char dir[] = "/tmp/nvlp-kch.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char d[2][PATH_MAX], logf[2][PATH_MAX + 16];
	for (int r = 0; r < 2; r++) {
		snprintf(d[r], sizeof d[r], "%s/r%d", dir, r);
		snprintf(logf[r], sizeof logf[r], "%s/truth%d", dir, r);
		char e1[2 * PATH_MAX + 64], e2[32], e3[32];
		snprintf(e1, sizeof e1, "FAKE_NCCL_KCH_LOG=%s", logf[r]);
		snprintf(e2, sizeof e2, "RANK=%d", r);
		snprintf(e3, sizeof e3, "LOCAL_RANK=%d", r);
		const char *env[] = {"FAKE_NCCL_KCH=1",
		                     e1,
		                     e2,
		                     e3,
		                     "WORLD_SIZE=2",
		                     r ? "FAKE_NCCL_KCH_BAD=1" : "FAKE_NCCL_KCH_BAD",
		                     "FAKE_NCCL_KCH_CHANNELS=24",
		                     "FAKE_NCCL_KCH_JITTER=1",
		                     m->env[0] ? m->env[0] : "NVLPROF_KCH",
		                     m->env[1] ? m->env[1] : "FAKE_NCCL_KCH_WANT",
		                     m->destroyed ? "TEST_KCH_NO_DESTROY" : "TEST_KCH_NO_DESTROY=1",
		                     NULL};
		char arg[8];
		snprintf(arg, sizeof arg, "%d", r);
		int rc = shim_run_child(self, lib, d[r], "0", env, arg);
		CHECK(rc == 0, "rank %d ran (status %d)", r, rc);
	}
	/* what the fake's kernels took, by NCCL seq */
	/* per rank and function (0 AllReduce, 1 AllGather): NCCL numbers each function apart */
	static struct truth t[2][2][2 * NCOLL];
	int bad_zero = 0, bad_rev = 0, bad_nostop = 0, replays = 0, groups = 0;
	uint64_t replay_ns = 0;
	for (int r = 0; r < 2; r++) {
		FILE *f = fopen(logf[r], "r");
		CHECK(f != NULL, "rank %d: truth log written", r);
		if (!f)
			return 1;
		unsigned long long seq, span;
		char fn[32];
		int share;
		while (fscanf(f, "%llu %31s %llu %d", &seq, fn, &span, &share) == 4)
			if (seq < 2 * NCOLL) {
				t[r][!strcmp(fn, "AllGather")][seq] = (struct truth){span, share, 1};
				groups += share > 1 && r == 0;
				if (r == 1) {
					bad_zero += seq % 10 == 3;
					bad_rev += seq % 10 == 5;
					bad_nostop += seq % 10 == 7 && m->destroyed;
					replays += seq % 50 == 11;
					replay_ns += seq % 50 == 11 ? span : 0; /* a replay lasts as long */
				}
			}
		fclose(f);
	}
	char *paths[2] = {d[0], d[1]};
	struct an_job job;
	memset(&job, 0, sizeof job);
	char err[512] = "";
	CHECK(an_job_load(&job, paths, 2, 1, err, sizeof err) == 0, "job loads (%s)", err);
	an_job_analyze(&job);
	CHECK(job.nok == 2, "two traces (%zu)", job.nok);
	uint64_t nkch = 0, nkcoll = 0;
	for (size_t f = 0; f < job.nranks; f++)
		nkch += job.ranks[f].kind_count[NVLP_K_KCH], nkcoll += job.ranks[f].kind_count[NVLP_K_KCOLL];
	if (m->kcoll)
		/* one per collective and execution (with more channels than declared, two), and one for
		 * each channel that never stopped (recorded at finalize, after its collective) */
		CHECK(nkch == 0 && nkcoll >= (uint64_t)(2 * (NCOLL + NCOLL / 10)) &&
		          nkcoll <= (uint64_t)m->kcoll * (2 * (NCOLL + NCOLL / 10) + 20) + NCOLL / 5,
		      "KCOLL records: %llu (%d per collective at most), no KCH",
		      (unsigned long long)nkcoll, m->kcoll);
	if (m->kcoll && !m->destroyed) {
		/* never complete here, each is written when the next collective's channels come: a
		 * SIGKILL loses the last one, not all of them */
		struct late l = {0, 0};
		both_ranks(dir, count_late, file_late, &l);
		CHECK(l.late <= 4, "records written as the job goes: %llu after the last call (its group)",
		      l.late);
	}
	struct profs pr = {0, 0};
	both_ranks(dir, count_profs, NULL, &pr);
	CHECK(pr.n >= (uint64_t)(2 * NCOLL) && pr.with_start == 0,
	      "NCCLPROF records (%llu) without a start of their own: %llu have one", pr.n,
	      pr.with_start);
	if (!m->kcoll)
		CHECK(nkcoll == 0 && nkch > (uint64_t)(4 * (NCOLL + NCOLL / 10)),
		      "KCH records, one per channel: %llu, no KCOLL", (unsigned long long)nkch);
	size_t colls = 0, timed = 0, exact = 0;
	for (size_t f = 0; f < job.nranks; f++) {
		struct an_rank *r = &job.ranks[f];
		int rk = r->rank == 1;
		/* NCCL's number of each call: its function's calls before it (an_nccl_numbers) */
		struct an_ncclnum *num;
		size_t nn = an_nccl_numbers(&job, r, &num);
		for (size_t i = 0; i < nn; i++) {
			struct an_call *c = &r->calls[num[i].call];
			colls++;
			timed += c->gpu_start != 0;
			uint64_t ns = num[i].nseq;
			int fi = c->fn == NVLP_NCCL_ALL_GATHER;
			if (ns >= 2 * NCOLL || !t[rk][fi][ns].seen)
				continue;
			/* a fused kernel: by bytes, end to end (the first of the two is twice the second) */
			uint64_t want = t[rk][fi][ns].span;
			if (t[rk][fi][ns].share == 2)
				exact += c->gpu_start != 0; /* fused: checked as a pair below */
			else
				exact += c->gpu_dur == want;
		}
		free(num);
	}
	CHECK(colls == 2 * (NCOLL + NCOLL / 10), "collective calls recorded: %zu (%d)", colls,
	      2 * (NCOLL + NCOLL / 10));
	CHECK(timed == colls, "every collective call has a KernelCh GPU time (%zu of %zu)", timed,
	      colls);
	CHECK(exact == colls, "each equals the fake kernel's span (%zu of %zu)", exact, colls);
	/* fused pairs: their parts add up to the kernel's span, the first (twice the bytes) gets 2/3 */
	size_t pairs_ok = 0, pairs = 0;
	for (size_t f = 0; f < job.nranks; f++) {
		struct an_rank *r = &job.ranks[f];
		int rk = r->rank == 1;
		struct an_ncclnum *num;
		size_t nn = an_nccl_numbers(&job, r, &num); /* sorted by shim seq */
		for (size_t i = 0; i + 1 < nn; i++) {
			struct an_call *a = &r->calls[num[i].call], *b = &r->calls[num[i + 1].call];
			uint64_t ns = num[i].nseq; /* both AllReduce: b is NCCL's ns + 1 */
			if (a->fn != NVLP_NCCL_ALL_REDUCE || b->fn != NVLP_NCCL_ALL_REDUCE ||
			    ns >= 2 * NCOLL || t[rk][0][ns].share != 2 || b->seq != a->seq + 1 ||
			    a->bytes != 2 * b->bytes)
				continue;
			pairs++;
			uint64_t span = t[rk][0][ns].span;
			uint64_t pa = (uint64_t)((double)span * 2.0 / 3.0);
			pairs_ok += a->gpu_dur == pa &&
			            b->gpu_dur == (uint64_t)((double)span * 1.0 / 3.0) &&
			            b->gpu_start == a->gpu_start + pa;
		}
		free(num);
	}
	CHECK(pairs == 2 * (NCOLL / 10) && pairs_ok == pairs,
	      "fused pairs split by bytes, end to end (%zu of %zu, %d groups)", pairs_ok, pairs,
	      2 * (NCOLL / 10));
	const struct an_kch *s = job.kch;
	CHECK(s != NULL, "kernelch results");
	if (s) {
		CHECK(s->zero == (uint64_t)bad_zero && s->reversed == (uint64_t)bad_rev &&
		          s->nostop == (uint64_t)bad_nostop,
		      "bad channels dropped and counted: zero %llu (%d), reversed %llu (%d), never "
		      "stopped %llu (%d)",
		      (unsigned long long)s->zero, bad_zero, (unsigned long long)s->reversed, bad_rev,
		      (unsigned long long)s->nostop, bad_nostop);
		CHECK(s->replays == (uint64_t)replays && s->replay_ns == replay_ns,
		      "graph replays counted: %llu (%d), %llu ns (%llu; an original's last channel "
		      "reported after its replay's first)",
		      (unsigned long long)s->replays, replays, (unsigned long long)s->replay_ns,
		      (unsigned long long)replay_ns);
		CHECK(s->shared_channels > 0 && s->unmatched == 0 && s->before_call == 0,
		      "fused channels seen (%llu), every instance matched (%llu unmatched), none "
		      "before its call (%llu)",
		      (unsigned long long)s->shared_channels, (unsigned long long)s->unmatched,
		      (unsigned long long)s->before_call);
		CHECK(s->xcheck == 0 && s->timed == colls, "no CUPTI kernels: all %zu timed by KCH",
		      colls);
		*shared = s->shared_channels;
	}
	/* where CUPTI timed a call too, kernelch keeps CUPTI's time and reports the difference: apply
	 * again over calls that now all have a GPU time, one of them 500 ns longer than its stamps */
	struct an_call *moved = NULL;
	for (size_t k = 0; k < job.ranks[0].ncalls && !moved; k++)
		if (nvlp_nccl_fn_class(job.ranks[0].calls[k].fn) == 'C')
			moved = &job.ranks[0].calls[k];
	uint32_t kept = moved ? moved->gpu_dur + 500 : 0;
	if (moved)
		moved->gpu_dur = kept;
	an_kch_free(&job);
	an_kch_apply(&job);
	s = job.kch;
	CHECK(s && s->timed == 0 && s->xcheck == colls && s->xcheck_median_ns == 0 &&
	          s->xcheck_max_ns == 500 && s->xcheck_max_start_ns == 0 && moved &&
	          moved->gpu_dur == kept,
	      "cross-check: %zu calls timed by both, median difference %lld ns, largest %llu ns "
	      "(500), the other time kept",
	      s ? (size_t)s->xcheck : 0, s ? (long long)s->xcheck_median_ns : -1,
	      s ? (unsigned long long)s->xcheck_max_ns : 0);
	char *buf = NULL;
	size_t blen = 0;
	FILE *o = open_memstream(&buf, &blen);
	an_kch_report_text(o, &job);
	fclose(o);
	CHECK(buf && strstr(buf, "kernel channels (NCCL KernelCh)") && strstr(buf, "graph replays") &&
	          strstr(buf, "vs CUPTI kernels"),
	      "report says where the GPU times came from:\n%s", buf ? buf : "");
	free(buf);
	/* the same figures in report --json */
	buf = NULL;
	o = open_memstream(&buf, &blen);
	struct jw w;
	jw_init(&w, o);
	jw_obj(&w, NULL);
	an_kch_json(&w, &job);
	jw_obj_end(&w);
	fclose(o);
	char want[96];
	snprintf(want, sizeof want, "\"calls_also_cupti\": %llu", (unsigned long long)colls);
	CHECK(buf && strstr(buf, "\"kernel_channels\": {") && strstr(buf, want) &&
	          strstr(buf, "\"vs_cupti_max_us\": 0.5") && strstr(buf, "\"graph_replays\": "),
	      "report --json has kernel_channels with the cross-check:\n%s", buf ? buf : "");
	free(buf);
	an_job_free(&job);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) != 0;
}

/* One collective of each rank reaches NCCL without the shim's hook: that one NCCLPROF record has
 * a start, the others none (their NCCL records have the time). */
static void run_direct(const char *self, const char *lib)
{
	printf("== NCCL called once without the shim's hook\n");
	char dir[] = "/tmp/nvlp-kch.XXXXXX";
	if (!mkdtemp(dir))
		return;
	const char *env[] = {"FAKE_NCCL_KCH=1", "WORLD_SIZE=2", "TEST_KCH_DIRECT=1", NULL};
	for (int r = 0; r < 2; r++) {
		char d[256], arg[8];
		snprintf(d, sizeof d, "%s/r%d", dir, r);
		snprintf(arg, sizeof arg, "%d", r);
		int rc = shim_run_child(self, lib, d, "0", env, arg);
		CHECK(rc == 0, "direct: rank %d ran (status %d; 4: no libnccl symbol of its own)", r, rc);
	}
	struct profs pr = {0, 0};
	both_ranks(dir, count_profs, NULL, &pr);
	CHECK(pr.n >= (uint64_t)(2 * NCOLL + 2) && pr.with_start == 2,
	      "direct: the 2 NCCLPROF records of calls the shim did not see have a start (%llu of "
	      "%llu)",
	      pr.with_start, pr.n);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("    could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(atoi(argv[2]));
	char self[PATH_MAX], lib[PATH_MAX + 32];
	if (shim_paths(self, sizeof self, lib, sizeof lib) != 0)
		return 1;
	static const struct mode modes[] = {
	    {"KCOLL, one record per collective (the default)", {NULL, NULL}, 1, 1},
	    {"KCH, one record per channel (NVLPROF_KCH=channels)", {"NVLPROF_KCH=channels", NULL}, 1, 0},
	    {"KCOLL, NCCL reports one channel more than it declared",
	     {"NVLPROF_KCH=1", "FAKE_NCCL_KCH_WANT=-1"}, 1, 2},
	    {"KCOLL, one channel fewer than declared, no ncclCommDestroy",
	     {NULL, "FAKE_NCCL_KCH_WANT=1"}, 0, 1},
	};
	run_direct(self, lib);
	uint64_t shared[sizeof modes / sizeof *modes] = {0};
	for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
		if (run_mode(self, lib, &modes[i], &shared[i]) != 0)
			return 1;
	/* the fake's fused groups are the same in every run: per channel and folded alike */
	CHECK(shared[0] == shared[1] && shared[0] == shared[3],
	      "channels shared by fused collectives: %llu folded, %llu per channel, %llu without "
	      "ncclCommDestroy",
	      (unsigned long long)shared[0], (unsigned long long)shared[1],
	      (unsigned long long)shared[3]);
	return CHECK_DONE();
}

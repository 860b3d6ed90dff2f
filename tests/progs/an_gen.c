/* an_gen.c: deterministic synthetic job traces (DDP-like steps) with scenario options, for analyzer
 * tests and bench. */
#include <dlfcn.h>    /* dladdr */
#include <elf.h>      /* Elf64_Nhdr, NT_GNU_BUILD_ID */
#include <link.h>     /* dl_iterate_phdr */
#include <errno.h>    /* errno */
#include <getopt.h>   /* getopt_long */
#include <stdint.h>   /* uint64_t */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* calloc */
#include <string.h>   /* memset */
#include <sys/stat.h> /* mkdir */
#include <unistd.h>   /* readlink */

#include "nvlp_trace.h"

struct an_gen_opts {
	const char *dir;
	int ranks, hosts, steps;
	int64_t clock_err_ns; /* realtime anchor error of hosts > 0 */
	int late_rank;        /* -1 none */
	double late_ms;
	int kill_rank;           /* -1 none: that rank dies before the last collective */
	double hang_ms;          /* how long the others then wait before they are stopped */
	int fallback;            /* NCCL_P2P_DISABLE=1: slow collectives over PCIe */
	int env_only;            /* env says P2P off, traffic still on NVLink (counters disagree) */
	int staged, peer;        /* cross-device copies without / with peer access */
	int thrash, um_once;     /* managed memory ping-pong / one clean migration */
	int no_gpu;              /* no CUPTI records at all */
	int no_links, no_topo;   /* no LINKSAMPLE / no NVLINK records */
	int exposed;             /* collectives issued after compute: nothing hides them */
	int cupti_stream0;       /* NCCL records without a CUPTI stream id */
	int nvswitch;            /* topology: every GPU of the host on NVSwitches (HGX 8 x H200);
	                          * 2: as CUPTI gives two such GPUs, a record per pair, flagged */
	int one_gpu;             /* each process sees one GPU (CUDA_VISIBLE_DEVICES): device 0,
	                          * its links beyond the process as NVLPROF_CUPTI=lazy records them */
	int fsdp;                /* FSDP FULL_SHARD steps: AllGather / ReduceScatter per layer */
	int interleave;          /* records in a DDP process's order: see late_bcast */
	/* the allocation site's module (--thrash, --um-once): how its symbols travel */
	int no_buildid;          /* no BUILDID record: the analyzer must not open the file */
	int bad_buildid;         /* a BUILDID that is not the file's */
	int sym_records;         /* SYMBOL record for the allocation site */
	int tool_frames;         /* the site's stack starts in the shim, CUPTI and the driver */
	const char *module_path; /* path recorded in MODULE (default: this program) */
	int drop_rank;           /* -1 none: that rank's buffers overflowed (DROPS, END.dropped) */
	uint64_t small_calls;    /* > 0: a plain NCCL-only trace instead: this many 4 KiB AllReduce
	                          * per rank, as the shim writes them from the fake NCCL */
	uint64_t target_records; /* > 0: choose steps to reach this many records per rank */
	int plain;               /* > 0: a one-communicator job written call by call (PLAIN_*) */
	int fail_at;             /* PLAIN_FAIL: rank 1 dies before this collective */
	int launcher;            /* also a launcher's trace: a device and clock records, no work */
	const char *comm_name;   /* COMMNAME record for the job's communicator */
	int no_nccl_gpu;         /* plain jobs: compute kernels only, NCCL's work never traced */
	int in_place;            /* PLAIN_SINGLE: the AllReduce runs in place (NCCL does no GPU
	                          * work for it, as at world size 1) and each step also calls a
	                          * ncclBcast that NCCL runs as a copy */
	int python;              /* PYSTACK/PYREF records: each rank's collectives, rank 0's first
	                          * staged copy and its managed allocation have a Python chain */
	/* --mismatch KIND:SEQ[:RANK]: the collective at SEQ differs on RANK (default 1): KIND count
	 * (twice the elements), dtype (f32, same bytes), op (max), fn (ncclAllGather), root (every
	 * rank's is a ncclBroadcast from 0, RANK's from 1) or same (that broadcast on every rank:
	 * a rooted call that does not differ); with --python the call comes from a metric line */
	int mm_kind, mm_rank;
	uint64_t mm_seq;
	int print_records;       /* --print-records: say how many records were written */
	int comm_per_call;       /* --small-allreduce: each call on a communicator of its own */
	/* scale: clock spread, a rank that stops without dying, blocking calls, more communicators */
	double clock_spread_ms;  /* hosts > 0: realtime anchors off by up to +-this, per host */
	int hang_rank;           /* -1 none: that rank never enters the last collective, alive */
	int kill_n;              /* ranks kill_rank .. kill_rank + kill_n - 1 die (default 1) */
	int blocking;            /* NCCL calls return when their collective is done (as under
	                          * CUDA_LAUNCH_BLOCKING=1): the only completion without GPU records */
	int nlay;                /* --comms: communicators beside the world one, each one AllReduce
	                          * per step */
	struct lay {
		int kind, size; /* LAY_HOST: one per host; LAY_TP: groups of size consecutive
		                 * ranks; LAY_PP: size ranks strided ranks/size apart */
	} lay[8];
};
enum { LAY_HOST = 1, LAY_TP, LAY_PP };

#define MS 1000000ull
#define US 1000ull
#define MIB (1024ull * 1024ull)
#define COMM_HASH 0x5eed0c0117ec7ull
#define REAL0 1790000000000000000ull
#define NCCL_STREAM 13
#define COMP_STREAM 7

/* Ops per step: fn, bytes, host offset from the step start, group id (0 = none). */
static const struct op {
	unsigned fn;
	uint64_t bytes;
	uint64_t at;
	int group;
	const char *kname;
} step_ops[] = {
    {NVLP_NCCL_ALL_REDUCE, 64 * MIB, 4000 * US, 0, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL128"},
    {NVLP_NCCL_ALL_REDUCE, 64 * MIB, 6000 * US, 0, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL128"},
    {NVLP_NCCL_ALL_REDUCE, 256 * 1024, 8000 * US, 0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"},
    {NVLP_NCCL_ALL_REDUCE, 4 * MIB, 8050 * US, 1, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"},
    {NVLP_NCCL_ALL_REDUCE, 4 * MIB, 8050 * US, 1, NULL},
};
#define NOPS (sizeof step_ops / sizeof step_ops[0])

/* --fsdp: FULL_SHARD over 4 layers of 32 MiB (bf16): AllGather of each layer in forward, again in
 * backward (resharded after forward), ReduceScatter of its gradients; bytes are nccl-tests' S. */
static const struct op fsdp_ops[] = {
    {NVLP_NCCL_ALL_GATHER, 32 * MIB, 100 * US, 0, "ncclDevKernel_AllGather_RING_LL128"},
    {NVLP_NCCL_ALL_GATHER, 32 * MIB, 800 * US, 0, "ncclDevKernel_AllGather_RING_LL128"},
    {NVLP_NCCL_ALL_GATHER, 32 * MIB, 1500 * US, 0, "ncclDevKernel_AllGather_RING_LL128"},
    {NVLP_NCCL_ALL_GATHER, 32 * MIB, 2200 * US, 0, "ncclDevKernel_AllGather_RING_LL128"},
    {NVLP_NCCL_ALL_GATHER, 32 * MIB, 3100 * US, 0, "ncclDevKernel_AllGather_RING_LL128"},
    {NVLP_NCCL_REDUCE_SCATTER, 32 * MIB, 4200 * US, 0,
     "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128"},
    {NVLP_NCCL_ALL_GATHER, 32 * MIB, 4300 * US, 0, "ncclDevKernel_AllGather_RING_LL128"},
    {NVLP_NCCL_REDUCE_SCATTER, 32 * MIB, 5400 * US, 0,
     "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128"},
    {NVLP_NCCL_ALL_GATHER, 32 * MIB, 5500 * US, 0, "ncclDevKernel_AllGather_RING_LL128"},
    {NVLP_NCCL_REDUCE_SCATTER, 32 * MIB, 6600 * US, 0,
     "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128"},
    {NVLP_NCCL_REDUCE_SCATTER, 32 * MIB, 7700 * US, 0,
     "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128"},
};
#define NFSDP (sizeof fsdp_ops / sizeof fsdp_ops[0])

/* The function whose address stands for the allocation site in uma_thrashing stacks. */
__attribute__((noinline)) int an_gen_alloc_site(int n)
{
	volatile int x = 0;
	for (int i = 0; i < n; i++)
		x += i;
	return x;
}

/* The GNU build-id of this program, from its loaded PT_NOTE segments. */
struct bid {
	uint8_t id[64];
	size_t len;
};
static int find_bid(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct bid *b = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
		while (p + sizeof(Elf64_Nhdr) <= end) {
			const Elf64_Nhdr *n = (const void *)p;
			size_t nsz = (n->n_namesz + 3) & ~3u, dsz = (n->n_descsz + 3) & ~3u;
			p += sizeof *n;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(p, "GNU", 4) &&
			    n->n_descsz <= sizeof b->id) {
				memcpy(b->id, p + nsz, n->n_descsz);
				b->len = n->n_descsz;
				return 1;
			}
			p += nsz + dsz;
		}
	}
	return 1; /* the first object is the program itself */
}

struct pend { /* a GPU record held back: CUPTI delivers after the API records */
	unsigned kind;
	uint64_t f[NVLP_MAX_FIELDS];
};

struct grank {
	nvlp_writer *w;
	int rank, host, dev, dead, signaled;
	int py_nccl; /* --python: the rank's collectives' chain written */
	uint64_t mono0;
	uint64_t comm_free; /* true time the comm stream is free */
	uint64_t seq, call_id, records;
	struct pend *p;
	size_t np, cap;
	struct pend *lp; /* --interleave: the main thread's records, written late */
	size_t nlp, lcap;
	double *nvl, *pcie; /* per-ms link buckets */
	size_t nb;
	uint64_t launch, comm_end, arr; /* this op's kernel launch and arrival, the step's comm end */
	uint64_t host_free;             /* --blocking: when its host thread is back */
};

static uint64_t lcg_state;
static uint64_t rnd(uint64_t n) /* deterministic jitter */
{
	lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
	return n ? (lcg_state >> 33) % n : 0;
}

static int gen_python; /* --python */

/* --python: the chains a torch job's records would carry (innermost first; torch's own frames
 * inside, the job's below them) */
static const char py_nccl_chain[] =
    "/opt/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py:2501:all_reduce\n"
    "/opt/venv/lib/python3.12/site-packages/torch/distributed/c10d_logger.py:81:wrapper\n"
    "/work/job/train.py:57:train_step\n/work/job/train.py:90:main\n"
    "/work/job/train.py:95:<module>\n";
static const char py_copy_chain[] = "/work/job/train.py:33:move\n/work/job/train.py:88:main\n";
static const char py_alloc_chain[] =
    "/work/job/train.py:41:build_cache\n/work/job/train.py:87:main\n";

static const char py_metric_chain[] =
    "/opt/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py:2501:all_reduce\n"
    "/work/job/train.py:71:log_metrics\n/work/job/train.py:91:main\n"
    "/work/job/train.py:95:<module>\n";
enum { MM_NONE, MM_COUNT, MM_DTYPE, MM_OP, MM_FN, MM_ROOT, MM_SAME };
static uint64_t gen_mm_seq = UINT64_MAX; /* --mismatch with --python: the metric call's seq */

static void add(struct grank *g, unsigned kind, const void *f, const void *blob, size_t len);
static void py_attach(struct grank *g, unsigned kind, uint64_t tid, uint64_t t, uint64_t call_id,
                      uint64_t id, const char *chain)
{
	struct nvlp_rec_pystack s = {.id = id};
	add(g, NVLP_K_PYSTACK, &s, chain, strlen(chain));
	struct nvlp_rec_pyref r = {
	    .kind = kind, .tid = tid, .t = t, .call_id = call_id, .pystack = id};
	add(g, NVLP_K_PYREF, &r, NULL, 0);
}

static void add(struct grank *g, unsigned kind, const void *f, const void *blob, size_t len)
{
	if (g->dead || !g->w) /* dead, or not in this pass's batch */
		return;
	nvlp_writer_add(g->w, kind, f, blob, len);
	g->records++;
	if (nvlp_writer_pending(g->w) > 48 * 1024)
		nvlp_writer_flush(g->w);
	if (gen_python && kind == NVLP_K_NCCL) {
		/* the chain changes at the metric call and back after it (py_nccl 2: in force) */
		const struct nvlp_rec_nccl *n = f;
		int metric = n->seq == gen_mm_seq && n->comm;
		if (metric)
			py_attach(g, NVLP_K_NCCL, n->tid, n->t_enter, n->call_id, 0x3302,
			          py_metric_chain);
		else if (g->py_nccl != 1)
			py_attach(g, NVLP_K_NCCL, n->tid, n->t_enter, n->call_id, 0x3301,
			          py_nccl_chain);
		g->py_nccl = metric ? 2 : 1;
	}
}

static void defer(struct grank *g, unsigned kind, const void *f, size_t size)
{
	if (!g->w)
		return;
	if (g->np == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 64;
		g->p = realloc(g->p, g->cap * sizeof *g->p);
	}
	g->p[g->np].kind = kind;
	memcpy(g->p[g->np].f, f, size);
	g->np++;
}

static void flush_deferred(struct grank *g)
{
	for (size_t i = 0; i < g->np; i++)
		add(g, g->p[i].kind, g->p[i].f, NULL, 0);
	g->np = 0;
}

static void kernel(struct grank *g, const struct an_gen_opts *o, uint64_t s, uint64_t e,
                   uint64_t stream, uint64_t name, int nccl)
{
	if (o->no_gpu)
		return;
	struct nvlp_rec_kernel k = {.start = g->mono0 + s,
	                            .dur = e - s,
	                            .device = (uint64_t)g->dev,
	                            .context = 1,
	                            .stream = stream,
	                            .name = name,
	                            .grid_x = 24,
	                            .grid_y = 1,
	                            .grid_z = 1,
	                            .block_x = 256,
	                            .block_y = 1,
	                            .block_z = 1,
	                            .flags = nccl ? 1 : 0};
	defer(g, NVLP_K_KERNEL, &k, sizeof k);
}

static void grow_buckets(struct grank *g, size_t i)
{
	if (i < g->nb)
		return;
	size_t nb = g->nb ? g->nb * 2 : 1024;
	while (nb <= i)
		nb *= 2;
	g->nvl = realloc(g->nvl, nb * sizeof *g->nvl);
	g->pcie = realloc(g->pcie, nb * sizeof *g->pcie);
	memset(g->nvl + g->nb, 0, (nb - g->nb) * sizeof *g->nvl);
	memset(g->pcie + g->nb, 0, (nb - g->nb) * sizeof *g->pcie);
	g->nb = nb;
}

/* Spread bytes over [s, e) into the 1 ms NVLink or PCIe buckets. */
static void traffic_to(struct grank *g, int pcie, uint64_t s, uint64_t e, double bytes)
{
	if (e <= s || !g->w)
		return;
	grow_buckets(g, (e - 1) / MS);
	double *b = pcie ? g->pcie : g->nvl;
	for (uint64_t t = s; t < e;) {
		size_t i = t / MS;
		uint64_t end = (i + 1) * MS < e ? (i + 1) * MS : e;
		b[i] += bytes * (double)(end - t) / (double)(e - s);
		t = end;
	}
}

/* The NCCL record of a call by rank g, t ns after its start, on the job's communicator. */
static struct nvlp_rec_nccl nccl_fill(struct grank *g, unsigned fn, uint64_t t, uint64_t bytes,
                                      int depth, int nranks, uint64_t seq,
                                      const struct an_gen_opts *o)
{
	struct nvlp_rec_nccl n = {.fn = fn,
	                          .t_enter = g->mono0 + t,
	                          .dur = 6 * US,
	                          .tid = 100 + (uint64_t)g->rank,
	                          .device = (uint64_t)g->dev,
	                          .stream = 0x7f0000001000ull,
	                          .cupti_stream = o->cupti_stream0 ? 0 : NCCL_STREAM,
	                          .count = bytes / 2,
	                          .dtype = 9,
	                          .bytes = bytes,
	                          .op = 0,
	                          .peer = (uint64_t)-1,
	                          .group_depth = (uint64_t)depth,
	                          .comm = COMM_HASH,
	                          .rank = (uint64_t)g->rank,
	                          .nranks = (uint64_t)nranks,
	                          .seq = seq,
	                          .call_id = ++g->call_id};
	if (fn == NVLP_NCCL_GROUP_START || fn == NVLP_NCCL_GROUP_END) {
		n.bytes = n.count = 0;
		n.comm = 0;
		n.rank = n.nranks = 0;
		n.seq = 0;
		n.dur = 1 * US;
	} else if (o->mm_kind && seq == o->mm_seq) {
		int me = g->rank == o->mm_rank;
		if (o->mm_kind == MM_ROOT || o->mm_kind == MM_SAME) {
			n.fn = NVLP_NCCL_BROADCAST;
			n.op = (uint64_t)-1;
			n.peer = me && o->mm_kind == MM_ROOT ? 1 : 0;
		} else if (me && o->mm_kind == MM_COUNT) {
			n.count *= 2;
			n.bytes *= 2;
		} else if (me && o->mm_kind == MM_DTYPE) {
			n.dtype = 7;
			n.count = bytes / 4;
		} else if (me && o->mm_kind == MM_OP)
			n.op = 2;
		else if (me && o->mm_kind == MM_FN) {
			n.fn = NVLP_NCCL_ALL_GATHER;
			n.op = (uint64_t)-1;
		}
	}
	return n;
}

static void nccl_rec(struct grank *g, unsigned fn, uint64_t t, uint64_t bytes, int depth,
                     int nranks, uint64_t seq, const struct an_gen_opts *o)
{
	struct nvlp_rec_nccl n = nccl_fill(g, fn, t, bytes, depth, nranks, seq, o);
	add(g, NVLP_K_NCCL, &n, NULL, 0);
}

/* --interleave: records in the order a torch DDP process writes them. The main thread broadcasts
 * 1 MiB between the step's first two AllReduces (issued by the autograd thread, same stream); its
 * API records stay in its buffer for 4 steps (after later AllReduces and after the kernels), and
 * CUPTI delivers the first AllReduce's kernel record after the Broadcast's. */
static void late_bcast(struct grank *G, int n, const struct an_gen_opts *o, uint64_t at,
                       uint64_t seq, double busbw, uint64_t name)
{
	uint64_t bytes = 1 * MIB, mx = 0;
	for (int r = 0; r < n; r++) {
		struct grank *g = &G[r];
		struct nvlp_rec_nccl c = nccl_fill(g, NVLP_NCCL_BROADCAST, at, bytes, 0, n, seq, o);
		c.tid = 1000 + (uint64_t)g->rank; /* the main thread, not the autograd thread */
		c.peer = 0;                       /* root */
		if (g->nlp == g->lcap) {
			g->lcap = g->lcap ? g->lcap * 2 : 16;
			g->lp = realloc(g->lp, g->lcap * sizeof *g->lp);
		}
		g->lp[g->nlp].kind = NVLP_K_NCCL;
		memcpy(g->lp[g->nlp].f, &c, sizeof c);
		g->nlp++;
		g->launch = at + 10 * US > g->comm_free ? at + 10 * US : g->comm_free;
		if (g->launch > mx)
			mx = g->launch;
	}
	uint64_t end = mx + (uint64_t)((double)bytes * (n - 1) / n / busbw * 1e9) + 8 * US;
	for (int r = 0; r < n; r++) {
		struct grank *g = &G[r];
		kernel(g, o, g->launch, end, NCCL_STREAM, name, 1);
		if (!o->no_gpu && g->np >= 2) { /* the AllReduce kernel's record comes after */
			struct pend x = g->p[g->np - 1];
			g->p[g->np - 1] = g->p[g->np - 2];
			g->p[g->np - 2] = x;
		}
		g->comm_free = end;
	}
}

static void flush_late(struct grank *g)
{
	for (size_t i = 0; i < g->nlp; i++)
		add(g, g->lp[i].kind, g->lp[i].f, NULL, 0);
	g->nlp = 0;
}

/* Kernel name string ids. */
enum { S_FWD = 1, S_BWD, S_OPT, S_BCAST, S_K0 };

/* --small-allreduce N: each rank N back-to-back 4 KiB AllReduce on one communicator, no GPU. */
static int gen_small(const struct an_gen_opts *o)
{
	mkdir(o->dir, 0755);
	for (int r = 0; r < o->ranks; r++) {
		char hdr[512], path[512];
		uint64_t mono0 = 1000000ull * MS;
		snprintf(hdr, sizeof hdr,
		         "format=1\nversion=test\nhost=node0\npid=%d\nppid=1\nrank=%d\nlocal_rank=%d\n"
		         "world_size=%d\ncmdline=all_reduce_perf -b 4K -e 4K\n",
		         5000 + r, r, r, o->ranks);
		snprintf(path, sizeof path, "%s/small-%d.nvlp", o->dir, 5000 + r);
		nvlp_writer *w = nvlp_writer_open(path, hdr, mono0, REAL0);
		if (!w) {
			fprintf(stderr, "an_gen: %s: %s\n", path, strerror(errno));
			return -1;
		}
		struct nvlp_rec_nccl c = {.fn = NVLP_NCCL_ALL_REDUCE, .tid = 9000 + (uint64_t)r,
		                          .device = (uint64_t)r, .stream = 0x7f0000a000, .cupti_stream = 13,
		                          .count = 1024, .dtype = 7, .bytes = 4096, .peer = (uint64_t)-1,
		                          .comm = COMM_HASH, .rank = (uint64_t)r,
		                          .nranks = (uint64_t)o->ranks, .aux = 0x7f0000b000};
		uint64_t t = mono0 + MS;
		for (uint64_t i = 0; i < o->small_calls; i++) {
			c.t_enter = t;
			c.dur = 3000 + i % 7 * 100;
			c.seq = o->comm_per_call ? 0 : i;
			c.comm = o->comm_per_call ? COMM_HASH + i : COMM_HASH;
			c.call_id = i + 1;
			nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
			t += 8000 + i % 5 * 50;
			if (nvlp_writer_pending(w) > 48 * 1024)
				nvlp_writer_flush(w);
		}
		struct nvlp_rec_end e = {.t = t, .records = o->small_calls + 2};
		nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
		if (nvlp_writer_close(w) != 0)
			return -1;
	}
	return 0;
}

/* Plain jobs (o->plain): nccl-tests' sweep (5 warm-up + 20 timed AllReduce per size, 18 sizes
 * growing from 8 MiB to 2 GiB, each twice, nothing else on the GPU), a tight replay loop (compute 30 us +
 * one 4 KiB AllReduce, 40 us per iteration), or 40 steady 10 ms steps where rank 1 dies before
 * collective fail_at and rank 0's fail_at returns ncclSystemError after 5 s (seq kept, aux2 =
 * failed, no kernel), or (PLAIN_SINGLE) the same steps on a single-rank communicator, which NCCL
 * runs as a device-to-device copy on the call's stream (beside one copy of the job's own). */
enum { PLAIN_SWEEP = 1, PLAIN_LOOP, PLAIN_FAIL, PLAIN_SINGLE };
/* A device-to-device copy on rank r's GPU, on the NCCL stream: how NCCL runs a single-rank
 * collective */
static void nccl_copy(nvlp_writer *w, int r, uint64_t start, uint64_t dur, uint64_t bytes)
{
	struct nvlp_rec_gpucopy g = {.start = start, .dur = dur, .copy_kind = 8 /* DTOD */,
	                             .device = (uint64_t)r, .src_device = (uint64_t)r,
	                             .dst_device = (uint64_t)r, .context = 1,
	                             .stream = NCCL_STREAM, .bytes = bytes};
	nvlp_writer_add(w, NVLP_K_GPUCOPY, &g, NULL, 0);
}
static int gen_plain(const struct an_gen_opts *o)
{
	mkdir(o->dir, 0755);
	int n = o->ranks;
	for (int r = 0; r < n; r++) {
		char hdr[512], path[512];
		uint64_t mono0 = 1000000ull * MS;
		const char *cmd = o->plain == PLAIN_SWEEP  ? "all_reduce_perf -b 8M -e 2G -f 2"
		                  : o->plain == PLAIN_LOOP ? "python3 graph_replay.py"
		                                           : "python3 train.py";
		snprintf(hdr, sizeof hdr,
		         "format=1\nversion=test\nhost=node0\npid=%d\nppid=4999\nrank=%d\n"
		         "local_rank=%d\nworld_size=%d\ncmdline=%s\n",
		         5000 + r, r, r, n, cmd);
		snprintf(path, sizeof path, "%s/plain-%d.nvlp", o->dir, 5000 + r);
		nvlp_writer *w = nvlp_writer_open(path, hdr, mono0, REAL0);
		if (!w) {
			fprintf(stderr, "an_gen: %s: %s\n", path, strerror(errno));
			return -1;
		}
		static const char kar[] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL", kc[] = "gemm";
		struct nvlp_rec_string s1 = {.id = 1}, s2 = {.id = 2};
		nvlp_writer_add(w, NVLP_K_STRING, &s1, kar, strlen(kar));
		nvlp_writer_add(w, NVLP_K_STRING, &s2, kc, strlen(kc));
#ifdef NVLP_FIELDS_COMMNAME
		if (o->comm_name) {
			struct nvlp_rec_string s3 = {.id = 3};
			nvlp_writer_add(w, NVLP_K_STRING, &s3, o->comm_name, strlen(o->comm_name));
			struct nvlp_rec_commname cn = {.comm = COMM_HASH, .name = 3};
			nvlp_writer_add(w, NVLP_K_COMMNAME, &cn, NULL, 0);
		}
#endif
		struct nvlp_rec_nccl c = {.fn = NVLP_NCCL_ALL_REDUCE, .tid = 9000 + (uint64_t)r,
		                          .device = (uint64_t)r, .stream = 0x7f0000a000,
		                          .cupti_stream = NCCL_STREAM, .dtype = 7,
		                          .peer = (uint64_t)-1, .comm = COMM_HASH,
		                          .rank = (uint64_t)r, .nranks = (uint64_t)n};
		struct nvlp_rec_kernel k = {.device = (uint64_t)r, .context = 1, .grid_x = 24,
		                            .grid_y = 1, .grid_z = 1, .block_x = 256, .block_y = 1,
		                            .block_z = 1};
		uint64_t t = mono0 + MS, seq = 0;
		int dead = 0;
		size_t nsizes = o->plain == PLAIN_SWEEP ? 18 : 1;
		size_t iters = o->plain == PLAIN_SWEEP ? 25 : o->plain == PLAIN_LOOP ? 104 : 40;
		int single = o->plain == PLAIN_SINGLE;
		for (size_t z = 0; z < nsizes && !dead; z++)
			for (size_t i = 0; i < iters && !dead; i++) {
				uint64_t bytes = o->plain == PLAIN_SWEEP  ? (8 * MIB << z / 2)
				                 : o->plain == PLAIN_LOOP ? 4096
				                                          : 16 * MIB;
				/* ~150 GB/s; the sweep's sizes at 10 GB/s (a PCIe box) */
				uint64_t gd = 8 * US + bytes / (o->plain == PLAIN_SWEEP ? 10 : 150);
				if (o->plain == PLAIN_FAIL && (int)seq == o->fail_at) {
					if (r == 1) {
						dead = 1; /* killed: no call, no END */
						break;
					}
					c.t_enter = t;
					c.dur = 5000 * MS;
					c.rc = 2; /* ncclSystemError */
					c.seq = seq;
					c.aux2 = 1; /* NVLP_NCCL_AUX2_FAILED */
					c.call_id = seq + 1;
					c.bytes = bytes;
					c.count = bytes / 4;
					nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
					t += 5000 * MS;
					dead = 2;
					break;
				}
				uint64_t comp = o->plain == PLAIN_LOOP                ? 30 * US
				                : o->plain == PLAIN_FAIL || single ? 8 * MS
				                                                   : 0;
				if (comp) {
					k.start = t;
					k.dur = comp - 2 * US;
					k.stream = COMP_STREAM;
					k.name = 2;
					k.flags = 0;
					nvlp_writer_add(w, NVLP_K_KERNEL, &k, NULL, 0);
					t += comp;
				}
				c.t_enter = t;
				c.dur = 5 * US;
				c.rc = 0;
				c.aux2 = 0;
				c.seq = seq++;
				c.call_id = seq;
				c.bytes = bytes;
				c.count = bytes / 4;
				nvlp_writer_add(w, NVLP_K_NCCL, &c, NULL, 0);
				if (o->no_nccl_gpu || (single && o->in_place)) {
				} else if (single) {
					nccl_copy(w, r, t + 6 * US, gd, bytes);
					if (i == 3) /* the job's own copy on that stream */
						nccl_copy(w, r, t + 6 * US + gd + US, 3 * US, 4096);
				} else {
					k.start = t + 6 * US;
					k.dur = gd;
					k.stream = NCCL_STREAM;
					k.name = 1;
					k.flags = 1;
					nvlp_writer_add(w, NVLP_K_KERNEL, &k, NULL, 0);
				}
				if (single && o->in_place) { /* 1 MiB ncclBcast, a 20 us copy */
					struct nvlp_rec_nccl b = c;
					b.fn = NVLP_NCCL_BCAST;
					b.t_enter = t + 100 * US;
					b.dur = 7 * US;
					b.seq = seq++;
					b.call_id = 100000 + seq;
					b.bytes = MIB;
					b.count = MIB / 4;
					nvlp_writer_add(w, NVLP_K_NCCL, &b, NULL, 0);
					nccl_copy(w, r, b.t_enter + 8 * US, 20 * US, MIB);
				}
				t += 6 * US + gd + (o->plain == PLAIN_FAIL || single ? 2 * MS - gd : 2 * US);
				if (nvlp_writer_pending(w) > 48 * 1024)
					nvlp_writer_flush(w);
			}
		if (dead == 1) {
			nvlp_writer_flush(w);
			nvlp_writer_abandon(w);
			continue;
		}
		struct nvlp_rec_end e = {.t = t + MS, .records = 0};
		nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
		if (nvlp_writer_close(w) != 0)
			return -1;
	}
	return 0;
}

/* The host group, rank in it and size of rank r in layout item l (see struct lay). */
static void lay_member(const struct an_gen_opts *o, const struct lay *l, int r, int per_host,
                       int *group, int *rank, int *size)
{
	int n = o->ranks;
	if (l->kind == LAY_HOST) {
		*group = r / per_host;
		*rank = r % per_host;
		*size = n - *group * per_host < per_host ? n - *group * per_host : per_host;
	} else if (l->kind == LAY_TP) {
		*group = r / l->size;
		*rank = r % l->size;
		*size = n - *group * l->size < l->size ? n - *group * l->size : l->size;
	} else { /* LAY_PP: size stages, n / size apart */
		int stride = n / l->size;
		*group = r % stride;
		*rank = r / stride;
		*size = l->size;
	}
}

/* Rank r's realtime anchor: hosts > 0 off by clock_err, and by up to +-clock_spread per host. */
static uint64_t real_anchor(const struct an_gen_opts *o, int host)
{
	if (!host)
		return REAL0;
	int64_t spread = (int64_t)((double)((uint32_t)host * 2654435761u % 2001) - 1000.0) *
	                 (int64_t)(o->clock_spread_ms * 1e3);
	return REAL0 + (uint64_t)o->clock_err_ns + (uint64_t)spread;
}

/* Rank g's GPU side of the setup: topology, device, the activity notes. */
static void rank_gpu_setup(struct grank *g, const struct an_gen_opts *o, int per_host)
{
	if (!o->no_topo && o->one_gpu) {
		/* cupti/topo.c's record of links beyond the process: dev1 -1, to the NVSwitch or
		 * to the hidden GPU */
		struct nvlp_rec_nvlink l = {.version = 4, .type0 = 1, .type1 = 1, .dev0 = 0,
		                            .dev1 = (uint64_t)-1, .links = 18, .ports0 = 0x3ffff,
		                            .flags = 0xa | (o->nvswitch ? NVLP_NVLINK_F_NVSWITCH : 0)};
		add(g, NVLP_K_NVLINK, &l, NULL, 0);
	} else if (!o->no_topo && o->nvswitch == 2) {
		/* a record per GPU pair, 18 links through the NVSwitch each (CUPTI on two H200s) */
		for (int a = 0; a < per_host; a++)
			for (int b = a + 1; b < per_host; b++) {
				struct nvlp_rec_nvlink l = {
				    .version = 4, .type0 = 1, .type1 = 1, .dev0 = (uint64_t)a,
				    .dev1 = (uint64_t)b, .bandwidth = 849960000, .links = 18,
				    .flags = 0xa | NVLP_NVLINK_F_NVSWITCH};
				add(g, NVLP_K_NVLINK, &l, NULL, 0);
			}
	} else if (!o->no_topo && o->nvswitch) {
		/* as CUPTI reports an HGX board: each GPU's 18 links go to the NVSwitches (device
		 * type 2), every process sees every GPU */
		for (int d = 0; d < per_host; d++) {
			struct nvlp_rec_nvlink l = {.version = 4, .type0 = 1, .type1 = 2,
			                            .dev0 = (uint64_t)d, .dev1 = 0,
			                            .bandwidth = 849960000, .links = 18};
			add(g, NVLP_K_NVLINK, &l, NULL, 0);
		}
	} else if (!o->no_topo) {
		struct nvlp_rec_nvlink l = {.version = 4, .type0 = 1, .type1 = 1, .dev0 = 0,
		                            .dev1 = 1, .bandwidth = 849960000,
		                            .links = 18} /* as H200 reports it */;
		add(g, NVLP_K_NVLINK, &l, NULL, 0);
	}
	struct nvlp_rec_device d = {.device = (uint64_t)g->dev, .sm_count = 132, .cc_major = 9};
	add(g, NVLP_K_DEVICE, &d, "NVIDIA H200", 11);
	struct nvlp_rec_note nt = {
	    .code = NVLP_NOTE_ACTIVITY_ON, .t = g->mono0, .device = (uint64_t)-1};
	add(g, NVLP_K_NOTE, &nt, "kernel, memcpy activity on", 26);
	if (o->no_links) {
		struct nvlp_rec_note n2 = {.code = NVLP_NOTE_PM_SAMPLING_UNAVAILABLE,
		                           .t = g->mono0, .device = (uint64_t)g->dev};
		const char *m = "PM sampling needs root (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)";
		add(g, NVLP_K_NOTE, &n2, m, strlen(m));
	}
}

#define S_LAY 40 /* the kernel name of the layout communicators' AllReduce */
static const char lay_kname[] = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";

/* Rank g's trace opened, with its strings, topology, device and notes. @return 0, or -1 */
static int rank_open(struct grank *g, const struct an_gen_opts *o, int per_host,
                     const struct op *ops, unsigned nops)
{
	char hdr[1024], path[512];
	snprintf(hdr, sizeof hdr,
	         "format=1\nversion=test\nhost=node%d\npid=%d\nppid=1\nrank=%d\nlocal_rank="
	         "%d\nworld_size=%d\ncmdline=python3 train.py\nenv.NCCL_DEBUG=WARN\n%s",
	         g->host, 4000 + g->rank, g->rank, g->dev, o->ranks,
	         o->fallback || o->env_only ? "env.NCCL_P2P_DISABLE=1\n" : "");
	snprintf(path, sizeof path, "%s/node%d-%d.nvlp", o->dir, g->host, 4000 + g->rank);
	g->w = nvlp_writer_open(path, hdr, g->mono0, real_anchor(o, g->host));
	if (!g->w) {
		fprintf(stderr, "an_gen: %s: %s\n", path, strerror(errno));
		return -1;
	}
	static const char *const names[] = {
	    NULL, "sm90_xmma_gemm_bf16_fwd", "sm90_xmma_gemm_bf16_bwd",
	    "multi_tensor_apply_kernel_adam", "ncclDevKernel_Broadcast_RING_LL"};
	for (unsigned i = 1; i < sizeof names / sizeof names[0]; i++) {
		struct nvlp_rec_string s = {.id = i};
		add(g, NVLP_K_STRING, &s, names[i], strlen(names[i]));
	}
	for (unsigned i = 0; i < nops; i++)
		if (ops[i].kname) {
			struct nvlp_rec_string s = {.id = S_K0 + i};
			add(g, NVLP_K_STRING, &s, ops[i].kname, strlen(ops[i].kname));
		}
	if (o->nlay) {
		struct nvlp_rec_string s = {.id = S_LAY};
		add(g, NVLP_K_STRING, &s, lay_kname, strlen(lay_kname));
	}
	if (o->no_gpu) {
		struct nvlp_rec_note nt = {
		    .code = NVLP_NOTE_CUPTI_UNAVAILABLE, .t = g->mono0, .device = (uint64_t)-1};
		const char *m = "CUPTI not loaded: libcupti.so.13 not found";
		add(g, NVLP_K_NOTE, &nt, m, strlen(m));
	} else
		rank_gpu_setup(g, o, per_host);
	return 0;
}

/* setup: a broadcast of the parameters */
static void setup_bcast(struct grank *G, int n, const struct an_gen_opts *o, double busbw)
{
	uint64_t arr = 500 * US, end = 0;
	for (int r = 0; r < n; r++) {
		nccl_rec(&G[r], NVLP_NCCL_BROADCAST, arr + r * 10 * US, 16 * MIB, 0, n, 0, o);
		if (arr + r * 10 * US + 10 * US > end)
			end = arr + r * 10 * US + 10 * US;
	}
	end += (uint64_t)(16.0 * MIB / busbw * 1e9) + 8 * US;
	for (int r = 0; r < n; r++) {
		kernel(&G[r], o, arr + r * 10 * US + 10 * US, end, NCCL_STREAM, S_BCAST, 1);
		G[r].comm_free = end;
		G[r].host_free = arr + r * 10 * US + 6 * US;
	}
}

/* rank 0: cross-device copies during setup (--staged, --peer) */
static void rank0_copies(struct grank *g0, const struct an_gen_opts *o)
{
	uint64_t t = 1 * MS;
	for (int i = 0; i < 8; i++) {
		uint64_t bytes = 32 * MIB;
		double bw = o->staged ? 34e9 : 390e9;
		uint64_t d = (uint64_t)((double)bytes / bw * 1e9);
		struct nvlp_rec_copy c = {.fn = o->staged ? NVLP_CUDA_MEMCPY_PEER
		                                          : NVLP_CUDA_MEMCPY_ASYNC,
		                          .t_enter = g0->mono0 + t,
		                          .dur = o->staged ? d : 8 * US,
		                          .tid = 100,
		                          .device = 0,
		                          .src_device = 0,
		                          .dst_device = 1,
		                          .bytes = bytes,
		                          .copy_kind = 3,
		                          .cupti_stream = COMP_STREAM,
		                          .peer_enabled = o->staged ? 0 : 1,
		                          .call_id = 900 + (uint64_t)i};
		add(g0, NVLP_K_COPY, &c, NULL, 0);
		if (o->python && !i)
			py_attach(g0, NVLP_K_COPY, c.tid, c.t_enter, c.call_id, 0x3302,
			          py_copy_chain);
		if (!o->no_gpu) {
			if (o->staged) {
				struct nvlp_rec_gpucopy a = {.start = g0->mono0 + t,
				                             .dur = d / 2,
				                             .copy_kind = 2,
				                             .device = 0,
				                             .src_device = 0,
				                             .dst_device = (uint64_t)-1,
				                             .bytes = bytes,
				                             .stream = COMP_STREAM};
				struct nvlp_rec_gpucopy b = {.start = g0->mono0 + t + d / 2,
				                             .dur = d / 2,
				                             .copy_kind = 1,
				                             .device = 1,
				                             .src_device = (uint64_t)-1,
				                             .dst_device = 1,
				                             .bytes = bytes,
				                             .stream = COMP_STREAM};
				defer(g0, NVLP_K_GPUCOPY, &a, sizeof a);
				defer(g0, NVLP_K_GPUCOPY, &b, sizeof b);
			} else {
				struct nvlp_rec_gpucopy a = {.start = g0->mono0 + t,
				                             .dur = d,
				                             .copy_kind = 10,
				                             .device = 0,
				                             .src_device = 0,
				                             .dst_device = 1,
				                             .bytes = bytes,
				                             .stream = COMP_STREAM};
				defer(g0, NVLP_K_GPUCOPY, &a, sizeof a);
			}
		}
		t += d + 20 * US;
	}
}

/* rank 0: the allocation site's module, build-id and symbol; @return its pc */
static uint64_t rank0_module(struct grank *g0, const struct an_gen_opts *o)
{
	Dl_info di;
	uint64_t pc = (uint64_t)(uintptr_t)&an_gen_alloc_site + 4;
	if (dladdr((void *)&an_gen_alloc_site, &di) && di.dli_fbase) {
		char exe[512];
		ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
		exe[l > 0 ? l : 0] = 0;
		struct nvlp_rec_module m = {.base = (uint64_t)(uintptr_t)di.dli_fbase,
		                            .start = (uint64_t)(uintptr_t)di.dli_fbase,
		                            .end = (uint64_t)(uintptr_t)di.dli_fbase +
		                                   64 * MIB};
		const char *mp = o->module_path ? o->module_path : exe;
		add(g0, NVLP_K_MODULE, &m, mp, strlen(mp));
		struct bid b = {0};
		dl_iterate_phdr(find_bid, &b);
		if (o->bad_buildid)
			for (size_t i = 0; i < b.len; i++)
				b.id[i] ^= 0xff;
		struct nvlp_rec_buildid bi = {.base = m.base};
		if (!o->no_buildid && b.len)
			add(g0, NVLP_K_BUILDID, &bi, b.id, b.len);
		struct nvlp_rec_symbol sy = {.base = m.base,
		                             .offset = (uint64_t)(uintptr_t)&an_gen_alloc_site -
		                                       m.base,
		                             .size = 16};
		if (o->sym_records)
			add(g0, NVLP_K_SYMBOL, &sy, "an_gen_alloc_site", 17);
	}
	return pc;
}

#define UM_PTR 0x7f3000000000ull
#define UM_BYTES (64 * MIB)
/* rank 0: a managed allocation (its stack, --um-once: one clean migration) */
static void rank0_managed(struct grank *g0, const struct an_gen_opts *o, uint64_t pc)
{
	uint64_t um_ptr = UM_PTR, um_bytes = UM_BYTES;
	uint64_t pcs[6] = {pc, 0x100, 0x200}, np = 3;
	if (o->tool_frames) { /* as a stack taken inside cudaMallocManaged: tools' frames on top */
		static const char *const lib[3] = {"/opt/nvlprof/lib/libnvlprof.so",
		                                   "/usr/local/cuda/lib64/libcupti.so.13",
		                                   "/usr/lib/x86_64-linux-gnu/libcuda.so.1"};
		for (int i = 0; i < 3; i++) {
			uint64_t b = 0x7e0000000000ull + (uint64_t)i * 0x10000000ull;
			struct nvlp_rec_module tm = {.base = b, .start = b, .end = b + 0x1000000};
			add(g0, NVLP_K_MODULE, &tm, lib[i], strlen(lib[i]));
			pcs[i] = b + 0x7d163;
		}
		pcs[3] = pc, pcs[4] = 0x100, pcs[5] = 0x200, np = 6;
	}
	struct nvlp_rec_stack st = {.id = 7};
	add(g0, NVLP_K_STACK, &st, pcs, np * sizeof pcs[0]);
	struct nvlp_rec_managed m = {.fn = NVLP_CUDA_MALLOC_MANAGED,
	                             .t_enter = g0->mono0 + 2 * MS,
	                             .dur = 50 * US,
	                             .tid = 100,
	                             .device = 0,
	                             .ptr = um_ptr,
	                             .bytes = um_bytes,
	                             .flags = 1,
	                             .target = (uint64_t)-1,
	                             .stack = 7};
	add(g0, NVLP_K_MANAGED, &m, NULL, 0);
	if (o->python)
		py_attach(g0, NVLP_K_MANAGED, m.tid, m.t_enter, 0, 0x3303, py_alloc_chain);
	if (o->um_once) {
		struct nvlp_rec_managed p = m;
		p.fn = NVLP_CUDA_MEM_PREFETCH_ASYNC;
		p.t_enter += 100 * US;
		p.target = 0;
		p.stack = 0;
		add(g0, NVLP_K_MANAGED, &p, NULL, 0);
		if (!o->no_gpu) {
			struct nvlp_rec_um u = {.counter = 1,
			                        .start = g0->mono0 + 2200 * US,
			                        .dur = 300 * US,
			                        .address = um_ptr,
			                        .value = um_bytes,
			                        .src = (uint64_t)-1,
			                        .dst = 0};
			defer(g0, NVLP_K_UM, &u, sizeof u);
		}
	}
}


/* --blocking: the call returns when its collective is done, and so does the rank's thread. */
static void block_until(struct grank *g, struct nvlp_rec_nccl *c, uint64_t end)
{
	c->dur = g->mono0 + end + 5 * US - c->t_enter;
	g->host_free = end + 5 * US;
}

/* Rank g's calls of one world op (and its group's other members), entered at g->arr; end: when
 * the collective is done (0: never). */
static void op_calls(struct grank *g, const struct an_gen_opts *o, const struct op *ops,
                     unsigned i, unsigned nin, uint64_t seq, uint64_t end)
{
	int n = o->ranks, grp = ops[i].group != 0;
	uint64_t arr = g->arr;
	if (grp)
		nccl_rec(g, NVLP_NCCL_GROUP_START, arr - 2 * US, 0, 0, n, 0, o);
	for (unsigned k = 0; k < nin; k++) {
		struct nvlp_rec_nccl c =
		    nccl_fill(g, ops[i + k].fn, arr + k * US, ops[i + k].bytes, grp, n, seq + k, o);
		if (o->blocking && end && !grp)
			block_until(g, &c, end);
		add(g, NVLP_K_NCCL, &c, NULL, 0);
	}
	if (grp) {
		struct nvlp_rec_nccl c =
		    nccl_fill(g, NVLP_NCCL_GROUP_END, arr + nin * US + US, 0, 0, n, 0, o);
		if (o->blocking && end) /* a group's calls return at once, its end waits */
			block_until(g, &c, end);
		add(g, NVLP_K_NCCL, &c, NULL, 0);
	}
}

static uint64_t late_of(const struct an_gen_opts *o, int r)
{
	return r == o->late_rank ? (uint64_t)(o->late_ms * MS) : 0;
}

/* --blocking: a call enters once its thread is back from the last, a late rank's work before it
 * late_ms more (sched: when it would enter otherwise, jitter included) */
static uint64_t arr_blocking(const struct an_gen_opts *o, const struct grank *g, uint64_t sched,
                             int r)
{
	return (sched > g->host_free ? sched : g->host_free) + late_of(o, r);
}

/* One world op of a step at ops[i] (nin ops: its group): every rank's calls and kernels.
 * @return 1 when a rank died or hung in it (the last collective of the job) */
static int world_op(struct grank *G, const struct an_gen_opts *o, const struct op *ops,
                    unsigned i, unsigned nin, uint64_t t0, uint64_t seq, int last_coll,
                    double busbw)
{
	int n = o->ranks, stopped = 0;
	const struct op *op = &ops[i];
	uint64_t at = op->at + (o->exposed && i < 2 ? 8100 * US - op->at + i * 10 * US : 0);
	uint64_t mx = 0, bytes = 0;
	for (unsigned k = 0; k < nin; k++)
		bytes += ops[i + k].bytes;
	/* nccl-tests bus factor: 2(n-1)/n for AllReduce, (n-1)/n for the others */
	double fac = op->fn == NVLP_NCCL_ALL_REDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
	for (int r = 0; r < n; r++) {
		struct grank *g = &G[r];
		uint64_t jit = rnd(30) * US;
		g->arr = o->blocking ? arr_blocking(o, g, t0 + at + jit, r) : t0 + at + late_of(o, r) + jit;
		g->launch = 0;
		int killed = o->kill_rank >= 0 && r >= o->kill_rank && r < o->kill_rank + o->kill_n;
		if (last_coll && (killed || r == o->hang_rank)) {
			stopped = 1;
			if (killed) { /* dies here: what it has written stays, no END */
				flush_deferred(g);
				if (g->w)
					nvlp_writer_flush(g->w);
				g->dead = 1;
			}
			continue;
		}
		g->launch = g->arr + nin * US + 10 * US;
		if (g->launch < g->comm_free)
			g->launch = g->comm_free;
		if (g->launch > mx)
			mx = g->launch;
	}
	uint64_t end = mx + (uint64_t)((double)bytes * fac / busbw * 1e9) + 8 * US;
	for (int r = 0; r < n; r++)
		if (G[r].launch)
			op_calls(&G[r], o, ops, i, nin, seq, stopped ? 0 : end);
	if (stopped) /* the survivors' kernels never complete: no KERNEL records */
		return 1;
	for (int r = 0; r < n; r++) {
		struct grank *g = &G[r];
		kernel(g, o, g->launch, end, NCCL_STREAM, S_K0 + i, 1);
		g->comm_free = g->comm_end = end;
		double moved = (double)bytes * fac;
		if (o->fallback) {
			traffic_to(g, 1, mx, end, moved);
			traffic_to(g, 0, mx, end, moved * 0.001);
		} else
			traffic_to(g, 0, mx, end, moved);
	}
	return 0;
}

/* Layout item l's communicator of group grp: a hash of its own. */
static uint64_t lay_hash(int l, int grp)
{
	return COMM_HASH ^ ((uint64_t)(l + 1) << 52) ^ ((uint64_t)(grp + 1) * 0x9e3779b97f4a7c15ull >> 12);
}

/* Each layout communicator's AllReduce of the step (4 MiB, after the world ops): each group ends
 * when its own last member launched; gmx: per group scratch (ranks long). */
static void lay_ops(struct grank *G, const struct an_gen_opts *o, uint64_t t0, uint64_t *lseq,
                    double busbw, int per_host, uint64_t *gmx)
{
	int n = o->ranks, grp, rk, sz;
	struct an_gen_opts q = *o;
	q.mm_kind = 0; /* --mismatch is the world communicator's */
	for (int l = 0; l < o->nlay; l++) {
		memset(gmx, 0, (size_t)n * sizeof *gmx);
		for (int r = 0; r < n; r++) {
			struct grank *g = &G[r];
			uint64_t sched = t0 + 8100 * US + (uint64_t)l * 50 * US + rnd(30) * US;
			g->arr = o->blocking ? arr_blocking(o, g, sched, r) : sched + late_of(o, r);
			g->launch = g->arr + 10 * US > g->comm_free ? g->arr + 10 * US : g->comm_free;
			lay_member(o, &o->lay[l], r, per_host, &grp, &rk, &sz);
			gmx[grp] = g->launch > gmx[grp] ? g->launch : gmx[grp];
		}
		for (int r = 0; r < n; r++) {
			struct grank *g = &G[r];
			lay_member(o, &o->lay[l], r, per_host, &grp, &rk, &sz);
			double moved = 4.0 * MIB * 2.0 * (sz - 1) / sz;
			uint64_t end = gmx[grp] + (uint64_t)(moved / busbw * 1e9) + 8 * US;
			struct nvlp_rec_nccl c =
			    nccl_fill(g, NVLP_NCCL_ALL_REDUCE, g->arr, 4 * MIB, 0, sz, lseq[l], &q);
			c.comm = lay_hash(l, grp);
			c.rank = (uint64_t)rk;
			if (o->blocking)
				block_until(g, &c, end);
			add(g, NVLP_K_NCCL, &c, NULL, 0);
			kernel(g, o, g->launch, end, NCCL_STREAM, S_LAY, 1);
			g->comm_free = g->comm_end = end;
			traffic_to(g, 0, gmx[grp], end, moved);
		}
		lseq[l]++;
	}
}

/* rank 0: managed memory ping-pong, one migration per step (--thrash) */
static void rank0_thrash(struct grank *g0, uint64_t t0, int s)
{
	static const int dsts[3] = {0, 1, -1};
	int dst = dsts[s % 3];
	struct nvlp_rec_um u = {.counter = dst < 0 ? 2u : (s % 3 == 1 ? 8u : 1u),
	                        .start = g0->mono0 + t0 + 100 * US,
	                        .dur = 150 * US,
	                        .address = UM_PTR + (uint64_t)(s % 16) * 2 * MIB,
	                        .value = 2 * MIB,
	                        .src = (uint64_t)(dst < 0 ? 1 : -1),
	                        .dst = (uint64_t)dst};
	defer(g0, NVLP_K_UM, &u, sizeof u);
	struct nvlp_rec_um f = {.counter = 4,
	                        .start = g0->mono0 + t0 + 80 * US,
	                        .dur = 20 * US,
	                        .address = u.address,
	                        .value = 32,
	                        .dst = 0};
	defer(g0, NVLP_K_UM, &f, sizeof f);
}

/* The optimizer after the gradients arrived, the step's GPU records delivered. @return when the
 * step ends (every rank done) */
static uint64_t step_finish(struct grank *G, const struct an_gen_opts *o, uint64_t t0, int s)
{
	uint64_t step_end = 0;
	for (int r = 0; r < o->ranks; r++) {
		uint64_t os = t0 + late_of(o, r) + 8200 * US;
		if (G[r].comm_end > os)
			os = G[r].comm_end + 5 * US;
		kernel(&G[r], o, os, os + 1300 * US, COMP_STREAM, S_OPT, 0);
		if (os + 1300 * US > step_end)
			step_end = os + 1300 * US;
	}
	/* the previous step's GPU records arrive now, after this step's API records */
	for (int r = 0; r < o->ranks; r++) {
		flush_deferred(&G[r]);
		if (s % 4 == 3) /* the main thread's buffer, every few steps */
			flush_late(&G[r]);
	}
	return step_end + 100 * US;
}

/* The steps, from the first at t0. @return when the job ends */
static uint64_t gen_steps(struct grank *G, const struct an_gen_opts *o, int steps, int per_host,
                          double busbw, uint64_t *gmx)
{
	const struct op *ops = o->fsdp ? fsdp_ops : step_ops;
	unsigned nops = o->fsdp ? (unsigned)NFSDP : (unsigned)NOPS;
	uint64_t t0 = 20 * MS, seq = 1, lseq[8] = {0};
	for (int s = 0; s < steps; s++) {
		/* compute: forward, backward on the compute stream */
		for (int r = 0; r < o->ranks; r++) {
			uint64_t d = late_of(o, r);
			kernel(&G[r], o, t0 + d, t0 + d + 3 * MS, COMP_STREAM, S_FWD, 0);
			kernel(&G[r], o, t0 + d + 3 * MS + 5 * US, t0 + d + 8 * MS, COMP_STREAM,
			       S_BWD, 0);
			G[r].comm_end = 0;
		}
		int stopped = 0;
		for (unsigned i = 0; i < nops && !stopped; i++) {
			if (ops[i].group && i > 0 && ops[i - 1].group == ops[i].group)
				continue; /* handled with its group's first op */
			unsigned nin = 1;
			while (ops[i].group && i + nin < nops && ops[i + nin].group == ops[i].group)
				nin++;
			stopped = world_op(G, o, ops, i, nin, t0, seq, s == steps - 1 && i + nin >= nops,
			                   busbw);
			seq += nin;
			if (!stopped && o->interleave && i == 0)
				late_bcast(G, o->ranks, o, t0 + ops[i].at + 1000 * US, seq++, busbw,
				           S_BCAST);
		}
		if (!stopped)
			lay_ops(G, o, t0, lseq, busbw, per_host, gmx);
		if (o->thrash && s < 40 && !o->no_gpu)
			rank0_thrash(&G[0], t0, s);
		if (stopped) {
			/* the survivors wait in the last collective until they are stopped */
			for (int r = 0; r < o->ranks; r++)
				if (!G[r].dead) {
					flush_deferred(&G[r]);
					G[r].signaled = 1;
				}
			return t0 + (uint64_t)(o->hang_ms * MS);
		}
		t0 = step_finish(G, o, t0, s);
	}
	return t0;
}

static uint64_t gen_records; /* --print-records: every trace's records, header and END included */

/* Rank g's last records: link samples, drops, END. */
static void finish_rank(struct grank *g, const struct an_gen_opts *o, uint64_t t0)
{
	if (g->dead == 1) {
		gen_records += g->records + 1;
		nvlp_writer_close(g->w);
		return;
	}
	flush_deferred(g);
	flush_late(g);
	if (!o->no_gpu && !o->no_links) {
		size_t nb = (t0 / MS) < g->nb ? t0 / MS : g->nb;
		for (size_t i = 0; i < nb; i++) {
			struct nvlp_rec_linksample l = {.device = (uint64_t)g->dev, .source = 1,
			                                .start = g->mono0 + i * MS, .dur = MS};
			l.nvl_tx = l.nvl_rx = (uint64_t)(g->nvl[i] / 2);
			l.nvl_tx_user = l.nvl_tx;
			l.nvl_rx_user = l.nvl_rx;
			l.pcie_rd = 16384 + (uint64_t)(g->pcie[i] / 2);
			l.pcie_wr = 16384 + (uint64_t)(g->pcie[i] / 2);
			add(g, NVLP_K_LINKSAMPLE, &l, NULL, 0);
		}
	}
	if (g->rank == o->drop_rank) { /* one thread lost 1234 records in a burst */
		struct nvlp_rec_drops dr = {.tid = 100, .dropped = 1234, .t = g->mono0 + t0};
		add(g, NVLP_K_DROPS, &dr, NULL, 0);
	}
	struct nvlp_rec_end e = {.t = g->mono0 + t0,
	                         .records = g->records,
	                         .dropped = g->rank == o->drop_rank ? 1234 : 0,
	                         .reason = g->signaled ? NVLP_END_SIGNAL : NVLP_END_EXIT};
	add(g, NVLP_K_END, &e, NULL, 0);
	gen_records += g->records + 1;
	nvlp_writer_close(g->w);
}

/* The whole job simulated, the traces of ranks [lo, hi) written (the others' records go
 * nowhere: a pass per batch keeps the open writers few). @return 0, or -1 */
static int gen_pass(const struct an_gen_opts *o, int lo, int hi)
{
	int n = o->ranks, per_host = (o->ranks + o->hosts - 1) / o->hosts, rc = 0;
	const struct op *ops = o->fsdp ? fsdp_ops : step_ops;
	unsigned nops = o->fsdp ? (unsigned)NFSDP : (unsigned)NOPS;
	struct grank *G = calloc((size_t)n, sizeof *G);
	uint64_t *gmx = calloc((size_t)n, sizeof *gmx);
	lcg_state = 42;
	for (int r = 0; G && gmx && r < n && !rc; r++) {
		struct grank *g = &G[r];
		g->rank = r;
		g->host = r / per_host;
		g->dev = o->one_gpu ? 0 : r % per_host;
		g->mono0 = 1000000ull * MS + (uint64_t)g->host * 777777ull * MS;
		if (r >= lo && r < hi)
			rc = rank_open(g, o, per_host, ops, nops);
	}
	if (!G || !gmx || rc) {
		free(G);
		free(gmx);
		return -1;
	}
	int steps = o->steps;
	if (o->target_records)
		steps = (int)(o->target_records / (o->no_links ? 15 : 25)) + 1;
	double busbw = o->fallback ? 20e9 : 360e9; /* bytes/s */
	setup_bcast(G, n, o, busbw);
	/* cross-device copies and managed memory on rank 0, during setup */
	if (o->staged || o->peer)
		rank0_copies(&G[0], o);
	if (o->thrash || o->um_once)
		rank0_managed(&G[0], o, rank0_module(&G[0], o));
	uint64_t t_end = gen_steps(G, o, steps, per_host, busbw, gmx);
	for (int r = lo; r < hi; r++)
		finish_rank(&G[r], o, t_end);
	for (int r = 0; r < n; r++) {
		free(G[r].p);
		free(G[r].lp);
		free(G[r].nvl);
		free(G[r].pcie);
	}
	free(G);
	free(gmx);
	return 0;
}

#define AN_GEN_BATCH 1024 /* open traces at once: file descriptors and zstd contexts */
int an_gen_run(const struct an_gen_opts *o);
int an_gen_run(const struct an_gen_opts *o)
{
	if (o->small_calls)
		return gen_small(o);
	if (o->plain)
		return gen_plain(o);
	char tmp[512];
	snprintf(tmp, sizeof tmp, "%s", o->dir);
	for (char *p = tmp + 1; *p; p++) /* mkdir -p */
		if (*p == '/') {
			*p = 0;
			mkdir(tmp, 0755);
			*p = '/';
		}
	mkdir(tmp, 0755);
	for (int lo = 0; lo < o->ranks; lo += AN_GEN_BATCH)
		if (gen_pass(o, lo, lo + AN_GEN_BATCH < o->ranks ? lo + AN_GEN_BATCH : o->ranks))
			return -1;
	return 0;
}


void an_gen_defaults(struct an_gen_opts *o);
void an_gen_defaults(struct an_gen_opts *o)
{
	memset(o, 0, sizeof *o);
	o->ranks = 2;
	o->hosts = 1;
	o->steps = 40;
	o->late_rank = -1;
	o->late_ms = 2;
	o->kill_rank = -1;
	o->drop_rank = -1;
	o->hang_ms = 2000;
	o->hang_rank = -1;
	o->kill_n = 1;
}

#ifndef AN_GEN_NO_MAIN
/* A launcher's trace (torchrun's parent): the shim saw a device and took clock pairs, no work. */
static int gen_launcher(const struct an_gen_opts *o)
{
	char hdr[512], path[512];
	uint64_t mono0 = 1000000ull * MS;
	snprintf(hdr, sizeof hdr,
	         "format=1\nversion=test\nhost=node0\npid=4999\nppid=1\nrank=0\nlocal_rank=0\n"
	         "world_size=%d\ncmdline=torchrun --nproc-per-node %d train.py\n",
	         o->ranks, o->ranks);
	snprintf(path, sizeof path, "%s/launcher-4999.nvlp", o->dir);
	nvlp_writer *w = nvlp_writer_open(path, hdr, mono0, REAL0);
	if (!w)
		return -1;
	static const char name[] = "NVIDIA H200";
	struct nvlp_rec_device d = {.device = 0, .sm_count = 132, .cc_major = 9};
	nvlp_writer_add(w, NVLP_K_DEVICE, &d, name, strlen(name));
	struct nvlp_rec_clock ck = {.source = 1, .mono = mono0 + MS, .other = mono0 + MS};
	nvlp_writer_add(w, NVLP_K_CLOCK, &ck, NULL, 0);
	struct nvlp_rec_end e = {.t = mono0 + 2 * MS};
	nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
	return nvlp_writer_close(w);
}

/* --comms host,tp:N,pp:N: communicators beside the world one. @return 0, or -1 bad */
static int parse_layout(struct an_gen_opts *o, const char *spec)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", spec);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (o->nlay == (int)(sizeof o->lay / sizeof o->lay[0]))
			return -1;
		struct lay *l = &o->lay[o->nlay++];
		if (!strcmp(t, "host"))
			l->kind = LAY_HOST;
		else if (!strncmp(t, "tp:", 3) || !strncmp(t, "pp:", 3)) {
			l->kind = t[0] == 't' ? LAY_TP : LAY_PP;
			l->size = atoi(t + 3);
			if (l->size < 1)
				return -1;
		} else
			return -1;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: an_gen -o DIR [--ranks N] [--hosts H] [--steps S] [--clock-err-ms "
	                "X] [--late-rank R]\n"
	                "       [--late-ms M] [--kill-rank R] [--fallback] [--env-only] [--staged] "
	                "[--peer] [--thrash]\n"
	                "       [--um-once] [--no-gpu] [--no-links] [--no-topo] [--exposed] "
	                "[--cupti-stream0] [--records N]\n"
	                "       [--hang-ms MS] [--nvswitch] [--switch-pairs] [--one-gpu] [--fsdp] "
	                "[--interleave] [--no-buildid]\n"
	                "       [--bad-buildid] [--sym-records] [--tool-frames] [--module-path PATH] [--drop-rank R]\n"
	                "       [--small-allreduce N] [--sweep | --graph-loop | --fail-at N] "
	                "[--launcher] [--single-rank] [--no-nccl-gpu]\n"
	                "       [--in-place] [--comm-name NAME] [--python]\n"
	                "       [--mismatch count|dtype|op|fn|root|same:SEQ[:RANK]]\n"
	                "       [--ranks-per-host N] [--comms host,tp:N,pp:N] [--clock-spread-ms X]\n"
	                "       [--hang-rank R] [--blocking] [--kill-count N (from --kill-rank)]\n"
	                "       [--print-records] [--comm-per-call (with --small-allreduce)]\n");
}

int main(int argc, char **argv)
{
	struct an_gen_opts o;
	an_gen_defaults(&o);
	static const struct option lo[] = {
	    {"ranks", 1, 0, 'n'},        {"hosts", 1, 0, 'H'},      {"steps", 1, 0, 's'},
	    {"clock-err-ms", 1, 0, 'c'}, {"late-rank", 1, 0, 'l'},  {"late-ms", 1, 0, 'L'},
	    {"kill-rank", 1, 0, 'k'},    {"fallback", 0, 0, 'F'},   {"env-only", 0, 0, 'E'},
	    {"staged", 0, 0, 'S'},       {"peer", 0, 0, 'P'},       {"thrash", 0, 0, 'T'},
	    {"um-once", 0, 0, 'U'},      {"no-gpu", 0, 0, 'G'},     {"no-links", 0, 0, 'K'},
	    {"no-topo", 0, 0, 'O'},      {"exposed", 0, 0, 'X'},    {"cupti-stream0", 0, 0, 'Z'},
	    {"records", 1, 0, 'r'},      {"hang-ms", 1, 0, 'W'},    {"nvswitch", 0, 0, 'V'},
	    {"fsdp", 0, 0, 'D'},         {"interleave", 0, 0, 'I'}, {"no-buildid", 0, 0, 'b'},
	    {"bad-buildid", 0, 0, 'B'},  {"sym-records", 0, 0, 'y'}, {"tool-frames", 0, 0, 0x101}, {"module-path", 1, 0, 'M'},
	    {"switch-pairs", 0, 0, 0x102}, {"one-gpu", 0, 0, 0x103},
	    {"drop-rank", 1, 0, 'R'},    {"small-allreduce", 1, 0, 'A'},
	    {"sweep", 0, 0, 1},          {"graph-loop", 0, 0, 2},    {"fail-at", 1, 0, 3},
	    {"launcher", 0, 0, 4},       {"comm-name", 1, 0, 5},     {"single-rank", 0, 0, 6},
	    {"no-nccl-gpu", 0, 0, 7},    {"python", 0, 0, 8},       {"in-place", 0, 0, 9},
	    {"mismatch", 1, 0, 10},      {"ranks-per-host", 1, 0, 11}, {"comms", 1, 0, 12},
	    {"clock-spread-ms", 1, 0, 13}, {"hang-rank", 1, 0, 14},  {"blocking", 0, 0, 15},
	    {"kill-count", 1, 0, 16},    {"print-records", 0, 0, 17}, {"comm-per-call", 0, 0, 18},
	    {0, 0, 0, 0}};
	int per_host = 0;
	int c;
	while ((c = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			o.dir = optarg;
			break;
		case 'n':
			o.ranks = atoi(optarg);
			break;
		case 'H':
			o.hosts = atoi(optarg);
			break;
		case 's':
			o.steps = atoi(optarg);
			break;
		case 'c':
			o.clock_err_ns = (int64_t)(atof(optarg) * 1e6);
			break;
		case 'l':
			o.late_rank = atoi(optarg);
			break;
		case 'L':
			o.late_ms = atof(optarg);
			break;
		case 'k':
			o.kill_rank = atoi(optarg);
			break;
		case 'F':
			o.fallback = 1;
			break;
		case 'E':
			o.env_only = 1;
			break;
		case 'S':
			o.staged = 1;
			break;
		case 'P':
			o.peer = 1;
			break;
		case 'T':
			o.thrash = 1;
			break;
		case 'U':
			o.um_once = 1;
			break;
		case 'G':
			o.no_gpu = 1;
			break;
		case 'K':
			o.no_links = 1;
			break;
		case 'O':
			o.no_topo = 1;
			break;
		case 'X':
			o.exposed = 1;
			break;
		case 'Z':
			o.cupti_stream0 = 1;
			break;
		case 'r':
			o.target_records = strtoull(optarg, NULL, 10);
			break;
		case 'W':
			o.hang_ms = atof(optarg);
			break;
		case 'V':
			o.nvswitch = 1;
			break;
		case 'D':
			o.fsdp = 1;
			break;
		case 'I':
			o.interleave = 1;
			break;
		case 'b':
			o.no_buildid = 1;
			break;
		case 'B':
			o.bad_buildid = 1;
			break;
		case 'y':
			o.sym_records = 1;
			break;
		case 0x102:
			o.nvswitch = 2;
			break;
		case 0x103:
			o.one_gpu = 1;
			break;
		case 0x101:
			o.tool_frames = 1;
			break;
		case 'M':
			o.module_path = optarg;
			break;
		case 'R':
			o.drop_rank = atoi(optarg);
			break;
		case 'A':
			o.small_calls = strtoull(optarg, NULL, 10);
			break;
		case 1:
			o.plain = PLAIN_SWEEP;
			break;
		case 2:
			o.plain = PLAIN_LOOP;
			break;
		case 3:
			o.plain = PLAIN_FAIL;
			o.fail_at = atoi(optarg);
			break;
		case 4:
			o.launcher = 1;
			break;
		case 5:
			o.comm_name = optarg;
			break;
		case 7:
			o.no_nccl_gpu = 1;
			break;
		case 8:
			o.python = gen_python = 1;
			break;
		case 9:
			o.in_place = 1;
			break;
		case 10: {
			static const char *const kinds[] = {"", "count", "dtype", "op", "fn", "root",
			                                    "same"};
			const char *c1 = strchr(optarg, ':');
			for (int k = 1; c1 && k < (int)(sizeof kinds / sizeof kinds[0]); k++)
				if ((size_t)(c1 - optarg) == strlen(kinds[k]) &&
				    !strncmp(optarg, kinds[k], strlen(kinds[k])))
					o.mm_kind = k;
			if (!o.mm_kind) {
				usage();
				return 2;
			}
			char *e;
			o.mm_seq = strtoull(c1 + 1, &e, 10);
			o.mm_rank = *e == ':' ? atoi(e + 1) : 1;
			break;
		}
		case 11:
			per_host = atoi(optarg);
			break;
		case 12:
			if (parse_layout(&o, optarg)) {
				usage();
				return 2;
			}
			break;
		case 13:
			o.clock_spread_ms = atof(optarg);
			break;
		case 14:
			o.hang_rank = atoi(optarg);
			break;
		case 15:
			o.blocking = 1;
			break;
		case 16:
			o.kill_n = atoi(optarg);
			break;
		case 17:
			o.print_records = 1;
			break;
		case 18:
			o.comm_per_call = 1;
			break;
		case 6:
			o.plain = PLAIN_SINGLE;
			o.ranks = 1;
			break;
		default:
			usage();
			return 2;
		}
	}
	if (per_host > 0)
		o.hosts = (o.ranks + per_host - 1) / per_host;
	for (int l = 0; l < o.nlay; l++)
		if (o.lay[l].kind == LAY_PP && o.ranks % o.lay[l].size) {
			fprintf(stderr, "an_gen: pp:%d does not divide %d ranks\n", o.lay[l].size, o.ranks);
			return 2;
		}
	if (!o.dir || o.ranks < 1 || o.hosts < 1 || o.hosts > o.ranks) {
		usage();
		return 2;
	}
	if (o.mm_kind && o.python)
		gen_mm_seq = o.mm_seq;
	if (an_gen_run(&o))
		return 1;
	if (o.print_records)
		printf("records %llu\n", (unsigned long long)gen_records);
	return o.launcher && gen_launcher(&o) ? 1 : 0;
}
#endif

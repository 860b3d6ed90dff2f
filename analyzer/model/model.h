/* model.h: the analyzer's in-memory model of one job: traces loaded in parallel, merged, aligned
 * and attributed. */
#ifndef NVLP_AN_MODEL_H
#define NVLP_AN_MODEL_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "nvlp_format.h"
#include "util/containers.h" /* struct an_index, struct an_ivals */

/*
 * Thresholds: T(name, default, description). One list gives the enum, the defaults, the
 * `--threshold name=value` parser and the --help text.
 */
#define AN_THRESHOLDS(T)                                                                           \
	T(exposed_share, 0.20,                                                                     \
	  "exposed communication / step time (wall time if no steps) above which "                 \
	  "exposed_communication warns")                                                           \
	T(exposed_critical, 0.40, "... and above which it is critical")                            \
	T(low_busbw_share, 0.25, "bus bandwidth below this share of the NVLink peak is low")       \
	T(low_busbw_min_mib, 8,                                                                    \
	  "only collectives of at least this many MiB per call count for low_bus_bandwidth")       \
	T(low_busbw_min_calls, 4,                                                                  \
	  "... and only collective types called at least this often per rank (setup broadcasts "   \
	  "wait)")                                                                                 \
	T(fallback_pcie_ratio, 2.0,                                                                \
	  "PCIe bytes > this x NVLink bytes during collectives means traffic left NVLink")         \
	T(fallback_min_mib, 64,                                                                    \
	  "NCCL payload (MiB, per rank) below which pcie_fallback is not judged")                  \
	T(staged_min_mib, 16,                                                                      \
	  "cross-device copy MiB below which peer_access_disabled is not judged")                  \
	T(staged_max_gbps, 100,                                                                    \
	  "without NVLink topology records, staged copies slower than this (GB/s) are judged")     \
	T(split_host_critical, 0.20,                                                               \
	  "nccl_split_host is critical when a member spends at least this share of its wall time " \
	  "in the communicator's collectives")                                                     \
	T(thrash_min_flips, 4,                                                                     \
	  "migrations that change direction, per allocation, for uma_thrashing")                   \
	T(thrash_min_mib, 8,                                                                       \
	  "MiB migrated per allocation below which uma_thrashing is not judged")                   \
	T(straggler_share, 0.75,                                                                   \
	  "a rank last to arrive in at least this share of collectives ...")                       \
	T(straggler_min_ms, 0.5,                                                                   \
	  "... whose median lead over the next-latest rank is at least this (ms) ...")             \
	T(straggler_step_share, 0.15,                                                              \
	  "... and, when steps are recognised, at least this share of the step time is a "         \
	  "straggler (DDP ranks differ by a few % of a step as a matter of course)")               \
	T(straggler_long_ms, 5.0,                                                                  \
	  "... or, a lead of at least this (ms) ...")                                              \
	T(straggler_long_share, 0.05,                                                              \
	  "... that is at least this share of the step (20 ms in 180 ms steps: 840 ms lost)")      \
	T(explained_share, 0.5,                                                                    \
	  "pcie_fallback / straggler explains exposed_communication (demoted to info) when it "    \
	  "accounts for at least this share of the exposed time")                                  \
	T(step_min_count, 5, "a repeating collective pattern is taken for steps only when it repeats "  \
	  "at least this often ...")                                                               \
	T(step_min_ms, 1.0, "... each repetition lasts at least this (ms) on the median ...")       \
	T(step_regular_share, 0.8,                                                                 \
	  "... and at least this share of repetitions last within 25% of the median (a sweep of "  \
	  "growing sizes or a tight replay loop is not a training step)")                          \
	T(hang_min_ms, 100,                                                                        \
	  "a collective missing on some ranks is a hang_suspect when others waited >= this (ms); " \
	  "less is a job stopped as a whole")                                                      \
	T(killed_together_ms, 1000,                                                                \
	  "... and never when every member's trace was cut short (no END record) within this (ms) " \
	  "of the others after a shorter wait: a job killed as a whole (a trace loses up to a "      \
	  "500 ms frame period)")                                                                 \
	T(ranks_shown, 32,                                                                         \
	  "a job of more ranks shows in RANKS (and the page's tables and plots) the ranks that "   \
	  "matter and the others' distribution; --all-ranks shows every rank")                    \
	T(collective_rows, 32,                                                                     \
	  "COLLECTIVES past this many rows: one row per kind of communicator, call and size "     \
	  "(their mean, with the range under it) instead of one per communicator; --all-ranks "   \
	  "shows every one")                                                                      \
	T(heatmap_rows, 256,                                                                       \
	  "the page's heatmaps draw one row per rank up to this many ranks; past it the ranks "   \
	  "that matter and percentile bands of the others")

enum an_threshold {
#define AN_T_ENUM(name, def, doc) AN_TH_##name,
	AN_THRESHOLDS(AN_T_ENUM)
#undef AN_T_ENUM
	    AN_TH_COUNT
};
extern const char *const an_threshold_names[AN_TH_COUNT];
extern const char *const an_threshold_docs[AN_TH_COUNT];
extern const double an_threshold_defaults[AN_TH_COUNT];
/*! Parse "name=value" into th. @return 0, or -1 (unknown name or bad number) */
int an_threshold_set(double *th, const char *assign);

/* ---- nccl_meta.c: NCCL's collectives as nccl-tests measure them ---- */
/* Collective kinds as the analyzer groups them (several NCCL functions share one kernel type). */
enum an_coll {
	AN_C_NONE = 0,
	AN_C_ALLREDUCE,
	AN_C_ALLGATHER,
	AN_C_REDUCESCATTER,
	AN_C_BROADCAST,
	AN_C_REDUCE,
	/* Send, Recv, AlltoAll, Gather, Scatter: NCCL runs them as SendRecv kernels */
	AN_C_SENDRECV,
	AN_C_COUNT
};
const char *an_coll_name(int c);
/* an_coll per NCCL function (nccl_meta.c): a table read inline, as every stage asks it per call */
extern const uint8_t an_coll_of_fn_table[NVLP_NCCL_FN_COUNT];
/*! @return the an_coll of an NCCL function (0 for non-kernel-launching ones) */
static inline int an_coll_of_fn(unsigned fn)
{
	return fn < NVLP_NCCL_FN_COUNT ? an_coll_of_fn_table[fn] : AN_C_NONE;
}
/*! The collective an NCCL function performs, as ranks' calls are compared (ncclBcast is an
 * in-place ncclBroadcast: the two meet in one collective). */
static inline int an_fn_collective(unsigned fn)
{
	return fn == NVLP_NCCL_BCAST ? NVLP_NCCL_BROADCAST : (int)fn;
}
/*! @return the an_coll named in an NCCL kernel name, 0 if not an NCCL kernel, -1 NCCL but
 * unknown */
int an_coll_of_kernel(const char *name);
/*! nccl-tests bus bandwidth factor for fn on n ranks. */
double an_busbw_factor(unsigned fn, int n);
/*! nccl-tests algbw and busbw in GB/s of bytes moved in ns by fn on n ranks (NaN if ns is 0). */
double an_algbw_gbps(double bytes, double ns);
double an_busbw_gbps(double bytes, double ns, unsigned fn, int n);
/*! Size class label of a byte count ("<64K", "64K-1M", "1M-16M", "16M-256M", ">=256M"). */
int an_size_class(uint64_t bytes);
const char *an_size_class_name(int c);
#define AN_SIZE_CLASSES 5

/* Limits on what one trace may make the analyzer keep: a record past them is skipped (and
 * counted), so memory stays in proportion to the input and lookups stay short. */
#define AN_MAX_DEVICE 127      /* device ids (an_call.device is an int8_t) */
#define AN_MAX_COMMS 0x7fffffff /* communicators per process and per job (an_call.comm) */
#define AN_COMM_NONE UINT32_MAX /* an_rcomm.job_comm of a communicator beyond them */
#define AN_MAX_NRANKS (1 << 20) /* ranks of one communicator */
#define AN_MAX_ALLOCS 4096     /* managed allocations per process (kept sorted by address) */
#define AN_MAX_LINKS 4096      /* distinct NVLink topology records per process */
#define AN_MAX_SYMBOLS (1u << 20) /* SYMBOL records per process */
#define AN_MAX_NCCLCOMMS 32       /* NCCLCOMM records kept per process (the first ones) */
#define AN_MAX_INFLIGHT 256       /* threads with a call in flight kept per process */
/* A record time later than this after its process's start is not one (a realtime stamp in a
 * monotonic field, a wrapped difference): it never becomes the end of a process. */
#define AN_MAX_LIFE_NS (400ull * 86400 * 1000000000)

/* One NCCL call, compact (40 bytes): all matching and attribution needs. */
struct an_call {
	uint64_t t_enter; /* host, job time (aligned) once the job is aligned; local mono before */
	uint64_t bytes;   /* nccl-tests S */
	uint64_t gpu_start; /* GPU kernel start, same clock as t_enter; 0 = no GPU time */
	uint32_t gpu_dur;   /* ns of GPU time attributed to this call (share of a group's kernel) */
	uint32_t host_dur;  /* ns in the host call */
	uint32_t seq;       /* per-communicator collective counter */
	int32_t comm;       /* index into the job's comm table */
	uint8_t fn;         /* enum nvlp_nccl_fn */
	int8_t device;
};

/* What else every rank must pass alike to a collective (the NCCL record's count, dtype, op and
 * peer = root; op and root are -1 where the function has none): one entry per distinct tuple of a
 * process (an_rank.csigs), and per call its entry number (an_rank.csig, beside calls): 2 bytes a
 * call instead of 16 in struct an_call, as a process passes few distinct tuples (a DDP job: its
 * bucket sizes). */
struct an_csig {
	uint64_t count;
	int32_t root;
	int16_t dtype, op;
};
#define AN_MAX_CSIGS 65535        /* distinct tuples kept per process ... */
#define AN_CSIG_NONE UINT16_MAX   /* ... the calls beyond them, and invalid values: not compared */

/* Link counters sample kept for the during/outside-collective split. */
struct an_sample {
	uint64_t s, e;
	uint64_t nvl, pcie; /* tx+rx, rd+wr */
	int gap;            /* NVLP_LINKSAMPLE_F_GAP: samples were lost before this one */
};

/* Per GPU of one process. */
struct an_dev {
	int device;
	struct an_ivals compute, nccl; /* kernel intervals (local clock until aligned) */
	uint64_t nvl_tx, nvl_rx, pcie_rd, pcie_wr; /* link counter totals */
	uint64_t nvl_coll, pcie_coll;              /* part of (tx+rx), (rd+wr) during collectives */
	unsigned link_sources; /* 1 << NVLP_LINK_* of the samples (bit 0: a source not known) */
	struct an_sample *samples;
	size_t nsamples, capsamples;
	/* NCCL kernels and copies (nccl) merged with the GPU times NCCL's kernel channels gave the
	 * calls on this device (outside CUPTI's kernel windows they are all there is): made by
	 * analyze_dev only for a rank with such calls (an_rank.kch_timed), else n = 0 and nccl
	 * stands for both. Communication time and link bytes during collectives use it; exposure
	 * uses nccl alone (compute is known only where CUPTI traced kernels). */
	struct an_ivals comm;
	/* results */
	uint64_t union_nccl_ns, exposed_ns, union_comm_ns;
	uint64_t win_nccl_ns, win_exposed_ns, win_comm_ns; /* the same inside the step window */
};

/* Cross-device copies between one (src, dst) device pair of one process. */
struct an_pair {
	int src, dst;
	uint64_t api_copies, api_bytes;             /* COPY records (host side) */
	uint64_t staged_copies, staged_bytes;       /* COPY with peer_enabled = 0 */
	uint64_t staged_ns; /* host time in those calls: the driver stages through host memory
	                     * while the call runs, so even an async one returns about when done */
	uint64_t p2p_copies, p2p_bytes, p2p_gpu_ns; /* GPUCOPY PTOP */
	uint64_t sync_bytes, sync_ns; /* synchronous COPY calls: host time is copy time */
	/* the first staged COPYs' call_ids (their Python locations: the first may have none, taken
	 * before the shim could read one) and the first one's STACK; 0 none */
	uint64_t staged_call[4], staged_stack;
};

/* A managed allocation and what unified memory did to it. */
struct an_alloc {
	uint64_t ptr, bytes, stack, t;
	uint64_t htod, dtoh, dtod, gpu_faults, cpu_faults, thrash_events;
	uint64_t migrations, flips, migrate_ns;
	int last_dst; /* -1 CPU, >= 0 GPU, -2 none yet */
	int advised, prefetched, device;
};

struct an_note {
	unsigned code;
	int device;
	uint64_t value;
	uint64_t t; /* local clock */
	char msg[160];
};

/* NVLink topology: unique records per host. */
/* An NVLINK record: dev1 -1 for links beyond the process's GPUs (NVLPROF_CUPTI=lazy: to GPUs it
 * cannot see, or to an NVSwitch no visible GPU shares). nvswitch: through an NVSwitch; such
 * records, one per pair of GPUs, name the same ports of a GPU each time. */
struct an_link {
	int dev0, dev1, type0, type1;
	uint64_t links, bw_Bps; /* per link, bytes/s */
	int nvswitch;
};

struct an_module {
	uint64_t base, start, end;
	char *path;
	uint8_t build_id[64]; /* from the BUILDID record of this base */
	unsigned build_id_len; /* 0: none recorded (the file at path is never opened) */
};
/* A function symbol recorded with the trace (SYMBOL): address relative to the module's bias. */
struct an_sym {
	uint64_t base, off, size;
	char *name;
};
struct an_stack {
	uint64_t id;
	uint64_t *pc;
	unsigned n;
	size_t ord; /* file order, for the first of several stacks with one id */
};

/* What NCCL chose for collectives (NCCLPROF records from its profiler plugin): one entry per
 * distinct (communicator, function, algorithm, protocol, channels) of one process. */
struct an_choice {
	uint64_t nccl_comm, comm; /* NCCL's commHash; the shim's hash (0 = not known) */
	uint8_t fn;               /* enum nvlp_nccl_fn */
	char algo[16], proto[16];
	int channels;
	uint64_t calls;
};
/* The same over the job: per (job comm, fn, algo, proto), channel range. */
struct an_jchoice {
	int comm; /* index into the job's comm table, -1 = communicator not identified */
	uint8_t fn;
	char algo[16], proto[16];
	int ch_min, ch_max;
	uint64_t calls;
};

/*! The channel counts NCCL used for a choice, "24" or "4-24" (into buf). */
const char *an_choice_channels(const struct an_jchoice *x, char *buf, size_t len);

/* Per-communicator, per-process view. */
struct an_rcomm {
	uint64_t hash;
	int rank, nranks, device;
	uint32_t job_comm;
};

/* One trace file (one process). */
struct an_rank {
	char *path;
	int ok;        /* 0: unreadable, skipped (err says why) */
	char err[320]; /* open error, or truncation warning when ok */
	char bad[320]; /* the first record skipped as invalid ("" if none) */
	uint64_t nbad; /* records skipped as invalid */
	int complete, truncated;
	/* how the process ended: END's reason (enum nvlp_end_reason; -1: no END record), and from
	 * EXITINFO the signal (0: none) and exit status */
	int end_reason, end_signal, end_status, have_exitinfo;
	/* the step it was in at its last record, 1-based (0: no steps recognised); steps_done:
	 * the steps it completed */
	uint64_t end_step, steps_done;
	char *header; /* key=value lines */
	char host[128];
	uint32_t host_ix; /* the job's number of host (an_hosts_number: equal hosts, equal numbers) */
	int pid, rank;
	uint64_t t_mono0, t_real0;
	int64_t offset;           /* job time = local + offset */
	int64_t refine;           /* part of offset found from collective completions */
	uint64_t t_first, t_last; /* local clock, any record with a time */
	/* local clock: the last instant the process is known alive, from its records of every kind
	 * (heartbeat and other clock pairs, kernel-channel host times, notes, drops, PYREFs; the
	 * header's start at least): where a killed rank's wait ends. t_last stays what the wall
	 * time and the job span always were. */
	uint64_t t_alive;
	/* how it ended, beyond END and EXITINFO: the FATAL record (signal 0: none), and the cgroup
	 * memory.events oom_kill count at start (header) and at its last NOTE OOM_KILL (-1: none) */
	struct an_fatal {
		int signal, main;
		uint64_t tid, t;
		uint64_t stack;  /* STACK id of that thread when the signal came (0: none) */
		char thread[20]; /* the thread's name, printable */
	} fatal;
	int64_t oom_start, oom_last;
	/* what recording cost the process: its last COST record (have_cost 0: none, a trace
	 * older than COST) */
	struct nvlp_rec_cost cost;
	int have_cost;
	/* calls not returned when the process ended (INFLIGHT records, the latest per thread,
	 * those that returned later removed): where each thread was */
	struct an_inflight {
		uint64_t tid, t, t_enter, comm, bytes;
		uint32_t seq;
		int rank, nranks;
		uint16_t kind, fn; /* NVLP_K_NCCL or NVLP_K_COPY, its fn there */
		int device;
		int64_t call; /* its index in calls (an in-flight collective counts as entered), -1 */
	} *inflight;
	size_t ninflight, capinflight;
	/* NCCL kernel channels that started and never stopped (KCH NOSTOP): the collective was
	 * still running on the GPU; the last one's function and NCCL's own seq */
	uint64_t kch_nostop;
	uint32_t kch_nostop_seq;
	uint8_t kch_nostop_fn;
	uint64_t records, kind_count[NVLP_K_COUNT];
	/* the calls' host_dur summed as they are kept (ingest, renumber_calls): an_rank_comm_ns
	 * needs no pass over millions of calls; valid while host_sum_n == ncalls */
	uint64_t host_sum;
	size_t host_sum_n;
	unsigned frames_skipped; /* corrupt frames the reader skipped (resynchronised after) */
	uint64_t dropped;
	uint64_t gpu_unmatched_kernels, gpu_resync;
	uint64_t gpu_unfinished; /* NCCL calls whose kernel never finished (hung or killed job) */
	uint64_t kch_timed; /* calls given their GPU time by NCCL's kernel channels (kernelch.c) */

	struct an_call *calls;
	size_t ncalls, capcalls;
	/* per call (same index as calls, moved with them; NULL: none kept), its struct an_csig */
	uint16_t *csig;
	size_t capcsig;
	struct an_csig *csigs;
	size_t ncsigs, capcsigs;
	struct an_rcomm *comms;
	size_t ncomms;

	struct an_dev *devs;
	size_t ndevs;
	struct an_pair *pairs;
	size_t npairs;
	struct an_alloc *allocs;
	size_t nallocs;
	uint64_t um_transfers; /* UM transfer records (HtoD, DtoH, DtoD), its allocation known or not */
	struct an_note *notes;
	size_t nnotes;
	struct an_link *links;
	size_t nlinks;
	struct an_module *modules;
	size_t nmodules;
	struct an_stack *stacks; /* sorted by id once the file is read */
	size_t nstacks;
	struct an_sym *syms; /* sorted by (base, off) once the file is read */
	size_t nsyms;
	uint64_t peer_enable_fail;
	struct an_choice *choices;
	size_t nchoices;
	struct an_cname {
		uint64_t hash;
		char name[64];
	} *cnames; /* COMMNAME records: names the job gave its communicators */
	size_t ncnames, capcnames;
	struct an_failed {
		uint64_t hash; /* the shim's communicator hash */
		uint32_t seq;
		int rc;        /* ncclResult_t */
		uint64_t host_ns;
	} *failed; /* collectives that returned an error (kept in calls at their seq) */
	size_t nfailed, capfailed;
	struct an_kch_file *kch_file;     /* KCH and what reads them, as decoded (kernelch.c) */
	struct an_graph_file *graph_file; /* graph records, as decoded (graphs.c) */
	uint64_t *marks; /* step marks (local clock, file order): an_steps_mark */
	size_t nmarks, capmarks;
	char mark_name[48]; /* what made them ("ProfilerStep", "cudaProfilerStart") */
	/* which marks they are: 0 none yet, 1 NVTX ProfilerStep#N ranges (emit_nvtx), 2 outermost
	 * torch.profiler user ranges through CUPTI (MARK USER_RANGE, kept in umarks until the steps
	 * are found: those of the thread that made the earliest become the marks); NVTX's named ones
	 * win when a trace has both */
	uint8_t mark_src;
	struct an_umark {
		uint64_t t, tid;
	} *umarks;
	size_t numarks, capumarks;
	struct an_pystack {
		uint64_t id;
		char *text; /* "file:line:function\n" per frame, innermost first */
	} *pystacks; /* PYSTACK records, file order */
	size_t npystacks, cappystacks;
	struct an_pyref {
		uint64_t tid, t, call_id, pystack; /* t: local clock, as the record it names */
		unsigned kind;
	} *pyrefs; /* PYREF records, file order */
	size_t npyrefs, cappyrefs;
	/* NCCLCOMM records (NCCL's node count per communicator), the first AN_MAX_NCCLCOMMS of the
	 * process (inline: a process sets up a few; the count per machine is the same in each
	 * communicator its ranks share, so the first ones tell); nncclcomms_more: those beyond */
	struct an_ncclcomm {
		uint64_t nccl_comm; /* NCCL's commHash */
		int nnodes, nranks, rank;
	} ncclcomms[AN_MAX_NCCLCOMMS];
	unsigned nncclcomms, nncclcomms_more;
};

/*! The managed allocation of r holding addr (r->allocs is kept sorted by ptr: the last one starting
 * at or below addr may hold it). @return its index, or -1 none */
static inline long an_alloc_index(const struct an_rank *r, uint64_t addr)
{
	size_t lo = 0, hi = r->nallocs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->allocs[mid].ptr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr - r->allocs[lo - 1].ptr >= r->allocs[lo - 1].bytes)
		return -1;
	return (long)lo - 1;
}

/* Job-wide communicator. */
struct an_comm {
	uint64_t hash;
	char name[64];    /* the name the job gave it (COMMNAME), "" if none */
	int nranks;
	int nmembers;     /* ranks (processes) that have a trace with calls on it */
	size_t ncalls;    /* calls on it, all processes (align counts them as it renumbers) */
	int single_host;  /* all members on one host */
	double peak_Bps;  /* NVLink peak per direction for this comm's GPUs (0 = unknown) */
	/* Transfer time of collectives matched across all ranks, per sequence number present
	 * (xfer_seq, sorted): the shortest GPU time among the ranks (the last to arrive barely
	 * waits), 0 = not matched. One entry per collective, not per call. */
	uint32_t *xfer, *xfer_seq;
	uint32_t nxfer;
	/* xfer is indexed by seq - xfer_seq[0] (nxfer entries; xfer_seq holds that one seq): when
	 * the seq numbers present span at most about twice their count, a gap holding 0 as a
	 * collective not matched does (a look-up per call, four passes over the calls) */
	int xfer_dense;
	/* arrival skew of its collectives matched across all members, its first excluded (the
	 * report's headline per communicator kind: never averaged across kinds) */
	double skew_sum_ns, skew_max_ns;
	uint64_t skew_n;
};

/* Per (comm, fn) aggregate over all ranks. */
struct an_agg {
	int32_t comm;
	uint8_t fn;
	uint64_t calls, bytes, gpu_ns, host_ns, calls_gpu;
	uint64_t bytes_gpu; /* bytes of calls that have GPU time */
	uint64_t xfer_ns;   /* transfer time of those calls (an_call_xfer_ns): bandwidths use it */
};

/* A collective some ranks entered and others never did. */
struct an_hang {
	int32_t comm;
	uint32_t seq;
	uint8_t fn;
	int *missing, nmissing; /* rank numbers, ascending: every member that never entered ... */
	int *present, npresent; /* ... and every one that entered (an_hang_member looks one up) */
	double wait_ms; /* longest wait among present ranks */
	int failed_rank, failed_rc; /* a present rank whose call returned an error (-1 none) */
	uint32_t failed_seq; /* that call's seq: this one, or the rank's next call (NCCL reports the
	                      * dead peer asynchronously, then fails the call after) */
};

/* The first collective of a communicator whose ranks passed it different functions or arguments
 * at one sequence number (mismatch.c): each distinct (function, struct an_csig) is a side. */
#define AN_MISMATCH_SIDES 4
struct an_mismatch {
	int32_t comm;
	uint32_t seq;
	int nsides, more; /* more: ranks of further sides, not kept */
	struct an_mside {
		uint8_t fn;
		int sig_known; /* 0: sig not kept for its calls (AN_CSIG_NONE) */
		struct an_csig sig;
		uint64_t bytes;
		int ranks[16], nranks; /* as printed (an_rank.rank, else the file index) */
		int file;              /* its first rank's file, and that rank's call */
		uint32_t k;
	} side[AN_MISMATCH_SIDES];
};

/* Per process cross-rank results (index = file index). */
struct an_rank_x {
	uint64_t colls, last_count; /* collectives matched; times this rank arrived last */
	double lead_ns_sum;         /* sum of (its arrival - next latest arrival) when last */
	double median_lead_ns; /* median of those leads: startup outliers do not make a straggler */
	float *leads;          /* the leads, while computing the median */
	size_t nleads, capleads;
	double caused_wait_ns; /* waiting it caused others when last */
	double wait_ns;        /* waiting it did for others, each comm's first collective excluded */
	double first_wait_ns;  /* waiting it did in those first collectives (startup) */
};

struct an_job {
	struct an_rank *ranks; /* sorted by rank, then host/pid */
	size_t nranks;
	size_t nok;
	struct an_comm *comms;
	size_t ncomms;
	struct an_agg *aggs;
	size_t naggs;
	/* aggs of a job whose calls have no GPU time, summed by ctab.c's pass over the calls
	 * (aggregate() then needs no pass of its own); agg_gpu: a call has some */
	struct an_agg *agg_host;
	size_t agg_gpu;
	/* aggregate() saw every call and none has GPU time: the passes over the calls that look
	 * only at GPU-timed ones (findings' big calls) have nothing to find */
	int calls_gpu_none;
	struct an_hang *hangs;
	size_t nhangs;
	struct an_mismatch *mismatches; /* at most one per communicator, its first */
	size_t nmismatches;
	struct an_rank_x *rx;
	struct an_jchoice *choices; /* NCCL's choices, sorted by comm, fn, then most calls first */
	size_t nchoices;
	uint64_t t0, t1; /* job time span */
	uint64_t t_alive1; /* the latest instant a rank was alive (job time, >= t1 or 0) */
	int have_gpu;    /* any KERNEL record */
	int have_gpu_any; /* any GPU activity record: KERNEL, GPUCOPY or UM */
	int have_kch_gpu; /* calls timed by NCCL's kernel channels (kernelch.c) */
	int have_links;  /* any LINKSAMPLE */
	int have_topo;   /* any NVLINK record */
	/* NVLPROF_CUPTI=startup: processes whose CUPTI detached after start-up (NOTE CUPTI_DETACHED),
	 * the latest of their detach times (ms after CUPTI attached), and those attached again for
	 * managed memory (NOTE CUPTI_REATTACHED) */
	int cupti_detached, cupti_reattached;
	int cupti_kept_unsafe; /* processes that did not detach: cuptiFinalize unsafe there (13.0) */
	/* NVLPROF_CUPTI=lazy: processes that left CUPTI out at start, those of them that allocated
	 * managed memory (its migrations unmeasured), and those that attached CUPTI from the start
	 * (needed there) */
	int cupti_lazy, cupti_lazy_um, cupti_lazy_needed;
	/* lazy's topology: why the first process that saw 2 GPUs or more (or 1, in a communicator of
	 * several ranks) and whose NVML gave no link state (or no NVML) recorded no NVLink pair (""
	 * where every link answered: no pair is then no NVLink) */
	char lazy_topo_why[128];
	uint64_t cupti_detach_ms;
	double max_skew_ns, mean_skew_ns; /* over matched collectives, each comm's first excluded */
	/* the first collective of the job's communicators (startup: ranks start apart): the
	 * largest arrival skew among them, and which one it was */
	double first_skew_ns;
	uint32_t first_seq;
	uint8_t first_fn;
	int first_comm; /* -1: none */
	uint64_t matched_colls;
	double step_ns;  /* step time: from the job's step marks, else from a proven pattern; 0 */
	/* where the steps come from: "marks", "pattern", or "none"; steps_why says, when none,
	 * which test a candidate pattern failed (the report prints it) */
	const char *step_source;
	char steps_why[160];
	int step_calls; /* collectives per step of the pattern (0 with marks) */
	int step_comm;  /* the communicator whose pattern gave the steps (-1: marks or none) */
	uint64_t steps;
	int multi_host;
	uint64_t win0,
	    win1; /* step window (job time): steady-state steps, setup excluded; 0 = none */
	double max_refine_ns; /* largest clock correction found from collectives */
	size_t nhosts;        /* distinct hosts (an_hosts_number) */
	struct an_index rank_ix; /* rank number -> first process (an_file_of_rank) */
	/* the processes host by host: by_host[host_at[h] .. host_at[h + 1]) are host h's, in
	 * index order */
	size_t *by_host, *host_at;
	/* hosts other than the reference one: corrected from GPU completions, from blocking calls'
	 * exits (no GPU time), or not at all (no collective shared with a corrected host) */
	size_t hosts_by_gpu, hosts_by_exit, hosts_uncorrected;
	size_t nothers; /* processes that are not ranks (no GPU work, no NCCL call: a launcher, a
	                 * DataLoader worker): ranks[nranks .. nranks + nothers), never analysed */
	uint64_t calls_dropped; /* calls of communicators beyond AN_MAX_COMMS in the job */
	uint64_t comms_unmatched; /* communicators whose cross-rank table did not fit in memory */
	struct an_kch *kch;   /* KernelCh results (kernelch.c) */
	struct an_graphs *graphs; /* CUDA graph attribution (graphs.c), NULL without graphs */
	const double *th;     /* thresholds for analysis (NULL: an_threshold_defaults) */
	char several_jobs[320]; /* why the traces look like several jobs ("" one job) */
};

/* ---- load/: what reading the traces gives (ingest.c, order.c) ---- */
/*! Load the traces named by paths (files or directories of *.nvlp), in parallel (nthreads <= 0:
 * nproc). Unreadable files are kept with ok = 0 and err set. @return 0, or -1 with err filled
 * when there is nothing to read at all. */
int an_job_load(struct an_job *job, char **paths, int npaths, int nthreads, char *err,
                size_t errlen);
/*! The loaded processes of job (ranks[0 .. nranks + nothers), in any order) put in report order:
 * by rank, the processes that are not ranks last (nothers), nok counted. an_job_load ends with
 * it; merge calls it on the processes of several partials. */
void an_job_order(struct an_job *job);
/* One rank resolver for info, report and JSON: the RANK the launcher gave the process, else (mp.spawn
 * jobs leave RANK unset) its rank in its largest communicator; that rank also when the header's
 * disagrees with it in a communicator of the header's world size (an environment inherited from
 * the parent: Lightning's re-executed rank 1 starts with the OMPI_COMM_WORLD_RANK=0 that an MPI
 * singleton set in rank 0). */
struct an_rank_guess {
	int header_rank, header_world; /* -1 = none */
	int best_nranks, comm_rank;
};
/*! Start from the header's RANK and WORLD_SIZE values (NULL or not a number: none). */
void an_rank_guess_init(struct an_rank_guess *g, const char *header_rank, const char *header_world);
/*! 1 when an_rank_guess_get's rank is the communicator's against the header's */
int an_rank_guess_overrides(const struct an_rank_guess *g);
/*! An NCCL call of the process as rank of nranks. */
void an_rank_guess_comm(struct an_rank_guess *g, int rank, int nranks);
/*! @return the rank, or -1 when neither source names one */
int an_rank_guess_get(const struct an_rank_guess *g);
/*! 1 if the process did work of a rank: an NCCL call, GPU activity or a CUDA call the shim traces
 * (copies, managed memory, peer access); a launcher has a device and clock records only. A trace
 * cut short (truncated) may have lost its work: it stays a rank. */
int an_rank_is_worker(const uint64_t kind_count[NVLP_K_COUNT], int truncated);

/*! Everything the job holds (job_free.c). Its analysis, the stages in order: pipeline.h. */
void an_job_free(struct an_job *job);

/* ---- load/nccl_meta.c ---- */
/*! NVLink data rate of one link in one direction (bytes/s) by NVLink version, NVIDIA's
 * specification figure; 0 for a version not known. The one source of every NVLink peak. */
double an_nvlink_link_Bps(uint64_t version);
/*! One line saying which peak that is and why (report and evidence peak_basis). */
const char *an_peak_basis(void);
/* ---- model.c: helpers findings and printers read the model with ---- */
/*! NVLink peak (bytes/s per direction) of a device of a process, 0 if unknown. */
double an_dev_peak(const struct an_job *job, const struct an_rank *r, int device);
/*! 1 if devices a and b of process r are NVLink-connected (topology records). */
int an_nvlink_between(const struct an_rank *r, int a, int b);
/*! Header value (NULL if absent) of a process: key as in nvlp_trace.h ("env.NCCL_P2P_DISABLE")
 * (load/order.c). */
const char *an_header_get(const struct an_rank *r, const char *key, char *buf, size_t len);
/* ---- load/symbols.c ---- */
/*! Where files of the recorded modules may be found besides the trace's own SYMBOL records
 * (--symbols DIR, like perf --symfs): DIR + recorded path, DIR/basename and
 * DIR/.build-id/xx/rest.debug, each used only when its build-id equals the recorded one. NULL:
 * files are looked for only at their recorded path, and only when the trace has their build-id. */
void an_symbols_dir(const char *dir);
/*! Symbolize pc of process r: "func+0x12 (libfoo.so+0x1234)" or "libfoo.so+0x1234" or "0x...". */
void an_symbolize(const struct an_rank *r, uint64_t pc, char *out, size_t len);
const struct an_stack *an_find_stack(const struct an_rank *r, uint64_t id);
/*! The innermost n frames of the job's code in stack s, "main+0x11d (app+0x1234) <- ...": frames
 * of the shim, CUPTI, the driver and the CUDA runtime on top are left out (all of them when the
 * stack holds nothing else). */
void an_stack_chain(const struct an_rank *r, const struct an_stack *s, unsigned n, char *out,
                    size_t len);
/*! The stack of a fatal signal from its innermost frame (the shim's, the driver's and the runtime's
 * included: the crash may be theirs), past the frames of abort()/raise() that delivered a signal
 * the thread sent itself; at most n frames, whole ones, " <- ..." when some are left out. */
void an_stack_fatal(const struct an_rank *r, const struct an_stack *s, unsigned n, char *out,
                    size_t len);
/*! A kernel's names as nsys gives them: *full the demangled name ("f(int)"; a name that is not
 * mangled, as it is), *shortn the function's name alone, no scope, template arguments or
 * parameters ("f"). Both malloc'ed, the caller's. @return 0, -1 out of memory (both NULL) */
int an_demangle(const char *name, char **full, char **shortn);
/* ---- model/: the model's figures (model.c, hosts.c) ---- */
/* The row of seq in a communicator's transfer table, -1 if absent. */
static inline long an_xfer_row(const struct an_comm *m, uint32_t seq)
{
	if (!m->nxfer || seq < m->xfer_seq[0])
		return -1;
	if (m->xfer_dense)
		return seq - m->xfer_seq[0] < m->nxfer ? (long)(seq - m->xfer_seq[0]) : -1;
	size_t lo = 0, hi = m->nxfer;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->xfer_seq[mid] < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->nxfer && m->xfer_seq[lo] == seq ? (long)lo : -1;
}

/*! Transfer time of a call, ns, for bandwidth: for a collective matched across ranks the
 * shortest GPU time any rank spent in it (nccl-tests time a collective once all ranks have
 * arrived; the early ranks' kernels include waiting for the late one), else (unmatched,
 * Send/Recv) the call's own GPU time. 0 without GPU time.
 * Inline: called per call by aggregate(), the findings and the report's tables (perf: 4% of an
 * 8-rank report's cycles were this call). */
static inline uint32_t an_call_xfer_ns(const struct an_job *job, const struct an_call *c)
{
	if (!c->gpu_start)
		return 0;
	const struct an_comm *m = &job->comms[c->comm];
	long row = m->xfer ? an_xfer_row(m, c->seq) : -1;
	if (row >= 0 && an_coll_of_fn(c->fn) != AN_C_SENDRECV) {
		uint32_t x = m->xfer[row];
		/* The shortest rank's time is the transfer only when the data could not move
		 * before it arrived. A root that pushes a broadcast into the late rank's buffers
		 * leaves that rank a kernel far too short to be a transfer (seen: 0.5 ms for
		 * 256 MiB, 11x the link). Then the data moved while the others waited: keep the
		 * rank's own time rather than report a bandwidth the link cannot carry. */
		if (!x || x >= c->gpu_dur)
			return c->gpu_dur;
		if (!(m->peak_Bps > 0)) /* no peak to judge by: the bandwidth is not needed */
			return x;
		double bus = (double)c->bytes / ((double)x * 1e-9) * an_busbw_factor(c->fn, m->nranks);
		if (!(bus > m->peak_Bps))
			return x;
	}
	return c->gpu_dur;
}
/*! Wall time of a process in ns. */
uint64_t an_rank_wall(const struct an_rank *r);
/*! @return AN_HANG_MISSING or AN_HANG_PRESENT when rank id is one of h's, else 0 */
enum { AN_HANG_MISSING = 1, AN_HANG_PRESENT };
int an_hang_member(const struct an_hang *h, int id);
/*! @return the first process whose rank number (or, without one, index) is id, or -1 */
int an_file_of_rank(const struct an_job *job, int id);
/*! Communication GPU (or host) time of a process, ns; *host_only set when no GPU time. */
uint64_t an_rank_comm_ns(const struct an_rank *r, int *host_only);
/*! Exposed communication and the time it is a share of: inside the step window when steps were
 * recognised (setup and startup excluded), else over the whole trace. @return 1 if windowed */
int an_rank_exposure(const struct an_job *job, const struct an_rank *r, double *exposed_ns,
                     double *span_ns, double *comm_ns);
/*! Exposed communication attributed to one communicator, ns: each call's GPU time (a group's
 * kernel split by bytes, as in an_call_xfer_ns) not overlapped by compute on its GPU, inside the
 * step window when steps were recognised, summed over processes. *all_ns gets the same over all
 * communicators, so the ratio is the communicator's share of the exposed time. */
double an_comm_exposed_ns(const struct an_job *job, int comm, double *all_ns);

#endif /* NVLP_AN_MODEL_H */

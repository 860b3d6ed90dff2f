/* findings_int.h: what the detectors and the story share (evidence.c): adding a finding and its
 * evidence, rank numbers, Python locations and how a rank ended; each finding's advice
 * (wording.c); the detectors' one signature. Internal to analyzer/. */
#ifndef NVLP_AN_FINDINGS_INT_H
#define NVLP_AN_FINDINGS_INT_H

#include "findings/findings.h"

#define MIB (1024.0 * 1024.0) /* thresholds in MiB, compared with bytes */

/*! Append a finding (comm, rank, device -1), its title from fmt.
 * @return it, or NULL out of memory (the detector then returns -1) */
struct an_finding *an_f_add(struct an_findings *f, enum an_fid fid, int sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/*! Evidence items (ignored past AN_MAX_EV, or with x NULL) */
void an_f_num(struct an_finding *x, const char *key, double v, const char *unit);
void an_f_str(struct an_finding *x, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*! The NVLink peak a finding judged by, GB/s, and which figure that is (an_peak_basis) */
void an_f_peak(struct an_finding *x, double gbps);
void an_f_advise(struct an_finding *x, const char *s);

/* The case that chooses a finding's advice (wording.c); AN_ADV_PLAIN: its usual text */
enum an_adv {
	AN_ADV_PLAIN = 0,
	AN_ADV_ENDED_SIGNAL = 1, /* rank_ended: ended by a signal (mostly the launcher's SIGTERM) */
	AN_ADV_FALLBACK_ENV = 1, /* pcie_fallback: settings in the environment caused it */
	AN_ADV_UMA_ADVISED = 1,  /* uma_thrashing: advice or prefetch was present */
	AN_ADV_ENDED_FATAL = 2,  /* rank_ended: a fatal signal (FATAL record: a crash or abort) */
	AN_ADV_COUNT = 3
};
/*! x's advice: its finding's text (wording.c) for case adv (AN_ADV_*) */
void an_f_advice(struct an_finding *x, int adv);
/*! The text of finding fid's advice for case adv, NULL none */
const char *an_f_advice_text(enum an_fid fid, int adv);
/*! The advice of finding y when root explains it ("See pcie_fallback: ..."), NULL none */
const char *an_f_explained_advice(enum an_fid root, enum an_fid y);
/*! The rank number of file f as printed (its RANK, else the file index) */
int an_f_rank_id(const struct an_job *job, size_t f);
/*! The file of the rank printed as id, or -1 */
int an_f_file_of(const struct an_job *job, int id);
/*! Evidence key: the innermost native frames of STACK stack of r, "main+0x11d <- ..." */
void an_f_native(struct an_finding *x, const char *key, const struct an_rank *r, uint64_t stack);
/*! Evidence key: the stack of the thread a fatal signal hit, when the trace has one (FATAL) */
void an_f_fatal_stack(struct an_finding *x, const char *key, const struct an_rank *r);
/*! Evidence key: "<what> train.py:41 in build_cache <- ..." for a PYSTACK of r (none: nothing) */
void an_f_python(struct an_finding *x, const char *key, const char *what, const struct an_rank *r,
                 uint64_t pystack);
/*! Evidence key: where the Python sampler last saw r's main thread, at its end ("31.2 s in
 * load_next_batch (train.py:23) <- main (train.py:40)"; no sample with Python frames: nothing).
 * @return 1 added */
int an_f_place_at_end(struct an_finding *x, const char *key, const struct an_rank *r);
/*! The PYSTACK of the one record a PYREF names (COPY by call_id, MANAGED by time t), 0 none */
uint64_t an_f_py_of_record(const struct an_rank *r, unsigned kind, uint64_t t, uint64_t call_id);
/*! The PYSTACK in force at r's last NCCL call (the latest NCCL PYREF), 0 none */
uint64_t an_f_py_last_nccl(const struct an_rank *r);
struct an_oom_rise;
/*! How rank r ended when not normally ("ended by signal 6 (Aborted)", into how) and the step it
 * was in (" in step 15 of 40 (14 completed)", into step; *in: that step, 0 none). rises: the job's
 * oom_kill rises, from an_oom_rises once for all the ranks asked about.
 * @return 1 if abnormal, 0 (nothing written) if it ended normally */
int an_f_end_of(const struct an_job *job, const struct an_rank *r, const struct an_oom_rise *rises,
                size_t nrises, char *how, size_t hl, char *step, size_t sl, uint64_t *in);

/* ---- the detectors in their own files, run by an_findings_compute ---- */

/* Large-message GPU bandwidth per (comm, fn): sum of S x busbw factor and of transfer time (a
 * matched collective's shortest GPU time across ranks: see an_call_xfer_ns). */
struct an_big {
	double sbus, salg, ns;
	uint64_t calls;
};

/* What a detector leaves for what runs after it */
struct an_detect_left {
	int fb_comm; /* pcie_fallback: the communicator that fell back, -1 none (explain()) */
};

/* What every detector reads: the job, the thresholds (AN_TH_*), the large-message bandwidth per
 * (comm, fn) (big[comm * NVLP_NCCL_FN_COUNT + fn]), and where it leaves results for others */
struct an_detect_ctx {
	const struct an_job *job;
	const double *th;
	const struct an_big *big;
	struct an_detect_left *left;
};

/* A detector: appends the findings of its one id to out. @return 0, or -1 out of memory */
typedef int an_detect_fn(const struct an_detect_ctx *ctx, struct an_findings *out);

/*! an_detect_<id> for every finding of AN_FINDINGS, in its own file: collective_mismatch
 * (mismatch.c: from job->mismatches, after the hangs: a hang_suspect that follows one on its
 * communicator gains its cause), hang_suspect (det_hang.c), rank_ended (det_ended.c),
 * nccl_split_host (det_split_host.c), pcie_fallback (det_fallback.c: sets left->fb_comm),
 * peer_access_disabled (det_staged.c), uma_thrashing (det_uma.c), straggler (det_straggler.c),
 * exposed_communication (det_exposed.c), low_bus_bandwidth (det_lowbw.c), dropped_records
 * (det_dropped.c), collection_gaps (det_gaps.c). A finding without its detector does not link. */
#define AN_DETECT_DECL(id, what) an_detect_fn an_detect_##id;
AN_FINDINGS(AN_DETECT_DECL)
#undef AN_DETECT_DECL

/*! 1 when hang h is told (det_hang.c): rank_ended leaves its ranks to it */
int an_f_hang_shown(const struct an_job *job, const double *th, const struct an_hang *h);

#endif

/* findings_int.h: what the detectors and the story share (evidence.c): adding a finding and its
 * evidence, rank numbers, Python locations and how a rank ended. Internal to analyzer/. */
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
/*! The rank number of file f as printed (its RANK, else the file index) */
int an_f_rank_id(const struct an_job *job, size_t f);
/*! The file of the rank printed as id, or -1 */
int an_f_file_of(const struct an_job *job, int id);
/*! Evidence key: the innermost native frames of STACK stack of r, "main+0x11d <- ..." */
void an_f_native(struct an_finding *x, const char *key, const struct an_rank *r, uint64_t stack);
/*! Evidence key: "<what> train.py:41 in build_cache <- ..." for a PYSTACK of r (none: nothing) */
void an_f_python(struct an_finding *x, const char *key, const char *what, const struct an_rank *r,
                 uint64_t pystack);
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

/* ---- the detectors in their own files, called by an_findings_compute ---- */
/*! collective_mismatch from job->mismatches (mismatch.c); after the hangs: a hang_suspect that
 * follows one on its communicator gains its cause */
void an_mismatch_findings(const struct an_job *job, struct an_findings *out);

/* Large-message GPU bandwidth per (comm, fn): sum of S x busbw factor and of transfer time (a
 * matched collective's shortest GPU time across ranks: see an_call_xfer_ns). */
struct an_big {
	double sbus, salg, ns;
	uint64_t calls;
};

/* the detectors in their own files: each @return 0, or -1 out of memory */
/*! pcie_fallback (det_fallback.c); *comm: the communicator that fell back, -1 none */
int an_detect_pcie_fallback(const struct an_job *job, const double *th, const struct an_big *big,
                            struct an_findings *out, int *comm);
/*! uma_thrashing (det_uma.c) */
int an_detect_uma_thrashing(const struct an_job *job, const double *th, struct an_findings *out);
/*! straggler (det_straggler.c) */
int an_detect_straggler(const struct an_job *job, const double *th, struct an_findings *out);
/*! exposed_communication (det_exposed.c) */
int an_detect_exposed_communication(const struct an_job *job, const double *th,
                                    struct an_findings *out);
/*! low_bus_bandwidth (det_lowbw.c) */
int an_detect_low_bus_bandwidth(const struct an_job *job, const double *th,
                                const struct an_big *big, struct an_findings *out);
/*! dropped_records (det_dropped.c) */
int an_detect_dropped_records(const struct an_job *job, struct an_findings *out);
/*! nccl_split_host (det_split_host.c) */
int an_detect_nccl_split_host(const struct an_job *job, const double *th, struct an_findings *out);
/*! peer_access_disabled (det_staged.c) */
int an_detect_peer_access_disabled(const struct an_job *job, const double *th,
                                    struct an_findings *out);
/*! hang_suspect (det_hang.c) */
int an_detect_hang_suspect(const struct an_job *job, const double *th, struct an_findings *out);
/*! 1 when hang h is told (det_hang.c): rank_ended leaves its ranks to it */
int an_f_hang_shown(const struct an_job *job, const double *th, const struct an_hang *h);
/*! rank_ended (det_ended.c) */
int an_detect_rank_ended(const struct an_job *job, const double *th, struct an_findings *out);
/*! collection_gaps (det_gaps.c) */
void an_detect_collection_gaps(const struct an_job *job, struct an_findings *out);

#endif

/* findings_int.h: what findings.c shares with the detectors and the story in their own files
 * (mismatch.c, story.c): adding a finding and its evidence, rank numbers, Python locations and how
 * a rank ended. Internal to analyzer/. */
#ifndef NVLP_AN_FINDINGS_INT_H
#define NVLP_AN_FINDINGS_INT_H

#include "findings/findings.h"

/*! Append a finding (comm, rank, device -1). @return it, or NULL out of memory */
struct an_finding *an_f_add(struct an_findings *f, enum an_fid fid, int sev, const char *title);
/*! Evidence items (ignored past AN_MAX_EV, or with x NULL) */
void an_f_num(struct an_finding *x, const char *key, double v, const char *unit);
void an_f_str(struct an_finding *x, const char *key, const char *s);
void an_f_advise(struct an_finding *x, const char *s);
/*! The rank number of file f as printed (its RANK, else the file index) */
int an_f_rank_id(const struct an_job *job, size_t f);
/*! The file of the rank printed as id, or -1 */
int an_f_file_of(const struct an_job *job, int id);
/*! Evidence key: "<what> train.py:41 in build_cache <- ..." for a PYSTACK of r (none: nothing) */
void an_f_python(struct an_finding *x, const char *key, const char *what, const struct an_rank *r,
                 uint64_t pystack);
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

#endif

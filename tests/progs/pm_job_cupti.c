/* pm_job_cupti.c: pm_job with CUPTI in the process (the fake libcuda and libcupti, cuInit at each
 * rank's start), so the post-mortem catalog runs with CUPTI attached at cuInit and, under
 * NVLPROF_CUPTI=startup, detached from the ticker thread's copies before the failure
 * (tests/analyzer/test_postmortem.sh). */
#define PM_JOB_CUPTI 1
#include "pm_job.c"

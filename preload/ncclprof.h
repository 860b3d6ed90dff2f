/* ncclprof.h: nvlprof's own NCCL profiler plugin (ncclprof.c), as the exported tables and the chain (ncclchain.c, ncclvers.c) call it. */
#ifndef NVLP_NCCLPROF_H
#define NVLP_NCCLPROF_H

#include <nccl.h>            /* ncclResult_t */
#include "nccl/profiler.h"   /* NCCL's profiler plugin interface v1..v5 (vendored, NCCL 2.28.9) */

/* nvlprof's own plugin, in NCCL's v5 terms: its contexts and handles are its own. */
ncclResult_t nvlp_np_init(void **context, uint64_t commId, int *mask, const char *commName,
                          int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
ncclResult_t nvlp_np_start(void *context, void **handle, ncclProfilerEventDescr_v5_t *d);
ncclResult_t nvlp_np_stop(void *handle);
ncclResult_t nvlp_np_state(void *handle, ncclProfilerEventState_v5_t state,
                           ncclProfilerEventStateArgs_v5_t *args);
ncclResult_t nvlp_np_finalize(void *context);
/* The end of the trace (the NCCL module's flush): every collective's record not yet written. */
void nvlp_np_flush(void);
/* A fork child: the parent's contexts are not this process's to flush. */
void nvlp_np_atfork_child(void);

/* The table NCCL 2.28+ finds (exported by ncclchain.c); the v4 table (ncclvers.c) calls it. */
extern ncclProfiler_v5_t ncclProfiler_v5;
/* The interface NCCL calls this plugin through (5, or 4 for NCCL 2.27): set before init. */
extern int nvlp_np_iface;

/* Version adapters (ncclvers.c), as NCCL 2.28.9's own (src/plugin/profiler/profiler_v*.cc). */
/* @return 1 when a plugin of interface ver is given events of this type */
int nvlp_np_type_in(int ver, uint64_t type);
void nvlp_np_descr_v4(ncclProfilerEventDescr_v4_t *o, const ncclProfilerEventDescr_v5_t *d);
void nvlp_np_descr_v3(ncclProfilerEventDescr_v3_t *o, const ncclProfilerEventDescr_v5_t *d);
/* @return 1 when a plugin of interface ver is told of this state (then *o holds its arguments) */
int nvlp_np_state_v3(ncclProfilerEventStateArgs_v3_t *o, int state,
                     const ncclProfilerEventStateArgs_v5_t *a);
int nvlp_np_state_v4(int state);

/* At the runtime's start: point NCCL_PROFILER_PLUGIN at this library, keeping the user's value
 * as the plugin to chain (on = NVLPROF_NCCL_PLUGIN; off: NCCL's setting is restored if an
 * earlier process of the job changed it). */
void nvlp_nccl_plugin_env(int on);

#endif

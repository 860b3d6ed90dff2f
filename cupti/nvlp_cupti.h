/* nvlp_cupti.h: what cupti/ offers the hooks (stream ids, pointer facts, managed memory seen); its start, end and fork hooks are registered with the core (nvlp_module.h). */
#ifndef NVLP_CUPTI_H
#define NVLP_CUPTI_H

#include <stdint.h> /* uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

/*! CUPTI's stream id for a cudaStream_t on the current device/context, 0 if unknown. */
uint64_t nvlp_cupti_stream_id(void *stream);
/*! Device of p (-1: host or unknown) and whether it is managed, from the driver (no runtime API
 * call, so torch.profiler sees none). @return 0, or -1 when the driver cannot be asked (use the
 * runtime). */
int nvlp_cupti_pointer_info(const void *p, int *device, int *managed);
/*! Notify that the process is about to allocate managed memory, before the allocation: where CUPTI
 * is not attached (NVLPROF_CUPTI=lazy, or after startup's detach) it attaches now, as CUPTI counts
 * no migration of memory allocated before it attached (tests/gpu/um_attach.c, run 15). */
void nvlp_cupti_managed_coming(void);
/*! Whether nvlp_cupti_managed_coming() would attach CUPTI now, mid-run. Its caller brings the calling
 * CUDA runtime up first: a runtime's first cuInit after CUPTI attached mid-run hangs in the driver
 * (run 16: torch's libcudart coming up inside cudaMallocManaged after CuPy had brought CUDA up). */
int nvlp_cupti_managed_attach_due(void);
/*! Notify that the process allocated managed memory (UM counters in auto mode). */
void nvlp_cupti_managed_seen(void);

#ifdef __cplusplus
}
#endif
#endif /* NVLP_CUPTI_H */

/* hooks_cuda.h: what hooks_cuda.c offers the other hooks (CUDA graph capture of a stream). */
#ifndef NVLP_HOOKS_CUDA_H
#define NVLP_HOOKS_CUDA_H

#include <stdint.h> /* uint64_t */

/*! The record kind/call_id just emitted was issued on stream st: if st is capturing into a CUDA
 * graph, emit a CAPTURED record (costs one relaxed load while no capture is live). */
void nvlp_capture_note(unsigned kind, uint64_t call_id, void *st);

#endif /* NVLP_HOOKS_CUDA_H */

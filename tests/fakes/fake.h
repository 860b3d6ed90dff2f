/* fake.h: knobs shared by the fake cudart / NCCL libraries and the tests that drive them. */
#ifndef NVLP_FAKE_H
#define NVLP_FAKE_H

/* Every fake entry point leaves errno at this value, so a test can prove the shim restores it. */
#define FAKE_ERRNO_SENTINEL 4242

/* Environment knobs (read once, at load):
 *   FAKE_CUDA_RC=<n>     every cudaMemcpy*, managed, free, prefetch, advise and peer-access call
 *                        returns n without doing anything (out-params untouched).
 *   FAKE_CUDA_DEVICES=<n> number of fake devices (default 4).
 *   FAKE_NCCL_RC=<n>     every collective, point-to-point and group call returns n.
 * fake_cuda_set_rc / fake_nccl_set_rc change the forced code at run time (-1 = none). */
void fake_cuda_set_rc(int rc);
void fake_nccl_set_rc(int rc);

/* Fake device memory: each device owns one arena of this size, mapped at its first cudaMalloc. */
#define FAKE_DEV_SIZE (1ull << 30)

#endif

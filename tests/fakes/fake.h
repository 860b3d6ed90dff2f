/* fake.h: knobs shared by the fake cudart / NCCL libraries and the tests that drive them. */
#ifndef NVLP_FAKE_H
#define NVLP_FAKE_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

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
/* FAKE_NCCL_ASYNC: wait until every collective the process entered completed (a stream sync) */
void fake_nccl_sync(void);

/* Fake device memory: each device owns one arena of this size, mapped at its first cudaMalloc. */
#define FAKE_DEV_SIZE (1ull << 30)

/* Scattered kernel-channel stamps (FAKE_NCCL_KCH_JITTER, bench_kch): how far inside its kernel's
 * span channel ch of the kernel started at g0 starts (which = 0) or stops (1), below lim ns, by a
 * hash of the two (so collectives fused in one kernel share their channels' stamps). */
static inline uint64_t fake_kch_inset(uint64_t g0, int ch, int which, uint64_t lim)
{
	uint64_t x = g0 * 0x9e3779b97f4a7c15ull + (uint64_t)(ch * 2 + which + 1) * 0xbf58476d1ce4e5b9ull;
	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 29;
	return lim ? x % lim : 0;
}

/* NCCL's profiler plugin interface v5, as far as the fakes and the KernelCh bench use it (this
 * project's own copy of the layout: event descriptor and plugin table). */
typedef struct {
	uint64_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			uint64_t seqNumber;
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nChannels, nWarps;
			const char *algo, *proto;
			void *parentGroup;
		} coll;
		struct {
			uint8_t channelId;
			uint64_t pTimer;
		} kernelCh;
		char pad[64];
	};
} fake_descr_v5;
typedef struct {
	const char *name;
	int (*init)(void **, uint64_t, int *, const char *, int, int, int, void *);
	int (*startEvent)(void *, void **, fake_descr_v5 *);
	int (*stopEvent)(void *);
	int (*recordEventState)(void *, int, void *);
	int (*finalize)(void *);
} fake_profiler_v5;

#endif

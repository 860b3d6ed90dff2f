/* fake_nccl_int.h: what the fake libnccl.so.2's files (fake_nccl.c, fake_nccl_prof.c) share. */
#ifndef NVLP_FAKE_NCCL_INT_H
#define NVLP_FAKE_NCCL_INT_H

#include <stdint.h> /* uint64_t */
#include <nccl.h>

struct ncclComm {
	uint32_t magic;
	int nranks, rank, device;
	int pending; /* non-blocking init still "in progress" for this many async-error polls */
	void *prof;  /* profiler plugin context */
	uint64_t id;       /* the unique id's first bytes: names the communicator across ranks */
	uint64_t *entered; /* FAKE_NCCL_ASYNC: collectives each rank entered (shared mapping) */
	uint64_t mine;     /* collectives this rank entered */
};

/* The profiler plugin (fake_nccl_prof.c): loaded at the first communicator's init. */
__attribute__((visibility("hidden"))) void fake_prof_comm_init(struct ncclComm *c, const char *name);
__attribute__((visibility("hidden"))) void fake_prof_comm_fini(struct ncclComm *c);
__attribute__((visibility("hidden"))) void fake_prof_coll(struct ncclComm *c, const char *func, size_t n, ncclDataType_t t,
                    uint64_t seq, int depth);
__attribute__((visibility("hidden"))) void fake_prof_group_end(void);

#endif

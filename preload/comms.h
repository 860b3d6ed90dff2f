/* comms.h: the shim's table of NCCL communicators (hash shared by all ranks, rank, size, counters). */
#ifndef NVLP_COMMS_H
#define NVLP_COMMS_H

#include <stdatomic.h> /* lock-free reads and counters */
#include <stdint.h>    /* uint64_t */

#define NVLP_COMM_RANK 1u   /* known bits */
#define NVLP_COMM_NRANKS 2u
#define NVLP_COMM_DEVICE 4u
#define NVLP_COMM_ALL 7u

struct nvlp_comm {
	_Atomic(const void *) key; /* the ncclComm_t; NULL empty, NVLP_COMM_TOMB removed */
	uint64_t hash;             /* the same on every rank of this communicator */
	_Atomic unsigned known;    /* NVLP_COMM_* bits of rank/nranks/device already known */
	_Atomic int rank, nranks, device;
	atomic_uint_fast64_t seq;    /* collectives issued so far */
	atomic_uint_fast64_t splits; /* ncclCommSplit calls with this parent */
	atomic_uint_fast64_t shrinks;
	_Atomic int named; /* a COMMNAME from the job's config was written (the plugin's is not) */
	/* 2 * nranks counters: [peer] sends to peer, [nranks + peer] receives from peer. */
	_Atomic(atomic_uint_fast64_t *) p2p;
};

/*! Hash standing for a communicator only this process knows (created before the shim saw it). */
uint64_t nvlp_comm_ptr_hash(const void *comm);
/*! The entry of comm, or NULL if the shim has not seen it (lock-free). */
struct nvlp_comm *nvlp_comm_find(const void *comm);
/*! The entry of comm, adding a communicator created before the shim saw it (hash of the pointer;
 * rank and size queried). Fills what is still unknown. @return NULL for NULL or a full table. */
struct nvlp_comm *nvlp_comm_get(const void *comm);
/*! Record a new communicator (rank, nranks: -1 when not known yet; queried later).
 * Replaces a stale entry for the same pointer. @return the entry, NULL if the table is full. */
struct nvlp_comm *nvlp_comm_add(const void *comm, uint64_t hash, int rank, int nranks);
/*! Forget comm (before ncclCommDestroy/Abort frees it, so the address can be reused). */
void nvlp_comm_remove(const void *comm);
/*! Ask the real ncclCommUserRank/Count/CuDevice for what is still unknown (non-blocking init
 * returns before they work). Cheap when everything is known. */
void nvlp_comm_refresh(struct nvlp_comm *c);
/*! Next sequence number of a point-to-point operation with peer (send: 0, recv: 1); 0 if the
 * communicator's size is unknown or peer is out of range. */
uint64_t nvlp_comm_p2p_seq(struct nvlp_comm *c, int peer, int recv);
/*! The same; advance 0 only reads the number the next operation would take. */
uint64_t nvlp_comm_p2p_seq_ex(struct nvlp_comm *c, int peer, int recv, int advance);

/*! Write COMMNAME {hash, name} (name copied, bounded; control characters replaced); marks c
 * named when given. Not on a hot path (interns the string). */
void nvlp_comm_name_emit(struct nvlp_comm *c, uint64_t hash, const char *name);

#endif /* NVLP_COMMS_H */

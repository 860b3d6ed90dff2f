/* rt_tls.c: the one per-thread state struct of the shim, renewed on a thread's first use and after a fork. */
#include <sys/syscall.h> /* SYS_gettid */
#include <unistd.h>      /* syscall */

#include "nvlp_rt.h"

__thread struct nvlp_tls nvlp_tls_state __attribute__((tls_model("initial-exec")));
/* Bumped in a fork child: every thread's ring (and cached tid) from before is invalid. */
volatile unsigned nvlp_tls_epoch = 1;

struct nvlp_tls *nvlp_tls_renew(void)
{
	struct nvlp_tls *t = &nvlp_tls_state;
	if (t->epoch != nvlp_tls_epoch) {
		t->tid = (uint64_t)syscall(SYS_gettid);
		t->ring = NULL;
		t->live = NULL;
		t->py_sig = 0; /* a fork child's trace has written no Python chain yet */
		t->py_stack = 0;
		t->py_slot = NULL; /* the sampler's slots of a fork child start empty */
		t->epoch = nvlp_tls_epoch;
	}
	return t;
}

uint64_t nvlp_call_ids = 1; /* atomic (see nvlp_next_call_id) */
uint64_t nvlp_first_coll_ns; /* atomic; set once by the first collective (hooks_nccl.c) */

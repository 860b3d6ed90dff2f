/* rt_fork.c: the recording state across fork(): every lock taken in order before, everything the parent owned reset in the child. */
#include "nvlp_rt.h"
#include "rt_internal.h"
#include "rt_ring.h"
#include "rt_symbols.h"

void nvlp_rt_fork_prepare(void)
{
	/* No lock may be held mid-operation at the moment of fork: the child has only this
	 * thread. */
	nvlp_str_lock();
	nvlp_wr_lock();
}

void nvlp_rt_fork_parent(void)
{
	nvlp_wr_unlock();
	nvlp_str_unlock();
}

int nvlp_rt_fork_child(void)
{
	nvlp_wr_fork_child_locked();
	/* Not recording until lifecycle.c has reset CUPTI too. */
	nvlp_rt_set_active(0);
	nvlp_syms_reset(); /* the parent's modules and frames, which its trace has */
	nvlp_ring_reset_all();
	nvlp_clock_atfork_child();
	nvlp_cost_atfork_child();
	nvlp_tls_epoch = nvlp_tls_epoch + 1;
	int may = nvlp_wr_idle() && !nvlp_cfg()->disable;
	nvlp_wr_unlock();
	nvlp_str_unlock();
	return may;
}

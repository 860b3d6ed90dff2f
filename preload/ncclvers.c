/* ncclvers.c: NCCL profiler interfaces older than v5: events handed down to a chained v4 or v3 plugin as NCCL 2.28.9 does (the v4 table NCCL 2.27 finds is in ncclchain.c). */
/*
 * NCCL looks for the newest table it knows first (2.28: ncclProfiler_v5, then _v4 .. _v1; 2.27:
 * _v4 first). ncclProfiler_v4 here turns NCCL 2.27's events into v5 ones and calls the v5 table,
 * so nvlprof and a chained plugin are served alike by either NCCL.
 *
 * A chained plugin that offers only v4 or v3 gets what NCCL 2.28.9's adapters
 * (src/plugin/profiler/profiler_v4.cc, profiler_v3.cc) give it alone: no API or kernel-launch
 * events, a collective's parent is its group (coll.parentGroup), v3 has no GPU timestamps, and
 * only the states each version knows.
 */
#include <stddef.h> /* offsetof */
#include <string.h> /* memcpy, memset */

#include "ncclprof.h"
#include "nvlp_rt.h" /* NVLP_EXPORT */

/* v4's descriptor is v5's without the API members and parentGroup: same offsets (the type
 * word is 8 bytes in both once aligned), so its union can be copied whole. */
typedef ncclProfilerEventDescr_v4_t d4;
typedef ncclProfilerEventDescr_v5_t d5;
_Static_assert(offsetof(d4, parentObj) == offsetof(d5, parentObj), "v4 layout");
_Static_assert(offsetof(d4, coll.proto) == offsetof(d5, coll.proto), "v4 layout");
_Static_assert(offsetof(d4, p2p.nChannels) == offsetof(d5, p2p.nChannels), "v4 layout");
_Static_assert(offsetof(d4, proxyOp.isSend) == offsetof(d5, proxyOp.isSend), "v4 layout");
_Static_assert(offsetof(d4, kernelCh.pTimer) == offsetof(d5, kernelCh.pTimer), "v4 layout");
_Static_assert(offsetof(d4, netPlugin.data) == offsetof(d5, netPlugin.data), "v4 layout");
_Static_assert(sizeof(d4) <= sizeof(d5), "v4 layout");
_Static_assert(sizeof(ncclProfilerEventStateArgs_v4_t) == sizeof(ncclProfilerEventStateArgs_v5_t),
               "v4 state layout");

enum { OLD_TYPES = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                   ncclProfileProxyStep | ncclProfileProxyCtrl | ncclProfileKernelCh |
                   ncclProfileNetPlugin };

int nvlp_np_type_in(int ver, uint64_t type)
{
	return ver >= 5 || (type & OLD_TYPES) == type;
}

void nvlp_np_descr_v4(d4 *o, const d5 *d)
{
	memset(o, 0, sizeof *o);
	memcpy((char *)o + offsetof(d4, parentObj), (const char *)d + offsetof(d5, parentObj),
	       sizeof *o - offsetof(d4, parentObj));
	o->type = (uint8_t)d->type;
	if (d->type == ncclProfileColl) /* v5 changed the hierarchy: the group was the parent */
		o->parentObj = d->coll.parentGroup;
	else if (d->type == ncclProfileP2p)
		o->parentObj = d->p2p.parentGroup;
}

static void coll_v3(ncclProfilerEventDescr_v3_t *o, const d5 *d)
{
	o->parentObj = d->coll.parentGroup;
	o->coll.seqNumber = d->coll.seqNumber;
	o->coll.func = d->coll.func;
	o->coll.sendBuff = d->coll.sendBuff;
	o->coll.recvBuff = d->coll.recvBuff;
	o->coll.count = d->coll.count;
	o->coll.root = d->coll.root;
	o->coll.datatype = d->coll.datatype;
	o->coll.nMaxChannels = d->coll.nChannels;
	o->coll.nWarps = d->coll.nWarps;
	o->coll.algo = d->coll.algo;
	o->coll.proto = d->coll.proto;
}

void nvlp_np_descr_v3(ncclProfilerEventDescr_v3_t *o, const d5 *d)
{
	memset(o, 0, sizeof *o); /* v3's name and commHash: removed in v4, NULL and 0 */
	o->type = (uint8_t)d->type;
	o->parentObj = d->parentObj;
	o->rank = d->rank;
	switch (d->type) {
	case ncclProfileColl: coll_v3(o, d); break;
	case ncclProfileP2p:
		o->parentObj = d->p2p.parentGroup;
		o->p2p.func = d->p2p.func;
		o->p2p.buff = d->p2p.buff;
		o->p2p.count = d->p2p.count;
		o->p2p.datatype = d->p2p.datatype;
		o->p2p.peer = d->p2p.peer;
		break;
	case ncclProfileProxyOp:
		o->proxyOp.pid = d->proxyOp.pid;
		o->proxyOp.channelId = d->proxyOp.channelId;
		o->proxyOp.peer = d->proxyOp.peer;
		o->proxyOp.nSteps = d->proxyOp.nSteps;
		o->proxyOp.chunkSize = d->proxyOp.chunkSize;
		o->proxyOp.isSend = d->proxyOp.isSend;
		break;
	case ncclProfileProxyStep: o->proxyStep.step = d->proxyStep.step; break;
	case ncclProfileKernelCh: o->kernelCh.channelId = d->kernelCh.channelId; break;
	case ncclProfileNetPlugin:
		o->netPlugin.id = d->netPlugin.id;
		o->netPlugin.data = d->netPlugin.data;
		break;
	default: break;
	}
}

int nvlp_np_state_v4(int state)
{
	switch (state) {
	case ncclProfilerProxyOpInProgress_v4:
	case ncclProfilerProxyStepSendGPUWait:
	case ncclProfilerProxyStepSendPeerWait_v4:
	case ncclProfilerProxyStepSendWait:
	case ncclProfilerProxyStepRecvWait:
	case ncclProfilerProxyStepRecvFlushWait:
	case ncclProfilerProxyStepRecvGPUWait:
	case ncclProfilerNetPluginUpdate:
	case ncclProfilerKernelChStop:
	case ncclProfilerProxyCtrlIdle:
	case ncclProfilerProxyCtrlActive:
	case ncclProfilerProxyCtrlSleep:
	case ncclProfilerProxyCtrlWakeup:
	case ncclProfilerProxyCtrlAppend:
	case ncclProfilerProxyCtrlAppendEnd: return 1;
	default: return 0;
	}
}

int nvlp_np_state_v3(ncclProfilerEventStateArgs_v3_t *o, int state,
                     const ncclProfilerEventStateArgs_v5_t *a)
{
	memset(o, 0, sizeof *o);
	switch (state) {
	case ncclProfilerProxyCtrlIdle:
	case ncclProfilerProxyCtrlActive:
	case ncclProfilerProxyCtrlSleep:
	case ncclProfilerProxyCtrlWakeup:
	case ncclProfilerProxyCtrlAppend:
	case ncclProfilerProxyCtrlAppendEnd:
		o->proxyCtrl.appendedProxyOps = a ? a->proxyCtrl.appendedProxyOps : 0;
		return 1;
	case ncclProfilerProxyStepSendGPUWait:
	case ncclProfilerProxyStepSendWait:
	case ncclProfilerProxyStepRecvWait:
	case ncclProfilerProxyStepRecvFlushWait:
	case ncclProfilerProxyStepRecvGPUWait: return 1;
	default: return 0;
	}
}

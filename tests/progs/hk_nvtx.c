/* hk_nvtx.c: a job that marks its steps with NVTX (NVIDIA's header-only v3 library, which loads NVTX_INJECTION64_PATH) and cudaProfilerStart/Stop, around NCCL calls on the fake NCCL. */
#include <stdio.h>  /* printf */
#include <string.h> /* strcmp */

#include <cuda_profiler_api.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>

/* nvtx STEPS: steps 0..STEPS-1, each an NVTX range "step" holding 2 allreduces (count = 100*step +
 * 1, +2), nested in "train"; before and after, 3 allreduces outside any range (count 7). Step 2 is
 * also a domain range with a registered string, step 3 a start/end range "step" on its own.
 * profiler: the same, with cudaProfilerStart before step 1 and cudaProfilerStop after step 2. */
int main(int argc, char **argv)
{
	int prof = argc >= 2 && !strcmp(argv[1], "profiler");
	int steps = 5;
	ncclUniqueId id;
	ncclComm_t comm;
	if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
		return 1;
	for (int i = 0; i < 3; i++)
		ncclAllReduce(NULL, NULL, 7, ncclFloat32, ncclSum, comm, NULL);
	nvtxDomainHandle_t dom = nvtxDomainCreateA("nvlp_test");
	nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "step");
	nvtxRangePushA("train");
	for (int s = 0; s < steps; s++) {
		if (prof && s == 1)
			cudaProfilerStart();
		nvtxRangeId_t rid = 0;
		if (s == 2) {
			nvtxEventAttributes_t a = {0};
			a.version = NVTX_VERSION;
			a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
			a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
			a.message.registered = reg;
			nvtxDomainRangePushEx(dom, &a);
		} else if (s == 3) {
			rid = nvtxRangeStartA("step");
		} else {
			nvtxRangePushA("step");
		}
		nvtxMarkA("mid");
		ncclAllReduce(NULL, NULL, 100 * (size_t)s + 1, ncclFloat32, ncclSum, comm, NULL);
		ncclAllReduce(NULL, NULL, 100 * (size_t)s + 2, ncclFloat32, ncclSum, comm, NULL);
		if (s == 2)
			nvtxDomainRangePop(dom);
		else if (s == 3)
			nvtxRangeEnd(rid);
		else
			nvtxRangePop();
		if (prof && s == 2)
			cudaProfilerStop();
	}
	nvtxRangePop();
	for (int i = 0; i < 3; i++)
		ncclAllReduce(NULL, NULL, 7, ncclFloat32, ncclSum, comm, NULL);
	ncclCommDestroy(comm);
	printf("done\n");
	return 0;
}

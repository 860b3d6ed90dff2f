/* wording.c: what each finding advises, by finding id, apart from the detectors that compute it:
 * a detector passes the case that holds (AN_ADV_*), explain() the root cause and the finding it
 * explains. */
#include "findings/findings_int.h"

/* Each finding's advice: [AN_ADV_PLAIN] always, a second text where a detector's case chooses */
static const char *const advice[AN_F_COUNT][AN_ADV_COUNT] = {
    [AN_F_collective_mismatch] =
        {"Every rank must pass each collective the same function, count, datatype, "
         "reduction op and root, in the same order: a rank-dependent branch or tensor "
         "shape (a metric over a different number of elements, a conditional all_reduce) "
         "makes them disagree, and NCCL then hangs or returns wrong data. Compare the "
         "Python lines of the sides."},
    [AN_F_hang_suspect] =
        {"The missing ranks stopped (crash, kill, exception or a diverging code path) "
         "before this collective; check their logs. Set TORCH_NCCL_ASYNC_ERROR_HANDLING / "
         "a process-group timeout so a hang fails fast."},
    [AN_F_rank_ended] =
        {
            [AN_ADV_PLAIN] =
                "Look at this rank's own log (stderr; dmesg for the OOM killer) for why "
                "it stopped; the other ranks' waits follow from it.",
            [AN_ADV_ENDED_SIGNAL] =
                "A SIGTERM usually comes from the launcher (torchrun and mp.spawn stop "
                "the other ranks when one fails) or a scheduler's time limit: look for "
                "the rank that failed first.",
            [AN_ADV_ENDED_FATAL] =
                "The process crashed: the stack is the thread's when the signal came. "
                "SIGABRT in pt_nccl_watchdg is torch's NCCL watchdog ending a collective "
                "that timed out (look for the hang); abort inside free or malloc means the "
                "heap was corrupted earlier (rerun under MALLOC_CHECK_=3 or a memory "
                "checker). Frames without names: nvlprof report --symbols DIR.",
        },
    [AN_F_nccl_split_host] =
        {"Give the ranks of one machine the same NCCL_HOSTID (or unset it), or run them in "
         "one container or with the host's UTS and IPC namespaces (docker --ipc=host "
         "--uts=host, Kubernetes hostIPC); then check that NCCL_DEBUG=INFO shows P2P or "
         "SHM channels, not NET."},
    [AN_F_pcie_fallback] =
        {
            [AN_ADV_PLAIN] =
                "NCCL did not use P2P over NVLink: check NCCL_DEBUG=INFO transport lines, "
                "container IPC/peer-access limits (--ipc=host), CUDA_VISIBLE_DEVICES and "
                "NCCL_P2P_LEVEL.",
            [AN_ADV_FALLBACK_ENV] =
                "Unset the variables above (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL=LOC, "
                "NCCL_SHM_DISABLE) so NCCL uses P2P over NVLink; check with "
                "NCCL_DEBUG=INFO that channels say P2P/CUMEM or NVLS.",
        },
    [AN_F_peer_access_disabled] =
        {"Call cudaDeviceEnablePeerAccess(dst, 0) on the source device (and the reverse) "
         "before cross-device copies: they then go GPU to GPU over NVLink instead of twice "
         "over PCIe through host memory (examples/p2p_copy: 393 vs 35 GB/s on 2 x H200)."},
    [AN_F_uma_thrashing] =
        {
            [AN_ADV_PLAIN] =
                "Prefetch before each phase (cudaMemPrefetchAsync to the GPU that uses it "
                "next) or set cudaMemAdviseSetPreferredLocation + "
                "cudaMemAdviseSetAccessedBy; avoid touching it from the CPU between GPU "
                "kernels.",
            [AN_ADV_UMA_ADVISED] =
                "Advice/prefetch is present but pages still bounce: give each phase its "
                "own buffer or use cudaMemAdviseSetReadMostly for shared read-only data.",
        },
    [AN_F_straggler] =
        {"Others wait for this rank in every collective: look at what it does before them "
         "(data loading, uneven batch or shard sizes, CPU contention, a slower GPU or "
         "host)."},
    [AN_F_exposed_communication] =
        {"Overlap communication with compute: DDP bucket_cap_mb / gradient_as_bucket_view, "
         "FSDP prefetch, fewer and larger collectives; or make it cheaper (check "
         "pcie_fallback and low_bus_bandwidth first)."},
    [AN_F_low_bus_bandwidth] =
        {"Large messages should reach 60-80% of the link: check NCCL_ALGO/NCCL_PROTO "
         "overrides, channel counts (NCCL_MIN_NCHANNELS) and NCCL_DEBUG=INFO transports."},
    [AN_F_dropped_records] =
        {"This process's figures are partial. Give each thread a larger buffer "
         "(NVLPROF_BUFFER_KB) or record fewer kinds."},
    [AN_F_collection_gaps] =
        {"Collection notes say what was missing and why; see `nvlprof info` per trace."},
};

/* The advice of a finding a root cause explains (explain() in findings.c) */
static const struct {
	enum an_fid root, y;
	const char *text;
} explained[] = {
    {AN_F_pcie_fallback, AN_F_low_bus_bandwidth,
     "See pcie_fallback: the traffic is not on NVLink; fix that first."},
    {AN_F_straggler, AN_F_exposed_communication,
     "See straggler: the other ranks' NCCL kernels wait for the late rank and that waiting "
     "counts as exposed communication; fix the straggler first."},
    {AN_F_pcie_fallback, AN_F_exposed_communication,
     "See pcie_fallback: collectives over PCIe/host memory are too slow to hide; fix that "
     "first."},
};

const char *an_f_advice_text(enum an_fid fid, int adv)
{
	if ((unsigned)fid >= AN_F_COUNT || adv < 0 || adv >= AN_ADV_COUNT)
		return NULL;
	return advice[fid][adv];
}

void an_f_advice(struct an_finding *x, int adv)
{
	const char *t = x ? an_f_advice_text(x->fid, adv) : NULL;
	an_f_advise(x, t ? t : "");
}

const char *an_f_explained_advice(enum an_fid root, enum an_fid y)
{
	for (size_t i = 0; i < sizeof explained / sizeof explained[0]; i++)
		if (explained[i].root == root && explained[i].y == y)
			return explained[i].text;
	return NULL;
}

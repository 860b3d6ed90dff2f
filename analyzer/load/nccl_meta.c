/* nccl_meta.c: what the analyzer knows of NCCL and NVLink themselves: collective classes, kernel
 * names, the nccl-tests bandwidth formulas (PERFORMANCE.md), size classes, the NVLink data rate per
 * link. The one place they live. */
#include <math.h>   /* NAN */
#include <string.h> /* strstr */

#include "model/model.h"
#include "nvlp_format.h"

static const char *const coll_names[AN_C_COUNT] = {
    "?", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv"};
const char *an_coll_name(int c)
{
	return c > 0 && c < AN_C_COUNT ? coll_names[c] : "?";
}

const uint8_t an_coll_of_fn_table[NVLP_NCCL_FN_COUNT] = {
    [NVLP_NCCL_ALL_REDUCE] = AN_C_ALLREDUCE,
    [NVLP_NCCL_ALL_GATHER] = AN_C_ALLGATHER,
    [NVLP_NCCL_REDUCE_SCATTER] = AN_C_REDUCESCATTER,
    [NVLP_NCCL_BROADCAST] = AN_C_BROADCAST,
    [NVLP_NCCL_BCAST] = AN_C_BROADCAST,
    [NVLP_NCCL_REDUCE] = AN_C_REDUCE,
    /* NCCL runs these as SendRecv kernels */
    [NVLP_NCCL_SEND] = AN_C_SENDRECV,
    [NVLP_NCCL_RECV] = AN_C_SENDRECV,
    [NVLP_NCCL_ALL_TO_ALL] = AN_C_SENDRECV,
    [NVLP_NCCL_GATHER] = AN_C_SENDRECV,
    [NVLP_NCCL_SCATTER] = AN_C_SENDRECV,
    /* every other function launches no kernel: AN_C_NONE (0) */
};

int an_coll_of_kernel(const char *name)
{
	const char *p;
	if (!name)
		return 0;
	/* CUPTI gives mangled names ("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDev..."):
	 * look for the marker anywhere near the start, not only as a prefix. */
	if ((p = strstr(name, "ncclDevKernel_")) && p - name < 16)
		p += 14;
	else if ((p = strstr(name, "ncclKernel_")) && p - name < 16)
		p += 11;
	else
		return (p = strstr(name, "nccl")) && p - name < 16 ? -1 : 0;
	/* Longest names first: "Reduce" is a prefix of "ReduceScatter". */
	static const struct {
		const char *s;
		int c;
	} tab[] = {
	    {"ReduceScatter", AN_C_REDUCESCATTER}, {"AllReduce", AN_C_ALLREDUCE},
	    {"AllGather", AN_C_ALLGATHER},         {"Broadcast", AN_C_BROADCAST},
	    {"SendRecv", AN_C_SENDRECV},           {"Reduce", AN_C_REDUCE},
	};
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
		if (!strncmp(p, tab[i].s, strlen(tab[i].s)))
			return tab[i].c;
	return -1;
}

double an_busbw_factor(unsigned fn, int n)
{
	if (n < 1)
		return 1;
	switch (fn) {
	case NVLP_NCCL_ALL_REDUCE:
		return 2.0 * (n - 1) / n;
	case NVLP_NCCL_REDUCE_SCATTER:
	case NVLP_NCCL_ALL_GATHER:
	case NVLP_NCCL_ALL_TO_ALL:
		return (double)(n - 1) / n;
	default:
		return 1;
	}
}

int an_size_class(uint64_t b)
{
	if (b < (64u << 10))
		return 0;
	if (b < (1u << 20))
		return 1;
	if (b < (16u << 20))
		return 2;
	if (b < (256u << 20))
		return 3;
	return 4;
}
const char *an_size_class_name(int c)
{
	static const char *const n[AN_SIZE_CLASSES] = {"<64K", "64K-1M", "1M-16M", "16M-256M",
	                                               ">=256M"};
	return c >= 0 && c < AN_SIZE_CLASSES ? n[c] : "?";
}

double an_algbw_gbps(double bytes, double ns)
{
	return ns > 0 ? bytes / ns : NAN; /* bytes per ns = GB/s */
}

double an_busbw_gbps(double bytes, double ns, unsigned fn, int n)
{
	return an_algbw_gbps(bytes, ns) * an_busbw_factor(fn, n);
}

/* The one NVLink peak: NVIDIA's data rate per link and direction, 25 GB/s for NVLink 2 to 4
 * (H200: 18 links = 450 GB/s each way, the 900 GB/s "bidirectional" of its specification).
 * nvidia-smi nvlink -s shows 26.562 GB/s per link on NVLink 4: the signalling rate, encoding
 * included, which no payload reaches (x 18 = 478); NCCL's topology model assumes 20.6 GB/s per
 * link on sm_90 (src/graph/topo.h), an achievable ring rate rather than the link's. */
double an_nvlink_link_Bps(uint64_t version)
{
	static const double per_version[] = {0, 20e9, 25e9, 25e9, 25e9, 50e9};
	return version < sizeof per_version / sizeof per_version[0] ? per_version[version] : 0;
}

const char *an_peak_basis(void)
{
	return "NVIDIA's spec, 25 GB/s per link each way (H200: 18 x 25 = 450); nvidia-smi's "
	       "26.562 is the signalling rate, encoding included";
}

/* test_analyzer_peak.c: a GPU's NVLink peak and whether two GPUs share NVLink, from the NVLINK records as CUPTI and NVLPROF_CUPTI=lazy give them: direct links summed, NVSwitch links once however many GPU pairs name them, links beyond the process (dev1 -1) counted for their GPU only. */
#include <stdio.h>  /* printf */
#include <string.h> /* memset */

#include "check.h"
#include "model/model.h"
#include "nvlp_trace.h"

#define BW 25e9 /* one NVLink 4 link, per direction (an_nvlink_link_Bps) */

static void add_link(struct an_rank *r, struct an_link *tab, int d0, int d1, int links, int sw)
{
	struct an_link *l = &tab[r->nlinks++];
	memset(l, 0, sizeof *l);
	l->dev0 = d0, l->dev1 = d1;
	l->type0 = l->type1 = NVLP_DEV_TYPE_GPU;
	l->links = (uint64_t)links, l->bw_Bps = (uint64_t)BW;
	l->nvswitch = sw;
}

/* rank r alone in a job: no host to borrow a topology from */
static double peak(struct an_rank *r, int dev)
{
	struct an_job job;
	memset(&job, 0, sizeof job);
	job.ranks = r, job.nranks = 1;
	return an_dev_peak(&job, r, dev);
}

int main(void)
{
	struct an_link tab[64];
	struct an_rank r;
	memset(&r, 0, sizeof r);
	r.ok = 1, r.links = tab;
	/* an HGX board of 8 GPUs as CUPTI gives two: one record per pair, 18 links through the
	 * NVSwitch each time; the GPU's peak is its 18 links, not 7 x 18 */
	for (int i = 0; i < 8; i++)
		for (int j = i + 1; j < 8; j++)
			add_link(&r, tab, i, j, 18, 1);
	for (int d = 0; d < 8; d++)
		CHECK(peak(&r, d) == 18 * BW, "8 GPUs on an NVSwitch: GPU %d's peak 18 links (%.0f GB/s)",
		      d, peak(&r, d) / 1e9);
	CHECK(an_nvlink_between(&r, 2, 7) && an_nvlink_between(&r, 7, 0),
	      "8 GPUs on an NVSwitch: every pair shares NVLink");
	/* direct links (four GPUs in a mesh, 4 links to each neighbour): summed */
	r.nlinks = 0;
	add_link(&r, tab, 0, 1, 4, 0);
	add_link(&r, tab, 0, 2, 4, 0);
	add_link(&r, tab, 1, 3, 4, 0);
	CHECK(peak(&r, 0) == 8 * BW && peak(&r, 3) == 4 * BW,
	      "direct links summed: GPU 0 8 links, GPU 3 4 (%.0f, %.0f GB/s)", peak(&r, 0) / 1e9,
	      peak(&r, 3) / 1e9);
	CHECK(an_nvlink_between(&r, 0, 2) && !an_nvlink_between(&r, 0, 3),
	      "direct links: 0-2 share NVLink, 0-3 do not");
	/* one GPU visible (NVLPROF_CUPTI=lazy under CUDA_VISIBLE_DEVICES): its links beyond the
	 * process, to hidden GPUs and to an NVSwitch, dev1 -1 */
	r.nlinks = 0;
	add_link(&r, tab, 0, -1, 4, 0);
	CHECK(peak(&r, 0) == 4 * BW, "one GPU visible, 4 links to a hidden GPU: peak 4 links (%.0f)",
	      peak(&r, 0) / 1e9);
	r.nlinks = 0;
	add_link(&r, tab, 0, -1, 18, 1);
	CHECK(peak(&r, 0) == 18 * BW && peak(&r, 1) == 0,
	      "one GPU visible on an NVSwitch: GPU 0 18 links, no other GPU (%.0f, %.0f)",
	      peak(&r, 0) / 1e9, peak(&r, 1) / 1e9);
	CHECK(!an_nvlink_between(&r, 0, 1) && !an_nvlink_between(&r, 0, -1),
	      "links beyond the process pair no two visible GPUs");
	/* both kinds on one GPU: direct plus the NVSwitch once */
	add_link(&r, tab, 0, 1, 18, 1);
	add_link(&r, tab, 0, 2, 2, 0);
	CHECK(peak(&r, 0) == 20 * BW, "2 direct links and 18 to the NVSwitch: 20 links (%.0f)",
	      peak(&r, 0) / 1e9);
	return CHECK_DONE();
}

/* link_coarse.c: copies a trace with its link samples merged into windows of MS milliseconds per GPU, as link counters read that often (the NVML fallback's 100 ms) would have recorded them. */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* strtoull */

#include "nvlp_trace.h"

#define MAX_DEV 64

/* a's sample grown by s, the next one of the same GPU */
static void merge(struct nvlp_rec_linksample *a, const struct nvlp_rec_linksample *s)
{
	a->dur = s->start + s->dur - a->start;
	a->nvl_tx += s->nvl_tx, a->nvl_rx += s->nvl_rx;
	a->nvl_tx_user += s->nvl_tx_user, a->nvl_rx_user += s->nvl_rx_user;
	a->pcie_rd += s->pcie_rd, a->pcie_wr += s->pcie_wr;
	a->flags |= s->flags;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: link_coarse IN OUT MS\n");
		return 2;
	}
	uint64_t win = strtoull(argv[3], NULL, 10) * 1000000ull;
	char err[512];
	nvlp_reader *r = nvlp_reader_open(argv[1], err, sizeof err);
	struct nvlp_record rec;
	if (!r || nvlp_reader_next(r, &rec) != 1 || rec.kind != NVLP_K_HEADER) {
		fprintf(stderr, "link_coarse: %s\n", r ? "no header record" : err);
		return 1;
	}
	const struct nvlp_rec_header *h = (const void *)rec.f;
	nvlp_writer *w = nvlp_writer_open(argv[2], nvlp_reader_header_text(r), h->t_mono, h->t_real);
	if (!w) {
		fprintf(stderr, "link_coarse: cannot write %s\n", argv[2]);
		return 1;
	}
	static struct nvlp_rec_linksample acc[MAX_DEV];
	static int held[MAX_DEV];
	while (nvlp_reader_next(r, &rec) == 1) {
		if (rec.kind == NVLP_K_LINKSAMPLE) {
			const struct nvlp_rec_linksample *s = (const void *)rec.f;
			int d = (int)(s->device % MAX_DEV);
			if (held[d] && s->start + s->dur - acc[d].start > win)
				nvlp_writer_add(w, NVLP_K_LINKSAMPLE, &acc[d], NULL, 0), held[d] = 0;
			if (held[d])
				merge(&acc[d], s);
			else
				acc[d] = *s, held[d] = 1;
			continue;
		}
		if (rec.kind == NVLP_K_END) /* what is held goes before the end */
			for (int d = 0; d < MAX_DEV; d++)
				if (held[d])
					nvlp_writer_add(w, NVLP_K_LINKSAMPLE, &acc[d], NULL, 0), held[d] = 0;
		nvlp_writer_add(w, rec.kind, rec.f, rec.blob, rec.blob_len);
	}
	for (int d = 0; d < MAX_DEV; d++) /* a file cut short: no end record */
		if (held[d])
			nvlp_writer_add(w, NVLP_K_LINKSAMPLE, &acc[d], NULL, 0);
	nvlp_reader_close(r);
	return nvlp_writer_close(w) < 0;
}

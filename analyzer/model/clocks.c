/* clocks.c: the processes' clocks on the job's: each process's realtime anchor, then, on a job of
 * several hosts, each host corrected by the median difference of collective completions across
 * hosts, the differences taken in one pass over each communicator's rows (the offsets solved in
 * hosts.c). */
#include <stdlib.h> /* malloc */

#include "model/align_int.h"
#include "model/model.h"
#include "model/stages.h"

void an_clock_anchors(struct an_job *job)
{
	for (size_t f = 0; f < job->nranks; f++) {
		struct an_rank *r = &job->ranks[f];
		r->offset = (r->t_real0 && r->t_mono0)
		                ? an_sub_i64((int64_t)r->t_real0, (int64_t)r->t_mono0)
		                : 0;
	}
}

/* ---- clock refinement: one pass over each communicator's rows ---- */
/* A cell's completion on its host's clock plus the process's offset: the GPU kernel's end; without
 * GPU time, the call's exit where its host's calls of the row blocked until the collective was
 * done (see exits_blocked). @return 0 none, 1 GPU, 2 exit */
static inline int cell_done(const struct an_call *c, int64_t off, int exit_ok, int64_t *t)
{
	if (c->gpu_start) {
		*t = an_add_i64((int64_t)(c->gpu_start + c->gpu_dur), off);
		return 1;
	}
	if (!exit_ok)
		return 0;
	*t = an_add_i64((int64_t)(c->t_enter + c->host_dur), off);
	return 2;
}

/* Blocking calls leave together when the last rank arrives: on one host (one clock) a row's
 * calls without GPU time blocked when they entered at least 10 us apart and left within a
 * quarter of that. Calls that return at once (NCCL's own) leave as far apart as they came. */
#define EXIT_MIN_SPREAD_NS 10000
static void exits_blocked(const struct ctab *t, const struct crow *w, const int *hcol,
                          const int *hnext, int nh, uint8_t *blocked)
{
	for (int i = 0; i < nh; i++) {
		uint64_t e0 = UINT64_MAX, e1 = 0, x0 = UINT64_MAX, x1 = 0;
		int n = 0;
		for (int col = hcol[i]; col >= 0; col = hnext[col]) {
			if (w->k[col] == CROW_NONE)
				continue;
			const struct an_call *c = crow_call(t, w, col);
			uint64_t x = c->t_enter + c->host_dur;
			e0 = c->t_enter < e0 ? c->t_enter : e0;
			e1 = c->t_enter > e1 ? c->t_enter : e1;
			x0 = x < x0 ? x : x0;
			x1 = x > x1 ? x : x1;
			n++;
		}
		blocked[i] = n >= 2 && e1 - e0 >= EXIT_MIN_SPREAD_NS && 4 * (x1 - x0) <= e1 - e0;
	}
}

/* The hosts of a comm's columns: hcol[i] the first column of its i-th host (in column order),
 * hnext[col] the next column of the same host (-1: none); hid[i] the host's number, slot: per
 * host scratch (-1 between calls). @return the hosts' count; *anchor the index of the reference
 * host (ref) if present, else 0 */
static int comm_hosts(const struct an_job *job, const struct ctab *t, uint32_t ref, int *slot,
                      int *hcol, int *hlast, int *hnext, uint32_t *hid, int *anchor)
{
	int nh = 0;
	*anchor = 0;
	for (int col = 0; col < t->ncol; col++) {
		uint32_t h = job->ranks[t->col[col].file].host_ix;
		hnext[col] = -1;
		if (slot[h] < 0) {
			slot[h] = nh;
			hid[nh] = h;
			hcol[nh] = hlast[nh] = col;
			if (h == ref)
				*anchor = nh;
			nh++;
		} else {
			hnext[hlast[slot[h]]] = col;
			hlast[slot[h]] = col;
		}
	}
	for (int i = 0; i < nh; i++)
		slot[hid[i]] = -1;
	return nh;
}

/* One comm's rows: each host's first column against the anchor host's (the reference host when
 * it is a member: the differences it always gave), one difference per row both completed. */
static int comm_clock_pairs(const struct an_job *job, const struct ctab *t, uint32_t ref,
                            int *slot, struct an_clock_pairs *p)
{
	size_t nc = (size_t)t->ncol;
	int *hcol = malloc(nc * sizeof *hcol), *hlast = malloc(nc * sizeof *hlast);
	int *hnext = malloc(nc * sizeof *hnext), anchor, rc = -1;
	uint32_t *hid = malloc(nc * sizeof *hid);
	uint8_t *blocked = malloc(nc);
	struct crow w;
	if (!hcol || !hlast || !hnext || !hid || !blocked)
		goto out;
	int nh = comm_hosts(job, t, ref, slot, hcol, hlast, hnext, hid, &anchor);
	rc = 0;
	if (nh < 2 || an_crow_init(t, &w) < 0)
		goto out;
	int exits = !job->have_gpu; /* exits only where no call has GPU time */
	const struct ccol *ca = &t->col[hcol[anchor]];
	while (crow_next(t, &w) && !rc) {
		if (w.k[hcol[anchor]] == CROW_NONE)
			continue;
		if (exits)
			exits_blocked(t, &w, hcol, hnext, nh, blocked);
		int64_t ta, tx;
		int ka = cell_done(crow_call(t, &w, hcol[anchor]), ca->offset,
		                   exits && blocked[anchor], &ta);
		for (int i = 0; ka && i < nh && !rc; i++) {
			const struct ccol *cx = &t->col[hcol[i]];
			if (i == anchor || w.k[hcol[i]] == CROW_NONE)
				continue;
			int kx = cell_done(crow_call(t, &w, hcol[i]), cx->offset, exits && blocked[i],
			                   &tx);
			if (kx)
				rc = an_clock_pair_add(p, hid[anchor], hid[i], an_sub_i64(tx, ta),
				                       ka == 2 || kx == 2);
		}
	}
	crow_free(&w);
out:
	free(hcol);
	free(hlast);
	free(hnext);
	free(hid);
	free(blocked);
	return rc;
}

void an_clock_refine(struct an_job *job, struct ctab *tabs)
{
	uint32_t ref = job->ranks[0].host_ix;
	for (size_t f = 0; f < job->nranks && !job->multi_host; f++)
		job->multi_host = job->ranks[f].ok && job->ranks[f].host_ix != ref;
	if (!job->multi_host)
		return;
	struct an_clock_pairs p = {0};
	int *slot = malloc((job->nhosts ? job->nhosts : 1) * sizeof *slot);
	for (size_t h = 0; slot && h < job->nhosts; h++)
		slot[h] = -1;
	for (size_t ci = 0; slot && ci < job->ncomms; ci++) {
		for (int col = 0; col < tabs[ci].ncol; col++)
			tabs[ci].col[col].offset = job->ranks[tabs[ci].col[col].file].offset;
		if (tabs[ci].ncol >= 2 && comm_clock_pairs(job, &tabs[ci], ref, slot, &p) < 0)
			break; /* out of memory: what was found so far */
	}
	free(slot);
	an_clock_solve(job, &p, ref);
}

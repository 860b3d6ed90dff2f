/* hangs.c: rows of a communicator's table that went wrong: a hang (some members entered the
 * collective, others never did, their traces stopping before it; and the failure that ended it)
 * and a mismatch (members called it differently: noted by mismatch.c). */
#include <stdlib.h> /* malloc, realloc */

#include "model/align_int.h"
#include "model/model.h"
#include "model/stages.h"

/* None failed in hang h: the first later call on this communicator that did (a waiting rank
 * whose collective NCCL left hanging when it saw the peer die fails its next call). */
static void hang_next_failure(const struct an_job *job, const struct ctab *t, const struct crow *w,
                              uint32_t ci, struct an_hang *h)
{
	for (int col = 0; col < t->ncol && h->failed_rank < 0; col++) {
		const struct an_rank *r = &job->ranks[t->col[col].file];
		if (w->k[col] == CROW_NONE)
			continue;
		uint32_t best = UINT32_MAX;
		int rc = 0;
		for (size_t q = 0; q < r->nfailed; q++)
			if (r->failed[q].hash == job->comms[ci].hash && r->failed[q].seq > w->seq &&
			    r->failed[q].seq < best)
				best = r->failed[q].seq, rc = r->failed[q].rc;
		if (best != UINT32_MAX) {
			h->failed_rank = r->rank >= 0 ? r->rank : t->col[col].file;
			h->failed_rc = rc;
			h->failed_seq = best;
		}
	}
}

int an_row_hang(struct an_job *job, const struct ctab *t, const struct crow *w, uint32_t ci)
{
	struct an_hang h = {.comm = ci, .seq = w->seq, .failed_rank = -1};
	h.missing = malloc((size_t)t->ncol * sizeof *h.missing);
	h.present = malloc((size_t)t->ncol * sizeof *h.present);
	if (!h.missing || !h.present) {
		free(h.missing);
		free(h.present);
		return 0;
	}
	for (int col = 0; col < t->ncol; col++) {
		struct an_rank *r = &job->ranks[t->col[col].file];
		int gr = r->rank >= 0 ? r->rank : t->col[col].file;
		if (w->k[col] != CROW_NONE) {
			const struct an_call *c = crow_call(t, w, col);
			h.fn = c->fn;
			/* it waited from its entry to its end: its last record of any kind (a call
			 * that returns before the collective ran, as NCCL's do, leaves the wait to
			 * the next call or a sync, which wrote no record when the rank was killed) */
			double wt = (double)(r->t_alive > c->t_enter ? r->t_alive - c->t_enter : 0);
			if (c->gpu_start && (double)c->gpu_dur > wt)
				wt = (double)c->gpu_dur;
			if (wt / 1e6 > h.wait_ms)
				h.wait_ms = wt / 1e6;
			h.present[h.npresent++] = gr;
			for (size_t q = 0; q < r->nfailed && h.failed_rank < 0; q++)
				if (r->failed[q].seq == w->seq &&
				    r->failed[q].hash == job->comms[ci].hash) {
					h.failed_rank = gr;
					h.failed_rc = r->failed[q].rc;
					h.failed_seq = w->seq;
					if ((double)r->failed[q].host_ns / 1e6 > h.wait_ms)
						h.wait_ms = (double)r->failed[q].host_ns / 1e6;
				}
		} else if (t->col[col].maxseq < w->seq)
			h.missing[h.nmissing++] = gr;
	}
	if (!h.nmissing) {
		free(h.missing);
		free(h.present);
		return 0;
	}
	an_hang_sort(&h);
	if (h.failed_rank < 0)
		hang_next_failure(job, t, w, ci, &h);
	struct an_hang *x = realloc(job->hangs, (job->nhangs + 1) * sizeof *x);
	if (x) {
		job->hangs = x;
		x[job->nhangs++] = h;
	} else {
		free(h.missing);
		free(h.present);
	}
	return 1;
}

int an_row_alike(const struct ctab *t, const struct crow *w)
{
	int fn = -1;
	const struct an_csig *s0 = NULL;
	for (int col = 0; col < t->ncol; col++) {
		if (w->k[col] == CROW_NONE)
			continue;
		const struct ccol *c = &t->col[col];
		int f = an_fn_collective(crow_call(t, w, col)->fn);
		if (fn < 0)
			fn = f;
		else if (f != fn)
			return 0;
		uint16_t g = c->csig ? c->csig[w->k[col]] : AN_CSIG_NONE;
		if (g == AN_CSIG_NONE)
			continue;
		const struct an_csig *s = &c->csigs[g];
		if (!s0)
			s0 = s;
		else if (s->count != s0->count || s->dtype != s0->dtype || s->op != s0->op ||
		         s->root != s0->root)
			return 0;
	}
	return 1;
}

int an_row_mismatch(struct an_job *job, const struct ctab *t, const struct crow *w, uint32_t ci)
{
	int *file = malloc((size_t)t->ncol * sizeof *file), n = 0;
	uint32_t *k = malloc((size_t)t->ncol * sizeof *k);
	for (int col = 0; file && k && col < t->ncol; col++)
		if (w->k[col] != CROW_NONE) {
			file[n] = t->col[col].file;
			k[n++] = w->k[col];
		}
	int done = file && k && an_mismatch_note(job, ci, w->seq, file, k, n) == 0 ? 1 : -1;
	free(file);
	free(k);
	return done;
}

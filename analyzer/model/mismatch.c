/* mismatch.c: the first collective of each communicator whose ranks called it differently
 * (function, count, datatype, op or root), noted from the cross-rank walk over the communicator's
 * rows (waits.c, hangs.c) into job->mismatches: each distinct call is a side, with its ranks. The
 * finding's wording is findings/mismatch.c's. */
#include <stdlib.h> /* realloc */

#include "model/model.h"
#include "model/stages.h" /* an_mismatch_note */

/* The side of m that a call joins: same collective and, where both are known, same arguments.
 * @return its index, or -1 when a new one is needed */
static int side_of(const struct an_mismatch *m, unsigned fn, const struct an_csig *s)
{
	for (int i = 0; i < m->nsides; i++) {
		const struct an_mside *d = &m->side[i];
		if (an_fn_collective(d->fn) != an_fn_collective(fn))
			continue;
		if (!s || !d->sig_known ||
		    (d->sig.count == s->count && d->sig.dtype == s->dtype && d->sig.op == s->op &&
		     d->sig.root == s->root))
			return i;
	}
	return -1;
}

int an_mismatch_note(struct an_job *job, uint32_t comm, uint32_t seq, const int *file,
                     const uint32_t *k, int n)
{
	struct an_mismatch m = {.comm = comm, .seq = seq};
	for (int i = 0; i < n; i++) {
		const struct an_rank *r = &job->ranks[file[i]];
		const struct an_call *c = &r->calls[k[i]];
		uint16_t g = r->csig ? r->csig[k[i]] : AN_CSIG_NONE;
		const struct an_csig *s = g != AN_CSIG_NONE ? &r->csigs[g] : NULL;
		int id = r->rank >= 0 ? r->rank : file[i];
		int j = side_of(&m, c->fn, s);
		if (j < 0 && m.nsides == AN_MISMATCH_SIDES) {
			m.more++;
			continue;
		}
		if (j < 0) {
			j = m.nsides++;
			m.side[j] = (struct an_mside){.fn = c->fn, .bytes = c->bytes, .file = file[i],
			                              .k = k[i]};
		}
		struct an_mside *d = &m.side[j];
		if (s && !d->sig_known) {
			d->sig = *s;
			d->sig_known = 1;
		}
		/* a process holding several ranks of the comm (one per GPU) is named once */
		if (d->nranks < 16 && (!d->nranks || d->ranks[d->nranks - 1] != id))
			d->ranks[d->nranks++] = id;
	}
	if (m.nsides < 2) /* only unknown arguments told them apart */
		return 0;
	struct an_mismatch *x =
	    realloc(job->mismatches, (job->nmismatches + 1) * sizeof *job->mismatches);
	if (!x)
		return -1;
	job->mismatches = x;
	x[job->nmismatches++] = m;
	return 0;
}

/* det_uma.c: the uma_thrashing finding: a managed allocation migrating back and forth. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"
#include "util/util.h" /* an_fmt_value */

int an_detect_uma_thrashing(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->nallocs; i++) {
			const struct an_alloc *a = &r->allocs[i];
			double moved = (double)(a->htod + a->dtoh + a->dtod);
			if (moved < th[AN_TH_thrash_min_mib] * MIB ||
			    ((double)a->flips < th[AN_TH_thrash_min_flips] && !a->thrash_events))
				continue;
			char size[32];
			struct an_finding *x =
			    an_f_add(out, AN_F_uma_thrashing, AN_SEV_WARNING,
			        "Managed allocation of %s migrates back and forth (%llu "
			        "direction changes)",
			        an_fmt_value(size, sizeof size, (double)a->bytes, "B"),
			        (unsigned long long)a->flips);
			if (!x)
				return -1;
			x->rank = an_f_rank_id(job, f);
			x->device = a->device;
			an_f_num(x, AN_EV_RANK, an_f_rank_id(job, f), NULL);
			an_f_num(x, "device", a->device, NULL);
			an_f_str(x, "address", "0x%llx", (unsigned long long)a->ptr);
			an_f_num(x, "size", (double)a->bytes, "B");
			an_f_num(x, "bytes_migrated", moved, "B");
			an_f_num(x, "htod_bytes", (double)a->htod, "B");
			an_f_num(x, "dtoh_bytes", (double)a->dtoh, "B");
			an_f_num(x, "dtod_bytes", (double)a->dtod, "B");
			an_f_num(x, "migrations", (double)a->migrations, NULL);
			an_f_num(x, "direction_changes", (double)a->flips, NULL);
			an_f_num(x, "gpu_page_faults", (double)a->gpu_faults, NULL);
			an_f_num(x, "cpu_page_faults", (double)a->cpu_faults, NULL);
			an_f_num(x, "time_lost_ms", (double)a->migrate_ns / 1e6, "ms");
			an_f_python(x, AN_EV_PYTHON, "allocated at", r,
			            an_f_py_of_record(r, NVLP_K_MANAGED, a->t, 0));
			an_f_native(x, "allocated_at", r, a->stack);
			an_f_advice(x, a->advised || a->prefetched ? AN_ADV_UMA_ADVISED
			                                           : AN_ADV_PLAIN);
		}
	}
	return 0;
}

/* kernelch_print.c: the kernel-channel results (model/kernelch.c's job->kch) in the text report
 * and as report --json's "kernel_channels" object. */
#include <math.h>  /* NAN */
#include <stdio.h> /* fprintf */

#include "model/kernelch.h"
#include "model/model.h"
#include "out/kernelch_print.h"
#include "util/json.h"

/* The kernel-channel lines: what the channels gave, the cross-check, the clock fit, the
 * dropped channels. */
static void text_channels(FILE *o, const struct an_kch *s)
{
	fprintf(o,
	        "kernel channels (NCCL KernelCh): %llu collectives from %llu channel records; "
	        "%llu calls given their GPU time from them, %llu already timed by CUPTI",
	        (unsigned long long)s->collectives, (unsigned long long)s->channels,
	        (unsigned long long)s->timed, (unsigned long long)s->xcheck);
	if (s->retimed)
		fprintf(o, " (%llu of them re-timed: CUPTI's kernel was another call's)",
		        (unsigned long long)s->retimed);
	if (s->untimed)
		fprintf(o, ", %llu of %llu collective calls without GPU time",
		        (unsigned long long)s->untimed, (unsigned long long)s->calls);
	fputc('\n', o);
	if (s->xcheck)
		fprintf(o,
		        "  vs CUPTI kernels: duration differs by %+.1f us (median), at most "
		        "%.1f us; start at most %.1f us apart\n",
		        s->xcheck_median_ns / 1e3, s->xcheck_max_ns / 1e3,
		        s->xcheck_max_start_ns / 1e3);
	fprintf(o, "  clock: %s", s->fit_bound_only
	                              ? "no CLOCK_REALTIME pairs: offset from the stop bounds"
	                              : "globaltimer = CLOCK_REALTIME (CLOCK pairs)");
	if (s->fit_corrections)
		fprintf(o, ", corrected by up to %.1f us where a stop came after the host heard "
		           "of it",
		        s->fit_max_corr_ns / 1e3);
	if (s->before_call)
		fprintf(o, "; %llu collectives placed before their call (clock fit off)",
		        (unsigned long long)s->before_call);
	fputc('\n', o);
	uint64_t bad = s->zero + s->reversed + s->nostop + s->noparent;
	if (bad || s->shared_channels || s->replays || s->unmatched)
		fprintf(o,
		        "  dropped channels: %llu zero stamps, %llu reversed, %llu never stopped, "
		        "%llu without parent; %llu channels shared by fused collectives; %llu "
		        "graph replays (%.2f ms GPU, not attributed to calls); %llu collectives "
		        "matched no call\n",
		        (unsigned long long)s->zero, (unsigned long long)s->reversed,
		        (unsigned long long)s->nostop, (unsigned long long)s->noparent,
		        (unsigned long long)s->shared_channels, (unsigned long long)s->replays,
		        s->replay_ns / 1e6, (unsigned long long)s->unmatched);
}

/* The kernel tracing windows' lines: their share of the run, the exposed time inside them. */
static void text_windows(FILE *o, const struct an_kch *s, const struct an_job *job)
{
	fprintf(o,
	        "kernel tracing windows (NVLPROF_KERNELS): %llu windows, %.2f%% of the run; "
	        "compute overlap and exposure figures come from those windows only\n",
	        (unsigned long long)s->windows,
	        s->span_ns ? 100.0 * (double)s->window_ns / (double)s->span_ns : 0.0);
	/* kernels exist only inside windows: the model's exposed time is the windows' */
	double ex = 0;
	for (size_t f = 0; f < job->nranks; f++)
		for (size_t d = 0; d < job->ranks[f].ndevs; d++)
			ex += (double)job->ranks[f].devs[d].exposed_ns;
	if (s->window_ns && ex > 0)
		fprintf(o,
		        "  exposed communication inside the windows: %.2f ms of %.1f ms (%.1f%%); "
		        "the run's share estimated from them: %.1f%% (an estimate, from %.2f%% of the "
		        "run)\n",
		        ex / 1e6, s->window_ns / 1e6, 100.0 * ex / (double)s->window_ns,
		        100.0 * ex / (double)s->window_ns,
		        s->span_ns ? 100.0 * (double)s->window_ns / (double)s->span_ns : 0.0);
}

void an_kch_report_text(FILE *o, const struct an_job *job)
{
	const struct an_kch *s = job->kch;
	if (!s || (!s->channels && !s->windows))
		return;
	if (s->channels)
		text_channels(o, s);
	if (s->windows)
		text_windows(o, s, job);
}

void an_kch_json(struct jw *w, const struct an_job *job)
{
	const struct an_kch *s = job->kch;
	if (!s || (!s->channels && !s->windows)) {
		jw_null(w, "kernel_channels");
		return;
	}
	jw_obj(w, "kernel_channels");
	jw_int(w, "channel_records", (int64_t)s->channels);
	jw_int(w, "collectives", (int64_t)s->collectives);
	jw_int(w, "matched", (int64_t)s->matched);
	jw_int(w, "calls_timed", (int64_t)s->timed);
	jw_num(w, "calls_timed_ms", s->timed_ns / 1e6);
	jw_int(w, "calls_also_cupti", (int64_t)s->xcheck);
	jw_int(w, "calls_retimed", (int64_t)s->retimed);
	jw_num(w, "vs_cupti_median_us", s->xcheck ? s->xcheck_median_ns / 1e3 : NAN);
	jw_num(w, "vs_cupti_max_us", s->xcheck ? s->xcheck_max_ns / 1e3 : NAN);
	jw_num(w, "vs_cupti_start_max_us", s->xcheck ? s->xcheck_max_start_ns / 1e3 : NAN);
	jw_int(w, "collective_calls", (int64_t)s->calls);
	jw_int(w, "calls_without_gpu_time", (int64_t)s->untimed);
	jw_str(w, "clock", s->fit_bound_only ? "stop bounds" : "clock pairs");
	jw_int(w, "clock_corrections", (int64_t)s->fit_corrections);
	jw_num(w, "clock_max_correction_us", s->fit_max_corr_ns / 1e3);
	jw_int(w, "placed_before_call", (int64_t)s->before_call);
	jw_obj(w, "dropped_channels");
	jw_int(w, "zero_stamps", (int64_t)s->zero);
	jw_int(w, "reversed", (int64_t)s->reversed);
	jw_int(w, "never_stopped", (int64_t)s->nostop);
	jw_int(w, "without_parent", (int64_t)s->noparent);
	jw_obj_end(w);
	jw_int(w, "shared_by_fused", (int64_t)s->shared_channels);
	jw_int(w, "graph_replays", (int64_t)s->replays);
	jw_num(w, "graph_replay_ms", s->replay_ns / 1e6);
	jw_int(w, "unmatched", (int64_t)s->unmatched);
	jw_int(w, "kernel_windows", (int64_t)s->windows);
	jw_num(w, "kernel_window_share", s->span_ns ? (double)s->window_ns / (double)s->span_ns : NAN);
	jw_obj_end(w);
}

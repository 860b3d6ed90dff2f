/* rt_read.c: summarises a trace as key=value lines for the runtime tests (reader API only). */
#include <stdio.h>  /* printf */
#include <stdlib.h> /* strtoull */
#include <string.h> /* strcmp */

#include "nvlp_trace.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: rt_read FILE.nvlp\n");
		return 2;
	}
	char err[512];
	nvlp_reader *r = nvlp_reader_open(argv[1], err, sizeof err);
	if (!r) {
		printf("open_error=%s\n", err);
		return 1;
	}
	unsigned long long kinds[NVLP_K_COUNT] = {0}, allreduce = 0, records = 0, config_notes = 0;
	unsigned long long fork_notes = 0, last_nccl_t = 0, drops_max = 0, strings_ok = 1;
	struct nvlp_rec_end end = {0};
	struct nvlp_rec_exitinfo xi = {0};
	/* Per thread, calls must come out in the order they were made (call ids increase): a burst
	 * that spilled out of a thread's ring must not reorder it. Threads by tid, 64 at most. */
	unsigned long long order_tid[64] = {0}, order_last[64] = {0}, out_of_order = 0;
	/* issue 26: heartbeats (count, largest gap, last), calls in progress, the fatal signal */
	unsigned long long hb = 0, hb_gap = 0, hb_last = 0, hb_last_real = 0, hb_first = 0;
	unsigned long long inflight = 0, inflight_end = 0, oom_notes = 0, oom_last = 0;
	struct nvlp_rec_inflight inf_first = {0}, inf_last = {0};
	struct nvlp_rec_fatal fatal = {0};
	unsigned long long fatals = 0, fatal_before_exitinfo = 0;
	char fatal_name[64] = "";
	unsigned long long fatal_stack_prev = 0; /* the last STACK record's id before FATAL */
	unsigned fatal_stack_frames = 0;
	int got_end = 0, after_end = 0, rc;
	struct nvlp_record rec;
	while ((rc = nvlp_reader_next(r, &rec)) == 1) {
		records++;
		if (got_end)
			after_end++;
		if (rec.kind < NVLP_K_COUNT)
			kinds[rec.kind]++;
		switch (rec.kind) {
		case NVLP_K_NCCL: {
			const struct nvlp_rec_nccl *n = (const void *)rec.f;
			if (n->fn == NVLP_NCCL_ALL_REDUCE)
				allreduce++;
			if (n->t_enter > last_nccl_t)
				last_nccl_t = n->t_enter;
			for (int i = 0; i < 64; i++)
				if (order_tid[i] == n->tid || !order_tid[i]) {
					order_tid[i] = n->tid;
					out_of_order += n->call_id <= order_last[i];
					order_last[i] = n->call_id;
					break;
				}
			break;
		}
		case NVLP_K_NOTE: {
			const struct nvlp_rec_note *n = (const void *)rec.f;
			config_notes += n->code == NVLP_NOTE_CONFIG;
			if (n->code == NVLP_NOTE_OOM_KILL)
				oom_notes++, oom_last = n->value;
			fork_notes += n->code == NVLP_NOTE_FORK_CHILD;
			break;
		}
		case NVLP_K_DROPS: {
			const struct nvlp_rec_drops *d = (const void *)rec.f;
			if (d->dropped > drops_max)
				drops_max = d->dropped;
			break;
		}
		case NVLP_K_STRING: {
			const struct nvlp_rec_string *s = (const void *)rec.f;
			strings_ok &= s->id >= 1;
			break;
		}
		case NVLP_K_EXITINFO:
			memcpy(&xi, rec.f, sizeof xi);
			fatal_before_exitinfo = fatals;
			break;
		case NVLP_K_CLOCK: {
			const struct nvlp_rec_clock *c = (const void *)rec.f;
			if (c->source != NVLP_CLOCK_HEARTBEAT)
				break;
			if (hb && c->mono - hb_last > hb_gap)
				hb_gap = c->mono - hb_last;
			if (!hb)
				hb_first = c->mono;
			hb++;
			hb_last = c->mono;
			hb_last_real = c->other;
			break;
		}
		case NVLP_K_INFLIGHT:
			if (!inflight)
				memcpy(&inf_first, rec.f, sizeof inf_first);
			memcpy(&inf_last, rec.f, sizeof inf_last);
			inflight++;
			break;
		case NVLP_K_STACK:
			if (!fatals) {
				fatal_stack_prev = ((const struct nvlp_rec_stack *)rec.f)->id;
				fatal_stack_frames = (unsigned)(rec.blob_len / 8);
			}
			break;
		case NVLP_K_FATAL:
			memcpy(&fatal, rec.f, sizeof fatal);
			fatals++;
			snprintf(fatal_name, sizeof fatal_name, "%.*s", (int)rec.blob_len,
			         rec.blob ? (const char *)rec.blob : "");
			break;
		case NVLP_K_END:
			inflight_end = inflight;
			memcpy(&end, rec.f, sizeof end);
			got_end = 1;
			break;
		}
	}
	const char *t0 = nvlp_reader_header(r, NVLP_HDR_T_MONO);
	unsigned long long t_mono = t0 ? strtoull(t0, NULL, 10) : 0;
	printf("read_rc=%d\n", rc);
	printf("complete=%d\n", nvlp_reader_complete(r));
	printf("truncated=%d\n", nvlp_reader_truncated(r));
	printf("records=%llu\n", records);
	printf("nccl=%llu\n", kinds[NVLP_K_NCCL]);
	printf("allreduce=%llu\n", allreduce);
	printf("strings=%llu\n", kinds[NVLP_K_STRING]);
	printf("strings_ok=%llu\n", strings_ok);
	printf("config_notes=%llu\n", config_notes);
	printf("fork_notes=%llu\n", fork_notes);
	printf("drops_records=%llu\n", kinds[NVLP_K_DROPS]);
	printf("drops_max=%llu\n", drops_max);
	printf("end=%d\n", got_end);
	printf("after_end=%d\n", after_end);
	printf("end_records=%llu\n", (unsigned long long)end.records);
	printf("end_dropped=%llu\n", (unsigned long long)end.dropped);
	printf("end_reason=%llu\n", (unsigned long long)end.reason);
	printf("exitinfo=%llu\n", kinds[NVLP_K_EXITINFO]);
	printf("exit_signal=%lld\n", (long long)xi.signal);
	printf("exit_status=%lld\n", (long long)xi.status);
	printf("out_of_order=%llu\n", out_of_order);
	printf("span_ms=%llu\n", last_nccl_t > t_mono ? (last_nccl_t - t_mono) / 1000000 : 0);
	printf("heartbeats=%llu\n", hb);
	printf("heartbeat_gap_ms=%llu\n", hb_gap / 1000000);
	printf("heartbeat_span_ms=%llu\n", hb ? (hb_last - hb_first) / 1000000 : 0);
	printf("heartbeat_last_mono=%llu\n", hb_last);
	printf("heartbeat_last_real=%llu\n", hb_last_real);
	printf("inflight=%llu\n", inflight);
	printf("inflight_before_end=%llu\n", inflight_end);
	for (int i = 0; i < 2 && inflight; i++) {
		const struct nvlp_rec_inflight *x = i ? &inf_last : &inf_first;
		const char *w = i ? "last" : "first";
		printf("inflight_%s=kind=%llu fn=%llu tid=%llu seq=%llu count=%llu dtype=%lld op=%lld "
		       "peer=%lld rank=%lld nranks=%lld bytes=%llu call_id=%llu\n",
		       w, (unsigned long long)x->kind, (unsigned long long)x->fn,
		       (unsigned long long)x->tid, (unsigned long long)x->seq,
		       (unsigned long long)x->count, (long long)x->dtype, (long long)x->op,
		       (long long)x->peer, (long long)x->rank, (long long)x->nranks,
		       (unsigned long long)x->bytes, (unsigned long long)x->call_id);
		printf("inflight_%s_age_ms=%llu\n", w,
		       x->t > x->t_enter ? (unsigned long long)(x->t - x->t_enter) / 1000000 : 0);
		printf("inflight_%s_comm=%llu\n", w, (unsigned long long)x->comm);
	}
	printf("fatals=%llu\n", fatals);
	printf("fatal_before_exitinfo=%llu\n", fatal_before_exitinfo);
	printf("fatal=signal=%lld code=%lld addr=%#llx main=%llu name=%s\n", (long long)fatal.signal,
	       (long long)fatal.code, (unsigned long long)fatal.addr, (unsigned long long)fatal.main,
	       fatal_name);
	printf("fatal_tid=%llu\n", (unsigned long long)fatal.tid);
	/* the FATAL's stack: the STACK record just before it has its id (1), and how many frames */
	printf("fatal_stack=%d\n", fatal.stack && fatal.stack == fatal_stack_prev);
	printf("fatal_stack_frames=%u\n", fatal.stack ? fatal_stack_frames : 0);
	printf("oom_notes=%llu\n", oom_notes);
	printf("oom_last=%llu\n", oom_last);
	static const char *const keys[] = {
	    NVLP_HDR_FORMAT,  NVLP_HDR_VERSION, NVLP_HDR_HOST,       NVLP_HDR_PID,
	    NVLP_HDR_PPID,    NVLP_HDR_RANK,    NVLP_HDR_LOCAL_RANK, NVLP_HDR_WORLD_SIZE,
	    NVLP_HDR_CMDLINE, NVLP_HDR_T_REAL,  NVLP_HDR_T_MONO,     NVLP_HDR_CGROUP,
	    NVLP_HDR_OOM_WATCH, NVLP_HDR_OOM_KILL};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		const char *v = nvlp_reader_header(r, keys[i]);
		printf("h.%s=%s\n", keys[i], v ? v : "(none)");
	}
	const char *env = nvlp_reader_header(r, "env.NVLPROF_TEST_MARK");
	printf("h.env.NVLPROF_TEST_MARK=%s\n", env ? env : "(none)");
	nvlp_reader_close(r);
	return 0;
}

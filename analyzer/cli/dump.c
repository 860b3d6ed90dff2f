/* dump.c: `nvlprof info` (per-file summary) and `nvlprof dump` (every record, as text or JSON lines). */
#include <inttypes.h> /* PRIu64 */
#include <stdio.h>    /* printf, FILE */
#include <stdlib.h>   /* strtoll */
#include <string.h>   /* strcmp */
#include <time.h>     /* gmtime_r, strftime */

#include "cli/argparse.h"
#include "cli/commands.h"
#include "model/model.h"
#include "nvlp_trace.h"
#include "util/util.h"

/* ---- names for coded field values ---- */

/* Field index by name within a kind, -1 if absent. */
static int field_index(unsigned kind, const char *name)
{
	const struct nvlp_kind_info *ki = nvlp_kind_info(kind);
	for (unsigned i = 0; ki && i < ki->nfields; i++)
		if (!strcmp(ki->fields[i], name))
			return (int)i;
	return -1;
}

/* A readable label for a coded field (dtype, op, copy kind...), NULL if it has none. The
 * function-like fields (fn, code, reason) are shown as the record's name instead. */
static const char *field_label(unsigned kind, const char *field, uint64_t v)
{
	switch (kind) {
	case NVLP_K_NCCL:
		if (!strcmp(field, "dtype") && nvlp_nccl_dtype_size((int)v))
			return nvlp_nccl_dtype_name((int)v); /* -1 (no data type) stays a number */
		if (!strcmp(field, "op") && (int64_t)v >= 0)
			return nvlp_nccl_op_name(v > INT32_MAX ? INT32_MAX : (int)v);
		return NULL;
	case NVLP_K_COPY:
		return !strcmp(field, "copy_kind") ? nvlp_memcpy_kind_name(v) : NULL;
	case NVLP_K_GPUCOPY:
		return !strcmp(field, "copy_kind") ? nvlp_gpucopy_kind_name(v) : NULL;
	case NVLP_K_UM:
		return !strcmp(field, "counter") ? nvlp_um_counter_name(v) : NULL;
	default:
		return NULL;
	}
}

/* The record's "name": what a reader looks for first (function, kernel, note code...). */
static const char *record_name(const nvlp_reader *r, const struct nvlp_record *rec, char *buf,
			       size_t len)
{
	const uint64_t *f = rec->f;
	const char *s;
	switch (rec->kind) {
	case NVLP_K_NCCL:
		return nvlp_nccl_fn_name((unsigned)f[0]);
	case NVLP_K_NCCLPROF:
		return nvlp_nccl_fn_name((unsigned)((const struct nvlp_rec_ncclprof *)f)->fn);
	case NVLP_K_KCOLL:
		s = nvlp_nccl_fn_name((unsigned)((const struct nvlp_rec_kcoll *)f)->fn);
		return s ? s : "kcoll";
	case NVLP_K_COPY:
	case NVLP_K_MANAGED:
	case NVLP_K_PEER:
		return nvlp_cuda_fn_name((unsigned)f[0]);
	case NVLP_K_NOTE:
		return nvlp_note_name((unsigned)f[0]);
	case NVLP_K_END:
		s = nvlp_end_reason_name(((const struct nvlp_rec_end *)f)->reason);
		return s ? s : "end";
	case NVLP_K_KERNEL:
		s = nvlp_reader_string(r, ((const struct nvlp_rec_kernel *)f)->name);
		return s ? s : "?";
	case NVLP_K_GPUCOPY:
		s = nvlp_gpucopy_kind_name(((const struct nvlp_rec_gpucopy *)f)->copy_kind);
		return s ? s : "?";
	case NVLP_K_UM:
		s = nvlp_um_counter_name(((const struct nvlp_rec_um *)f)->counter);
		return s ? s : "?";
	case NVLP_K_LINKSAMPLE: {
		s = nvlp_link_source_name(((const struct nvlp_rec_linksample *)f)->source);
		return s ? s : "linksample";
	}
	case NVLP_K_CLOCK:
		s = nvlp_clock_source_name(((const struct nvlp_rec_clock *)f)->source);
		return s ? s : "clock";
	case NVLP_K_INFLIGHT: { /* the call in progress, by the kind its record would have */
		const struct nvlp_rec_inflight *x = (const void *)f;
		s = x->kind == NVLP_K_NCCL   ? nvlp_nccl_fn_name((unsigned)x->fn)
		    : x->kind == NVLP_K_COPY ? nvlp_cuda_fn_name((unsigned)x->fn)
		                             : NULL;
		return s ? s : "inflight";
	}
	case NVLP_K_FATAL: { /* the thread's name is the blob */
		const struct nvlp_rec_fatal *x = (const void *)f;
		snprintf(buf, len, "signal %lld, thread %.*s", (long long)(int64_t)x->signal,
		         (int)(rec->blob_len < 64 ? rec->blob_len : 64),
		         rec->blob ? (const char *)rec->blob : "");
		return buf;
	}
	case NVLP_K_MODULE:
	case NVLP_K_DEVICE:
	case NVLP_K_SYMBOL:
		/* blob is a path / device name / symbol name */
		snprintf(buf, len, "%.*s", (int)rec->blob_len, rec->blob ? (const char *)rec->blob : "");
		return buf;
	default:
		return nvlp_kind_info(rec->kind)->name;
	}
}

/* Fields the record's name already shows (text output skips them). */
static int is_name_field(unsigned kind, const char *field)
{
	switch (kind) {
	case NVLP_K_NCCL:
	case NVLP_K_COPY:
	case NVLP_K_MANAGED:
	case NVLP_K_PEER:
		return !strcmp(field, "fn");
	case NVLP_K_INFLIGHT:
		return !strcmp(field, "fn") || !strcmp(field, "kind");
	case NVLP_K_NOTE:
		return !strcmp(field, "code");
	default:
		return 0;
	}
}

/* ---- per-file context ---- */
struct file_ctx {
	const char *path;
	const char *base;
	int have_pid, have_rank;
	long long pid, rank;
};

static void file_ctx_init(struct file_ctx *c, const char *path, const nvlp_reader *r)
{
	c->path = path;
	c->base = nvlp_basename(path);
	char *end;
	const char *v = nvlp_reader_header(r, NVLP_HDR_PID);
	c->have_pid = v && *v && (c->pid = strtoll(v, &end, 10), *end == 0);
	v = nvlp_reader_header(r, NVLP_HDR_RANK);
	c->have_rank = v && *v && (c->rank = strtoll(v, &end, 10), *end == 0);
}

/* ---- dump: text ---- */

static void text_quoted(FILE *o, const void *s, size_t n)
{
	nvlp_json_string(o, s, n); /* JSON quoting is unambiguous and keeps one record per line */
}

/* The record's name after its kind, quoted where it holds a blank */
static void text_name(FILE *o, const nvlp_reader *r, const struct nvlp_record *rec)
{
	char nbuf[512];
	if (rec->kind != NVLP_K_HEADER && rec->kind != NVLP_K_STRING && rec->kind != NVLP_K_STACK &&
	    rec->kind != NVLP_K_DROPS && rec->kind != NVLP_K_NVLINK) {
		const char *name = record_name(r, rec, nbuf, sizeof(nbuf));
		putc(' ', o);
		if (strpbrk(name, " \t\n\"") || !*name)
			text_quoted(o, name, strlen(name));
		else
			fputs(name, o);
	}
}

/* Each field as name=value: its label where it has one, else by its type */
static void text_fields(FILE *o, const nvlp_reader *r, const struct nvlp_record *rec)
{
	const struct nvlp_kind_info *ki = nvlp_kind_info(rec->kind);
	for (unsigned i = 0; i < ki->nfields; i++) {
		const char *fname = ki->fields[i];
		uint64_t v = rec->f[i];
		if (is_name_field(rec->kind, fname) ||
		    (ki->types[i] == NVLP_FT_S && !strcmp(fname, "name")))
			continue;
		fprintf(o, " %s=", fname);
		const char *label = field_label(rec->kind, fname, v);
		if (label) {
			fputs(label, o);
			continue;
		}
		switch (ki->types[i]) {
		case NVLP_FT_I: fprintf(o, "%" PRId64, (int64_t)v); break;
		case NVLP_FT_X: fprintf(o, "0x%" PRIx64, v); break;
		case NVLP_FT_S: {
			const char *s = v ? nvlp_reader_string(r, v) : NULL;
			if (s)
				text_quoted(o, s, strlen(s));
			else
				fprintf(o, "#%" PRIu64, v);
			break;
		}
		default: fprintf(o, "%" PRIu64, v); break;
		}
	}
}

/* The header's key="value" pairs on one line */
static void text_header_pairs(FILE *o, const struct nvlp_record *rec)
{
	const char *p = (const char *)rec->blob, *end = p + rec->blob_len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *eq = memchr(p, '=', (size_t)(le - p));
		if (eq) {
			fprintf(o, " %.*s=", (int)(eq - p), p);
			text_quoted(o, eq + 1, (size_t)(le - eq - 1));
		}
		p = le + 1;
	}
}

/* The record's blob as its kind reads it */
static void text_blob(FILE *o, const struct nvlp_record *rec)
{
	switch (rec->kind) {
	case NVLP_K_HEADER: text_header_pairs(o, rec); break;
	case NVLP_K_STACK:
		fputs(" frames=", o);
		for (uint32_t j = 0; j + 8 <= rec->blob_len; j += 8) {
			uint64_t pc;
			memcpy(&pc, rec->blob + j, 8);
			fprintf(o, "%s0x%" PRIx64, j ? "," : "", pc);
		}
		break;
	case NVLP_K_MODULE:
	case NVLP_K_DEVICE:
	case NVLP_K_SYMBOL:
		break; /* the blob is the name, printed above */
	case NVLP_K_BUILDID:
		fputs(" build_id=", o);
		for (uint32_t j = 0; j < rec->blob_len; j++)
			fprintf(o, "%02x", rec->blob[j]);
		break;
	default:
		fputs(rec->kind == NVLP_K_NOTE ? " msg=" : rec->kind == NVLP_K_STRING ? " text=" : " blob=", o);
		text_quoted(o, rec->blob, rec->blob_len);
	}
}

static void dump_text(FILE *o, const nvlp_reader *r, const struct nvlp_record *rec)
{
	fputs(nvlp_kind_info(rec->kind)->name, o);
	text_name(o, r, rec);
	text_fields(o, r, rec);
	if (rec->blob)
		text_blob(o, rec);
	putc('\n', o);
}

/* ---- dump: JSON lines ---- */

static void json_header_object(FILE *o, const struct nvlp_record *rec)
{
	fputs("{", o);
	const char *p = (const char *)rec->blob, *end = p + rec->blob_len;
	int n = 0;
	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *eq = memchr(p, '=', (size_t)(le - p));
		if (eq) {
			if (n++)
				putc(',', o);
			nvlp_json_string(o, p, (size_t)(eq - p));
			putc(':', o);
			nvlp_json_string(o, eq + 1, (size_t)(le - eq - 1));
		}
		p = le + 1;
	}
	fputs("}", o);
}

/* The process (file, pid, rank) a record came from, its kind and its name */
static void json_origin(FILE *o, const struct file_ctx *c, const nvlp_reader *r,
			const struct nvlp_record *rec)
{
	char nbuf[512];
	fputs("{\"file\":", o);
	nvlp_json_cstr(o, c->base);
	if (field_index(rec->kind, "pid") < 0) {
		if (c->have_pid)
			fprintf(o, ",\"pid\":%lld", c->pid);
		else
			fputs(",\"pid\":null", o);
	}
	/* a record's own rank (NCCL: rank in the communicator) wins over the process's */
	if (field_index(rec->kind, "rank") < 0) {
		if (c->have_rank)
			fprintf(o, ",\"rank\":%lld", c->rank);
		else
			fputs(",\"rank\":null", o);
	}
	fputs(",\"kind\":", o);
	nvlp_json_cstr(o, nvlp_kind_info(rec->kind)->name);
	fputs(",\"name\":", o);
	nvlp_json_cstr(o, record_name(r, rec, nbuf, sizeof(nbuf)));
}

/* Each field by its type, with its label as NAME_name where it has one */
static void json_fields(FILE *o, const nvlp_reader *r, const struct nvlp_record *rec)
{
	const struct nvlp_kind_info *ki = nvlp_kind_info(rec->kind);
	for (unsigned i = 0; i < ki->nfields; i++) {
		const char *fname = ki->fields[i];
		uint64_t v = rec->f[i];
		putc(',', o);
		if (ki->types[i] == NVLP_FT_S) {
			/* the text under the field's name (kernel "name" is the record name above) */
			if (strcmp(fname, "name")) {
				nvlp_json_cstr(o, fname);
				putc(':', o);
				nvlp_json_cstr(o, v ? nvlp_reader_string(r, v) : NULL);
				putc(',', o);
			}
			fprintf(o, "\"%s_id\":%" PRIu64, fname, v);
			continue;
		}
		fprintf(o, "\"%s\":", fname);
		switch (ki->types[i]) {
		case NVLP_FT_I: fprintf(o, "%" PRId64, (int64_t)v); break;
		case NVLP_FT_X: fprintf(o, "\"0x%" PRIx64 "\"", v); break;
		default: fprintf(o, "%" PRIu64, v); break;
		}
		const char *label = field_label(rec->kind, fname, v);
		if (label) {
			fprintf(o, ",\"%s_name\":", fname);
			nvlp_json_cstr(o, label);
		}
	}
}

/* The record's blob as its kind reads it */
static void json_blob(FILE *o, const struct nvlp_record *rec)
{
	switch (rec->kind) {
	case NVLP_K_HEADER:
		fputs(",\"header\":", o);
		json_header_object(o, rec);
		break;
	case NVLP_K_STACK:
		fputs(",\"frames\":[", o);
		for (uint32_t j = 0; j + 8 <= rec->blob_len; j += 8) {
			uint64_t pc;
			memcpy(&pc, rec->blob + j, 8);
			fprintf(o, "%s\"0x%" PRIx64 "\"", j ? "," : "", pc);
		}
		putc(']', o);
		break;
	case NVLP_K_MODULE:
		fputs(",\"path\":", o);
		nvlp_json_string(o, (const char *)rec->blob, rec->blob_len);
		break;
	case NVLP_K_DEVICE:
	case NVLP_K_SYMBOL:
		break; /* name */
	case NVLP_K_BUILDID:
		fputs(",\"build_id\":\"", o);
		for (uint32_t j = 0; j < rec->blob_len; j++)
			fprintf(o, "%02x", rec->blob[j]);
		putc('"', o);
		break;
	default:
		fputs(rec->kind == NVLP_K_NOTE ? ",\"message\":" : rec->kind == NVLP_K_STRING ? ",\"text\":" : ",\"blob\":", o);
		nvlp_json_string(o, (const char *)rec->blob, rec->blob_len);
	}
}

static void dump_json(FILE *o, const struct file_ctx *c, const nvlp_reader *r,
		      const struct nvlp_record *rec)
{
	json_origin(o, c, r, rec);
	json_fields(o, r, rec);
	if (rec->kind == NVLP_K_NCCL)
		fprintf(o, ",\"class\":\"%c\"", nvlp_nccl_fn_class((unsigned)rec->f[0]));
	if (rec->blob)
		json_blob(o, rec);
	fputs("}\n", o);
}

/* Opens each trace named by args (files or directories). @return 0, or 1 if any could not be
 * read; each failure is reported on stderr as it happens. */
typedef int (*file_fn)(const char *path, nvlp_reader *r, void *arg);
static int for_each_trace(int nargs, char **args, file_fn fn, void *arg)
{
	int rc = 0;
	for (int i = 0; i < nargs; i++) {
		struct nvlp_paths ps = {0};
		char err[1024];
		if (nvlp_paths_add(&ps, args[i], err, sizeof(err)) < 0) {
			fflush(stdout);
			fprintf(stderr, "nvlprof: %s\n", err);
			rc = 1;
		}
		for (size_t j = 0; j < ps.n; j++) {
			nvlp_reader *r = nvlp_reader_open(ps.v[j], err, sizeof(err));
			if (!r) {
				fflush(stdout);
				fprintf(stderr, "nvlprof: %s\n", err);
				rc = 1;
				continue;
			}
			if (fn(ps.v[j], r, arg) != 0)
				rc = 1;
			nvlp_reader_close(r);
		}
		nvlp_paths_free(&ps);
	}
	return rc;
}

/* After the last record: a file cut short is still useful, so it only warns; a read error fails. */
static int finish_file(nvlp_reader *r, int last)
{
	fflush(stdout);
	if (last < 0) {
		fprintf(stderr, "nvlprof: %s\n", nvlp_reader_error(r));
		return 1;
	}
	if (nvlp_reader_truncated(r))
		fprintf(stderr, "nvlprof: warning: %s\n", nvlp_reader_error(r));
	return 0;
}

struct dump_opts {
	int json, schema;
	int nfiles;
};

/* Under a schema line of a kind this build knows: what its coded fields hold. */
static void schema_notes(const char *line, size_t len)
{
	const char *name = line + 5, *sp = memchr(name, ' ', len - 5);
	unsigned kind = 0;
	for (unsigned k = 1; sp && k < NVLP_K_COUNT && !kind; k++)
		if (strlen(nvlp_kind_info(k)->name) == (size_t)(sp - name) &&
		    !memcmp(nvlp_kind_info(k)->name, name, (size_t)(sp - name)))
			kind = k;
	const struct nvlp_kind_info *ki = kind ? nvlp_kind_info(kind) : NULL;
	for (unsigned i = 0; ki && i < ki->nfields; i++) {
		const char *m = nvlp_coded_field(kind, ki->fields[i]);
		char f[64];
		snprintf(f, sizeof f, " %s:", ki->fields[i]);
		if (m && memmem(line, len, f, strlen(f)))
			printf("    %s: %s\n", ki->fields[i], m);
	}
	for (unsigned fn = 0; kind == NVLP_K_NCCL && fn < NVLP_NCCL_FN_COUNT; fn++) {
		const char *a = nvlp_nccl_aux_name(fn, 0), *a2 = nvlp_nccl_aux_name(fn, 1);
		if (*a || *a2)
			printf("    aux, aux2 of %s: %s, %s\n", nvlp_nccl_fn_name(fn), *a ? a : "-",
			       *a2 ? a2 : "-");
	}
}

/* dump --schema: the kinds and fields the file is read with, and what this build does not know */
static int schema_one(const char *path, nvlp_reader *r, void *arg)
{
	struct dump_opts *o = arg;
	unsigned major, minor;
	size_t len;
	nvlp_reader_format(r, &major, &minor);
	const char *t = nvlp_reader_schema(r, &len), *end = t + len, *what;
	printf("%s== %s: format %u.%u, %s\n", o->nfiles++ ? "\n" : "", path, major, minor,
	       major > 1 ? "its own schema" : "no schema in the file: the built-in one of version 1");
	while (t < end) {
		const char *nl = memchr(t, '\n', (size_t)(end - t));
		size_t l = nl ? (size_t)(nl - t) : (size_t)(end - t);
		printf("%.*s\n", (int)l, t);
		if (l > 5 && !memcmp(t, "kind ", 5))
			schema_notes(t, l);
		t += l + 1;
	}
	nvlp_reader_unknown(r, &what);
	if (*what)
		printf("not known to this nvlprof (skipped): %s\n", what);
	return 0;
}

static int dump_one(const char *path, nvlp_reader *r, void *arg)
{
	struct dump_opts *o = arg;
	if (o->schema)
		return schema_one(path, r, arg);
	struct file_ctx c;
	file_ctx_init(&c, path, r);
	if (!o->json) {
		printf("%s== %s", o->nfiles++ ? "\n" : "", path);
		if (c.have_pid)
			printf(" (pid %lld", c.pid);
		if (c.have_rank)
			printf("%srank %lld", c.have_pid ? ", " : " (", c.rank);
		printf("%s\n", c.have_pid || c.have_rank ? ")" : "");
	}
	struct nvlp_record rec;
	int rc;
	while ((rc = nvlp_reader_next(r, &rec)) == 1) {
		if (o->json)
			dump_json(stdout, &c, r, &rec);
		else
			dump_text(stdout, r, &rec);
	}
	return finish_file(r, rc);
}

static void dump_usage(FILE *f)
{
	fprintf(f, "usage: nvlprof dump [--json | --schema] FILE|DIR...\n"
		   "  every record of each trace, one per line (--json: one JSON object per line)\n"
		   "  --schema: the format version, record kinds and fields each trace is read with\n");
}

/* dump and info: c's options before the traces (one at least), then fn over each trace; obuf: a
 * buffer for stdout, or NULL. @return the exit status */
static int each_trace_cmd(struct an_cmdline *c, int argc, char **argv, file_fn fn, void *arg,
                          char *obuf, size_t nbuf)
{
	c->leading = 1;
	int rc = an_parse_args(c, argc, argv);
	if (rc >= 0)
		return rc;
	if (obuf)
		setvbuf(stdout, obuf, _IOFBF, nbuf);
	rc = for_each_trace(c->nargs, c->args, fn, arg);
	return nvlp_out_finish(stdout, "standard output") < 0 ? 2 : rc;
}

int nvlp_cmd_dump(int argc, char **argv)
{
	struct dump_opts o = {0};
	const struct an_opt opts[] = {
	    {"--json", "-j", AN_OPT_FLAG, &o.json},
	    {"--schema", NULL, AN_OPT_FLAG, &o.schema},
	    {NULL},
	};
	struct an_cmdline c = {
	    .opts = opts,
	    .help = dump_usage,
	    .usage = dump_usage,
	    .unknown = {"nvlprof dump: unknown option '", "' (--json, --schema)", 1},
	    .none = {"nvlprof dump: no trace file given", NULL, 1},
	};
	static char obuf[1 << 16];
	return each_trace_cmd(&c, argc, argv, dump_one, &o, obuf, sizeof obuf);
}

/* ---- info ---- */

static void print_time(const char *label, uint64_t t_real_ns)
{
	time_t s = (time_t)(t_real_ns / 1000000000u);
	struct tm tm;
	char buf[64];
	if (t_real_ns && gmtime_r(&s, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm))
		printf("  %-9s %s.%03u UTC\n", label, buf, (unsigned)(t_real_ns / 1000000u % 1000u));
}

static const char *hdr(const nvlp_reader *r, const char *key)
{
	const char *v = nvlp_reader_header(r, key);
	return v && *v ? v : "?";
}

struct drops_tid {
	uint64_t tid, dropped;
};

/* What info tells of a trace, from one pass over its records */
struct info_scan {
	uint64_t counts[NVLP_K_COUNT], total, t_last, t_mono, t_real, end_dropped;
	int end_reason; /* -1: no END record */
	struct drops_tid drops[256];
	unsigned ndrops;
	uint64_t drops_other; /* threads past the table: counted by their largest value */
	struct an_rank_guess guess;
};

/* Keep the largest drop count of the DROPS record's thread */
static void info_drops(struct info_scan *s, const struct nvlp_rec_drops *d)
{
	unsigned j = 0;
	while (j < s->ndrops && s->drops[j].tid != d->tid)
		j++;
	if (j == s->ndrops && s->ndrops < sizeof(s->drops) / sizeof(s->drops[0]))
		s->drops[s->ndrops++] = (struct drops_tid){d->tid, 0};
	if (j < s->ndrops) {
		if (d->dropped > s->drops[j].dropped)
			s->drops[j].dropped = d->dropped;
	} else if (d->dropped > s->drops_other) {
		s->drops_other = d->dropped;
	}
}

/* Read every record into s; returns the reader's last status (< 0: read error) */
static int info_read(nvlp_reader *r, struct info_scan *s)
{
	s->end_reason = -1;
	an_rank_guess_init(&s->guess, nvlp_reader_header(r, NVLP_HDR_RANK),
	                   nvlp_reader_header(r, NVLP_HDR_WORLD_SIZE));
	struct nvlp_record rec;
	int rc;
	while ((rc = nvlp_reader_next(r, &rec)) == 1) {
		s->counts[rec.kind]++;
		s->total++;
		const struct nvlp_kind_info *ki = nvlp_kind_info(rec.kind);
		for (unsigned i = 0; i < ki->nfields; i++)
			if (ki->types[i] == NVLP_FT_T && rec.f[i] > s->t_last)
				s->t_last = rec.f[i];
		if (rec.kind == NVLP_K_NCCL) {
			const struct nvlp_rec_nccl *n = (const void *)rec.f;
			an_rank_guess_comm(&s->guess, (int)(int64_t)n->rank, (int)(int64_t)n->nranks);
		}
		if (rec.kind == NVLP_K_HEADER && s->counts[rec.kind] == 1) {
			s->t_mono = rec.f[0];
			s->t_real = rec.f[1];
		} else if (rec.kind == NVLP_K_END) {
			const struct nvlp_rec_end *e = (const void *)rec.f;
			s->end_dropped = e->dropped;
			s->end_reason = (int)e->reason;
			s->t_last = e->t;
		} else if (rec.kind == NVLP_K_DROPS) {
			info_drops(s, (const void *)rec.f);
		}
	}
	return rc;
}

/* Records lost: the threads' counts, or the END record's total if larger */
static uint64_t info_dropped(const struct info_scan *s)
{
	uint64_t dropped = s->drops_other;
	for (unsigned j = 0; j < s->ndrops; j++)
		dropped += s->drops[j].dropped;
	if (s->end_dropped > dropped)
		dropped = s->end_dropped;
	return dropped;
}

/* The process's role or rank, and where the rank comes from */
static void info_print_rank(const nvlp_reader *r, const struct info_scan *s, int rc)
{
	int rank = an_rank_guess_get(&s->guess);
	if (!an_rank_is_worker(s->counts, rc < 0 || !nvlp_reader_complete(r)))
		printf("  role      other process (no GPU work, no NCCL call: a launcher or worker)\n");
	else if (rank < 0)
		printf("  rank      unknown\n");
	else if (an_rank_guess_overrides(&s->guess))
		printf("  rank      %d (local %s) of %s (from its communicator of %d; its environment "
		       "said rank %d)\n",
		       rank, hdr(r, NVLP_HDR_LOCAL_RANK), hdr(r, NVLP_HDR_WORLD_SIZE),
		       s->guess.best_nranks, s->guess.header_rank);
	else if (s->guess.header_rank >= 0)
		printf("  rank      %d (local %s) of %s\n", rank, hdr(r, NVLP_HDR_LOCAL_RANK),
		       hdr(r, NVLP_HDR_WORLD_SIZE));
	else
		printf("  rank      %d of %d (from its largest communicator)\n", rank,
		       s->guess.best_nranks);
}

/* The environment captured by the shim, one per line */
static void info_print_env(const nvlp_reader *r)
{
	const char *text = nvlp_reader_header_text(r);
	size_t plen = strlen(NVLP_HDR_ENV_PREFIX);
	int nenv = 0;
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len > plen && !strncmp(p, NVLP_HDR_ENV_PREFIX, plen))
			printf("  %-9s %.*s\n", nenv++ ? "" : "env", (int)(len - plen), p + plen);
		p += len + (nl ? 1 : 0);
	}
}

/* Record counts by kind, drops, how the trace ended and its size */
static void info_print_records(nvlp_reader *r, const struct info_scan *s, int rc)
{
	char b2[64];
	uint64_t dropped = info_dropped(s);
	printf("  records   %" PRIu64 "\n", s->total);
	for (unsigned k = 1; k < NVLP_K_COUNT; k++)
		if (s->counts[k])
			printf("    %-12s %" PRIu64 "\n", nvlp_kind_info(k)->name, s->counts[k]);
	printf("  dropped   %" PRIu64 "%s\n", dropped, dropped ? " records (thread buffers were full)" : "");
	const char *what;
	uint64_t unknown = nvlp_reader_unknown(r, &what);
	if (unknown || *what) /* a newer nvlprof wrote it */
		printf("  unknown   %" PRIu64 " records skipped; kinds and fields this nvlprof does not "
		       "know: %s\n", unknown, what);
	if (rc < 0)
		printf("  status    read error: %s\n", nvlp_reader_error(r));
	else if (nvlp_reader_complete(r))
		printf("  status    complete (%s)\n",
		       s->end_reason >= 0 && nvlp_end_reason_name((unsigned)s->end_reason)
			       ? nvlp_end_reason_name((unsigned)s->end_reason)
			       : "end");
	else
		printf("  status    truncated: %s\n", nvlp_reader_error(r));
	uint64_t off = 0, size = 0;
	nvlp_reader_progress(r, &off, &size);
	printf("  size      %s compressed, %.2f bytes/record\n", nvlp_human_bytes(size, b2, sizeof(b2)),
	       s->total ? (double)size / (double)s->total : 0.0);
}

static int info_one(const char *path, nvlp_reader *r, void *arg)
{
	int *nfiles = arg;
	struct info_scan s = {0};
	int rc = info_read(r, &s);
	char b1[64];
	printf("%s%s\n", (*nfiles)++ ? "\n" : "", path);
	printf("  process   host %s, pid %s (parent %s)\n", hdr(r, NVLP_HDR_HOST), hdr(r, NVLP_HDR_PID),
	       hdr(r, NVLP_HDR_PPID));
	info_print_rank(r, &s, rc);
	printf("  command   %s\n", hdr(r, NVLP_HDR_CMDLINE));
	print_time("started", s.t_real);
	if (s.t_last > s.t_mono)
		printf("  duration  %s%s\n", nvlp_human_ns(s.t_last - s.t_mono, b1, sizeof(b1)),
		       s.counts[NVLP_K_END] ? "" : " (to the last record)");
	printf("  recorder  nvlprof %s, trace format %s\n", hdr(r, NVLP_HDR_VERSION),
	       hdr(r, NVLP_HDR_FORMAT));
	info_print_env(r);
	info_print_records(r, &s, rc);
	fflush(stdout);
	return rc < 0;
}

static void info_usage(FILE *f)
{
	fprintf(f, "usage: nvlprof info FILE|DIR...\n");
}

static void info_help(FILE *f)
{
	info_usage(f);
	fprintf(f, "  header, record counts, drops and completeness of each trace\n");
}

int nvlp_cmd_info(int argc, char **argv)
{
	struct an_cmdline c = {
	    .help = info_help,
	    .usage = info_usage,
	    .unknown = {"nvlprof info: unknown option '", "'", 1},
	    .none = {"nvlprof info: no trace file given", NULL, 1},
	};
	int nfiles = 0;
	return each_trace_cmd(&c, argc, argv, info_one, &nfiles, NULL, 0);
}

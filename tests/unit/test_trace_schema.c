/* test_trace_schema.c: the self-describing format: a newer writer's trace (an unknown kind, extra and missing fields) read by this build, the version window, bad schemas. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "check.h"
#include "nvlp_trace.h"

static char dir[256] = "/tmp/nvlp-test-schema.XXXXXX";

/* ---- a hand-made writer: any schema, any kind codes (what a later nvlprof would write) ---- */
struct enc {
	uint8_t raw[1 << 16], file[1 << 17];
	size_t n, flen;
	uint64_t prev[NVLP_MAX_FILE_KINDS][NVLP_MAX_FILE_FIELDS];
};

static void put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4); /* little-endian host (the reader checks it too) */
}

static void e_varint(struct enc *e, uint64_t v)
{
	while (v >= 0x80) {
		e->raw[e->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	e->raw[e->n++] = (uint8_t)v;
}

static void e_start(struct enc *e, uint32_t version)
{
	memset(e, 0, sizeof *e);
	memcpy(e->file, "NVLPROF", 8);
	put_u32(e->file + 8, version);
	put_u32(e->file + 12, NVLP_ENDIAN_MARK);
	e->flen = 16;
}

/* A record of code with nf fields (values v, in the file's order); blob NULL: the code has none. */
static void e_rec(struct enc *e, unsigned code, unsigned nf, const uint64_t *v, const char *blob)
{
	e_varint(e, code);
	for (unsigned i = 0; i < nf; i++) {
		uint64_t d = v[i] - e->prev[code][i];
		e->prev[code][i] = v[i];
		e_varint(e, (d << 1) ^ (uint64_t)((int64_t)d >> 63));
	}
	if (blob) {
		e_varint(e, strlen(blob));
		memcpy(e->raw + e->n, blob, strlen(blob));
		e->n += strlen(blob);
	}
}

static void e_schema(struct enc *e, const char *text)
{
	e_varint(e, NVLP_SCHEMA_CODE);
	e_varint(e, strlen(text));
	memcpy(e->raw + e->n, text, strlen(text));
	e->n += strlen(text);
}

static void e_header(struct enc *e)
{
	uint64_t h[2] = {100, 200};
	e_rec(e, NVLP_K_HEADER, 2, h, "pid=7\nrank=0\n");
}

/* Closes the frame (compressed, crc'd header) and resets the delta state. */
static void e_flush(struct enc *e)
{
	uint8_t *h = e->file + e->flen;
	size_t c = ZSTD_compress(h + 16, sizeof e->file - e->flen - 16, e->raw, e->n, 1);
	put_u32(h, NVLP_FRAME_MAGIC);
	put_u32(h + 4, (uint32_t)c);
	put_u32(h + 8, (uint32_t)e->n);
	put_u32(h + 12, nvlp_crc32(h, 12));
	e->flen += 16 + c;
	e->n = 0;
	memset(e->prev, 0, sizeof e->prev);
}

static const char *e_write(struct enc *e, const char *name)
{
	static char path[sizeof dir + 64];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (f) {
		fwrite(e->file, 1, e->flen, f);
		fclose(f);
	}
	return path;
}

/* ---- the newer writer's schema: this build's, edited ---- */

/* This build's schema line of kind k, without its newline. */
static void builtin_line(unsigned k, char *out, size_t len)
{
	char *s = nvlp_schema_text(NULL), key[64];
	snprintf(key, sizeof key, "\nkind %s ", nvlp_kind_info(k)->name);
	char *p = strstr(s, key) + 1, *nl = strchr(p, '\n');
	snprintf(out, len, "%.*s", (int)(nl - p), p);
	free(s);
}

/* NCCL's fields with future_a after dur (index 2) and future_b at the end. */
#define NCCL_NF (sizeof(struct nvlp_rec_nccl) / 8 + 2)
static void newer_nccl_line(char *out, size_t len)
{
	const struct nvlp_kind_info *ki = nvlp_kind_info(NVLP_K_NCCL);
	size_t n = (size_t)snprintf(out, len, "kind nccl %u -", NVLP_K_NCCL);
	for (unsigned i = 0; i < ki->nfields; i++) {
		n += (size_t)snprintf(out + n, len - n, " %s:%c", ki->fields[i], "UIXTS"[ki->types[i]]);
		if (i == 2)
			n += (size_t)snprintf(out + n, len - n, " future_a:U");
	}
	snprintf(out + n, len - n, " future_b:X");
}

/* The record in the newer layout (file order) from this build's struct plus the two new fields. */
static void newer_nccl(const struct nvlp_rec_nccl *r, uint64_t fa, uint64_t fb, uint64_t *v)
{
	const uint64_t *f = (const uint64_t *)r;
	unsigned n = 0;
	for (unsigned i = 0; i < NCCL_NF - 2; i++) {
		v[n++] = f[i];
		if (i == 2)
			v[n++] = fa;
	}
	v[n++] = fb;
}

static char *newer_schema(void)
{
	static char s[8192];
	char line[2048];
	size_t n = (size_t)snprintf(s, sizeof s, "nvlp-schema 2.7\n");
	const unsigned keep[] = {NVLP_K_HEADER, NVLP_K_STRING, NVLP_K_KERNEL, NVLP_K_END};
	for (unsigned i = 0; i < sizeof keep / sizeof keep[0]; i++) {
		builtin_line(keep[i], line, sizeof line);
		n += (size_t)snprintf(s + n, sizeof s - n, "%s\n", line);
	}
	newer_nccl_line(line, sizeof line);
	n += (size_t)snprintf(s + n, sizeof s - n, "%s\n", line);
	/* an older writer's copy: three fields, in another order */
	n += (size_t)snprintf(s + n, sizeof s - n, "kind copy %u - bytes:U fn:U t_enter:T\n",
			      NVLP_K_COPY);
	/* kinds this build does not know; one it knows without a blob, here with one */
	n += (size_t)snprintf(s + n, sizeof s - n,
			      "kind gizmo 40 blob g1:U g2:X g3:T\nkind widget 41 - w1:U\n"
			      "kind drops %u blob tid:U dropped:U t:T\n"
			      "enum nccl.fn 0=ncclGetUniqueId\n",
			      NVLP_K_DROPS);
	return s;
}

/* Frame 2: known records between unknown ones; frame 3: more of both, then END. */
static const char *write_newer(struct enc *e)
{
	e_start(e, NVLP_FORMAT_VERSION);
	e_schema(e, newer_schema());
	e_header(e);
	e_flush(e);
	uint64_t v[NCCL_NF], g[3] = {1, 2, 3}, w1 = 5, cp[3] = {4096, NVLP_CUDA_MEMCPY_PEER, 3000};
	struct nvlp_rec_nccl a = {.fn = NVLP_NCCL_ALL_REDUCE, .t_enter = 1000, .dur = 5, .tid = 9,
				  .comm = 0xabc, .rank = 1, .nranks = 2, .seq = 1, .aux2 = 0};
	newer_nccl(&a, 77, 0xdead, v);
	e_rec(e, NVLP_K_NCCL, NCCL_NF, v, NULL);
	e_rec(e, 40, 3, g, "xyz");
	uint64_t sid = 1;
	e_rec(e, NVLP_K_STRING, 1, &sid, "kern");
	e_rec(e, 41, 1, &w1, NULL);
	a.seq = 2, a.t_enter = 2000;
	newer_nccl(&a, 78, 0xdead, v);
	e_rec(e, NVLP_K_NCCL, NCCL_NF, v, NULL);
	e_rec(e, NVLP_K_COPY, 3, cp, NULL);
	uint64_t dr[3] = {9, 4, 2500};
	e_rec(e, NVLP_K_DROPS, 3, dr, "q");
	struct nvlp_rec_kernel k = {.start = 10, .dur = 3, .name = 1};
	e_rec(e, NVLP_K_KERNEL, sizeof k / 8, (const uint64_t *)&k, NULL);
	g[0] = 11;
	e_rec(e, 40, 3, g, "");
	a.seq = 3, a.t_enter = 3000;
	newer_nccl(&a, 79, 0xbeef, v);
	e_rec(e, NVLP_K_NCCL, NCCL_NF, v, NULL);
	e_flush(e);
	a.seq = 4, a.t_enter = 4000;
	newer_nccl(&a, 80, 0xbeef, v);
	e_rec(e, 40, 3, g, "z");
	e_rec(e, NVLP_K_NCCL, NCCL_NF, v, NULL);
	struct nvlp_rec_end end = {.t = 5000, .records = 15};
	e_rec(e, NVLP_K_END, sizeof end / 8, (const uint64_t *)&end, NULL);
	e_flush(e);
	return e_write(e, "newer.nvlp");
}

static void test_newer_writer(void)
{
	static struct enc e;
	const char *path = write_newer(&e);
	char err[512] = "";
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof err);
	CHECK(r != NULL, "a newer writer's trace (format 2.7) opens: %s", err);
	if (!r)
		return;
	unsigned major = 0, minor = 0;
	nvlp_reader_format(r, &major, &minor);
	CHECK(major == 2 && minor == 7, "its version: %u.%u", major, minor);
	struct nvlp_record rec;
	unsigned kinds[16], n = 0, seq_ok = 0, fields_ok = 1;
	while (n < 16 && nvlp_reader_next(r, &rec) == 1) {
		kinds[n++] = rec.kind;
		if (rec.kind == NVLP_K_NCCL) {
			const struct nvlp_rec_nccl *x = (const void *)rec.f;
			seq_ok += x->seq == seq_ok + 1 && x->t_enter == 1000 * x->seq;
			fields_ok &= x->fn == NVLP_NCCL_ALL_REDUCE && x->dur == 5 && x->tid == 9 &&
				     x->comm == 0xabc && x->rank == 1 && x->nranks == 2 && !x->aux2;
		}
		if (rec.kind == NVLP_K_COPY) {
			const struct nvlp_rec_copy *c = (const void *)rec.f;
			CHECK(c->bytes == 4096 && c->fn == NVLP_CUDA_MEMCPY_PEER && c->t_enter == 3000 &&
				      !c->dur && !c->src_device && !c->call_id && !c->rc,
			      "an older writer's copy: its 3 fields by name, in its order; the rest 0");
		}
		if (rec.kind == NVLP_K_KERNEL) {
			const char *s = nvlp_reader_string(r, ((const struct nvlp_rec_kernel *)rec.f)->name);
			CHECK(s && !strcmp(s, "kern") && rec.f[0] == 10 && rec.f[1] == 3,
			      "kernel after unknown records: fields and its string (%s)", s ? s : "none");
		}
	}
	const unsigned want[] = {NVLP_K_HEADER, NVLP_K_NCCL,   NVLP_K_STRING, NVLP_K_NCCL, NVLP_K_COPY,
				 NVLP_K_KERNEL, NVLP_K_NCCL,   NVLP_K_NCCL,   NVLP_K_END};
	CHECK(n == sizeof want / sizeof want[0] && !memcmp(kinds, want, sizeof want),
	      "every record of a known kind, in order, in both frames (%u records)", n);
	CHECK(seq_ok == 4 && fields_ok,
	      "nccl with two extra fields: every known field read (seq %u of 4)", seq_ok);
	const char *what = NULL;
	uint64_t unk = nvlp_reader_unknown(r, &what);
	CHECK(unk == 5, "records of kinds this build does not know skipped and counted: %llu of 5",
	      (unsigned long long)unk);
	CHECK(strstr(what, "nccl.future_a") && strstr(what, "nccl.future_b") && strstr(what, "gizmo") &&
		      strstr(what, "widget") && strstr(what, "drops") && !strstr(what, "copy"),
	      "what it does not know is named: %s", what);
	CHECK(nvlp_reader_complete(r) && !nvlp_reader_truncated(r) && !nvlp_reader_frames_skipped(r),
	      "complete, no frame lost: %s", nvlp_reader_error(r));
	nvlp_reader_close(r);
}

/* ---- the version window and bad schemas ---- */

static void expect_error(struct enc *e, const char *name, const char *want)
{
	char err[512] = "";
	const char *path = e_write(e, name);
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof err);
	CHECK(!r && strstr(err, path) == err && strstr(err, want), "%s: one-line error: %s", name, err);
	nvlp_reader_close(r);
}

/* A version 2 file whose schema is text, with a header. */
static void with_schema(struct enc *e, const char *text)
{
	e_start(e, NVLP_FORMAT_VERSION);
	e_schema(e, text);
	e_header(e);
	e_flush(e);
}

static void test_bad_schemas(void)
{
	static struct enc e;
	char line[2048], s[4096];
	builtin_line(NVLP_K_HEADER, line, sizeof line);
	with_schema(&e, "nvlp-schema 3.0\n");
	expect_error(&e, "major.nvlp", "bad schema (line 1: schema of version 3 in a version 2 file)");
	with_schema(&e, "hello\n");
	expect_error(&e, "hello.nvlp", "line 1: does not start with nvlp-schema");
	snprintf(s, sizeof s, "nvlp-schema 2.0\n%s\nkind nccl 3 - fn:U fn:U\n", line);
	with_schema(&e, s);
	expect_error(&e, "twice.nvlp", "line 3: field 'fn' twice");
	snprintf(s, sizeof s, "nvlp-schema 2.0\n%s\nkind string 1 blob id:U\n", line);
	with_schema(&e, s);
	expect_error(&e, "code.nvlp", "line 3: kind code 1 twice");
	snprintf(s, sizeof s, "nvlp-schema 2.0\n%s\nkind x 0 -\n", line);
	with_schema(&e, s);
	expect_error(&e, "code0.nvlp", "line 3: bad kind code '0'");
	size_t n = (size_t)snprintf(s, sizeof s, "nvlp-schema 2.0\n%s\nkind wide 9 -", line);
	for (int i = 0; i <= NVLP_MAX_FILE_FIELDS; i++)
		n += (size_t)snprintf(s + n, sizeof s - n, " f%d:U", i);
	snprintf(s + n, sizeof s - n, "\n");
	with_schema(&e, s);
	expect_error(&e, "wide.nvlp", "line 3: more than 64 fields");
	/* written like version 1 but marked 2: no schema first */
	e_start(&e, NVLP_FORMAT_VERSION);
	e_header(&e);
	e_flush(&e);
	expect_error(&e, "noschema.nvlp", "format version 2 without its schema record first");
	e_start(&e, NVLP_FORMAT_VERSION + 1);
	expect_error(&e, "v3.nvlp", "trace format version 3, this nvlprof reads versions 1 to 2");
}

/* A code the schema does not declare is corruption, as before: its frame is lost, not the file. */
static void test_undeclared_code(void)
{
	static struct enc e;
	char line[2048], s[4096];
	builtin_line(NVLP_K_HEADER, line, sizeof line);
	size_t n = (size_t)snprintf(s, sizeof s, "nvlp-schema 2.0\n%s\n", line);
	builtin_line(NVLP_K_END, line, sizeof line);
	snprintf(s + n, sizeof s - n, "%s\n", line);
	with_schema(&e, s);
	uint64_t x = 1, end[4] = {9, 1, 0, 0};
	e_rec(&e, 50, 1, &x, NULL);
	e_flush(&e);
	e_rec(&e, NVLP_K_END, 4, end, NULL);
	e_flush(&e);
	char err[512] = "";
	nvlp_reader *r = nvlp_reader_open(e_write(&e, "undeclared.nvlp"), err, sizeof err);
	struct nvlp_record rec;
	unsigned got = 0, last = 0;
	while (r && nvlp_reader_next(r, &rec) == 1)
		got++, last = rec.kind;
	CHECK(r && got == 2 && last == NVLP_K_END && nvlp_reader_frames_skipped(r) == 1 &&
		      strstr(nvlp_reader_error(r), "unknown kind 50"),
	      "an undeclared code: its frame skipped, the next read (%u records): %s", got,
	      r ? nvlp_reader_error(r) : err);
	nvlp_reader_close(r);
}

/* ---- damaged schemas: never a crash, either a one-line error or records read ---- */

static uint64_t seed = 88172645463325252ull;
static unsigned rnd(unsigned n)
{
	seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
	return (unsigned)(seed % n);
}

/* One random edit of text (len bytes, room for cap): a byte changed, deleted or inserted, or a
 * run of it repeated elsewhere. @return the new length */
static size_t edit(char *text, size_t len, size_t cap)
{
	static const char pick[] = " :\n-0123456789UIXTSabkindblob_";
	size_t at = rnd((unsigned)len + 1);
	switch (rnd(4)) {
	case 0:
		if (at < len)
			text[at] = pick[rnd(sizeof pick - 1)];
		return len;
	case 1:
		if (at < len)
			memmove(text + at, text + at + 1, len - at - 1), len--;
		return len;
	case 2:
		if (len + 1 < cap)
			memmove(text + at + 1, text + at, len - at), text[at] = pick[rnd(sizeof pick - 1)], len++;
		return len;
	default: {
		size_t from = rnd((unsigned)len), n = 1 + rnd(80);
		if (from + n > len)
			n = len - from;
		if (len + n < cap) {
			memmove(text + at + n, text + at, len - at);
			memmove(text + at, text + (from < at ? from : from + n), n);
			len += n;
		}
		return len;
	}
	}
}

static void test_damaged_schemas(void)
{
	static struct enc e;
	char *builtin = nvlp_schema_text(NULL), text[8192], err[512];
	unsigned refused = 0, read = 0, bad_msg = 0;
	for (unsigned it = 0; it < 3000; it++) {
		size_t len = (size_t)snprintf(text, sizeof text, "%s", builtin);
		for (unsigned k = 1 + rnd(6); k > 0; k--)
			len = edit(text, len, sizeof text - 1);
		text[len] = 0;
		with_schema(&e, text);
		struct nvlp_rec_nccl a = {.fn = NVLP_NCCL_ALL_REDUCE, .seq = it, .t_enter = it};
		uint64_t g[3] = {1, 2, 3};
		e_rec(&e, NVLP_K_NCCL, sizeof a / 8, (const uint64_t *)&a, NULL);
		e_rec(&e, 40, 3, g, NULL);
		e_rec(&e, NVLP_K_NCCL, sizeof a / 8, (const uint64_t *)&a, NULL);
		e_flush(&e);
		const char *path = e_write(&e, "damaged.nvlp");
		nvlp_reader *r = nvlp_reader_open(path, err, sizeof err);
		if (!r) {
			refused++;
			bad_msg += strstr(err, path) != err || strchr(err, '\n') != NULL;
			continue;
		}
		struct nvlp_record rec;
		while (nvlp_reader_next(r, &rec) == 1)
			bad_msg += rec.kind == 0 || rec.kind >= NVLP_K_COUNT;
		const char *what;
		nvlp_reader_unknown(r, &what);
		bad_msg += strlen(what) >= 256;
		read++;
		nvlp_reader_close(r);
	}
	free(builtin);
	CHECK(bad_msg == 0 && refused > 100 && read > 100,
	      "3000 damaged schemas: %u refused with a one-line error, %u read (only valid kinds "
	      "handed out)",
	      refused, read);
}

/* ---- version 1 (no schema) and this build's own traces ---- */

static void test_v1_and_own(void)
{
	static struct enc e;
	e_start(&e, 1);
	e_header(&e);
	struct nvlp_rec_nccl a = {.fn = NVLP_NCCL_SEND, .seq = 42, .aux2 = 1, .peer = 3};
	e_rec(&e, NVLP_K_NCCL, sizeof a / 8, (const uint64_t *)&a, NULL);
	e_flush(&e);
	char err[512] = "";
	nvlp_reader *r = nvlp_reader_open(e_write(&e, "v1.nvlp"), err, sizeof err);
	struct nvlp_record rec;
	int ok = r && nvlp_reader_next(r, &rec) == 1 && rec.kind == NVLP_K_HEADER &&
		 nvlp_reader_next(r, &rec) == 1 && rec.kind == NVLP_K_NCCL &&
		 !memcmp(rec.f, &a, sizeof a);
	unsigned major = 0, minor = 9;
	size_t len = 0;
	const char *sch = r ? nvlp_reader_schema(r, &len) : "";
	if (r)
		nvlp_reader_format(r, &major, &minor);
	CHECK(ok && major == 1 && minor == 0 && !strncmp(sch, "nvlp-schema 1.0\nkind header 1 blob", 34),
	      "a version 1 trace (no schema) reads with the built-in schema of version 1: %s", err);
	nvlp_reader_close(r);

	char path[sizeof dir + 16];
	snprintf(path, sizeof path, "%s/own.nvlp", dir);
	nvlp_writer *w = nvlp_writer_open(path, "pid=1\n", 1, 2);
	nvlp_writer_add(w, NVLP_K_NCCL, &a, NULL, 0);
	uint64_t recs = 0;
	nvlp_writer_stats(w, &recs, NULL, NULL);
	nvlp_writer_close(w);
	r = nvlp_reader_open(path, err, sizeof err);
	size_t tlen = 0;
	char *text = nvlp_schema_text(&tlen);
	const char *what = "?";
	sch = r ? nvlp_reader_schema(r, &len) : "";
	if (r)
		nvlp_reader_format(r, &major, &minor);
	ok = r && nvlp_reader_next(r, &rec) == 1 && rec.kind == NVLP_K_HEADER &&
	     nvlp_reader_next(r, &rec) == 1 && rec.kind == NVLP_K_NCCL && !memcmp(rec.f, &a, sizeof a);
	CHECK(ok && major == NVLP_FORMAT_VERSION && minor == NVLP_FORMAT_MINOR && len == tlen &&
		      !memcmp(sch, text, len) && r && !nvlp_reader_unknown(r, &what) && !*what &&
		      recs == 2,
	      "this build's trace carries its schema first (%zu bytes, not counted as a record) and "
	      "reads back with nothing unknown",
	      tlen);
	free(text);
	nvlp_reader_close(r);
}

/* --newer-in DIR: only write the newer writer's trace, DIR/newer.nvlp (for tests/trace/) */
int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--newer-in")) {
		static struct enc e;
		snprintf(dir, sizeof dir, "%s", argv[2]);
		write_newer(&e);
		return 0;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_newer_writer();
	test_bad_schemas();
	test_undeclared_code();
	test_damaged_schemas();
	test_v1_and_own();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		perror(cmd);
	return CHECK_DONE();
}

/* test_trace.c: writer/reader round trip of every record kind, frames, strings, header, metadata, bad files. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nvlp_trace.h"

static char dir[] = "/tmp/nvlp-test-trace.XXXXXX";

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Values chosen to stress the delta/zigzag/varint paths: extremes, sign flips, small steps. */
static uint64_t field_value(unsigned rec, unsigned field)
{
	static const uint64_t special[] = {0,
					   1,
					   UINT64_MAX,
					   (uint64_t)INT64_MIN,
					   (uint64_t)INT64_MAX,
					   (uint64_t)-1000,
					   1ull << 63 | 1,
					   0x7f,
					   0x80,
					   0x3fff,
					   0x4000,
					   1000000000000ull};
	unsigned n = sizeof(special) / sizeof(special[0]);
	switch ((rec + field) % 4) {
	case 0: return special[(rec * 7 + field) % n];
	case 1: return next_rand();
	case 2: return rec * 1000 + field;
	default: return (uint64_t)-(int64_t)(rec + field);
	}
}

struct saved {
	unsigned kind;
	uint64_t f[NVLP_MAX_FIELDS];
	uint8_t *blob;
	uint32_t blob_len;
};

static void write_file(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (n && write(fd, data, n) != (ssize_t)n)
			perror("write");
		close(fd);
	}
}

static void test_roundtrip(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/rt.nvlp", dir);
	const char *hdr = "host=node1\npid=4242\nrank=3\ncmdline=python train.py --x=1\nempty=\n";
	nvlp_writer *w = nvlp_writer_open(path, hdr, 111, 222);
	CHECK(w != NULL, "writer opens %s", path);
	if (!w)
		return;
	enum { PER_KIND = 40 };
	static struct saved recs[NVLP_K_COUNT * PER_KIND + 8];
	unsigned n = 0, frames_flushed = 0;
	/* the HEADER the writer wrote itself */
	recs[n].kind = NVLP_K_HEADER;
	recs[n].f[0] = 111;
	recs[n].f[1] = 222;
	recs[n].blob = (uint8_t *)strdup(hdr);
	recs[n].blob_len = (uint32_t)strlen(hdr);
	n++;
	int add_ok = 1;
	for (unsigned i = 0; i < PER_KIND; i++) {
		for (unsigned k = 1; k < NVLP_K_COUNT; k++) {
			if (k == NVLP_K_HEADER || k == NVLP_K_END)
				continue;
			const struct nvlp_kind_info *ki = nvlp_kind_info(k);
			struct saved *s = &recs[n++];
			s->kind = k;
			for (unsigned f = 0; f < ki->nfields; f++)
				s->f[f] = field_value(i, f + k);
			if (k == NVLP_K_STRING)
				s->f[0] = i + 1;
			if (ki->has_blob) {
				/* lengths: empty, small, and the maximum */
				uint32_t len = i % 10 == 3 ? NVLP_MAX_BLOB : i % 5 == 0 ? 0 : (uint32_t)(next_rand() % 300);
				s->blob = malloc(len + 1);
				for (uint32_t b = 0; b < len; b++)
					s->blob[b] = k == NVLP_K_STRING ? (uint8_t)('a' + (b + i) % 26) : (uint8_t)next_rand();
				s->blob_len = len;
			}
			if (nvlp_writer_add(w, k, s->f, s->blob, s->blob_len) != 0)
				add_ok = 0;
		}
		if (i % 7 == 6) { /* many frames, each with fresh delta state */
			if (nvlp_writer_flush(w) != 0)
				add_ok = 0;
			frames_flushed++;
		}
	}
	struct saved *e = &recs[n++];
	e->kind = NVLP_K_END;
	e->f[0] = 999;
	e->f[1] = n;
	if (nvlp_writer_add(w, NVLP_K_END, e->f, NULL, 0) != 0)
		add_ok = 0;
	CHECK(add_ok, "all %u records added", n);
	CHECK(nvlp_writer_pending(w) > 0, "writer has pending bytes before close");
	CHECK(nvlp_writer_flush(w) == 0 && nvlp_writer_pending(w) == 0, "flush empties the frame");
	uint64_t wrec = 0, wraw = 0, wfile = 0;
	nvlp_writer_stats(w, &wrec, &wraw, &wfile);
	CHECK(wrec == n, "writer counted %llu records (expected %u)", (unsigned long long)wrec, n);
	CHECK(nvlp_writer_close(w) == 0, "writer closes");

	char err[512] = "";
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof(err));
	CHECK(r != NULL, "reader opens (%s)", err);
	if (!r)
		return;
	CHECK(nvlp_reader_header(r, "host") && strcmp(nvlp_reader_header(r, "host"), "node1") == 0,
	      "header host");
	CHECK(nvlp_reader_header(r, "cmdline") &&
		      strcmp(nvlp_reader_header(r, "cmdline"), "python train.py --x=1") == 0,
	      "header value containing '='");
	CHECK(nvlp_reader_header(r, "empty") && nvlp_reader_header(r, "empty")[0] == 0,
	      "header empty value");
	CHECK(nvlp_reader_header(r, "nope") == NULL, "absent header key is NULL");
	CHECK(strcmp(nvlp_reader_header_text(r), hdr) == 0, "header text as written");

	struct nvlp_record rec;
	unsigned got = 0, mismatches = 0, first_bad = 0;
	int rc;
	while ((rc = nvlp_reader_next(r, &rec)) == 1) {
		if (got >= n) {
			mismatches++;
			break;
		}
		const struct saved *s = &recs[got];
		const struct nvlp_kind_info *ki = nvlp_kind_info(rec.kind);
		int same = rec.kind == s->kind && ki &&
			   memcmp(rec.f, s->f, ki->nfields * sizeof(uint64_t)) == 0 &&
			   rec.blob_len == s->blob_len &&
			   (!s->blob_len || memcmp(rec.blob, s->blob, s->blob_len) == 0) &&
			   (ki->has_blob ? rec.blob != NULL : rec.blob == NULL);
		if (!same && !mismatches++)
			first_bad = got;
		got++;
	}
	CHECK(rc == 0, "reader ends with 0");
	CHECK(got == n, "read %u records, wrote %u", got, n);
	CHECK(mismatches == 0, "every record round-trips (first mismatch at %u)", first_bad);
	CHECK(nvlp_reader_complete(r) && !nvlp_reader_truncated(r), "complete, not truncated (%s)",
	      nvlp_reader_error(r));
	const struct saved *s5 = NULL;
	for (unsigned i = 0; i < n; i++)
		if (recs[i].kind == NVLP_K_STRING && recs[i].f[0] == 5)
			s5 = &recs[i];
	const char *t5 = nvlp_reader_string(r, 5);
	CHECK(s5 && t5 && strlen(t5) == s5->blob_len && !memcmp(t5, s5->blob, s5->blob_len),
	      "string table resolves id 5");
	CHECK(nvlp_reader_string(r, 0) == NULL && nvlp_reader_string(r, 100000) == NULL,
	      "unknown string ids are NULL");
	uint64_t off = 0, size = 0;
	nvlp_reader_progress(r, &off, &size);
	CHECK(off == size && size == wfile, "consumed the whole file (%llu of %llu, writer said %llu)",
	      (unsigned long long)off, (unsigned long long)size, (unsigned long long)wfile);
	nvlp_reader_close(r);
	for (unsigned i = 0; i < n; i++)
		free(recs[i].blob);
	(void)frames_flushed;
}

/* Incompressible blob number i, reproducible for checking. */
static void fill_blob(uint8_t *b, size_t n, unsigned i)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
	for (size_t j = 0; j < n; j++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[j] = (uint8_t)x;
	}
}

/* A writer left to itself closes frames at about 1 MiB raw; random blobs make frames whose
 * compressed size exceeds the reader's read-ahead buffer, so both read paths are used. */
static void test_auto_frames(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/big.nvlp", dir);
	nvlp_writer *w = nvlp_writer_open(path, "pid=1\n", 0, 0);
	if (!w) {
		CHECK(0, "writer opens big.nvlp");
		return;
	}
	static uint8_t blob[4000], want[4000];
	struct nvlp_rec_module m = {0};
	size_t max_pending = 0;
	for (unsigned i = 0; i < 1000; i++) {
		m.base = i;
		fill_blob(blob, sizeof(blob), i);
		nvlp_writer_add(w, NVLP_K_MODULE, &m, blob, sizeof(blob));
		if (nvlp_writer_pending(w) > max_pending)
			max_pending = nvlp_writer_pending(w);
	}
	CHECK(max_pending < (1u << 20) + sizeof(blob) + 64, "pending stays under a frame (%zu)", max_pending);
	uint64_t file = 0;
	nvlp_writer_close(w);
	char err[512];
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof(err));
	unsigned got = 0, ok = 1;
	struct nvlp_record rec;
	while (r && nvlp_reader_next(r, &rec) == 1)
		if (rec.kind == NVLP_K_MODULE) {
			fill_blob(want, sizeof(want), got);
			ok &= rec.f[0] == got && rec.blob_len == sizeof(want) && !memcmp(rec.blob, want, sizeof(want));
			got++;
		}
	if (r)
		nvlp_reader_progress(r, NULL, &file);
	CHECK(got == 1000 && ok && file > 4000000, "4 MB of random blobs over several large frames read back (%u)", got);
	CHECK(r && nvlp_reader_truncated(r), "no END record -> truncated");
	CHECK(r && strstr(nvlp_reader_error(r), "without an END record"), "says why: %s",
	      r ? nvlp_reader_error(r) : "");
	nvlp_reader_close(r);

	/* cut inside the last large frame: the direct-read path must see the short read */
	if (truncate(path, (off_t)file - 1000) != 0)
		perror("truncate");
	r = nvlp_reader_open(path, err, sizeof(err));
	unsigned got2 = 0;
	while (r && nvlp_reader_next(r, &rec) == 1)
		got2 += rec.kind == NVLP_K_MODULE;
	CHECK(r && got2 > 0 && got2 < got && nvlp_reader_truncated(r) &&
		      strstr(nvlp_reader_error(r), "cut short after frame"),
	      "large frame cut short: %u whole-frame records, %s", got2, r ? nvlp_reader_error(r) : err);
	nvlp_reader_close(r);
}

static void test_writer_rejects(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/rej.nvlp", dir);
	nvlp_writer *w = nvlp_writer_open(path, NULL, 0, 0);
	uint64_t f[NVLP_MAX_FIELDS] = {0};
	static uint8_t big[NVLP_MAX_BLOB + 1];
	CHECK(w && nvlp_writer_add(w, 0, f, NULL, 0) == -1, "kind 0 rejected");
	CHECK(w && nvlp_writer_add(w, NVLP_K_COUNT, f, NULL, 0) == -1, "kind past the end rejected");
	CHECK(w && nvlp_writer_add(w, NVLP_K_NOTE, f, big, sizeof(big)) == -1 && errno == EINVAL,
	      "blob over NVLP_MAX_BLOB rejected");
	CHECK(w && nvlp_writer_add(w, NVLP_K_NOTE, f, big, NVLP_MAX_BLOB) == 0, "max blob accepted");
	nvlp_writer_close(w);
	CHECK(nvlp_writer_open("/nonexistent-dir/x.nvlp", NULL, 0, 0) == NULL && errno == ENOENT,
	      "open in a missing dir fails with ENOENT");
	/* a header longer than a blob keeps whole lines */
	size_t hl = 70000;
	char *h = malloc(hl + 1);
	for (size_t i = 0; i < hl; i++)
		h[i] = i % 20 == 19 ? '\n' : 'k';
	h[hl] = 0;
	w = nvlp_writer_open(path, h, 0, 0);
	nvlp_writer_close(w);
	char err[512];
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof(err));
	const char *t = r ? nvlp_reader_header_text(r) : "";
	size_t tl = strlen(t);
	CHECK(r && tl <= NVLP_MAX_BLOB && tl > 60000 && t[tl - 1] == '\n', "long header cut at a line (%zu)", tl);
	nvlp_reader_close(r);
	free(h);
}

static void expect_open_error(const char *name, const void *data, size_t n, const char *want)
{
	char path[256], err[512] = "";
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	write_file(path, data, n);
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof(err));
	CHECK(r == NULL && strstr(err, want) && strstr(err, path) == err,
	      "%s: rejected naming the file: '%s'", name, err);
	nvlp_reader_close(r);
}

static void test_bad_files(void)
{
	expect_open_error("empty.nvlp", "", 0, "not an nvlprof trace");
	expect_open_error("text.nvlp", "hello world, this is not a trace\n", 33, "not an nvlprof trace");
	uint8_t pre[16] = "NVLPROF";
	uint32_t v = 7, mark = NVLP_ENDIAN_MARK;
	memcpy(pre + 8, &v, 4);
	memcpy(pre + 12, &mark, 4);
	expect_open_error("v7.nvlp", pre, 16, "trace format version 7, this nvlprof reads versions 1 to 2");
	v = 0;
	memcpy(pre + 8, &v, 4);
	expect_open_error("v0.nvlp", pre, 16, "trace format version 0, this nvlprof reads versions 1 to 2");
	v = NVLP_FORMAT_VERSION;
	mark = __builtin_bswap32(NVLP_ENDIAN_MARK);
	memcpy(pre + 8, &v, 4);
	memcpy(pre + 12, &mark, 4);
	expect_open_error("be.nvlp", pre, 16, "byte order");
	mark = NVLP_ENDIAN_MARK;
	memcpy(pre + 12, &mark, 4);
	expect_open_error("preamble-only.nvlp", pre, 16, "cut short before its header");
	expect_open_error("half-preamble.nvlp", pre, 10, "cut short");
	char err[512] = "";
	CHECK(nvlp_reader_open(dir, err, sizeof(err)) == NULL && strstr(err, "directory"),
	      "directory rejected: %s", err);
	char missing[300];
	snprintf(missing, sizeof(missing), "%s/missing.nvlp", dir);
	CHECK(nvlp_reader_open(missing, err, sizeof(err)) == NULL && strstr(err, "No such file"),
	      "missing file: %s", err);
}

static void test_metadata(void)
{
	CHECK(nvlp_kind_info(0) == NULL && nvlp_kind_info(NVLP_K_COUNT) == NULL, "invalid kinds");
	const struct nvlp_kind_info *ki = nvlp_kind_info(NVLP_K_NCCL);
	CHECK(ki && strcmp(ki->name, "nccl") == 0 && !ki->has_blob &&
		      ki->nfields == sizeof(struct nvlp_rec_nccl) / 8,
	      "nccl kind info");
	CHECK(ki && strcmp(ki->fields[9], "bytes") == 0 && ki->types[14] == NVLP_FT_X,
	      "nccl field names/types");
	CHECK(nvlp_kind_info(NVLP_K_HEADER)->has_blob && nvlp_kind_info(NVLP_K_STACK)->has_blob,
	      "blob kinds");
	CHECK(strcmp(nvlp_nccl_fn_name(NVLP_NCCL_ALL_REDUCE), "ncclAllReduce") == 0 &&
		      nvlp_nccl_fn_class(NVLP_NCCL_SEND) == 'P' &&
		      nvlp_nccl_fn_class(NVLP_NCCL_ALL_GATHER) == 'C' &&
		      strcmp(nvlp_nccl_fn_name(999), "?") == 0 && nvlp_nccl_fn_class(999) == '?',
	      "nccl fn names and classes");
	CHECK(strcmp(nvlp_cuda_fn_name(NVLP_CUDA_MEMCPY_PEER_ASYNC), "cudaMemcpyPeerAsync") == 0 &&
		      strcmp(nvlp_cuda_fn_name(NVLP_CUDA_FN_COUNT), "?") == 0,
	      "cuda fn names");
	CHECK(strcmp(nvlp_note_name(NVLP_NOTE_CUPTI_UNAVAILABLE), "cupti_unavailable") == 0 &&
		      strcmp(nvlp_note_name(1000), "?") == 0,
	      "note names");
	CHECK(nvlp_nccl_dtype_size(9) == 2 && strcmp(nvlp_nccl_dtype_name(9), "bf16") == 0 &&
		      nvlp_nccl_dtype_size(10) == 1 && strcmp(nvlp_nccl_dtype_name(11), "f8e5m2") == 0 &&
		      nvlp_nccl_dtype_size(7) == 4 && nvlp_nccl_dtype_size(8) == 8 &&
		      nvlp_nccl_dtype_size(12) == 0 && nvlp_nccl_dtype_size(-1) == 0 &&
		      strcmp(nvlp_nccl_dtype_name(12), "?") == 0,
	      "nccl dtypes incl. bf16/fp8");
	CHECK(nvlp_crc32("123456789", 9) == 0xCBF43926u, "crc32 check value");
	CHECK(nvlp_hash64("a", 1, 0) == 0xaf63dc4c8601ec8cull, "FNV-1a 64 of 'a'");
	CHECK(nvlp_hash64("a", 1, 1) != nvlp_hash64("a", 1, 0), "seed changes the hash");
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_metadata();
	test_roundtrip();
	test_auto_frames();
	test_writer_rejects();
	test_bad_files();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return CHECK_DONE();
}

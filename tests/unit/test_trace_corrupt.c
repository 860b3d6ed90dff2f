/* test_trace_corrupt.c: the reader on damaged traces: every cut point, bit flips, crafted bad frames, garbage. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "check.h"
#include "nvlp_trace.h"

static char dir[] = "/tmp/nvlp-test-corrupt.XXXXXX";
static char path[256];

enum { FRAMES = 5, PER_FRAME = 10, TOTAL = 1 + FRAMES * PER_FRAME + 1 };

static uint8_t *good;     /* the intact file */
static size_t good_len;
static size_t frame_end[FRAMES + 2]; /* file offset where frame i (1-based) ends */
static unsigned recs_through[FRAMES + 2]; /* records in frames 1..i */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void put_file(const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n))
		perror(path);
	if (fd >= 0)
		close(fd);
}

static uint8_t *get_file(size_t *n)
{
	FILE *f = fopen(path, "rb");
	static uint8_t buf[1 << 20];
	*n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	uint8_t *p = malloc(*n);
	memcpy(p, buf, *n);
	return p;
}

/* Header frame, FRAMES frames of PER_FRAME NCCL records (seq = index), END in the last frame. */
static void make_good(void)
{
	nvlp_writer *w = nvlp_writer_open(path, "pid=7\nrank=0\n", 1, 2);
	struct nvlp_rec_nccl n = {.fn = NVLP_NCCL_ALL_REDUCE, .comm = 0xabc, .nranks = 2, .count = 1 << 20};
	unsigned seq = 1;
	for (unsigned f = 0; f < FRAMES; f++) {
		for (unsigned i = 0; i < PER_FRAME; i++) {
			n.seq = seq++;
			n.t_enter = 1000000ull * n.seq + next_rand() % 1000;
			n.dur = next_rand() % 100000;
			nvlp_writer_add(w, NVLP_K_NCCL, &n, NULL, 0);
		}
		if (f == FRAMES - 1) {
			struct nvlp_rec_end e = {.t = 5, .records = TOTAL};
			nvlp_writer_add(w, NVLP_K_END, &e, NULL, 0);
		}
		nvlp_writer_flush(w);
	}
	nvlp_writer_close(w);
	good = get_file(&good_len);
	/* walk the frame headers to learn where each frame ends */
	size_t off = NVLP_PREAMBLE_SIZE;
	for (unsigned i = 1; i <= FRAMES + 1 && off + 16 <= good_len; i++) {
		uint32_t csize;
		memcpy(&csize, good + off + 4, 4);
		off += 16 + csize;
		frame_end[i] = off;
		recs_through[i] = 1 + (i - 1) * PER_FRAME + (i == FRAMES + 1);
	}
	CHECK(frame_end[FRAMES + 1] == good_len, "test file has %d frames, %zu bytes", FRAMES + 1,
	      good_len);
}

/* Reads the file at path. @return records read (-1 if open failed); *trunc, *prefix_ok set. */
static int read_all(int *trunc, int *prefix_ok, char *err, size_t errlen)
{
	nvlp_reader *r = nvlp_reader_open(path, err, errlen);
	if (!r)
		return -1;
	struct nvlp_record rec;
	int got = 0;
	uint64_t prev = 0;
	*prefix_ok = 1;
	while (nvlp_reader_next(r, &rec) == 1) {
		/* record i (1-based, after the header) of the intact file is NCCL with seq i; a
		 * corrupt frame is skipped whole, so the next record read opens a later frame */
		if (got >= 1 && rec.kind == NVLP_K_NCCL) {
			uint64_t seq = rec.f[17];
			if (rec.f[14] != 0xabc || seq > FRAMES * PER_FRAME ||
			    !(seq == prev + 1 || (seq > prev + 1 && (seq - 1) % PER_FRAME == 0)))
				*prefix_ok = 0;
			prev = seq;
		} else if (got >= 1 && rec.kind != NVLP_K_END)
			*prefix_ok = 0;
		if (got == 0 && rec.kind != NVLP_K_HEADER)
			*prefix_ok = 0;
		got++;
	}
	*trunc = nvlp_reader_truncated(r);
	snprintf(err, errlen, "%s", nvlp_reader_error(r));
	nvlp_reader_close(r);
	return got;
}

static void test_cuts(void)
{
	unsigned bad = 0, first_bad = 0;
	char err[512], last_err[512] = "";
	for (size_t cut = 0; cut < good_len; cut++) {
		put_file(good, cut);
		int trunc = 0, ok = 0;
		int got = read_all(&trunc, &ok, err, sizeof(err));
		int expect;
		if (cut < frame_end[1]) {
			expect = -1; /* no header yet: open fails */
		} else {
			unsigned i = 1;
			while (i <= FRAMES && frame_end[i + 1] <= cut)
				i++;
			expect = (int)recs_through[i];
		}
		int good_case = got == expect && (got < 0 ? err[0] != 0 : trunc && ok && err[0]);
		if (!good_case && !bad++)
			first_bad = (unsigned)cut;
		if (cut == frame_end[3] + 5)
			snprintf(last_err, sizeof(last_err), "%s", err);
	}
	CHECK(bad == 0, "every cut point 0..%zu reads its whole frames and is flagged (first bad %u)",
	      good_len - 1, first_bad);
	CHECK(strstr(last_err, "cut short after frame 3 (offset ") &&
		      strstr(last_err, "; read 21 records"),
	      "cut message: %s", last_err);
	put_file(good, good_len);
	int trunc = 1, ok = 0;
	int got = read_all(&trunc, &ok, err, sizeof(err));
	CHECK(got == TOTAL && !trunc && ok, "intact file: %d records, complete", got);
}

/* zstd ignores a few bits of a frame (bit 4 of its header descriptor, unused bits of block and
 * table headers, whose places move with the content): a flip there decodes to the same bytes, so it
 * changes nothing and may go unseen. @return 1 when buf (good with one byte changed at off)
 * decodes the frame holding off to the intact frame's raw bytes */
static int flip_changes_nothing(const uint8_t *buf, size_t off)
{
	unsigned i = 1;
	while (i <= FRAMES && frame_end[i] <= off)
		i++;
	size_t start = (i == 1 ? NVLP_PREAMBLE_SIZE : frame_end[i - 1]) + NVLP_FRAME_HEADER_SIZE;
	if (off < start)
		return 0; /* our own frame header: crc-checked */
	size_t n = frame_end[i] - start, cap = 1 << 20;
	uint8_t *a = malloc(cap), *b = malloc(cap);
	size_t na = ZSTD_decompress(a, cap, good + start, n), nb = ZSTD_decompress(b, cap, buf + start, n);
	int same = !ZSTD_isError(na) && !ZSTD_isError(nb) && na == nb && !memcmp(a, b, na);
	free(a);
	free(b);
	return same;
}

static void test_bitflips(void)
{
	unsigned undetected = 0, wrong = 0, flips = 0, opened_bad = 0;
	char err[512];
	uint8_t *buf = malloc(good_len);
	for (size_t i = 0; i < good_len; i++) {
		memcpy(buf, good, good_len);
		buf[i] ^= (uint8_t)(1u << (i % 8));
		put_file(buf, good_len);
		int trunc = 0, ok = 0;
		int got = read_all(&trunc, &ok, err, sizeof(err));
		flips++;
		if (i < NVLP_PREAMBLE_SIZE) {
			opened_bad += got < 0;
			continue;
		}
		if (got >= 0 && !ok)
			wrong++; /* a damaged file must never yield wrong values */
		if (got == TOTAL && !trunc && !flip_changes_nothing(buf, i))
			undetected++;
	}
	free(buf);
	CHECK(opened_bad == NVLP_PREAMBLE_SIZE, "every preamble flip rejected at open (%u)", opened_bad);
	CHECK(wrong == 0, "no bit flip yields a wrong record (%u of %u did)", wrong, flips);
	CHECK(undetected == 0, "every bit flip that changes data is detected (%u missed)", undetected);
}

/* Appends one frame with the given raw bytes (compressed properly, valid crc) to the intact
 * header frame, and returns what the reader says. */
static int crafted(const uint8_t *raw, size_t n, char *err, size_t errlen, int *trunc)
{
	size_t cap = frame_end[1] + 16 + ZSTD_compressBound(n);
	uint8_t *buf = malloc(cap);
	memcpy(buf, good, frame_end[1]);
	size_t c = ZSTD_compress(buf + frame_end[1] + 16, ZSTD_compressBound(n), raw, n, 1);
	uint8_t *h = buf + frame_end[1];
	uint32_t v[3] = {NVLP_FRAME_MAGIC, (uint32_t)c, (uint32_t)n};
	memcpy(h, v, 12);
	uint32_t crc = nvlp_crc32(h, 12);
	memcpy(h + 12, &crc, 4);
	put_file(buf, frame_end[1] + 16 + c);
	free(buf);
	int ok;
	return read_all(trunc, &ok, err, errlen);
}

static void test_crafted(void)
{
	char err[512];
	int trunc, got;
	/* two good NOTE records then kind 99 */
	uint8_t raw[64];
	size_t n = 0;
	for (int i = 0; i < 2; i++) {
		raw[n++] = NVLP_K_NOTE;
		for (unsigned f = 0; f < 4; f++)
			raw[n++] = 2;
		raw[n++] = 1; /* blob length */
		raw[n++] = 'x';
	}
	raw[n++] = 99;
	got = crafted(raw, n, err, sizeof(err), &trunc);
	CHECK(got == 3 && trunc && strstr(err, "corrupt frame 2") && strstr(err, "unknown kind 99"),
	      "unknown kind stops the frame after its good records: %d, %s", got, err);
	n = 0;
	raw[n++] = NVLP_K_NCCL;
	for (int i = 0; i < 11; i++)
		raw[n++] = 0xff;
	raw[n++] = 0;
	got = crafted(raw, n, err, sizeof(err), &trunc);
	CHECK(got == 1 && trunc && strstr(err, "field overflow"), "varint over 64 bits: %s", err);
	n = 0;
	raw[n++] = NVLP_K_NCCL;
	raw[n++] = 0x80;
	raw[n++] = 0x80; /* a varint that runs off the end */
	got = crafted(raw, n, err, sizeof(err), &trunc);
	CHECK(got == 1 && trunc && strstr(err, "runs past the frame"), "record past the end: %s", err);
	n = 0;
	raw[n++] = NVLP_K_NOTE;
	for (unsigned f = 0; f < 4; f++)
		raw[n++] = 0;
	raw[n++] = 0xe8; /* blob length 1000 */
	raw[n++] = 0x07;
	raw[n++] = 'x';
	got = crafted(raw, n, err, sizeof(err), &trunc);
	CHECK(got == 1 && trunc && strstr(err, "bad blob length"), "blob past the end: %s", err);

	/* a frame header with a valid crc but an absurd size must not allocate it */
	uint8_t buf[4096];
	memcpy(buf, good, frame_end[1]);
	uint32_t v[4] = {NVLP_FRAME_MAGIC, 100, 0x7fffffff, 0};
	v[3] = nvlp_crc32(v, 12);
	memcpy(buf + frame_end[1], v, 16);
	put_file(buf, frame_end[1] + 16 + 100);
	int ok;
	got = read_all(&trunc, &ok, err, sizeof(err));
	CHECK(got == 1 && trunc && strstr(err, "impossible frame size"), "huge frame size: %s", err);
}

static void test_garbage(void)
{
	uint8_t buf[3000];
	char err[512];
	unsigned weird = 0;
	for (int i = 0; i < 300; i++) {
		size_t n = 16 + next_rand() % (sizeof(buf) - 16);
		for (size_t j = 0; j < n; j++)
			buf[j] = (uint8_t)next_rand();
		size_t keep = i % 3 == 0 ? 16 : frame_end[1];
		memcpy(buf, good, keep); /* a valid start, garbage after */
		if (i % 2 && n >= keep + 16) { /* a frame header that passes the crc over garbage */
			uint32_t v[4] = {NVLP_FRAME_MAGIC, (uint32_t)(n - keep - 16),
					 (uint32_t)(next_rand() % 5000 + 1), 0};
			v[3] = nvlp_crc32(v, 12);
			memcpy(buf + keep, v, 16);
		}
		put_file(buf, n);
		int trunc = 0, ok = 0;
		int got = read_all(&trunc, &ok, err, sizeof(err));
		if (got >= 0 && (!trunc || got > 1))
			weird++;
	}
	CHECK(weird == 0, "300 garbage files: never crash, never read past the header (%u odd)", weird);
}

/* Reads the whole file: records, last kind, frames skipped, truncated/complete. */
static int read_stats(unsigned *last_kind, unsigned *skipped, int *trunc, int *complete)
{
	char err[512];
	nvlp_reader *r = nvlp_reader_open(path, err, sizeof(err));
	if (!r)
		return -1;
	struct nvlp_record rec;
	int got = 0;
	while (nvlp_reader_next(r, &rec) == 1) {
		*last_kind = rec.kind;
		got++;
	}
	*skipped = nvlp_reader_frames_skipped(r);
	*trunc = nvlp_reader_truncated(r);
	*complete = nvlp_reader_complete(r);
	nvlp_reader_close(r);
	return got;
}

/* One bad byte loses one frame: the reader resynchronises on the next valid frame header. */
static void test_resync(void)
{
	uint8_t *buf = malloc(good_len + 64);
	unsigned last = 0, skipped = 0;
	int trunc = 0, complete = 0, got;
	size_t f3 = frame_end[3]; /* frame 4 (the third data frame) starts here */
	const char *where[3] = {"its magic", "its header crc", "its compressed data"};
	size_t at[3] = {f3, f3 + 13, f3 + NVLP_FRAME_HEADER_SIZE + (frame_end[4] - f3 - 16) / 2};
	for (int k = 0; k < 3; k++) {
		memcpy(buf, good, good_len);
		buf[at[k]] ^= 0x5a;
		put_file(buf, good_len);
		got = read_stats(&last, &skipped, &trunc, &complete);
		CHECK(got == TOTAL - PER_FRAME && skipped == 1 && last == NVLP_K_END && trunc && !complete,
		      "a byte flipped in %s of frame 4 of %d loses that frame only: %d of %d records, "
		      "%u skipped, ends with END",
		      where[k], FRAMES + 1, got, TOTAL, skipped);
	}
	/* every other frame flipped: each loses itself only */
	memcpy(buf, good, good_len);
	for (unsigned i = 2; i <= FRAMES; i += 2)
		buf[frame_end[i] + 1] ^= 0xff; /* the magic of frame i + 1 */
	put_file(buf, good_len);
	got = read_stats(&last, &skipped, &trunc, &complete);
	CHECK(skipped == 2 && last == NVLP_K_END &&
		      got == TOTAL - (int)skipped * PER_FRAME,
	      "frames 3, 5, ... damaged: %u skipped, %d records, END read", skipped, got);
	/* bytes after the END record are not a cut-short trace */
	memcpy(buf, good, good_len);
	memcpy(buf + good_len, "trailing garbage", 16);
	put_file(buf, good_len + 16);
	got = read_stats(&last, &skipped, &trunc, &complete);
	CHECK(got == TOTAL && !trunc && complete && !skipped,
	      "trailing garbage after END: complete, not truncated (%d records, trunc %d)", got, trunc);
	put_file(buf, good_len + 7); /* a cut-short frame header after END */
	got = read_stats(&last, &skipped, &trunc, &complete);
	CHECK(got == TOTAL && !trunc && complete, "7 stray bytes after END: complete (trunc %d)", trunc);
	free(buf);
}

/* Only regular files are read, and opening never blocks (a FIFO named like a trace). */
static void test_not_regular(void)
{
	char fifo[300], err[512];
	snprintf(fifo, sizeof(fifo), "%s/fifo.nvlp", dir);
	int made = mkfifo(fifo, 0600) == 0;
	nvlp_reader *r = made ? nvlp_reader_open(fifo, err, sizeof(err)) : NULL;
	CHECK(made && !r && strstr(err, "not a regular file"), "a FIFO is refused without blocking: %s",
	      made ? err : "mkfifo failed");
	unlink(fifo);
	r = nvlp_reader_open("/dev/null", err, sizeof(err));
	CHECK(!r && strstr(err, "not a regular file"), "a device is refused: %s", err);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/t.nvlp", dir);
	make_good();
	test_cuts();
	test_bitflips();
	test_crafted();
	test_garbage();
	test_resync();
	test_not_regular();
	unlink(path);
	rmdir(dir);
	free(good);
	return CHECK_DONE();
}

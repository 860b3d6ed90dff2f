/* writer.c: encodes records (per-kind zigzag-delta varints) into zstd frames and appends them to a trace fd. */
#include <errno.h>  /* errno, EINVAL, EINTR */
#include <fcntl.h>  /* open */
#include <stdlib.h> /* calloc, realloc, free */
#include <string.h> /* memcpy, memset, strlen */
#include <unistd.h> /* write, close */

#include <zstd.h> /* ZSTD_CCtx, ZSTD_compress2 */

#include "nvlp_trace.h"

/* A frame is closed automatically at this raw size: keeps the reader's memory small and bounds
 * what a crash can lose, while frames stay large enough for zstd to find the repetition. */
#define FRAME_AUTO_FLUSH (1u << 20)
/* Level 3 (dfast) finds the repeats in delta streams that level 1 misses (7.9 vs 8.9 bytes per
 * DDP-like NCCL record); 16K-entry match tables keep it as fast as level 1 on 1 MiB frames (the
 * level's default tables are larger than the L2 cache and cost ~40% speed for 1% size). */
/* A frame of at most SMALL_FRAME raw bytes (the writer flushes about twice a second: a process
 * writing less than ~256 KiB a second, as the default mode does up to thousands of collectives a
 * second) is compressed at level 7 instead: 4-7% fewer bytes on real traces, 9.8% on
 * bench_trace's DDP-like stream, for ~3x the CPU (87 -> 255 ns a record), which the frame size
 * bounds to ~0.2% of a core. Larger frames (per-kernel tracing, bursts) stay at 3: their CPU is
 * what grows with the job. */
#ifndef ZSTD_LEVEL /* the fuzzer's mutator re-encodes with 1: no trace kept, speed only */
#define ZSTD_LEVEL 3
#define ZSTD_LEVEL_SMALL 7
#else
#define ZSTD_LEVEL_SMALL ZSTD_LEVEL
#endif
#define SMALL_FRAME (128u << 10)
#define ZSTD_TABLE_LOG 14
/* Worst case of one encoded record without blob: the kind and every field as 10-byte varints. */
#define REC_MAX_FIXED (10 + 10 * NVLP_MAX_FIELDS + 10)

struct nvlp_writer {
	int fd;
	int failed;       /* errno of the first write failure: later frames would follow a torn one */
	ZSTD_CCtx *cctx;  /* reused for every frame */
	uint8_t *raw;     /* encoded records of the current frame */
	size_t raw_len, raw_cap;
	uint8_t *out;     /* frame header + compressed frame */
	size_t out_cap;
	uint64_t records, raw_total, file_bytes;
	unsigned nfields[NVLP_K_COUNT]; /* copied from the kind table: no call per record */
	unsigned char has_blob[NVLP_K_COUNT];
	uint64_t prev[NVLP_K_COUNT][NVLP_MAX_FIELDS]; /* delta base, zeroed at every frame */
};

static void put_u32le(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Loops over EINTR and partial writes so that a frame is whole on disk when this returns 0. */
static int write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (k == 0) {
			errno = EIO;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 4096;
	while (n < need)
		n *= 2;
	uint8_t *p = realloc(*buf, n);
	if (!p)
		return -1;
	*buf = p;
	*cap = n;
	return 0;
}

/* The schema record, first of the first frame (code 0, no fields, blob = the schema text): readers
 * of this and later builds learn every kind's fields from it. Once per trace: 2.7 KB raw, 1.1 KB
 * compressed, ~37 us of CPU (mostly zstd's). @return 0, or -1 (errno) */
static int add_schema(nvlp_writer *w)
{
	size_t len;
	char *text = nvlp_schema_text(&len);
	if (!text) {
		errno = ENOMEM;
		return -1;
	}
	int rc = -1;
	if (len > NVLP_MAX_BLOB)
		errno = EINVAL;
	else if (reserve(&w->raw, &w->raw_cap, w->raw_len + 20 + len) < 0)
		errno = ENOMEM;
	else {
		uint8_t *p = put_varint(w->raw + w->raw_len, NVLP_SCHEMA_CODE);
		p = put_varint(p, len);
		memcpy(p, text, len);
		p += len;
		w->raw_total += (size_t)(p - (w->raw + w->raw_len));
		w->raw_len = (size_t)(p - w->raw);
		rc = 0;
	}
	free(text);
	return rc;
}

static void writer_free(nvlp_writer *w)
{
	ZSTD_freeCCtx(w->cctx);
	free(w->raw);
	free(w->out);
	free(w);
}

nvlp_writer *nvlp_writer_open_fd(int fd, const char *header_kv, uint64_t t_mono, uint64_t t_real)
{
	nvlp_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->fd = fd;
	w->cctx = ZSTD_createCCtx();
	if (!w->cctx)
		goto fail_nomem;
	/* The content checksum lets the reader tell a corrupt frame from a good one. */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_hashLog, ZSTD_TABLE_LOG)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_chainLog, ZSTD_TABLE_LOG)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1))) {
		errno = EINVAL;
		goto fail;
	}
	for (unsigned k = 1; k < NVLP_K_COUNT; k++) {
		const struct nvlp_kind_info *ki = nvlp_kind_info(k);
		w->nfields[k] = ki->nfields;
		w->has_blob[k] = (unsigned char)ki->has_blob;
	}
	if (reserve(&w->raw, &w->raw_cap, 64 * 1024) < 0)
		goto fail_nomem;

	uint8_t pre[NVLP_PREAMBLE_SIZE];
	memcpy(pre, NVLP_MAGIC, 8); /* "NVLPROF" plus its NUL */
	put_u32le(pre + 8, NVLP_FORMAT_VERSION);
	put_u32le(pre + 12, NVLP_ENDIAN_MARK);
	if (write_all(fd, pre, sizeof(pre)) < 0)
		goto fail;
	w->file_bytes = sizeof(pre);
	if (add_schema(w) < 0)
		goto fail;

	/* An over-long header keeps its whole leading lines rather than failing the trace. */
	size_t hlen = header_kv ? strlen(header_kv) : 0;
	if (hlen > NVLP_MAX_BLOB) {
		hlen = NVLP_MAX_BLOB;
		while (hlen > 0 && header_kv[hlen - 1] != '\n')
			hlen--;
	}
	struct nvlp_rec_header h = {.t_mono = t_mono, .t_real = t_real};
	if (nvlp_writer_add(w, NVLP_K_HEADER, &h, header_kv, hlen) < 0)
		goto fail;
	/* The header goes to disk at once: a job killed before the first periodic flush still leaves
	 * a file that says whose it was. */
	if (nvlp_writer_flush(w) < 0)
		goto fail;
	return w;

fail_nomem:
	errno = ENOMEM;
fail:;
	int e = errno;
	writer_free(w);
	errno = e;
	return NULL;
}

nvlp_writer *nvlp_writer_open(const char *path, const char *header_kv, uint64_t t_mono,
			      uint64_t t_real)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return NULL;
	nvlp_writer *w = nvlp_writer_open_fd(fd, header_kv, t_mono, t_real);
	if (!w) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return w;
}

int nvlp_writer_add(nvlp_writer *w, unsigned kind, const void *fields, const void *blob,
		    size_t blob_len)
{
	if (kind == NVLP_K_NONE || kind >= NVLP_K_COUNT || blob_len > NVLP_MAX_BLOB ||
	    (blob_len > 0 && !blob)) {
		errno = EINVAL;
		return -1;
	}
	if (w->failed) {
		errno = w->failed;
		return -1;
	}
	unsigned nf = w->nfields[kind];
	size_t bl = w->has_blob[kind] ? blob_len : 0;
	if (w->raw_len + REC_MAX_FIXED + bl > w->raw_cap &&
	    reserve(&w->raw, &w->raw_cap, w->raw_len + REC_MAX_FIXED + bl) < 0) {
		errno = ENOMEM;
		return -1;
	}
	uint8_t *p = w->raw + w->raw_len;
	p = put_varint(p, kind);
	const uint64_t *v = fields;
	uint64_t *prev = w->prev[kind];
	for (unsigned i = 0; i < nf; i++) {
		uint64_t d = v[i] - prev[i];
		prev[i] = v[i];
		/* zigzag: small negative deltas (a time that went back) stay small too */
		p = put_varint(p, (d << 1) ^ (uint64_t)((int64_t)d >> 63));
	}
	if (w->has_blob[kind]) {
		p = put_varint(p, bl);
		if (bl)
			memcpy(p, blob, bl);
		p += bl;
	}
	size_t n = (size_t)(p - (w->raw + w->raw_len));
	w->raw_len += n;
	w->raw_total += n;
	w->records++;
	if (w->raw_len >= FRAME_AUTO_FLUSH)
		return nvlp_writer_flush(w);
	return 0;
}

size_t nvlp_writer_pending(const nvlp_writer *w)
{
	return w->raw_len;
}

int nvlp_writer_flush(nvlp_writer *w)
{
	if (w->failed) {
		errno = w->failed;
		return -1;
	}
	if (w->raw_len == 0)
		return 0;
	size_t bound = ZSTD_compressBound(w->raw_len);
	if (reserve(&w->out, &w->out_cap, NVLP_FRAME_HEADER_SIZE + bound) < 0) {
		errno = ENOMEM;
		return -1; /* the frame stays pending; a later flush may succeed */
	}
	/* the level for this frame (the table sizes set at open stay) */
	int level = w->raw_len <= SMALL_FRAME ? ZSTD_LEVEL_SMALL : ZSTD_LEVEL;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, level))) {
		errno = EIO;
		return -1;
	}
	size_t c = ZSTD_compress2(w->cctx, w->out + NVLP_FRAME_HEADER_SIZE, bound, w->raw, w->raw_len);
	if (ZSTD_isError(c)) {
		errno = EIO;
		return -1;
	}
	uint8_t *h = w->out;
	put_u32le(h, NVLP_FRAME_MAGIC);
	put_u32le(h + 4, (uint32_t)c);
	put_u32le(h + 8, (uint32_t)w->raw_len);
	put_u32le(h + 12, nvlp_crc32(h, 12));
	/* Header and body in one buffer: one write(2) per frame in the common case. */
	if (write_all(w->fd, w->out, NVLP_FRAME_HEADER_SIZE + c) < 0) {
		w->failed = errno ? errno : EIO;
		return -1;
	}
	w->file_bytes += NVLP_FRAME_HEADER_SIZE + c;
	w->raw_len = 0;
	memset(w->prev, 0, sizeof(w->prev)); /* each frame decodes alone */
	return 0;
}

int nvlp_writer_close(nvlp_writer *w)
{
	int rc = nvlp_writer_flush(w);
	int e = errno;
	if (close(w->fd) < 0 && rc == 0) {
		rc = -1;
		e = errno;
	}
	writer_free(w);
	if (rc < 0)
		errno = e;
	return rc;
}

void nvlp_writer_abandon(nvlp_writer *w)
{
	/* Closing the fork child's copy of the descriptor leaves the parent's file untouched. */
	close(w->fd);
	writer_free(w);
}

void nvlp_writer_stats(const nvlp_writer *w, uint64_t *records, uint64_t *raw_bytes,
		       uint64_t *file_bytes)
{
	if (records)
		*records = w->records;
	if (raw_bytes)
		*raw_bytes = w->raw_total;
	if (file_bytes)
		*file_bytes = w->file_bytes;
}

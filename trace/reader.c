/* reader.c: streaming trace reader: one zstd frame in memory at a time, records decoded in place. */
#include <errno.h>    /* errno */
#include <fcntl.h>    /* open */
#include <stdarg.h>   /* va_list */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* calloc, malloc, free */
#include <string.h>   /* memcmp, memcpy, strerror, strtok_r */
#include <sys/stat.h> /* fstat */
#include <unistd.h>   /* read, close */

#include <stdatomic.h> /* atomic_exchange */
#include <zstd.h> /* ZSTD_DCtx, ZSTD_decompressDCtx */

#include "nvlp_schema.h"
#include "nvlp_strtab.h"
#include "nvlp_trace.h"

/* Zero bytes after each decoded frame: a varint that starts inside the frame and runs past its end
 * stops at the first zero, so the decode loop needs no per-byte bound check; one check per record
 * (p <= end) catches a record that ran over. Must exceed 1 + NVLP_MAX_FILE_FIELDS + 9: a record
 * may run 1 + NVLP_MAX_FILE_FIELDS bytes past the end before the check, and the decoder reads up
 * to 9 bytes at once. */
#define PAD 128
_Static_assert(PAD > 1 + NVLP_MAX_FILE_FIELDS + 9, "PAD");
/* the decoder reads 8 bytes at once, the first in the low byte */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian host");
/* Input is read in chunks of this size: a trace of small frames (a short job, a flush every few
 * records) would otherwise cost two read(2) calls per frame, which dominated decoding time. */
#define IBUF_SIZE (256u * 1024)

struct nvlp_reader {
	int fd;
	int pending_first; /* the HEADER record, decoded by open, not yet handed out */
	int complete;      /* last record was END */
	int truncated;
	int done;          /* no more records: end of data or stopped at a bad frame */
	ZSTD_DCtx *dctx;
	uint8_t *cbuf;
	size_t ccap;
	uint8_t *rbuf; /* current frame's raw bytes + PAD zero bytes */
	size_t rcap;
	const uint8_t *p, *end;
	uint64_t size, offset, frame_offset; /* file size, bytes consumed, start of current frame */
	unsigned frames;                     /* frames met so far (decoded or skipped) */
	unsigned skipped;                    /* corrupt frames skipped (resynchronised after) */
	uint64_t records;                    /* records handed out (or decoded) so far */
	struct nvlp_record first;
	char *hdr_text;   /* header blob, NUL-terminated */
	char *hdr_buf;    /* copy of it split into keys and values */
	char **hdr_kv;    /* key0, value0, key1, value1, ... */
	unsigned hdr_n;
	struct nvlp_strtab strings; /* STRING records by id */
	unsigned major;            /* the preamble's format version */
	struct nvlp_schema_map sm; /* the file's kind codes and fields, mapped onto this build's */
	uint64_t *pool;            /* delta base of every code's fields (what DIRECT records point to) */
	uint64_t out[NVLP_K_COUNT][NVLP_MAX_FIELDS]; /* MAPPED records, in this build's field order */
	uint64_t unknown;          /* records of kinds this build does not know, skipped */
	char *schema;              /* the file's schema text (version 2 on) */
	size_t schema_len;
	uint8_t *ibuf; /* read-ahead buffer: ibuf[ipos..ilen) not yet consumed */
	size_t ipos, ilen, icap; /* icap: IBUF_SIZE, or less for a smaller file */
	char err[1024];
	char path[];
};

static uint32_t get_u32le(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void set_err(nvlp_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(nvlp_reader *r, const char *fmt, ...)
{
	int n = snprintf(r->err, sizeof(r->err), "%s: ", r->path);
	if (n < 0 || (size_t)n >= sizeof(r->err))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err + n, sizeof(r->err) - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Reads up to n bytes through the read-ahead buffer, fewer only at end of file.
 * @return bytes read, or -1 (errno). */
static ssize_t read_full(nvlp_reader *r, void *buf, size_t n)
{
	uint8_t *dst = buf;
	size_t got = 0;
	while (got < n) {
		if (r->ipos < r->ilen) {
			size_t k = r->ilen - r->ipos < n - got ? r->ilen - r->ipos : n - got;
			memcpy(dst + got, r->ibuf + r->ipos, k);
			r->ipos += k;
			got += k;
			continue;
		}
		/* a large frame goes straight to its destination */
		int direct = n - got >= r->icap;
		ssize_t k = read(r->fd, direct ? dst + got : r->ibuf, direct ? n - got : r->icap);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (k == 0)
			break;
		if (direct) {
			got += (size_t)k;
		} else {
			r->ipos = 0;
			r->ilen = (size_t)k;
		}
	}
	return (ssize_t)got;
}

static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 4096; /* small traces (and every fuzz input) need no more */
	while (n < need)
		n *= 2;
	free(*buf); /* contents are not kept across frames */
	*buf = malloc(n);
	*cap = *buf ? n : 0;
	return *buf ? 0 : -1;
}

static void stop_cut(nvlp_reader *r)
{
	r->done = r->truncated = 1;
	set_err(r, "cut short after frame %u (offset %llu of %llu); read %llu records", r->frames,
		(unsigned long long)r->offset, (unsigned long long)r->size,
		(unsigned long long)r->records);
}

/* A corrupt frame: the first one is named in the error; reading goes on at the next valid frame
 * (see resync), so one bad byte loses one frame, not the rest of the file. */
static void note_corrupt(nvlp_reader *r, unsigned frame, uint64_t at, const char *why)
{
	r->skipped++;
	if (r->skipped == 1)
		set_err(r, "corrupt frame %u at offset %llu of %llu (%s) skipped; read %llu records before it",
			frame, (unsigned long long)at, (unsigned long long)r->size, why,
			(unsigned long long)r->records);
}

/* Continue reading at file offset off. @return 0, or -1 (errno) */
static int seek_to(nvlp_reader *r, uint64_t off)
{
	if (lseek(r->fd, (off_t)off, SEEK_SET) < 0)
		return -1;
	r->ipos = r->ilen = 0;
	r->offset = off;
	return 0;
}

static int plausible(uint32_t csize, uint32_t usize)
{
	return usize != 0 && usize <= NVLP_MAX_FRAME && csize != 0 &&
	       csize <= ZSTD_compressBound(NVLP_MAX_FRAME);
}

/* After a corrupt frame header: the next offset >= from holding a frame header whose magic, crc and
 * sizes are valid. Each byte is looked at once. @return 1 found (reading continues there), 0 none */
static int resync(nvlp_reader *r, uint64_t from)
{
	static const uint8_t magic[4] = {0x4e, 0x56, 0x4c, 0x46}; /* NVLP_FRAME_MAGIC, little-endian */
	uint8_t buf[64 * 1024];
	for (uint64_t at = from;;) {
		ssize_t n = pread(r->fd, buf, sizeof(buf), (off_t)at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < NVLP_FRAME_HEADER_SIZE)
			return 0;
		size_t last = (size_t)n - NVLP_FRAME_HEADER_SIZE;
		for (const uint8_t *p = buf; p <= buf + last;) {
			p = memchr(p, magic[0], (size_t)(buf + last + 1 - p));
			if (!p)
				break;
			if (!memcmp(p, magic, 4) && get_u32le(p + 12) == nvlp_crc32(p, 12) &&
			    plausible(get_u32le(p + 4), get_u32le(p + 8)))
				return seek_to(r, at + (uint64_t)(p - buf)) == 0;
			p++;
		}
		at += last + 1;
	}
}

static void stop_io(nvlp_reader *r, const char *what)
{
	r->done = r->truncated = 1;
	set_err(r, "%s after frame %u (offset %llu): %s", what, r->frames,
		(unsigned long long)r->offset, strerror(errno));
}

/* End of data where a frame header would start: done, and truncated unless the END record came
 * (what it says is added to the last corrupt frame's message, if any). @return 0 */
static int at_eof(nvlp_reader *r)
{
	r->done = 1;
	if (!r->complete) {
		r->truncated = 1;
		if (r->skipped) {
			size_t l = strlen(r->err);
			snprintf(r->err + l, sizeof(r->err) - l,
				 "; %u corrupt frame(s) in all, the file ends without an END record",
				 r->skipped);
		} else
			set_err(r,
				"ends after frame %u (offset %llu) without an END record (process "
				"killed?); read %llu records",
				r->frames, (unsigned long long)r->offset,
				(unsigned long long)r->records);
	}
	return 0;
}

/* @return what is wrong with frame header h, or NULL when its magic, crc and sizes are sound */
static const char *frame_header_bad(const uint8_t *h, uint32_t csize, uint32_t usize)
{
	return get_u32le(h) != NVLP_FRAME_MAGIC		  ? "bad frame magic"
	       : get_u32le(h + 12) != nvlp_crc32(h, 12) ? "frame header crc mismatch"
	       : !plausible(csize, usize)		  ? "impossible frame size"
							  : NULL;
}

/* The body of a frame whose header was sound, read and decompressed into rbuf. @return as
 * load_one_frame */
static int load_frame_body(nvlp_reader *r, uint32_t csize, uint32_t usize)
{
	const size_t hsize = NVLP_FRAME_HEADER_SIZE;
	if (reserve(&r->cbuf, &r->ccap, csize) < 0 || reserve(&r->rbuf, &r->rcap, usize + PAD) < 0) {
		stop_io(r, "out of memory");
		return -1;
	}
	ssize_t n = read_full(r, r->cbuf, csize);
	if (n < 0) {
		stop_io(r, "read error");
		return -1;
	}
	if ((uint64_t)n < csize) {
		if (r->offset + hsize + (uint64_t)n > r->size)
			r->size = r->offset + hsize + (uint64_t)n;
		stop_cut(r);
		return 0;
	}
	size_t got = ZSTD_decompressDCtx(r->dctx, r->rbuf, usize, r->cbuf, csize);
	if (ZSTD_isError(got) || got != usize) { /* its header was sound: the next frame follows */
		char why[160];
		snprintf(why, sizeof(why), "zstd: %s",
			 ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong decoded size");
		note_corrupt(r, ++r->frames, r->offset, why);
		r->offset += hsize + csize;
		return 2;
	}
	memset(r->rbuf + usize, 0, PAD);
	r->frame_offset = r->offset;
	r->offset += hsize + csize;
	r->frames++;
	r->p = r->rbuf;
	r->end = r->rbuf + usize;
	if (r->pool)
		memset(r->pool, 0, r->sm.pool_n * sizeof(*r->pool));
	return 1;
}

/* Loads the next frame. @return 1 loaded, 2 a corrupt frame was skipped, 0 no more data (done
 * set), -1 I/O or memory error. */
static int load_one_frame(nvlp_reader *r)
{
	uint8_t h[NVLP_FRAME_HEADER_SIZE];
	ssize_t n = read_full(r, h, sizeof(h));
	if (n < 0) {
		stop_io(r, "read error");
		return -1;
	}
	if (n == 0)
		return at_eof(r);
	if (r->offset + (uint64_t)n > r->size) /* the file grew while we read it */
		r->size = r->offset + (uint64_t)n;
	/* after the END record, what follows (trailing bytes, a frame cut short) is not data */
	if (r->complete) {
		r->done = 1;
		return 0;
	}
	if ((size_t)n < sizeof(h)) {
		stop_cut(r);
		return 0;
	}
	uint32_t csize = get_u32le(h + 4), usize = get_u32le(h + 8);
	const char *bad_header = frame_header_bad(h, csize, usize);
	if (bad_header) { /* its sizes cannot be trusted: look for the next frame header */
		uint64_t at = r->offset;
		note_corrupt(r, ++r->frames, at, bad_header);
		if (!resync(r, at + 1)) {
			r->done = r->truncated = 1;
			return 0;
		}
		return 2;
	}
	return load_frame_body(r, csize, usize);
}

/* Loads the next good frame. @return 1 loaded, 0 no more data (done set), -1 I/O or memory error
 * (out of line: nvlp_reader_next, called per record, stays small) */
static int __attribute__((noinline)) load_frame(nvlp_reader *r)
{
	int rc;
	while ((rc = load_one_frame(r)) == 2)
		;
	return rc;
}

/* LEB128 with an overflow check; relies on the zero padding after the frame (see PAD). */
static inline int get_varint(const uint8_t **pp, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t b = *p++;
	if (b < 0x80) {
		*out = b;
		*pp = p;
		return 0;
	}
	uint64_t v = b & 0x7f;
	for (unsigned shift = 7;; shift += 7) {
		b = *p++;
		if (shift == 63) {
			if (b > 1)
				return -1; /* more than 64 bits */
			v |= b << 63;
			break;
		}
		v |= (b & 0x7f) << shift;
		if (b < 0x80)
			break;
	}
	*out = v;
	*pp = p;
	return 0;
}

/* get_varint unrolled for a field: up to 9 bytes hold 63 bits (no overflow check); a longer one
 * is get_varint's. */
static inline int get_varint_field(const uint8_t **pp, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
#pragma GCC unroll 9
	for (unsigned k = 0; k < 9; k++) {
		uint64_t b = p[k];
		v |= (b & 0x7f) << (7 * k);
		if (b < 0x80) {
			*out = v;
			*pp = p + k + 1;
			return 0;
		}
	}
	return get_varint(pp, out);
}

/* A bad record: the rest of its frame is skipped (out of line: the decoder's hot path keeps no
 * message buffer). @return 0 */
static int __attribute__((noinline, cold, format(printf, 2, 3))) bad_record(nvlp_reader *r,
									      const char *fmt, ...)
{
	char why[96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	r->p = r->end;
	note_corrupt(r, r->frames, r->frame_offset, why);
	return 0;
}

/* The record in rec is handed out. @return 1 */
static inline int hand_out(nvlp_reader *r, const struct nvlp_record *rec)
{
	r->complete = rec->kind == NVLP_K_END;
	if (rec->kind == NVLP_K_STRING)
		nvlp_strtab_put(&r->strings, rec->f[0], rec->blob, rec->blob_len);
	return 1;
}

/* A record whose code is not DIRECT: skipped (a kind this build does not know), or its fields put
 * in this build's order. @return as decode */
static int __attribute__((noinline)) remap(nvlp_reader *r, struct nvlp_record *rec,
					   const struct nvlp_code_map *cm, const uint64_t *prev)
{
	if (cm->mode == NVLP_CM_SKIP) {
		r->unknown++;
		r->complete = 0;
		return 2;
	}
	uint64_t *out = r->out[cm->kind];
	const int8_t *from = r->sm.from[cm->kind];
	for (unsigned i = 0, n = nvlp_kind_info(cm->kind)->nfields; i < n; i++)
		if (from[i] >= 0)
			out[i] = prev[from[i]];
	rec->f = out;
	return hand_out(r, rec);
}

/* @return 1 record, 2 a record skipped (a kind this build does not know), 0 a bad record: the
 * rest of its frame is skipped. */
static inline int decode(nvlp_reader *r, struct nvlp_record *rec)
{
	const uint8_t *p = r->p;
	uint64_t kind = 0;
	if (get_varint(&p, &kind) < 0 || kind >= r->sm.ncodes ||
	    r->sm.code[kind].mode == NVLP_CM_UNDECLARED)
		return bad_record(r, "record %llu: unknown kind %llu",
				  (unsigned long long)r->records + 1, (unsigned long long)kind);
	const struct nvlp_code_map *cm = &r->sm.code[kind];
	uint64_t *prev = r->pool + cm->prev_off;
	unsigned nf = cm->nf;
	/* most deltas are 0 (the field did not change), a one-byte varint 0: up to eight such
	 * fields are passed over at once (the frame's zero padding makes the 8-byte read safe), and
	 * only the nonzero ones are decoded */
	for (unsigned i = 0; i < nf;) {
		uint64_t w;
		memcpy(&w, p, 8);
		unsigned z = w ? (unsigned)__builtin_ctzll(w) >> 3 : 8; /* zero bytes at p */
		if (z >= nf - i) { /* the record's remaining fields are all 0 */
			p += nf - i;
			break;
		}
		p += z;
		i += z;
		if (z == 8)
			continue;
		uint64_t zz;
		if (p[0] < 0x80) { /* the usual small deltas: one or two bytes */
			zz = p[0];
			p++;
		} else if (p[1] < 0x80) {
			zz = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
			p += 2;
		} else if (get_varint_field(&p, &zz) < 0) {
			return bad_record(r, "record %llu: field overflow",
					  (unsigned long long)r->records + 1);
		}
		prev[i++] += (zz >> 1) ^ (0 - (zz & 1));
	}
	if (p > r->end)
		return bad_record(r, "record %llu runs past the frame",
				  (unsigned long long)r->records + 1);
	*rec = (struct nvlp_record){.kind = cm->kind, .f = prev, .blob = NULL, .blob_len = 0};
	if (cm->has_blob) {
		uint64_t len;
		if (get_varint(&p, &len) < 0 || p > r->end || len > NVLP_MAX_BLOB ||
		    len > (uint64_t)(r->end - p))
			return bad_record(r, "record %llu: bad blob length",
					  (unsigned long long)r->records + 1);
		rec->blob = p;
		rec->blob_len = (uint32_t)len;
		p += len;
	}
	r->p = p;
	r->records++;
	return cm->mode == NVLP_CM_DIRECT ? hand_out(r, rec) : remap(r, rec, cm, prev);
}

int nvlp_reader_next(nvlp_reader *r, struct nvlp_record *rec)
{
	if (r->pending_first) {
		r->pending_first = 0;
		*rec = r->first;
		return 1;
	}
	for (;;) {
		if (r->done)
			return 0;
		if (r->p < r->end) {
			if (decode(r, rec) == 1)
				return 1;
			continue; /* a record skipped, or a bad one: the rest of its frame */
		}
		int rc = load_frame(r);
		if (rc <= 0)
			return rc;
	}
}

static int parse_header(nvlp_reader *r, const struct nvlp_record *rec)
{
	r->hdr_text = malloc((size_t)rec->blob_len + 1);
	r->hdr_buf = malloc((size_t)rec->blob_len + 1);
	/* at most one pair per line, and at most blob_len/2+1 lines */
	r->hdr_kv = malloc(((size_t)rec->blob_len / 2 + 2) * 2 * sizeof(char *));
	if (!r->hdr_text || !r->hdr_buf || !r->hdr_kv)
		return -1;
	if (rec->blob_len)
		memcpy(r->hdr_text, rec->blob, rec->blob_len);
	r->hdr_text[rec->blob_len] = 0;
	memcpy(r->hdr_buf, r->hdr_text, (size_t)rec->blob_len + 1);
	char *save = NULL;
	for (char *line = strtok_r(r->hdr_buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = 0;
		r->hdr_kv[2 * r->hdr_n] = line;
		r->hdr_kv[2 * r->hdr_n + 1] = eq + 1;
		r->hdr_n++;
	}
	return 0;
}

/* The last closed reader's decompression context, for the next open: a DCtx is ~160 KB, which
 * ASan and glibc map afresh each time; a fuzz execution opens several readers (perf: ~5% of its
 * time). One slot, swapped atomically: parallel loaders take it or make their own. */
static _Atomic(ZSTD_DCtx *) spare_dctx;

/* Opens path, a regular file, for r. @return 0, or -1 (r->err says why) */
static int open_file(nvlp_reader *r, const char *path)
{
	/* O_NONBLOCK: a FIFO or device named like a trace must not block us; only regular files are
	 * read (checked below) */
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (r->fd < 0) {
		set_err(r, "%s", strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(r->fd, &st) < 0) {
		set_err(r, "%s", strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		set_err(r, "is a directory");
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		set_err(r, "not a regular file");
		return -1;
	}
	r->size = (uint64_t)st.st_size;
	return 0;
}

/* The decompression context and the input buffer. @return 0, or -1 */
static int decode_setup(nvlp_reader *r)
{
	r->dctx = atomic_exchange(&spare_dctx, NULL);
	if (!r->dctx)
		r->dctx = ZSTD_createDCtx();
	/* in proportion to the file: a 1 KB trace (the fuzzer's, a rank that did little) costs no
	 * 256 KB buffer, which ASan and glibc both map afresh for every open */
	r->icap = r->size < IBUF_SIZE ? (size_t)r->size < 4096 ? 4096 : (size_t)r->size : IBUF_SIZE;
	r->ibuf = malloc(r->icap);
	if (!r->dctx || !r->ibuf) {
		set_err(r, "out of memory");
		return -1;
	}
	return 0;
}

/* The preamble: magic, byte order, format version. @return 0, or -1 (r->err says why) */
static int read_preamble(nvlp_reader *r)
{
	uint8_t pre[NVLP_PREAMBLE_SIZE];
	ssize_t n = read_full(r, pre, sizeof(pre));
	if (n < 0) {
		set_err(r, "%s", strerror(errno));
		return -1;
	}
	size_t cmp = (size_t)n < 8 ? (size_t)n : 8;
	if (n == 0 || memcmp(pre, NVLP_MAGIC, cmp) != 0) {
		set_err(r, n == 0 ? "empty file, not an nvlprof trace" : "not an nvlprof trace");
		return -1;
	}
	if ((size_t)n < sizeof(pre)) {
		set_err(r, "cut short inside the preamble (%zd bytes)", n);
		return -1;
	}
	uint32_t version = get_u32le(pre + 8), mark = get_u32le(pre + 12);
	if (mark == __builtin_bswap32(NVLP_ENDIAN_MARK)) {
		set_err(r, "written with the other byte order (big-endian), this nvlprof cannot read it");
		return -1;
	}
	if (mark != NVLP_ENDIAN_MARK) {
		set_err(r, "not an nvlprof trace (bad byte-order mark)");
		return -1;
	}
	if (version < NVLP_FORMAT_OLDEST || version > NVLP_FORMAT_VERSION) {
		set_err(r, "trace format version %u, this nvlprof reads versions %u to %u", version,
			NVLP_FORMAT_OLDEST, NVLP_FORMAT_VERSION);
		return -1;
	}
	r->major = version;
	r->offset = sizeof(pre);
	return 0;
}

/* The kind codes and fields records are decoded with: text's (a file's schema, or the built-in
 * one of version 1). @return 0, or -1 (r->err says why) */
static int use_schema(nvlp_reader *r, const char *text, size_t len)
{
	char why[160];
	if (nvlp_schema_map_build(&r->sm, r->major, text, len, why, sizeof why) < 0) {
		set_err(r, "bad schema (%s): not a readable nvlprof trace", why);
		return -1;
	}
	r->pool = calloc(r->sm.pool_n ? r->sm.pool_n : 1, sizeof(*r->pool));
	if (!r->pool) {
		set_err(r, "out of memory");
		return -1;
	}
	return 0;
}

/* Version 2 on: the schema record, first in the first frame. @return 0, or -1 (r->err says why) */
static int read_schema(nvlp_reader *r)
{
	if (load_frame(r) <= 0) {
		if (r->frames == 0 && r->size <= NVLP_PREAMBLE_SIZE)
			set_err(r, "cut short before its header (%llu bytes)",
				(unsigned long long)r->size);
		return -1;
	}
	const uint8_t *p = r->p;
	uint64_t code = 1, len = 0;
	if (get_varint(&p, &code) < 0 || code != NVLP_SCHEMA_CODE || get_varint(&p, &len) < 0 ||
	    p > r->end || len > NVLP_MAX_BLOB || len > (uint64_t)(r->end - p)) {
		set_err(r, "format version %u without its schema record first: not a readable "
			   "nvlprof trace", r->major);
		return -1;
	}
	r->schema = malloc(len ? (size_t)len : 1);
	if (!r->schema) {
		set_err(r, "out of memory");
		return -1;
	}
	memcpy(r->schema, p, (size_t)len);
	r->schema_len = (size_t)len;
	r->p = p + len;
	return use_schema(r, r->schema, r->schema_len);
}

/* The header record, kept to be handed out first. @return 0, or -1 (r->err says why) */
static int read_header(nvlp_reader *r)
{
	if (r->major == 1 ? use_schema(r, nvlp_schema_v1, strlen(nvlp_schema_v1)) < 0
			  : read_schema(r) < 0)
		return -1;
	/* The header must come first: without it nothing in the file can be attributed. */
	int rc = nvlp_reader_next(r, &r->first);
	if (rc <= 0) {
		if (r->frames == 0 && r->size <= NVLP_PREAMBLE_SIZE)
			set_err(r, "cut short before its header (%llu bytes)",
				(unsigned long long)r->size);
		return -1; /* r->err says why */
	}
	if (r->first.kind != NVLP_K_HEADER) {
		set_err(r, "first record is '%s', not a header: not an nvlprof trace",
			nvlp_kind_info(r->first.kind)->name);
		return -1;
	}
	if (parse_header(r, &r->first) < 0) {
		set_err(r, "out of memory");
		return -1;
	}
	r->pending_first = 1;
	return 0;
}

nvlp_reader *nvlp_reader_open(const char *path, char *err, size_t errlen)
{
	size_t plen = strlen(path);
	nvlp_reader *r = calloc(1, sizeof(*r) + plen + 1);
	if (!r) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	memcpy(r->path, path, plen + 1);
	if (open_file(r, path) < 0 || decode_setup(r) < 0 || read_preamble(r) < 0 ||
	    read_header(r) < 0) {
		snprintf(err, errlen, "%s", r->err);
		nvlp_reader_close(r);
		return NULL;
	}
	return r;
}

int nvlp_reader_truncated(const nvlp_reader *r)
{
	return r->truncated || r->skipped;
}

int nvlp_reader_complete(const nvlp_reader *r)
{
	return r->complete && !r->truncated && !r->skipped;
}

const char *nvlp_reader_error(const nvlp_reader *r)
{
	return r->err;
}

const char *nvlp_reader_header(const nvlp_reader *r, const char *key)
{
	/* a key written twice: the later line wins */
	for (unsigned i = r->hdr_n; i-- > 0;)
		if (strcmp(r->hdr_kv[2 * i], key) == 0)
			return r->hdr_kv[2 * i + 1];
	return NULL;
}

const char *nvlp_reader_header_text(const nvlp_reader *r)
{
	return r->hdr_text ? r->hdr_text : "";
}

const char *nvlp_reader_string(const nvlp_reader *r, uint64_t id)
{
	return nvlp_strtab_get(&r->strings, id);
}

void nvlp_reader_position(const nvlp_reader *r, unsigned *frame, uint64_t *record)
{
	if (frame)
		*frame = r->frames ? r->frames : 1;
	if (record)
		*record = r->pending_first ? 0 : r->records;
}

void nvlp_reader_format(const nvlp_reader *r, unsigned *major, unsigned *minor)
{
	if (major)
		*major = r->major;
	if (minor)
		*minor = r->major > 1 ? r->sm.minor : 0;
}

const char *nvlp_reader_schema(const nvlp_reader *r, size_t *len)
{
	if (len)
		*len = r->schema ? r->schema_len : strlen(nvlp_schema_v1);
	return r->schema ? r->schema : nvlp_schema_v1;
}

uint64_t nvlp_reader_unknown(const nvlp_reader *r, const char **what)
{
	if (what)
		*what = r->sm.unknown;
	return r->unknown;
}

unsigned nvlp_reader_frames_skipped(const nvlp_reader *r)
{
	return r->skipped;
}

void nvlp_reader_progress(const nvlp_reader *r, uint64_t *offset, uint64_t *size)
{
	if (offset)
		*offset = r->offset;
	if (size)
		*size = r->size;
}

void nvlp_reader_close(nvlp_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	if (r->dctx)
		ZSTD_freeDCtx(atomic_exchange(&spare_dctx, r->dctx));
	free(r->ibuf);
	free(r->cbuf);
	free(r->rbuf);
	free(r->hdr_text);
	free(r->hdr_buf);
	free(r->hdr_kv);
	free(r->pool);
	free(r->schema);
	nvlp_strtab_free(&r->strings);
	free(r);
}

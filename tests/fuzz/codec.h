/* codec.h: a trace decoded into an editable list of records and encoded back with the writer (fuzzer). */
#ifndef NVLP_FUZZ_CODEC_H
#define NVLP_FUZZ_CODEC_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "nvlp_trace.h"

struct fz_rec {
	unsigned kind;
	int flush_after; /* a frame ends after this record */
	uint64_t f[NVLP_MAX_FIELDS];
	uint8_t *blob; /* malloc'ed, NULL when blob_len is 0 */
	uint32_t blob_len;
};

struct fz_trace {
	struct fz_rec *r; /* r[0] is the HEADER (its blob is the header text) */
	size_t n, cap;
};

/* One fuzz input holds up to FZ_MAX_TRACES traces, concatenated: each starts with its preamble. */
#define FZ_MAX_TRACES 2

/*! Split an input at each preamble magic after offset 0.
 * @return number of parts (1..FZ_MAX_TRACES); off[i], len[i] locate part i */
int fz_split(const uint8_t *data, size_t size, size_t off[FZ_MAX_TRACES], size_t len[FZ_MAX_TRACES]);
/*! Decode the trace in file path (the reader API: stops at the first bad frame).
 * @return 0, or -1 if it is not a trace at all */
int fz_decode_file(const char *path, struct fz_trace *t);
/*! Decode one part (written to a scratch file in dir first). @return 0 / -1 */
int fz_decode(const char *dir, const uint8_t *data, size_t size, struct fz_trace *t);
/*! Encode with the writer's codec (valid frames, CRC, zstd checksum), appending to *out.
 * @return 0 / -1 */
int fz_encode(const struct fz_trace *t, uint8_t **out, size_t *len, size_t *cap);
/*! Insert a copy of rec at position at (0 < at <= n). @return 0 / -1 */
int fz_insert(struct fz_trace *t, size_t at, const struct fz_rec *rec);
void fz_delete(struct fz_trace *t, size_t at);
void fz_free(struct fz_trace *t);

#endif

/* pb.h: a small protobuf wire-format encoder (varint, fixed64, double, bytes, nested messages)
 * writing into a growable buffer; enough for Perfetto traces without libprotobuf. */
#ifndef NVLP_AN_PB_H
#define NVLP_AN_PB_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */

struct pb {
	uint8_t *buf;
	size_t n, cap;
	int oom; /* set once an allocation failed: later writes are dropped */
};

void pb_init(struct pb *p);
void pb_free(struct pb *p);
void pb_varint(struct pb *p, unsigned field, uint64_t v);
void pb_sint(struct pb *p, unsigned field, int64_t v); /* int64 (two's complement varint) */
void pb_fixed64(struct pb *p, unsigned field, uint64_t v);
void pb_double(struct pb *p, unsigned field, double v);
void pb_bytes(struct pb *p, unsigned field, const void *s, size_t len);
void pb_str(struct pb *p, unsigned field, const char *s);
/*! Open a nested message: writes the tag and a 4-byte length to patch. @return the mark */
size_t pb_begin(struct pb *p, unsigned field);
/*! Close the message opened at mark (lengths up to 2^28 - 1). */
void pb_end(struct pb *p, size_t mark);
/*! Write the buffer out and empty it. @return 0, or -1 on a write error or earlier oom */
int pb_flush(struct pb *p, FILE *f);

#endif

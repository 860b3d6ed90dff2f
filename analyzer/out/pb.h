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
/*! Make room for need more bytes. @return 1, or 0 (out of memory: oom set) */
int pb_grow(struct pb *p, size_t need);
void pb_bytes(struct pb *p, unsigned field, const void *s, size_t len);
void pb_str(struct pb *p, unsigned field, const char *s);

/* The hot encoders are inline: a Perfetto export writes a dozen fields per record. */
enum { PB_WT_VARINT = 0, PB_WT_I64 = 1, PB_WT_LEN = 2 };

static inline int pb_room(struct pb *p, size_t need)
{
	return p->n + need <= p->cap || pb_grow(p, need);
}

static inline void pb_raw_varint(struct pb *p, uint64_t v)
{
	uint8_t *o = p->buf + p->n;
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	p->n = (size_t)(o - p->buf);
}

static inline void pb_varint(struct pb *p, unsigned field, uint64_t v)
{
	if (!pb_room(p, 20))
		return;
	pb_raw_varint(p, (uint64_t)field << 3 | PB_WT_VARINT);
	pb_raw_varint(p, v);
}

/* int64 fields: two's complement as a varint (10 bytes when negative) */
static inline void pb_sint(struct pb *p, unsigned field, int64_t v)
{
	pb_varint(p, field, (uint64_t)v);
}

static inline void pb_fixed64(struct pb *p, unsigned field, uint64_t v)
{
	if (!pb_room(p, 18))
		return;
	pb_raw_varint(p, (uint64_t)field << 3 | PB_WT_I64);
	for (int i = 0; i < 8; i++)
		p->buf[p->n++] = (uint8_t)(v >> (8 * i)); /* little-endian on the wire */
}

static inline void pb_double(struct pb *p, unsigned field, double v)
{
	union {
		double d;
		uint64_t u;
	} x = {.d = v};
	pb_fixed64(p, field, x.u);
}

/*! Open a nested message: writes the tag and a 4-byte length to patch. @return the mark */
static inline size_t pb_begin(struct pb *p, unsigned field)
{
	if (!pb_room(p, 16))
		return (size_t)-1;
	pb_raw_varint(p, (uint64_t)field << 3 | PB_WT_LEN);
	size_t mark = p->n;
	p->n += 4;
	return mark;
}

/*! Close the message opened at mark (lengths up to 2^28 - 1), as a varint padded to 4 bytes. */
static inline void pb_end(struct pb *p, size_t mark)
{
	if (mark == (size_t)-1 || p->oom)
		return;
	size_t len = p->n - mark - 4;
	uint8_t *o = p->buf + mark;
	o[0] = (uint8_t)((len & 0x7f) | 0x80);
	o[1] = (uint8_t)(((len >> 7) & 0x7f) | 0x80);
	o[2] = (uint8_t)(((len >> 14) & 0x7f) | 0x80);
	o[3] = (uint8_t)((len >> 21) & 0x7f);
}
/*! Write the buffer out and empty it. @return 0, or -1 on a write error or earlier oom */
int pb_flush(struct pb *p, FILE *f);

#endif

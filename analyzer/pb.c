/* pb.c: the protobuf wire-format encoder (see pb.h). Nested lengths are written as padded 4-byte
 * varints and patched when the message closes, so a message is encoded in one pass. */
#include <stdlib.h> /* realloc */
#include <string.h> /* memcpy */

#include "pb.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

void pb_init(struct pb *p) { memset(p, 0, sizeof *p); }
void pb_free(struct pb *p)
{
	free(p->buf);
	memset(p, 0, sizeof *p);
}

static inline int room(struct pb *p, size_t need)
{
	if (p->n + need <= p->cap)
		return 1;
	if (p->oom)
		return 0;
	size_t cap = p->cap ? p->cap * 2 : 1 << 16;
	while (cap < p->n + need)
		cap *= 2;
	uint8_t *b = realloc(p->buf, cap);
	if (!b) {
		p->oom = 1;
		return 0;
	}
	p->buf = b;
	p->cap = cap;
	return 1;
}

static inline void raw_varint(struct pb *p, uint64_t v)
{
	uint8_t *o = p->buf + p->n;
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	p->n = (size_t)(o - p->buf);
}

void pb_varint(struct pb *p, unsigned field, uint64_t v)
{
	if (!room(p, 20))
		return;
	raw_varint(p, (uint64_t)field << 3 | WT_VARINT);
	raw_varint(p, v);
}

void pb_sint(struct pb *p, unsigned field, int64_t v) { pb_varint(p, field, (uint64_t)v); }

void pb_fixed64(struct pb *p, unsigned field, uint64_t v)
{
	if (!room(p, 18))
		return;
	raw_varint(p, (uint64_t)field << 3 | WT_I64);
	for (int i = 0; i < 8; i++)
		p->buf[p->n++] = (uint8_t)(v >> (8 * i)); /* little-endian on the wire */
}

void pb_double(struct pb *p, unsigned field, double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	pb_fixed64(p, field, u);
}

void pb_bytes(struct pb *p, unsigned field, const void *s, size_t len)
{
	if (!room(p, 20 + len))
		return;
	raw_varint(p, (uint64_t)field << 3 | WT_LEN);
	raw_varint(p, len);
	memcpy(p->buf + p->n, s, len);
	p->n += len;
}

void pb_str(struct pb *p, unsigned field, const char *s) { pb_bytes(p, field, s, strlen(s)); }

size_t pb_begin(struct pb *p, unsigned field)
{
	if (!room(p, 16))
		return (size_t)-1;
	raw_varint(p, (uint64_t)field << 3 | WT_LEN);
	size_t mark = p->n;
	p->n += 4;
	return mark;
}

void pb_end(struct pb *p, size_t mark)
{
	if (mark == (size_t)-1 || p->oom)
		return;
	size_t len = p->n - mark - 4;
	uint8_t *o = p->buf + mark;
	/* a varint padded to 4 bytes: continuation bits on the first three */
	o[0] = (uint8_t)((len & 0x7f) | 0x80);
	o[1] = (uint8_t)(((len >> 7) & 0x7f) | 0x80);
	o[2] = (uint8_t)(((len >> 14) & 0x7f) | 0x80);
	o[3] = (uint8_t)((len >> 21) & 0x7f);
}

int pb_flush(struct pb *p, FILE *f)
{
	if (p->oom)
		return -1;
	if (p->n && fwrite(p->buf, 1, p->n, f) != p->n)
		return -1;
	p->n = 0;
	return 0;
}

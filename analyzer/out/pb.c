/* pb.c: the protobuf wire-format encoder's out-of-line half (see pb.h): buffer growth, bytes,
 * flushing. Nested lengths are padded 4-byte varints patched on close: one pass per message. */
#include <stdlib.h> /* realloc */
#include <string.h> /* memcpy */

#include "out/pb.h"

void pb_init(struct pb *p)
{
	memset(p, 0, sizeof *p);
}
void pb_free(struct pb *p)
{
	free(p->buf);
	memset(p, 0, sizeof *p);
}

int pb_grow(struct pb *p, size_t need)
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

void pb_bytes(struct pb *p, unsigned field, const void *s, size_t len)
{
	if (!pb_room(p, 20 + len))
		return;
	pb_raw_varint(p, (uint64_t)field << 3 | PB_WT_LEN);
	pb_raw_varint(p, len);
	memcpy(p->buf + p->n, s, len);
	p->n += len;
}

void pb_str(struct pb *p, unsigned field, const char *s)
{
	pb_bytes(p, field, s, strlen(s));
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

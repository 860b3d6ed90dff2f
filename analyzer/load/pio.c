/* pio.c: the partial file's field codec (pio.h): bytes, counted arrays and strings, written to a
 * growing buffer or read back with every count checked against the bytes left. */
#include "load/pio.h"

#include <stdlib.h> /* malloc */
#include <string.h> /* memcpy */

#include "model/stages.h" /* an_grow */

void an_pio_bytes(struct an_pio *io, void *p, size_t n)
{
	if (!io->rd) {
		uint8_t *q = io->err ? NULL : an_grow(io->p, &io->cap, io->n + n, 1);
		if (!q) {
			io->err = 1;
			return;
		}
		io->p = q;
		memcpy(io->p + io->n, p, n);
		io->n += n;
		return;
	}
	if (io->err || n > io->n - io->off) {
		io->err = 1;
		memset(p, 0, n);
		return;
	}
	memcpy(p, io->p + io->off, n);
	io->off += n;
}

/* Arrays of structures compress poorly as they lie (a partial of raw tables was 1.4x the traces
 * they came from): each 4-byte word of an element (each byte, when elements are not words) is
 * made the difference from the same word of the element before, then the bytes are stored by
 * their place in the element (all first bytes, all second bytes, ...). Times, counts and sizes
 * that change little from one call to the next become runs of zeros for zstd. */
static void shuffle(uint8_t *dst, const uint8_t *src, size_t cnt, size_t elem)
{
	size_t lane = elem % 4 ? 1 : 4;
	for (size_t j = 0; j < elem; j += lane)
		for (size_t i = cnt; i-- > 0;) {
			uint32_t x = 0, y = 0;
			memcpy(&x, src + i * elem + j, lane);
			if (i)
				memcpy(&y, src + (i - 1) * elem + j, lane);
			x -= y;
			for (size_t b = 0; b < lane; b++)
				dst[(j + b) * cnt + i] = (uint8_t)(x >> (8 * b));
		}
}

static void unshuffle(uint8_t *dst, const uint8_t *src, size_t cnt, size_t elem)
{
	size_t lane = elem % 4 ? 1 : 4;
	for (size_t j = 0; j < elem; j += lane)
		for (size_t i = 0; i < cnt; i++) {
			uint32_t x = 0, y = 0;
			for (size_t b = 0; b < lane; b++)
				x |= (uint32_t)src[(j + b) * cnt + i] << (8 * b);
			if (i)
				memcpy(&y, dst + (i - 1) * elem + j, lane);
			x += y;
			memcpy(dst + i * elem + j, &x, lane);
		}
}

void an_pio_arr(struct an_pio *io, void **p, size_t *n, size_t elem)
{
	uint64_t cnt = *n;
	an_pio_bytes(io, &cnt, sizeof cnt);
	if (!io->rd) {
		uint8_t *q = !cnt || io->err ? NULL : an_grow(io->p, &io->cap, io->n + cnt * elem, 1);
		if (cnt && !q)
			io->err = 1;
		if (q) {
			io->p = q;
			shuffle(io->p + io->n, *p, cnt, elem);
			io->n += cnt * elem;
		}
		return;
	}
	*p = NULL;
	*n = 0;
	/* memory in proportion to the file: the elements must be there */
	if (io->err || !cnt)
		return;
	if (cnt > (io->n - io->off) / elem || !(*p = malloc(cnt * elem))) {
		io->err = 1;
		return;
	}
	unshuffle(*p, io->p + io->off, cnt, elem);
	io->off += cnt * elem;
	*n = cnt;
}

void an_pio_str(struct an_pio *io, char **s)
{
	uint64_t n = !io->rd && *s ? strlen(*s) + 1 : 0; /* 0: NULL */
	an_pio_bytes(io, &n, sizeof n);
	if (!io->rd) {
		if (n)
			an_pio_bytes(io, *s, n);
		return;
	}
	*s = NULL;
	if (io->err || !n)
		return;
	if (n > io->n - io->off || !(*s = malloc(n))) {
		io->err = 1;
		return;
	}
	an_pio_bytes(io, *s, n);
	if ((*s)[n - 1]) { /* not terminated: a damaged file */
		io->err = 1;
		free(*s);
		*s = NULL;
	}
}

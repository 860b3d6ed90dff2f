/* pio.c: the partial file's field codec (pio.h): bytes, counted arrays and strings, written to a
 * growing buffer or read back with every count checked against the bytes left. */
#include "pio.h"

#include <stdlib.h> /* malloc */
#include <string.h> /* memcpy */

#include "stages.h" /* an_grow */

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

void an_pio_arr(struct an_pio *io, void **p, size_t *n, size_t elem)
{
	uint64_t cnt = *n;
	an_pio_bytes(io, &cnt, sizeof cnt);
	if (!io->rd) {
		if (cnt)
			an_pio_bytes(io, *p, cnt * elem);
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
	an_pio_bytes(io, *p, cnt * elem);
	*n = cnt;
}

void an_pio_str(struct an_pio *io, char **s)
{
	size_t n = !io->rd && *s ? strlen(*s) + 1 : 0;
	void *p = *s;
	an_pio_arr(io, &p, &n, 1);
	*s = p;
	if (io->rd && n && (*s)[n - 1]) { /* not terminated: a damaged file */
		io->err = 1;
		free(*s);
		*s = NULL;
	}
}

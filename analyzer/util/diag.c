/* diag.c: messages of the layers below cli/ handed to the sink cli/ installed (diag.h). */
#include "util/diag.h"

#include <stdarg.h> /* va_list */
#include <stdio.h>  /* vsnprintf */
#include <stdlib.h> /* malloc */

static an_diag_sink diag_sink;

void an_diag_set_sink(an_diag_sink sink)
{
	diag_sink = sink;
}

void an_diag(const char *fmt, ...)
{
	if (!diag_sink)
		return;
	char buf[1024], *msg = buf;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof buf && (msg = malloc((size_t)n + 1))) { /* a long path: whole */
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	diag_sink(msg ? msg : buf); /* out of memory: the message cut at its first 1023 bytes */
	if (msg != buf)
		free(msg);
}

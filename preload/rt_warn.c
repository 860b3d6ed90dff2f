/* rt_warn.c: the shim's messages on stderr: "nvlprof: ...", one write each, optionally once per site. */
#include <errno.h>     /* errno */
#include <stdarg.h>    /* va_list */
#include <stdatomic.h> /* atomic_* */
#include <stdio.h>     /* vsnprintf */
#include <unistd.h>    /* write */

#include "nvlp_rt.h"

static void vwarn(const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "nvlprof: ");
	int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	/* One write(): the line is not interleaved with the job's own output. */
	(void)!write(2, buf, n);
}

void nvlp_warn(const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
	errno = e;
}

#define WARN_KEYS 256
static const void *_Atomic warn_keys[WARN_KEYS];

void nvlp_warn_once(const void *key, const char *fmt, ...)
{
	int e = errno;
	for (int i = 0; i < WARN_KEYS; i++) {
		const void *k = atomic_load(&warn_keys[i]);
		if (k == key)
			return;
		if (k == NULL) {
			const void *expect = NULL;
			if (atomic_compare_exchange_strong(&warn_keys[i], &expect, key)) {
				va_list ap;
				va_start(ap, fmt);
				vwarn(fmt, ap);
				va_end(ap);
				errno = e;
				return;
			}
			if (expect == key)
				return;
		}
	}
	/* Table full: stay quiet rather than flood stderr. */
}

/* check.h: minimal assertions for C tests; each prints "PASS: name" or "FAIL: name: why". */
#ifndef NVLP_CHECK_H
#define NVLP_CHECK_H
#include <stdio.h>
#include <time.h> /* nanosleep */

static int check_failed_;
/* CHECK(cond, name): one named assertion. */
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (cond) {                                                                        \
			printf("PASS: ");                                                          \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
		} else {                                                                           \
			check_failed_++;                                                           \
			printf("FAIL: ");                                                          \
			printf(__VA_ARGS__);                                                       \
			printf(" (%s:%d: %s)\n", __FILE__, __LINE__, #cond);                       \
		}                                                                                  \
		fflush(stdout);                                                                    \
	} while (0)
#define CHECK_DONE() (check_failed_ ? 1 : 0)
/* Sleep ms milliseconds (the tests' pacing). */
static inline void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}
#endif

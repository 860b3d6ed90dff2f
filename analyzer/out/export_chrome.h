/* export_chrome.h: the Chrome sink's number writers, for their unit test (the sink is export.h's). */
#ifndef NVLP_AN_EXPORT_CHROME_H
#define NVLP_AN_EXPORT_CHROME_H

#include <stdint.h> /* uint64_t */

/* Each writes at o (24 bytes of room) and returns past what it wrote; no terminating NUL. */
char *xc_u(char *o, uint64_t v);     /* %llu */
char *xc_i(char *o, int64_t v);      /* %lld */
char *xc_milli(char *o, uint64_t v); /* v / 1000 "." v % 1000 as 3 digits (µs of ns) */
char *xc_fix3(char *o, double v);    /* v rounded to 3 decimals; 0.000 unless 0 < v < 1e15 */

#endif

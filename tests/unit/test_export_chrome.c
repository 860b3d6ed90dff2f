/* test_export_chrome.c: the Chrome sink's hand-written number writers print what printf (and the
 * writers they replaced) printed, over edge values and a million random ones. */
#include <inttypes.h> /* PRIu64 */
#include <stdint.h>   /* uint64_t */
#include <string.h>   /* memcmp */

#include "check.h"
#include "out/export_chrome.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) /* xorshift64*, with a random digit count */
{
	rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
	uint64_t r = rng * 0x2545f4914f6cdd1dull;
	return r >> (r & 63);
}

static int same(const char *want, const char *b, const char *e)
{
	return (size_t)(e - b) == strlen(want) && !memcmp(want, b, (size_t)(e - b));
}

/* what the writers replaced did: put_milli = v/1000 "." three digits; put_fix3 rounds half up */
static void ref_milli(char *w, uint64_t v)
{
	snprintf(w, 32, "%" PRIu64 ".%03u", v / 1000, (unsigned)(v % 1000));
}
static void ref_fix3(char *w, double v)
{
	ref_milli(w, v > 0 && v < 1e15 ? (uint64_t)(v * 1000 + 0.5) : 0);
}

int main(void)
{
	static const uint64_t edge[] = {0,
	                                1,
	                                9,
	                                10,
	                                99,
	                                100,
	                                999,
	                                1000,
	                                1001,
	                                4294967295ull,
	                                4294967296ull,
	                                9999999999ull,
	                                10000000000ull,
	                                999999999999999999ull,
	                                1000000000000000000ull,
	                                9999999999999999999ull,
	                                10000000000000000000ull,
	                                UINT64_MAX,
	                                (uint64_t)INT64_MAX,
	                                (uint64_t)INT64_MIN};
	char w[40], b[40];
	int bad_u = 0, bad_i = 0, bad_m = 0, bad_f = 0, n = 0;
	for (int i = 0; i < 1000000 + (int)(sizeof edge / sizeof *edge); i++, n++) {
		uint64_t v = i < (int)(sizeof edge / sizeof *edge) ? edge[i] : next();
		snprintf(w, sizeof w, "%" PRIu64, v);
		bad_u += !same(w, b, xc_u(b, v));
		snprintf(w, sizeof w, "%" PRId64, (int64_t)v);
		bad_i += !same(w, b, xc_i(b, (int64_t)v));
		int64_t sm = (int64_t)(v % 2001) - 1000; /* pids, devices, indices near 0 */
		snprintf(w, sizeof w, "%" PRId64, sm);
		bad_i += !same(w, b, xc_i(b, sm));
		ref_milli(w, v);
		bad_m += !same(w, b, xc_milli(b, v));
		/* rates: GB/s of bytes over ns, fractions, halves at the rounding edge, out of range */
		double d = (double)(v % 100000000) / (double)(1 + (v >> 40) % 100000);
		double ds[] = {d, -d, (double)(v % 1000000) / 1000.0 + 0.0005, 1e15, 1e15 + 1, 0.0,
		               0.0004999, 0.0005, 999999999999.9995};
		for (size_t k = 0; k < sizeof ds / sizeof *ds; k++) {
			ref_fix3(w, ds[k]);
			bad_f += !same(w, b, xc_fix3(b, ds[k]));
		}
	}
	CHECK(!bad_u, "xc_u prints %%llu for %d values (%d differ)", n, bad_u);
	CHECK(!bad_i, "xc_i prints %%lld for %d values and small negatives (%d differ)", n, bad_i);
	CHECK(!bad_m, "xc_milli prints v/1000.ddd for %d values (%d differ)", n, bad_m);
	CHECK(!bad_f, "xc_fix3 rounds as before, 0.000 outside (0, 1e15) (%d differ)", bad_f);
	CHECK(same("18446744073709551615", b, xc_u(b, UINT64_MAX)), "xc_u: UINT64_MAX, 20 digits");
	CHECK(same("-9223372036854775808", b, xc_i(b, INT64_MIN)), "xc_i: INT64_MIN");
	CHECK(same("0.000", b, xc_milli(b, 0)) && same("1.001", b, xc_milli(b, 1001)) &&
	          same("4294967.296", b, xc_milli(b, 4294967296ull)),
	      "xc_milli: 0, 1001 and 2^32 ns as µs");
	CHECK(same("0.000", b, xc_fix3(b, -1.5)) && same("0.001", b, xc_fix3(b, 0.0005)) &&
	          same("2.500", b, xc_fix3(b, 2.5)),
	      "xc_fix3: negative is 0.000, half a thousandth rounds up");
	return CHECK_DONE();
}

/* test_export_units.c: the protobuf encoder (bytes as the wire format defines them) and the SVG
 * plotting kit (ticks, mapping, colours, escaping, series size bounded by the width). */
#include <stdlib.h> /* free */
#include <string.h> /* memcmp */

#include "check.h"
#include "out/pb.h"
#include "out/svg.h"

static char *render(void (*fn)(FILE *, void *), void *arg, size_t *len)
{
	char *buf = NULL;
	FILE *m = open_memstream(&buf, len);
	fn(m, arg);
	fclose(m);
	return buf;
}

static size_t count(const char *s, const char *sub)
{
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub))
		n++;
	return n;
}

struct series_arg {
	size_t n;
	int w;
};
static void draw_series(FILE *o, void *a)
{
	struct series_arg *x = a;
	double *xs = malloc(x->n * sizeof *xs), *ys = malloc(x->n * sizeof *ys);
	for (size_t i = 0; i < x->n; i++)
		xs[i] = (double)i, ys[i] = (double)(i % 7);
	struct svg s;
	svg_begin(&s, o, x->w, 100, "t", "a <title> & \"quotes\"");
	svg_range(&s, 0, (double)x->n, 0, 7);
	svg_axes(&s, "x", "y", 1);
	svg_series(&s, xs, ys, x->n, "line");
	svg_end(&s);
	free(xs);
	free(ys);
}

int main(void)
{
	/* pb: field 1 varint 150 -> 08 96 01 (the protobuf docs' example) */
	struct pb p;
	pb_init(&p);
	pb_varint(&p, 1, 150);
	CHECK(p.n == 3 && p.buf[0] == 0x08 && p.buf[1] == 0x96 && p.buf[2] == 0x01,
	      "pb varint 150 encodes as 08 96 01");
	p.n = 0;
	pb_str(&p, 2, "testing");
	CHECK(p.n == 9 && p.buf[0] == 0x12 && p.buf[1] == 7 && !memcmp(p.buf + 2, "testing", 7),
	      "pb string field 2 encodes as 12 07 'testing'");
	p.n = 0;
	pb_fixed64(&p, 47, 0x0102030405060708ULL);
	CHECK(p.n == 10, "pb fixed64: 2-byte tag + 8 bytes");
	CHECK(p.buf[0] == 0xf9 && p.buf[1] == 0x02 && p.buf[2] == 0x08 && p.buf[9] == 0x01,
	      "pb fixed64 field 47: tag f9 02, little-endian payload");
	p.n = 0;
	size_t m = pb_begin(&p, 3);
	pb_varint(&p, 1, 1);
	pb_end(&p, m);
	CHECK(p.n == 7 && p.buf[0] == 0x1a && p.buf[1] == 0x82 && p.buf[2] == 0x80 &&
	          p.buf[3] == 0x80 && p.buf[4] == 0x00 && p.buf[5] == 0x08 && p.buf[6] == 0x01,
	      "pb nested message: length 2 as a padded 4-byte varint");
	p.n = 0;
	m = pb_begin(&p, 1);
	for (int i = 0; i < 300; i++)
		pb_varint(&p, 2, 1);
	pb_end(&p, m);
	size_t len = (p.buf[1] & 0x7f) | (size_t)(p.buf[2] & 0x7f) << 7 |
	             (size_t)(p.buf[3] & 0x7f) << 14 | (size_t)p.buf[4] << 21;
	CHECK(len == 600 && p.n == 605, "pb nested length above 127 patched right");
	p.n = 0;
	pb_sint(&p, 4, -1);
	CHECK(p.n == 11 && p.buf[10] == 0x01, "pb int64 -1 as a 10-byte varint");
	pb_free(&p);

	/* svg */
	CHECK(svg_nice_step(100, 8) == 10 && svg_nice_step(7, 4) == 2 &&
	          svg_nice_step(0.9, 4) == 0.2,
	      "svg nice ticks: 1, 2, 5 x 10^k");
	struct svg s = {.w = 200, .h = 100, .ml = 10, .mr = 10, .mt = 10, .mb = 10};
	svg_range(&s, 0, 10, 0, 1);
	CHECK(svg_px(&s, 0) == 10 && svg_px(&s, 10) == 190 && svg_py(&s, 0) == 90 &&
	          svg_py(&s, 1) == 10,
	      "svg maps data range to the plot area (y up)");
	char c[8];
	svg_heat(0, c);
	CHECK(!strcmp(c, "#ffffff"), "svg heat 0 is white");
	svg_heat(1, c);
	CHECK(!strcmp(c, "#c81e1e"), "svg heat 1 is red");
	svg_heat(7, c);
	CHECK(!strcmp(c, "#c81e1e"), "svg heat clamps");
	struct series_arg small = {1000, 400}, big = {1000000, 400};
	size_t l1, l2;
	char *a = render(draw_series, &small, &l1), *b = render(draw_series, &big, &l2);
	CHECK(count(a, "<svg ") == 1 && count(a, "</svg>") == 1, "svg document closed");
	CHECK(strstr(a, "a &lt;title&gt; &amp; &quot;quotes&quot;") != NULL,
	      "svg escapes the title");
	CHECK(l2 < l1 * 3 && l2 < 40000, "svg series size bounded by the width, not the points");
	CHECK(count(b, ",") <= 2 * 400 + 64, "svg series: at most two points per pixel column");
	free(a);
	free(b);
	return CHECK_DONE();
}

/* test_trace_util.c: the CLI helpers in analyzer/util/util.c: JSON string escaping, human units, trace lists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "util/util.h"

static char out[4096];

static const char *json(const char *s, size_t n)
{
	FILE *f = fmemopen(out, sizeof(out), "w");
	nvlp_json_string(f, s, n);
	fclose(f);
	return out;
}

int main(void)
{
	CHECK(!strcmp(json("plain", 5), "\"plain\""), "plain string");
	CHECK(!strcmp(json("a\"b\\c", 5), "\"a\\\"b\\\\c\""), "quote and backslash");
	CHECK(!strcmp(json("l1\nl2\t\r\x01\x7f", 9), "\"l1\\nl2\\t\\r\\u0001\\u007f\""), "control characters");
	CHECK(!strcmp(json("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""),
	      "valid UTF-8 kept as is");
	CHECK(!strcmp(json("\xff\xc3", 2), "\"\\u00ff\\u00c3\""), "stray and cut-off bytes escaped");
	CHECK(!strcmp(json("\xc0\xaf\xed\xa0\x80", 5), "\"\\u00c0\\u00af\\u00ed\\u00a0\\u0080\""),
	      "overlong form and surrogate escaped");
	CHECK(!strcmp(json("a\0b", 3), "\"a\\u0000b\""), "embedded NUL");
	FILE *f = fmemopen(out, sizeof(out), "w");
	nvlp_json_cstr(f, NULL);
	fclose(f);
	CHECK(!strcmp(out, "null"), "NULL string is null");

	char b[32];
	CHECK(!strcmp(nvlp_human_bytes(0, b, sizeof(b)), "0 B"), "0 B");
	CHECK(!strcmp(nvlp_human_bytes(1023, b, sizeof(b)), "1023 B"), "1023 B");
	CHECK(!strcmp(nvlp_human_bytes(1536, b, sizeof(b)), "1.50 KiB"), "1.50 KiB");
	CHECK(!strcmp(nvlp_human_bytes(256ull << 20, b, sizeof(b)), "256 MiB"), "256 MiB");
	CHECK(!strcmp(nvlp_human_bytes(150ull << 30, b, sizeof(b)), "150 GiB"), "150 GiB: %s", b);
	CHECK(!strcmp(nvlp_human_ns(850, b, sizeof(b)), "850 ns"), "850 ns");
	CHECK(!strcmp(nvlp_human_ns(12345, b, sizeof(b)), "12.3 us"), "12.3 us");
	CHECK(!strcmp(nvlp_human_ns(999999, b, sizeof(b)), "1000 us"), "no exponent near a unit edge: %s", b);
	CHECK(!strcmp(nvlp_human_ns(19800000, b, sizeof(b)), "19.8 ms"), "19.8 ms");
	CHECK(!strcmp(nvlp_human_ns(7890000000ull, b, sizeof(b)), "7.89 s"), "7.89 s");
	CHECK(!strcmp(nvlp_basename("/a/b/c.nvlp"), "c.nvlp") && !strcmp(nvlp_basename("c"), "c"), "basename");

	char dir[] = "/tmp/nvlp-test-util.XXXXXX", p[300], err[512];
	if (!mkdtemp(dir))
		return 1;
	const char *names[] = {"r10.nvlp", "r2.nvlp", "r1.nvlp", "notes.txt", "x.nvlp.partial"};
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		fclose(fopen(p, "w"));
	}
	struct nvlp_paths ps = {0};
	int n = nvlp_paths_add(&ps, dir, err, sizeof(err));
	CHECK(n == 3 && ps.n == 3 && strstr(ps.v[0], "/r1.nvlp") && strstr(ps.v[1], "/r2.nvlp") &&
		      strstr(ps.v[2], "/r10.nvlp"),
	      "directory: *.nvlp only, natural order (%d)", n);
	snprintf(p, sizeof(p), "%s/notes.txt", dir);
	CHECK(nvlp_paths_add(&ps, p, err, sizeof(err)) == 1 && ps.n == 4 && !strcmp(ps.v[3], p),
	      "a file is taken whatever its name");
	snprintf(p, sizeof(p), "%s/none", dir);
	CHECK(nvlp_paths_add(&ps, p, err, sizeof(err)) == -1 && strstr(err, p) == err &&
		      strstr(err, "No such file"),
	      "missing path: %s", err);
	nvlp_paths_free(&ps);
	snprintf(p, sizeof(p), "%s/sub", dir);
	mkdir(p, 0755);
	CHECK(nvlp_paths_add(&ps, p, err, sizeof(err)) == -1 && strstr(err, "no .nvlp trace files"),
	      "empty directory: %s", err);
	nvlp_paths_free(&ps);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 1;
	return CHECK_DONE();
}

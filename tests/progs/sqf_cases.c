/* sqf_cases.c: databases written by analyzer/sqlite_file.c for tests/export/test_sqlite.sh to
 * open with sqlite3: payloads around the page size's local maximum and overflow boundaries,
 * B-trees of 3 levels, NULL, extreme and equal index keys, an empty table, a schema larger than
 * page 1; and the refusals (rows out of rowid order, a text index key). */
#include "sqlite_file.c" /* the writer itself, statics included (the X, M formulas) */

#include <inttypes.h> /* PRId64 */

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return *x;
}

/* big.a of row i (the test recomputes it): specials every 997 rows, else shifted LCG values
 * that take every integer serial type; NULL: *null */
static int64_t big_a(uint64_t i, uint64_t *x, int *null)
{
	static const int64_t special[] = {INT64_MIN,
	                                  INT64_MAX,
	                                  -1,
	                                  0,
	                                  1,
	                                  127,
	                                  128,
	                                  -128,
	                                  -129,
	                                  32767,
	                                  32768,
	                                  8388607,
	                                  8388608,
	                                  2147483647,
	                                  2147483648LL,
	                                  140737488355327LL,
	                                  140737488355328LL,
	                                  -140737488355329LL};
	uint64_t r = lcg(x);
	*null = 0;
	if (i % 997 == 0) {
		*null = 1;
		return 0;
	}
	if (i % 997 < 1 + sizeof special / sizeof *special)
		return special[i % 997 - 1];
	return (int64_t)r >> (i % 64);
}

static char *text(size_t n, int64_t id)
{
	char *t = malloc(n + 1);
	if (!t)
		exit(1);
	for (size_t k = 0; k < n; k++)
		t[k] = (char)('a' + (uint64_t)(id * 7 + (int64_t)k) % 26);
	t[n] = 0;
	return t;
}

/* the record size of texts(id NULL, body of n bytes, n) */
static size_t text_payload(size_t n)
{
	unsigned len;
	int_type((int64_t)n, &len);
	size_t h = 3 + vlen(2 * (uint64_t)n + 13);
	return h + n + len;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: sqf_cases PAGE_SIZE OUT ROWS [bad-order|bad-key]\n");
		return 2;
	}
	unsigned U = (unsigned)atoi(argv[1]);
	uint64_t rows = strtoull(argv[3], NULL, 10);
	const char *bad = argc > 4 ? argv[4] : "";
	struct sqf *f = sqf_open(argv[2], U);
	if (!f) {
		fprintf(stderr, "sqf_cases: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	int tt = sqf_table(f, "texts", 3, 0,
	                   "CREATE TABLE texts(id INTEGER PRIMARY KEY, body TEXT, n INTEGER)");
	int tb = sqf_table(f, "big", 3, -1, "CREATE TABLE big(a INTEGER, b INTEGER, c TEXT)");
	int te = sqf_table(f, "empty", 2, -1, "CREATE TABLE empty(x INTEGER, y TEXT)");
	int tp = sqf_table(f, "pairs", 3, -1,
	                   "CREATE TABLE pairs(x INTEGER, y INTEGER, z TEXT, PRIMARY KEY(x, y))");
	sqf_index(f, tp, "sqlite_autoindex_pairs_1", NULL, (int[]){0, 1}, 2);
	/* tables whose CREATE text is long: the schema outgrows page 1 at 512 and 4096 bytes, and
	 * one schema record needs overflow pages there (MAX_TABLES is 32) */
	char sql[8192];
	int pads[20];
	for (int k = 0; k < 20; k++) {
		int n = snprintf(sql, sizeof sql, "CREATE TABLE pad%d(", k);
		int ncol = k == 0 ? 60 : 8;
		for (int c = 0; c < ncol; c++)
			n += snprintf(
			    sql + n, sizeof sql - (size_t)n,
			    "%scolumn_%d_with_a_long_name_to_make_the_schema_large INTEGER",
			    c ? ", " : "", c);
		snprintf(sql + n, sizeof sql - (size_t)n, ")");
		char name[16];
		snprintf(name, sizeof name, "pad%d", k);
		pads[k] = sqf_table(f, name, ncol, -1, sql);
	}
	sqf_index(f, tb, "big_a", "CREATE INDEX big_a ON big(a)", (int[]){0}, 1);
	sqf_index(f, tb, "big_ba", "CREATE INDEX big_ba ON big(b, a)", (int[]){1, 0}, 2);
	sqf_index(f, te, "empty_x", "CREATE INDEX empty_x ON empty(x)", (int[]){0}, 1);
	if (!strcmp(bad, "bad-key"))
		sqf_index(f, tt, "texts_body", "CREATE INDEX texts_body ON texts(body)", (int[]){1},
		          1);

	/* texts: lengths 0 and 1, then payloads at the local maximum X, the minimum M and the
	 * overflow page boundaries, several pages and 1 MB */
	size_t X = U - 35, M = (size_t)(U - 12) * 32 / 255 - 23;
	size_t want[] = {
	    X - 1,           X,           X + 1,           X + 2,         M + (U - 4),
	    M + (U - 4) + 1, X + (U - 4), X + (U - 4) + 1, 3 * (size_t)U, 5 * (size_t)U + 17,
	    (size_t)1 << 20};
	int64_t id = 1;
	for (size_t n = 0; n < 2; n++, id++) {
		char *t = text(n, id);
		sqf_insert(f, tt, (struct sqf_val[]){SQF_I(id), SQF_S(t), SQF_I(n)});
		free(t);
	}
	for (size_t w = 0; w < sizeof want / sizeof *want; w++, id += 3) {
		size_t n = want[w] > 8 ? want[w] - 8 : 0;
		while (text_payload(n) < want[w])
			n++;
		printf("payload %zu: text %zu (payload %zu)\n", want[w], n, text_payload(n));
		char *t = text(n, id);
		sqf_insert(f, tt, (struct sqf_val[]){SQF_I(id), SQF_S(t), SQF_I(n)});
		free(t);
	}
	if (!strcmp(bad, "bad-order"))
		sqf_insert(f, tt, (struct sqf_val[]){SQF_I(2), SQF_S("x"), SQF_I(1)});
	if (!strcmp(bad, "bad-key"))
		sqf_insert(f, tt, (struct sqf_val[]){SQF_I(id), SQF_S("x"), SQF_I(1)});

	uint64_t x = 42;
	for (uint64_t i = 0; i < rows; i++) {
		int null;
		int64_t a = big_a(i, &x, &null);
		char c[32];
		snprintf(c, sizeof c, "r%" PRIu64, i);
		sqf_insert(f, tb,
		           (struct sqf_val[]){null ? SQF_N : SQF_I(a), SQF_I(i % 7), SQF_S(c)});
	}
	for (int64_t i = 0; i < 2000; i++) /* keys inserted out of order: the index sorts them */
		sqf_insert(
		    f, tp,
		    (struct sqf_val[]){SQF_I((i * 7919) % 2000 - 1000), SQF_I(i % 3), SQF_S("p")});
	for (int k = 1; k < 20; k += 5) {
		struct sqf_val v[8];
		for (int c = 0; c < 8; c++)
			v[c] = SQF_I(k * 100 + c);
		sqf_insert(f, pads[k], v);
	}
	char msg[256];
	if (sqf_close(f, msg, sizeof msg)) {
		fprintf(stderr, "sqf_cases: %s: %s\n", argv[2], msg);
		return 1;
	}
	return 0;
}

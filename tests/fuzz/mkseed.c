/* mkseed.c: cuts example traces down to small fuzz seeds (few records per kind), one or two ranks per seed. */
#include <stdio.h>  /* fopen, fwrite */
#include <stdlib.h> /* free */
#include <string.h> /* strcmp */

#include "codec.h"

/* Records kept per kind: small seeds run fast; strings, modules and symbols are what the kept
 * events point at, so more of them stay. */
static size_t keep_of(unsigned kind, size_t per_kind)
{
	switch (kind) {
	case NVLP_K_HEADER:
	case NVLP_K_END:
		return 1;
	case NVLP_K_STRING:
	case NVLP_K_MODULE:
	case NVLP_K_BUILDID:
	case NVLP_K_SYMBOL:
	case NVLP_K_DEVICE:
	case NVLP_K_NVLINK:
		return 64;
	default:
		return per_kind;
	}
}

static void cut(struct fz_trace *t, size_t per_kind)
{
	size_t seen[NVLP_K_COUNT] = {0}, n = 0;
	for (size_t i = 0; i < t->n; i++) { /* one pass: traces hold 100,000s of records */
		unsigned k = t->r[i].kind < NVLP_K_COUNT ? t->r[i].kind : 0;
		if (seen[k]++ >= keep_of(k, per_kind))
			free(t->r[i].blob);
		else
			t->r[n++] = t->r[i];
	}
	t->n = n;
	/* a few frames, so frame boundaries are in the seeds */
	for (size_t i = 0; i < t->n; i++)
		t->r[i].flush_after = i % 16 == 15;
}

/* usage: mkseed OUT PER_KIND TRACE [TRACE2]: OUT holds both traces, cut, one after the other */
int main(int argc, char **argv)
{
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: mkseed OUT PER_KIND TRACE [TRACE2]\n");
		return 2;
	}
	size_t per_kind = (size_t)atoi(argv[2]);
	uint8_t *out = NULL;
	size_t len = 0, cap = 0;
	for (int k = 3; k < argc; k++) {
		struct fz_trace t;
		if (fz_decode_file(argv[k], &t) < 0) {
			fprintf(stderr, "mkseed: %s: not a trace\n", argv[k]);
			return 1;
		}
		cut(&t, per_kind);
		int rc = fz_encode(&t, &out, &len, &cap);
		fz_free(&t);
		if (rc < 0) {
			fprintf(stderr, "mkseed: %s: cannot encode\n", argv[k]);
			return 1;
		}
	}
	FILE *f = fopen(argv[1], "wb");
	if (!f || fwrite(out, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "mkseed: cannot write %s\n", argv[1]);
		return 1;
	}
	free(out);
	return 0;
}

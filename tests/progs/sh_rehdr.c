/* sh_rehdr.c: copies a trace with header keys set or removed and NCCLCOMM records added, for the
 * nccl_split_host tests. */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* strtoull */
#include <string.h> /* strchr */

#include "nvlp_trace.h"

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: sh_rehdr IN OUT [KEY=VALUE | -KEY | "
	    "+ncclcomm=HASH:NNODES:NRANKS:RANK[:COUNT]]...\n"
	    "  KEY=VALUE sets a header key (replacing it), -KEY removes it; +ncclcomm adds COUNT\n"
	    "  (default 1) NCCLCOMM records (HASH in hex) after the header; every record is "
	    "copied\n"
	    "  (a trace cut short stays without END)\n");
}

/* header text with key set to val (val NULL: removed) */
static void set_key(char *hdr, size_t cap, const char *key, const char *val)
{
	size_t kl = strlen(key), n = strlen(hdr);
	for (char *p = hdr; *p;) {
		char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) + 1 : strlen(p);
		if (!strncmp(p, key, kl) && p[kl] == '=') {
			memmove(p, p + ll, n - (size_t)(p - hdr) - ll + 1);
			n -= ll;
			continue;
		}
		p += ll;
	}
	if (val)
		snprintf(hdr + n, cap - n, "%s=%s\n", key, val);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		usage();
		return 2;
	}
	char err[512];
	nvlp_reader *rd = nvlp_reader_open(argv[1], err, sizeof err);
	if (!rd) {
		fprintf(stderr, "sh_rehdr: %s\n", err);
		return 1;
	}
	static char hdr[1 << 16];
	snprintf(hdr, sizeof hdr, "%s",
	         nvlp_reader_header_text(rd) ? nvlp_reader_header_text(rd) : "");
	struct nvlp_rec_ncclcomm add[16];
	unsigned long nadd[16];
	int nadds = 0;
	for (int i = 3; i < argc; i++) {
		char *a = argv[i], *eq = strchr(a, '=');
		if (!strncmp(a, "+ncclcomm=", 10) && nadds < 16) {
			unsigned long long h;
			long long nn, nr, rk;
			unsigned long cnt = 1;
			if (sscanf(a + 10, "%llx:%lld:%lld:%lld:%lu", &h, &nn, &nr, &rk, &cnt) <
			    4) {
				usage();
				return 2;
			}
			add[nadds] =
			    (struct nvlp_rec_ncclcomm){h, (uint64_t)nn, (uint64_t)nr, (uint64_t)rk};
			nadd[nadds++] = cnt;
		} else if (a[0] == '-') {
			set_key(hdr, sizeof hdr, a + 1, NULL);
		} else if (eq) {
			*eq = 0;
			set_key(hdr, sizeof hdr, a, eq + 1);
		} else {
			usage();
			return 2;
		}
	}
	struct nvlp_record rec;
	int rc = nvlp_reader_next(rd, &rec);
	if (rc != 1 || rec.kind != NVLP_K_HEADER) {
		fprintf(stderr, "sh_rehdr: %s: no header record\n", argv[1]);
		return 1;
	}
	const struct nvlp_rec_header *h0 = (const void *)rec.f;
	nvlp_writer *w = nvlp_writer_open(argv[2], hdr, h0->t_mono, h0->t_real);
	if (!w) {
		perror(argv[2]);
		return 1;
	}
	for (int i = 0; i < nadds; i++)
		for (unsigned long k = 0; k < nadd[i]; k++) {
			struct nvlp_rec_ncclcomm x = add[i];
			x.nccl_comm += nadd[i] > 1 ? k : 0; /* COUNT > 1: distinct communicators */
			if (nvlp_writer_add(w, NVLP_K_NCCLCOMM, &x, NULL, 0) < 0)
				return 1;
		}
	while ((rc = nvlp_reader_next(rd, &rec)) == 1) {
		if (nvlp_writer_add(w, rec.kind, rec.f, rec.blob, rec.blob_len) < 0) {
			fprintf(stderr, "sh_rehdr: cannot copy a %s record\n",
			        nvlp_kind_info(rec.kind)->name);
			return 1;
		}
		if (nvlp_writer_pending(w) > (1u << 20) && nvlp_writer_flush(w) < 0)
			return 1;
	}
	nvlp_reader_close(rd);
	return nvlp_writer_close(w) < 0 || rc < 0;
}

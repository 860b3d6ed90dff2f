/* hk_read.c: prints every record of a trace as one "kind field=value ..." line, for the hooks' shell tests. */
#include <stdio.h>  /* printf */

#include "nvlp_trace.h"

/* Blobs: text kinds as text, stacks as addresses, build-ids in hex. */
static void print_blob(const struct nvlp_record *rec)
{
	if (!rec->blob)
		return;
	if (rec->kind == NVLP_K_STACK) {
		printf(" frames=");
		for (uint32_t i = 0; i + 8 <= rec->blob_len; i += 8) {
			uint64_t a;
			__builtin_memcpy(&a, rec->blob + i, 8);
			printf("%s0x%llx", i ? "," : "", (unsigned long long)a);
		}
		return;
	}
	if (rec->kind == NVLP_K_BUILDID) {
		printf(" id=");
		for (uint32_t i = 0; i < rec->blob_len; i++)
			printf("%02x", rec->blob[i]);
		return;
	}
	printf(" blob=");
	for (uint32_t i = 0; i < rec->blob_len; i++)
		putchar(rec->blob[i] == '\n' || rec->blob[i] == ' ' ? '|' : rec->blob[i]);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: hk_read FILE.nvlp\n");
		return 2;
	}
	char err[512];
	nvlp_reader *r = nvlp_reader_open(argv[1], err, sizeof err);
	if (!r) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct nvlp_record rec;
	int rc;
	while ((rc = nvlp_reader_next(r, &rec)) == 1) {
		const struct nvlp_kind_info *k = nvlp_kind_info(rec.kind);
		printf("%s", k->name);
		for (unsigned i = 0; i < k->nfields; i++) {
			uint64_t v = rec.f[i];
			if (i == 0 && rec.kind == NVLP_K_NCCL)
				printf(" fn=%s", nvlp_nccl_fn_name((unsigned)v));
			else if (i == 0 && (rec.kind == NVLP_K_COPY || rec.kind == NVLP_K_MANAGED ||
					    rec.kind == NVLP_K_PEER))
				printf(" fn=%s", nvlp_cuda_fn_name((unsigned)v));
			else if (i == 0 && rec.kind == NVLP_K_NOTE)
				printf(" code=%s", nvlp_note_name((unsigned)v));
			else if (k->types[i] == NVLP_FT_I)
				printf(" %s=%lld", k->fields[i], (long long)v);
			else if (k->types[i] == NVLP_FT_X)
				printf(" %s=0x%llx", k->fields[i], (unsigned long long)v);
			else
				printf(" %s=%llu", k->fields[i], (unsigned long long)v);
		}
		print_blob(&rec);
		putchar('\n');
	}
	printf("complete=%d\n", nvlp_reader_complete(r));
	if (rc < 0)
		fprintf(stderr, "%s\n", nvlp_reader_error(r));
	nvlp_reader_close(r);
	return rc < 0;
}

/* partial.c: `report --partial` and `merge`: a node's traces as loaded (every process's tables once
 * ingest and matching are done, before the first stage that looks across processes) written to a
 * compact file, and the job's report made from several such files: the same report, byte for
 * byte, as `report` over all the traces in one process, since every later stage starts from that
 * state (an_job_order, then an_open_loaded). */
#include "util/diag.h"
#include "out/partial.h"

#include <errno.h>    /* errno */
#include <stdio.h>    /* fopen */
#include <stdlib.h>   /* malloc, qsort */
#include <string.h>   /* memcmp */
#include <sys/stat.h> /* stat */
#include <zstd.h>     /* ZSTD_compress2, ZSTD_decompress */

#include "cli/commands.h"
#include "load/graphs.h"   /* an_graphs_file_io */
#include "load/kernelch.h" /* an_kch_file_io */
#include "load/pio.h"
#include "out/report.h"
#include "model/stages.h" /* an_grow */
#include "util/util.h"   /* nvlp_out_finish */

/* The file: magic, version, layout (below), the payload's size, then the payload as one zstd
 * frame with its checksum: a count of processes, then each process as rank_io walks it. */
static const char part_magic[8] = {'N', 'V', 'L', 'P', 'P', 'A', 'R', 'T'};
#define PART_VERSION 1
#define PART_HEAD 24
#define PART_LEVEL 6 /* zstd level: see docs/DISTRIBUTED.md for the sizes and times measured */

/* The structures are written as they are in memory: a partial is for the nvlprof build that
 * merges it (the same binary on every node). Their sizes tell one build's layout from another's. */
static uint32_t layout_id(void)
{
	const size_t sz[] = {sizeof(struct an_rank),   sizeof(struct an_call),
	                     sizeof(struct an_csig),   sizeof(struct an_rcomm),
	                     sizeof(struct an_dev),    sizeof(struct an_ival),
	                     sizeof(struct an_sample), sizeof(struct an_pair),
	                     sizeof(struct an_alloc),  sizeof(struct an_note),
	                     sizeof(struct an_link),   sizeof(struct an_module),
	                     sizeof(struct an_stack),  sizeof(struct an_sym),
	                     sizeof(struct an_choice), sizeof(struct an_inflight),
	                     sizeof(struct an_cname),  sizeof(struct an_failed),
	                     sizeof(struct an_umark),  sizeof(struct an_pystack),
	                     sizeof(struct an_pyref),  NVLP_K_COUNT,
	                     NVLP_NCCL_FN_COUNT};
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < sizeof sz / sizeof *sz; i++)
		for (int b = 0; b < 4; b++)
			h = (h ^ (uint8_t)(sz[i] >> (8 * b))) * 16777619u;
	return h;
}

/* Every pointer of a process's state, in one walk: a field the model gains that owns memory is
 * added here (an_job_free lists the same ones), or a merged report reads garbage. */
static void rank_io(struct an_pio *io, struct an_rank *r)
{
	an_pio_bytes(io, r, sizeof *r); /* the plain fields; each pointer is set again below */
	an_pio_str(io, &r->path);
	an_pio_str(io, &r->header);
	PIO_ARRC(io, r->inflight, r->ninflight, r->capinflight);
	PIO_ARRC(io, r->calls, r->ncalls, r->capcalls);
	size_t ncsig = r->csig ? r->ncalls : 0; /* one per call, or none kept */
	PIO_ARRC(io, r->csig, ncsig, r->capcsig);
	if (ncsig && ncsig != r->ncalls)
		io->err = 1;
	PIO_ARRC(io, r->csigs, r->ncsigs, r->capcsigs);
	PIO_ARR(io, r->comms, r->ncomms);
	PIO_ARR(io, r->devs, r->ndevs);
	for (size_t d = 0; d < r->ndevs; d++) {
		struct an_dev *v = &r->devs[d];
		PIO_ARRC(io, v->compute.v, v->compute.n, v->compute.cap);
		PIO_ARRC(io, v->nccl.v, v->nccl.n, v->nccl.cap);
		PIO_ARRC(io, v->comm.v, v->comm.n, v->comm.cap);
		PIO_ARRC(io, v->samples, v->nsamples, v->capsamples);
	}
	PIO_ARR(io, r->pairs, r->npairs);
	PIO_ARR(io, r->allocs, r->nallocs);
	PIO_ARR(io, r->notes, r->nnotes);
	PIO_ARR(io, r->links, r->nlinks);
	PIO_ARR(io, r->modules, r->nmodules);
	for (size_t i = 0; i < r->nmodules; i++)
		an_pio_str(io, &r->modules[i].path);
	PIO_ARR(io, r->stacks, r->nstacks);
	for (size_t i = 0; i < r->nstacks; i++)
		PIO_ARR(io, r->stacks[i].pc, r->stacks[i].n);
	PIO_ARR(io, r->syms, r->nsyms);
	for (size_t i = 0; i < r->nsyms; i++)
		an_pio_str(io, &r->syms[i].name);
	PIO_ARR(io, r->choices, r->nchoices);
	PIO_ARRC(io, r->cnames, r->ncnames, r->capcnames);
	PIO_ARRC(io, r->failed, r->nfailed, r->capfailed);
	an_kch_file_io(io, r);
	an_graphs_file_io(io, r);
	PIO_ARRC(io, r->marks, r->nmarks, r->capmarks);
	PIO_ARRC(io, r->umarks, r->numarks, r->capumarks);
	PIO_ARRC(io, r->pystacks, r->npystacks, r->cappystacks);
	for (size_t i = 0; i < r->npystacks; i++)
		an_pio_str(io, &r->pystacks[i].text);
	PIO_ARRC(io, r->pyrefs, r->npyrefs, r->cappyrefs);
}

static void put_u64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof v);
}

size_t an_partial_encode(struct an_job *job, uint8_t **out)
{
	struct an_pio io = {0};
	uint64_t nf = job->nranks + job->nothers;
	an_pio_bytes(&io, &nf, sizeof nf);
	for (size_t i = 0; i < nf; i++)
		rank_io(&io, &job->ranks[i]);
	size_t bound = ZSTD_compressBound(io.n);
	uint8_t *z = io.err ? NULL : malloc(PART_HEAD + bound);
	ZSTD_CCtx *cc = z ? ZSTD_createCCtx() : NULL;
	size_t zn = 0;
	if (cc) {
		ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, PART_LEVEL);
		ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
		zn = ZSTD_compress2(cc, z + PART_HEAD, bound, io.p, io.n);
		ZSTD_freeCCtx(cc);
	}
	free(io.p);
	if (!cc || ZSTD_isError(zn)) {
		free(z);
		return 0;
	}
	uint32_t v = PART_VERSION, lay = layout_id();
	memcpy(z, part_magic, 8);
	memcpy(z + 8, &v, 4);
	memcpy(z + 12, &lay, 4);
	put_u64(z + 16, io.n);
	*out = z;
	return PART_HEAD + zn;
}

/* Bytes of the traces the job was loaded from, for the size line */
static double traces_bytes(const struct an_job *job)
{
	double b = 0;
	for (size_t i = 0; i < job->nranks + job->nothers; i++) {
		struct stat st;
		if (job->ranks[i].path && !stat(job->ranks[i].path, &st))
			b += (double)st.st_size;
	}
	return b;
}

/* Write n bytes of p to path by way of path.tmp, renamed once complete: a partial cut short by
 * a killed node is never taken for a whole one. @return 0, -1 after printing the error */
static int write_whole(const char *path, const uint8_t *p, size_t n)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
		an_diag("nvlprof: report: partial name too long: %s\n", path);
		return -1;
	}
	FILE *f = fopen(tmp, "wb");
	if (!f) {
		an_diag("nvlprof: report: cannot write %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	fwrite(p, 1, n, f);
	if (nvlp_out_finish(f, tmp) < 0) {
		remove(tmp);
		return -1;
	}
	if (rename(tmp, path) != 0) {
		an_diag("nvlprof: report: cannot write %s: %s\n", path, strerror(errno));
		remove(tmp);
		return -1;
	}
	return 0;
}

int an_partial_write(char **paths, int npaths, int threads, const char *out, int with_output)
{
	if (with_output) {
		an_diag("nvlprof: report: --partial writes a partial only: give --json and -o "
		                "to merge\n");
		return 2;
	}
	struct an_job job;
	char err[512];
	if (an_job_load(&job, paths, npaths, threads, err, sizeof err) != 0) {
		an_diag("nvlprof: %s\n", err);
		an_job_free(&job);
		return 2;
	}
	uint8_t *z = NULL;
	size_t n = an_partial_encode(&job, &z);
	int rc = 0;
	if (!n) {
		an_diag("nvlprof: report: out of memory writing the partial %s\n", out);
		rc = 2;
	} else if (write_whole(out, z, n) < 0)
		rc = 2;
	else {
		double tb = traces_bytes(&job);
		printf("partial %s: %zu process(es), %.0f bytes of traces in %zu bytes (%.1f%%)\n",
		       out, job.nranks + job.nothers, tb, n, tb > 0 ? 100.0 * (double)n / tb : 0.0);
	}
	free(z);
	an_job_free(&job);
	return rc;
}

static void ranks_free(struct an_rank *v, size_t n)
{
	struct an_job j = {.ranks = v, .nranks = n};
	an_job_free(&j);
}

/* 1 if r's indexes point inside its own tables (what the later stages index with them). The zstd
 * checksum catches a damaged file; this, a partial put together by hand. */
static int rank_sane(const struct an_rank *r)
{
	for (size_t k = 0; k < r->ncalls; k++)
		if (r->calls[k].comm < 0 || (size_t)r->calls[k].comm >= r->ncomms ||
		    (r->csig && r->csig[k] != AN_CSIG_NONE && r->csig[k] >= r->ncsigs))
			return 0;
	for (size_t i = 0; i < r->ninflight; i++)
		if (r->inflight[i].call < -1 || r->inflight[i].call >= (int64_t)r->ncalls)
			return 0;
	return 1;
}

/* The processes of a payload of n bytes. @return 0, -1 (damaged: what was read is freed) */
static int part_decode(uint8_t *p, size_t n, struct an_rank **out, size_t *nout)
{
	struct an_pio io = {.rd = 1, .p = p, .n = n};
	uint64_t nf = 0;
	an_pio_bytes(&io, &nf, sizeof nf);
	if (io.err || nf > n / sizeof(struct an_rank))
		return -1;
	struct an_rank *v = calloc(nf ? nf : 1, sizeof *v);
	if (!v)
		return -1;
	int sane = 1;
	for (size_t i = 0; i < nf; i++) {
		rank_io(&io, &v[i]);
		sane = sane && !io.err && rank_sane(&v[i]);
	}
	if (io.err || io.off != n || !sane) {
		ranks_free(v, nf);
		return -1;
	}
	*out = v;
	*nout = nf;
	return 0;
}

/* Why the file of n bytes at z is no partial this build reads, into why; "" if it is one */
static void part_check(const uint8_t *z, size_t n, char *why, size_t len)
{
	uint32_t v, lay;
	*why = 0;
	if (n >= 8 && n < PART_HEAD && !memcmp(z, part_magic, 8)) {
		snprintf(why, len, "is cut short (no whole header)");
		return;
	}
	if (n < PART_HEAD || memcmp(z, part_magic, 8)) {
		snprintf(why, len, "%s",
		         n >= 4 && !memcmp(z, "NVLP", 4)
		             ? "is a trace, not a partial (give traces to report, partials to merge)"
		             : "is not an nvlprof partial (no NVLPPART magic)");
		return;
	}
	memcpy(&v, z + 8, 4);
	memcpy(&lay, z + 12, 4);
	if (v != PART_VERSION)
		snprintf(why, len,
		         "is a version %u partial; this nvlprof reads version %u (make the partials "
		         "with the nvlprof that merges them)",
		         v, PART_VERSION);
	else if (lay != layout_id())
		snprintf(why, len,
		         "was written by another nvlprof build (layout %08x, this one %08x): make "
		         "the partials with the nvlprof that merges them",
		         lay, layout_id());
}

/* The whole file at path (malloc'ed) into *z. @return its size, or -1 with errno */
static long read_all(const char *path, uint8_t **z)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 0, n = 0;
	uint8_t *p = NULL;
	for (;;) {
		uint8_t *q = an_grow(p, &cap, n + 65536, 1);
		if (!q) {
			free(p);
			fclose(f);
			errno = ENOMEM;
			return -1;
		}
		p = q;
		size_t got = fread(p + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(p);
		errno = EIO;
		return -1;
	}
	*z = p;
	return (long)n;
}

int an_partial_read(const char *path, struct an_rank **out, size_t *nout)
{
	uint8_t *z = NULL;
	long n = read_all(path, &z);
	if (n < 0) {
		an_diag("nvlprof: merge: cannot read %s: %s\n", path, strerror(errno));
		return -1;
	}
	char why[256];
	part_check(z, (size_t)n, why, sizeof why);
	uint64_t raw = 0;
	if (!*why)
		memcpy(&raw, z + 16, 8);
	unsigned long long fs = *why ? 0 : ZSTD_getFrameContentSize(z + PART_HEAD, (size_t)n - PART_HEAD);
	uint8_t *p = !*why && fs == raw && raw < (1ull << 40) ? malloc(raw ? raw : 1) : NULL;
	if (!*why && !p)
		snprintf(why, sizeof why, "is cut short or corrupt (%s)",
		         fs == raw ? "out of memory" : "its compressed payload is incomplete");
	if (p) {
		size_t got = ZSTD_decompress(p, raw, z + PART_HEAD, (size_t)n - PART_HEAD);
		if (ZSTD_isError(got) || got != raw)
			snprintf(why, sizeof why, "is cut short or corrupt (zstd: %s)",
			         ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size differs");
		else if (part_decode(p, raw, out, nout) != 0)
			snprintf(why, sizeof why, "is corrupt (its contents do not decode)");
	}
	free(p);
	free(z);
	if (*why)
		an_diag("nvlprof: merge: %s %s\n", path, why);
	return *why ? -1 : 0;
}

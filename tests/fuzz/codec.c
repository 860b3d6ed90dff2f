/* codec.c: a trace decoded into an editable list of records and encoded back with the writer (fuzzer). */
#include <fcntl.h>    /* open */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* malloc, realloc, free */
#include <string.h>   /* memcpy, memmem */
#include <sys/mman.h> /* memfd_create */
#include <unistd.h>   /* write, pread, ftruncate, dup */

#include "codec.h"

int fz_split(const uint8_t *data, size_t size, size_t off[FZ_MAX_TRACES], size_t len[FZ_MAX_TRACES])
{
	int n = 1;
	off[0] = 0;
	size_t from = 1;
	while (n < FZ_MAX_TRACES && from < size) {
		const uint8_t *m = memmem(data + from, size - from, NVLP_MAGIC, 8);
		if (!m)
			break;
		off[n++] = (size_t)(m - data);
		from = (size_t)(m - data) + 1;
	}
	for (int i = 0; i < n; i++)
		len[i] = (i + 1 < n ? off[i + 1] : size) - off[i];
	return n;
}

int fz_insert(struct fz_trace *t, size_t at, const struct fz_rec *rec)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct fz_rec *r = realloc(t->r, cap * sizeof *r);
		if (!r)
			return -1;
		t->r = r;
		t->cap = cap;
	}
	struct fz_rec c = *rec;
	c.blob = NULL;
	if (rec->blob_len) {
		if (!(c.blob = malloc(rec->blob_len)))
			return -1;
		memcpy(c.blob, rec->blob, rec->blob_len);
	}
	if (at > t->n)
		at = t->n;
	memmove(t->r + at + 1, t->r + at, (t->n - at) * sizeof *t->r);
	t->r[at] = c;
	t->n++;
	return 0;
}

void fz_delete(struct fz_trace *t, size_t at)
{
	if (at >= t->n)
		return;
	free(t->r[at].blob);
	memmove(t->r + at, t->r + at + 1, (t->n - at - 1) * sizeof *t->r);
	t->n--;
}

void fz_free(struct fz_trace *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->r[i].blob);
	free(t->r);
	memset(t, 0, sizeof *t);
}

int fz_decode_file(const char *path, struct fz_trace *t)
{
	memset(t, 0, sizeof *t);
	char err[256];
	nvlp_reader *rd = nvlp_reader_open(path, err, sizeof err);
	if (!rd)
		return -1;
	struct nvlp_record rec;
	uint64_t off_before = 0, off, size;
	nvlp_reader_progress(rd, &off_before, &size);
	while (nvlp_reader_next(rd, &rec) == 1) {
		const struct nvlp_kind_info *ki = nvlp_kind_info(rec.kind);
		if (!ki)
			break;
		/* a new frame was read for this record: the frame before ended after the last one */
		nvlp_reader_progress(rd, &off, &size);
		if (off != off_before && t->n)
			t->r[t->n - 1].flush_after = 1;
		off_before = off;
		struct fz_rec r = {.kind = rec.kind, .blob = (uint8_t *)rec.blob, .blob_len = rec.blob ? rec.blob_len : 0};
		memcpy(r.f, rec.f, ki->nfields * sizeof(uint64_t));
		if (fz_insert(t, t->n, &r) < 0)
			break;
	}
	nvlp_reader_close(rd);
	if (!t->n || t->r[0].kind != NVLP_K_HEADER) {
		fz_free(t);
		return -1;
	}
	return 0;
}

int fz_decode(const char *dir, const uint8_t *data, size_t size, struct fz_trace *t)
{
	char path[512];
	snprintf(path, sizeof path, "%s/decode.nvlp", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int ok = write(fd, data, size) == (ssize_t)size;
	close(fd);
	return ok ? fz_decode_file(path, t) : -1;
}

/* One memfd for every encode: the writer gets a dup of it, so closing the writer leaves ours. */
static int scratch_fd = -1;

int fz_encode(const struct fz_trace *t, uint8_t **out, size_t *len, size_t *cap)
{
	if (!t->n)
		return -1;
	if (scratch_fd < 0 && (scratch_fd = memfd_create("nvlp-fuzz", MFD_CLOEXEC)) < 0)
		return -1;
	if (ftruncate(scratch_fd, 0) < 0 || lseek(scratch_fd, 0, SEEK_SET) < 0)
		return -1;
	int fd = dup(scratch_fd);
	if (fd < 0)
		return -1;
	/* the header text is a C string for the writer: it stops at a NUL */
	const struct fz_rec *h = &t->r[0];
	char *kv = malloc((size_t)h->blob_len + 1);
	if (!kv) {
		close(fd);
		return -1;
	}
	if (h->blob_len)
		memcpy(kv, h->blob, h->blob_len);
	kv[h->blob_len] = 0;
	nvlp_writer *w = nvlp_writer_open_fd(fd, kv, h->f[0], h->f[1]);
	free(kv);
	if (!w) {
		close(fd);
		return -1;
	}
	for (size_t i = 1; i < t->n; i++) {
		const struct fz_rec *r = &t->r[i];
		nvlp_writer_add(w, r->kind, r->f, r->blob, r->blob_len); /* an invalid kind is left out */
		if (r->flush_after)
			nvlp_writer_flush(w);
	}
	if (nvlp_writer_close(w) < 0)
		return -1;
	off_t n = lseek(scratch_fd, 0, SEEK_END);
	if (n <= 0)
		return -1;
	if (*len + (size_t)n > *cap) {
		size_t c = (*len + (size_t)n) * 2;
		uint8_t *b = realloc(*out, c);
		if (!b)
			return -1;
		*out = b;
		*cap = c;
	}
	if (pread(scratch_fd, *out + *len, (size_t)n, 0) != n)
		return -1;
	*len += (size_t)n;
	return 0;
}

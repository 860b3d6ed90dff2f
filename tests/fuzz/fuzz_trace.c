/* fuzz_trace.c: libFuzzer target over the reader and every analyzer command (info, dump, report, diff, export, the HTML pages), structure-aware. */
#include <dirent.h>   /* opendir */
#include <errno.h>    /* ESRCH */
#include <fcntl.h>    /* open */
#include <signal.h>   /* kill */
#include <stdint.h>   /* uint8_t */
#include <stdio.h>    /* snprintf, fopen */
#include <stdlib.h>   /* malloc, free, getenv */
#include <string.h>   /* memcpy */
#include <sys/stat.h> /* mkdir */
#include <unistd.h>   /* write, unlink, getpid */

#include "codec.h"
#include "cli/commands.h"
#include "out/export.h" /* nvlp_cmd_export */
#include "util/util.h" /* nvlp_max_threads */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* ---- the target: the input's traces are the files of one job, read by every command ---- */
static char dir[256], job[300], solo[300], out[300], files[FZ_MAX_TRACES][340];
static int every; /* NVLP_FUZZ_EVERY=1: every command on every input */

/* The outputs of export and --html in dir o (a file, or chrome's one file per rank in o/ch/) go
 * once the command has run: the next input starts from an empty out/. */
static void empty_out(const char *o)
{
	char sub[700];
	snprintf(sub, sizeof sub, "%s/ch", o);
	const char *const dirs[] = {sub, o};
	for (int k = 0; k < 2; k++) {
		DIR *d = opendir(dirs[k]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[1000];
			snprintf(p, sizeof p, "%s/%s", dirs[k], e->d_name);
			if (unlink(p) < 0)
				rmdir(p);
		}
		closedir(d);
	}
}

static void cleanup(void)
{
	char p[400];
	empty_out(out);
	rmdir(out);
	for (int i = 0; i < FZ_MAX_TRACES; i++)
		unlink(files[i]);
	snprintf(p, sizeof p, "%s/r0.nvlp", solo);
	unlink(p);
	snprintf(p, sizeof p, "%s/decode.nvlp", dir);
	unlink(p);
	rmdir(job);
	rmdir(solo);
	rmdir(dir);
}

/* A crashed run (fork mode: many) leaves its directory; the next start removes those whose
 * process is gone. */
static void remove_stale(const char *base)
{
	DIR *d = opendir(base);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		int pid;
		char tail;
		if (sscanf(e->d_name, "nvlp-fuzz-%d%c", &pid, &tail) != 1 || pid <= 0)
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		char p[600];
		static const char *const parts[] = {"job/r0.nvlp", "job/r1.nvlp", "solo/r0.nvlp",
						    "decode.nvlp", "job", "solo", ""};
		snprintf(p, sizeof p, "%s/%s/out", base, e->d_name);
		empty_out(p);
		rmdir(p);
		for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
			snprintf(p, sizeof p, "%s/%s/%s", base, e->d_name, parts[i]);
			if (unlink(p) < 0)
				rmdir(p);
		}
	}
	closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* tmpfs: no disk I/O per execution */
	const char *base = getenv("NVLP_FUZZ_DIR") ? getenv("NVLP_FUZZ_DIR") : "/dev/shm";
	remove_stale(base);
	snprintf(dir, sizeof dir, "%s/nvlp-fuzz-%d", base, (int)getpid());
	snprintf(job, sizeof job, "%s/job", dir);
	snprintf(solo, sizeof solo, "%s/solo", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	mkdir(dir, 0700);
	mkdir(job, 0700);
	mkdir(solo, 0700);
	mkdir(out, 0700);
	for (int i = 0; i < FZ_MAX_TRACES; i++)
		snprintf(files[i], sizeof files[i], "%s/r%d.nvlp", job, i);
	atexit(cleanup);
	every = getenv("NVLP_FUZZ_EVERY") && atoi(getenv("NVLP_FUZZ_EVERY")) > 0;
	nvlp_max_threads = 1;
	/* The commands' own output goes nowhere; libFuzzer and the sanitizers keep fd 2 (libFuzzer
	 * took its copy of the stderr stream pointer before this runs). */
	FILE *null = fopen("/dev/null", "w");
	if (null) {
		setvbuf(null, NULL, _IOFBF, 1 << 16); /* a write(2) per 64 KB of output, not per 4 KB */
		stdout = null;
		stderr = null;
	}
	return 0;
}

static void put_file(const char *path, const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	while (size) {
		ssize_t k = write(fd, data, size);
		if (k <= 0)
			break;
		data += k;
		size -= (size_t)k;
	}
	close(fd);
}

static int call(int (*cmd)(int, char **), int argc, const char **argv)
{
	char *v[12];
	for (int i = 0; i < argc; i++)
		v[i] = (char *)argv[i];
	v[argc] = NULL;
	return cmd(argc, v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off[FZ_MAX_TRACES], len[FZ_MAX_TRACES];
	int n = fz_split(data, size, off, len);
	for (int i = 0; i < FZ_MAX_TRACES; i++) {
		if (i < n)
			put_file(files[i], data + off[i], len[i]);
		else
			unlink(files[i]);
	}
	/* the last trace alone is the other run of diff */
	char solo_file[360];
	snprintf(solo_file, sizeof solo_file, "%s/r0.nvlp", solo);
	put_file(solo_file, data + off[n - 1], len[n - 1]);
	/* The input's last byte (a CRC byte of its last frame: it changes with nearly every mutation)
	 * picks one command (bits 1-3) and a variant (bit 0: JSON, or chrome's one file per rank, or
	 * diff's HTML page): one command per execution is several times faster than all eight, and
	 * every command still runs on ~1/8 of the inputs (libFuzzer keeps an input for the coverage its
	 * command reached). NVLP_FUZZ_EVERY=1 runs all eight. */
	int last = size ? data[size - 1] : 0, alt = last & 1, pick = (last >> 1) & 7;
	char o[340];
	if (every || pick == 0)
		call(nvlp_cmd_info, 2, (const char *[]){"info", job});
	if (every || pick == 1) {
		if (alt)
			call(nvlp_cmd_dump, 3, (const char *[]){"dump", "--json", job});
		else
			call(nvlp_cmd_dump, 2, (const char *[]){"dump", job});
	}
	/* -j 1 (and nvlp_max_threads = 1): one thread, so a crash replays the same way */
	if (every || pick == 2) {
		if (alt)
			call(nvlp_cmd_report, 5, (const char *[]){"report", "-j", "1", "--json", job});
		else
			call(nvlp_cmd_report, 4, (const char *[]){"report", "-j", "1", job});
	}
	if (every || pick == 3) {
		if (alt)
			call(nvlp_cmd_diff, 6, (const char *[]){"diff", "-j", "1", "--json", solo, job});
		else
			call(nvlp_cmd_diff, 5, (const char *[]){"diff", "-j", "1", solo, job});
	}
	if (every || pick == 4) {
		snprintf(o, sizeof o, "%s/t.pftrace", out);
		call(nvlp_cmd_export, 8, (const char *[]){"export", "--format", "perfetto", "-j", "1", "-o", o, job});
	}
	if (every || pick == 5) {
		snprintf(o, sizeof o, alt ? "%s/ch/" : "%s/t.json", out);
		call(nvlp_cmd_export, 8, (const char *[]){"export", "--format", "chrome", "-j", "1", "-o", o, job});
	}
	if (every || pick == 6) {
		snprintf(o, sizeof o, "%s/t.sqlite", out);
		call(nvlp_cmd_export, 8, (const char *[]){"export", "--format", "sqlite", "-j", "1", "-o", o, job});
	}
	if (every || pick == 7) {
		snprintf(o, sizeof o, "%s/t.html", out);
		if (alt)
			call(nvlp_cmd_diff, 6, (const char *[]){"diff", "-j", "1", "--html", o, solo, job});
		else
			call(nvlp_cmd_report, 6, (const char *[]){"report", "-j", "1", "--html", o, job});
	}
	empty_out(out);
	fflush(stdout);
	fflush(stderr);
	return 0;
}

/* ---- the mutator: decoded records, mutated fields, re-encoded into valid frames ---- */
static uint64_t rng;
static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static uint64_t boundary(uint64_t old)
{
	static const uint64_t v[] = {0, 1, 2, UINT64_MAX, (uint64_t)INT64_MIN, (uint64_t)INT64_MAX,
				     0xFFFFFFFFull, 0x100000000ull, 0x7FFFFFFFull, 0x80000000ull,
				     0xFFFFull, 0x10000ull, 0xFFull, 1ull << 40, 1ull << 62,
				     (uint64_t)INT64_MAX - 1000, UINT64_MAX - 1000, (uint64_t)-2};
	switch (below(6)) {
	case 0:
	case 1:
		return v[below(sizeof v / sizeof v[0])];
	case 2:
		return old + (uint64_t)(int64_t)((int)below(33) - 16);
	case 3:
		return old ^ (1ull << below(64));
	case 4:
		return rnd() >> below(64);
	default:
		return old * (below(2) ? 2 : 1000);
	}
}

/* an existing value of the same field in another record of that kind: ids that point elsewhere */
static uint64_t same_field(const struct fz_trace *t, unsigned kind, unsigned field, uint64_t old)
{
	for (int tries = 0; tries < 8; tries++) {
		const struct fz_rec *o = &t->r[below(t->n)];
		if (o->kind == kind)
			return o->f[field];
	}
	return old;
}

static void mutate_blob(struct fz_rec *r)
{
	if (r->kind == NVLP_K_HEADER && below(2)) {
		static const char *const keys[] = {"rank", "world_size", "local_rank", "pid", "format",
						   "t_mono", "t_real", "host", "env.NCCL_P2P_DISABLE"};
		static const char *const vals[] = {"-1", "0", "1", "2", "2147483647", "-2147483648",
						   "4294967295", "9223372036854775807", "", "x", "1e9"};
		char line[96];
		int k = snprintf(line, sizeof line, "%s=%s\n", keys[below(9)], vals[below(11)]);
		uint8_t *b = realloc(r->blob, r->blob_len + (size_t)k);
		if (!b)
			return;
		/* prepended, so it is the value the reader finds first */
		memmove(b + k, b, r->blob_len);
		memcpy(b, line, (size_t)k);
		r->blob = b;
		r->blob_len += (uint32_t)k;
		return;
	}
	switch (below(4)) {
	case 0: /* cut */
		r->blob_len = (uint32_t)below(r->blob_len + 1);
		if (!r->blob_len) {
			free(r->blob);
			r->blob = NULL;
		}
		break;
	case 1: { /* grow */
		size_t add = 1 + below(below(4) ? 16 : 4096);
		uint8_t *b = realloc(r->blob, r->blob_len + add);
		if (!b)
			return;
		for (size_t i = 0; i < add; i++)
			b[r->blob_len + i] = (uint8_t)(below(2) ? rnd() : b[below(r->blob_len + i)]);
		r->blob = b;
		r->blob_len += (uint32_t)add;
		break;
	}
	default: /* flip bytes */
		for (int i = 0; i < 1 + (int)below(4) && r->blob_len; i++)
			r->blob[below(r->blob_len)] ^= (uint8_t)(1 + below(255));
	}
}

static void mutate_trace(struct fz_trace *t, struct fz_trace *other, const struct fz_trace *splice)
{
	size_t n = t->n;
	size_t i = 1 + below(n > 1 ? n - 1 : 1); /* never the HEADER's place */
	switch (below(12)) {
	case 0:
	case 1:
	case 2:
	case 3: { /* a field */
		size_t j = below(n);
		struct fz_rec *r = &t->r[j];
		const struct nvlp_kind_info *ki = nvlp_kind_info(r->kind);
		if (!ki || !ki->nfields)
			break;
		unsigned f = (unsigned)below(ki->nfields);
		r->f[f] = below(3) ? boundary(r->f[f]) : same_field(t, r->kind, f, r->f[f]);
		break;
	}
	case 4: /* a blob */
		for (int tries = 0; tries < 8; tries++) {
			struct fz_rec *r = &t->r[below(n)];
			const struct nvlp_kind_info *ki = nvlp_kind_info(r->kind);
			if (ki && ki->has_blob) {
				mutate_blob(r);
				break;
			}
		}
		break;
	case 5: { /* insert: a copy of a record, one field changed, or a record of another kind */
		struct fz_rec r = t->r[below(n)];
		if (below(3) == 0) {
			r.kind = 1 + (unsigned)below(NVLP_K_COUNT - 1);
			r.blob = NULL;
			r.blob_len = 0;
		}
		const struct nvlp_kind_info *ki = nvlp_kind_info(r.kind);
		if (ki && ki->nfields) {
			unsigned f = (unsigned)below(ki->nfields);
			r.f[f] = boundary(r.f[f]);
		}
		if (ki && !ki->has_blob)
			r.blob_len = 0;
		r.flush_after = 0;
		fz_insert(t, i, &r);
		break;
	}
	case 6: { /* delete a run */
		size_t k = 1 + below(below(4) ? 2 : 64);
		for (size_t m = 0; m < k && i < t->n; m++)
			fz_delete(t, i);
		break;
	}
	case 7: { /* duplicate a run */
		size_t k = 1 + below(8), at = 1 + below(n);
		for (size_t m = 0; m < k && i + m < t->n && t->n < 100000; m++) {
			struct fz_rec r = t->r[i + 2 * m < t->n ? i + 2 * m : i];
			fz_insert(t, at + m, &r);
		}
		break;
	}
	case 8: { /* reorder: swap two */
		size_t j = 1 + below(n > 1 ? n - 1 : 1);
		if (i < n && j < n) {
			struct fz_rec tmp = t->r[i];
			t->r[i] = t->r[j];
			t->r[j] = tmp;
		}
		break;
	}
	case 9: /* frame boundaries */
		t->r[below(n)].flush_after ^= 1;
		break;
	case 10: /* splice a run from another input */
		if (splice && splice->n > 1) {
			size_t from = 1 + below(splice->n - 1), k = 1 + below(16);
			for (size_t m = 0; m < k && from + m < splice->n; m++)
				fz_insert(t, i + m, &splice->r[from + m]);
		}
		break;
	default: /* move a record to the other rank's trace */
		if (other && i < t->n && other->n) {
			fz_insert(other, 1 + below(other->n), &t->r[i]);
			fz_delete(t, i);
		}
	}
}

static size_t encode_all(struct fz_trace *t, int nt, uint8_t *data, size_t max_size)
{
	uint8_t *out = NULL;
	size_t len = 0, cap = 0;
	for (int k = 0; k < nt; k++)
		if (fz_encode(&t[k], &out, &len, &cap) < 0)
			len = 0;
	size_t r = 0;
	if (len && len <= max_size) {
		memcpy(data, out, len);
		r = len;
	}
	free(out);
	return r;
}

static int decode_all(const uint8_t *data, size_t size, struct fz_trace *t)
{
	size_t off[FZ_MAX_TRACES], len[FZ_MAX_TRACES];
	int n = fz_split(data, size, off, len), nt = 0;
	for (int k = 0; k < n; k++)
		if (fz_decode(dir, data + off[k], len[k], &t[nt]) == 0)
			nt++;
	return nt;
}

static size_t structured(uint8_t *data, size_t size, size_t max_size, const uint8_t *data2,
			 size_t size2)
{
	struct fz_trace t[FZ_MAX_TRACES], s[FZ_MAX_TRACES];
	int nt = decode_all(data, size, t);
	if (!nt)
		return 0;
	int ns = data2 ? decode_all(data2, size2, s) : 0;
	if (data2 && ns) {
		/* crossover: splice a run of records of the other input into each trace */
		for (int k = 0; k < nt; k++)
			mutate_trace(&t[k], NULL, &s[below((size_t)ns)]);
		/* or take the other input's second rank */
		if (nt == 1 && ns == 2 && below(2)) {
			t[1] = s[1];
			memset(&s[1], 0, sizeof s[1]);
			nt = 2;
		}
	} else {
		int m = 1 + (int)below(4);
		for (int j = 0; j < m; j++) {
			int k = (int)below((size_t)nt);
			mutate_trace(&t[k], nt > 1 ? &t[1 - k] : NULL, NULL);
		}
		if (below(64) == 0 && nt == 2) { /* one rank only */
			fz_free(&t[1]);
			nt = 1;
		}
	}
	size_t r = encode_all(t, nt, data, max_size);
	for (int k = 0; k < nt; k++)
		fz_free(&t[k]);
	for (int k = 0; k < ns; k++)
		fz_free(&s[k]);
	return r;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	rng = seed;
	size_t r = below(10) ? structured(data, size, max_size, NULL, 0) : 0;
	if (!r)
		return LLVMFuzzerMutate(data, size, max_size); /* raw: byte flips, cuts, inserts */
	if (below(20) == 0) /* a byte flip or cut after re-encoding: frames, CRC and zstd themselves */
		return LLVMFuzzerMutate(data, r, max_size);
	return r;
}

size_t LLVMFuzzerCustomCrossOver(const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2,
				 uint8_t *out, size_t max_out, unsigned int seed)
{
	rng = seed;
	if (s1 > max_out)
		return 0;
	memcpy(out, d1, s1);
	return structured(out, s1, max_out, d2, s2);
}

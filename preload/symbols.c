/* symbols.c: symbols that travel with the trace: build-ids read in memory, SYMBOL records for the stack frames read from module files at the end. */
#include <elf.h>      /* Elf64_*, NT_GNU_BUILD_ID */
#include <fcntl.h>    /* open */
#include <link.h>     /* struct dl_phdr_info */
#include <stdlib.h>   /* malloc, qsort */
#include <string.h>   /* memcmp */
#include <sys/stat.h> /* fstat */
#include <unistd.h>   /* pread */

#include "nvlp_rt.h"
#include "rt_symbols.h"

/*
 * The writer thread sees every MODULE, BUILDID and STACK record on its way to the file
 * (nvlp_syms_seen): it keeps the modules and the set of distinct return addresses. When the trace
 * ends (nvlp_syms_write), each module's file is opened, only if it is a regular file whose build-id
 * equals the one read from the loaded image, and its .symtab (else .dynsym) is scanned once, in
 * chunks, keeping only the function symbols that cover a frame: no table is held, the time is
 * linear in the table and bounded by a deadline. Every size and offset read from the file is
 * checked against the file's size first: a truncated or odd file gives fewer symbols, not a
 * crash.
 */

/* ---- build-id of a loaded image ------------------------------------------------------------ */

/* Walk the notes in [p, p + n) for the GNU build-id. @return its length (0 if none). */
static size_t find_build_id(const uint8_t *p, size_t n, uint8_t *out, size_t cap)
{
	size_t off = 0;
	while (off + sizeof(Elf64_Nhdr) <= n) {
		Elf64_Nhdr nh;
		memcpy(&nh, p + off, sizeof nh);
		size_t name = (nh.n_namesz + 3u) & ~3u, desc = (nh.n_descsz + 3u) & ~3u;
		size_t at = off + sizeof nh;
		if (name > n - at || desc > n - at - name)
			return 0;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(p + at, "GNU", 4) &&
		    nh.n_descsz > 0 && nh.n_descsz <= cap) {
			memcpy(out, p + at + name, nh.n_descsz);
			return nh.n_descsz;
		}
		off = at + name + desc;
	}
	return 0;
}

size_t nvlp_build_id_mem(const struct dl_phdr_info *info, uint8_t *out, size_t cap)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		/* Only notes inside a loaded segment are mapped. */
		int mapped = 0;
		for (int j = 0; j < info->dlpi_phnum && !mapped; j++) {
			const ElfW(Phdr) *l = &info->dlpi_phdr[j];
			mapped = l->p_type == PT_LOAD && ph->p_vaddr >= l->p_vaddr &&
			         ph->p_vaddr + ph->p_filesz <= l->p_vaddr + l->p_filesz;
		}
		if (!mapped)
			continue;
		size_t n = find_build_id((const uint8_t *)(info->dlpi_addr + ph->p_vaddr),
		                         ph->p_filesz, out, cap);
		if (n)
			return n;
	}
	return 0;
}

/* ---- what the trace's stacks touch (writer thread, under the runtime's writer lock) --------- */

#define MAX_MODULES 1024
#define MAX_PCS (1u << 20) /* distinct return addresses kept; more are not symbolized */

struct mod {
	uint64_t base, start, end;
	char *path;
	uint8_t id[NVLP_BUILD_ID_MAX];
	size_t id_len;
};
static struct {
	struct mod mods[MAX_MODULES];
	unsigned nmods;
	uint64_t *pcs; /* open addressing, 0 = empty */
	size_t pcs_cap, npcs;
} touched;

static struct mod *mod_by_base(uint64_t base)
{
	for (unsigned i = 0; i < touched.nmods; i++)
		if (touched.mods[i].base == base)
			return &touched.mods[i];
	return NULL;
}

static void pc_add(uint64_t pc)
{
	if (!pc || touched.npcs >= MAX_PCS)
		return;
	if (touched.npcs * 2 >= touched.pcs_cap) {
		size_t cap = touched.pcs_cap ? touched.pcs_cap * 2 : 4096;
		uint64_t *n = calloc(cap, sizeof *n);
		if (!n)
			return;
		for (size_t i = 0; i < touched.pcs_cap; i++)
			if (touched.pcs[i])
				for (size_t k =
				         (touched.pcs[i] * 0x9e3779b97f4a7c15ull) & (cap - 1);
				     ; k = (k + 1) & (cap - 1))
					if (!n[k]) {
						n[k] = touched.pcs[i];
						break;
					}
		free(touched.pcs);
		touched.pcs = n;
		touched.pcs_cap = cap;
	}
	for (size_t k = (pc * 0x9e3779b97f4a7c15ull) & (touched.pcs_cap - 1);;
	     k = (k + 1) & (touched.pcs_cap - 1)) {
		if (touched.pcs[k] == pc)
			return;
		if (!touched.pcs[k]) {
			touched.pcs[k] = pc;
			touched.npcs++;
			return;
		}
	}
}

void nvlp_syms_seen(unsigned kind, const void *fields, const void *blob, size_t blob_len)
{
	if (kind == NVLP_K_STACK) {
		const uint8_t *b = blob;
		for (size_t i = 0; i + 8 <= blob_len; i += 8) {
			uint64_t pc;
			memcpy(&pc, b + i, 8);
			pc_add(pc);
		}
	} else if (kind == NVLP_K_MODULE) {
		const struct nvlp_rec_module *m = fields;
		if (touched.nmods >= MAX_MODULES || mod_by_base(m->base))
			return;
		char *path = malloc(blob_len + 1);
		if (!path)
			return;
		memcpy(path, blob, blob_len);
		path[blob_len] = 0;
		touched.mods[touched.nmods++] =
		    (struct mod){.base = m->base, .start = m->start, .end = m->end, .path = path};
	} else if (kind == NVLP_K_BUILDID) {
		struct mod *m = mod_by_base(((const struct nvlp_rec_buildid *)fields)->base);
		if (m && blob_len <= sizeof m->id) {
			memcpy(m->id, blob, blob_len);
			m->id_len = blob_len;
		}
	}
}

void nvlp_syms_reset(void)
{
	for (unsigned i = 0; i < touched.nmods; i++)
		free(touched.mods[i].path);
	touched.nmods = 0;
	free(touched.pcs);
	touched.pcs = NULL;
	touched.pcs_cap = touched.npcs = 0;
}

/* ---- reading a module's file ---------------------------------------------------------------- */

struct elf_file {
	int fd;
	uint64_t size;
	Elf64_Ehdr eh;
	Elf64_Shdr *sh; /* e_shnum entries */
};

/* pread exactly n bytes at off, inside the file. */
static int read_at(const struct elf_file *f, void *buf, uint64_t n, uint64_t off)
{
	if (off > f->size || n > f->size - off)
		return -1;
	uint8_t *p = buf;
	while (n) {
		ssize_t k = pread(f->fd, p, n, (off_t)off);
		if (k <= 0)
			return -1; /* EINTR included: give up rather than loop on a file that shrank */
		p += k;
		n -= (uint64_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

/* A regular file only (a FIFO or device would block or never end), opened without blocking. */
static int elf_open(struct elf_file *f, const char *path)
{
	f->sh = NULL;
	f->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (f->fd < 0)
		return -1;
	struct stat st;
	if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto fail;
	f->size = (uint64_t)st.st_size;
	if (read_at(f, &f->eh, sizeof f->eh, 0) < 0 || memcmp(f->eh.e_ident, ELFMAG, SELFMAG) ||
	    f->eh.e_ident[EI_CLASS] != ELFCLASS64 || f->eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    f->eh.e_shnum == 0)
		goto fail;
	f->sh = malloc((size_t)f->eh.e_shnum * sizeof *f->sh);
	if (!f->sh ||
	    read_at(f, f->sh, (uint64_t)f->eh.e_shnum * sizeof *f->sh, f->eh.e_shoff) < 0)
		goto fail;
	return 0;
fail:
	free(f->sh);
	f->sh = NULL;
	close(f->fd);
	return -1;
}

static void elf_close(struct elf_file *f)
{
	free(f->sh);
	close(f->fd);
}

/* The file's build-id, from its PT_NOTE segments (what the loader mapped). @return its length. */
static size_t elf_build_id(const struct elf_file *f, uint8_t *out, size_t cap)
{
	if (f->eh.e_phentsize != sizeof(Elf64_Phdr) || f->eh.e_phnum > 4096)
		return 0;
	for (unsigned i = 0; i < f->eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (read_at(f, &ph, sizeof ph, f->eh.e_phoff + (uint64_t)i * sizeof ph) < 0)
			return 0;
		if (ph.p_type != PT_NOTE || ph.p_filesz > 65536)
			continue;
		static uint8_t buf[65536]; /* off the caller's stack; the writer lock is held */
		if (read_at(f, buf, ph.p_filesz, ph.p_offset) < 0)
			continue;
		size_t n = find_build_id(buf, ph.p_filesz, out, cap);
		if (n)
			return n;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Index of the first of the n sorted offsets >= v. */
static size_t lower_bound(const uint64_t *o, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct scan {
	nvlp_writer *w;
	uint64_t base;
	const uint64_t *off; /* sorted offsets to cover */
	uint8_t *covered;    /* per offset: a symbol was found */
	size_t n;
	uint64_t deadline;
	uint64_t written;
};

/* One pass over the symbol table of section type `type`, for the offsets not yet covered: a
 * SYMBOL for each function symbol that covers one (the analyzer's rule: st_value != 0, a size of
 * 0 counts as 1), in table order. @return -1 when the deadline passed. */
static int scan_table(const struct elf_file *f, struct scan *s, uint32_t type)
{
	enum { CHUNK = 4096 };
	static Elf64_Sym syms[CHUNK]; /* one scan at a time: the writer lock is held */
	char name[4096];
	for (unsigned i = 0; i < f->eh.e_shnum; i++) {
		const Elf64_Shdr *sh = &f->sh[i];
		if (sh->sh_type != type || sh->sh_link >= f->eh.e_shnum ||
		    sh->sh_entsize != sizeof(Elf64_Sym))
			continue;
		const Elf64_Shdr *str = &f->sh[sh->sh_link];
		if (sh->sh_offset > f->size || sh->sh_size > f->size - sh->sh_offset ||
		    str->sh_offset > f->size || str->sh_size > f->size - str->sh_offset)
			continue;
		uint64_t total = sh->sh_size / sizeof(Elf64_Sym);
		for (uint64_t k = 0; k < total; k += CHUNK) {
			if (nvlp_now() > s->deadline)
				return -1;
			uint64_t m = total - k < CHUNK ? total - k : CHUNK;
			if (read_at(f, syms, m * sizeof *syms, sh->sh_offset + k * sizeof *syms) < 0)
				break;
			for (uint64_t j = 0; j < m; j++) {
				const Elf64_Sym *y = &syms[j];
				if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || !y->st_value ||
				    y->st_name >= str->sh_size)
					continue;
				uint64_t end = y->st_value + (y->st_size ? y->st_size : 1);
				size_t at = lower_bound(s->off, s->n, y->st_value);
				int hit = 0;
				for (; at < s->n && s->off[at] < end; at++)
					if (!s->covered[at])
						hit = s->covered[at] = 1;
				if (!hit)
					continue;
				uint64_t len = str->sh_size - y->st_name;
				len = len < sizeof name ? len : sizeof name;
				if (read_at(f, name, len, str->sh_offset + y->st_name) < 0)
					continue;
				size_t nl = strnlen(name, len);
				struct nvlp_rec_symbol rec = {
				    .base = s->base, .offset = y->st_value, .size = y->st_size};
				nvlp_writer_add(s->w, NVLP_K_SYMBOL, &rec, name, nl);
				s->written++;
			}
		}
		return 0; /* one table of the type */
	}
	return 0;
}

/* The SYMBOL records of one module for the n sorted offsets. */
static int module_symbols(struct scan *s, const struct mod *m)
{
	struct elf_file f;
	if (!m->id_len || elf_open(&f, m->path) < 0)
		return 0;
	uint8_t id[NVLP_BUILD_ID_MAX];
	size_t n = elf_build_id(&f, id, sizeof id);
	int rc = 0;
	/* Another file now at the path (rebuilt, replaced, another machine's copy): nothing. */
	if (n == m->id_len && !memcmp(id, m->id, n)) {
		rc = scan_table(&f, s, SHT_SYMTAB);
		if (rc == 0)
			rc = scan_table(&f, s, SHT_DYNSYM);
	}
	elf_close(&f);
	return rc;
}

uint64_t nvlp_syms_write(nvlp_writer *w, uint64_t budget_ns)
{
	struct scan s = {.w = w, .deadline = nvlp_now() + budget_ns};
	uint64_t *off = NULL;
	uint8_t *covered = NULL;
	if (touched.npcs) {
		off = malloc(2 * touched.npcs * sizeof *off);
		covered = malloc(2 * touched.npcs);
	}
	for (unsigned i = 0; off && covered && i < touched.nmods; i++) {
		const struct mod *m = &touched.mods[i];
		/* Both the return address and the call before it: the analyzer may look up either. */
		size_t n = 0;
		for (size_t k = 0; k < touched.pcs_cap; k++) {
			uint64_t pc = touched.pcs[k];
			if (!pc || pc < m->start || pc >= m->end || pc < m->base)
				continue;
			off[n++] = pc - m->base;
			if (pc > m->base)
				off[n++] = pc - m->base - 1;
		}
		if (!n)
			continue;
		qsort(off, n, sizeof *off, cmp_u64);
		memset(covered, 0, n);
		s.base = m->base;
		s.off = off;
		s.covered = covered;
		s.n = n;
		if (module_symbols(&s, m) < 0)
			break;
	}
	free(off);
	free(covered);
	return s.written;
}

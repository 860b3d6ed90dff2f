/* symbols.c: names a recorded return address: from the trace's own SYMBOL records first, then from
 * an ELF file whose GNU build-id equals the trace's BUILDID record (under --symbols DIR, or at the
 * recorded path), never from a file that cannot be verified: reports read the same anywhere. */
#include <elf.h>      /* Elf64_Ehdr, Elf64_Sym, NT_GNU_BUILD_ID */
#include <fcntl.h>    /* open */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* qsort, bsearch */
#include <string.h>   /* memcmp */
#include <sys/mman.h> /* mmap */
#include <sys/stat.h> /* fstat */
#include <unistd.h>   /* close */

#include "model/model.h"
#include "load/load.h" /* an_sym_* */
#include "util/diag.h" /* an_diag */
#include "util/containers.h" /* AN_CMP_KEY */

/* libstdc++'s demangler (GCC's cp-demangle, the one c++filt and nsys' names agree with): linked
 * into build/nvlprof only (CLI_LDLIBS), never into the shim. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

static const char *sym_dir; /* --symbols DIR, or NULL */

void an_symbols_dir(const char *dir)
{
	sym_dir = dir && *dir ? dir : NULL;
}

/* ---- what the trace carries ---- */
void an_sym_buildid(struct an_rank *r, uint64_t base, const uint8_t *id, size_t len)
{
	/* written right after its MODULE: look at the latest modules only (bounded work) */
	for (size_t i = r->nmodules, seen = 0; i-- > 0 && seen < 4096; seen++) {
		struct an_module *m = &r->modules[i];
		if (m->base == base) {
			memcpy(m->build_id, id, len);
			m->build_id_len = (unsigned)len;
			return;
		}
	}
}

static int cmp_sym(const void *a, const void *b)
{
	const struct an_sym *x = a, *y = b;
	AN_CMP_KEY(x, y, base);
	AN_CMP_KEY(x, y, off);
	return strcmp(x->name, y->name);
}

static int cmp_stack(const void *a, const void *b)
{
	const struct an_stack *x = a, *y = b;
	AN_CMP_KEY(x, y, id);
	return x->ord < y->ord ? -1 : x->ord > y->ord;
}

void an_sym_finish(struct an_rank *r)
{
	if (r->nsyms > 1)
		qsort(r->syms, r->nsyms, sizeof *r->syms, cmp_sym);
	for (size_t i = 0; i < r->nstacks; i++)
		r->stacks[i].ord = i;
	if (r->nstacks > 1)
		qsort(r->stacks, r->nstacks, sizeof *r->stacks, cmp_stack);
}

void an_sym_free(struct an_rank *r)
{
	for (size_t i = 0; i < r->nsyms; i++)
		free(r->syms[i].name);
	free(r->syms);
	r->syms = NULL;
	r->nsyms = 0;
}

const struct an_stack *an_find_stack(const struct an_rank *r, uint64_t id)
{
	size_t lo = 0, hi = r->nstacks; /* the first stack with this id, in file order */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->stacks[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nstacks && r->stacks[lo].id == id ? &r->stacks[lo] : NULL;
}

/* The recorded symbol of module base holding off, or NULL. */
static const struct an_sym *trace_symbol(const struct an_rank *r, uint64_t base, uint64_t off)
{
	size_t lo = 0, hi = r->nsyms; /* the last symbol at or below (base, off) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct an_sym *s = &r->syms[mid];
		if (s->base < base || (s->base == base && s->off <= off))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	const struct an_sym *s = &r->syms[lo - 1];
	uint64_t size = s->size ? s->size : 1;
	return s->base == base && off - s->off < size ? s : NULL;
}

/* ---- ELF files, verified by build-id ---- */
struct elf_map {
	const uint8_t *m;
	size_t sz;
};

/* Map path read-only: only a regular file, opened without blocking (a FIFO must not hang us). */
static int elf_open(const char *path, struct elf_map *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return -1;
	}
	e->sz = (size_t)st.st_size;
	e->m = mmap(NULL, e->sz, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (e->m == MAP_FAILED)
		return -1;
	const Elf64_Ehdr *eh = (const void *)e->m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff > e->sz || (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > e->sz - eh->e_shoff) {
		munmap((void *)e->m, e->sz);
		return -1;
	}
	return 0;
}

static void elf_close(struct elf_map *e)
{
	munmap((void *)e->m, e->sz);
}

static const Elf64_Shdr *elf_sections(const struct elf_map *e, unsigned *n)
{
	const Elf64_Ehdr *eh = (const void *)e->m;
	*n = eh->e_shnum;
	return (const void *)(e->m + eh->e_shoff);
}

/* 1 if [off, off + size) lies inside the file */
static int in_file(const struct elf_map *e, uint64_t off, uint64_t size)
{
	return off <= e->sz && size <= e->sz - off;
}

/* The GNU build-id of a mapped file. @return its length (0: none) */
static size_t elf_build_id(const struct elf_map *e, const uint8_t **id)
{
	unsigned n;
	const Elf64_Shdr *sh = elf_sections(e, &n);
	for (unsigned i = 0; i < n; i++) {
		if (sh[i].sh_type != SHT_NOTE || !in_file(e, sh[i].sh_offset, sh[i].sh_size))
			continue;
		const uint8_t *p = e->m + sh[i].sh_offset, *end = p + sh[i].sh_size;
		while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
			const Elf64_Nhdr *nh = (const void *)p;
			uint64_t nsz = ((uint64_t)nh->n_namesz + 3) & ~3ull,
			         dsz = ((uint64_t)nh->n_descsz + 3) & ~3ull;
			p += sizeof *nh;
			if (nsz > (uint64_t)(end - p) || dsz > (uint64_t)(end - p) - nsz)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(p, "GNU", 4)) {
				*id = p + nsz;
				return nh->n_descsz;
			}
			p += nsz + dsz;
		}
	}
	return 0;
}

/* The function symbol of a mapped file holding off (.symtab, else .dynsym). @return 0 found */
static int elf_lookup(const struct elf_map *e, uint64_t off, char *name, size_t len,
                      uint64_t *symoff)
{
	unsigned n;
	const Elf64_Shdr *sh = elf_sections(e, &n);
	for (int pass = 0; pass < 2; pass++) {
		uint32_t want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
		for (unsigned i = 0; i < n; i++) {
			if (sh[i].sh_type != want || sh[i].sh_link >= n)
				continue;
			const Elf64_Shdr *strs = &sh[sh[i].sh_link];
			if (!in_file(e, sh[i].sh_offset, sh[i].sh_size) ||
			    !in_file(e, strs->sh_offset, strs->sh_size))
				continue;
			const Elf64_Sym *sym = (const void *)(e->m + sh[i].sh_offset);
			const char *str = (const char *)(e->m + strs->sh_offset);
			size_t ns = sh[i].sh_size / sizeof *sym;
			for (size_t k = 0; k < ns; k++) {
				if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || !sym[k].st_value)
					continue;
				uint64_t sz2 = sym[k].st_size ? sym[k].st_size : 1;
				if (off >= sym[k].st_value && off - sym[k].st_value < sz2 &&
				    sym[k].st_name < strs->sh_size) {
					size_t max = strs->sh_size - sym[k].st_name;
					snprintf(name, len, "%.*s", (int)(max < len ? max : len),
					         str + sym[k].st_name);
					*symoff = off - sym[k].st_value;
					return 0;
				}
			}
		}
	}
	return -1;
}

/* Say once per file that its build-id differs from the trace's. */
static void warn_mismatch(const char *path)
{
	static char warned[16][256];
	static int nwarned;
	for (int i = 0; i < nwarned; i++)
		if (!strcmp(warned[i], path))
			return;
	if (nwarned < 16)
		snprintf(warned[nwarned++], sizeof warned[0], "%s", path);
	an_diag("nvlprof: warning: %s: build-id differs from the one in the trace, not used for "
	        "symbols\n",
	        path);
}

/* Try one candidate file for module m. @return 0 named, 1 the file is not the module (or absent) */
static int try_file(const char *path, const struct an_module *m, uint64_t off, char *fn,
                    size_t len, uint64_t *so)
{
	struct elf_map e;
	if (elf_open(path, &e) < 0)
		return 1;
	const uint8_t *id = NULL;
	size_t n = elf_build_id(&e, &id);
	int rc = 1;
	if (n != m->build_id_len || memcmp(id, m->build_id, n))
		warn_mismatch(path);
	else
		rc = elf_lookup(&e, off, fn, len, so) == 0 ? 0 : 1;
	elf_close(&e);
	return rc;
}

/* Name off in module m from a file with the recorded build-id: under --symbols DIR first (DIR +
 * path, DIR/basename, DIR/.build-id/xx/rest.debug), then at the recorded path. */
static int file_symbol(const struct an_module *m, uint64_t off, char *fn, size_t len, uint64_t *so)
{
	if (!m->build_id_len) /* nothing to verify a file against: never open one */
		return -1;
	char p[4096];
	if (sym_dir) {
		snprintf(p, sizeof p, "%s/%s", sym_dir, m->path);
		if (!try_file(p, m, off, fn, len, so))
			return 0;
		const char *b = strrchr(m->path, '/');
		snprintf(p, sizeof p, "%s/%s", sym_dir, b ? b + 1 : m->path);
		if (!try_file(p, m, off, fn, len, so))
			return 0;
		int k = snprintf(p, sizeof p, "%s/.build-id/%02x/", sym_dir, m->build_id[0]);
		for (unsigned i = 1; i < m->build_id_len && k > 0 && (size_t)k < sizeof p - 3; i++)
			k += snprintf(p + k, sizeof p - (size_t)k, "%02x", m->build_id[i]);
		snprintf(p + k, sizeof p - (size_t)k, ".debug");
		if (m->build_id_len > 1 && !try_file(p, m, off, fn, len, so))
			return 0;
	}
	return try_file(m->path, m, off, fn, len, so) ? -1 : 0;
}

/* The module of r holding pc, or NULL. */
static const struct an_module *module_of(const struct an_rank *r, uint64_t pc)
{
	for (size_t i = 0; i < r->nmodules; i++)
		if (pc >= r->modules[i].start && pc < r->modules[i].end)
			return &r->modules[i];
	return NULL;
}

/* pc as an_symbolize writes it, its function looked up at pc - back (1 for a return address:
 * after a call that does not return it is the next function's first byte) */
static void symbolize(const struct an_rank *r, uint64_t pc, unsigned back, char *out, size_t len)
{
	const struct an_module *m = module_of(r, pc);
	if (!m) {
		snprintf(out, len, "0x%llx", (unsigned long long)pc);
		return;
	}
	const char *base = strrchr(m->path, '/');
	base = base ? base + 1 : m->path;
	uint64_t off = pc - m->base, so = 0;
	char fn[128];
	const struct an_sym *s = trace_symbol(r, m->base, off - back);
	if (s)
		snprintf(out, len, "%.127s+0x%llx (%s+0x%llx)", s->name,
		         (unsigned long long)(off - s->off), base, (unsigned long long)off);
	else if (file_symbol(m, off - back, fn, sizeof fn, &so) == 0)
		snprintf(out, len, "%s+0x%llx (%s+0x%llx)", fn, (unsigned long long)(so + back), base,
		         (unsigned long long)off);
	else
		snprintf(out, len, "%s+0x%llx", base, (unsigned long long)off);
}

void an_symbolize(const struct an_rank *r, uint64_t pc, char *out, size_t len)
{
	symbolize(r, pc, 0, out, len);
}

/* 1 if pc lies in the shim, CUPTI, the CUDA driver or runtime: frames of ours and NVIDIA's that sit
 * on top of a stack recorded inside a CUDA call, above the job's own call */
static int tool_frame(const struct an_rank *r, uint64_t pc)
{
	static const char *const lib[] = {"libnvlprof.so", "libcupti.so", "libcuda.so", "libcudart.so"};
	const struct an_module *m = module_of(r, pc);
	if (!m)
		return 0;
	const char *b = strrchr(m->path, '/');
	b = b ? b + 1 : m->path;
	for (size_t k = 0; k < sizeof lib / sizeof lib[0]; k++)
		if (!strncmp(b, lib[k], strlen(lib[k])))
			return 1;
	return 0;
}

void an_stack_chain(const struct an_rank *r, const struct an_stack *s, unsigned n, char *out,
                    size_t len)
{
	unsigned k0 = 0;
	while (k0 < s->n && tool_frame(r, s->pc[k0]))
		k0++;
	if (k0 == s->n) /* nothing but tool frames: shown as they are */
		k0 = 0;
	out[0] = 0;
	for (unsigned k = k0; k < s->n && k < k0 + n; k++) {
		char sym[160];
		an_symbolize(r, s->pc[k], sym, sizeof sym);
		size_t l = strlen(out);
		snprintf(out + l, len - l, "%s%s", k > k0 ? " <- " : "", sym);
	}
}

/* 1 if sym ("name+0x.. (...)") is a frame of the machinery that raises a signal the thread sent
 * itself: abort(), raise() and the kill system call's wrappers, on top of an abort's stack */
static int raise_frame(const char *sym)
{
	static const char *const fn[] = {"__pthread_kill_implementation", "__pthread_kill_internal",
	                                 "__pthread_kill", "pthread_kill", "__GI___pthread_kill",
	                                 "raise", "__GI_raise", "gsignal", "abort", "__GI_abort"};
	size_t l = strcspn(sym, "+ ");
	for (size_t k = 0; k < sizeof fn / sizeof fn[0]; k++)
		if (strlen(fn[k]) == l && !strncmp(sym, fn[k], l))
			return 1;
	return 0;
}

void an_stack_fatal(const struct an_rank *r, const struct an_stack *s, unsigned n, char *out,
                    size_t len)
{
	char sym[160];
	/* Past the last abort()/raise() frame among the leading frames of the innermost frame's
	 * module (libc's: the ones that name no symbol are its local helpers) and those frames
	 * themselves (an abort() a sanitizer's runtime interposes) */
	unsigned k0 = 0;
	const struct an_module *m0 = module_of(r, s->pc[0]);
	for (unsigned k = 0; m0 && k + 1 < s->n; k++) {
		symbolize(r, s->pc[k], k > 0, sym, sizeof sym);
		if (raise_frame(sym))
			k0 = k + 1;
		else if (module_of(r, s->pc[k]) != m0)
			break;
	}
	out[0] = 0;
	size_t l = 0;
	for (unsigned k = k0; k < s->n && k < k0 + n; k++) {
		symbolize(r, s->pc[k], k > 0, sym, sizeof sym);
		const char *sep = k > k0 ? " <- " : "";
		/* whole frames only, with room left for the mark of the ones not shown */
		if (l + strlen(sep) + strlen(sym) + 8 > len) {
			snprintf(out + l, len - l, " <- ...");
			return;
		}
		l += (size_t)snprintf(out + l, len - l, "%s%s", sep, sym);
	}
	if (k0 + n < s->n && l + 8 <= len)
		snprintf(out + l, len - l, " <- ...");
}

/* ---- kernel names ---- */

/* The function's own name in a demangled signature: "void ns::f<4>(int) const" -> "f". A name
 * that is not a call signature (no parameter list) is its own short name. */
static void short_of(const char *d, char *out, size_t len)
{
	size_t e = strlen(d);
	while (e && d[e - 1] != ')') /* trailing qualifiers: " const", " &" */
		e--;
	if (!e) {
		snprintf(out, len, "%s", d);
		return;
	}
	int depth = 0; /* back to the '(' that opens the parameter list */
	size_t p = e;
	while (p-- > 0) {
		depth += d[p] == ')' ? 1 : d[p] == '(' ? -1 : 0;
		if (!depth)
			break;
	}
	if (depth || !p) {
		snprintf(out, len, "%s", d);
		return;
	}
	size_t n = p; /* the name ends at the '(' ; template arguments before it are skipped */
	if (d[n - 1] == '>') {
		depth = 0;
		while (n-- > 0) {
			depth += d[n] == '>' ? 1 : d[n] == '<' ? -1 : 0;
			if (!depth)
				break;
		}
		if (depth)
			n = p;
	}
	size_t b = n;
	while (b && (d[b - 1] == '_' || d[b - 1] == '~' || (d[b - 1] >= '0' && d[b - 1] <= '9') ||
	             ((d[b - 1] | 0x20) >= 'a' && (d[b - 1] | 0x20) <= 'z')))
		b--;
	if (b == n) /* an operator, a lambda: the signature without its parameters */
		snprintf(out, len, "%.*s", (int)p, d);
	else
		snprintf(out, len, "%.*s", (int)(n - b), d + b);
}

int an_demangle(const char *name, char **full, char **shortn)
{
	int st = -1;
	char *d = name[0] == '_' && name[1] == 'Z' ? __cxa_demangle(name, NULL, NULL, &st) : NULL;
	const char *f = st == 0 && d ? d : name;
	size_t n = strlen(f) + 1;
	*full = malloc(n);
	*shortn = malloc(n);
	if (!*full || !*shortn) {
		free(d);
		free(*full);
		free(*shortn);
		*full = *shortn = NULL;
		return -1;
	}
	memcpy(*full, f, n);
	short_of(f, *shortn, n);
	free(d);
	return 0;
}

/* resolve.c: finds a wrapped function's real definition in a loaded object other than the shim. */
#include <dlfcn.h>  /* dlsym, dlvsym, dlopen(RTLD_NOLOAD), dladdr */
#include <link.h>   /* dl_iterate_phdr */
#include <stdlib.h> /* malloc */
#include <string.h> /* strlen, memcpy, strncmp */

#include "nvlp_rt.h"
#include "resolve.h"

/*
 * Why not just dlsym(RTLD_NEXT): Python loads torch with RTLD_LOCAL, so libnccl.so.2 is not in the
 * global scope and RTLD_NEXT answers NULL (a wrapper calling that crashes the job). So when
 * RTLD_NEXT fails or finds ourselves, every loaded object is asked in turn through a handle from
 * dlopen(name, RTLD_NOLOAD), which only references an object already loaded: nothing new is loaded
 * and no constructor runs. Lookups happen on the first call of each function, never from a
 * constructor. The object list is copied first and the handles opened after dl_iterate_phdr has
 * returned, so no loader lock is held while dlopen takes its own. No lock of ours is held during
 * a lookup either: a thread inside dlopen (holding the loader lock) may run a constructor that calls
 * a wrapper; it must be able to resolve while another thread waits for the loader lock. Racing
 * lookups find the same answer; one compare-and-swap publishes it and only its winner reports.
 */

#define MAX_OBJECTS 2048
#define NAME_POOL (512 * 1024)

static int self_anchor; /* any object of ours, to recognise our own addresses */

static int is_self(const void *f)
{
	Dl_info a, b;
	if (!dladdr(f, &a) || !dladdr(&self_anchor, &b))
		return 0;
	return a.dli_fbase == b.dli_fbase;
}

/* ---- which CUDA runtime the process loaded ---- */

/* libcudart.so.N -> N; 0 for any other name. */
static int cudart_soname_major(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	if (strncmp(b, "libcudart.so.", 13) != 0)
		return 0;
	int n = 0;
	for (const char *p = b + 13; *p >= '0' && *p <= '9' && n < 1000; p++)
		n = n * 10 + (*p - '0');
	return n;
}

static int find_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	int n = info->dlpi_name ? cudart_soname_major(info->dlpi_name) : 0;
	if (n > 0) {
		*(int *)data = n;
		return 1; /* the first one loaded is the one the program's imports bound to */
	}
	return 0;
}

static _Atomic int cudart_major = -1; /* -1 not looked up yet */

/* Version node of runtime N (constant strings: racing first lookups write nothing shared). */
static const char *cudart_version(int n)
{
	static const char *const v[] = {"libcudart.so.11", "libcudart.so.12", "libcudart.so.13",
					"libcudart.so.14", "libcudart.so.15", "libcudart.so.16"};
	return n >= 11 && n < 11 + (int)(sizeof v / sizeof v[0]) ? v[n - 11] : NULL;
}

int nvlp_cudart_major(void)
{
	int n = atomic_load_explicit(&cudart_major, memory_order_acquire);
	if (n >= 0)
		return n;
	n = 0;
	dl_iterate_phdr(find_cudart, &n);
	/* Racing first calls compute the same answer; a runtime loaded later (dlopen) is still
	 * found: 0 is not cached. */
	if (n > 0)
		atomic_store_explicit(&cudart_major, n, memory_order_release);
	return n;
}

/* Symbol lookup in one handle: the versioned name first (cudart exports name@libcudart.so.N, the
 * N of the runtime actually loaded), then the default version. */
static void *lookup(void *h, const char *sym, const char *version)
{
	if (version && !strcmp(version, NVLP_VERSION_CUDART))
		version = cudart_version(nvlp_cudart_major()); /* none known: the default */
	void *f = version ? dlvsym(h, sym, version) : NULL;
	return f ? f : dlsym(h, sym);
}

/* Paths of the loaded objects, packed one after another. */
struct objlist {
	int n;
	size_t used;
	size_t at[MAX_OBJECTS];
	char pool[NAME_POOL];
};

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
	struct objlist *l = data;
	(void)size;
	/* The main program ("") is in the global scope, which RTLD_NEXT already searched. */
	if (!info->dlpi_name || !info->dlpi_name[0] || l->n >= MAX_OBJECTS)
		return 0;
	size_t len = strlen(info->dlpi_name) + 1;
	if (len > NAME_POOL - l->used)
		return 0;
	memcpy(l->pool + l->used, info->dlpi_name, len);
	l->at[l->n++] = l->used;
	l->used += len;
	return 0;
}

/* Search every loaded object for sym; a handle's lookup also covers that object's dependencies. */
static void *search_objects(struct objlist *l, const char *sym, const char *version)
{
	for (int i = 0; i < l->n; i++) {
		void *h = dlopen(l->pool + l->at[i], RTLD_NOLOAD | RTLD_LAZY);
		if (!h)
			continue;
		void *f = lookup(h, sym, version);
		dlclose(h);
		if (f && !is_self(f))
			return f;
	}
	return NULL;
}

static void *find(const char *sym, const char *version, struct objlist *l, int *listed)
{
	void *f = lookup(RTLD_NEXT, sym, version);
	if (f && !is_self(f))
		return f;
	if (!l)
		return NULL;
	if (!*listed) {
		l->n = 0;
		l->used = 0;
		dl_iterate_phdr(collect, l);
		*listed = 1;
	}
	return search_objects(l, sym, version);
}

void *nvlp_resolve(struct nvlp_sym *s)
{
	struct objlist *list = malloc(sizeof *list); /* ~530 KiB: too big for a job thread's stack */
	int listed = 0;
	void *f = s->strong ? find(s->strong, s->version, list, &listed) : NULL;
	if (!f)
		f = find(s->name, s->version, list, &listed);
	free(list);
	void *expected = NULL;
	if (atomic_compare_exchange_strong(&s->fn, &expected, f ? f : NVLP_SYM_MISSING)) {
		if (!f) {
			nvlp_warn("cannot find the real %s in any loaded library; calls to it fail "
				  "and are not recorded",
				  s->name);
			nvlp_note(NVLP_NOTE_UNRESOLVED, -1, 0, "%s", s->name);
		}
		return f;
	}
	return expected == NVLP_SYM_MISSING ? NULL : expected;
}

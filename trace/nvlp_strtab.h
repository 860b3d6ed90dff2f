/* nvlp_strtab.h: a trace's interned strings (STRING records) by id; private to trace/. */
#ifndef NVLP_STRTAB_H
#define NVLP_STRTAB_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

struct nvlp_str_slot {
	uint64_t id;
	char *s;
};

/* Open addressing by id (ids are the file's: sparse ones must not size it). Zero-initialised. */
struct nvlp_strtab {
	struct nvlp_str_slot *t;
	size_t cap, n; /* cap: 0 or a power of 2, at least twice n */
};

/*! Keep a copy of s (len bytes) as string id (0 is never kept; a later one replaces an earlier). */
void nvlp_strtab_put(struct nvlp_strtab *st, uint64_t id, const uint8_t *s, uint32_t len);
/*! @return the string with this id, NULL if none */
const char *nvlp_strtab_get(const struct nvlp_strtab *st, uint64_t id);
void nvlp_strtab_free(struct nvlp_strtab *st);

#endif /* NVLP_STRTAB_H */

/* strtab.c: a trace's interned strings (STRING records) by id, for the reader. */
#include <stdlib.h> /* calloc, malloc, free */
#include <string.h> /* memcpy */

#include "nvlp_strtab.h"

/* The slot holding id, or the empty one where it would go (id 0 marks an empty slot). */
static struct nvlp_str_slot *slot(struct nvlp_str_slot *t, size_t cap, uint64_t id)
{
	size_t mask = cap - 1, i = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & mask;
	while (t[i].id && t[i].id != id)
		i = (i + 1) & mask;
	return &t[i];
}

void nvlp_strtab_put(struct nvlp_strtab *st, uint64_t id, const uint8_t *s, uint32_t len)
{
	if (id == 0)
		return;
	if (2 * (st->n + 1) > st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 256;
		struct nvlp_str_slot *t = calloc(cap, sizeof(*t));
		if (!t)
			return;
		for (size_t i = 0; i < st->cap; i++)
			if (st->t[i].id)
				*slot(t, cap, st->t[i].id) = st->t[i];
		free(st->t);
		st->t = t;
		st->cap = cap;
	}
	char *c = malloc((size_t)len + 1);
	if (!c)
		return;
	if (len)
		memcpy(c, s, len);
	c[len] = 0;
	struct nvlp_str_slot *e = slot(st->t, st->cap, id);
	if (e->id)
		free(e->s);
	else
		st->n++;
	e->id = id;
	e->s = c;
}

const char *nvlp_strtab_get(const struct nvlp_strtab *st, uint64_t id)
{
	if (!id || !st->cap)
		return NULL;
	return slot(st->t, st->cap, id)->s;
}

void nvlp_strtab_free(struct nvlp_strtab *st)
{
	for (size_t i = 0; i < st->cap; i++)
		free(st->t[i].s);
	free(st->t);
	st->t = NULL;
	st->cap = st->n = 0;
}

/* rt_strings.c: interned strings: an id per distinct string, its STRING record written into the trace before any use. */
#include <errno.h>   /* errno */
#include <pthread.h> /* pthread_mutex_t */
#include <stdlib.h>  /* malloc */
#include <string.h>  /* memcmp */

#include "nvlp_rt.h"
#include "rt_internal.h"

struct str_ent {
	struct str_ent *next;
	uint64_t hash, id;
	size_t len;
	char s[];
};
#define STR_BUCKETS 4096
static struct {
	/* Lock order: this one before the writer's. It guards str_tab too. */
	pthread_mutex_t mu;
	uint64_t next_id;
} string_table = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};
/* Apart from string_table: zero-initialised, the buckets stay in .bss (32 KiB not in the file). */
static struct str_ent *str_tab[STR_BUCKETS];

static uint64_t fnv1a(const char *s, size_t *len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *p = s;
	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	*len = (size_t)(p - s);
	return h;
}

static void add_string_locked(const struct str_ent *e)
{
	struct nvlp_rec_string rec = {.id = e->id};
	nvlp_wr_add_locked(NVLP_K_STRING, &rec, e->s, e->len > NVLP_MAX_BLOB ? NVLP_MAX_BLOB : e->len);
}

uint64_t nvlp_intern(const char *s)
{
	if (!s)
		return 0;
	int err = errno;
	size_t len;
	uint64_t h = fnv1a(s, &len), id = 0;
	pthread_mutex_lock(&string_table.mu);
	struct str_ent *e;
	for (e = str_tab[h % STR_BUCKETS]; e; e = e->next)
		if (e->hash == h && e->len == len && !memcmp(e->s, s, len))
			break;
	if (e) {
		id = e->id;
	} else if ((e = malloc(sizeof *e + len + 1))) {
		e->hash = h;
		e->len = len;
		memcpy(e->s, s, len + 1);
		e->id = id = string_table.next_id++;
		e->next = str_tab[h % STR_BUCKETS];
		str_tab[h % STR_BUCKETS] = e;
		/* Written straight into the file, so the STRING precedes every record that uses the
		 * id (those are still in some ring). Ids are process-wide: a new file (fork child,
		 * failed exec) gets every known string replayed when it opens. */
		nvlp_wr_lock();
		if (nvlp_rt_trace_open())
			add_string_locked(e);
		nvlp_wr_unlock();
	}
	pthread_mutex_unlock(&string_table.mu);
	errno = err;
	return id;
}

void nvlp_str_lock(void)
{
	pthread_mutex_lock(&string_table.mu);
}

void nvlp_str_unlock(void)
{
	pthread_mutex_unlock(&string_table.mu);
}

void nvlp_str_replay_locked(void)
{
	for (int i = 0; i < STR_BUCKETS; i++)
		for (struct str_ent *e = str_tab[i]; e; e = e->next)
			add_string_locked(e);
}

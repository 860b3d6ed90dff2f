/* places.h: where a rank's threads were, from the Python sampler's PYREF kind 0 records: the chain a thread held at a time, and the top locations over an interval. */
#ifndef AN_PLACES_H
#define AN_PLACES_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

struct an_rank;

/* Times are job times (ns, local + the rank's offset), as the findings use them. A sample says
 * which chain thread tid held from its time on, until the thread's next sample (the sampler
 * writes one only when the chain changed; pystack 0: no Python location from then on: no frames,
 * or no longer inside an intercepted call for a thread other than the main one). */
#define AN_PLACE_MAIN 0 /* tid: the process's main thread (tid = pid) */

/* Where a thread was. */
struct an_place {
	uint64_t tid;
	uint64_t pystack; /* 0: no Python location */
	const char *text; /* its PYSTACK text ("file:line:function\n", innermost first), NULL none */
	uint64_t since;   /* job time of the sample that first showed it */
	uint64_t at;      /* the time asked about (or the rank's last record when earlier) */
};

/*! Where thread tid (AN_PLACE_MAIN: the main thread) of r was at job time t (cut at the rank's
 * last record): the chain its latest sample at or before t showed, and since when (a sample holds
 * until the next, however long ago it was written).
 * @return 1 when a sample says (p filled, its pystack possibly 0), 0 when none does */
int an_place_at(const struct an_rank *r, uint64_t tid, uint64_t t, struct an_place *p);

/*! p as a line: "31.2 s in load_next_batch (train.py:23) <- main (train.py:40)" (the job's own
 * frames first, at most 3; the innermost frames when it has none), "no Python location since
 * ..." for pystack 0. @return the length written (cut to len) */
size_t an_place_text(const struct an_place *p, char *out, size_t len);

/*! One location's share of an interval. */
struct an_place_top {
	uint64_t pystack;
	const char *text;
	uint64_t ns;      /* time held within the interval */
	unsigned changes; /* samples that entered it within the interval (or held at its start) */
};

/*! The locations thread tid (AN_PLACE_MAIN: the main thread) held during [t0, t1] (job time; cut at
 * the rank's last record), by time held, most first (pystack 0 not listed). total_ns: the time
 * covered by samples (NULL: not wanted).
 * @return how many were written (at most max) */
size_t an_places_top(const struct an_rank *r, uint64_t tid, uint64_t t0, uint64_t t1,
                     struct an_place_top *out, size_t max, uint64_t *total_ns);

/*! 1 if a frame's file (n bytes) is the job's own code, not the interpreter's library or an
 * installed package: the chain a user reads starts at the innermost such frame. */
int an_user_frame(const char *file, size_t n);

/*! The chain text of pystack id in r (NULL: none). */
const char *an_pystack_text(const struct an_rank *r, uint64_t id);

#endif /* AN_PLACES_H */

/* partial.h: a node's loaded traces as a partial file (`report --partial`); `merge` (commands.h)
 * makes the job's report from several. */
#ifndef NVLP_AN_PARTIAL_H
#define NVLP_AN_PARTIAL_H

/*! report --partial: load the traces in paths (as report does) and write them to out; with_output
 * (--json or -o given too) is refused. @return 0, or 2 after printing the error */
int an_partial_write(char **paths, int npaths, int threads, const char *out, int with_output);

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint8_t */

struct an_job;
struct an_rank;
/*! The loaded processes of job (ranks and others) as a partial's bytes, header included, into *out
 * (malloc'ed). @return its size, 0 out of memory */
size_t an_partial_encode(struct an_job *job, uint8_t **out);
/*! The processes of the partial at path into *out (*nout of them, the caller's: free them as
 * an_job_free does). @return 0, or -1 after printing a one-line error naming the file and what is
 * wrong (unreadable, not a partial, another version or build, cut short, corrupt) */
int an_partial_read(const char *path, struct an_rank **out, size_t *nout);

#endif

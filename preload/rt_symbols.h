/* rt_symbols.h: build-ids and SYMBOL records for the modules of the trace's stacks (symbols.c). */
#ifndef NVLP_RT_SYMBOLS_H
#define NVLP_RT_SYMBOLS_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "nvlp_trace.h" /* nvlp_writer */

#define NVLP_BUILD_ID_MAX 64
struct dl_phdr_info;

/*! The GNU build-id of a loaded image, read from its PT_NOTE in memory (no syscall).
 * @return its length, 0 when it has none (or it is longer than cap). */
size_t nvlp_build_id_mem(const struct dl_phdr_info *info, uint8_t *out, size_t cap);

/* The writer's side; every call with the runtime's writer lock held. */
/*! A record on its way into the trace: MODULE, BUILDID and STACK are kept for the end. */
void nvlp_syms_seen(unsigned kind, const void *fields, const void *blob, size_t blob_len);
/*! Before the END record: SYMBOL records covering every frame kept, from each module's file (a
 * regular file whose build-id matches), within budget_ns. @return the SYMBOL records written. */
uint64_t nvlp_syms_write(nvlp_writer *w, uint64_t budget_ns);
/*! Forget everything kept (a new trace: fork child, exec that failed). */
void nvlp_syms_reset(void);

#endif /* NVLP_RT_SYMBOLS_H */

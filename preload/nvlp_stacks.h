/* nvlp_stacks.h: the caller's native stack for a record (stacks.c). */
#ifndef NVLP_STACKS_H
#define NVLP_STACKS_H

#include <stdint.h> /* uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

/*! Capture the caller's stack: @return stack id (STACK/MODULE records emitted when new), 0 if
 * off. */
uint64_t nvlp_stack_capture(void);

#ifdef __cplusplus
}
#endif
#endif /* NVLP_STACKS_H */

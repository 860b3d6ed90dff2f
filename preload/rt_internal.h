/* rt_internal.h: shim-private interfaces between the runtime's files and lifecycle.c (not the hooks' API). */
#ifndef NVLP_RT_INTERNAL_H
#define NVLP_RT_INTERNAL_H

#include <stddef.h>    /* size_t */
#include <stdint.h>    /* uint64_t */
#include <sys/types.h> /* pid_t, clockid_t */

#include "nvlp_module.h" /* nvlp_rt_pid; the modules' registration */

/*
 * Who calls whom (one way; lifecycle.c decides when a trace starts and ends and calls the runtime,
 * which reaches lifecycle.c only through the hooks it registered):
 *   lifecycle.c  -> rt_fork.c, rt_writer.c, rt_emit.c, rt_config.c, rt_module.c
 *   rt_module.c  -> the modules, only through the hooks they registered (nvlp_module.h)
 *   rt_fork.c    -> rt_writer.c, rt_strings.c, rt_ring.c, rt_tls.c, symbols.c, nvlp_clock.c,
 *                   rt_cost.c
 *   rt_emit.c    -> rt_writer.c, rt_strings.c, rt_ring.c, rt_tls.c, rt_config.c, rt_warn.c
 *   rt_strings.c -> rt_writer.c
 *   rt_writer.c  -> rt_tracefile.c, rt_watch.c, rt_ring.c, symbols.c, rt_cost.c, rt_config.c,
 *                   rt_warn.c
 *   rt_tracefile.c -> rt_watch.c, rt_config.c, rt_warn.c, rt_cost.c
 *   rt_watch.c   -> rt_ring.c
 *   rt_cost.c    -> rt_config.c, rt_warn.c, rt_ring.c, trace/ (writer stats)
 */

/* ---- rt_cost.c: the COST records (hooks and threads report through nvlp_cost.h) ---------- */
struct nvlp_rec_cost;
struct nvlp_writer;
/*! A trace just opened: costs count from now. */
void nvlp_cost_opened(void);
/*! The cost so far, with the trace's bytes from w (NULL: none). */
void nvlp_cost_fill(struct nvlp_rec_cost *c, const struct nvlp_writer *w);
/*! NVLPROF_VERBOSE: the process's CPU time and that of each of nvlprof's threads that ran. */
void nvlp_cost_verbose(void);
/*! The capture settings in effect, for the header. */
void nvlp_cost_capture(char *out, size_t len);
void nvlp_cost_atfork_child(void);

/* ---- rt_config.c: configuration (nvlp_cfg() in nvlp_rt.h) and the global switch ----------- */
/*! Parse the environment once (bad values: warned, kept as notes for the trace). */
void nvlp_cfg_parse(void);
/*! Configuration problems found by nvlp_cfg_parse, to be written as NOTE(CONFIG). */
unsigned nvlp_cfg_note_count(void);
const char *nvlp_cfg_note(unsigned i);
/*! NVLPROF_KERNELS's value v parsed into *km (defaults where v is ""; km->bad where not
 * understood: defaults kept, warned when CUPTI starts). rt_config_kernels.c. */
void nvlp_cfg_kernels(const char *v, struct nvlp_kernels_cfg *km);
/*! The global switch with acquire/release ordering (nvlp_is_active() is the relaxed read). */
int nvlp_rt_active(void);
void nvlp_rt_set_active(int on);

/* ---- lifecycle's hooks, called by the runtime (set once by lifecycle.c at init) ------------- */
struct nvlp_rt_hooks {
	void (*trace_opened)(void); /* a trace file of this image just opened (any thread) */
	void (*tick)(void);         /* on the writer thread, every period */
	void (*end_for_signal)(void); /* a signal handler asked for the end (on a helper thread) */
};
void nvlp_rt_set_hooks(const struct nvlp_rt_hooks *h);

/* ---- rt_tracefile.c: where a trace goes and what its header says ---------------------------- */
/*! Create the trace file (NVLPROF_DIR, made if needed; host-pid[.n].nvlp). @return its fd, its path
 * in path; -1 with errno set. */
int nvlp_tf_create(char *path, size_t len);
/*! The header's key=value text (malloc'ed, NULL when out of memory), with the clocks sampled back
 * to back for it. */
char *nvlp_tf_header(uint64_t *t_mono, uint64_t *t_real);

/* ---- rt_writer.c: the trace being written and its writer thread ----------------------------- */
/* nvlp_rt_pid, nvlp_rt_in_vfork_child: nvlp_module.h (modules use them too) */
int nvlp_rt_in_vfork_child(void);
/*! 1 while a trace file is open and its writer thread runs. */
int nvlp_rt_trace_open(void);
/*! 1 when nothing was opened yet (first record of the image, fork child, failed exec). */
int nvlp_wr_idle(void);
/*! The writer lock: guards the trace, its file, the drain. Lock order: strings before it. */
void nvlp_wr_lock(void);
void nvlp_wr_unlock(void);
/*! Holding the lock: open the file, write the header and the notes it starts with. @return 0, or -1
 * (warned, recording off). */
int nvlp_wr_open_locked(void);
/*! Holding the lock: one record straight into the file, when a trace is open. */
void nvlp_wr_add_locked(unsigned kind, const void *fields, const void *blob, size_t blob_len);
/*! Holding the lock, after nvlp_wr_open_locked: start the writer thread. @return 0, or -1 (warned,
 * the file removed, recording off). */
int nvlp_wr_start_locked(void);
/*! After nvlp_wr_start_locked succeeded, with no lock held: tell lifecycle.c (its hook installs
 * signal handlers and registers at exit, which may take the loader's lock). */
void nvlp_wr_opened(void);
/*! 1 on the writer thread. */
int nvlp_wr_is_writer_thread(void);
/*! Drain every ring now, on the calling thread (the writer producing into a full ring). */
void nvlp_wr_drain_now(void);
/*! Final drain: every ring, SYMBOLs, DROPS, END(reason), close, stop and join the writer thread
 * (unless the caller is the writer thread). Recording must already be off. Safe when no trace
 * exists. */
void nvlp_rt_finish(unsigned reason);
/*! After a failed exec: allow a new file to open. @return 1 if recording may resume. */
int nvlp_rt_rearm(void);
/*! Async-signal-safe: ask the writer thread to shut down for signal sig and wait up to
 * timeout_ms for it to finish. @return 0 if it answered, -1 otherwise (or no writer). */
int nvlp_rt_signal_request(int sig, int timeout_ms);
/*! Async-signal-safe, in a fatal signal's handler before nvlp_rt_fatal_request: the thread's
 * stack (uc: the handler's ucontext) through the registered stacker, kept for the FATAL record;
 * kept only when the walk ends (a fault inside it leaves none). */
void nvlp_rt_fatal_capture(const void *uc);
/*! Async-signal-safe: the same for a fatal signal (sig) delivered to thread tid with siginfo's
 * si_code and si_addr: the end of the trace writes a FATAL record first (with the stack
 * nvlp_rt_fatal_capture kept, as a STACK record before it). */
int nvlp_rt_fatal_request(int sig, uint64_t tid, int code, uint64_t addr, int timeout_ms);
/*! The status given to exit/_exit, for the EXITINFO record at the end. */
void nvlp_rt_set_exit_status(int status);
/*! Fork child, holding the lock: the parent's file and thread are not ours; back to idle. */
void nvlp_wr_fork_child_locked(void);

struct nvlp_rec_inflight;
/* ---- rt_watch.c: what the writer looks at about once a second ----------------------------- */
/*! Calls in progress (rings of live threads): INFLIGHT records (t = now) of calls that entered at
 * least min_age_ns ago and were not reported yet (all: every call in progress, reported or not),
 * at most max. Writer only (it owns each ring's live_reported). @return how many. */
unsigned nvlp_live_scan(uint64_t now, uint64_t min_age_ns, int all, struct nvlp_rec_inflight *out,
                        unsigned max);
/*! At trace open (header): find the cgroup's memory.events (NVLPROF_TEST_CGROUP_EVENTS, tests
 * only, names a stand-in) and read its oom_kill count. @return header lines (NVLP_HDR_CGROUP,
 * NVLP_HDR_OOM_WATCH, NVLP_HDR_OOM_KILL), static. */
const char *nvlp_oom_open(void);
/*! One pread of memory.events: @return 1 with the new count when oom_kill changed since the last
 * read, else 0 (also when not watched). */
int nvlp_oom_changed(uint64_t *count);

/* ---- rt_strings.c --------------------------------------------------------------------------- */
void nvlp_str_lock(void);
void nvlp_str_unlock(void);
/*! Holding both locks: write every known string into the newly opened trace. */
void nvlp_str_replay_locked(void);

/* ---- rt_emit.c ------------------------------------------------------------------------------ */
/*! At init: the thread-exit key that retires a thread's ring. */
void nvlp_emit_init(void);

/* ---- rt_module.c: the registered modules' hooks, walked in NVLP_MODULES order (nvlp_module.h)
 * by lifecycle.c; what each walk is for is said at the hook (struct nvlp_module). */
struct nvlp_config;
void nvlp_modules_init(const struct nvlp_config *cfg);
void nvlp_modules_flush(void);
void nvlp_modules_stop(void);
void nvlp_modules_atfork_child(void);

/* ---- rt_fork.c: pthread_atfork pieces for the recording state -------------------------------- */
void nvlp_rt_fork_prepare(void);
void nvlp_rt_fork_parent(void);
/*! @return 1 if the child may record (into its own file, opened on its first record). */
int nvlp_rt_fork_child(void);

#endif /* NVLP_RT_INTERNAL_H */

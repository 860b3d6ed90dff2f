/* rt_internal.h: shim-private glue between runtime.c and lifecycle.c (not the hooks' API). */
#ifndef NVLP_RT_INTERNAL_H
#define NVLP_RT_INTERNAL_H

#include <sys/types.h> /* pid_t */

/* Pid of this process as of init or the last fork. A different answer from the kernel means we are
 * running in a vfork child (or clone(CLONE_VM)) that shares the parent's memory: touch nothing. */
extern volatile pid_t nvlp_rt_pid;
int nvlp_rt_in_vfork_child(void);

/* runtime.c */
/*! 1 while a trace file is open and its writer thread runs. */
int nvlp_rt_trace_open(void);
/*! Final drain: every ring, DROPS, END(reason), close, stop and join the writer thread (unless the
 * caller is the writer thread). Recording must already be off. Safe when no trace exists. */
void nvlp_rt_finish(unsigned reason);
/*! After a failed exec: allow a new file to open. @return 1 if recording may resume. */
int nvlp_rt_rearm(void);
/*! Set the global switch (with the ordering the runtime relies on). */
void nvlp_rt_set_active(int on);
/*! Async-signal-safe: ask the writer thread to shut down for signal sig and wait up to
 * timeout_ms for it to finish. @return 0 if it answered, -1 otherwise (or no writer). */
int nvlp_rt_signal_request(int sig, int timeout_ms);
/*! pthread_atfork pieces for the recording state (locks, writer, rings, strings). */
void nvlp_rt_fork_prepare(void);
void nvlp_rt_fork_parent(void);
/*! @return 1 if the child may record (into its own file, opened on its first record). */
int nvlp_rt_fork_child(void);

/* lifecycle.c */
/*! Called once from nvlp_init: resolve the real exit/exec functions, register atexit and atfork. */
void nvlp_lc_init(void);
/*! Called when the first trace file opens: take over SIGTERM/SIGINT/SIGHUP/SIGQUIT if they still
 * have the default disposition (so handlers the program installed during start-up win). */
void nvlp_lc_install_signals(void);
/*! Register the exit handler again if libraries were loaded since it was last registered:
 * exit() runs handlers last-registered-first, and libraries loaded later (CUPTI, libnvperf_host,
 * torch) register their own destructors; ending the trace needs them still alive. */
void nvlp_lc_refresh_atexit(void);
/*! 0 none, 1 shutting down, 2 done (reset by rearm and in a fork child). */
extern volatile int nvlp_lc_shut_state;

#endif /* NVLP_RT_INTERNAL_H */

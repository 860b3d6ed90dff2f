/* rt_cpu.c: CPU time of nvlprof's own threads against the process's, for NVLPROF_VERBOSE. */
#include <pthread.h> /* pthread_mutex_t */
#include <stdio.h>   /* snprintf */
#include <string.h>  /* strlen */
#include <time.h>    /* clock_gettime */

#include "nvlp_rt.h"
#include "rt_internal.h"

/* CPU time of nvlprof's own threads, for NVLPROF_VERBOSE: ended threads add theirs here; the
 * writer, still running when the trace closes, is read through its clock. Set against the process's
 * total, it says how much of the job's CPU the profiler took. */
static struct {
	pthread_mutex_t mu;
	char text[160];
} own_cpu = {PTHREAD_MUTEX_INITIALIZER, ""};

static double thread_cpu_ms(clockid_t c)
{
	struct timespec ts;
	return clock_gettime(c, &ts) == 0 ? ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 : 0;
}

void nvlp_own_cpu_account(const char *who)
{
	if (!nvlp_cfg()->verbose)
		return;
	double ms = thread_cpu_ms(CLOCK_THREAD_CPUTIME_ID);
	pthread_mutex_lock(&own_cpu.mu);
	size_t n = strlen(own_cpu.text);
	snprintf(own_cpu.text + n, sizeof own_cpu.text - n, ", %s %.1f ms", who, ms);
	pthread_mutex_unlock(&own_cpu.mu);
}

void nvlp_cpu_report(double writer)
{
	pthread_mutex_lock(&own_cpu.mu);
	nvlp_warn("CPU time: process %.1f ms; nvlprof's threads: writer %.1f ms%s",
	          thread_cpu_ms(CLOCK_PROCESS_CPUTIME_ID), writer, own_cpu.text);
	pthread_mutex_unlock(&own_cpu.mu);
}

/* The writer's CPU time is read by rt_writer.c through its clock (it is still running). */
double nvlp_thread_cpu_ms(clockid_t c)
{
	return thread_cpu_ms(c);
}

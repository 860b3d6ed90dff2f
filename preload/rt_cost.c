/* rt_cost.c: what recording costs the job, measured by the shim itself: CPU time of nvlprof's own
 * threads and of its code on the job's threads (sampled), memory held, trace bytes. Written as
 * COST records (every 10 s and at the end, each in a frame of its own; rt_writer.c) and, with
 * NVLPROF_VERBOSE, one line at exit. */
#include <pthread.h> /* pthread_getcpuclockid */
#include <stdio.h>   /* snprintf */
#include <string.h>  /* memset */
#include <time.h>    /* clock_gettime */

#include "nvlp_cost.h"
#include "nvlp_rt.h"
#include "nvlp_trace.h"
#include "rt_internal.h"
#include "rt_ring.h"

__thread unsigned nvlp_cost_tick __attribute__((tls_model("initial-exec"), visibility("hidden")));

static struct {
	pthread_mutex_t mu;
	clockid_t clk[NVLP_COST_WHO_N]; /* live threads' CPU clocks */
	int live[NVLP_COST_WHO_N];
	int ran[NVLP_COST_WHO_N]; /* a thread of the role started (NVLPROF_VERBOSE names it) */
	uint64_t ended_ns[NVLP_COST_WHO_N]; /* CPU of ended threads of each role */
	_Atomic uint64_t hook_ns, hook_samples;
	_Atomic int64_t mem;   /* outside the rings (CUPTI buffers, NCCL plugin handles) */
	uint64_t mem_peak;     /* writer only (sampled at each COST) */
	uint64_t t_open;       /* when the trace opened (nvlp_now) */
	uint64_t cpu_open;     /* the process's CPU time then */
} cost_meter = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	return clock_gettime(c, &ts) == 0 ? (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec
	                                  : 0;
}

void nvlp_cost_add_hook(uint64_t ns)
{
	__atomic_fetch_add(&cost_meter.hook_ns, ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cost_meter.hook_samples, 1, __ATOMIC_RELAXED);
}

void nvlp_cost_mem(int64_t bytes)
{
	__atomic_fetch_add(&cost_meter.mem, bytes, __ATOMIC_RELAXED);
}

void nvlp_cost_thread_start(enum nvlp_cost_who who)
{
	clockid_t c;
	if ((unsigned)who >= NVLP_COST_WHO_N || pthread_getcpuclockid(pthread_self(), &c) != 0)
		return;
	pthread_mutex_lock(&cost_meter.mu);
	cost_meter.clk[who] = c;
	cost_meter.live[who] = cost_meter.ran[who] = 1;
	pthread_mutex_unlock(&cost_meter.mu);
}

void nvlp_cost_thread_end(enum nvlp_cost_who who)
{
	if ((unsigned)who >= NVLP_COST_WHO_N)
		return;
	uint64_t ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	pthread_mutex_lock(&cost_meter.mu);
	cost_meter.ended_ns[who] += ns;
	cost_meter.live[who] = 0;
	pthread_mutex_unlock(&cost_meter.mu);
}

/* CPU time of each role so far (live threads read through their clocks). */
static void roles_cpu(uint64_t out[NVLP_COST_WHO_N])
{
	pthread_mutex_lock(&cost_meter.mu);
	for (int i = 0; i < NVLP_COST_WHO_N; i++)
		out[i] =
		    cost_meter.ended_ns[i] + (cost_meter.live[i] ? clock_ns(cost_meter.clk[i]) : 0);
	pthread_mutex_unlock(&cost_meter.mu);
}

/* Ring memory: the pages written so far of each ring (a ring is touched up to its capacity once
 * it wrapped), and the part of each spill in use (drained spill pages are given back). */
static uint64_t rings_mem(void)
{
	uint64_t m = 0;
	for (struct nvlp_ring *r = nvlp_ring_first(); r; r = r->next) {
		uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
		m += 4096 + (h < r->cap ? h : r->cap);
		struct nvlp_ring *s = r->spill;
		if (s) {
			uint64_t sh = atomic_load_explicit(&s->head, memory_order_relaxed);
			uint64_t st = atomic_load_explicit(&s->tail, memory_order_relaxed);
			m += 4096 + (sh > st ? sh - st : 0);
		}
	}
	return m;
}

void nvlp_cost_opened(void)
{
	cost_meter.t_open = nvlp_now();
	cost_meter.cpu_open = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	cost_meter.mem_peak = 0;
}

void nvlp_cost_fill(struct nvlp_rec_cost *c, const nvlp_writer *w)
{
	uint64_t roles[NVLP_COST_WHO_N];
	roles_cpu(roles);
	memset(c, 0, sizeof *c);
	c->t = nvlp_now();
	c->wall = c->t - cost_meter.t_open;
	uint64_t cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	c->proc_cpu = cpu > cost_meter.cpu_open ? cpu - cost_meter.cpu_open : 0;
	c->writer_cpu = roles[NVLP_COST_WRITER];
	c->flush_cpu = roles[NVLP_COST_FLUSH];
	c->sampler_cpu = roles[NVLP_COST_SAMPLER];
	c->pysample_cpu = roles[NVLP_COST_PYSAMPLE];
	c->own_cpu = c->writer_cpu + c->flush_cpu + c->sampler_cpu + c->pysample_cpu;
	c->hook_every = NVLP_COST_EVERY;
	c->hook_samples = __atomic_load_n(&cost_meter.hook_samples, __ATOMIC_RELAXED);
	c->hook_ns = __atomic_load_n(&cost_meter.hook_ns, __ATOMIC_RELAXED) * NVLP_COST_EVERY;
	int64_t other = __atomic_load_n(&cost_meter.mem, __ATOMIC_RELAXED);
	c->mem = rings_mem() + (other > 0 ? (uint64_t)other : 0);
	if (c->mem > cost_meter.mem_peak)
		cost_meter.mem_peak = c->mem;
	c->mem_peak = cost_meter.mem_peak;
	if (w)
		nvlp_writer_stats(w, &c->records, &c->raw_bytes, &c->file_bytes);
}

static const char *const who_name[NVLP_COST_WHO_N] = {"writer", "flush", "sampler", "pysample"};

void nvlp_cost_verbose(void)
{
	uint64_t roles[NVLP_COST_WHO_N];
	roles_cpu(roles);
	char text[160] = "";
	size_t n = 0;
	for (int i = 1; i < NVLP_COST_WHO_N && n < sizeof text; i++)
		if (cost_meter.ran[i])
			n += (size_t)snprintf(text + n, sizeof text - n, ", %s %.1f ms", who_name[i],
			                      roles[i] / 1e6);
	nvlp_warn("CPU time: process %.1f ms; nvlprof's threads: writer %.1f ms%s",
	          clock_ns(CLOCK_PROCESS_CPUTIME_ID) / 1e6, roles[NVLP_COST_WRITER] / 1e6, text);
}

/* The capture settings in effect, defaults included (header key NVLP_HDR_CAPTURE). */
void nvlp_cost_capture(char *out, size_t len)
{
	const struct nvlp_config *g = nvlp_cfg();
	char cupti[32];
	if (g->cupti == 2)
		snprintf(cupti, sizeof cupti, "startup:%ld", g->cupti_detach_ms);
	else if (g->cupti == 3)
		snprintf(cupti, sizeof cupti, "lazy");
	else
		snprintf(cupti, sizeof cupti, "%d", g->cupti);
	snprintf(out, len,
	         "kernels=%.64s cupti=%s driver=%d stacks=%d nvtx=%d nccl_plugin=%d kch=%d "
	         "sample_us=%ld links=%s nvml_us=%ld um=%s pysample_hz=%ld capture=%s",
	         g->kernels[0] ? g->kernels : NVLP_KERNELS_DEFAULT, cupti, g->driver, g->stacks, g->nvtx,
	         g->nccl_plugin, g->kch, g->sample_us, g->links_nvml ? "nvml" : "auto", g->nvml_us,
	         nvlp_cfg_um_word(g->um),
	         g->pysample_hz,
	         g->capture == 1 ? "cudaProfilerApi" : g->capture == 2 ? "nvtx" : "all");
}

void nvlp_cost_atfork_child(void)
{
	pthread_mutex_init(&cost_meter.mu, NULL);
	memset(cost_meter.live, 0, sizeof cost_meter.live);
	memset(cost_meter.ran, 0, sizeof cost_meter.ran);
	memset(cost_meter.ended_ns, 0, sizeof cost_meter.ended_ns);
	__atomic_store_n(&cost_meter.hook_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&cost_meter.hook_samples, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&cost_meter.mem, 0, __ATOMIC_RELAXED);
}

/* pm_job.c: a two-rank training job on the fake NCCL (FAKE_NCCL_ASYNC) that fails the ways the
 * post-mortem tests need: a rank stuck in its own code, a rank that exits, a watchdog's abort. */
#include <pthread.h>  /* pthread_create */
#include <stdio.h>    /* fprintf */
#include <stdlib.h>   /* atoi, abort */
#include <stdint.h>   /* uint64_t */
#include <string.h>   /* strcmp */
#include <time.h>     /* clock_gettime */
#include <sys/wait.h> /* waitpid */
#include <unistd.h>   /* usleep, fork */

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "../fakes/fake.h" /* fake_nccl_sync */
#ifdef PM_JOB_CUPTI
#include <cuda.h> /* cuInit: the fake libcuda attaches nvlprof's CUPTI (pm_job_cupti.c) */
#endif

/* Cross-device copies every 50 ms on a thread of its own: records the shim writes while the
 * job's main thread is blocked, as a rank's own threads would (its end is its last record). */
static void *ticker(void *arg)
{
	(void)arg;
	void *a = NULL, *b = NULL;
	cudaSetDevice(0);
	cudaMalloc(&a, 4096);
	cudaSetDevice(1);
	cudaMalloc(&b, 4096);
	for (;;) {
		cudaMemcpy(b, a, 4096, cudaMemcpyDeviceToDevice);
		usleep(50000);
	}
	return NULL;
}

/* torch's NCCL watchdog: aborts the process from its own thread after ms */
static void *watchdog(void *arg)
{
	usleep((useconds_t)(long)arg * 1000);
	abort();
	return NULL;
}

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Rank 0 publishes the unique id and a start time 300 ms on; both ranks start their steps then:
 * a healthy job's ranks arrive together (a rank that starts late stays late by as much when
 * calls return at once, which is a straggler of its own) */
static int get_id(int rank, const char *idfile, ncclUniqueId *id)
{
	uint64_t start = real_ns() + 300000000ull;
	if (rank == 0) {
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", idfile);
		FILE *f = fopen(tmp, "wb");
		if (ncclGetUniqueId(id) != ncclSuccess || !f || fwrite(id, sizeof *id, 1, f) != 1 ||
		    fwrite(&start, sizeof start, 1, f) != 1)
			return -1;
		fclose(f);
		if (rename(tmp, idfile) < 0)
			return -1;
	} else {
		FILE *f = NULL;
		for (int i = 0; i < 2000 && !(f = fopen(idfile, "rb")); i++)
			usleep(5000);
		int ok = f && fread(id, sizeof *id, 1, f) == 1 && fread(&start, sizeof start, 1, f) == 1;
		if (f)
			fclose(f);
		if (!ok)
			return -1;
	}
	for (uint64_t now; (now = real_ns()) < start;)
		usleep((useconds_t)((start - now) / 1000));
	return 0;
}

/* rank R of 2: STEPS steps of 3 ms compute and one AllReduce; at step AT, rank 1 fails as
 * MODE says (healthy: never): stuck (sleeps for good), exit (exit(3)), abort (stuck; rank 0's
 * watchdog aborts it WD ms later) */
static int run_rank(int rank, const char *idfile, const char *mode, int steps, int at, long wd)
{
	ncclUniqueId id;
	ncclComm_t comm;
#ifdef PM_JOB_CUPTI
	cuInit(0);
#endif
	if (get_id(rank, idfile, &id) < 0 || ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
		fprintf(stderr, "pm_job: rank %d: init failed\n", rank);
		return 90;
	}
	pthread_t t;
	pthread_create(&t, NULL, ticker, NULL);
	for (int s = 0; s < steps; s++) {
		if (rank == 1 && s == at && strcmp(mode, "healthy")) {
			if (!strcmp(mode, "exit"))
				exit(3);
			for (;;) /* stuck in its own code (data loading) */
				usleep(100000);
		}
		if (rank == 0 && s == at && !strcmp(mode, "abort")) {
			pthread_t w;
			pthread_create(&w, NULL, watchdog, (void *)wd);
			pthread_setname_np(w, "pt_nccl_watchdg");
		}
		usleep(3000);
		if (ncclAllReduce(NULL, NULL, 1 << 16, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
			return 91;
		fake_nccl_sync(); /* loss.item(): the step's collective completes here */
	}
	ncclCommDestroy(comm);
	return 0;
}

/* launch IDFILE MODE STEPS AT WD: a launcher (no GPU work, no NCCL call) forking both ranks */
static int launch(char **argv)
{
	/* a record of no rank's work (a MARK), so the launcher has a trace, as torchrun's has */
	cudaProfilerStart();
	cudaProfilerStop();
	pid_t p[2];
	for (int r = 0; r < 2; r++)
		if ((p[r] = fork()) == 0) {
			char rs[8];
			snprintf(rs, sizeof rs, "%d", r);
			char *av[] = {argv[0], "rank", rs, argv[2], argv[3], argv[4], argv[5], argv[6], NULL};
			execv("/proc/self/exe", av);
			_exit(127);
		}
	int bad = 0;
	for (int r = 0; r < 2; r++) {
		int st = 0;
		waitpid(p[r], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	return bad;
}

int main(int argc, char **argv)
{
	if (argc >= 8 && !strcmp(argv[1], "rank"))
		return run_rank(atoi(argv[2]), argv[3], argv[4], atoi(argv[5]), atoi(argv[6]),
		                atol(argv[7]));
	if (argc >= 7 && !strcmp(argv[1], "launch"))
		return launch(argv);
	fprintf(stderr, "usage: pm_job rank R IDFILE MODE STEPS AT WD_MS | launch IDFILE MODE STEPS "
	                "AT WD_MS\n");
	return 2;
}

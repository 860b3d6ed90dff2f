/* hk_cuda.c: drives the fake cudart's copies, managed memory and peer access for the hooks' shell tests. */
#include <dlfcn.h>  /* dlsym(RTLD_DEFAULT) */
#include <errno.h>  /* errno */
#include <stdio.h>  /* printf */
#include <string.h> /* strcmp */
#include <time.h>   /* nanosleep */
#include <unistd.h> /* access */

#include <cuda_runtime_api.h>


/* Per-thread-default-stream entry points (declared by the header only under a macro). */
cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);

#define SHOW(what, call)                                                                           \
	do {                                                                                       \
		errno = 0;                                                                         \
		int rc_ = (int)(call);                                                             \
		printf("%s rc=%d errno=%d\n", what, rc_, errno);                                   \
	} while (0)

/* Not inlined: the managed allocation's stack must show this program's own frame. */
__attribute__((noinline)) static void *alloc_managed_here(size_t n)
{
	void *p = NULL;
	SHOW("malloc_managed", cudaMallocManaged(&p, n, cudaMemAttachGlobal));
	__asm__ volatile("" ::: "memory");
	return p;
}

/*
 * Each copy has its own size, so the test can find its record (or its absence) by bytes:
 * 1001 D2D across devices, 1002 D2D same device, 1003 H2D plain, 1004 H2H, 1005 Default across,
 * 1006 peer before enable, 1007 after enable, 1008 after disable, 1009 H2D into managed,
 * 1010 D2H out of managed (async), 1011 D2H plain, 1012 D2D across (_ptds), 1013 D2D same (_ptsz).
 */
static int mode_copies(void)
{
	static char host[8192], host2[8192];
	void *a0, *b0, *a1;
	cudaSetDevice(0);
	cudaMalloc(&a0, 8192);
	cudaMalloc(&b0, 8192);
	cudaSetDevice(1);
	cudaMalloc(&a1, 8192);
	cudaSetDevice(0);
	SHOW("d2d_cross", cudaMemcpy(a1, a0, 1001, cudaMemcpyDeviceToDevice));
	SHOW("d2d_same", cudaMemcpy(b0, a0, 1002, cudaMemcpyDeviceToDevice));
	SHOW("h2d", cudaMemcpy(a0, host, 1003, cudaMemcpyHostToDevice));
	SHOW("h2h", cudaMemcpy(host2, host, 1004, cudaMemcpyHostToHost));
	SHOW("default_cross", cudaMemcpyAsync(a0, a1, 1005, cudaMemcpyDefault, NULL));
	SHOW("peer_before", cudaMemcpyPeer(a1, 1, a0, 0, 1006));
	SHOW("enable", cudaDeviceEnablePeerAccess(1, 0));
	SHOW("enable_again", cudaDeviceEnablePeerAccess(1, 0));
	SHOW("peer_enabled", cudaMemcpyPeerAsync(a1, 1, a0, 0, 1007, NULL));
	SHOW("disable", cudaDeviceDisablePeerAccess(1));
	SHOW("peer_after", cudaMemcpyPeer(a1, 1, a0, 0, 1008));
	char *m = alloc_managed_here(1 << 16);
	SHOW("h2d_managed", cudaMemcpy(m + 100, host, 1009, cudaMemcpyHostToDevice));
	SHOW("d2h_managed", cudaMemcpyAsync(host, m, 1010, cudaMemcpyDeviceToHost, NULL));
	SHOW("d2h", cudaMemcpy(host, a0, 1011, cudaMemcpyDeviceToHost));
	SHOW("d2d_cross_ptds", cudaMemcpy_ptds(a0, a1, 1012, cudaMemcpyDeviceToDevice));
	SHOW("d2d_same_ptsz", cudaMemcpyAsync_ptsz(b0, a0, 1013, cudaMemcpyDeviceToDevice, NULL));
	struct cudaMemLocation dev1 = {cudaMemLocationTypeDevice, 1};
	struct cudaMemLocation cpu = {cudaMemLocationTypeHost, 0};
	SHOW("prefetch", cudaMemPrefetchAsync(m, 4096, dev1, 0, NULL));
	SHOW("advise", cudaMemAdvise(m, 4096, cudaMemAdviseSetPreferredLocation, cpu));
	SHOW("free_device", cudaFree(a0));
	SHOW("free_managed", cudaFree(m));
	SHOW("free_bad", cudaFree(host));
	/* pointer questions the runtime was asked (by the shim: the program asks none) */
	int (*queries)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_pointer_queries");
	printf("pointer_queries=%d\n", queries ? queries() : -1);
	return 0;
}

/* Out-parameters and data: what the program sees must not depend on the shim. */
static int mode_outparams(void)
{
	void *d0 = NULL, *d1 = NULL, *m = NULL;
	static char src[256], dst[256];
	for (int i = 0; i < 256; i++)
		src[i] = (char)i;
	cudaSetDevice(0);
	cudaMalloc(&d0, 256);
	cudaSetDevice(1);
	cudaMalloc(&d1, 256);
	SHOW("h2d", cudaMemcpy(d0, src, 256, cudaMemcpyHostToDevice));
	SHOW("peer", cudaMemcpyPeer(d1, 1, d0, 0, 256));
	SHOW("d2d", cudaMemcpyAsync(d0, d1, 256, cudaMemcpyDeviceToDevice, NULL));
	SHOW("d2h", cudaMemcpy(dst, d0, 256, cudaMemcpyDeviceToHost));
	printf("data_ok=%d\n", !memcmp(src, dst, 256));
	SHOW("managed", cudaMallocManaged(&m, 512, cudaMemAttachGlobal));
	printf("managed_set=%d\n", m != NULL);
	SHOW("h2d_managed", cudaMemcpy(m, src, 256, cudaMemcpyHostToDevice));
	struct cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
	SHOW("prefetch", cudaMemPrefetchAsync(m, 512, loc, 0, NULL));
	SHOW("prefetch_bad", cudaMemPrefetchAsync(src, 512, loc, 0, NULL));
	SHOW("advise", cudaMemAdvise(m, 512, cudaMemAdviseSetReadMostly, loc));
	SHOW("enable", cudaDeviceEnablePeerAccess(0, 0));
	SHOW("enable_self", cudaDeviceEnablePeerAccess(1, 0));
	SHOW("disable", cudaDeviceDisablePeerAccess(0));
	SHOW("disable_again", cudaDeviceDisablePeerAccess(0));
	SHOW("free_managed", cudaFree(m));
	SHOW("free_managed_twice", cudaFree(m));
	return 0;
}

/* The 13.0 runtime has no cudaMemcpyPeer_ptds: the shim's wrapper must fail soft, not crash. */
static int mode_unresolved(void)
{
	cudaError_t (*f)(void *, int, const void *, int, size_t) =
		(cudaError_t(*)(void *, int, const void *, int, size_t))dlsym(RTLD_DEFAULT,
									       "cudaMemcpyPeer_ptds");
	if (!f) {
		printf("no_wrapper\n");
		return 0;
	}
	static char a[16], b[16];
	SHOW("peer_ptds", f(a, 1, b, 0, 16));
	SHOW("peer_ptds_again", f(a, 1, b, 0, 16));
	return 0;
}

/* copies-wait READY GO: the copies, then create READY and wait (20 s at most) for GO to exist, so
 * that a test can change this program's file before the trace ends. */
static int mode_copies_wait(const char *ready, const char *go)
{
	int rc = mode_copies();
	fflush(stdout);
	FILE *f = fopen(ready, "w");
	if (f)
		fclose(f);
	for (int i = 0; i < 2000 && access(go, F_OK) != 0; i++) {
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "copies-wait"))
		return mode_copies_wait(argv[2], argv[3]);
	if (argc >= 2 && !strcmp(argv[1], "copies"))
		return mode_copies();
	if (argc >= 2 && !strcmp(argv[1], "outparams"))
		return mode_outparams();
	if (argc >= 2 && !strcmp(argv[1], "unresolved"))
		return mode_unresolved();
	fprintf(stderr, "usage: hk_cuda copies | copies-wait READY GO | outparams | unresolved\n");
	return 2;
}

// p2p_copy.cu: known-volume GPU0 -> GPU1 copies, with peer access enabled (NVLink) and not (staged through the host).
// Build: nvcc -O2 -arch=sm_90 -o p2p_copy examples/p2p_copy.cu
// Usage: p2p_copy [peer|staged|both] [copies=20] [MiB=256]
//   peer   : cudaDeviceEnablePeerAccess both ways, then cudaMemcpyPeerAsync (one MEMCPY2 PtoP record
//            per copy; PM sampling nvltx__bytes_data_user should equal the payload)
//   staged : peer access NOT enabled: the driver stages through host memory (DtoH + HtoD records,
//            PCIe counters instead of NVLink)
//   both   : peer first (phase 1), then disable peer access and run staged (phase 2)
// NVLP_SETTLE_MS (default 2500): pause after CUDA is up, so that a profiler's counters are running.
// Prints the payload bytes, time and GB/s of each phase; exit 0 on success.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "p2p_copy: %s: %s\n", #x, cudaGetErrorString(e_));         \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static void set_peer(int on)
{
	for (int d = 0; d < 2; d++) {
		CK(cudaSetDevice(d));
		cudaError_t e = on ? cudaDeviceEnablePeerAccess(1 - d, 0) : cudaDeviceDisablePeerAccess(1 - d);
		if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled && e != cudaErrorPeerAccessNotEnabled) {
			fprintf(stderr, "p2p_copy: peer access %s on %d: %s\n", on ? "enable" : "disable", d,
				cudaGetErrorString(e));
			exit(1);
		}
		cudaGetLastError(); /* clear the "already" codes */
	}
	CK(cudaSetDevice(0));
}

/* copies x bytes GPU0 -> GPU1 on a GPU0 stream; returns ms */
static float run(const char *name, int phase, void *dst, const void *src, size_t bytes, int copies,
		 cudaStream_t st)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, st)); /* warm-up, not counted */
	CK(cudaStreamSynchronize(st));
	CK(cudaEventRecord(a, st));
	for (int i = 0; i < copies; i++)
		CK(cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, st));
	CK(cudaEventRecord(b, st));
	CK(cudaEventSynchronize(b));
	float ms = 0;
	CK(cudaEventElapsedTime(&ms, a, b));
	unsigned long long payload = (unsigned long long)bytes * (unsigned long long)copies;
	printf("phase %d (%s): payload %llu bytes (%d x %zu) GPU0->GPU1 (+1 warm-up copy), %.3f ms, %.1f GB/s\n",
	       phase, name, payload, copies, bytes, ms, payload / (ms * 1e6));
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return ms;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "both";
	int copies = argc > 2 ? atoi(argv[2]) : 20;
	size_t mib = argc > 3 ? (size_t)atol(argv[3]) : 256;
	if ((strcmp(mode, "peer") && strcmp(mode, "staged") && strcmp(mode, "both")) || copies <= 0 || !mib) {
		fprintf(stderr, "usage: p2p_copy [peer|staged|both] [copies=20] [MiB=256]\n");
		return 2;
	}
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	if (n < 2) {
		fprintf(stderr, "p2p_copy: needs 2 GPUs, found %d\n", n);
		return 1;
	}
	size_t bytes = mib << 20;
	void *src, *dst;
	unsigned char probe[16];
	CK(cudaSetDevice(1));
	CK(cudaMalloc(&dst, bytes));
	CK(cudaMemset(dst, 0, bytes));
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&src, bytes));
	CK(cudaMemset(src, 0x5a, bytes));
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaDeviceSynchronize());
	const char *settle = getenv("NVLP_SETTLE_MS");
	long settle_ms = settle ? atol(settle) : 2500;
	if (settle_ms > 0)
		usleep((useconds_t)settle_ms * 1000);
	int phase = 1;
	if (strcmp(mode, "staged")) {
		int can = 0;
		CK(cudaDeviceCanAccessPeer(&can, 0, 1));
		if (!can) {
			fprintf(stderr, "p2p_copy: GPU0 cannot access GPU1 as a peer\n");
			return 1;
		}
		set_peer(1);
		run("peer access enabled", phase++, dst, src, bytes, copies, st);
		if (!strcmp(mode, "both"))
			set_peer(0);
	}
	if (strcmp(mode, "peer"))
		run("peer access not enabled, staged", phase++, dst, src, bytes, copies, st);
	CK(cudaMemcpy(probe, (char *)dst + bytes - sizeof probe, sizeof probe, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < sizeof probe; i++)
		if (probe[i] != 0x5a) {
			fprintf(stderr, "p2p_copy: destination does not hold the copied data\n");
			return 1;
		}
	CK(cudaStreamDestroy(st));
	CK(cudaFree(src));
	CK(cudaSetDevice(1));
	CK(cudaFree(dst));
	printf("ok\n");
	return 0;
}

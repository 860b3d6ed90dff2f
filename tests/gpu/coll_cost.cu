// coll_cost.cu: host time per NCCL collective call (median over rounds; immune to GPU noise), and what the GPU does with it.
// One communicator over the first N visible GPUs of this process (ncclCommInitAll; N=1 on one GPU,
// where NCCL runs collectives as copies). Run side by side without nvlprof and under it to get the
// cost per intercepted collective (hook + profiler plugin + KernelCh events).
//   coll_cost [CALLS=20000] [ROUNDS=7] [NDEV=1] [COUNT=1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	int rounds = argc > 2 ? atoi(argv[2]) : 7;
	int ndev = argc > 3 ? atoi(argv[3]) : 1;
	size_t count = argc > 4 ? (size_t)atol(argv[4]) : 1;
	if (n <= 0 || rounds <= 0 || ndev <= 0 || ndev > 8)
		return 2;
	std::vector<ncclComm_t> comms(ndev);
	std::vector<int> devs(ndev);
	for (int i = 0; i < ndev; i++)
		devs[i] = i;
	if (ncclCommInitAll(comms.data(), ndev, devs.data()) != ncclSuccess) {
		fprintf(stderr, "ncclCommInitAll failed\n");
		return 1;
	}
	std::vector<cudaStream_t> st(ndev);
	std::vector<float *> buf(ndev);
	for (int i = 0; i < ndev; i++) {
		cudaSetDevice(i);
		cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking);
		cudaMalloc(&buf[i], count * sizeof(float));
	}
	auto batch = [&](long k) {
		for (long c = 0; c < k; c++) {
			if (ndev > 1)
				ncclGroupStart();
			for (int i = 0; i < ndev; i++)
				ncclAllReduce(buf[i], buf[i], count, ncclFloat, ncclSum, comms[i], st[i]);
			if (ndev > 1)
				ncclGroupEnd();
			if (c % 256 == 255) // keep the queue short: host time, not queue-full waits
				for (int i = 0; i < ndev; i++)
					cudaStreamSynchronize(st[i]);
		}
		for (int i = 0; i < ndev; i++)
			cudaStreamSynchronize(st[i]);
	};
	batch(2000); // warm-up
	std::vector<double> ns;
	for (int r = 0; r < rounds; r++) {
		auto t0 = std::chrono::steady_clock::now();
		batch(n);
		auto t1 = std::chrono::steady_clock::now();
		ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
	}
	std::sort(ns.begin(), ns.end());
	printf("coll_cost: median %.1f ns per AllReduce of %zu floats on %d GPU(s), %d rounds of %ld "
	       "(min %.1f, max %.1f)\n",
	       ns[ns.size() / 2], count, ndev, rounds, n, ns.front(), ns.back());
	for (int i = 0; i < ndev; i++)
		ncclCommDestroy(comms[i]);
	return 0;
}

#!/usr/bin/env bash
# diag_exit.sh: a short CUDA program that exits while nvlprof's counter sampling is still being set up;
# on a crash, prints a backtrace of every thread with cuda-gdb (no gdb on the GPU machine).
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf /tmp/nvlp-diag
NVLP_SETTLE_MS=0 build/nvlprof run -o /tmp/nvlp-diag -- build/examples/p2p_copy peer 4 64 >/tmp/nvlp-diag.log 2>&1
rc=$?
echo "short p2p_copy under nvlprof: exit status $rc"
if [ $rc -ne 0 ]; then
	NVLP_SETTLE_MS=0 cuda-gdb -batch -ex "set environment LD_PRELOAD=$PWD/build/libnvlprof.so" \
		-ex "set environment NVLPROF_DIR=/tmp/nvlp-diag2" -ex run -ex bt -ex "thread apply all bt 12" \
		--args build/examples/p2p_copy peer 4 64 2>&1 | grep -v "^\[New Thread\|^\[Thread" | tail -70
fi

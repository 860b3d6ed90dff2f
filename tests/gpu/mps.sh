# mps.sh: sourced by GPU scripts that put two ranks on one GPU side by side (run_cost.sh's ddp2, bytes2.sh): an MPS
# daemon of the run's own under $OUT, so the ranks' kernels run together as on two GPUs instead of time-sliced.
# mps_start WHY: starts it (0), or says why the ranks will time-slice (1); mps_stop: stops it. Needs log().
mps_start() {
	if ! command -v nvidia-cuda-mps-control >/dev/null; then
		log "$1: no nvidia-cuda-mps-control here; the ranks time-slice the GPU"
		return 1
	fi
	export CUDA_MPS_PIPE_DIRECTORY=$OUT/mps CUDA_MPS_LOG_DIRECTORY=$OUT/mps-log
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	nvidia-cuda-mps-control -d && log "MPS daemon started ($CUDA_MPS_PIPE_DIRECTORY)"
}
mps_stop() { echo quit | nvidia-cuda-mps-control; log "MPS daemon stopped"; }

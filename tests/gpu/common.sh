# common.sh: sourced by the GPU proof scripts (run from the repo root, with OUT, DONE_MSG and scen set):
# environment, output folders, packing whatever was produced on exit, scenario selection.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T=$OUT/traces L=$OUT/logs
mkdir -p "$T" "$L"
NV=${NVLPROF:-$PWD/build/nvlprof}
export NVLPROF=$NV
PY=python3
# whatever happens (a scenario hangs and the caller's timeout strikes), pack what was produced
finish() {
	for d in "$T"/*/; do
		[ -d "$d" ] || continue
		b=$(basename "$d")
		$NV report "$d" >"$L/report_$b.txt" 2>&1
		$NV info "$d" >"$L/info_$b.txt" 2>&1
	done
	(cd "$OUT" && tar czf traces.tgz traces && tar czf logs.tgz logs && rm -rf traces logs)
	echo "$DONE_MSG"
}
trap finish EXIT
trap 'exit 124' TERM INT
want() { case " $scen " in *" $1 "*) return 0 ;; esac; return 1; }
log() { echo "== $*" >&2; }
# run NAME CMD...: CMD under `nvlprof run` into $T/NAME; base NAME CMD...: CMD alone (the run without
# the shim to compare with). Output in $L/NAME.log, exit status and wall time in $L/NAME.wall;
# JOB_TIMEOUT (s, default 240) bounds each.
base() {
	local n=$1; shift
	local t0=$(date +%s%N)
	timeout "${JOB_TIMEOUT:-240}" "$@" >"$L/$n.log" 2>&1
	echo "rc=$? wall_s=$(( ($(date +%s%N) - t0) / 1000000 ))e-3" >"$L/$n.wall"
}
run() { local n=$1; shift; base "$n" "$NV" run -o "$T/$n" -- "$@"; }

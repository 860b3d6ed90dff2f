#!/usr/bin/env bash
# test_capture.sh: NVTX marks through NVTX_INJECTION64_PATH (NVIDIA's own v3 header library in the job), cudaProfilerStart/Stop marks, and NVLPROF_CAPTURE ranges.
source "$(dirname "$0")/../lib.sh"
export NVLPROF_CUPTI=0
READ="$PROGS/hk_read"
APP="$PROGS/hk_nvtx"
for f in "$READ" "$APP" "$LIB"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
# run NAME MODE [VAR=VALUE...]: the job under the shim, its trace as text in $T/NAME.txt
run() {
	local name=$1 mode=$2; shift 2
	mkdir -p "$T/$name"
	env "$@" NVLPROF_DIR="$T/$name" LD_PRELOAD="$PRELOAD" "$APP" "$mode" >"$T/$name.out" 2>"$T/$name.err"
	echo $? >"$T/$name.rc"
	: >"$T/$name.txt"
	for f in "$T/$name"/*.nvlp; do [ -f "$f" ] && "$READ" "$f" | sed 's/$/ /' >>"$T/$name.txt"; done
}
count() { local f=$1; shift; local n; n=$(grep -cE -- "$1" "$f"); [ $# -gt 1 ] && n=$(grep -E -- "$1" "$f" | grep -cE -- "$2"); echo "$n"; }
ar() { grep -c '^nccl fn=ncclAllReduce ' "$T/$1.txt"; }
# string id of a text in a trace
sid() { sed -n "s/^string id=\([0-9]*\) blob=$2 \$/\1/p" "$T/$1.txt" | head -1; }

run all nvtx
check_eq "nvtx: job ran" "0 done" "$(cat "$T/all.rc") $(cat "$T/all.out")"
check_eq "nvtx: every collective without a capture range" 16 "$(ar all)"
step=$(sid all step)
check "nvtx: the range names are strings" test -n "$step" -a -n "$(sid all train)"
check_eq "nvtx: pushes (train + 3 steps + 1 domain push with a registered string)" 5 "$(count "$T/all.txt" '^mark .* kind=3 ')"
check_eq "nvtx: the domain push carries its registered string" 4 "$(count "$T/all.txt" "^mark .* kind=3 name=$step ")"
check_eq "nvtx: pops, one per push" 5 "$(count "$T/all.txt" '^mark .* kind=4 ')"
check_eq "nvtx: start/end range" "1 1" "$(count "$T/all.txt" "^mark .* kind=5 name=$step ") $(count "$T/all.txt" '^mark .* kind=6 ')"
check_eq "nvtx: instant marks" 5 "$(count "$T/all.txt" "^mark .* kind=7 name=$(sid all mid) ")"

run cap nvtx NVLPROF_CAPTURE=nvtx:step
check_eq "capture nvtx:step: job ran" "0 done" "$(cat "$T/cap.rc") $(cat "$T/cap.out")"
check_eq "capture nvtx:step: only the collectives inside the step ranges" 10 "$(ar cap)"
check_eq "capture nvtx:step: none from outside" 0 "$(count "$T/cap.txt" '^nccl fn=ncclAllReduce .* count=7 ')"
check_eq "capture nvtx:step: each kind of step range opens it (push, domain push, start)" "1 1 1 1 1" \
	"$(for s in 0 1 2 3 4; do count "$T/cap.txt" "^nccl fn=ncclAllReduce .* count=$((100 * s + 1)) "; done | paste -sd' ')"
check_eq "capture nvtx:step: sequence numbers still count outside (first kept is seq 4)" 1 "$(count "$T/cap.txt" '^nccl fn=ncclAllReduce .* count=1 .* seq=4 ')"
check_eq "capture nvtx:step: marks are kept outside too" 5 "$(count "$T/cap.txt" '^mark .* kind=3 ')"
check_eq "capture nvtx:step: the communicator's creation is not a collective: dropped outside" 0 "$(count "$T/cap.txt" '^nccl fn=ncclCommInitRank ')"
check_eq "capture nvtx:step: complete trace" 1 "$(count "$T/cap.txt" '^end ')"

run prof profiler NVLPROF_CAPTURE=cudaProfilerApi
check_eq "capture cudaProfilerApi: job ran" "0 done" "$(cat "$T/prof.rc") $(cat "$T/prof.out")"
check_eq "capture cudaProfilerApi: marks for start and stop" "1 1" "$(count "$T/prof.txt" '^mark .* kind=1 ') $(count "$T/prof.txt" '^mark .* kind=2 ')"
check_eq "capture cudaProfilerApi: only steps 1 and 2" "101 102 201 202" \
	"$(grep '^nccl fn=ncclAllReduce ' "$T/prof.txt" | tr ' ' '\n' | sed -n 's/^count=//p' | paste -sd' ')"

run bad nvtx NVLPROF_CAPTURE=bogus
check_eq "capture bad value: job ran, everything recorded" "0 16" "$(cat "$T/bad.rc") $(ar bad)"
check "capture bad value: one line naming the variable" grep -q "NVLPROF_CAPTURE" "$T/bad.err"

run off nvtx NVLPROF_NVTX=0
check_eq "NVLPROF_NVTX=0: no marks, job unchanged" "0 0 16" "$(cat "$T/off.rc") $(count "$T/off.txt" '^mark ') $(ar off)"
run nsys nvtx NVTX_INJECTION64_PATH=/nonexistent/tool.so
check_eq "another tool's NVTX_INJECTION64_PATH is kept (no marks of ours)" "0 0" "$(cat "$T/nsys.rc") $(count "$T/nsys.txt" '^mark ')"


# torch.profiler's steps through CUPTI's external correlation (hk_nvtx kineto: as libtorch_cpu
# calls libcupti while torch.profiler traces CUDA)
XLIB="$FAKES/cupti/libcupti.so.13"
run kin kineto HK_CUPTI_LIB="$XLIB"
check_eq "kineto: job ran, every id and return code its library's (push/pop passed through)" "0 xc ok done" "$(cat "$T/kin.rc") $(cat "$T/kin.out" | paste -sd' ')"
check_eq "kineto: the job alone prints the same" "xc ok done" "$(HK_CUPTI_LIB="$XLIB" "$APP" kineto 2>&1 | paste -sd' ')"
check_eq "kineto: one USER_RANGE mark per outermost CUSTOM1 range (5 steps + 1 on a second thread)" 6 "$(count "$T/kin.txt" '^mark .* kind=8 ')"
check_eq "kineto: the second thread's mark has its own tid" 2 "$(grep '^mark .* kind=8 ' "$T/kin.txt" | sed -E 's/.* tid=([0-9]+).*/\1/' | sort -u | wc -l | tr -d ' ')"
"$CLI" report "$T/kin" >"$T/kin.rep" 2>&1
check "kineto: report takes the main thread's 5 marks as steps (4 between them), marked by the job" grep -qE "^nvlprof report: .*, 4 steps of [0-9.]+ ms \(marked by the job\)" "$T/kin.rep"
"$CLI" report --json "$T/kin" >"$T/kin.json" 2>/dev/null
check "kineto: JSON says where the steps came from" grep -q '"steps_why": "marked by the job (ProfilerStep via CUPTI)"' "$T/kin.json"
run kinoff kineto HK_CUPTI_LIB="$XLIB" NVLPROF_NVTX=0
check_eq "kineto with NVLPROF_NVTX=0: job unchanged, no marks" "0 xc ok done 0" "$(cat "$T/kinoff.rc") $(cat "$T/kinoff.out" | paste -sd' ') $(count "$T/kinoff.txt" '^mark ')"

exit $((FAILED > 0))

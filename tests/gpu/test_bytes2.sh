#!/usr/bin/env bash
# test_bytes2.sh: tests/gpu/bytes2.sh and bytes2_table.py without a GPU. The table: a rank's steady bytes per hour
# are its trace's growth between the short and the long run over their durations' difference, its collectives a
# second the growth of its NCCLPROF records, the worst rank against 50 MB/h, a rank without a pair named. The script:
# each configuration runs short and long under `nvlprof run` with its ENV, the first short one also without nvlprof,
# and a result that differs from that run is said and fails the script.
source "$(dirname "$0")/../lib.sh"
TB="$ROOT/tests/gpu/bytes2_table.py"
# synthetic: rank 0 grows 1,400,000 bytes and 60,000 collectives over 100 s; rank 1 2,000,000 bytes
L=$T/l && mkdir -p "$L"
mk() { # NAME SECONDS RANK DUR SIZE NCCLPROF
	head -c "$5" /dev/zero >"$L/$1_t$2.r$3.nvlp"
	printf '%s\n  rank      %s of 2\n  duration  %s s\n  records   9\n    ncclprof     %s\n    kcoll        %s\n' \
		"$L/$1_t$2.r$3.nvlp" "$3" "$4" "$6" "$6" >>"$L/info_$1_t$2.txt"
}
mk a 20 0 25.0 100000 10000
mk a 20 1 25.0 200000 10000
mk a 80 0 125.0 1500000 70000
mk a 80 1 125.0 2200000 70000
mk b 20 0 25.0 100000 10000
mk b 80 0 125.0 1500000 70000
mk b 80 1 125.0 2200000 70000
echo '{"job": {"cost": {"trace_mb_per_hour_per_rank": 60.5}}, "collectives": [
 {"calls": 90, "time_source": "gpu"}, {"calls": 10, "time_source": "host"}]}' >"$L/report_a_t80.json"
echo '{"rate": 598.2, "target_rate": 600}' >"$L/a_t80.json"
python3 "$TB" "$L" 20 80 a=600 >"$T/t1.txt" 2>&1
rc=$?
check_eq "table: status 0" 0 "$rc"
check_eq "table: rank 0's steady rate, bytes a collective" \
	"bytes2: a rank 0: 600 collectives/s, 23.3 bytes/collective, steady 50.4 MB/h (whole 125 s trace 43.2 MB/h); records ncclprof +600.0/s, kcoll +600.0/s" \
	"$(grep '^bytes2: a rank 0' "$T/t1.txt")"
check "table: rank 1's steady rate" grep -q '^bytes2: a rank 1: 600 collectives/s, 33.3 bytes/collective, steady 72.0 MB/h' "$T/t1.txt"
check_eq "table: the configuration's line (worst rank, the cost line, GPU-timed share, the job's rate)" \
	"bytes2: a: steady 72.0 MB/h per rank (max over ranks), the report's cost line 60.5 MB/h; 0.9000 of 100 collective calls GPU-timed; the job's rate 598.2/s (target 600)" \
	"$(grep '^bytes2: a:' "$T/t1.txt")"
check_eq "table: over the target" "bytes2: worst steady rate 72.0 MB/h per rank: OVER the 50 MB/h target" "$(tail -1 "$T/t1.txt")"
python3 "$TB" "$L" 20 80 b=600 >"$T/t2.txt" 2>&1
check_eq "table: a rank without its short run is named, status 1" "1 bytes2: b rank 1: no pair of traces to compare" \
	"$? $(grep 'rank 1' "$T/t2.txt")"
check "table: the other rank still measured" grep -q '^bytes2: b rank 0: 600 collectives/s' "$T/t2.txt"

# the script, with a stand-in job (sleeps its seconds, writes bytes2.py's result; FAKE_DIFF changes it)
cat >"$T/job.sh" <<'JOB'
while [ $# -gt 0 ]; do case $1 in --seconds) s=$2; shift ;; --json) j=$2; shift ;; --rate) r=$2; shift ;; esac; shift; done
sleep "$s"
pre=no; case "${LD_PRELOAD:-}" in *libnvlprof*) pre=yes ;; esac
echo "{\"rate\": $r, \"target_rate\": $r, \"loss\": 0.5, \"checksum\": ${FAKE_DIFF:-7}, \"env\": \"${FAKE_ENV:-}\", \"shim\": \"$pre\"}" >"$j"
JOB
SHORT=1 LONG=3 OUT="$T/o1" BYTES2_JOB="sh $T/job.sh" NVLPROF="$CLI" bash "$ROOT/tests/gpu/bytes2.sh" \
	x=100 y=200:FAKE_ENV=on+FAKE_OTHER=1 >"$T/s1.txt" 2>&1
rc=$?
check_eq "script: the stand-in writes no trace (no CUDA, no NCCL): status 1" 1 "$rc"
check_eq "script: each configuration short and long, the first short one also without nvlprof (5 runs, packed)" 5 \
	"$(tar tzf "$T/o1/logs.tgz" | grep -c 'logs/\(x_t1\|x_t3\|y_t1\|y_t3\|x_t1_base\)\.wall$')"
tar xzf "$T/o1/logs.tgz" -C "$T/o1"
check_eq "script: the jobs' results" "x_t1.json x_t1_base.json x_t3.json y_t1.json y_t3.json" \
	"$(cd "$T/o1/logs" && ls x_t*.json y_t*.json | tr '\n' ' ' | sed 's/ $//')"
shim() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shim"])' "$T/o1/logs/$1.json"; }
check_eq "script: the base run without the shim, the others under it" "no yes yes yes" \
	"$(shim x_t1_base) $(shim x_t1) $(shim x_t3) $(shim y_t3)"
check_eq "script: ENV words reach the job" '"on"' "$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["env"]))' "$T/o1/logs/y_t3.json")"
check_eq "script: a configuration without traces is named, no rate claimed" \
	"bytes2: x: no rank's trace in the long run|bytes2: y: no rank's trace in the long run|bytes2: no steady rate measured" \
	"$(grep -e 'no rank' -e 'no steady' "$T/o1/bytes2.txt" | paste -sd'|')"
check "script: the same result said" grep -q '^bytes2: result without nvlprof (0.5, 7), with (0.5, 7): same' "$T/o1/bytes2.txt"
SHORT=1 LONG=3 OUT="$T/o2" BYTES2_JOB="sh $T/job.sh" NVLPROF="$CLI" bash "$ROOT/tests/gpu/bytes2.sh" \
	x=100:FAKE_DIFF=8 >"$T/s2.txt" 2>&1
check_eq "script: a result changed under nvlprof is said" "bytes2: result without nvlprof (0.5, 7), with (0.5, 8): DIFFERENT" \
	"$(grep 'result without' "$T/o2/bytes2.txt")"

# BYTES2_MPS=1: a daemon of the run's own, started before the jobs (they see its pipe directory), stopped at the end;
# without nvidia-cuda-mps-control the ranks time-slice and the script says so
mkdir -p "$T/bin"
cat >"$T/bin/nvidia-cuda-mps-control" <<'MPS'
#!/bin/sh
if [ "$1" = -d ]; then echo "start $CUDA_MPS_PIPE_DIRECTORY" >>"$MPS_LOG"; else echo "stdin $(cat)" >>"$MPS_LOG"; fi
MPS
chmod +x "$T/bin/nvidia-cuda-mps-control"
cat >"$T/mjob.sh" <<'JOB'
while [ $# -gt 0 ]; do case $1 in --json) j=$2; shift ;; esac; shift; done
echo "{\"loss\": 0.5, \"checksum\": 7, \"pipe\": \"${CUDA_MPS_PIPE_DIRECTORY:-none}\"}" >"$j"
JOB
MPS_LOG=$T/mps.log PATH="$T/bin:$PATH" BYTES2_MPS=1 SHORT=1 LONG=2 OUT="$T/o3" BYTES2_JOB="sh $T/mjob.sh" NVLPROF="$CLI" \
	bash "$ROOT/tests/gpu/bytes2.sh" x=100 >"$T/s3.txt" 2>&1
check_eq "mps: the daemon started under \$OUT, then told to quit" "start $T/o3/mps|stdin quit" "$(paste -sd'|' "$T/mps.log")"
tar xzf "$T/o3/logs.tgz" -C "$T/o3"
check_eq "mps: the jobs see its pipe directory" "$T/o3/mps" \
	"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pipe"])' "$T/o3/logs/x_t2.json")"
check "mps: the logs and traces still packed at the end" test -f "$T/o3/traces.tgz"
BYTES2_MPS=1 SHORT=1 LONG=2 OUT="$T/o4" BYTES2_JOB="sh $T/mjob.sh" NVLPROF="$CLI" PATH=/usr/bin:/bin \
	bash "$ROOT/tests/gpu/bytes2.sh" x=100 >"$T/s4.txt" 2>&1
check "mps: none here: said, the ranks time-slice" grep -q "BYTES2_MPS=1: no nvidia-cuda-mps-control here; the ranks time-slice the GPU" "$T/s4.txt"
exit $((FAILED > 0))

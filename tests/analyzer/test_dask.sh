#!/usr/bin/env bash
# test_dask.sh: `nvlprof dask` on a local Dask cluster (worker processes) and through a scheduler
# file: one partial per node directory made on the workers, merged into the report `report` makes
# over all the traces; a node that fails is named in one line. Needs Debian's python3-distributed
# (make test installs it); skipped with the reason without it.
. "$(dirname "$0")/../lib.sh"
DASK="$B/nvlprof-dask"
PY=""
for p in python3 /usr/bin/python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c "import distributed" >/dev/null 2>&1; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
	skip "nvlprof dask: the Python module distributed is not installed (apt-get install python3-distributed)"
	exit 0
fi
check "the driver is installed beside nvlprof" test -x "$DASK"
# a 64-rank job on 8 hosts, rank 3 late, one directory per host
"$PROGS/an_gen" -o "$T/all" --ranks 64 --hosts 8 --late-rank 3 --late-ms 3 >/dev/null 2>&1 || fail "an_gen"
dirs=()
for h in $(seq 0 7); do
	mkdir -p "$T/node$h" && mv "$T/all/node$h-"*.nvlp "$T/node$h/"
	dirs+=("$T/node$h")
done
"$CLI" report "${dirs[@]}" >"$T/report.txt" 2>"$T/report.err"
"$CLI" report --json "${dirs[@]}" >"$T/report.json" 2>/dev/null
# node 0's task pinned to the worker host (HOST:DIR), the partials kept
timeout 300 "$CLI" dask --scheduler local:2 --keep "$T/kept" "127.0.0.1:${dirs[0]}" "${dirs[@]:1}" \
	>"$T/dask.txt" 2>"$T/dask.err"
check_eq "dask local:2: status 0" "0" "$?"
check "dask local:2: the report equals report over all the traces" cmp "$T/report.txt" "$T/dask.txt"
check "dask local:2: the warnings equal report's" cmp "$T/report.err" "$T/dask.err"
check "dask: the report names the straggler" grep -q "straggler: Rank 3 arrives last" "$T/dask.txt"
check_eq "dask --keep: a partial per node" "8" "$(ls "$T/kept"/*.part 2>/dev/null | wc -l)"
"$CLI" merge --json "$T/kept"/*.part >"$T/merge.json" 2>/dev/null
check "dask --keep: the partials merge to report's JSON" cmp "$T/report.json" "$T/merge.json"
# a node whose traces are not there: named in one line, status 2
timeout 300 "$CLI" dask --scheduler local:1 "${dirs[0]}" "$T/nowhere" >"$T/bad.out" 2>"$T/bad.err"
rc=$?
check_eq "dask with a missing node directory: status 2, one line" "2 1" "$rc $(wc -l <"$T/bad.err")"
check "dask: the line names the directory and why" grep -q "^nvlprof: dask: $T/nowhere: nvlprof: .*nowhere" "$T/bad.err"
check "dask: no report from a job with a node missing" test ! -s "$T/bad.out"
"$CLI" dask --scheduler local:0 "${dirs[0]}" >/dev/null 2>"$T/zero.err"
check_eq "dask --scheduler local:0: status 2, one line" "2 1" "$? $(wc -l <"$T/zero.err")"
"$CLI" dask --scheduler "$T/no-such-file" "${dirs[0]}" >/dev/null 2>"$T/nofile.err"
check "dask: a scheduler file that is not there is named" grep -q "scheduler file not found: $T/no-such-file" "$T/nofile.err"
# nvlprof without its driver beside it: one line saying how to do without
mkdir -p "$T/bare" && cp "$CLI" "$T/bare/nvlprof"
"$T/bare/nvlprof" dask --scheduler local:1 "${dirs[0]}" >/dev/null 2>"$T/bare.err"
check_eq "nvlprof dask without the driver: status 2, one line" "2 1" "$? $(wc -l <"$T/bare.err")"
# a scheduler and a worker of their own, reached through the scheduler file
SCHED=$(dirname "$(command -v dask-scheduler 2>/dev/null || echo /usr/bin/dask-scheduler)")
if [ -x "$SCHED/dask-scheduler" ] && [ -x "$SCHED/dask-worker" ]; then
	"$SCHED/dask-scheduler" --scheduler-file "$T/sched.json" --host 127.0.0.1 --port 0 \
		--dashboard-address :0 >"$T/sched.log" 2>&1 &
	spid=$!
	for _ in $(seq 100); do [ -s "$T/sched.json" ] && break; sleep 0.2; done
	"$SCHED/dask-worker" --scheduler-file "$T/sched.json" --nworkers 2 --nthreads 1 \
		--no-dashboard >"$T/worker.log" 2>&1 &
	wpid=$!
	timeout 300 "$CLI" dask --scheduler "$T/sched.json" "${dirs[@]}" >"$T/file.txt" 2>"$T/file.err"
	check_eq "dask --scheduler FILE: status 0" "0" "$?"
	check "dask --scheduler FILE: the report equals report's" cmp "$T/report.txt" "$T/file.txt"
	kill "$wpid" 2>/dev/null
	kill "$spid" 2>/dev/null
	wait "$wpid" "$spid" 2>/dev/null
else
	skip "dask --scheduler FILE: dask-scheduler and dask-worker not found"
fi
[ "$FAILED" = 0 ]

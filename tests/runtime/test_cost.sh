#!/usr/bin/env bash
# test_cost.sh: each trace says what recording cost (COST records: CPU of nvlprof's threads and of
# its hooks, memory, trace bytes), the report prints it in one line and JSON has it, the header
# names the capture settings, and diff warns when two runs were recorded differently.
source "$(dirname "$0")/../lib.sh"
APP="$PROGS/rt_app"
for f in "$APP" "$LIB" "$FAKES/libnccl.so.2"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
# run NAME ENV... -- ARGS: the app with the shim, traces in $T/NAME
run() {
	local n=$1; shift
	local env=()
	while [ "$1" != -- ]; do env+=("$1"); shift; done
	shift
	rm -rf "$T/$n" && mkdir -p "$T/$n"
	(cd "$T/$n" && env "${env[@]}" NVLPROF_DIR="$T/$n" LD_PRELOAD="$PRELOAD" timeout 60 "$APP" "$@" \
		>"$T/$n.out" 2>"$T/$n.err")
}
# last NAME FIELD: FIELD of the trace's last COST record
last() { "$CLI" dump "$T/$1"/*.nvlp | grep '^cost ' | tail -1 | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# 20,000 calls a second for 2 s: the writer drains while the app runs
run calls -- rate 20000 2
n=$("$CLI" dump "$T/calls"/*.nvlp | grep -c '^cost ')
check "a COST record at the start and one at the end ($n)" test "$n" -ge 2
check "process CPU counted" test "$(last calls proc_cpu)" -gt 0
check "the writer's CPU counted, and within the process's" \
	test "$(last calls writer_cpu)" -gt 0 -a "$(last calls own_cpu)" -le "$(last calls proc_cpu)"
check_eq "own_cpu is the sum of the roles" "$(last calls own_cpu)" \
	$(( $(last calls writer_cpu) + $(last calls flush_cpu) + $(last calls sampler_cpu) + $(last calls pysample_cpu) ))
# one call in 16 of each thread is timed: every NCCL call (and the CUDA calls, NCCL plugin and
# CUPTI callbacks nvlprof's code runs in besides)
calls=$("$CLI" dump "$T/calls"/*.nvlp | grep -c '^nccl ')
hs=$(last calls hook_samples)
check "hooks timed one call in 16 ($hs for $calls NCCL calls)" test $((hs * 16 + 16)) -gt "$calls"
check "the hooks' time is part of the process's CPU" test "$(last calls hook_ns)" -lt "$(last calls proc_cpu)"
check_eq "hook_every" 16 "$(last calls hook_every)"
check "time in hooks estimated (> 0)" test "$(last calls hook_ns)" -gt 0
check "memory held (the ring) counted" test "$(last calls mem)" -ge 4096 -a "$(last calls mem_peak)" -ge "$(last calls mem)"
check "trace bytes and records so far" test "$(last calls file_bytes)" -gt 0 -a "$(last calls records)" -ge "$calls"
check "the header names the capture settings, the default kernels=off, NVML every 100 ms" \
	grep -q 'capture="kernels=off cupti=1 .* links=auto nvml_us=100000 .*pysample_hz=10 capture=all"' <("$CLI" dump "$T/calls"/*.nvlp | grep -m1 "^header ")
"$CLI" report "$T/calls" >"$T/calls.rep" 2>&1
check "the report's cost line" grep -qE '^nvlprof cost: [0-9.]+% of CPU \(its threads [0-9.]+ (ms|s), in the job.s calls ~[0-9.]+ (ms|s), of [0-9.]+ (ms|s)\), [0-9.]+ MiB, [0-9.]+ MB/min per rank \([0-9]+ MB/h\)$' "$T/calls.rep"
"$CLI" report --json "$T/calls" >"$T/calls.json" 2>&1
check "JSON: job.cost" python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["job"]["cost"]
assert c["processes"] == 1 and 0 < c["cpu_share"] < 1 and c["process_cpu_s"] > 0, c
assert c["nvlprof_threads_cpu_s"] > 0 and c["trace_mb_per_hour_per_rank"] > 0, c
t = c["threads_cpu_s"]
assert set(t) == {"writer", "cupti_flush", "link_sampler", "python_sampler"}, t
assert abs(sum(t.values()) - c["nvlprof_threads_cpu_s"]) < 1e-5 and t["writer"] > 0, t' "$T/calls.json"

# a rank killed with SIGKILL keeps the COST written early in its run
mkdir -p "$T/kill"
(cd "$T/kill" && NVLPROF_DIR="$T/kill" LD_PRELOAD="$PRELOAD" exec "$APP" loop >"$T/kill.out" 2>&1) &
p=$!
for _ in $(seq 200); do grep -q ready "$T/kill.out" 2>/dev/null && break; sleep 0.05; done
sleep 1.5
kill -KILL $p
{ wait $p; } 2>/dev/null
check "kill -9: the trace has a COST record" test "$("$CLI" dump "$T/kill"/*.nvlp 2>/dev/null | grep -c '^cost ')" -ge 1
check "kill -9: the report still prints the cost" grep -q '^nvlprof cost: ' <("$CLI" report "$T/kill" 2>&1)

# diff: recorded alike, no warning; recorded differently, a warning naming what differs
run calls2 -- calls 2000
run all NVLPROF_KERNELS=all NVLPROF_PYSAMPLE_HZ=0 -- calls 2000
# the NCCL plugin's handle rings (4096 collectives, 16384 channels: 1.8 MiB a communicator) are
# memory held
run kch0 NVLPROF_KCH=0 -- calls 2000
check "memory held: the plugin's kernel-channel handles counted ($(last calls2 mem_peak) - $(last kch0 mem_peak) bytes)" \
	test $(($(last calls2 mem_peak) - $(last kch0 mem_peak))) -ge 1800000
"$CLI" diff "$T/calls" "$T/calls2" >/dev/null 2>"$T/same.err"
check "diff, same capture settings: no capture warning" sh -c '! grep -q "capture settings" "$1"' _ "$T/same.err"
"$CLI" diff "$T/calls" "$T/all" >/dev/null 2>"$T/differ.err"
check "diff, different capture settings: a warning naming both changes" grep -q \
	"^nvlprof: diff: warning: the two sides were recorded with different capture settings (kernels off -> all, pysample_hz 10 -> 0): part of a difference may be nvlprof's own$" "$T/differ.err"
# the NVML fallback's period is a capture setting (NVLPROF_SAMPLE_US sets it, 10 ms at least)
run nvml20 NVLPROF_SAMPLE_US=20000 -- calls 2000
"$CLI" diff "$T/calls2" "$T/nvml20" >/dev/null 2>"$T/nvml.err"
check "diff, another link period: the warning names the NVML period" grep -q \
	"different capture settings (sample_us 10000 -> 20000, nvml_us 100000 -> 20000)" "$T/nvml.err"
# a trace of an nvlprof that did not record nvml_us yet: a note, not a difference
mkdir -p "$T/older"
for f in "$T/calls2"/*.nvlp; do
	"$PROGS/sh_rehdr" "$f" "$T/older/$(basename "$f")" \
		"capture=$("$CLI" dump "$f" | grep -m1 '^header ' | sed 's/.*capture="\([^"]*\)".*/\1/; s/ nvml_us=[0-9]*//')"
done
"$CLI" diff "$T/older" "$T/calls2" >/dev/null 2>"$T/older.err"
check "diff, a setting one side did not record: no capture warning" sh -c '! grep -q "warning: .*capture settings" "$1"' _ "$T/older.err"
check "... and one note naming it" grep -qx \
	"nvlprof: diff: note: capture settings recorded on one side only (after: nvml_us; traces of different nvlprof versions): compared without them" "$T/older.err"
# traces older than COST and the capture key: no line, no warning
ex=$(ls -d "$ROOT"/examples/traces/*/ | head -1)
check "an older trace: no cost line" sh -c '! "$1" report "$2" | grep -q "^nvlprof cost"' _ "$CLI" "$ex"
"$CLI" diff "$ex" "$T/calls" >/dev/null 2>"$T/old.err"
check "an older trace against a new one: no capture warning" sh -c '! grep -q "capture settings" "$1"' _ "$T/old.err"
exit $((FAILED > 0))

#!/usr/bin/env bash
# test_ncclprof.sh: the shim serves NCCL's profiler plugin interface (ncclProfiler_v5). The fake
# NCCL loads it as NCCL 2.27+ does (dlopen of NCCL_PROFILER_PLUGIN, init per communicator, one
# collective event per collective): every collective gets an NCCLPROF record tied to the shim's
# communicator; the analyzer shows the choices; the user's setting and NVLPROF_NCCL_PLUGIN=0 win.
source "$(dirname "$0")/../lib.sh"
APP="$PROGS/rt_app"
for f in "$APP" "$LIB" "$CLI" "$FAKES/libnccl.so.2"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
run() {
	local d=$1; shift
	rm -rf "$d"; mkdir -p "$d"
	(cd "$d" && NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" FAKE_NCCL_PROFILER_LOG=1 timeout 60 "$@" >"$d/.out" 2>"$d/.err")
	echo $? >"$d/.rc"
}
count() { "$CLI" dump "$1/tr" 2>/dev/null | grep -c "^$2 "; }
allreduce() { "$CLI" dump "$1/tr" 2>/dev/null | grep -c "^nccl ncclAllReduce "; }

# --- default: NCCL_PROFILER_PLUGIN points at the shim; one record per collective ---
d=$T/on
run "$d" env -u NCCL_PROFILER_PLUGIN "$APP" calls 40
check_eq "plugin: job output unchanged" "calls=40" "$(cat "$d/.out")"
check "plugin: NCCL loaded it (ncclProfiler_v5 found)" grep -q "profiler plugin .*libnvlprof.so: nvlprof$" "$d/.err"
check_eq "plugin: one NCCLPROF record per AllReduce" 40 "$(count "$d" ncclprof)"
"$CLI" dump "$d/tr" >"$d/dump" 2>/dev/null
comm=$(sed -n 's/^nccl ncclAllReduce .* comm=\(0x[0-9a-f]*\).*/\1/p' "$d/dump" | sort -u)
check_eq "plugin: records carry the shim's communicator hash" "$comm" \
	"$(sed -n 's/^ncclprof .* comm=\(0x[0-9a-f]*\) .*/\1/p' "$d/dump" | sort -u)"
check "plugin: algorithm, protocol, channels, warps recorded" \
	grep -q '^ncclprof ncclAllReduce .*algo="RING" proto="LL" channels=2 .*warps=16 count=1024' "$d/dump"
check_eq "plugin: NCCL's sequence numbers 0..39" "0 39" \
	"$(sed -n 's/^ncclprof .* seq=\([0-9]*\) .*/\1/p' "$d/dump" | sort -n | sed -n '1p;$p' | tr '\n' ' ' | sed 's/ $//')"
check_eq "plugin: one NOTE says it is active" 1 "$(grep -c '^note nccl_plugin ' "$d/dump")"
hex=${comm#0x}; while [ ${#hex} -lt 16 ]; do hex=0$hex; done # the report pads to 16 digits
"$CLI" report "$d/tr" >"$d/report" 2>&1
check "report: NCCL CHOICES section" grep -q "^NCCL CHOICES" "$d/report"
check "report: AllReduce RING/LL, 40 calls, 2 channels" \
	grep -Eq "^  $hex +ncclAllReduce +RING/LL +40 +2$" "$d/report"
"$CLI" report --json "$d/tr" >"$d/report.json" 2>/dev/null
check_eq "report --json: nccl_choices" "$hex ncclAllReduce RING LL 40 2 2" "$(python3 -c '
import json, sys
for c in json.load(open(sys.argv[1]))["nccl_choices"]:
    print(c["comm"], c["collective"], c["algorithm"], c["protocol"], c["calls"], c["channels_min"], c["channels_max"])
' "$d/report.json")"

# --- the user's own NCCL_PROFILER_PLUGIN is kept (here: none) ---
d=$T/user
run "$d" env NCCL_PROFILER_PLUGIN=none "$APP" calls 10
check_eq "user plugin setting: job ran" 0 "$(cat "$d/.rc")"
check "user plugin setting: kept" grep -q "profiler plugin none: not loaded" "$d/.err"
check_eq "user plugin setting: no NCCLPROF records" 0 "$(count "$d" ncclprof)"
check_eq "user plugin setting: calls still recorded" 10 "$(allreduce "$d")"

# --- NVLPROF_NCCL_PLUGIN=0: not offered ---
d=$T/off
run "$d" env -u NCCL_PROFILER_PLUGIN NVLPROF_NCCL_PLUGIN=0 "$APP" calls 10
check "NVLPROF_NCCL_PLUGIN=0: NCCL_PROFILER_PLUGIN left unset" grep -q "profiler plugin (unset): not loaded" "$d/.err"
check_eq "NVLPROF_NCCL_PLUGIN=0: no NCCLPROF records" 0 "$(count "$d" ncclprof)"
check_eq "NVLPROF_NCCL_PLUGIN=0: calls still recorded" 10 "$(allreduce "$d")"

# --- NVLPROF_DISABLE=1: nothing set, nothing recorded ---
got=$(NVLPROF_DISABLE=1 LD_PRELOAD="$PRELOAD" env -u NCCL_PROFILER_PLUGIN env | grep -c '^NCCL_PROFILER_PLUGIN=')
check_eq "NVLPROF_DISABLE=1: NCCL_PROFILER_PLUGIN not set" 0 "$got"

# --- loaded as a plugin by a process that does not preload the shim: NCCL runs, nothing breaks ---
d=$T/nopreload
rm -rf "$d"; mkdir -p "$d"
(cd "$d" && NVLPROF_DIR="$d/tr" NCCL_PROFILER_PLUGIN="$LIB" FAKE_NCCL_PROFILER_LOG=1 \
	LD_LIBRARY_PATH="${SANLIB:+$(dirname "$SANLIB"):}${LD_LIBRARY_PATH:-}" timeout 60 "$APP" calls 10 >"$d/.out" 2>"$d/.err")
if [ -z "$SANLIB" ]; then
	check_eq "plugin without preload: job output unchanged" "calls=10" "$(cat "$d/.out")"
fi

echo "ncclprof: $FAILED failed"
[ "$FAILED" -eq 0 ]

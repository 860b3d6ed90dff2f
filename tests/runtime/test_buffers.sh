#!/usr/bin/env bash
# test_buffers.sh: per-thread rings under load: every call is recorded or counted as dropped, and
# rings of exited threads are recycled (thousands of short threads do not grow memory).
source "$(dirname "$0")/../lib.sh"
APP="$PROGS/rt_app"
READ="$PROGS/rt_read"
for f in "$APP" "$READ" "$LIB"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
rd() { "$READ" "$1" | sed -n "s/^$2=//p"; }

# --- 16 threads x 100k calls: records + drops == calls (small rings force drops; the NCCL plugin
# is off so that every record is a call) ---
d="$T/threads"
mkdir -p "$d"
(cd "$d" && NVLPROF_NCCL_PLUGIN=0 NVLPROF_STACKS=0 NVLPROF_BUFFER_KB=64 NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" \
	timeout 60 "$APP" threads 16 100000 >"$d/.out" 2>"$d/.err")
check_eq "threads: status" 0 "$?"
check_eq "threads: all calls made" "calls=1600000" "$(cat "$d/.out")"
f=$(ls "$d"/tr/*.nvlp | head -1)
check_eq "threads: complete" 1 "$(rd "$f" complete)"
rec=$(rd "$f" allreduce)
drop=$(rd "$f" end_dropped)
check_eq "threads: records + drops == calls ($rec + $drop)" 1600000 "$((rec + drop))"
if [ "$drop" -gt 0 ]; then
	check "threads: drops reported per thread" test "$(rd "$f" drops_records)" -gt 0
fi

# --- one thread, a large ring, a slow burst: nothing dropped ---
d="$T/nodrop"
mkdir -p "$d"
(cd "$d" && NVLPROF_STACKS=0 NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" "$APP" calls 5000 >/dev/null)
f=$(ls "$d"/tr/*.nvlp | head -1)
check_eq "one thread: no drops" 0 "$(rd "$f" end_dropped)"
check_eq "one thread: all recorded" 5000 "$(rd "$f" allreduce)"

# --- 2000 short threads: rings recycled, so the number of rings stays small ---
d="$T/churn"
mkdir -p "$d"
(cd "$d" && NVLPROF_VERBOSE=1 NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" \
	timeout 60 "$APP" churn 2000 >"$d/.out" 2>"$d/.err")
check_eq "churn: status" 0 "$?"
f=$(ls "$d"/tr/*.nvlp | head -1)
check_eq "churn: complete" 1 "$(rd "$f" complete)"
check_eq "churn: records + drops == calls" 6000 "$(($(rd "$f" allreduce) + $(rd "$f" end_dropped)))"
rings=$(sed -n 's/.* \([0-9]*\) thread buffers$/\1/p' "$d/.err")
check "churn: rings recycled (${rings:-?} rings for 2000 threads)" test "${rings:-9999}" -le 64

exit $((FAILED > 0))

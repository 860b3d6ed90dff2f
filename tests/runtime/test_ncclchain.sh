#!/usr/bin/env bash
# test_ncclchain.sh: a profiler plugin the user names in NCCL_PROFILER_PLUGIN is chained behind
# nvlprof's. The fake NCCL loads and drives plugins as NCCL 2.28.9 does; the fake second plugin
# logs every call with its own ids for contexts and handles. The chained plugin's log must equal
# the log of the same job with that plugin alone (no shim), for several masks and interfaces,
# while nvlprof's trace still has its records; failures leave nvlprof working with a note.
source "$(dirname "$0")/../lib.sh"
APP="$PROGS/chain_app"
P="$FAKES/prof"
for f in "$APP" "$LIB" "$CLI" "$P/libnccl-profiler-fakelog.so" "$P/libnccl-profiler-fakelog4.so"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
LDP="$P${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# job DIR LOGNAME [env...]: the app (3 steps) with the fake plugin logging to DIR/LOGNAME
job() {
	local d=$1 log=$2; shift 2
	mkdir -p "$d"
	(cd "$d" && env -u NCCL_PROFILER_PLUGIN -u NVLPROF_NCCL_CHAIN LD_LIBRARY_PATH="$LDP" FAKE_NCCL_KCH=1 FAKE_NCCL_PROFILER_LOG=1 \
		FAKE_PROF_LOG="$d/$log" NVLPROF_DIR="$d/tr" "$@" timeout 60 "$APP" 3 >>"$d/.out" 2>>"$d/.err")
	echo $? >"$d/.rc"
}
alone() { local d=$1; shift; job "$d" alone.log "$@"; }
chained() { local d=$1; shift; job "$d" chained.log LD_PRELOAD="$PRELOAD" "$@"; }
count() { "$CLI" dump "$1/tr" 2>/dev/null | grep -c "^$2 "; }
# kchs DIR: nvlprof's collectives' channel records (KCOLL, one per collective) and the channels
# they stand for, "RECORDS CHANNELS"
kchs() { "$CLI" dump "$1/tr" 2>/dev/null | sed -n 's/^kcoll .* chans=\([0-9]*\) .*/\1/p' | awk '{n++; c+=$1} END {print n+0, c+0}'; }
same_log() { # same_log NAME DIR: the chained plugin was given exactly what it is given alone
	if [ -s "$2/alone.log" ] && cmp -s "$2/alone.log" "$2/chained.log"; then pass "$1"
	else fail "$1"; diff "$2/alone.log" "$2/chained.log" | head -10 | sed 's/^/    /'; fi
}

# --- the plugin by name, Inspector's mask (Coll | KernelCh) ---
d=$T/name
alone "$d" NCCL_PROFILER_PLUGIN=fakelog
chained "$d" NCCL_PROFILER_PLUGIN=fakelog
same_log "name: chained plugin given what it is given alone" "$d"
check_eq "name: job ran" 0 "$(cat "$d/.rc")"
check "name: NCCL loaded nvlprof's table" grep -q "profiler plugin .*libnvlprof.so: nvlprof$" "$d/.err"
check_eq "name: both communicators initialised" 2 "$(grep -c '^init ' "$d/chained.log")"
check_eq "name: its own contexts only" 0 "$(grep -c FOREIGN "$d/chained.log")"
check "name: collectives with their channels" grep -q "start C1 KernelCh parent=H[0-9]* ch=15 ptimer=set" "$d/chained.log"
check_eq "name: nvlprof's NCCLPROF records (4 per step)" 12 "$(count "$d" ncclprof)"
check_eq "name: nvlprof's KCOLL records, one per collective, for 2+16+2+2 channels per step" "12 66" "$(kchs "$d")"
check "name: NOTE names the chained plugin" sh -c "'$CLI' dump '$d/tr' | grep -q 'note nccl_plugin .*fakelog (v5, .*libnccl-profiler-fakelog.so) chained'"
check_eq "name: no warning" 0 "$(grep -c '^nvlprof: ' "$d/.err")"

# --- NVLPROF_KCH=0: nvlprof asks for no kernel channel, the chained plugin still gets its own ---
d=$T/kch0
alone "$d" NCCL_PROFILER_PLUGIN=fakelog
chained "$d" NCCL_PROFILER_PLUGIN=fakelog NVLPROF_KCH=0
same_log "NVLPROF_KCH=0: chained plugin given what it is given alone" "$d"
check_eq "NVLPROF_KCH=0: no KCH record of nvlprof's" 0 "$(count "$d" kch)"
check_eq "NVLPROF_KCH=0: NCCLPROF records kept" 12 "$(count "$d" ncclprof)"
check "NVLPROF_KCH=0: the header's capture says kch=0" grep -q 'capture="[^"]* kch=0 ' <("$CLI" dump "$d/tr" | grep -m1 '^header ')
d=$T/kchbad
chained "$d" NCCL_PROFILER_PLUGIN=fakelog NVLPROF_KCH=x
check "NVLPROF_KCH=x: one warning, kernel channels stay on" grep -q "^nvlprof: NVLPROF_KCH='x': expected 0, 1 or channels; using default 1$" "$d/.err"
check_eq "NVLPROF_KCH=x: nvlprof's KCOLL records" "12 66" "$(kchs "$d")"
d=$T/kchchan
alone "$d" NCCL_PROFILER_PLUGIN=fakelog
chained "$d" NCCL_PROFILER_PLUGIN=fakelog NVLPROF_KCH=channels
same_log "NVLPROF_KCH=channels: chained plugin given what it is given alone" "$d"
check_eq "NVLPROF_KCH=channels: one KCH record per channel (2+16+2+2 per step)" 66 "$(count "$d" kch)"
check_eq "NVLPROF_KCH=channels: no KCOLL record" 0 "$(count "$d" kcoll)"
check "NVLPROF_KCH=channels: the header's capture says kch=2" grep -q 'capture="[^"]* kch=2 ' <("$CLI" dump "$d/tr" | grep -m1 '^header ')

# --- masks: each chained log equals its alone log, and the mask is honoured ---
for m in 0x100 0x200 0x840 0x1 0x2 0x40 0xfff 0; do
	d=$T/mask$m
	alone "$d" NCCL_PROFILER_PLUGIN=fakelog FAKE_PROF_MASK=$m
	chained "$d" NCCL_PROFILER_PLUGIN=fakelog FAKE_PROF_MASK=$m
	same_log "mask $m: chained plugin given what it is given alone" "$d"
done
check_eq "mask 0x100: API groups only" "GroupApi" "$(awk '$1 == "start" {print $3}' "$T/mask0x100/chained.log" | sort -u)"
check_eq "mask 0x40: KernelCh brings its groups and collectives, not kernel launches" \
	"Coll CollApi Group GroupApi KernelCh" "$(awk '$1 == "start" {print $3}' "$T/mask0x40/chained.log" | sort -u | tr '\n' ' ' | sed 's/ $//')"
check_eq "mask 0: nothing started" 0 "$(grep -c '^start ' "$T/mask0/chained.log")"
check_eq "mask 0: nvlprof's records all there" 12 "$(count "$T/mask0" ncclprof)"

# --- the mask changed at run time by the plugin (after 20 events) ---
d=$T/flip
alone "$d" NCCL_PROFILER_PLUGIN=fakelog FAKE_PROF_MASK=0x100 FAKE_PROF_MASK2=0x42 FAKE_PROF_FLIP=4
chained "$d" NCCL_PROFILER_PLUGIN=fakelog FAKE_PROF_MASK=0x100 FAKE_PROF_MASK2=0x42 FAKE_PROF_FLIP=4
same_log "mask changed at run time: followed" "$d"
check "mask changed at run time: collectives after the change" grep -q "Coll parent" "$d/chained.log"

# --- a path; a v4-only plugin under a v5 NCCL ---
d=$T/path
alone "$d" NCCL_PROFILER_PLUGIN="$P/libnccl-profiler-fakelog.so"
chained "$d" NCCL_PROFILER_PLUGIN="$P/libnccl-profiler-fakelog.so"
same_log "path: chained plugin given what it is given alone" "$d"
d=$T/v4
alone "$d" NCCL_PROFILER_PLUGIN=fakelog4
chained "$d" NCCL_PROFILER_PLUGIN=fakelog4
same_log "v4 plugin: given what NCCL's v4 adapter gives it" "$d"
check_eq "v4 plugin: no API events" 0 "$(grep -cE 'GroupApi|CollApi|KernelLaunch' "$d/chained.log")"
check "v4 plugin: a collective's parent is its group" grep -q "Coll parent=H[0-9]" "$d/chained.log"
check "v4 plugin: NOTE says v4" sh -c "'$CLI' dump '$d/tr' | grep -q 'fakelog4 (v4, '"
d=$T/v4mask
alone "$d" NCCL_PROFILER_PLUGIN=fakelog4 FAKE_PROF_MASK=0xfff
chained "$d" NCCL_PROFILER_PLUGIN=fakelog4 FAKE_PROF_MASK=0xfff
same_log "v4 plugin, every bit: given what NCCL's v4 adapter gives it" "$d"

# --- NCCL 2.27 (v4 only): nvlprof served through ncclProfiler_v4, a v4 plugin chained ---
d=$T/nccl227
alone "$d" NCCL_PROFILER_PLUGIN=fakelog4 FAKE_NCCL_PROFILER_V4=1
chained "$d" NCCL_PROFILER_PLUGIN=fakelog4 FAKE_NCCL_PROFILER_V4=1
same_log "NCCL 2.27: a v4 plugin given what it is given alone" "$d"
check "NCCL 2.27: NCCL took nvlprof's v4 table" grep -q "profiler plugin .*libnvlprof.so: nvlprof (v4)$" "$d/.err"
check_eq "NCCL 2.27: nvlprof's NCCLPROF records" 12 "$(count "$d" ncclprof)"
check_eq "NCCL 2.27: nvlprof's KCOLL records" "12 66" "$(kchs "$d")"
check "NCCL 2.27: NOTE says v4" sh -c "'$CLI' dump '$d/tr' | grep -q 'note nccl_plugin .*value=4 msg=\"NCCL profiler plugin (v4) active'"
d=$T/nccl227v5
chained "$d" NCCL_PROFILER_PLUGIN=fakelog FAKE_NCCL_PROFILER_V4=1
check_eq "NCCL 2.27, a v5-only plugin: not chained (2.27 would not load it)" 0 "$(grep -c '^init ' "$d/chained.log" 2>/dev/null || echo 0)"
check "NCCL 2.27, a v5-only plugin: NOTE" sh -c "'$CLI' dump '$d/tr' | grep -q 'fakelog not chained (no ncclProfiler_v4..v3 table)'"

# --- unset: NCCL's default libnccl-profiler.so is chained when there is one ---
d=$T/default
mkdir -p "$d/lib"; ln -s "$P/libnccl-profiler-fakelog.so" "$d/lib/libnccl-profiler.so"
LDP="$d/lib:$LDP" alone "$d"
LDP="$d/lib:$LDP" chained "$d"
same_log "unset: NCCL's default plugin chained" "$d"

# --- a child process of the job inherits the chain; NVLPROF_DISABLE or NVLPROF_NCCL_PLUGIN=0 there ---
d=$T/child
alone "$d" NCCL_PROFILER_PLUGIN=fakelog
job "$d" chained.log LD_PRELOAD="$PRELOAD" NCCL_PROFILER_PLUGIN=fakelog sh -c 'exec "$@"' sh
same_log "child process: chained plugin given what it is given alone" "$d"
got=$(LD_PRELOAD="$PRELOAD" NCCL_PROFILER_PLUGIN=fakelog sh -c 'LD_PRELOAD= env' | grep -E '^(NCCL_PROFILER_PLUGIN|NVLPROF_NCCL_CHAIN)=' | sort | tr '\n' ' ')
check_eq "environment: NCCL pointed at nvlprof, the user's value kept" "NCCL_PROFILER_PLUGIN=$(realpath "$LIB") NVLPROF_NCCL_CHAIN=fakelog " "$got"
d=$T/child_disabled
alone "$d" NCCL_PROFILER_PLUGIN=fakelog
job "$d" chained.log LD_PRELOAD="$PRELOAD" NCCL_PROFILER_PLUGIN=fakelog sh -c 'export NVLPROF_DISABLE=1; exec "$@"' sh
same_log "child with NVLPROF_DISABLE=1: the plugin still given what it is given alone" "$d"
got=$(LD_PRELOAD="$PRELOAD" NCCL_PROFILER_PLUGIN=fakelog sh -c 'NVLPROF_NCCL_PLUGIN=0 env' | grep '^NCCL_PROFILER_PLUGIN=')
check_eq "child with NVLPROF_NCCL_PLUGIN=0: NCCL's setting restored" "NCCL_PROFILER_PLUGIN=fakelog" "$got"

# --- NVLPROF_NCCL_PLUGIN=0: the user's plugin is NCCL's alone, untouched ---
d=$T/off
alone "$d" NCCL_PROFILER_PLUGIN=fakelog
chained "$d" NCCL_PROFILER_PLUGIN=fakelog NVLPROF_NCCL_PLUGIN=0
same_log "NVLPROF_NCCL_PLUGIN=0: the plugin given what it is given alone" "$d"
check "NVLPROF_NCCL_PLUGIN=0: NCCL loaded the user's plugin itself" grep -q "profiler plugin fakelog: fakelog$" "$d/.err"
check_eq "NVLPROF_NCCL_PLUGIN=0: no NCCLPROF records" 0 "$(count "$d" ncclprof)"

# --- failures: nvlprof goes on alone, one NOTE, one stderr line ---
fails() { # fails NAME DIR WHAT: job ran, nvlprof's records there, a NOTE and one stderr line say WHAT
	check_eq "$1: job ran" 0 "$(cat "$2/.rc")"
	check_eq "$1: nvlprof's records still there" 12 "$(count "$2" ncclprof)"
	check_eq "$1: nvlprof's kernel channels still there" "12 66" "$(kchs "$2")"
	check "$1: NOTE" sh -c "'$CLI' dump '$2/tr' | grep -q 'note nccl_plugin .*$3'"
	check_eq "$1: one stderr line" 1 "$(grep -c "^nvlprof: NCCL profiler plugin .*$3" "$2/.err")"
}
d=$T/missing
chained "$d" NCCL_PROFILER_PLUGIN=/nonexistent/libnccl-profiler-x.so
fails "missing plugin" "$d" "not loaded"
d=$T/initfail
chained "$d" NCCL_PROFILER_PLUGIN=fakelog FAKE_PROF_INIT_RC=3
fails "init fails" "$d" "failed (its init returned 3)"
check_eq "init fails: no event given to it" 0 "$(grep -c '^start ' "$d/chained.log")"
d=$T/notable
chained "$d" NCCL_PROFILER_PLUGIN=empty
fails "no table" "$d" "no ncclProfiler_v5..v3 table"
d=$T/v2
chained "$d" NCCL_PROFILER_PLUGIN=fakelog2
fails "v2-only plugin" "$d" "it offers only interface v2"
d=$T/self
chained "$d" NCCL_PROFILER_PLUGIN=STATIC_PLUGIN
check_eq "STATIC_PLUGIN (the program has no table): job ran" 0 "$(cat "$d/.rc")"
check_eq "STATIC_PLUGIN: nvlprof not chained to itself" 12 "$(count "$d" ncclprof)"

echo "ncclchain: $FAILED failed"
[ "$FAILED" -eq 0 ]

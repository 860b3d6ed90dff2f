#!/usr/bin/env bash
# test_robust.sh: report on hostile but well-formed traces (what a fuzzer found in report/diff): no crash, no hang, memory and time in proportion to the input, bad records skipped with one warning, write errors are errors.
. "$(dirname "$0")/../lib.sh"
MK="$PROGS/mktrace"
[ -x "$MK" ] && [ -x "$CLI" ] || { fail "mktrace and nvlprof built ($MK, $CLI)"; exit 1; }
# run NAME [report args]: report on $T/NAME.nvlp, bounded (a hang fails the check, not the suite)
run() { local n=$1; shift; timeout 300 "$CLI" report "$@" "$T/$n.nvlp" >"$T/$n.txt" 2>"$T/$n.err"; echo $? >"$T/$n.rc"; }
for e in seqwrap bigseq times comms baddev group allocs stacks; do
	"$MK" -o "$T/$e.nvlp" --evil "$e" || fail "mktrace --evil $e"
	run "$e"
	check_eq "evil $e: report exits 0" "0" "$(cat "$T/$e.rc")"
done
check "seq 0 and 0xffffffff on one communicator: both matched (no 32-bit span)" \
	grep -q "^  2 collectives matched across ranks" "$T/seqwrap.txt"
check "seq numbers spread over 32 bits: 1000 rows, not 4G" grep -q "^  1000 collectives matched across ranks" "$T/bigseq.txt"
check "times near 2^64: 4 collectives matched, no overflow trap" grep -q "^  4 collectives matched across ranks" "$T/times.txt"
# communicator indices are 32 bits: every one of the 70000 is kept (16 bits kept 65535 (communicator,
# rank) pairs, 32767 communicators, and warned of the rest)
check_eq "70000 communicators: no warning" "0" "$(grep -c 'warning' "$T/comms.err")"
run comms --all-ranks # every communicator a COLLECTIVES row (past 32 they are merged by kind)
check_eq "70000 communicators: 70000 listed, none wrapped" "70000" \
	"$(grep -cE '^  0000000100[0-9a-f]{6} ncclAllReduce' "$T/comms.txt")"
check "bad devices: one warning naming file, frame and record" grep -Eq \
	"^nvlprof: warning: $T/baddev.nvlp: frame [0-9]+, record [0-9]+: nccl record with device 70000: skipped \(2 bad record\(s\) in all\)$" "$T/baddev.err"
check "bad devices: the good calls around it are kept" grep -Eq "^  000000bad0c0ffee ncclAllReduce +2 +2.0 " "$T/baddev.txt"
check "a group of 100000 calls on 100000 streams: all counted" grep -Eq "^  000000bad0c0ffee ncclSend +2 +100000.0 " "$T/group.txt"
check "100000 managed allocations: the limit is said once" grep -q "managed record beyond 4096 managed allocations: skipped (95905 bad record(s) in all)" "$T/allocs.err"
check "a stack blob of 7 bytes: skipped, named" grep -q "stack record of 7 bytes, not a whole number of addresses" "$T/stacks.err"
# a small file of many records: memory in proportion to the records, not to numbers read from them
"$MK" -o "$T/flood.nvlp" --evil flood --count 3000000
size=$(stat -c %s "$T/flood.nvlp")
check "3M-record flood fits in a small file ($size bytes)" test "$size" -lt 200000
/usr/bin/time -f "%M" -o "$T/flood.mem" timeout 300 "$CLI" report "$T/flood.nvlp" >"$T/flood.txt" 2>"$T/flood.err"
check_eq "3M-record flood: report exits 0" "0" "$?"
case "$BUILD" in
*san-*) pass "3M-record flood: memory not judged under a sanitizer" ;;
*) kb=$(tail -1 "$T/flood.mem")
   # 3M calls decode to ~70 MB of fields; the model keeps 40 B per call plus matching state
   check "3M-record flood: peak memory $kb KB < 600 MB" test "$kb" -lt 600000 ;;
esac
check "3M-record flood: all calls counted" grep -Eq "^  000000bad0c0ffee ncclAllReduce +2 +3000000.0 " "$T/flood.txt"
# write errors are errors naming the file
"$CLI" report "$T/seqwrap.nvlp" >/dev/full 2>"$T/full.err"
check_eq "report > /dev/full: exit 2" "2" "$?"
check "report > /dev/full: says so" grep -q "^nvlprof: standard output: write error: No space left on device$" "$T/full.err"
"$CLI" report -o /nonexistent/x "$T/seqwrap.nvlp" >"$T/o.txt" 2>"$T/o.err"
check_eq "report -o /nonexistent/x: exit 2" "2" "$?"
check "report -o /nonexistent/x: names the file, writes nothing to stdout" \
	bash -c "grep -q '^nvlprof: report: cannot write /nonexistent/x: No such file or directory$' '$T/o.err' && ! [ -s '$T/o.txt' ]"
"$CLI" report --json -o /dev/full "$T/seqwrap.nvlp" 2>"$T/o2.err"
check "report --json -o /dev/full: exit 2 naming the file" bash -c "[ $? = 2 ] && grep -q '^nvlprof: /dev/full: write error' '$T/o2.err'"
"$CLI" diff "$T/seqwrap.nvlp" "$T/bigseq.nvlp" >/dev/full 2>/dev/null
check_eq "diff > /dev/full: exit 2" "2" "$?"
"$CLI" dump "$T/seqwrap.nvlp" >/dev/full 2>/dev/null
check_eq "dump > /dev/full: exit 2" "2" "$?"
"$CLI" info "$T/seqwrap.nvlp" >/dev/full 2>/dev/null
check_eq "info > /dev/full: exit 2" "2" "$?"
# only regular files: a FIFO named like a trace is skipped, not waited on
mkdir -p "$T/fifodir"
cp "$T/seqwrap.nvlp" "$T/fifodir/a.nvlp"
mkfifo "$T/fifodir/b.nvlp"
timeout 60 "$CLI" info "$T/fifodir" >"$T/fi.txt" 2>"$T/fi.err"
check "info on a directory holding a FIFO *.nvlp: completes, says it is not a regular file" \
	bash -c "grep -q 'b.nvlp: not a regular file' '$T/fi.err' && grep -q 'a.nvlp' '$T/fi.txt'"
timeout 60 "$CLI" report "$T/fifodir" >"$T/fr.txt" 2>"$T/fr.err"
check_eq "report on a directory holding a FIFO *.nvlp: exit 0" "0" "$?"
check "report on it: the FIFO skipped as unreadable" grep -q "skipping unreadable trace: $T/fifodir/b.nvlp: not a regular file" "$T/fr.err"
# one bad byte loses one frame: the rest of the file is still reported
"$MK" -o "$T/good.nvlp" -n 40
python3 - "$T/good.nvlp" "$T/flip.nvlp" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
off, n = 16, 0
while off + 16 <= len(b):
    n += 1
    if n == 3:
        b[off + 20] ^= 0x40  # inside frame 3's compressed data
    off += 16 + struct.unpack_from('<I', b, off + 4)[0]
open(sys.argv[2], 'wb').write(b + b'trailing junk')
PY
"$CLI" report "$T/good.nvlp" >"$T/good.txt" 2>&1
"$CLI" report "$T/flip.nvlp" >"$T/flip.txt" 2>"$T/flip.err"
check_eq "a flipped byte in frame 3: report exits 0" "0" "$?"
check "a flipped byte in frame 3: one warning naming the skipped frame" grep -q "warning: trace damaged, 1 frame(s) skipped: $T/flip.nvlp: corrupt frame 3 at offset" "$T/flip.err"
calls_good=$(sed -En 's/^  00000000c0ffee00 ncclAllReduce +[0-9]+ +([0-9.]+) .*/\1/p' "$T/good.txt")
calls_flip=$(sed -En 's/^  00000000c0ffee00 ncclAllReduce +[0-9]+ +([0-9.]+) .*/\1/p' "$T/flip.txt")
check_eq "a flipped byte in frame 3: the frames after it are read (40 calls, 4 lost)" "40.0 36.0" "$calls_good $calls_flip"
[ "$FAILED" -eq 0 ]

#!/usr/bin/env bash
# test_symbols.sh: frames are named from the trace's own SYMBOL records, then from files whose build-id matches the trace's BUILDID (--symbols DIR, the recorded path), never from an unverified file.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
if [ ! -x "$GEN" ] || [ ! -x "$CLI" ]; then
	fail "analyzer test programs built ($GEN, $CLI)"
	exit 1
fi
gen() { local name=$1; shift; "$GEN" -o "$T/$name" "$@" || fail "an_gen $name $*"; }
# rep NAME DIR [report args]: the allocation site line of the text report, stderr kept apart
rep() { local n=$1 d=$2; shift 2; timeout 60 "$CLI" report "$@" "$d" >"$T/$n.txt" 2>"$T/$n.err"; echo "rc=$?" >>"$T/$n.err"; sed -En 's/.*allocated_at(: |=)//p' "$T/$n.txt"; }
SITE='^an_gen_alloc_site\+0x4 \(an_gen\+0x[0-9a-f]+\) <- 0x100 <- 0x200$'
PLAIN='^an_gen\+0x[0-9a-f]+ <- 0x100 <- 0x200$'
PLAINF='^modfifo\+0x[0-9a-f]+ <- 0x100 <- 0x200$'

# the recorded file exists and carries the recorded build-id: named from its symbol table
gen match --thrash
check "build-id matches: named from the file at the recorded path" grep -Eq "$SITE" <(rep match "$T/match")
check "build-id matches: no warning" bash -c "! grep -q build-id '$T/match.err'"

# SYMBOL records: named from the trace, the recorded file need not exist anywhere
gen trace --thrash --sym-records --module-path /nonexistent/build/an_gen
check "SYMBOL records: named from the trace alone" grep -Eq "$SITE" <(rep trace "$T/trace")

# no BUILDID: the file at the recorded path cannot be verified, so it is never opened
gen nobid --thrash --no-buildid
check "no build-id: module+offset form, the recorded file not used" grep -Eq "$PLAIN" <(rep nobid "$T/nobid")
gen nobid_fifo --thrash --no-buildid --module-path "$T/modfifo"
mkfifo "$T/modfifo"
check "no build-id, module path names a FIFO: report does not open it" grep -Eq "$PLAINF" <(rep nobid_fifo "$T/nobid_fifo")

# a build-id that differs: the file is not used, and that is said once, on one line
gen bad --thrash --bad-buildid
check "build-id differs: not named from that file" grep -Eq "$PLAIN" <(rep bad "$T/bad")
check_eq "build-id differs: said once, on one line" "1" "$(grep -c 'build-id differs from the one in the trace, not used for symbols' "$T/bad.err")"
check "build-id differs: the warning names the file" grep -q "^nvlprof: warning: $GEN: build-id differs" "$T/bad.err"

# a module path naming a FIFO with a build-id: only regular files are opened, never blocking
gen fifo --thrash --module-path "$T/modfifo"
check "build-id, module path names a FIFO: report completes, module+offset" grep -Eq "$PLAINF" <(rep fifo "$T/fifo")
check "build-id, module path names a FIFO: exit 0" grep -q "rc=0" "$T/fifo.err"

# --symbols DIR (like perf --symfs): DIR/basename, DIR + recorded path, DIR/.build-id/xx/rest.debug
gen moved --thrash --module-path /nonexistent/build/an_gen
check "moved binary: module+offset without --symbols" grep -Eq "$PLAIN" <(rep moved0 "$T/moved")
mkdir -p "$T/sd1" "$T/sd2/nonexistent/build" "$T/sd4"
cp "$GEN" "$T/sd1/an_gen"
cp "$GEN" "$T/sd2/nonexistent/build/an_gen"
bid=$(readelf -n "$GEN" | sed -n 's/^ *Build ID: //p')
mkdir -p "$T/sd3/.build-id/${bid:0:2}"
cp "$GEN" "$T/sd3/.build-id/${bid:0:2}/${bid:2}.debug"
check "--symbols DIR: DIR/basename" grep -Eq "$SITE" <(rep sd1 "$T/moved" --symbols "$T/sd1")
check "--symbols DIR: DIR + recorded path" grep -Eq "$SITE" <(rep sd2 "$T/moved" --symbols "$T/sd2")
check "--symbols=DIR: DIR/.build-id/xx/rest.debug" grep -Eq "$SITE" <(rep sd3 "$T/moved" "--symbols=$T/sd3")
cp "$CLI" "$T/sd4/an_gen" # another ELF file under the module's name
check "--symbols DIR: a file of another build-id is not used" grep -Eq "$PLAIN" <(rep sd4 "$T/moved" --symbols "$T/sd4")
check_eq "--symbols DIR: the other build-id is said once" "1" "$(grep -c "^nvlprof: warning: $T/sd4/an_gen: build-id differs" "$T/sd4.err")"
f=$(ls "$T/trace"/*.nvlp | head -1)
check "dump: BUILDID as the hex build-id of the file" grep -q "^buildid buildid base=0x[0-9a-f]* build_id=$bid$" <("$CLI" dump "$f")
check "dump: SYMBOL named by its blob" grep -Eq "^symbol an_gen_alloc_site base=0x[0-9a-f]+ offset=0x[0-9a-f]+ size=16$" <("$CLI" dump "$f")
"$CLI" diff --symbols "$T/sd1" "$T/moved" "$T/moved" >/dev/null 2>&1
check_eq "diff takes --symbols DIR" "0" "$?"
# issue 28: a stack taken inside the CUDA call starts in the shim, CUPTI and the driver: those
# frames are left out, the job's own frame comes first (the stack itself is kept whole)
gen tools --thrash --tool-frames
check "tool frames on top (libnvlprof, libcupti, libcuda): the job's frame first" grep -Eq "$SITE" <(rep tools "$T/tools")
check "tool frames: the recorded stack keeps them" grep -Eq '^stack id=7 frames=0x7e000007d163,0x7e001007d163,0x7e002007d163,' <("$CLI" dump "$T/tools")
[ "$FAILED" -eq 0 ]

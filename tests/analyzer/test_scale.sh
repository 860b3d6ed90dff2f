#!/usr/bin/env bash
# test_scale.sh: jobs past the old fixed sizes: 1,024 ranks with dead ranks (hangs keep every
# missing and waiting rank, titles name them as ranges), NCCL-only jobs whose host clocks are off
# (corrected from blocking calls' exits, and the report says how, or that it could not), more than
# 65,535 communicators (32-bit indices).
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
[ -x "$CLI" ] && [ -x "$GEN" ] || { fail "missing $CLI or $GEN (build first)"; exit 1; }
gen() { local n=$1; shift; "$GEN" -o "$T/$n" "$@" >/dev/null 2>&1 || fail "an_gen $n $*"; }
rep() { "$CLI" report "$T/$1" >"$T/$1.txt" 2>"$T/$1.err"; "$CLI" report --json "$T/$1" >"$T/$1.json" 2>/dev/null; }
count() { grep -c "^\[[a-z]*\] $2:" "$T/$1.txt"; }
ev() { python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
f = [x for x in d['findings'] if x['id'] == sys.argv[2]]
print(f[0]['evidence'].get(sys.argv[3], 'MISSING') if f else 'NO_FINDING')" "$T/$1.json" "$2" "$3" 2>/dev/null || echo UNPARSABLE; }

# 1,024 ranks (8 per host, per-host communicators too), rank 700 killed before the last collective:
# the 1,023 others wait in it; none of them is a rank_ended of its own (a hang kept 16 waiting ranks
# and told the 1,007 others as ended), the title names the one dead rank
gen dead1 --ranks 1024 --ranks-per-host 8 --comms host --steps 8 --kill-rank 700
rep dead1
check_eq "1,024 ranks, one dead: no rank_ended (the waiting ranks are the hang's)" 0 "$(count dead1 rank_ended)"
check_eq "1,024 ranks, one dead: one hang_suspect" 1 "$(count dead1 hang_suspect)"
check "1,024 ranks, one dead: the title names rank 700" \
	grep -Eq '^\[critical\] hang_suspect: ncclAllReduce #[0-9]+ on comm [0-9a-f]{16} never entered by rank 700; ' "$T/dead1.txt"
check_eq "1,024 ranks, one dead: every waiting rank listed, as ranges" "0-699,701-1023" "$(ev dead1 hang_suspect waiting_ranks)"

# 200 dead ranks (a rack): all named, as a range with a count
gen dead200 --ranks 1024 --ranks-per-host 8 --steps 8 --kill-rank 700 --kill-count 200
rep dead200
check "200 dead ranks: the title says ranks 700-899 (200)" \
	grep -q 'never entered by ranks 700-899 (200); others waited' "$T/dead200.txt"
check_eq "200 dead ranks: missing_ranks has them all" "700-899" "$(ev dead200 hang_suspect missing_ranks)"
check_eq "200 dead ranks: no rank_ended of their own" 0 "$(count dead200 rank_ended)"
check "200 dead ranks: the first dead rank's ending told in the finding" \
	grep -q '^    rank_700_ended: ended without an END record' "$T/dead200.txt"

# a short list stays as it was: 3 waiting ranks, commas
gen dead4 --ranks 4 --kill-rank 1
rep dead4
check_eq "4 ranks, one dead: waiting ranks as before" "0,2,3" "$(ev dead4 hang_suspect waiting_ranks)"

# NCCL records only, 64 ranks on 8 hosts whose clocks are off by up to 1.6 ms, rank 37 5 ms late,
# calls that return when the collective is done: the hosts are corrected from the calls' exits and
# the straggler is found (it was not: its lead over the next-latest rank looked like 2.4 ms)
gen nccl64 --ranks 64 --ranks-per-host 8 --steps 30 --late-rank 37 --late-ms 5 --clock-spread-ms 3 --no-gpu --blocking
rep nccl64
check "NCCL only, 64 ranks, blocking calls: rank 37 is the straggler" \
	grep -q '^\[warning\] straggler: Rank 37 arrives last' "$T/nccl64.txt"
check "NCCL only, blocking calls: the hosts' clocks corrected from the calls' exits, and said so" \
	grep -q 'hosts aligned by realtime anchors, 7 of 7 by the exits of blocking calls (max 1.584 ms)' "$T/nccl64.txt"
check_eq "NCCL only, blocking calls: largest correction (JSON)" 1.584 \
	"$(python3 -c "import json,sys; print('%.3f' % json.load(open(sys.argv[1]))['job']['clock_correction_ms'])" "$T/nccl64.json" 2>&1)"
# 128 ranks, 16 hosts: still found
gen nccl128 --ranks 128 --ranks-per-host 8 --steps 20 --late-rank 100 --late-ms 5 --clock-spread-ms 3 --no-gpu --blocking
rep nccl128
check "NCCL only, 128 ranks, blocking calls: rank 100 is the straggler" \
	grep -q '^\[warning\] straggler: Rank 100 arrives last' "$T/nccl128.txt"
# calls that return at once and no GPU time: nothing to correct by, and the report says so (it
# said "corrected by collective completions (max 0.000 ms)")
gen ncclasync --ranks 16 --ranks-per-host 8 --steps 10 --clock-spread-ms 3 --no-gpu
rep ncclasync
check "NCCL only, calls that return at once: the report says the host was not corrected" \
	grep -q 'hosts aligned by realtime anchors; 1 of 1 not corrected' "$T/ncclasync.txt"
check_eq "NCCL only, calls that return at once: no 'corrected by collective completions'" 0 \
	"$(grep -c 'corrected by collective completions' "$T/ncclasync.txt")"
# with GPU records: the line as it always was
gen gpu16 --ranks 16 --ranks-per-host 8 --steps 10 --clock-spread-ms 3 --late-rank 9 --late-ms 5
rep gpu16
check "GPU records: corrected by collective completions" \
	grep -q '^  hosts aligned by realtime anchors, corrected by collective completions (max 0.621 ms)$' "$T/gpu16.txt"

# 70,000 communicators (one per call): every one kept and matched (16-bit indices kept 65,535 and
# dropped the calls of the others)
gen comms70k --ranks 2 --small-allreduce 70000 --comm-per-call
rep comms70k
check_eq "70,000 communicators: every collective matched" 70000 \
	"$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['job']['matched_collectives'])" "$T/comms70k.json" 2>&1)"
check_eq "70,000 communicators: no communicator skipped" 0 "$(grep -c 'more than .* communicators' "$T/comms70k.err")"
exit $FAILED

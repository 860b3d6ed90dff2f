#!/usr/bin/env bash
# test_match.sh: kernel-to-call matching when a process's records interleave as in a real torch DDP
# trace (an_gen --interleave): the main thread's Broadcast API records come late (after later
# AllReduces of the autograd thread and after the kernels), and the first AllReduce kernel of each
# step is delivered after the Broadcast kernel that followed it on the stream. Every call must get
# its kernel's GPU time and no kernel may be left without a call. The real DDP traces must not
# report kernel_matching either (each rank there has exactly one kernel per collective call).
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
if [ ! -x "$GEN" ] || [ ! -x "$CLI" ]; then
	fail "analyzer test programs built ($GEN, $CLI; run make BUILD=$BUILD $GEN)"
	exit 1
fi

# match NAME [an_gen args...]: per rank and collective, the report's GPU time must equal the sum of
# that collective's NCCL kernel durations in the trace, with as many calls as kernels
match() {
	local name=$1; shift
	"$GEN" -o "$T/$name" "$@" || fail "an_gen $name $*"
	"$CLI" report --json "$T/$name" >"$T/$name.json" 2>"$T/$name.err"
	check_eq "$name: report exit status" "0" "$?"
	"$CLI" dump --json "$T/$name" >"$T/$name.dump" 2>/dev/null
	check_eq "$name: dump exit status" "0" "$?"
	local out
	out=$(python3 - "$T/$name.json" "$T/$name.dump" <<'PYEOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
gaps = [f for f in d['findings'] if f['id'] == 'collection_gaps']
print('gaps', 'none' if not gaps else json.dumps(gaps[0]['evidence']))
pid_rank = {r['pid']: r['rank'] for r in d['ranks']}
fn_of = {'AllReduce': 'ncclAllReduce', 'Broadcast': 'ncclBroadcast'}
kern, calls = {}, {}
for line in open(sys.argv[2]):
    x = json.loads(line)
    key = None
    if x.get('kind') == 'kernel' and 'ncclDevKernel_' in x.get('name', ''):
        c = re.search(r'ncclDevKernel_([A-Za-z]+)', x['name']).group(1)
        key = (pid_rank[x['pid']], fn_of[c])
        kern[key] = kern.get(key, 0) + x['dur']
    elif x.get('kind') == 'nccl' and x.get('name') in fn_of.values():
        key = (pid_rank[x['pid']], x['name'])
        calls[key] = calls.get(key, 0) + 1
bad = []
got = {(r['rank'], r['collective']): r for r in d['collectives_by_rank']}
for key, ns in sorted(kern.items()):
    r = got.get(key)
    if not r or r['time_source'] != 'gpu' or abs(r['time_ms'] - ns / 1e6) > 1e-4 or r['calls'] != calls.get(key):
        bad.append('%s: report %s, kernels %.4f ms / %s calls' % (key, r and (r['time_ms'], r['calls']), ns / 1e6, calls.get(key)))
print('time', 'ok' if not bad and len(kern) == len(got) else 'BAD ' + '; '.join(bad))
PYEOF
)
	check_eq "$name: no collection gap (no kernel without a call, no call skipped)" "gaps none" \
		"$(echo "$out" | sed -n 's/^gaps/gaps/p')"
	check_eq "$name: every call has its kernel's GPU time" "time ok" "$(echo "$out" | sed -n '/^time/p')"
}
match interleave --interleave
match interleave4 --interleave --ranks 4 --steps 9
match interleave_s0 --interleave --cupti-stream0 --steps 7
match plain

# the same generator without --interleave writes records in order: byte-identical when asked twice
"$GEN" -o "$T/again" || fail "an_gen again"
check "an_gen deterministic" cmp "$T/plain/node0-4000.nvlp" "$T/again/node0-4000.nvlp"

for d in "$ROOT"/examples/traces/ddp_*/; do
	[ -f "$d/expect" ] || continue
	name=$(basename "$d")
	"$CLI" report "$d" >"$T/real-$name.txt" 2>/dev/null
	check "real $name: every NCCL kernel matched to a call (no kernel_matching gap)" \
		bash -c "! grep -q kernel_matching '$T/real-$name.txt'"
done
[ "$FAILED" -eq 0 ]

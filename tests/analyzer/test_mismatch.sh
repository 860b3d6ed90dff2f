#!/usr/bin/env bash
# test_mismatch.sh: collective_mismatch on an_gen jobs whose collective at one seq differs on one rank (count, dtype, op, function, root): each fires with its evidence keys exactly, identical calls never fire (a rooted one included), a hang that follows names it as its cause, the shipped healthy traces stay silent.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
for f in "$GEN" "$CLI"; do
	[ -x "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
pyq() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
# keys and values of the first collective_mismatch as "k=v k=v ..."
ev() { pyq "$1" "' '.join('%s=%s' % (k, (int(v) if isinstance(v, float) and v == int(v) else v)) for f in d['findings'] if f['id'] == 'collective_mismatch' for k, v in list(f['evidence'].items()))"; }
count_of() { pyq "$1" "sum(f['id'] == '$2' for f in d['findings'])"; }

for k in count dtype op fn root same; do
	"$GEN" -o "$T/$k" --mismatch "$k:37" --python >/dev/null || fail "an_gen $k"
	"$CLI" report --json "$T/$k" >"$T/$k.json" 2>/dev/null
done
PY='python_rank0=calls it at train.py:71 in log_metrics <- train.py:91 in main <- train.py:95 in <module> python_rank1=calls it at train.py:71 in log_metrics <- train.py:91 in main <- train.py:95 in <module>'
C='comm=0005eed0c0117ec7 seq=37 step=8'
check_eq "count: both sides' values, ranks and Python lines" \
	"$C differs=count side1_ranks=0 side1_count=33554432 side1_dtype=bf16 side1_op=sum side2_ranks=1 side2_count=67108864 side2_dtype=bf16 side2_op=sum $PY" "$(ev "$T/count.json")"
check_eq "dtype (same bytes): count and dtype differ" \
	"$C differs=count,dtype side1_ranks=0 side1_count=33554432 side1_dtype=bf16 side1_op=sum side2_ranks=1 side2_count=16777216 side2_dtype=f32 side2_op=sum $PY" "$(ev "$T/dtype.json")"
check_eq "op" \
	"$C differs=op side1_ranks=0 side1_count=33554432 side1_dtype=bf16 side1_op=sum side2_ranks=1 side2_count=33554432 side2_dtype=bf16 side2_op=max $PY" "$(ev "$T/op.json")"
check_eq "function: the op AllGather lacks is no difference of its own" \
	"$C differs=function side1_ranks=0 side1_collective=ncclAllReduce side1_count=33554432 side1_dtype=bf16 side1_op=sum side2_ranks=1 side2_collective=ncclAllGather side2_count=33554432 side2_dtype=bf16 side2_op=none $PY" "$(ev "$T/fn.json")"
check_eq "root of a broadcast" \
	"$C differs=root side1_ranks=0 side1_count=33554432 side1_dtype=bf16 side1_root=0 side2_ranks=1 side2_count=33554432 side2_dtype=bf16 side2_root=1 $PY" "$(ev "$T/root.json")"
check_eq "the same broadcast on every rank: no finding" "0" "$(count_of "$T/same.json" collective_mismatch)"
check_eq "critical, titled with the values" \
	"critical ncclAllReduce #37 on comm 0005eed0c0117ec7 called differently: count 33554432 on rank 0, 67108864 on rank 1" \
	"$(pyq "$T/count.json" "' '.join(f['severity'] + ' ' + f['title'] for f in d['findings'] if f['id'] == 'collective_mismatch')")"

# four ranks, rank 2 differs: one side of three ranks
"$GEN" -o "$T/four" --ranks 4 --mismatch count:12:2 >/dev/null || fail "an_gen four"
"$CLI" report --json "$T/four" >"$T/four.json" 2>/dev/null
check_eq "4 ranks: the three alike form one side" "side1_ranks=0,1,3 side2_ranks=2" \
	"$(ev "$T/four.json" | grep -o 'side[12]_ranks=[0-9,]*' | tr '\n' ' ' | sed 's/ $//')"

# a hang follows on that communicator: the hang names the mismatch as its cause
"$GEN" -o "$T/hang" --steps 10 --kill-rank 1 --mismatch count:37 --python >/dev/null || fail "an_gen hang"
"$CLI" report --json "$T/hang" >"$T/hang.json" 2>/dev/null
"$CLI" report "$T/hang" >"$T/hang.txt" 2>/dev/null
check_eq "hang: the mismatch says where the hang followed" "49" \
	"$(pyq "$T/hang.json" "[int(f['evidence']['then_hung_at_seq']) for f in d['findings'] if f['id'] == 'collective_mismatch'][0]")"
check_eq "hang: hang_suspect's cause" "collective_mismatch at #37: count 33554432 on rank 0, 67108864 on rank 1" \
	"$(pyq "$T/hang.json" "[f['evidence']['cause'] for f in d['findings'] if f['id'] == 'hang_suspect'][0]")"
check_eq "hang: the mismatch is read first (cause before consequence)" "collective_mismatch hang_suspect" \
	"$(pyq "$T/hang.json" "' '.join(f['id'] for f in d['findings'] if f['severity'] == 'critical')")"
check "text: the mismatch heads the findings" grep -q '^\[critical\] collective_mismatch: ncclAllReduce #37' "$T/hang.txt"

# identical calls never fire: plain jobs and the shipped traces
"$GEN" -o "$T/plain" --ranks 4 >/dev/null || fail "an_gen plain"
"$GEN" -o "$T/kill" --ranks 4 --kill-rank 1 >/dev/null || fail "an_gen kill"
"$GEN" -o "$T/fsdp" --ranks 8 --fsdp --nvswitch >/dev/null || fail "an_gen fsdp"
"$GEN" -o "$T/bcast" --ranks 2 --interleave >/dev/null || fail "an_gen interleave"
silent=""
for d in "$T/plain" "$T/kill" "$T/fsdp" "$T/bcast" "$ROOT"/examples/traces/*/ "$ROOT"/tests/analyzer/traces/share_*/; do
	[ -d "$d" ] || continue
	"$CLI" report --json "$d" >"$T/s.json" 2>/dev/null
	[ "$(count_of "$T/s.json" collective_mismatch)" = 0 ] || silent="$silent $(basename "$d")"
done
check_eq "healthy, killed and shipped traces: no collective_mismatch" "" "$silent"
exit $((FAILED > 0))

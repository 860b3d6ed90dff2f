#!/usr/bin/env bash
# test_story.sh: the story a failed job's report opens with (text, report --json's story and timeline, HTML above the findings): its wording on generated failing jobs (a killed rank, a mismatch then a hang) and the share_killed / share_failed fixtures; healthy jobs print none and keep their output.
. "$(dirname "$0")/../lib.sh"
GEN="$PROGS/an_gen"
TR="$ROOT/tests/analyzer/traces"
for f in "$GEN" "$CLI"; do
	[ -x "$f" ] || { fail "missing $f (build first)"; exit 1; }
done
pyq() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
# the paragraph: the report's lines up to its first blank line, joined
story() { "$CLI" report "$1" 2>/dev/null | sed '/^$/q' | tr '\n' ' ' | sed 's/ *$//'; }

check_eq "share_killed: who stopped, who waited, how each ended" \
	"Hung at step 21: rank 1 made its last call at 8.1 s, ncclAllReduce #83, and never entered #84 (last NCCL call at ddp_train.py:134 in worker); rank 1 exited with status 9 (_exit) 162.1 ms later; rank 0 entered ncclAllReduce #84 1.1 ms later and waited in it until it ended by signal 15 (Terminated) 113.4 ms later (its call #85 failed: ncclRemoteError)." \
	"$(story "$TR/share_killed")"
check_eq "share_failed: the waiting rank's failed call" \
	"Hung at step 31: rank 1 made its last call at 937.1 ms, ncclAllReduce #30, and never entered #31; rank 1 exited with status 9 (_exit) 5.4 ms later; rank 0 entered ncclAllReduce #31 0.5 ms later and waited in it (its call #32 failed: ncclRemoteError)." \
	"$(story "$TR/share_failed")"

"$GEN" -o "$T/kill" --ranks 4 --kill-rank 1 --python >/dev/null || fail "an_gen kill"
check_eq "an_gen kill: the waiting ranks told once, with their ends" \
	"Hung at step 40: rank 1 made its last call at 402.4 ms, ncclAllReduce #198, and never entered #199 (last NCCL call at train.py:57 in train_step <- train.py:90 in main <- train.py:95 in <module>); rank 1 ended without an END record (killed by SIGKILL or the OOM killer, or a crash the shim could not catch) 0.0 ms later; ranks 0,2,3 entered ncclAllReduce #199 0.0 ms later and waited in it until they ended by a signal (SIGTERM or SIGINT) 2.0 s later." \
	"$(story "$T/kill")"

"$GEN" -o "$T/mm" --steps 10 --kill-rank 1 --mismatch count:37 --python >/dev/null || fail "an_gen mismatch"
check "mismatch then hang: the mismatch comes first, at its step" \
	bash -c "'$CLI' report '$T/mm' 2>/dev/null | head -1 | grep -q '^Hung at step 10: ncclAllReduce #37 was called differently at 93.2 ms (count 33554432 on rank 0,'"
"$CLI" report --json "$T/mm" >"$T/mm.json" 2>/dev/null
check_eq "timeline: events in time order with their keys" \
	"mismatch:1 last_call:1 ended:1 entered:0 ended:0" \
	"$(pyq "$T/mm.json" "' '.join('%s:%d' % (e['what'], e['rank']) for e in d['timeline'])")"
check_eq "timeline: each event's keys exactly" "detail rank time_ms what" \
	"$(pyq "$T/mm.json" "' '.join(sorted(set(k for e in d['timeline'] for k in e)))")"
check_eq "timeline: job-relative times, sorted" "True" \
	"$(pyq "$T/mm.json" "all(0 <= a['time_ms'] <= b['time_ms'] for a, b in zip(d['timeline'], d['timeline'][1:]))")"
check_eq "JSON story: the text's paragraph" "$(story "$T/mm")" "$(pyq "$T/mm.json" "d['story']")"
"$CLI" report --html "$T/mm.html" "$T/mm" >/dev/null 2>&1
check "HTML: the paragraph above the findings" \
	bash -c "grep -o '<p class=\"story\"[^>]*>Hung at step 10: ncclAllReduce #37' '$T/mm.html' >/dev/null &&
		[ \$(grep -n 'class=\"story\"' '$T/mm.html' | cut -d: -f1) -le \$(grep -n 'id=\"r-findings\"' '$T/mm.html' | cut -d: -f1) ]"

# a mismatch alone (no hang, every rank ended well)
"$GEN" -o "$T/only" --mismatch op:12 >/dev/null || fail "an_gen op"
check_eq "a mismatch alone" "Collective mismatch at step 3: ncclAllReduce #12 was called differently at 45.2 ms (op sum on rank 0, max on rank 1)." "$(story "$T/only")"

# healthy jobs: no story, no timeline, no story paragraph in HTML
quiet=""
"$GEN" -o "$T/ok" --ranks 4 >/dev/null || fail "an_gen ok"
for d in "$T/ok" "$ROOT"/examples/traces/ddp_healthy "$ROOT"/examples/traces/ddp_straggler "$TR"/share_ddp "$TR"/share_straggler; do
	"$CLI" report "$d" 2>/dev/null | head -1 | grep -q '^nvlprof report:' || quiet="$quiet $(basename "$d")"
	"$CLI" report --json "$d" 2>/dev/null | grep -q '"timeline"' && quiet="$quiet $(basename "$d")(json)"
	"$CLI" report --html "$T/h.html" "$d" >/dev/null 2>&1
	grep -q 'class="story"' "$T/h.html" && quiet="$quiet $(basename "$d")(html)"
done
check_eq "healthy jobs: no story anywhere" "" "$quiet"
exit $((FAILED > 0))

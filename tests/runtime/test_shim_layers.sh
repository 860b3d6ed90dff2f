#!/usr/bin/env bash
# test_shim_layers.sh: the shim's calls between files make no loop (tests/runtime/shim_layers.py reads
# the objects with nm); a module reaches the core, the core reaches a module only through its hooks.
# No shim file is longer than 800 lines, no function longer than 60 (tests/analyzer/layers.py's limits).
# The shim's mutable file-scope variables (tests/runtime/shim_globals.py: .data/.bss objects, a
# state struct counting one) do not grow past GLOBALS_MAX: new state goes into a struct named for
# what it holds.
GLOBALS_MAX=101
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
if [ ! -d "$BUILD/lib/preload" ]; then
	echo "FAIL: shim layers: no $BUILD/lib/preload (build first)"
	exit 1
fi
out=$(python3 tests/runtime/shim_layers.py "$BUILD/lib" 2>&1)
echo "$out" | tail -1
summary=$(echo "$out" | tail -1)
if echo "$out" | grep -q '^loop between files: '; then
	echo "FAIL: call loops between the shim's files:"
	echo "$out" | grep -E '^(loop between files: |  )'
else
	echo "PASS: no call loop between the shim's files ($summary)"
fi
long=$(echo "$out" | grep -E ': [0-9]+ lines \(at most [0-9]+\)$')
[ -z "$long" ] && echo "PASS: shim layers: no file longer than 800 lines" || { echo "FAIL: shim layers: files too long:"; echo "$long"; }
fn=$(echo "$out" | grep -E ': function [^ ]+ is [0-9]+ lines \(at most [0-9]+\)$')
[ -z "$fn" ] && echo "PASS: shim layers: no function longer than 60 lines" || { echo "FAIL: shim layers: functions too long:"; echo "$fn"; }
echo "$summary" | grep -q '^shim layers: [0-9]* files, [0-9]* calls between files' && echo "PASS: shim layers: the checker read the objects" || echo "FAIL: shim layers: no summary line from shim_layers.py"
gl=$(python3 tests/runtime/shim_globals.py "$BUILD/lib" --max "$GLOBALS_MAX" 2>&1)
grc=$?
gsum=$(echo "$gl" | grep '^shim globals: [0-9]* mutable in' | tail -1)
if [ -z "$gsum" ]; then
	echo "FAIL: shim globals: no summary line from shim_globals.py"
elif [ $grc -ne 0 ]; then
	echo "FAIL: shim globals: more mutable file-scope variables than $GLOBALS_MAX ($gsum); group new state into a struct"
else
	echo "PASS: shim globals: at most $GLOBALS_MAX mutable file-scope variables ($gsum)"
fi

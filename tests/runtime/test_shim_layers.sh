#!/usr/bin/env bash
# test_shim_layers.sh: the shim's calls between files make no loop (tests/runtime/shim_layers.py reads
# the objects with nm); a module reaches the core, the core reaches a module only through its hooks.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
if [ ! -d "$BUILD/lib/preload" ]; then
	echo "FAIL: shim layers: no $BUILD/lib/preload (build first)"
	exit 1
fi
out=$(python3 tests/runtime/shim_layers.py "$BUILD/lib" 2>&1)
rc=$?
echo "$out"
if [ "$rc" -eq 0 ]; then
	echo "PASS: no call loop between the shim's files ($(echo "$out" | tail -1))"
else
	echo "FAIL: call loops between the shim's files (listed above)"
fi

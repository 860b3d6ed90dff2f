# lib.sh: helpers for shell tests. Source it; each check prints "PASS: name" or "FAIL: name".
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B="$ROOT/$BUILD"
LIB="$B/libnvlprof.so"
CLI="$B/nvlprof"
FAKES="$B/fakes"
PROGS="$B/tests/progs"
# Sanitizer runtimes must come first in LD_PRELOAD when the shim itself is instrumented.
SANLIB=""
case "${SAN:-}" in
address) SANLIB=$(${CC:-gcc} -print-file-name=libasan.so) ;;
undefined) SANLIB=$(${CC:-gcc} -print-file-name=libubsan.so) ;;
thread) SANLIB=$(${CC:-gcc} -print-file-name=libtsan.so) ;;
esac
PRELOAD="${SANLIB:+$SANLIB:}$LIB"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
T=$(mktemp -d /tmp/nvlp-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
FAILED=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
# check NAME CMD...: passes when CMD exits 0
check() { local n=$1; shift; if "$@" >"$T/.out" 2>&1; then pass "$n"; else fail "$n"; sed 's/^/    /' "$T/.out" | head -20; fi; }
# check_eq NAME EXPECTED ACTUAL
check_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi; }

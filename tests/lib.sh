# lib.sh: helpers for shell tests. Source it; each check prints "PASS: name" or "FAIL: name", a check
# that cannot run here prints "SKIP: name: why" (tests/run.sh counts skips apart).
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
skip() { echo "SKIP: $*"; }
# Goldens are rewritten only by `make regen-goldens`, which runs a suite with --regen-goldens as its
# first argument; no environment variable does it (a shell may have one set from another project).
REGEN=0
[ "${1:-}" = --regen-goldens ] && REGEN=1
# golden_cmp NAME GOLDEN PRODUCED: the file this run PRODUCED equals the committed GOLDEN
golden_cmp() {
	if [ "$REGEN" = 1 ]; then cp "$3" "$2" && echo "REGEN: $2"; return; fi
	if [ ! -f "$3" ]; then fail "$1: nothing produced"; return; fi
	if diff -u "$2" "$3" >"$T/.gd" 2>&1; then pass "$1"; else fail "$1 differs"; head -30 "$T/.gd" | sed 's/^/    /'; fi
}
# check NAME CMD...: passes when CMD exits 0
check() { local n=$1; shift; if "$@" >"$T/.out" 2>&1; then pass "$n"; else fail "$n"; sed 's/^/    /' "$T/.out" | head -20; fi; }
# check_eq NAME EXPECTED ACTUAL
check_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi; }
# copy_traces DIR TOOL [ARGS...]: each trace of DIR through `TOOL IN OUT ARGS...` into $T/<DIR's
# name>; prints how many were copied
copy_traces() {
	local d=$1 tool=$2 n=0 f
	shift 2
	mkdir -p "$T/$(basename "$d")"
	for f in "$d"/*.nvlp; do
		"$tool" "$f" "$T/$(basename "$d")/$(basename "$f")" "$@" && n=$((n + 1))
	done
	echo "$n"
}

# pythons_311: PYS = python3 and 3.11-3.13 beside it where present (pyenv on the build machine),
# one per version. With a sanitizer's runtime preloaded, interpreters that crash with it alone (3.11.7
# under TSan, at a thread's exit, without the shim) are skipped: not ours to test.
pythons_311() {
	PYS=()
	local p v seen=""
	for p in python3 python3.11 python3.12 python3.13 /root/.pyenv/versions/3.1[123].*/bin/python3; do
		command -v "$p" >/dev/null 2>&1 || continue
		v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2]) if sys.version_info >= (3, 11) else None' 2>/dev/null)
		[ -n "$v" ] && [ "$v" != None ] || continue
		case " $seen " in *" $v "*) continue ;; esac
		if [ -n "$SANLIB" ] && ! LD_PRELOAD="$SANLIB" "$p" -c 'import threading; t = threading.Thread(target=int); t.start(); t.join()' >/dev/null 2>&1; then
			echo "SKIP: $p $v crashes with $SANLIB preloaded, without the shim"
			continue
		fi
		seen="$seen $v"
		PYS+=("$p")
	done
}

#!/usr/bin/env bash
# test_build.sh: the Makefile finds CUDA/CUPTI/NCCL headers in each standard layout and names what
# is missing; make install puts bin/nvlprof and lib/libnvlprof.so where nvlprof run finds them.
. "$(dirname "$0")/../lib.sh"
cd "$ROOT"
# a make of its own: under `make -jN test` the outer make's MAKEFLAGS name a jobserver whose pipe
# this shell does not hold, and make would warn about it in the output compared here
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -s "$@" 2>&1; }
# toolkit headers only (the CUDA runtime), CUPTI as a runfile puts it, NCCL elsewhere
c="$T/cuda"
mkdir -p "$c/include" "$c/extras/CUPTI/include" "$T/nccl/include" "$T/usr/include"
touch "$c/include/cuda_runtime_api.h" "$c/extras/CUPTI/include/cupti.h" "$T/nccl/include/nccl.h"
out=$(mk deps-check CUDA_HOME="$c" NCCL_HOME="$T/nccl")
check_eq "headers: CUPTI in extras/CUPTI/include, NCCL in NCCL_HOME" \
	"nvlprof: build dependencies present; headers: CUDA $c/include CUPTI $c/extras/CUPTI/include NCCL $T/nccl/include" "$out"
# pip's nvidia-nccl wheel in the user site-packages
site=$(PYTHONUSERBASE="$T/pyuser" python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null)
if [ -n "$site" ]; then
	mkdir -p "$site/nvidia/nccl/include"
	touch "$site/nvidia/nccl/include/nccl.h"
	out=$(PYTHONUSERBASE="$T/pyuser" mk deps-check CUDA_HOME="$c")
	case "$out" in
	*"NCCL /usr/include") skip "headers: pip NCCL: libnccl-dev's /usr/include/nccl.h comes first here" ;;
	*) check_eq "headers: NCCL from pip's nvidia/nccl/include" \
		"nvlprof: build dependencies present; headers: CUDA $c/include CUPTI $c/extras/CUPTI/include NCCL $site/nvidia/nccl/include" "$out" ;;
	esac
fi
# the compile line carries each directory once, /usr/include never
out=$(mk -n "$T/b/cli/analyzer/util/util.o" CUDA_HOME="$c" NCCL_HOME="$T/nccl" BUILD="$T/b" | grep -- " -c ")
check_eq "compile flags: each header directory once" \
	"-I$c/include -I$c/extras/CUPTI/include -I$T/nccl/include" "$(echo "$out" | grep -o -- "-I$T[^ ]*" | tr '\n' ' ' | sed 's/ $//')"
# nothing found: one message naming each missing header; the analyzer alone still builds
out=$(mk -n all CUDA_HOME="$T/none" BUILD="$T/b")
case "$out" in
*"needs headers not found: cuda_runtime_api.h (in $T/none/include) cupti.h"*"nccl.h"*"make analyzer"*) pass "no toolkit: make names the missing headers" ;;
*) fail "no toolkit: make names the missing headers: got '$out'" ;;
esac
check "no toolkit: make analyzer needs no CUDA header" mk -n analyzer CUDA_HOME="$T/none" BUILD="$T/b"
check "no toolkit: make demo needs no CUDA header" mk -n demo CUDA_HOME="$T/none" BUILD="$T/b"
# make install PREFIX=: the installed CLI finds the installed library (bin/../lib)
mk install PREFIX="$T/prefix" BUILD="$BUILD" SAN="${SAN:-}" >/dev/null
check "install: bin/nvlprof and lib/libnvlprof.so" test -x "$T/prefix/bin/nvlprof" -a -f "$T/prefix/lib/libnvlprof.so"
SP=${SANLIB:+$SANLIB:}
out=$(LD_PRELOAD="$SANLIB" "$T/prefix/bin/nvlprof" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check_eq "install: nvlprof run preloads PREFIX/lib/libnvlprof.so" "$SP$(cd "$T/prefix/lib" && pwd -P)/libnvlprof.so" "$out"
ln -s "$T/prefix/bin/nvlprof" "$T/nvlprof-link"
out=$(LD_PRELOAD="$SANLIB" "$T/nvlprof-link" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check_eq "install: through a symlink elsewhere too" "$SP$(cd "$T/prefix/lib" && pwd -P)/libnvlprof.so" "$out"
rm "$T/prefix/lib/libnvlprof.so"
"$T/prefix/bin/nvlprof" run -- true 2>"$T/e"
check_eq "install: no library: exit 1" 1 "$?"
check "install: the error names both places looked at" grep -q "looked for $(cd "$T/prefix/bin" && pwd -P)/libnvlprof.so) nor in ../lib (looked for $(cd "$T/prefix/bin" && pwd -P)/../lib/libnvlprof.so)" "$T/e"
exit $((FAILED > 0))

#!/usr/bin/env bash
# fresh_machine.sh: proves a fresh clone builds on a machine without nvlprof's build dependencies
# (root only; not part of make test). Inside a private mount namespace it hides libzstd-dev,
# libsqlite3-dev and libunwind-dev (overlay whiteouts) and, with --no-cuda, the CUDA toolkit (an empty tmpfs over it),
# puts a stub apt-get first in PATH that brings the files back after APT_DELAY seconds, and logs
# the start of every compile: each must come after the stub's install finished.
#   tests/build/fresh_machine.sh [--no-cuda] REPO WORKDIR -- CMD...   (CMD runs in a clone of REPO;
#   REV=commit checks that out)
set -eu
nocuda=0
[ "${1:-}" = --no-cuda ] && { nocuda=1; shift; }
repo=$1 work=$2; shift 2; [ "${1:-}" = -- ] && shift
[ "$(id -u)" = 0 ] || { echo "fresh_machine.sh: needs root (unshare -m)" >&2; exit 2; }
rm -rf "$work"; mkdir -p "$work"
work=$(cd "$work" && pwd)
git clone -q "$repo" "$work/clone"
[ -z "${REV:-}" ] || git -C "$work/clone" checkout -q "$REV"
export APT_DELAY=${APT_DELAY:-3} FM="$work" NOCUDA=$nocuda
exec unshare -m --propagation private bash -s "$@" <<'INNER'
set -eu
M=/usr/lib/x86_64-linux-gnu
mkdir -p "$FM/orig/inc" "$FM/orig/lib" "$FM/ov" "$FM/bin"
mount -t tmpfs tmpfs "$FM/ov"
mount --bind /usr/include "$FM/orig/inc"
mount --bind "$M" "$FM/orig/lib"
for d in inc lib; do mkdir -p "$FM/ov/up-$d" "$FM/ov/wk-$d"; done
mount -t overlay overlay -o lowerdir="$FM/orig/inc",upperdir="$FM/ov/up-inc",workdir="$FM/ov/wk-inc" /usr/include
mount -t overlay overlay -o lowerdir="$FM/orig/lib",upperdir="$FM/ov/up-lib",workdir="$FM/ov/wk-lib" "$M"
# the -dev files of the three packages (dpkg -L), runtime libraries (libzstd.so.1, libunwind.so.8) stay
hdrs="zdict.h zstd.h zstd_errors.h sqlite3.h sqlite3ext.h x86_64-linux-gnu/libunwind-common.h x86_64-linux-gnu/libunwind-coredump.h
 x86_64-linux-gnu/libunwind-dynamic.h x86_64-linux-gnu/libunwind-ptrace.h x86_64-linux-gnu/libunwind-x86_64.h
 x86_64-linux-gnu/libunwind.h x86_64-linux-gnu/unwind.h"
libs="libzstd.a libzstd.so libsqlite3.a libsqlite3.so libunwind-coredump.a libunwind-ptrace.a libunwind-x86_64.a libunwind.a
 libunwind-coredump.so libunwind-generic.a libunwind-generic.so libunwind-ptrace.so libunwind-x86_64.so libunwind.so"
for h in $hdrs; do rm -f "/usr/include/$h"; done
for l in $libs; do rm -f "$M/$l"; done
if [ "$NOCUDA" = 1 ]; then
	mount -t tmpfs tmpfs /usr/local/cuda-13.0
fi
echo "hidden: $(ls /usr/include/zstd.h "$M/libzstd.a" /usr/include/sqlite3.h "$M/libsqlite3.a" /usr/include/x86_64-linux-gnu/libunwind.h 2>&1 | grep -c 'No such') of 5 probes missing; cuda: $(ls /usr/local/cuda/include 2>/dev/null | wc -l) headers"
cat >"$FM/bin/apt-get" <<STUB
#!/bin/sh
echo "apt-get \$* start \$(date +%s.%N)" >>"$FM/log"
case "\$1" in install) ;; *) exit 0 ;; esac
sleep $APT_DELAY
for h in $(echo $hdrs); do cp -a "$FM/orig/inc/\$h" "/usr/include/\$h"; done
for l in $(echo $libs); do cp -a "$FM/orig/lib/\$l" "$M/\$l"; done
echo "apt-get end \$(date +%s.%N)" >>"$FM/log"
STUB
# every compile and link logs when it started; cc -E (the dependency probe) is neither
for c in gcc g++; do
	cat >"$FM/bin/$c" <<WRAP
#!/bin/sh
case " \$* " in *" -E "*) ;; *) echo "compile \$(date +%s.%N) \$*" >>"$FM/log" ;; esac
exec /usr/bin/$c "\$@"
WRAP
done
chmod +x "$FM/bin/"*
export PATH="$FM/bin:$PATH"
: >"$FM/log"
cd "$FM/clone"
set +e
"$@"
rc=$?
set -e
end=$(awk '$1 == "apt-get" && $2 == "end" {print $3}' "$FM/log" | tail -1)
n=$(grep -c '^compile ' "$FM/log" || true)
early=$(awk -v e="${end:-0}" '$1 == "compile" && $2 < e' "$FM/log" | wc -l)
echo "fresh_machine: command exit $rc; apt-get install ended at ${end:-never}; $n compiles, $early started before it"
exit $rc
INNER

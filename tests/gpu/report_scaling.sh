#!/usr/bin/env bash
# report_scaling.sh: does `nvlprof report` scale with reader threads on a many-core machine? Times report -j 1/8/16 of a generated 8-rank job (8 x 1 M records), and -j 8 under glibc malloc tunables: arena1 (one arena, what the analyzer forced until run 5, where 8 threads took 3.8-4.2 s of CPU to load what 1 thread loads in 0.46-0.55: its lock was contended) and nommap (no mmap-backed chunks, so no mremap on growth).
#   bash tests/gpu/report_scaling.sh [BUILD_DIR]   (needs BUILD_DIR/nvlprof and BUILD_DIR/tests/progs/an_gen or BUILD_DIR/an_gen)
set -u
B=${1:-build}
GEN=$B/tests/progs/an_gen
[ -x "$GEN" ] || GEN=$B/an_gen
D=${TMPDIR:-/tmp}/nvlp-scaling
rm -rf "$D" && "$GEN" -o "$D" --ranks 8 --records 1000000 >/dev/null 2>&1 || { echo "report_scaling: an_gen failed" >&2; exit 1; }
echo "$(nproc) CPUs; job $(du -sh "$D" | cut -f1)"
TIMEFORMAT="%R s wall, %U s user, %S s sys"
for rep in 1 2 3; do
	for cfg in j1 j8 j16 "j8 arena1" "j8 nommap"; do
		set -- $cfg
		j=${1#j} T=
		case "${2:-}" in
		arena1) T=glibc.malloc.arena_max=1 ;;
		nommap) T=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.top_pad=536870912:glibc.malloc.trim_threshold=4294967295 ;;
		esac
		printf '%-10s ' "$cfg"
		{ time GLIBC_TUNABLES=$T "$B/nvlprof" report -j "$j" "$D" >/dev/null 2>&1; } 2>&1
	done
done
rm -rf "$D"

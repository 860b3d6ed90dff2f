#!/usr/bin/env bash
# fuzz_campaign.sh: one fuzz round on a machine without clang (the GPU machine): a `make fuzz-pack` folder's run_many.sh on every core, continuing the previous round's merged corpus when it is still there; the summary, the crashers and the failing logs go to $OUT.
#   bash tests/gpu/fuzz_campaign.sh PACK SECONDS SEED_BASE [CORPUS_DIR...]
# PACK: the fuzz-pack folder; SEED_BASE: FUZZ_SEED_BASE (each round its own, so rounds do not repeat
# each other); CORPUS_DIR: more seed folders (a merged corpus shipped with the pack).
# FUZZ_KEEP_MERGED=1 also puts the merged corpus in $OUT (tens of MB).
set -u
P=$1 T=$2 B=$3
shift 3
OUT=${OUT:-/tmp/nvlp-fuzz-out}
W=${FUZZ_WORK:-/tmp/nvlp-fuzz}
mkdir -p "$OUT" "$W"
S=(-s "$P/seeds" -s "$P/regress")
for d in "$@"; do [ -d "$d" ] && S+=(-s "$d"); done
# the last round's merged corpus, if this machine still holds it (a warm machine)
[ -d "$W/prev" ] && S+=(-s "$W/prev") && echo "continuing $(find "$W/prev" -type f | wc -l) inputs of the last round"
R=$W/round$B
echo "== $(date +%T) $(nproc) processes x ${T}s, FUZZ_SEED_BASE=$B, pack build $(cat "$P/BUILD" 2>/dev/null || echo ?)"
FUZZ_SEED_BASE=$B bash "$P/run_many.sh" -j "$(nproc)" -t "$T" -o "$R" "${S[@]}"
rc=$?
echo "== $(date +%T) run_many exit $rc"
cp "$R/summary.txt" "$OUT/summary-$B.txt" 2>/dev/null
# what a failure needs to be replayed here: the crashers and the logs that hold an error
bad=$(grep -a -l -E 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:|ERROR: libFuzzer' "$R"/logs/*.log 2>/dev/null)
tar czf "$OUT/failures-$B.tgz" -C "$R" crashes $(for f in $bad; do echo "logs/$(basename "$f")"; done) 2>/dev/null
if [ -d "$R/merged" ]; then
	rm -rf "$W/prev" && cp -r "$R/merged" "$W/prev"
	[ "${FUZZ_KEEP_MERGED:-0}" = 1 ] && tar czf "$OUT/merged-$B.tgz" -C "$R" merged
fi
exit $rc

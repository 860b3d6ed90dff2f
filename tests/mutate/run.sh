#!/usr/bin/env bash
# run.sh: mutation testing. Applies each mutation of tests/mutate/mutations.txt, one at a time, to a
# COPY of the tree (never to the tree itself), rebuilds there, runs the mutation's suites, and
# prints caught / NOT CAUGHT per mutation and a total. `make mutate` runs it; not part of `make test`
# (each mutation costs a rebuild and its suites). usage: run.sh [ID...] (default: every mutation)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
LIST=${MUTATIONS:-$ROOT/tests/mutate/mutations.txt}
JOBS=${JOBS:-2}
LIMIT=${MUTATE_TIMEOUT:-300}
C=$(mktemp -d /tmp/nvlp-mutate.XXXXXX)
trap 'rm -rf "$C"' EXIT
# the copy: tracked and untracked (not ignored) files, and the build (mtimes kept: only what a
# mutation touches is rebuilt)
(cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$C"
[ -d "$ROOT/$BUILD" ] && cp -a "$ROOT/$BUILD" "$C/"
cd "$C" || exit 2
build() { make -s -j"$JOBS" BUILD="$BUILD" test-deps >"$C/.build.log" 2>&1; }
# suites SUITE...: run each; prints the first FAIL line (or the failing status) of the first that fails
suites() {
	local s out rc
	for s in "$@"; do
		case "$s" in
		*.sh) timeout "$LIMIT" env BUILD="$BUILD" bash "$s" >"$C/.out" 2>&1 ;;
		*) timeout "$LIMIT" "$s" >"$C/.out" 2>&1 ;;
		esac
		rc=$?
		out=$(grep -m1 '^FAIL: ' "$C/.out")
		if [ -n "$out" ] || [ $rc -ne 0 ]; then
			echo "$s: ${out:-exit status $rc}"
			return 1
		fi
	done
	return 0
}
# apply FILE FROM TO: FROM (\n, \t, \\ escapes) replaced in FILE; fails unless it occurs exactly once
apply() {
	python3 - "$@" <<'PY'
import sys
def unesc(s):
    return s.encode().decode("unicode_escape")
f, a, b = sys.argv[1], unesc(sys.argv[2]), unesc(sys.argv[3])
t = open(f).read()
n = t.count(a)
if n != 1:
    sys.exit("%s: the text to replace occurs %d times" % (f, n))
open(f, "w").write(t.replace(a, b))
PY
}

if ! build; then
	echo "nvlprof mutate: the unmutated copy does not build:"; tail -20 "$C/.build.log"; exit 2
fi
ids=() files=() froms=() tos=() suitess=()
while IFS= read -r line; do
	case "$line" in '#'* | '') continue ;; esac
	IFS=$'\x1f' read -r id file from to su <<<"$(sed 's/ @@ /\x1f/g' <<<"$line")"
	if [ $# -gt 0 ]; then
		want=0; for w in "$@"; do [ "$w" = "$id" ] && want=1; done
		[ $want = 1 ] || continue
	fi
	ids+=("$id") files+=("$file") froms+=("$from") tos+=("$to") suitess+=("$su")
done <"$LIST"
# the suites pass before any mutation (else a FAIL would say nothing)
all=$(printf '%s\n' "${suitess[@]}" | tr ' ' '\n' | sort -u)
# shellcheck disable=SC2086
if ! why=$(suites $all); then echo "nvlprof mutate: a suite fails without any mutation: $why"; exit 2; fi
caught=0 missed=0 broken=0 invalid=0
for i in "${!ids[@]}"; do
	id=${ids[$i]} f=${files[$i]}
	cp -p "$f" "$C/.orig"
	if ! err=$(apply "$f" "${froms[$i]}" "${tos[$i]}" 2>&1); then
		echo "invalid     $id: $err"; invalid=$((invalid + 1)); continue
	fi
	if ! build; then
		echo "caught      $id (the mutant does not build)"; broken=$((broken + 1)); caught=$((caught + 1))
	# shellcheck disable=SC2086
	elif why=$(suites ${suitess[$i]}); then
		echo "NOT CAUGHT  $id ($f; ran ${suitess[$i]})"; missed=$((missed + 1))
	else
		echo "caught      $id by $why"; caught=$((caught + 1))
	fi
	cp "$C/.orig" "$f" && touch "$f" # restored, newer than the mutant's objects: rebuilt next time
done
n=$((caught + missed))
echo
echo "$caught of $n mutations caught ($((n ? caught * 100 / n : 0))%), $missed not caught, $broken did not build, $invalid invalid"
build || { echo "nvlprof mutate: the copy does not build after restoring"; exit 2; }
[ $missed -eq 0 ] && [ $invalid -eq 0 ]

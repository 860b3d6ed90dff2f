#!/usr/bin/env bash
# test_plan_lazy.sh: tests/gpu/plan_lazy.sh (the next GPU session's steps for issue 27) names only scripts and probes that exist, scenarios and modes they accept, and variables they read: DRY=1 prints each part's commands, checked here without a GPU.
source "$(dirname "$0")/../lib.sh"
P="$ROOT/tests/gpu/plan_lazy.sh"
for part in probe um fail cost ddp all split umcost bytes twogpu; do
	DRY=1 OUT=/tmp/plan bash "$P" "$part" >"$T/$part.txt" 2>&1
	check_eq "$part: prints its commands" 0 "$?"
	bad=""
	while read -r line; do
		for s in $(grep -o 'tests/gpu/[a-z_]*\.\(sh\|py\)' <<<"$line"); do
			[ -f "$ROOT/$s" ] || bad="$bad missing:$s"
			# every VAR=value before the command is read by that script (or the scripts it runs)
			for v in $(grep -o '\b[A-Z][A-Z0-9_]*=' <<<"${line%%bash tests*}" | tr -d =); do
				case $v in OUT | NVLPROF_CUPTI) continue ;; esac
				grep -q "$v" "$ROOT/$s" "$ROOT/tests/gpu/common.sh" "$ROOT/tests/gpu/overhead.py" || bad="$bad $s:$v"
			done
		done
		# build/gpu/NAME: a probe the Makefile builds from tests/gpu/NAME.c or .cu
		for g in $(grep -o 'build/gpu/[a-z_]*' <<<"$line"); do
			g=${g#build/gpu/}
			{ [ -f "$ROOT/tests/gpu/$g.c" ] || [ -f "$ROOT/tests/gpu/$g.cu" ]; } &&
				grep -q "(BUILD)/gpu/$g\b" "$ROOT/Makefile" || bad="$bad build/gpu/$g"
		done
		# run_X.sh SCENARIO...: each scenario is one the script names in its usage lines
		if [[ $line =~ tests/gpu/(run_[a-z]*\.sh)\ ([a-z0-9\ ]*) ]]; then
			sc=${BASH_REMATCH[1]}
			for w in ${BASH_REMATCH[2]}; do
				head -8 "$ROOT/tests/gpu/$sc" | grep -qw -- "$w" || bad="$bad $sc:$w"
			done
		fi
	done <"$T/$part.txt"
	check_eq "$part: scripts, their scenarios and variables exist" "" "$bad"
done
# the cost parts' configurations: NAME=ENV, or a name overhead.py defines
names=$(cat "$T/cost.txt" "$T/ddp.txt" "$T/all.txt" "$T/split.txt" | grep -o '[A-Z0-9]*_CONFIGS=[^ ]*' | cut -d= -f2- | tr , '\n' | grep -v = | sort -u)
unknown=""
for n in $names; do
	grep -q "^    \"$n\": " "$ROOT/tests/gpu/overhead.py" || unknown="$unknown $n"
done
check_eq "cost, all: overhead.py defines every configuration named ($(echo $names))" "" "$unknown"
DRY=1 bash "$P" nonsense >"$T/bad.txt" 2>&1
check_eq "an unknown part: usage, status 2" "2 1" "$? $(grep -c '^usage: ' "$T/bad.txt")"
exit $((FAILED > 0))

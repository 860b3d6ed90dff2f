#!/usr/bin/env bash
# test_um_attach.sh: tests/gpu/um_attach.c (when CUPTI must attach to count managed memory's migrations; plan_lazy.sh probe) on the fake libcuda and libcupti, whose prefetch makes FAKE_CUPTI_UM_PER_PREFETCH unified-memory records while that kind is on: each attach point attaches and turns the counters on where it says (records from those rounds only), the control attaches nothing, the job's checksum is the same in every mode, and bad arguments or a missing libcupti get one line.
source "$(dirname "$0")/../lib.sh"
U="$B/gpu/um_attach"
F="$B/fakes/cupti"
if ! [ -x "$U" ] || ! [ -f "$F/libcupti.so.13" ]; then
	fail "no $U or $F/libcupti.so.13 (make test builds both)"
	exit 1
fi
um() { # MODE [ENV...]: one run of 3 rounds of 1 MiB on the fakes, its line into $T/MODE.out
	local m=$1
	shift
	env "$@" FAKE_CUPTI_UM_PER_PREFETCH=3 LD_LIBRARY_PATH="$F" UM_ATTACH_CUPTI="${CUPTI:-$F/libcupti.so.13}" \
		"$U" "$m" 3 1 >"$T/$m.out" 2>"$T/$m.err"
	echo "$?"
}
field() { grep -o " $2=[-0-9]*" "$T/$1.out" | cut -d= -f2; }
check_eq "never: exit 0" 0 "$(um never)"
check_eq "never: no CUPTI call, no record" "-1 -1 0" "$(field never configure) $(field never enable) $(field never records)"
for m in init-init ctx-ctx alloc-alloc ctx-alloc; do
	check_eq "$m: exit 0, configured and enabled, the 3 rounds' 9 records" "0 0 0 9" \
		"$(um $m) $(field $m configure) $(field $m enable) $(field $m records)"
done
check_eq "touched-touched: the counters on after round 1: 2 rounds' 6 records" "0 6" "$(um touched-touched) $(field touched-touched records)"
check_eq "init-touched: attached at cuInit, counters after round 1: 6 records" "0 6" "$(um init-touched) $(field init-touched records)"
check_eq "init-init: records by kind (the fake's cycle of 8 kinds)" "2 1 1 1 4" \
	"$(field init-init htod) $(field init-init dtoh) $(field init-init gpu_fault) $(field init-init cpu_fault) $(field init-init other)"
sums=$(cat "$T"/*.out | grep -o 'checksum [0-9]*' | sort -u)
check_eq "the job's checksum is the same in every mode" "checksum 768" "$sums"
check_eq "alloc-init (counters before the attach): usage status 2, one line" "2 1" \
	"$(um alloc-init) $(grep -c "is not ATTACH-UM" "$T/alloc-init.err")"
check_eq "bogus mode: status 2" 2 "$(um bogus)"
CUPTI=$T/none.so rc=$(um init-init)
check_eq "no libcupti: one line, the job runs on (exit 0, no record)" "0 1 0" \
	"$rc $(grep -c 'no libcupti' "$T/init-init.err") $(field init-init records)"
exit $((FAILED > 0))

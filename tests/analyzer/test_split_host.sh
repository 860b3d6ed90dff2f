#!/usr/bin/env bash
# test_split_host.sh: nccl_split_host end to end: the shim's boot_id header key and NCCLCOMM records (fake NCCL's plugin init with FAKE_NCCL_NNODES), the finding on them and on the real share_hf traces (NCCL_HOSTID per rank), its negatives, and bad NCCLCOMM records.
. "$(dirname "$0")/../lib.sh"
NCCLP="$PROGS/hk_nccl"
RH="$PROGS/sh_rehdr"
HF="$ROOT/tests/analyzer/traces/share_hf"
for f in "$NCCLP" "$RH" "$LIB" "$CLI" "$FAKES/libnccl.so.2"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done

# ranks DIR N [env...]: N ranks of hk_nccl (one communicator of N, then two splits) under the shim
ranks() {
	local d=$1 n=$2; shift 2
	rm -rf "$d"; mkdir -p "$d/tr"
	local pids=() r
	for ((r = 0; r < n; r++)); do
		env -u NCCL_PROFILER_PLUGIN -u NCCL_HOSTID NVLPROF_DIR="$d/tr" "$@" \
			$([ -n "${HOSTIDS:-}" ] && echo NCCL_HOSTID=${HOSTIDS}$r) \
			LD_PRELOAD="$PRELOAD" timeout 120 "$NCCLP" rank $r "$n" "$d/id" >"$d/out$r" 2>&1 &
		pids+=($!)
	done
	local ok=0
	for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
	echo "$ok" >"$d/ok"
}
# rep NAME DIRS...: text and JSON reports into $T/NAME.txt / $T/NAME.json
rep() {
	local n=$1; shift
	"$CLI" report "$@" >"$T/$n.txt" 2>"$T/$n.err"
	echo $? >"$T/$n.rc"
	"$CLI" report --json "$@" >"$T/$n.json" 2>/dev/null
}
# ev NAME KEY: the evidence KEY of nccl_split_host in $T/NAME.json ("none" without the finding)
ev() {
	python3 - "$T/$1.json" "$2" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
f = [x for x in d['findings'] if x['id'] == 'nccl_split_host']
if not f:
    print('none')
elif sys.argv[2] == 'severity':
    print(f[0]['severity'])
else:
    print(f[0]['evidence'].get(sys.argv[2], 'absent'))
PYEOF
}
fires() { grep -q "nccl_split_host" "$T/$1.txt"; }
silent() { ! grep -q "nccl_split_host" "$T/$1.txt" && [ "$(cat "$T/$1.rc")" = 0 ]; }

# ---- the shim: boot id in the header, one NCCLCOMM record per communicator NCCL set up ----
boot=$(cat /proc/sys/kernel/random/boot_id)
HOSTIDS=h ranks "$T/split" 2 FAKE_NCCL_NNODES=2
check_eq "split: both ranks ran" 2 "$(cat "$T/split/ok")"
"$CLI" dump "$T/split/tr" >"$T/split.dump" 2>&1
check_eq "header: boot_id is the kernel's, in both traces" 2 \
	"$(grep -c "^header .* host=\"[^\"]*\" boot_id=\"$boot\" " "$T/split.dump")"
check_eq "NCCLCOMM: one per communicator NCCL set up (3 per rank), nnodes 2 of 2 ranks" 6 \
	"$(grep -cE '^ncclcomm ncclcomm nccl_comm=0x[0-9a-f]+ nnodes=2 nranks=2 rank=[01]$' "$T/split.dump")"
check_eq "NCCLCOMM: each rank's own rank" "0 0 0 1 1 1" \
	"$(sed -n 's/^ncclcomm .* rank=\([0-9]*\)$/\1/p' "$T/split.dump" | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "NCCLCOMM: the commHash NCCLPROF records carry" \
	"$(sed -n 's/^ncclprof .* nccl_comm=\(0x[0-9a-f]*\) .*/\1/p' "$T/split.dump" | sort -u | tr '\n' ' ')" \
	"$(sed -n 's/^ncclcomm .* nccl_comm=\(0x[0-9a-f]*\) .*/\1/p' "$T/split.dump" | sort -u | tr '\n' ' ')"
check "NCCLCOMM written before the communicator's first NCCLPROF record" \
	awk '/^== /{seen=0} /^ncclcomm /{seen=1} /^ncclprof /{if(!seen) exit 1}' "$T/split.dump"

# ---- (a) NCCL's node count above the machines: fires ----
rep split "$T/split/tr"
check "nnodes 2 on one machine: fires" fires split
check "nnodes 2 on one machine: title names ranks, machine and nodes" grep -q \
	"nccl_split_host: NCCL took the 2 ranks of one machine for 2 nodes: their collectives go over the network, not NVLink or shared memory" "$T/split.txt"
check_eq "nnodes: evidence nccl_nnodes, machines, ranks_per_machine, hostids, basis" \
	"2 1 vm: 0,1 0:h0 1:h1 NCCL's node count (profiler plugin) above the machines" \
	"$(ev split nccl_nnodes) $(ev split machines) $(ev split ranks_per_machine | sed "s/^[^:]*:/vm:/") $(ev split nccl_hostid) $(ev split basis)"
check_eq "nnodes: two communicators are split (the third has a hash per color)" 2 "$(ev split communicators)"
check_eq "nnodes: warning (host times of a tiny job: a small share of the run)" warning "$(ev split severity)"
check "nnodes: collective time per rank, host time" \
	bash -c "[ \"\$(cat)\" = host ] && grep -Eq 'collective_ms_per_rank=0:[0-9.]+ 1:[0-9.]+' '$T/split.txt'" <<<"$(ev split time_source)"
check_eq "critical when the share of wall time passes split_host_critical" critical \
	"$("$CLI" report --json --threshold split_host_critical=0 "$T/split/tr" 2>/dev/null | python3 -c '
import json, sys
print([f["severity"] for f in json.load(sys.stdin)["findings"] if f["id"] == "nccl_split_host"][0])')"
"$CLI" report --html "$T/split.html" "$T/split/tr" 2>/dev/null
check "report --html: the finding is shown" grep -q "nccl_split_host" "$T/split.html"

# ---- the same job on two machines (rank 1's header from another boot id and host): silent ----
mkdir -p "$T/two"
f0=$(grep -l . "$T"/split/tr/*.nvlp | head -1)
for f in "$T"/split/tr/*.nvlp; do
	if [ "$f" = "$f0" ]; then cp "$f" "$T/two/"; else
		"$RH" "$f" "$T/two/other.nvlp" boot_id=11111111-2222-3333-4444-555555555555 host=node2
	fi
done
rep two "$T/two"
check "two machines, nnodes 2: silent" silent two
# containers: one boot id, two host names, nnodes 2: fires, and names the host names
"$RH" "$T/two/other.nvlp" "$T/two.c.nvlp" boot_id="$boot" host=pod-b && mkdir -p "$T/cont" &&
	cp "$f0" "$T/cont/" && mv "$T/two.c.nvlp" "$T/cont/"
rep cont "$T/cont"
check "containers (same boot id, host names vm and pod-b): fires" fires cont
check "containers: hostnames in the evidence" grep -Eq "hostnames=0:[^ ]+ 1:pod-b|hostnames=0:pod-b 1:" "$T/cont.txt"

# ---- healthy: one host, no NCCL_HOSTID, NCCL counts 1 node: silent ----
HOSTIDS= ranks "$T/healthy" 2
check_eq "healthy: both ranks ran" 2 "$(cat "$T/healthy/ok")"
check_eq "healthy: NCCLCOMM says 1 node" 6 "$("$CLI" dump "$T/healthy/tr" 2>/dev/null | grep -c '^ncclcomm .* nnodes=1 nranks=2 ')"
rep healthy "$T/healthy/tr"
check "healthy single host: silent" silent healthy
# ranks of one communicator without all traces: nnodes 2 may be the missing rank's own node
mkdir -p "$T/half" && cp "$f0" "$T/half/"
rep half "$T/half"
check "one rank's trace only: silent" silent half

# ---- (b) older traces (no NCCLCOMM, no boot id): NCCL_HOSTID differs on one host ----
rep hf "$HF"
check "share_hf (NCCL_HOSTID share-rank0/1, host vm): fires" fires hf
check_eq "share_hf: host_hashes 2, machines 1, no nccl_nnodes, hostids, basis" \
	"2 1 absent 0:share-rank0 1:share-rank1 different NCCL host identities (NCCL_HOSTID / host name) on one machine" \
	"$(ev hf host_hashes) $(ev hf machines) $(ev hf nccl_nnodes) $(ev hf nccl_hostid) $(ev hf basis)"
check "share_hf: GPU time per rank from KernelCh (over a second each)" \
	grep -Eq "collective_ms_per_rank=0:1[0-9]{3}\.[0-9]+ 1:1[0-9]{3}\.[0-9]+" "$T/hf.txt"
check_eq "share_hf: critical (over 20% of the run in the collectives)" critical "$(ev hf severity)"
# the same traces rewritten: NCCL_HOSTID unset on both (silent), on one (still two host hashes)
hfw() { # hfw NAME ARGS-FOR-EACH-RANK...: share_hf's traces rewritten into $T/NAME
	mkdir -p "$T/$1"; local n=$1; shift
	for f in "$HF"/*.nvlp; do "$RH" "$f" "$T/$n/$(basename "$f")" "$@" || fail "sh_rehdr $f"; done
}
hfw hf_unset -env.NCCL_HOSTID
rep hf_unset "$T/hf_unset"
check "share_hf without NCCL_HOSTID: silent" silent hf_unset
mkdir -p "$T/hf_one"
for f in "$HF"/*.nvlp; do
	case $(basename "$f") in vm-1049.nvlp) "$RH" "$f" "$T/hf_one/$(basename "$f")" -env.NCCL_HOSTID ;;
	*) cp "$f" "$T/hf_one/" ;; esac
done
rep hf_one "$T/hf_one"
check "share_hf with NCCL_HOSTID on one rank only: fires (still two host hashes)" fires hf_one
check_eq "... listing the unset one" "0:(unset) 1:share-rank1" "$(ev hf_one nccl_hostid)"
# NCCL's own count wins over the environment: nnodes 1 in an NCCLCOMM record -> silent
hc=$(sed -n 's/^ncclprof .* nccl_comm=0x\([0-9a-f]*\) .*/\1/p' <("$CLI" dump "$HF/vm-1049.nvlp" 2>/dev/null) | head -1)
mkdir -p "$T/hf_n1" "$T/hf_n2"
for f in "$HF"/*.nvlp; do
	rk=$( [ "$(basename "$f")" = vm-1050.nvlp ] && echo 1 || echo 0)
	"$RH" "$f" "$T/hf_n1/$(basename "$f")" +ncclcomm=$hc:1:2:$rk
	"$RH" "$f" "$T/hf_n2/$(basename "$f")" +ncclcomm=$hc:2:2:$rk
done
rep hf_n1 "$T/hf_n1"
check "share_hf with an NCCLCOMM record of 1 node: silent (NCCL's count wins)" silent hf_n1
rep hf_n2 "$T/hf_n2"
check_eq "share_hf with an NCCLCOMM record of 2 nodes: fires on the count" \
	"NCCL's node count (profiler plugin) above the machines" "$(ev hf_n2 basis)"
# boot ids on old-style traces: two host names, NCCL_HOSTID unset: same boot id fires, different not
hfw hf_c -env.NCCL_HOSTID boot_id=aaaaaaaa-1111-2222-3333-444444444444
for f in "$T"/hf_c/*.nvlp; do "$RH" "$f" "$f.x" host="c-$(basename "$f" .nvlp)" && mv "$f.x" "$f"; done
rep hf_c "$T/hf_c"
check "one boot id, two host names, no NCCL_HOSTID: fires" fires hf_c
mkdir -p "$T/hf_m"
for f in "$T"/hf_c/*.nvlp; do "$RH" "$f" "$T/hf_m/$(basename "$f")" boot_id="$(basename "$f" .nvlp)-boot"; done
rep hf_m "$T/hf_m"
check "two boot ids, two host names (two machines): silent" silent hf_m

# ---- the shipped example traces: silent ----
for d in "$ROOT"/examples/traces/*/; do
	n=ex_$(basename "$d")
	rep "$n" "$d"
	check "examples/traces/$(basename "$d"): silent" silent "$n"
done

# ---- the boot id unreadable: no key, the rest of the header as before ----
if unshare -m true 2>/dev/null; then
	: >"$T/empty"
	mkdir -p "$T/noboot"
	unshare -m sh -c "mount --bind '$T/empty' /proc/sys/kernel/random/boot_id &&
		env -u NCCL_PROFILER_PLUGIN NVLPROF_DIR='$T/noboot' FAKE_NCCL_NNODES=2 LD_PRELOAD='$PRELOAD' \
		'$NCCLP' rank 0 1 '$T/noboot.id'" >"$T/noboot.out" 2>&1
	"$CLI" dump "$T/noboot" >"$T/noboot.dump" 2>&1
	check "unreadable boot id: header without boot_id, with host and pid" \
		bash -c "grep -q '^header .* host=\"[^\"]*\" pid=' '$T/noboot.dump' && ! grep -q 'boot_id=' '$T/noboot.dump'"
	check_eq "unreadable boot id: the NCCLCOMM records are still there" 3 "$(grep -c '^ncclcomm ' "$T/noboot.dump")"
else
	echo "note: unshare -m not permitted here: the unreadable boot id case is not run"
fi

# ---- bad and hostile NCCLCOMM records: skipped with one warning, the rest kept ----
"$RH" "$f0" "$T/bad.nvlp" +ncclcomm=1:0:2:0 +ncclcomm=2:3:2:0 +ncclcomm=3:1:2:5 +ncclcomm=4:1:-1:0
rep bad "$T/bad.nvlp"
check_eq "bad NCCLCOMM: report exits 0" 0 "$(cat "$T/bad.rc")"
check_eq "bad NCCLCOMM: one warning line" 1 "$(grep -c warning "$T/bad.err")"
check "bad NCCLCOMM: it names file, frame, record, values and the count" grep -Eq \
	"^nvlprof: warning: $T/bad.nvlp: frame [0-9]+, record [0-9]+: ncclcomm record with 0 nodes, rank 0 of 2: skipped \(4 bad record\(s\) in all\)$" "$T/bad.err"
check "bad NCCLCOMM: the calls are kept" grep -q "ncclAllReduce" "$T/bad.txt"
"$RH" "$f0" "$T/many.nvlp" +ncclcomm=100:2:2:0:100000
rep many "$T/many.nvlp"
check_eq "100000 NCCLCOMM records: report exits 0, no warning" "0 0" "$(cat "$T/many.rc") $(grep -c warning "$T/many.err")"
# 70000 shared communicators of two processes (mktrace --evil comms; 32-bit indices keep them
# all, and the job's one more), all split: one finding, time in proportion
MK="$PROGS/mktrace"
mkdir -p "$T/wide"
for p in 100 101; do
	"$MK" -o "$T/w$p.nvlp" --evil comms -p $p && "$RH" "$T/w$p.nvlp" "$T/wide/w$p.nvlp" env.NCCL_HOSTID=h$p
done
timeout 300 "$CLI" report --json "$T/wide" >"$T/wide.json" 2>/dev/null
check_eq "70001 split communicators of 2 processes: one finding counting them" "1 70001" \
	"$(python3 -c '
import json, sys
f = [x for x in json.load(open(sys.argv[1]))["findings"] if x["id"] == "nccl_split_host"]
print(len(f), f[0]["evidence"]["communicators"] if f else "-")' "$T/wide.json")"
# cut short and corrupted copies of a trace holding NCCLCOMM records: the usual clean errors
sz=$(stat -c %s "$f0")
for cut in 100 $((sz / 2)) $((sz - 7)); do
	head -c "$cut" "$f0" >"$T/cut.nvlp"
	timeout 60 "$CLI" report "$T/cut.nvlp" >"$T/cut.txt" 2>"$T/cut.err"
	rc=$?
	check "cut at $cut of $sz bytes: exits 0-2 with one-line messages naming the file" \
		bash -c "[ $rc -le 2 ] && [ -s '$T/cut.err' ] && ! grep -v '$T/cut.nvlp' '$T/cut.err' | grep -q ."
done
for off in 40 $((sz / 3)) $((sz * 2 / 3)); do
	cp "$f0" "$T/flip.nvlp"
	printf '\xff\x00\xff' | dd of="$T/flip.nvlp" bs=1 seek="$off" conv=notrunc status=none
	timeout 60 "$CLI" report "$T/flip.nvlp" >"$T/flip.txt" 2>"$T/flip.err"
	rc=$?
	check "bytes flipped at $off: exits 0-2, messages name the file" \
		bash -c "[ $rc -le 2 ] && ! grep -v '$T/flip.nvlp' '$T/flip.err' | grep -q ."
done

echo "split_host: $FAILED failed"
[ "$FAILED" -eq 0 ]

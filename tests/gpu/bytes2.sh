#!/usr/bin/env bash
# bytes2.sh: the trace's bytes per hour per rank of a 2-rank DDP job on real NCCL (issue 27: <= 50 MB/h), at
# chosen rates of collectives. Each configuration runs bytes2.py twice, SHORT and LONG seconds of paced steps; the
# bytes a rank's trace grows per second between the two (start-up and NCCL's set-up cancel) are its steady rate.
# Two ranks share GPU 0 unless there are two (NCCL_HOSTID per rank: NET/Socket on loopback, not NVLink); time-sliced,
# a collective waits for both ranks' kernels to run (~220 a second at most on an H100); BYTES2_MPS=1 starts an MPS
# daemon of this run's own so they run side by side, as on two GPUs.
#   bash tests/gpu/bytes2.sh [CONFIG...]     CONFIG: NAME=RATE[:ENV+ENV...], e.g. d560=560 lazy560=560:NVLPROF_CUPTI=lazy
# Also runs the first configuration's SHORT job without nvlprof and compares its loss and parameter checksum.
# Prints a table (bytes2: lines) and leaves logs, info and reports in $OUT (traces packed as traces.tgz).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-bytes2}
DONE_MSG="bytes2: done"
scen=all
JOB_TIMEOUT=${JOB_TIMEOUT:-200}
. tests/gpu/common.sh
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=1
SHORT=${SHORT:-20} LONG=${LONG:-80}
if [ "${BYTES2_MPS:-0}" = 1 ]; then
	. tests/gpu/mps.sh
	mps_start BYTES2_MPS=1 && trap 'mps_stop; finish' EXIT
fi
configs=${*:-d560=560 d1000=1000 lazy560=560:NVLPROF_CUPTI=lazy}
if [ -n "${BYTES2_JOB:-}" ]; then # the tests' stand-in for bytes2.py (same arguments)
	DRIVER=$BYTES2_JOB
else
	SHARE=$($PY -c 'import torch; print("" if torch.cuda.device_count() > 1 else "--share-gpu")' 2>/dev/null)
	DRIVER="$PY tests/gpu/bytes2.py $SHARE"
fi
port=29561
first=1
for c in $configs; do
	name=${c%%=*} spec=${c#*=}
	rate=${spec%%:*} envs=
	[ "$spec" != "$rate" ] && envs=${spec#*:}
	envs=${envs//+/ }
	for s in $SHORT $LONG; do
		port=$((port + 1))
		if [ $first = 1 ]; then
			log "$name without nvlprof, $s s"
			base "${name}_t${s}_base" $DRIVER --rate "$rate" --seconds "$s" --port $port --json "$L/${name}_t${s}_base.json"
			port=$((port + 1))
		fi
		log "$name under nvlprof ($envs), $s s"
		base "${name}_t${s}" env $envs "$NV" run -o "$T/${name}_t${s}" -- \
			$DRIVER --rate "$rate" --seconds "$s" --port $port --json "$L/${name}_t${s}.json"
		first=0
	done
done
for d in "$T"/*/; do
	b=$(basename "$d")
	$NV info "$d" >"$L/info_$b.txt" 2>&1
	$NV report --json "$d" >"$L/report_$b.json" 2>"$L/report_$b.err"
done
$PY tests/gpu/bytes2_table.py "$L" "$SHORT" "$LONG" $configs >"$OUT/bytes2.txt"
rc=$?
cat "$OUT/bytes2.txt"
exit $rc

#!/usr/bin/env bash
# run_cost.sh: where the default's cost goes, and what it is, on one or more GPUs: host-side probes
# (per-launch cost before/during/after CUPTI kernel activity), then step-time cost of nvlprof's
# modes in rotated paired rounds (long-lived workers, an order drawn each round, rotated core sets: overhead.py) on
# (a) the HF GPT-2 loop, (c) a launch-bound loop of tiny kernels, (b) GPT-2 under DDP; with each
# configuration's "nvlprof cost:" line (what the trace says it cost). Logs and JSON in $OUT.
#   bash tests/gpu/run_cost.sh [probes] [parts] [gpt2] [tiny] [gpt2ddp] [ddp2] [presence]   (ddp2: two ranks, one GPU each or sharing one)
# presence (not in the default list): the tiny loop with CUPTI's parts done alone, without nvlprof
# (tests/gpu/cupti_presence.c: PRESENCE_CONFIGS, PRESENCE_BUDGET 170 s, PRESENCE_SETS 1), and
# nvlprof with NVLPROF_CUPTI=startup (CUPTI detached 2 s after cuInit: nvlprof's own `fin`), each
# worker's launching thread sampled (mtprof) with the call chains into libcupti; into $OUT/presence.
# Budgets (s): GPT2_BUDGET TINY_BUDGET DDP_BUDGET; configurations: GPT2_CONFIGS TINY_CONFIGS DDP_CONFIGS;
# TINY_BLOCK steps per turn (5: turns of ~20 ms, the tiny loop's turn-to-turn spread of ~20% then
# averages over thousands of rounds, run 6); ROUNDS (100000: the budgets end the runs); SETS fresh
# sets of workers (1; the interval across them holds each process's own speed); PER_CPUS
# CPUs in a worker's core set (2); WARMUP_S: each worker warms up at least this long after CUDA came up
# (3 puts the measured turns past NVLPROF_CUPTI=startup's detach, the default's); OWN_SHM=1: each
# worker with a /dev/shm of its own, so each nvlprof worker samples its GPU's links (root); MTPROF=1: each worker's main thread sampled by shared object
# (tests/gpu/mtprof.c, built by `make gpu-probes`; there is no perf on the GPU machine); DDP2_MPS=1:
# the two ranks of ddp2 share the GPU through an MPS daemon of this run's own (kernels side by
# side, as on two GPUs; time-sliced contexts made one round's step time vary by ~50%).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-cost}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NV=$PWD/build/nvlprof
export NVLPROF=$NV
G=$PWD/build/gpu
scen=${*:-probes parts gpt2 tiny gpt2ddp ddp2}
want() { case " $scen " in *" $1 "*) return 0 ;; esac; return 1; }
log() { echo "== $(date +%T) $*"; }
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
[ "$NGPU" -ge 1 ] 2>/dev/null || NGPU=1
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
PL=$(find "$SP/nvidia" \( -name 'libnccl.so.2' -o -name 'libcupti.so.13' -o -name 'libcudart.so.13' \) 2>/dev/null |
	xargs -r -n1 dirname | sort -u | tr '\n' ':')
# overhead.py's NAME=cupti:PARTS workers (tests/gpu/cupti_presence.c) open the libcupti nvlprof finds
export CUPTI_PRESENCE_LIB=${CUPTI_PRESENCE_LIB:-$(find "$SP/nvidia" -name 'libcupti.so.13' 2>/dev/null | head -1)}
# what a window that opened once leaves behind, and what the start-up probe alone leaves
CLOSED=closed
PROBE="probeonly=NVLPROF_KERNELS=window:1/3600000+3600000"
if [ "${MTPROF:-0}" = 1 ]; then
	export MTPROF=$G/mtprof.so
	[ -f "$MTPROF" ] || { echo "run_cost.sh: MTPROF=1 but no $MTPROF (make gpu-probes)"; exit 2; }
else
	unset MTPROF
fi
if want probes; then
	log "cupti_phases (no nvlprof): per-launch cost before/during/after CUPTI kernel activity"
	LD_LIBRARY_PATH=${PL}${LD_LIBRARY_PATH:-} taskset -c 2 $G/cupti_phases 100000 5 2>&1
fi
if want parts; then
	log "cupti_parts (no nvlprof): per-launch cost of CUPTI's driver callbacks and DEVICE/NVLINK kinds, switched in turn"
	LD_LIBRARY_PATH=${PL}${LD_LIBRARY_PATH:-} taskset -c 2 $G/cupti_parts ${PARTS_LAUNCHES:-2000} ${PARTS_ROUNDS:-400} 2>&1
fi
ov() { # WORKLOAD BLOCK BUDGET CONFIGS
	log "overhead: $1"
	python3 tests/gpu/overhead.py --workload $1 --gpus $NGPU --out $OUT --block $2 --warmup 30 --warmup-s ${WARMUP_S:-0} \
		--rounds ${ROUNDS:-100000} --budget-s $3 --configs $4 --per-cpus ${PER_CPUS:-2} --sets ${SETS:-1} \
		$([ "${OWN_SHM:-0}" = 1 ] && echo --own-shm) 2>&1
}
want gpt2 && ov gpt2 40 ${GPT2_BUDGET:-150} ${GPT2_CONFIGS:-none,default,window,all,torchprof}
want tiny && ov tiny ${TINY_BLOCK:-5} ${TINY_BUDGET:-80} ${TINY_CONFIGS:-none,default,window,all}
want gpt2ddp && ov gpt2ddp 40 ${DDP_BUDGET:-80} ${DDP_CONFIGS:-none,default,all}
if want ddp2 && [ "${DDP2_MPS:-0}" = 1 ]; then
	. tests/gpu/mps.sh
	mps_start DDP2_MPS=1 && trap mps_stop EXIT
fi
want ddp2 && ov ddp2 40 ${DDP2_BUDGET:-80} ${DDP2_CONFIGS:-none,default,all}
if want presence; then
	if [ -f "$G/mtprof.so" ] && [ -f "$G/cupti_presence.so" ]; then
		log "presence: CUPTI's parts alone (no nvlprof) on the tiny loop, libcupti's share of the launching thread"
		OUT=$OUT/presence SETS=${PRESENCE_SETS:-1} MTPROF=$G/mtprof.so MTPROF_FOCUS=libcupti \
			ov tiny ${TINY_BLOCK:-5} ${PRESENCE_BUDGET:-170} \
			${PRESENCE_CONFIGS:-none,reg=cupti:reg,kinds=cupti:reg.kinds,inj=cupti:inj.ts.reg.kinds,sub=cupti:sub,fin=cupti:inj.ts.reg.kinds.fin,bare=NVLPROF_DRIVER=0+NVLPROF_SAMPLE_US=0,startup=NVLPROF_CUPTI=startup+NVLPROF_CUPTI_FINALIZE=1}
	else
		log "presence: needs $G/mtprof.so and $G/cupti_presence.so (make gpu-probes)"
	fi
fi
for d in "$OUT"/*_*/; do
	d=${d%/}
	[ -d "$d" ] || continue
	log "$(basename "$d"): trace bytes $(du -sb "$d" | cut -f1); last COST record of each process:"
	for f in "$d"/*.nvlp; do "$NV" dump "$f" 2>/dev/null | grep "^cost" | tail -1; done
	"$NV" report "$d" 2>&1 | sed -n '1,4p;/^nvlprof cost/p;/kernel tracing windows/p'
done
# one file back: the logs, JSON and mtprof's tables (the device returns few files)
tar -C "$OUT" -czf "$OUT/cost_all.tgz" $(cd "$OUT" && ls *.log *.json mtprof_*.txt presence/*.log presence/*.json \
	presence/mtprof_*.txt 2>/dev/null)
# a run cut short by the device call's limit still left overhead_WORKLOAD.raw.json (every turn, saved
# every 10 s): python3 tests/gpu/overhead.py --analyze FILE reports it
log done

#!/usr/bin/env bash
# pm_busy.sh: another process holds the GPU's performance counters (CUPTI PM sampling, as DCGM
# profiling or Nsight Compute would) while a job runs under nvlprof, on the GPU machine. The job
# runs twice: with GPU 0's counters free (control: PM sampling expected) and while pm_hold samples
# GPU 0 (nvlprof should fall back to NVML). Each time the trace's NOTEs and the report's
# "link bytes from:" line must agree; the job's checksum is the same both times; pm_hold's own
# sampling keeps working. PASS/FAIL lines in $OUT/pm_busy.txt; ends with "pm_busy: done".
#   bash tests/gpu/pm_busy.sh      (needs build/libnvlprof.so and build/nvlprof carried; nvcc there)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvlp-pm-busy}
DONE_MSG="pm_busy: done"
scen=all
JOB_TIMEOUT=120
. tests/gpu/common.sh
R=$OUT/pm_busy.txt
: >"$R"
pass() { echo "PASS: $*" | tee -a "$R"; }
fail() { echo "FAIL: $*" | tee -a "$R"; }
check() { local n=$1; shift; if "$@" >/dev/null 2>&1; then pass "$n"; else fail "$n"; fi; }

# pm_hold, built here: CUPTI from the toolkit, else torch's wheel
CUPTI=$(dirname "$(ls /usr/local/cuda/lib64/libcupti.so* /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* \
	"$($PY -c 'import site; print(site.getsitepackages()[0])')"/nvidia/cu*/lib/libcupti.so* 2>/dev/null | head -1)")
mkdir -p build/gpu
nvcc -O2 -o build/gpu/pm_hold tests/gpu/pm_hold.cu -I/usr/local/cuda/include -L"$CUPTI" -lcupti \
	-Xlinker -rpath="$CUPTI" >"$L/nvcc_pm_hold.log" 2>&1 || { fail "nvcc pm_hold (see logs/nvcc_pm_hold.log)"; exit 1; }

# the job: matmuls and host<->device copies on GPU 0 (PCIe bytes to count); prints a checksum
cat >"$L/pm_job.py" <<'EOF'
import torch
torch.manual_seed(7)
x = torch.randn(2048, 2048, device="cuda:0")
acc = 0.0
for i in range(60):
    y = (x @ x).tanh()
    h = y.cpu()               # device -> host, 16 MiB
    x = h.to("cuda:0") * 0.5  # host -> device
    acc += float(y[0, 0])
torch.cuda.synchronize()
print("pm_job: checksum %.9e" % acc)
EOF
job() { # job NAME: the job under nvlprof into $T/NAME; its report and NOTEs in $L
	run "$1" $PY "$L/pm_job.py"
	"$NV" report "$T/$1" >"$L/report_$1.txt" 2>&1
	"$NV" dump "$T/$1" 2>/dev/null | grep '^note \(pm_sampling\|nvml\)' >"$L/notes_$1.txt"
}
sum() { grep -h '^pm_job: checksum' "$L/$1.log"; }

log "control: GPU 0's counters free"
job free
check "free: job ran" grep -q '^rc=0 ' "$L/free.wall"
check "free: NOTE: PM sampling on GPU 0" grep -q 'note pm_sampling_on .*PM sampling on GPU 0' "$L/notes_free.txt"
check "free: report: link bytes from PM sampling" grep -qx '  link bytes from: PM sampling (CUPTI)' "$L/report_free.txt"

log "busy: pm_hold samples GPU 0 while the job runs"
build/gpu/pm_hold 0 100 >"$L/pm_hold.log" 2>&1 &
hold=$!
for i in $(seq 1 100); do grep -q '^pm_hold: sampling GPU 0' "$L/pm_hold.log" && break; sleep 0.2; done
if ! grep -q '^pm_hold: sampling GPU 0' "$L/pm_hold.log"; then
	fail "busy: pm_hold did not start sampling: $(head -3 "$L/pm_hold.log" | tr '\n' ' ')"
	kill "$hold" 2>/dev/null
	exit 1
fi
pass "busy: pm_hold samples GPU 0"
job busy
kill -TERM "$hold" 2>/dev/null
wait "$hold"
hrc=$?
check "busy: job ran" grep -q '^rc=0 ' "$L/busy.wall"
check_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi; }
check_eq "busy: job's results unchanged (checksum as in the control)" "$(sum free)" "$(sum busy)"
check_eq "busy: pm_hold's own sampling kept working (exit 0, samples decoded)" "0 1" \
	"$hrc $(grep -c '^pm_hold: [0-9]* samples' "$L/pm_hold.log")"
if grep -q 'note nvml_on .*GPU 0' "$L/notes_busy.txt"; then
	pass "busy: NOTE: NVML counters on GPU 0, PM sampling unavailable: $(grep -o 'unavailable: [^)]*' "$L/notes_busy.txt" | head -1)"
	check "busy: report: link bytes from NVML" grep -qx '  link bytes from: NVML counters (PM sampling unavailable: see NOTEs)' "$L/report_busy.txt"
elif grep -q 'note pm_sampling_on .*GPU 0' "$L/notes_busy.txt"; then
	fail "busy: CUPTI let a second process sample GPU 0 (no fallback to test); report says: $(grep 'link bytes from' "$L/report_busy.txt")"
else
	fail "busy: neither PM sampling nor NVML noted on GPU 0: $(cat "$L/notes_busy.txt")"
fi
echo "pm_busy: $(grep -c '^FAIL' "$R") failed" | tee -a "$R"

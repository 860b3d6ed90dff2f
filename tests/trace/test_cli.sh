#!/usr/bin/env bash
# test_cli.sh: nvlprof info / dump / dump --json on synthetic traces, and `nvlprof run` (no GPU).
source "$(dirname "$0")/../lib.sh"
MK="$PROGS/mktrace"
[ -x "$MK" ] || { fail "mktrace not built ($MK)"; exit 1; }
[ -x "$CLI" ] || { fail "nvlprof not built ($CLI)"; exit 1; }

mkdir -p "$T/d"
"$MK" -o "$T/d/rank0.nvlp" -n 12 -r 0 -p 100
"$MK" -o "$T/d/rank1.nvlp" -n 12 -r 1 -p 101
"$MK" -o "$T/d/rank10.nvlp" -n 3 -r 10 -p 110 --no-end
"$MK" -o "$T/cut.nvlp" -n 40 --cut 30

# ---- top level ----
out=$("$CLI" --version); check_eq "--version" "nvlprof 0.1.0" "$out"
"$CLI" --help >"$T/o" 2>&1; rc=$?
check "--help exits 0 and lists commands" sh -c "[ $rc = 0 ] && grep -q '^  dump ' '$T/o' && grep -q '^  report ' '$T/o'"
"$CLI" frobnicate >"$T/o" 2>"$T/e"; rc=$?
check_eq "unknown command exits 2" 2 "$rc"
check "unknown command: one-line error, then usage" sh -c "head -1 '$T/e' | grep -q \"^nvlprof: unknown command 'frobnicate' (run, info, dump, report, merge, dask, diff or export)\$\" && grep -q usage: '$T/e'"
"$CLI" >/dev/null 2>&1; check_eq "no command exits 2" 2 "$?"

# ---- info ----
"$CLI" info "$T/d/rank0.nvlp" >"$T/info" 2>"$T/e"; rc=$?
check_eq "info exits 0" 0 "$rc"
check "info shows host, pid, rank" grep -q "host node-a, pid 100 (parent 1)" "$T/info"
check "info shows the rank line" grep -q "rank      0 (local 0) of 2" "$T/info"
check "info shows env vars" grep -q "NCCL_P2P_DISABLE=1" "$T/info"
check "info counts nccl records (12 allreduce + 1 send)" grep -Eq "^    nccl +13$" "$T/info"
check "info counts kernels" grep -Eq "^    kernel +12$" "$T/info"
check "info shows drops" grep -q "dropped   5 records" "$T/info"
check "info says complete" grep -q "status    complete (exit)" "$T/info"
check "info shows size and bytes/record" grep -Eq "size      [0-9.]+ [KMG]?i?B compressed, [0-9.]+ bytes/record" "$T/info"
check "info shows library version" grep -q "nvlprof 0.1.0, trace format 2" "$T/info"
"$CLI" info "$T/d" >"$T/info" 2>&1
check_eq "info DIR: files in natural order" "$T/d/rank0.nvlp $T/d/rank1.nvlp $T/d/rank10.nvlp" \
	"$(grep "^$T" "$T/info" | tr '\n' ' ' | sed 's/ $//')"
check "info: a file without END is truncated, with the reader's reason" \
	grep -q "status    truncated: $T/d/rank10.nvlp: ends after frame" "$T/info"
"$CLI" info "$T/cut.nvlp" >"$T/info" 2>&1; rc=$?
check_eq "info on a cut file exits 0" 0 "$rc"
check "info on a cut file says where" grep -q "status    truncated: $T/cut.nvlp: cut short after frame" "$T/info"

# ---- unreadable input ----
echo "not a trace" >"$T/bad.nvlp"
"$CLI" info "$T/bad.nvlp" "$T/d/rank0.nvlp" >"$T/o" 2>"$T/e"; rc=$?
check_eq "info: unreadable file -> exit 1" 1 "$rc"
check_eq "info: one-line error naming the file" "nvlprof: $T/bad.nvlp: not an nvlprof trace" "$(cat "$T/e")"
check "info: continues with the other files" grep -q "pid 100" "$T/o"
"$CLI" dump "$T/missing.nvlp" >"$T/o" 2>"$T/e"; rc=$?
check_eq "dump: missing file -> exit 1" 1 "$rc"
check "dump: missing file named" grep -q "^nvlprof: $T/missing.nvlp: No such file or directory$" "$T/e"
mkdir -p "$T/empty"
"$CLI" dump "$T/empty" >"$T/o" 2>"$T/e"; check_eq "dump: dir without traces -> exit 1" 1 "$?"
"$CLI" dump >/dev/null 2>&1; check_eq "dump without files exits 2" 2 "$?"
"$CLI" dump --bogus "$T/d" >/dev/null 2>&1; check_eq "dump unknown option exits 2" 2 "$?"

# ---- dump (text) ----
"$CLI" dump "$T/d/rank0.nvlp" >"$T/dump" 2>"$T/e"; rc=$?
check_eq "dump exits 0" 0 "$rc"
check "dump: header line first" sh -c "sed -n 2p '$T/dump' | grep -q '^header t_mono=1000000000 .*host=\"node-a\"'"
check "dump: nccl with names resolved" grep -q "^nccl ncclAllReduce t_enter=.* dtype=bf16 .* op=sum .* comm=0xc0ffee00 rank=0 nranks=2 seq=1 " "$T/dump"
check "dump: kernel name from the string table" grep -q '^kernel "ncclDevKernel_AllReduce_Sum_bf16_RING_LL' "$T/dump"
check "dump: note code and message" grep -q '^note activity_on .*msg="CUPTI activity on: \\"kernel\\", memcpy\\nsecond line"' "$T/dump"
check "dump: stack frames as hex" grep -q "^stack id=1 frames=0x400123,0x7f0000001000,0x7f0000002000$" "$T/dump"
check "dump: copy fn and kind" grep -q "^copy cudaMemcpyAsync .*src_device=0 dst_device=1 bytes=268435456 copy_kind=DeviceToDevice" "$T/dump"
check "dump: ncclprof strings" grep -q '^ncclprof ncclAllReduce .*algo="Ring" proto="LL"' "$T/dump"
n=$(grep -vc '^==' "$T/dump")
info_n=$("$CLI" info "$T/d/rank0.nvlp" | awk '/^  records/ {print $2}')
check_eq "dump: one line per record" "$info_n" "$n"

# ---- dump --json ----
"$CLI" dump --json "$T/d" >"$T/json" 2>"$T/e"; rc=$?
check_eq "dump --json DIR exits 0 (a file without END only warns)" 0 "$rc"
check "dump --json: warning for the unfinished file" grep -q "^nvlprof: warning: $T/d/rank10.nvlp: ends after frame" "$T/e"
cat >"$T/check.py" <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
recs = [json.loads(l) for l in lines]          # every line is valid JSON
errors = []
def need(cond, msg):
    if not cond:
        errors.append(msg)
for r in recs:
    for k in ("kind", "name", "file", "pid", "rank"):
        need(k in r, "missing %s in %s" % (k, r.get("kind")))
kinds = {r["kind"] for r in recs}
need(kinds >= {"header","string","nccl","copy","managed","peer","stack","module","drops","end",
               "note","kernel","gpucopy","um","nvlink","device","linksample","clock","ncclprof"},
     "kinds seen: %s" % sorted(kinds))
nccl = [r for r in recs if r["kind"] == "nccl"]
for r in nccl:
    for k in ("rank", "nranks", "comm", "seq", "bytes", "dtype", "t_enter", "dur", "count"):
        need(k in r, "nccl lacks " + k)
need(all(r["comm"].startswith("0x") for r in nccl), "comm is a hex string")
need({r["name"] for r in nccl} == {"ncclAllReduce", "ncclSend"}, "nccl names")
# the record's own rank wins: rank10.nvlp's header says 10 and so do its records here, but the
# writer put rank=r in both, so check one file where they differ instead
r1 = [r for r in nccl if r["file"] == "rank1.nvlp"]
need(r1 and all(r["rank"] == 1 and r["pid"] == 101 for r in r1), "rank1 nccl rank/pid")
need(sorted({r["file"] for r in recs}) == ["rank0.nvlp", "rank1.nvlp", "rank10.nvlp"], "files")
cp = [r for r in recs if r["kind"] == "copy"]
need(cp and cp[0]["name"] == "cudaMemcpyAsync" and cp[0]["src_device"] == 0
     and cp[0]["dst_device"] == 1 and cp[0]["bytes"] == 268435456, "copy record")
mg = [r for r in recs if r["kind"] == "managed"]
need(mg and mg[0]["name"] == "cudaMallocManaged" and mg[0]["bytes"] == 64 << 20, "managed record")
k = [r for r in recs if r["kind"] == "kernel"]
need(k and k[0]["name"].startswith('ncclDevKernel_AllReduce_Sum_bf16_RING_LL("quoted"\\)\t\x01'), "kernel name")
h = [r for r in recs if r["kind"] == "header"]
need(len(h) == 3 and h[0]["header"]["host"] == "node-a" and h[0]["header"]["cmdline"].endswith("caf\u00e9 \u00ff"), "header")
need(h[0]["header"].get("env.NCCL_P2P_DISABLE") == "1", "header env")
n = [r for r in recs if r["kind"] == "note"]
need(n and n[0]["name"] == "activity_on" and n[0]["message"].endswith("memcpy\nsecond line"), "note")
s = [r for r in recs if r["kind"] == "stack"]
need(s and s[0]["frames"] == ["0x400123", "0x7f0000001000", "0x7f0000002000"], "stack frames")
need([r["kind"] for r in recs if r["file"] == "rank0.nvlp"][0] == "header", "header first")
need([r for r in recs if r["kind"] == "end"][0]["name"] == "exit", "end reason")
print("\n".join(errors) if errors else "ok %d records" % len(recs))
sys.exit(1 if errors else 0)
PY
check "dump --json: every line parses and carries the required keys" python3 "$T/check.py" "$T/json"
"$CLI" dump --json "$T/cut.nvlp" >"$T/json" 2>"$T/e"; rc=$?
check_eq "dump --json on a cut file exits 0" 0 "$rc"
check_eq "dump --json on a cut file: one warning line" 1 "$(wc -l <"$T/e")"
check "dump --json on a cut file: warning says where" grep -q "^nvlprof: warning: $T/cut.nvlp: cut short after frame [0-9]* (offset [0-9]* of [0-9]*); read [0-9]* records$" "$T/e"
check "dump --json on a cut file: records up to the cut are valid JSON" \
	python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert len(r) > 20 and r[0]['kind']=='header'" "$T/json"
"$CLI" dump --json "$T/bad.nvlp" "$T/d/rank1.nvlp" >"$T/json" 2>"$T/e"; rc=$?
check_eq "dump --json: unreadable file -> exit 1 at the end" 1 "$rc"
check "dump --json: the other file is still dumped" grep -q '"file":"rank1.nvlp"' "$T/json"

# ---- run ----
# The shim is really preloaded into these commands: keep whatever it writes inside $T.
cd "$T" || exit 1
export NVLPROF_DIR="$T/run-traces"
# A sanitizer build of the shim needs the sanitizer runtime preloaded first (see lib.sh).
SP="${SANLIB:+$SANLIB:}"
L=$(readlink -f "$LIB")
export LD_PRELOAD="$SANLIB"
"$CLI" run -- sh -c 'exit 7' 2>/dev/null; check_eq "run passes the exit status through" 7 "$?"
out=$(LD_PRELOAD="$SANLIB" "$CLI" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check_eq "run sets LD_PRELOAD to the library next to nvlprof" "$SP$L" "$out"
out=$(LD_PRELOAD="${SP}/nonexistent/libx.so" "$CLI" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check_eq "run keeps an existing LD_PRELOAD" "$SP$L:/nonexistent/libx.so" "$out"
out=$(LD_PRELOAD="${SP}/nonexistent/libasan.so.8:/nonexistent/libx.so" "$CLI" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check_eq "run keeps sanitizer runtimes first" "${SP}/nonexistent/libasan.so.8:$L:/nonexistent/libx.so" "$out"
out=$(LD_PRELOAD="$SP$L" "$CLI" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check_eq "run does not add the library twice" "$SP$L" "$out"
out=$(cd "$T" && "$CLI" run -o out/traces -- sh -c 'echo "$NVLPROF_DIR"' 2>/dev/null)
check_eq "run -o DIR sets NVLPROF_DIR (absolute)" "$(cd "$T" && pwd -P)/out/traces" "$out"
check "run -o DIR creates the directory" test -d "$T/out/traces"
ln -s "$CLI" "$T/nvlprof-link"
out=$(LD_PRELOAD="$SANLIB" "$T/nvlprof-link" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check_eq "run through a symlink still finds the library" "$SP$L" "$out"
"$CLI" run >/dev/null 2>"$T/e"; rc=$?
check "run without a command: exit 2 and a clear error" env -u LD_PRELOAD sh -c "[ $rc = 2 ] && grep -q 'nvlprof run: no command given' '$T/e'"
"$CLI" run -o >/dev/null 2>"$T/e"; check_eq "run -o without DIR exits 2" 2 "$?"
"$CLI" run -- /nonexistent/cmd 2>"$T/e"; rc=$?
check "run with a missing command: 127 and the reason" env -u LD_PRELOAD sh -c "[ $rc = 127 ] && grep -q \"nvlprof run: cannot run '/nonexistent/cmd': No such file or directory\" '$T/e'"
cp "$CLI" "$T/lonely-nvlprof"
"$T/lonely-nvlprof" run -- true 2>"$T/e"; rc=$?
check "run without the library next to it: exit 1, says where it looked" env -u LD_PRELOAD sh -c "[ $rc = 1 ] && grep -q 'libnvlprof.so not found next to the nvlprof binary (looked for $T/libnvlprof.so)' '$T/e'"
# (the asserting shells run without the sanitizer runtime: a TSan runtime preloaded into dash
# can crash it)
rc=$(env -u LD_PRELOAD sh -c 'LD_PRELOAD="$1" "$0" run -- sh -c "kill -TERM \$\$"; echo $?' "$CLI" "$SANLIB" 2>/dev/null)
check_eq "run: the job's own death by signal reaches the caller (128+SIGTERM)" 143 "$rc"

# ---- run directories: each run its own, a closing line saying what was recorded ---------------
RUNS="$T/runs"
job() { NVLPROF_CUPTI=0 NVLPROF_DIR="$RUNS" "$CLI" run "$@"; }
job -- "$PROGS/hk_nccl" failseq >/dev/null 2>"$T/r1"; rc=$?
check_eq "run dir: job status kept" 0 "$rc"
d1=$(ls -d "$RUNS"/run-* 2>/dev/null | head -1)
re='/run-[0-9]{8}-[0-9]{6}-[0-9]+$'
check_eq "run dir: a new run-YYYYmmdd-HHMMSS-PID directory" yes "$([[ $d1 =~ $re ]] && echo yes)"
check_eq "run dir: the trace is in it" 1 "$(ls "$d1"/*.nvlp 2>/dev/null | wc -l)"
check_eq "run dir: latest points at it" "$(basename "$d1")" "$(readlink "$RUNS/latest")"
check_eq "run dir: one closing line naming the directory and the traces" \
	"nvlprof run: job exited with status 0; $(cd "$d1" && pwd -P): 1 trace, no drops, no collection gaps" \
	"$(grep '^nvlprof run: ' "$T/r1")"
sleep 1 # the directory name has a one-second stamp (and the pid)
job -- "$PROGS/hk_nccl" failseq >/dev/null 2>/dev/null
check_eq "run dir: a second run gets its own directory" 2 "$(ls -d "$RUNS"/run-* | wc -l)"
check_eq "run dir: latest moves to the new run" "$(ls -d "$RUNS"/run-* | sort | tail -1 | xargs basename)" "$(readlink "$RUNS/latest")"
# -o DIR is used as given, but not mixed with an earlier run's traces
job -o "$T/fixed" -- "$PROGS/hk_nccl" failseq >/dev/null 2>/dev/null
job -o "$T/fixed" -- "$PROGS/hk_nccl" failseq >/dev/null 2>"$T/r2"; rc=$?
check_eq "run -o: refuses to mix runs (exit 2)" 2 "$rc"
check "run -o: says why and what to do" grep -q "nvlprof run: $(cd "$T/fixed" && pwd -P) already holds 1 trace of an earlier run: give a new directory, remove them, or pass --append" "$T/r2"
check_eq "run -o: the earlier trace is untouched, the job did not run" 1 "$(ls "$T/fixed"/*.nvlp | wc -l)"
job -o "$T/fixed" --append -- "$PROGS/hk_nccl" failseq >/dev/null 2>"$T/r3"
check "run --append: mixes on purpose" grep -q "$(cd "$T/fixed" && pwd -P): 2 traces" "$T/r3"
job -o "$T/empty" -- true 2>"$T/r4"
check "run: says when nothing was recorded" grep -q "nvlprof run: job exited with status 0; nothing recorded in $(cd "$T/empty" && pwd -P) (no CUDA or NCCL call was seen)" "$T/r4"
# a trace without END (the process was killed) and drops are counted in the closing line
NVLPROF_CUPTI=0 "$CLI" run -o "$T/k" -- "$PROGS/rt_app" loop >/dev/null 2>"$T/r5" &
runner=$!
for _ in $(seq 1200); do ls "$T/k"/*.nvlp >/dev/null 2>&1 && break; sleep 0.05; done
sleep 0.3
kill -KILL "$(env -u LD_PRELOAD pgrep -P "$runner" | head -1)" 2>/dev/null
{ wait "$runner"; } 2>/dev/null
check "run: a killed job is named with its signal" grep -q "nvlprof run: job killed by signal 9 (Killed); $(cd "$T/k" && pwd -P): 1 trace, 1 without an end (killed?)" "$T/r5"
exit $((FAILED > 0))

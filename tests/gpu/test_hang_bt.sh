#!/usr/bin/env bash
# test_hang_bt.sh: tests/gpu/hang_bt.sh (run a command; if it hangs, every thread's stack, then abort it) without a GPU or cuda-gdb: a command that ends in time keeps its output and exit status; one that hangs is named with its threads, its Python stack comes from faulthandler's SIGABRT, nothing of it outlives the script, status 124; a missing SECS gets a usage line.
source "$(dirname "$0")/../lib.sh"
H="$ROOT/tests/gpu/hang_bt.sh"
out=$(bash "$H" 10 -- sh -c 'echo done-in-time; exit 5' 2>&1)
check_eq "in time: the command's status" 5 "$?"
check_eq "in time: its output, nothing else" done-in-time "$out"
cat >"$T/hang.py" <<'EOF'
import threading, time
def waiter():
    time.sleep(60)
threading.Thread(target=waiter, name="waiter", daemon=True).start()
def stuck_here():
    time.sleep(60)
stuck_here()
EOF
start=$(date +%s)
bash "$H" 1 -- python3 "$T/hang.py" >"$T/hang.out" 2>&1
rc=$?
took=$(($(date +%s) - start))
check_eq "hung: status 124" 124 "$rc"
check "hung: names the session and the Python process" grep -q "== hang_bt: still running after 1 s" "$T/hang.out"
check "hung: the process's threads, with their wait channels" grep -q "^   thread [0-9]* python3 wchan=" "$T/hang.out"
check "hung: faulthandler's Python stack, in the function that hung" grep -q 'line 6 in stuck_here' "$T/hang.out"
check "hung: over within ~10 s (aborted, then killed)" test "$took" -le 15
sleep 0.2
check "hung: no process of it left" sh -c "! pgrep -f '^python3 $T/hang.py'"
bash "$H" >/dev/null 2>"$T/usage.err"
check_eq "no SECS: status 1 and a usage line" "1 1" "$? $(grep -c 'usage: hang_bt.sh' "$T/usage.err")"
exit $((FAILED > 0))

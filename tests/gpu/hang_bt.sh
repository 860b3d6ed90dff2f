#!/usr/bin/env bash
# hang_bt.sh: run a command; if it is still running after SECS, print every thread's native stack of each of its Python processes (HANG_BT_COMM: a pattern of the comm) (cuda-gdb attached in batch mode: the GPU machine has no gdb), then SIGABRT them (Python's faulthandler prints its stacks with PYTHONFAULTHANDLER=1) and SIGKILL the rest.
#   bash tests/gpu/hang_bt.sh SECS -- CMD...      (stdout: the command's output, then the stacks)
# Exit status: the command's where it ended in time, 124 where it hung.
set -u
secs=${1:?usage: hang_bt.sh SECS -- CMD...}
shift
[ "${1:-}" = -- ] && shift
export PYTHONFAULTHANDLER=1
setsid "$@" &
leader=$!
for _ in $(seq $((secs * 10))); do
	kill -0 $leader 2>/dev/null || { wait $leader; exit $?; }
	sleep 0.1
done
echo "== hang_bt: still running after ${secs} s: stacks of session $leader"
pids=$(ps -e -o pid=,sid= | awk -v s=$leader '$2 == s {print $1}')
for p in $pids; do
	echo "== pid $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-200)"
	for t in /proc/$p/task/*; do
		printf '   thread %s %s wchan=%s\n' "${t##*/}" "$(cat $t/comm 2>/dev/null)" "$(cat $t/wchan 2>/dev/null)"
	done
	case "$(cat /proc/$p/comm 2>/dev/null)" in ${HANG_BT_COMM:-python*}) ;; *) continue ;; esac
	# symbols of the libraries that matter only (torch's are too big to load in time); the maps resolve the rest
	timeout ${HANG_BT_GDB_S:-90} cuda-gdb -q -batch -iex 'set auto-solib-add off' -p $p -ex 'set pagination off' \
		-ex 'sharedlibrary nvlprof' -ex 'sharedlibrary cupti' -ex 'sharedlibrary cudart' -ex 'sharedlibrary libcuda' \
		-ex 'sharedlibrary libc\.' -ex 'info threads' -ex 'thread apply all bt 40' 2>&1 |
		grep -v '^\[New LWP\|^warning: \|Reading symbols\|^$' | cut -c1-300
	echo "== pid $p: executable maps"
	awk '$2 ~ /x/ {print $1, $6}' /proc/$p/maps 2>/dev/null | grep 'libcuda\|cupti\|nvlprof\|cudart\|libc\.so' | cut -c1-200
done
kill -ABRT $pids 2>/dev/null
sleep 3
kill -KILL -- -$leader 2>/dev/null
wait $leader 2>/dev/null
exit 124

#!/usr/bin/env bash
# test_messages.sh: what the CLI says when it refuses: every bad argument names itself and what is accepted, every write failure says why (strerror), each with a non-zero exit; the exact first line of stderr is pinned.
. "$(dirname "$0")/../lib.sh"
E="$ROOT/examples/traces/ddp_healthy"
[ -x "$CLI" ] || { fail "missing $CLI (build first)"; exit 1; }

# said NAME EXPECTED_RC EXPECTED_FIRST_LINE ARGS...: nvlprof ARGS exits EXPECTED_RC and its
# stderr's first line is EXPECTED_FIRST_LINE exactly
said() {
	local n=$1 want_rc=$2 want=$3
	shift 3
	"$CLI" "$@" >/dev/null 2>"$T/err"
	local rc=$?
	check_eq "$n: exit $want_rc" "$want_rc" "$rc"
	check_eq "$n: message" "$want" "$(head -1 "$T/err")"
}

# ---- bad arguments: the argument, and what is accepted ----
said "unknown command" 2 "nvlprof: unknown command 'xyz' (run, info, dump, report, merge, dask, diff or export)" xyz
said "export --format xyz" 2 "nvlprof: export: unknown format 'xyz' (perfetto, chrome or sqlite)" export --format xyz "$E"
said "export --format=xyz" 2 "nvlprof: export: unknown format 'xyz' (perfetto, chrome or sqlite)" export --format=xyz "$E"
said "export without --format" 2 "nvlprof: export: no format: --format perfetto, chrome or sqlite is needed" export "$E"
said "export -f without a value" 2 "nvlprof: export: -f needs a format: perfetto, chrome or sqlite" export "$E" -f
said "export -o without a value" 2 "nvlprof: export: -o needs a file name (or - for standard output)" export -f chrome "$E" -o
said "export unknown option" 2 "nvlprof: export: unknown option --bogus (--format FMT, -o OUT, -q, --threshold NAME=VALUE, -j N, --symbols DIR; see --help)" export --bogus "$E"
said "export sqlite to stdout" 2 "nvlprof: export: sqlite needs a file (-o FILE), not stdout" export -f sqlite -o - "$E"
said "report unknown option" 2 "nvlprof: report: unknown option --wat (--json, -o FILE, --html FILE, --threshold NAME=VALUE, -j N, --symbols DIR; see --help)" report --wat "$E"
said "report -o without a value" 2 "nvlprof: report: -o needs a file name" report "$E" -o
said "report --html without a value" 2 "nvlprof: report: --html needs a file name (or - for standard output)" report "$E" --html
said "--threshold without a value" 2 "nvlprof: --threshold needs NAME=VALUE (the names: --help)" report "$E" --threshold
said "--threshold unknown name" 2 "nvlprof: unknown threshold 'foo' in 'foo=1' (the names: --help)" report --threshold foo=1 "$E"
said "--threshold not a number" 2 "nvlprof: bad threshold 'hang_min_ms=abc': the value of hang_min_ms must be a number" report --threshold hang_min_ms=abc "$E"
said "--threshold without =" 2 "nvlprof: bad threshold 'hang_min_ms': NAME=VALUE is needed (the names: --help)" report --threshold hang_min_ms "$E"
said "-j not a number" 2 "nvlprof: -j needs a thread count, 0 to 256 (0: the default), not 'x'" report -j x "$E"
said "-j without a value" 2 "nvlprof: -j needs a thread count, 0 to 256 (0: the default)" report "$E" -j
said "export -j too many" 2 "nvlprof: -j needs a thread count, 0 to 256 (0: the default), not '999'" export -f chrome -j 999 "$E"
said "--symbols without a value" 2 "nvlprof: --symbols needs a directory" report "$E" --symbols
said "diff --fail-if-slower abc" 2 "nvlprof: diff: bad percentage 'abc' for --fail-if-slower (a number, as 5 or 5%)" diff --fail-if-slower abc "$E" "$E"
said "diff --fail-if-slower without a value" 2 "nvlprof: diff: --fail-if-slower needs a percentage (as 5 or 5%)" diff "$E" "$E" --fail-if-slower
said "diff one input" 2 "nvlprof: diff: expected two inputs (BEFORE AFTER), got 1" diff "$E"
said "diff three inputs" 2 "nvlprof: diff: expected two inputs (BEFORE AFTER), '$E' is a third" diff "$E" "$E" "$E"
said "diff unknown option" 2 "nvlprof: diff: unknown option --wat (--json, --html FILE, --fail-if-slower PCT, --threshold NAME=VALUE, -j N, --symbols DIR; see --help)" diff --wat "$E" "$E"
said "run unknown option" 2 "nvlprof run: unknown option '--zzz' (-o DIR, --append, or -- before a command that starts with -)" run --zzz true
said "run -o without a value" 2 "nvlprof run: -o needs a directory" run -o
said "dump unknown option" 2 "nvlprof dump: unknown option '--zz' (--json, --schema)" dump --zz "$E"

# ---- write failures: the file and why ----
said "report -o into a missing directory" 2 "nvlprof: report: cannot write /nonexistent/x.txt: No such file or directory" report -o /nonexistent/x.txt "$E"
said "report --html into a missing directory" 2 "nvlprof: report: cannot write /nonexistent/x.html: No such file or directory" report --html /nonexistent/x.html "$E"
said "diff --html into a missing directory" 2 "nvlprof: diff: cannot write /nonexistent/x.html: No such file or directory" diff --html /nonexistent/x.html "$E" "$E"
said "export perfetto into a missing directory" 2 "nvlprof: export: /nonexistent/x.pftrace: cannot write: No such file or directory" export -f perfetto -o /nonexistent/x.pftrace "$E"
said "export chrome directory under a missing one" 2 "nvlprof: export: /nonexistent/d/: cannot create directory: No such file or directory" export -f chrome -o /nonexistent/d/ "$E"
said "export sqlite into a missing directory" 2 "nvlprof: export: /nonexistent/x.sqlite: cannot create database: No such file or directory" export -f sqlite -o /nonexistent/x.sqlite "$E"
if [ -w /dev/full ]; then
	said "report -o a full disk" 2 "nvlprof: /dev/full: write error: No space left on device" report -o /dev/full "$E"
	said "report --json -o a full disk" 2 "nvlprof: /dev/full: write error: No space left on device" report --json -o /dev/full "$E"
	said "report --html a full disk" 2 "nvlprof: /dev/full: write error: No space left on device" report --html /dev/full "$E"
	said "export perfetto to a full disk" 2 "nvlprof: export: write error (perfetto): No space left on device" export -q -f perfetto -o /dev/full "$E"
	said "export chrome to a full disk" 2 "nvlprof: export: write error (chrome): No space left on device" export -q -f chrome -o /dev/full "$E"
else
	skip "no writable /dev/full: full-disk messages not checked"
fi
exit $((FAILED > 0))

#!/usr/bin/env bash
# test_sqlite.sh: the database files analyzer/sqlite_file.c writes, opened by libsqlite3 (sqlite3
# CLI, python's sqlite3): .dump of every shipped trace equal to the one libsqlite3 itself wrote
# (goldens made with the libsqlite3 build, c761acb), integrity and quick checks, every index
# against its table, payload and key edge cases at 3 page sizes, refusals and write errors.
source "$(dirname "$0")/../lib.sh"
G="$ROOT/tests/export/golden"
PY="python3 $ROOT/tests/export/check_sqlite.py"
for tool in sqlite3 python3; do
	command -v $tool >/dev/null || fail "$tool not installed (Debian: sqlite3, python3)"
done

pyrun() { # NAME ARGS...: check_sqlite.py's PASS/FAIL lines count as ours
	$PY "$@" >"$T/py.out" 2>&1
	local rc=$?
	cat "$T/py.out"
	[ $rc = 0 ] || grep -q '^FAIL' "$T/py.out" || fail "check_sqlite.py $1 exited $rc: $(tail -3 "$T/py.out")"
}

# ---- shipped traces: the same content as libsqlite3 wrote, valid, indexes usable
for d in "$ROOT"/examples/traces/*/; do
	n=$(basename "$d")
	# relative trace paths: RANKS.path is as given
	if (cd "$ROOT" && $CLI export -q -f sqlite -o "$T/$n.sqlite" "examples/traces/$n") 2>"$T/err"; then
		sqlite3 "$T/$n.sqlite" .dump >"$T/$n.dump" 2>"$T/err"
		got="$(sha256sum <"$T/$n.dump" | cut -d' ' -f1) $(wc -l <"$T/$n.dump") lines"
		if [ "${UPDATE:-}" = 1 ]; then echo "$got" >"$G/$n.sqlite.dump"; fi
		check_eq "$n: sqlite3 .dump as libsqlite3 wrote it" "$(cat "$G/$n.sqlite.dump")" "$got"
		check_eq "$n: integrity_check" ok "$(sqlite3 "$T/$n.sqlite" 'PRAGMA integrity_check' 2>&1)"
		check_eq "$n: quick_check" ok "$(sqlite3 "$T/$n.sqlite" 'PRAGMA quick_check' 2>&1)"
		pyrun indexes "$T/$n.sqlite"
	else fail "$n export: $(head -3 "$T/err")"; fi
done

# ---- a generated job (an_gen): indexes over 8 processes, valid
if $PROGS/an_gen -o "$T/gen" --ranks 8 --records 20000 >/dev/null 2>"$T/err" &&
	$CLI export -f sqlite -o "$T/gen.sqlite" "$T/gen" 2>"$T/err"; then
	recs=$(sed -n 's/.* written: \([0-9]*\) records.*/\1/p' "$T/err")
	rows=$(sqlite3 "$T/gen.sqlite" "SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL) + (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY) + (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME) + (SELECT count(*) FROM NCCL_CALLS) + (SELECT count(*) FROM UNIFIED_MEMORY_EVENTS) + (SELECT count(*) FROM LINK_SAMPLES)")
	[ -n "$recs" ] && [ "$rows" -gt 0 ] && [ "$rows" -le "$recs" ] && pass "an_gen job: $rows rows of $recs records" || fail "an_gen job: $rows rows, $recs records"
	check_eq "an_gen job: integrity_check" ok "$(sqlite3 "$T/gen.sqlite" 'PRAGMA integrity_check' 2>&1)"
	pyrun indexes "$T/gen.sqlite"
else fail "an_gen job export: $(head -3 "$T/err")"; fi

# ---- the writer's edge cases (tests/progs/sqf_cases.c) at 3 page sizes
for U in 512 4096 65536; do
	if $PROGS/sqf_cases $U "$T/c$U.db" 300000 >"$T/c$U.out" 2>"$T/err"; then
		check_eq "U=$U cases: integrity_check" ok "$(sqlite3 "$T/c$U.db" 'PRAGMA integrity_check' 2>&1)"
		check_eq "U=$U cases: quick_check" ok "$(sqlite3 "$T/c$U.db" 'PRAGMA quick_check' 2>&1)"
		check_eq "U=$U cases: page size" $U "$(sqlite3 "$T/c$U.db" 'PRAGMA page_size')"
		pyrun cases "$T/c$U.db" $U 300000
		# libsqlite3 takes it on from here: a row added, still valid
		sqlite3 "$T/c$U.db" "INSERT INTO big VALUES(5, 5, 'added'); PRAGMA integrity_check" >"$T/out" 2>&1
		check_eq "U=$U cases: writable by libsqlite3 afterwards" ok "$(cat "$T/out")"
	else fail "U=$U sqf_cases: $(head -3 "$T/err")"; fi
done

# ---- refusals: nothing written, a file already there kept
echo old >"$T/keep.db"
$PROGS/sqf_cases 4096 "$T/keep.db" 10 bad-order >/dev/null 2>"$T/err"; check_eq "rows out of rowid order: refused" 1 $?
grep -q 'rows must come in rowid order' "$T/err" && check_eq "out of order: the old file kept" old "$(cat "$T/keep.db")" || fail "out of order: $(cat "$T/err")"
$PROGS/sqf_cases 4096 "$T/key.db" 10 bad-key >/dev/null 2>"$T/err"; check_eq "a text index key: refused" 1 $?
grep -q 'not an integer' "$T/err" && [ ! -e "$T/key.db" ] && pass "text key: said, no file" || fail "text key: $(cat "$T/err")"
ls "$T"/*.tmp-* >/dev/null 2>&1 && fail "a temporary file left: $(ls "$T"/*.tmp-*)" || pass "no temporary file left"

# ---- a write that fails (file size limit: EFBIG, as ENOSPC would): exit 2, said, old file kept
echo old >"$T/full.sqlite"
(trap '' XFSZ; ulimit -f 64; exec $CLI export -q -f sqlite -o "$T/full.sqlite" "$ROOT/examples/traces/uma_thrash") 2>"$T/err"
check_eq "write error: exit 2" 2 $?
grep -q "^nvlprof: export: $T/full.sqlite: write failed: File too large$" "$T/err" && pass "write error: one line naming the file" || fail "write error: $(cat "$T/err")"
check_eq "write error: the old file kept, no truncated database" old "$(cat "$T/full.sqlite")"
ls "$T"/full.sqlite.tmp-* >/dev/null 2>&1 && fail "write error: temporary file left" || pass "write error: temporary file removed"

# ---- the output: a link is replaced by the database (its target untouched), a file replaced
echo target >"$T/target"
ln -s "$T/target" "$T/link.sqlite"
$CLI export -q -f sqlite -o "$T/link.sqlite" "$ROOT/examples/traces/p2p_staged" 2>"$T/err"
[ -f "$T/link.sqlite" ] && [ ! -L "$T/link.sqlite" ] && [ "$(cat "$T/target")" = target ] &&
	check_eq "link replaced: a database" ok "$(sqlite3 "$T/link.sqlite" 'PRAGMA integrity_check')" || fail "link: $(ls -l "$T/link.sqlite"; cat "$T/err")"
$CLI export -q -f sqlite -o "$T/link.sqlite" "$ROOT/examples/traces/ddp_healthy" 2>"$T/err"
check_eq "existing database replaced, not added to" "$(sqlite3 "$T/ddp_healthy.sqlite" 'SELECT count(*) FROM NCCL_CALLS')" "$(sqlite3 "$T/link.sqlite" 'SELECT count(*) FROM NCCL_CALLS')"
check_eq "mode of a plain create (umask 022: 644)" 644 "$(umask 022; rm -f "$T/m.sqlite"; $CLI export -q -f sqlite -o "$T/m.sqlite" "$ROOT/examples/traces/p2p_staged" && stat -c %a "$T/m.sqlite")"
$CLI export -q -f sqlite -o "$T/nodir/x.sqlite" "$ROOT/examples/traces/p2p_staged" 2>"$T/err"; check_eq "missing directory: exit 2" 2 $?
grep -q "$T/nodir/x.sqlite: cannot create database: No such file or directory" "$T/err" && pass "missing directory: said" || fail "missing directory: $(cat "$T/err")"
ldd "$CLI" | grep -q sqlite && fail "nvlprof links libsqlite3" || pass "nvlprof does not link libsqlite3"
exit 0

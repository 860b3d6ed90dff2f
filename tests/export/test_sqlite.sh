#!/usr/bin/env bash
# test_sqlite.sh: the database files analyzer/sqlite_file.c writes, opened by libsqlite3 (sqlite3
# CLI, python's sqlite3): .dump of every shipped trace equal to the one libsqlite3 itself wrote
# (goldens made with the libsqlite3 build, c761acb; regenerated from the direct writer for issue 28's
# kernel names, mangledName and new StringIds rows: no libsqlite3 writer rebuilt for it), integrity and quick checks, every index
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
		echo "$got" >"$T/$n.sqlite.dump"
		golden_cmp "$n: sqlite3 .dump as libsqlite3 wrote it" "$G/$n.sqlite.dump" "$T/$n.sqlite.dump"
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

# ---- threads (-j N: encoders, one writer): the same file byte for byte whatever N
cmp_j() { # NAME DIR: -j 1, 2, 3, 8 and the default write the same file
	local name=$1 dir=$2 j ok=1
	$CLI export -q -j 1 -f sqlite -o "$T/j1.sqlite" "$dir" 2>"$T/err" || { fail "$name -j 1: $(head -3 "$T/err")"; return; }
	for j in 2 3 8 0; do
		if [ $j = 0 ]; then $CLI export -q -f sqlite -o "$T/jn.sqlite" "$dir" 2>"$T/err"
		else $CLI export -q -j $j -f sqlite -o "$T/jn.sqlite" "$dir" 2>"$T/err"; fi
		cmp -s "$T/j1.sqlite" "$T/jn.sqlite" || { ok=0; fail "$name: -j $j differs from -j 1 ($(head -2 "$T/err"))"; }
	done
	[ $ok = 1 ] && pass "$name: -j 1, 2, 3, 8 and the default: the same file"
	check_eq "$name: integrity_check" ok "$(sqlite3 "$T/jn.sqlite" 'PRAGMA integrity_check' 2>&1)"
}
cmp_j "an_gen 8 ranks" "$T/gen"
check_eq "an_gen 8 ranks: .dump of -j 8 as of -j 1" "$(sqlite3 "$T/j1.sqlite" .dump | sha256sum)" "$(sqlite3 "$T/jn.sqlite" .dump | sha256sum)"
# processes with texts in different orders (the writer maps each process's text ids)
mkdir -p "$T/mix"
cp "$ROOT"/examples/traces/uma_thrash/*.nvlp "$ROOT"/examples/traces/p2p_staged/*.nvlp "$ROOT"/examples/traces/ddp_healthy/*.nvlp "$T/mix/"
cmp_j "3 jobs' traces in one directory" "$T/mix"
s1=$(sqlite3 "$T/jn.sqlite" "SELECT count(DISTINCT mangledName) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.mangledName JOIN StringIds d ON d.id = k.demangledName JOIN StringIds h ON h.id = k.shortName")
s2=$(sqlite3 "$T/jn.sqlite" "SELECT count(*) FROM StringIds")
[ "${s1:-0}" -gt 3 ] && [ "$s2" -ge "$s1" ] && pass "mixed job: kernel names map to StringIds ($s1 of $s2)" || fail "mixed job: kernel names $s1, StringIds $s2"
check_eq "mixed job: every NCCL call id of a kernel is a call of its rank" 0 "$(sqlite3 "$T/jn.sqlite" "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN NCCL_CALLS c ON c.id = k.ncclCallId WHERE k.ncclCallId IS NOT NULL AND (c.id IS NULL OR c.rankId != k.rankId)")"
# many processes, more than threads
if $PROGS/an_gen -o "$T/many" --ranks 40 --records 1500 >/dev/null 2>"$T/err"; then
	cmp_j "an_gen 40 ranks" "$T/many"
	check_eq "40 ranks: every rank's rows" 40 "$(sqlite3 "$T/jn.sqlite" 'SELECT count(DISTINCT rankId) FROM NCCL_CALLS')"
	pyrun indexes "$T/jn.sqlite"
else fail "an_gen 40 ranks: $(head -3 "$T/err")"; fi
# a write that fails while the encoders run: exit 2, said once, old file kept, no temporary file
for j in 0 8; do
	echo old >"$T/full8.sqlite"
	(trap '' XFSZ; ulimit -f 256; [ $j = 0 ] || set -- -j $j; exec $CLI export -q "$@" -f sqlite -o "$T/full8.sqlite" "$T/gen") 2>"$T/err"
	check_eq "write error, 8 ranks, -j $j: exit 2" 2 $?
	[ "$(cat "$T/err")" = "nvlprof: export: $T/full8.sqlite: write failed: File too large" ] && pass "write error -j $j: one line" || fail "write error -j $j: $(cat "$T/err")"
	check_eq "write error -j $j: the old file kept" old "$(cat "$T/full8.sqlite")"
	ls "$T"/full8.sqlite.tmp-* >/dev/null 2>&1 && fail "write error -j $j: temporary file left" || pass "write error -j $j: temporary file removed"
done
# memory running out: the Nth allocation of 1 MiB (the writer's buffer, then chunks of rows) fails (a preloaded
# malloc; not under ASan/TSan, whose runtime must come first): exit 2, one line, old file kept
if ldd "$CLI" | grep -q 'libasan\|libtsan'; then skip "out of memory: not under ASan/TSan (malloc preload)"
elif cat >"$T/failmalloc.c" <<'CEOF' && gcc -shared -fPIC -O2 -o "$T/failmalloc.so" "$T/failmalloc.c"
#include <stdlib.h>
extern void *__libc_malloc(size_t);
static long seen;
void *malloc(size_t n) /* the FAIL_AFTER-th malloc of 1 MiB and the ones after it fail */
{
	if (n == 1 << 20 && __atomic_add_fetch(&seen, 1, __ATOMIC_RELAXED) > atol(getenv("FAIL_AFTER") ?: "1000000"))
		return NULL;
	return __libc_malloc(n);
}
CEOF
then
	# How many chunks are malloc'ed depends on the threads' timing: a chunk the writer has written
	# goes back to a pool, and an encoder that starts late takes its first chunk from there. The
	# writer's buffer and one chunk are certain; measured on this job (one CPU, another process
	# busy on it, 40 runs): -j 8 made 10-17 allocations of 1 MiB, -j 2 6-13. The old 8:8 (9 needed,
	# "one chunk per encoder") failed when fewer came (1 run in 19): each case here needs at most 4.
	for ja in 2:1 2:2 8:1 8:3; do j=${ja%:*} after=${ja#*:}
		echo old >"$T/oom.sqlite"
		LD_PRELOAD="$T/failmalloc.so" FAIL_AFTER=$after $CLI export -q -j $j -f sqlite -o "$T/oom.sqlite" "$T/gen" 2>"$T/err"
		rc=$?
		[ $rc = 2 ] && [ "$(cat "$T/err")" = "nvlprof: export: $T/oom.sqlite: out of memory" ] && [ "$(cat "$T/oom.sqlite")" = old ] &&
			! ls "$T"/oom.sqlite.tmp-* >/dev/null 2>&1 && pass "-j $j, chunk $after fails: exit 2, out of memory said, old file kept, no temporary file" ||
			fail "-j $j, chunk $after fails: exit $rc: $(head -3 "$T/err"), file $(head -c 16 "$T/oom.sqlite"), $(ls "$T"/oom.sqlite.tmp-* 2>&1)"
	done
	echo old >"$T/oom.sqlite" # -j 1 writes rows as they come: its 1 MiB is the writer's buffer
	LD_PRELOAD="$T/failmalloc.so" FAIL_AFTER=0 $CLI export -q -j 1 -f sqlite -o "$T/oom.sqlite" "$T/gen" 2>"$T/err"
	check_eq "-j 1, no memory for the writer's buffer: exit 2" 2 $?
	[ "$(cat "$T/err")" = "nvlprof: export: $T/oom.sqlite: cannot create database: Cannot allocate memory" ] && [ "$(cat "$T/oom.sqlite")" = old ] && pass "-j 1: said, old file kept" || fail "-j 1 no memory: $(cat "$T/err")"
	LD_PRELOAD="$T/failmalloc.so" FAIL_AFTER=100000 $CLI export -q -f sqlite -o "$T/oom.sqlite" "$T/gen" 2>"$T/err"
	cmp -s "$T/oom.sqlite" "$T/gen.sqlite" && pass "the preload itself changes nothing" || fail "with the preload: $(head -3 "$T/err")"
else fail "cannot build the malloc preload"; fi

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

#!/usr/bin/env bash
# test_sqlite.sh: the database files nvlprof writes through libsqlite3, read back by the sqlite3
# CLI and python's sqlite3: .dump of every shipped trace equal to its golden (made by the earlier
# direct file writer; the libsqlite3 export matches them unchanged), integrity and quick checks,
# every index against its table, the same file whatever -j, write errors and memory running out
# (exit 2, one line, the old file kept, no temporary file left).
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
# memory running out: the Nth allocation (malloc, realloc) after the database's temporary file is
# made fails, and every one after it (a preloaded malloc; not under ASan/TSan, whose runtime must
# come first): exit 2, one line, old file kept, no temporary file. N: fractions of the count one
# whole export makes (said by the preload with FAIL_COUNT), so a libsqlite3 that allocates more
# or less still has each N land inside the export.
if ldd "$CLI" | grep -q 'libasan\|libtsan'; then skip "out of memory: not under ASan/TSan (malloc preload)"
elif cat >"$T/failmalloc.c" <<'CEOF' && gcc -shared -fPIC -O2 -o "$T/failmalloc.so" "$T/failmalloc.c" -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
extern void *__libc_malloc(size_t);
extern void *__libc_realloc(void *, size_t);
static long seen, armed;
static int fails(void)
{
	return armed && __atomic_add_fetch(&seen, 1, __ATOMIC_RELAXED) > atol(getenv("FAIL_AFTER") ?: "9000000000000");
}
void *malloc(size_t n) { return fails() ? NULL : __libc_malloc(n); }
void *realloc(void *p, size_t n) { return fails() ? NULL : __libc_realloc(p, n); }
int mkostemp(char *t, int flags) /* the export's temporary database: counting starts */
{
	int (*real)(char *, int) = (int (*)(char *, int))dlsym(RTLD_NEXT, "mkostemp");
	int fd = real(t, flags);
	armed = 1;
	return fd;
}
__attribute__((destructor)) static void said(void)
{
	FILE *f = getenv("FAIL_COUNT") ? fopen(getenv("FAIL_COUNT"), "w") : NULL;
	if (f)
		fprintf(f, "%ld\n", seen), fclose(f);
}
CEOF
then
	LD_PRELOAD="$T/failmalloc.so" FAIL_COUNT="$T/count" $CLI export -q -j 1 -f sqlite -o "$T/oom.sqlite" "$T/gen" 2>"$T/err"
	cmp -s "$T/oom.sqlite" "$T/gen.sqlite" && pass "the preload itself changes nothing" || fail "with the preload: $(head -3 "$T/err")"
	total=$(cat "$T/count" 2>/dev/null || echo 0)
	[ "$total" -gt 1000 ] && pass "one export: $total allocations counted" || fail "allocations counted: $total"
	for j in 1 0; do
		for after in 0 1 $((total / 1000)) $((total / 10)) $((total / 2)) $((total * 9 / 10)); do
			echo old >"$T/oom.sqlite"
			[ $j = 0 ] && set -- || set -- -j $j
			LD_PRELOAD="$T/failmalloc.so" FAIL_AFTER=$after $CLI export -q "$@" -f sqlite -o "$T/oom.sqlite" "$T/gen" 2>"$T/err"
			rc=$?
			[ $rc = 2 ] && [ "$(cat "$T/err")" = "nvlprof: export: $T/oom.sqlite: out of memory" ] && [ "$(cat "$T/oom.sqlite")" = old ] &&
				! ls "$T"/oom.sqlite.tmp-* >/dev/null 2>&1 && pass "-j ${j/0/default}, allocation $after of $total fails: exit 2, out of memory said, old file kept, no temporary file" ||
				fail "-j $j, allocation $after of $total fails: exit $rc: $(head -3 "$T/err"), file $(head -c 16 "$T/oom.sqlite"), $(ls "$T"/oom.sqlite.tmp-* 2>&1)"
		done
	done
else fail "cannot build the malloc preload"; fi

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
# libsqlite3 linked in statically: the analyzer needs no libsqlite3.so where it runs
ldd "$CLI" | grep -q libsqlite3 && fail "nvlprof needs libsqlite3.so at run time" || pass "nvlprof: libsqlite3 linked in, no libsqlite3.so needed"
# one transaction without a journal (journal_mode OFF): nothing left beside the database
ls "$T"/*-journal "$T"/*-wal >/dev/null 2>&1 && fail "a journal file left: $(ls "$T"/*-journal "$T"/*-wal)" || pass "no journal or WAL file left beside the databases"
exit 0

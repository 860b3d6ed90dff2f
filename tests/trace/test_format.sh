#!/usr/bin/env bash
# test_format.sh: every shipped trace (version 1) reads as it did before traces carried a schema, a
# version 2 copy of each dumps the same records, and a newer writer's trace through the CLI.
source "$(dirname "$0")/../lib.sh"
[ -x "$CLI" ] || { fail "nvlprof not built ($CLI)"; exit 1; }
REHDR="$PROGS/sh_rehdr"
NEWER="$B/tests/test_trace_schema"
cd "$ROOT" || exit 1

# ---- old traces: digests of `dump --json` and `info` made by nvlprof 0db5455 (before the
# schema); a trace kept since, by the build that added it (lazy_segv, bytes2_ddp: 106d82f).
# --regen-goldens rewrites them with this build (only for a deliberate output change, or to add
# a trace's: then only its lines may be new).
# Fields added since (FORMAT.md: they read as 0 in older traces) are taken out of dump's lines
# first, where 0: fatal.stack (2.2).
DIG=tests/trace/old_traces.sha256
since() { sed 's/^\({"file":[^}]*"kind":"fatal",.*\),"stack":0,/\1,/'; }
digest() { { "$CLI" $1 "$2" 2>&1; echo "status $?"; } | since | sha256sum | cut -c1-64; }
: >"$T/dig"
for f in $(git ls-files '*.nvlp'); do
	for c in "dump --json" info; do
		echo "$(digest "$c" "$f") $c $f" >>"$T/dig"
	done
done
if [ "$REGEN" = 1 ]; then
	cp "$T/dig" "$DIG" && echo "REGEN: $DIG"
else
	n=$(wc -l <"$DIG")
	check "the digests cover every shipped trace ($((n / 2)) files)" \
		test "$(cut -d' ' -f2- "$T/dig" | sort)" = "$(cut -d' ' -f2- "$DIG" | sort)"
	diff "$DIG" "$T/dig" >"$T/dd"
	check_eq "every shipped trace: dump --json and info as before the schema (lines that differ)" \
		0 "$(grep -c '^>' "$T/dd")"
	grep '^>' "$T/dd" | head -5
fi

# ---- a version 2 copy of each shipped trace holds the same records ----
if [ -x "$REHDR" ]; then
	nv=0 same=0 bad=""
	mkdir -p "$T/v2"
	for f in $(git ls-files '*.nvlp'); do
		c=$T/v2/$(basename "$f") # dump names the file: the same name
		"$REHDR" "$f" "$c" 2>/dev/null || { bad="$bad $f(copy)"; continue; }
		nv=$((nv + 1))
		if cmp -s <("$CLI" dump --json "$f" 2>/dev/null) <("$CLI" dump --json "$c" 2>/dev/null); then
			same=$((same + 1))
		else
			bad="$bad $f"
		fi
	done
	check_eq "a version 2 copy of every shipped trace dumps the same records ($nv copies)${bad:+:$bad}" \
		"$nv" "$same"
	f=$(git ls-files 'examples/traces/ddp_healthy/*.nvlp' | head -1)
	"$REHDR" "$f" "$T/v2.nvlp"
	check "the copy is version 2 with its own schema" sh -c \
		"'$CLI' dump --schema '$T/v2.nvlp' | head -2 | tr '\n' '|' | grep -q '^== .*: format 2.2, its own schema|nvlp-schema 2.2|'"
	mkdir -p "$T/j1" "$T/j2"
	for f in $(git ls-files 'examples/traces/ddp_straggler/*.nvlp'); do
		cp "$f" "$T/j1/" && "$REHDR" "$f" "$T/j2/$(basename "$f")"
	done
	"$CLI" report "$T/j1" >"$T/r1" 2>/dev/null
	"$CLI" report "$T/j2" >"$T/r2" 2>/dev/null
	check "report of a job copied to version 2: the same text" sh -c \
		"sed 's#$T/j1#J#g' '$T/r1' >'$T/r1n'; sed 's#$T/j2#J#g' '$T/r2' >'$T/r2n'; cmp '$T/r1n' '$T/r2n' && test -s '$T/r1n'"
else
	fail "sh_rehdr not built ($REHDR)"
fi

# ---- schemas through the CLI ----
f=examples/traces/ddp_healthy/$(ls examples/traces/ddp_healthy | grep nvlp | head -1)
"$CLI" dump --schema "$f" >"$T/s1" 2>&1
check "dump --schema of a version 1 trace: the built-in schema of version 1" sh -c \
	"head -2 '$T/s1' | tr '\n' '|' | grep -q '^== .*: format 1.0, no schema in the file: the built-in one of version 1|nvlp-schema 1.0|'"
check "dump --schema names what coded fields hold" sh -c \
	"grep -q '^    aux, aux2 of ncclCommSplit: child_comm_hash, color$' '$T/s1' && grep -q '^    copy_kind: NVLP_MEMCPY_KINDS' '$T/s1'"
if [ -x "$NEWER" ]; then
	"$NEWER" --newer-in "$T"
	"$CLI" info "$T/newer.nvlp" >"$T/i" 2>&1
	check "info on a newer writer's trace: complete, its unknown kinds and fields named" sh -c \
		"grep -q 'status    complete' '$T/i' && grep -q '^  unknown   5 records skipped; kinds and fields this nvlprof does not know: nccl.future_a nccl.future_b gizmo widget drops$' '$T/i'"
	"$CLI" dump "$T/newer.nvlp" >"$T/d" 2>"$T/e"
	check_eq "dump of a newer writer's trace: every known record, no warning" \
		"header nccl string nccl copy kernel nccl nccl end|" \
		"$(cut -d' ' -f1 "$T/d" | grep -v '^==' | tr '\n' ' ' | sed 's/ $//')|$(cat "$T/e")"
	"$CLI" dump --schema "$T/newer.nvlp" >"$T/s2"
	check "dump --schema of it: version 2.7, what is not known" sh -c \
		"grep -q ': format 2.7, its own schema$' '$T/s2' && grep -q '^kind gizmo 40 blob g1:U g2:X g3:T$' '$T/s2' && tail -1 '$T/s2' | grep -q '^not known to this nvlprof (skipped): nccl.future_a nccl.future_b gizmo widget drops$'"
else
	fail "test_trace_schema not built ($NEWER)"
fi

# ---- the shim writes its schema first in every trace ----
if [ -x "$PROGS/hk_nccl" ] && [ -f "$LIB" ]; then
	NVLPROF_CUPTI=0 NVLPROF_DIR="$T/shim" LD_PRELOAD="$SANLIB" "$CLI" run -o "$T/shim" -- "$PROGS/hk_nccl" failseq >/dev/null 2>&1
	f=$(ls "$T"/shim/*.nvlp 2>/dev/null | head -1)
	"$CLI" dump --schema "$f" >"$T/s3" 2>&1
	"$CLI" info "$f" >"$T/i3" 2>&1
	check "a trace the shim wrote: version 2.2 with the schema of this build, read whole" sh -c \
		"test -n '$f' && grep -q ': format 2.2, its own schema$' '$T/s3' && grep -q '^  recorder  nvlprof .*, trace format 2$' '$T/i3' && grep -q 'status    complete' '$T/i3' && ! grep -q '^  unknown' '$T/i3'"
else
	fail "hk_nccl or the library not built"
fi
exit 0

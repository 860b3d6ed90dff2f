#!/usr/bin/env bash
# test_symbols.sh: a trace carries the build-id of every module its stacks touch and the symbols
# of their frames; a module file that changed, vanished or is not a regular file gives none.
source "$(dirname "$0")/../lib.sh"
export NVLPROF_CUPTI=0
READ="$PROGS/hk_read"
CUDAP="$PROGS/hk_cuda"
for f in "$READ" "$CUDAP" "$LIB" "$CLI"; do
	[ -e "$f" ] || { fail "missing $f (build first)"; exit 1; }
done

# run NAME CMD...: CMD under the shim, its trace as hk_read text in $T/NAME.txt
run() {
	local name=$1; shift
	mkdir -p "$T/$name"
	NVLPROF_DIR="$T/$name" LD_PRELOAD="$PRELOAD" "$@" >"$T/$name.out" 2>"$T/$name.err"
	local rc=$?
	"$READ" "$T/$name"/*.nvlp >"$T/$name.txt"
	return $rc
}
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# id_of FILE: the GNU build-id of an ELF file, in hex
id_of() { readelf -n "$1" 2>/dev/null | sed -n 's/^ *Build ID: *//p' | head -1; }
# frames TXT: every stack frame of a trace, one per line
frames() { sed -n 's/^stack .* frames=//p' "$1" | tr ',' '\n' | sort -u; }

# --- the copies' stacks: modules, build-ids, symbols ---
run cu "$CUDAP" copies
check_eq "cu: status" 0 "$?"
check "cu: has stacks" test "$(frames "$T/cu.txt" | wc -l)" -gt 0
ok_mod=1 ok_id=1 ok_sym=1 nsym_prog=0
mapfile -t MODS < <(grep '^module ' "$T/cu.txt")
mapfile -t SYMS < <(grep '^symbol ' "$T/cu.txt")
declare -A seen
while read -r pc; do
	line=""
	for m in "${MODS[@]}"; do
		s=$(field "$m" start) e=$(field "$m" end)
		if ((pc >= s && pc < e)); then line=$m; break; fi
	done
	[ -n "$line" ] || { ok_mod=0; continue; }
	base=$(field "$line" base)
	path=$(field "$line" blob)
	if [ -z "${seen[$base]:-}" ]; then
		seen[$base]=1
		ids=$(grep -c "^buildid base=$base " "$T/cu.txt")
		got=$(grep -m1 "^buildid base=$base " "$T/cu.txt" | sed 's/.* id=//')
		want=$(id_of "$path")
		if [ "$ids" != 1 ] || [ -z "$want" ] || [ "$got" != "$want" ]; then
			ok_id=0
			echo "    module $path: $ids BUILDID records, id '$got', file's '$want'"
		fi
	fi
	# The program keeps its .symtab: each of its frames (return address - 1) has a SYMBOL.
	if [ "$(basename "$path")" = hk_cuda ]; then
		off=$((pc - base - 1)) hit=""
		for y in "${SYMS[@]}"; do
			[ "$(field "$y" base)" = "$base" ] || continue
			lo=$(field "$y" offset) n=$(field "$y" size)
			((n == 0)) && n=1
			if ((off >= lo && off < lo + n)); then hit=$y; break; fi
		done
		if [ -n "$hit" ]; then nsym_prog=$((nsym_prog + 1)); else ok_sym=0; echo "    no symbol for $pc"; fi
	fi
done < <(frames "$T/cu.txt")
check_eq "cu: every frame lies in a MODULE" 1 "$ok_mod"
check_eq "cu: each such module has one BUILDID, the file's" 1 "$ok_id"
check_eq "cu: every frame in the program has a SYMBOL" 1 "$ok_sym"
check "cu: program frames checked ($nsym_prog)" test "$nsym_prog" -gt 5
check_eq "cu: the managed allocation's frame is named" 1 \
	"$(grep -c '^symbol .* blob=alloc_managed_here' "$T/cu.txt")"
check "cu: libc frames named from .dynsym" grep -q '^symbol .* blob=__libc_start_main$' "$T/cu.txt"
check_eq "cu: SYMBOLs before END" 0 "$(sed -n '/^end /,$p' "$T/cu.txt" | grep -c '^symbol ')"
# The analyzer's dump shows them too.
dump=$("$CLI" dump --json "$T/cu"/*.nvlp)
check_eq "dump: buildid records" "$(grep -c '^buildid ' "$T/cu.txt")" "$(grep -c '"kind":"buildid"' <<<"$dump")"
check_eq "dump: symbol records" "$(grep -c '^symbol ' "$T/cu.txt")" "$(grep -c '"kind":"symbol"' <<<"$dump")"
check "dump: the copies' caller named" grep -q '"kind":"symbol","name":"mode_copies"' <<<"$dump"

# --- the program's file changes before the trace ends: replaced by another ELF, by a FIFO,
# truncated, deleted. Never a SYMBOL from a file that is not the one loaded, never a hang. ---
for how in replaced fifo truncated deleted; do
	d="$T/odd-$how"
	mkdir -p "$d/bin"
	cp "$CUDAP" "$d/bin/hk_cuda"
	mkdir -p "$d/tr"
	NVLPROF_DIR="$d/tr" LD_PRELOAD="$PRELOAD" timeout 60 "$d/bin/hk_cuda" copies-wait "$d/ready" "$d/go" \
		>"$d/out" 2>"$d/err" &
	pid=$!
	for _ in $(seq 2000); do [ -e "$d/ready" ] && break; sleep 0.01; done
	case $how in
	replaced) cp "$READ" "$d/new" && mv -f "$d/new" "$d/bin/hk_cuda" ;;
	fifo) rm -f "$d/bin/hk_cuda" && mkfifo "$d/bin/hk_cuda" ;;
	truncated) head -c 1000 "$CUDAP" >"$d/new" && mv -f "$d/new" "$d/bin/hk_cuda" ;;
	deleted) rm -f "$d/bin/hk_cuda" ;;
	esac
	touch "$d/go"
	wait "$pid"
	check_eq "$how: status" 0 "$?"
	"$READ" "$d"/tr/*.nvlp >"$d/txt"
	check_eq "$how: trace complete" 1 "$(sed -n 's/^complete=//p' "$d/txt")"
	base=$(grep '^module ' "$d/txt" | grep "blob=$d/bin/hk_cuda" | head -1 | sed 's/^module base=\([^ ]*\) .*/\1/')
	check "$how: the program's module recorded" test -n "$base"
	check_eq "$how: its build-id recorded" 1 "$(grep -c "^buildid base=$base " "$d/txt")"
	check_eq "$how: no symbol from the changed file" 0 "$(grep -c "^symbol base=$base " "$d/txt")"
	check "$how: libc's symbols still there" grep -q '^symbol .* blob=__libc_start_main$' "$d/txt"
done

exit $((FAILED > 0))

#!/bin/sh
# Prints the N longest functions (column-0 definition line to column-0 `}`) of the given C files.
# Usage: tests/funclen.sh [-n N] file.c...
n=15
[ "$1" = "-n" ] && { n=$2; shift 2; }
awk '
FNR == 1 { infn = 0 }
!infn && /^[A-Za-z_][A-Za-z0-9_ \t\*]*[ \t\*]([A-Za-z_][A-Za-z0-9_]*)\(/ && !/;[ \t]*$/ {
	s = $0; sub(/\(.*/, "", s); k = split(s, w, /[ \t\*]+/); name = w[k]
	start = FNR; infn = 1; file = FILENAME; next
}
infn && /^}/ { printf "%5d %s:%d %s\n", FNR - start + 1, file, start, name; infn = 0 }
' "$@" | sort -rn | head -n "$n"

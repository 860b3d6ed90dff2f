#!/usr/bin/env python3
"""shim_layers.py: the shim's calls between files make no loop, and its files and functions stay
short (docs/ARCHITECTURE.md, "The shim").

  python3 tests/runtime/shim_layers.py BUILD/lib [--graph]

Reads the shim's objects (BUILD/lib/{preload,cupti,trace}/*.o) with nm: a file calls another when
it uses a symbol the other defines (functions and data alike). Calls go one way: the hooks and the
modules call the core, the core reaches a module only through the module table (preload/rt_module.c)
or a hook it was given at run time. Prints each loop (its files, and one symbol for each call in
it); then each source file of preload/, cupti/ and trace/ (.c, .cc, .h; not preload/nccl/, NCCL's
own headers) longer than 800 lines and each function longer than 60 (tests/analyzer/layers.py's
limits and long_functions); and "shim layers: N files, N calls between files, N loops, N too long";
exits 1 on any loop or anything too long.
--graph prints every call between files (FILE -> FILE ...).
"""
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from nm_symbols import call_edges, symbols as nm_symbols  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analyzer"))
from layers import MAX_FILE_LINES, MAX_FUNC_LINES, long_functions, loops  # noqa: E402
# (the analyzer's loop finder, Tarjan's components, and its length limits)

DIRS = ("preload", "cupti", "trace")


def symbols(libdir):
    """{source file: (defined, used)} for every shim object, named by its source path."""
    out = {}
    for d in DIRS:
        for o in sorted(glob.glob(os.path.join(libdir, d, "*.o"))):
            base = os.path.join(d, os.path.basename(o)[:-2])
            src = next((base + e for e in (".c", ".cc") if os.path.exists(base + e)), None)
            if src is None:
                continue  # an object left from a file since moved or deleted
            defined, used = nm_symbols(o)
            out[src] = (defined, used)
    return out


def too_long():
    """One line for each shim source file longer than MAX_FILE_LINES and each function longer
    than MAX_FUNC_LINES (run from the repository's root)."""
    bad = []
    for d in DIRS:
        for rel in sorted(glob.glob(os.path.join(d, "*.c")) + glob.glob(os.path.join(d, "*.cc")) +
                          glob.glob(os.path.join(d, "*.h"))):
            n = sum(1 for _ in open(rel, errors="replace"))
            if n > MAX_FILE_LINES:
                bad.append("%s: %d lines (at most %d)" % (rel, n, MAX_FILE_LINES))
            if not rel.endswith(".h"):
                for line, name, ln in long_functions(rel):
                    bad.append("%s:%d: function %s is %d lines (at most %d)" % (rel, line, name, ln, MAX_FUNC_LINES))
    return bad


def main():
    if len(sys.argv) < 2:
        print("usage: shim_layers.py BUILD/lib [--graph]", file=sys.stderr)
        return 2
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    libdir = os.path.abspath(sys.argv[1])
    os.chdir(root)
    syms = symbols(libdir)
    if not syms:
        print("shim layers: no objects under %s (build first)" % libdir)
        return 1
    edges, why = call_edges(syms)
    comps = loops(edges, sorted(syms))
    if "--graph" in sys.argv:
        for f in sorted(edges):
            print("%s -> %s" % (f, " ".join(sorted(edges[f]))))
    for comp in comps:
        print("loop between files: " + " ".join(comp))
        inside = set(comp)
        for f in comp:
            for g in sorted(edges[f] & inside):
                print("  %s -> %s (%s)" % (f, g, why[(f, g)]))
    long_ = too_long()
    for b in long_:
        print(b)
    ncalls = sum(len(v) for v in edges.values())
    print("shim layers: %d files, %d calls between files, %d loops, %d too long" % (len(syms), ncalls, len(comps), len(long_)))
    return 1 if comps or long_ else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""layers.py: the analyzer's structure, checked from its objects and sources (docs/ARCHITECTURE.md).

  python3 tests/analyzer/layers.py BUILD_CLI_ANALYZER_DIR [--graph]

Each file of analyzer/ belongs to the layer of its folder. A file may call only into its own layer
and the layers below it (the ALLOWED table); the calls between files (a symbol one object defines
and another uses, read with nm) make no loop, inside a layer or across; only cli/ prints to stderr
or exits; no file is longer than 800 lines, no function longer than 60. Prints one line per
violation and "layers: N files, N calls between files, N violations"; exits 1 on any.
--graph prints the calls between files (FILE -> FILE ...), the drawing's source.
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from nm_symbols import call_edges, symbols as nm_symbols  # noqa: E402

ALLOWED = {
    "util": set(),
    "load": {"util"},
    "model": {"util", "load"},
    "findings": {"util", "load", "model"},
    "out": {"util", "load", "model", "findings"},
    "pipeline": {"util", "load", "model", "findings"},
    "cli": {"util", "load", "model", "findings", "out", "pipeline"},
}
MAX_FILE_LINES = 800
MAX_FUNC_LINES = 60


def layer_of(rel):
    """analyzer/DIR/x.c -> DIR; analyzer/pipeline.c -> pipeline."""
    parts = rel.split("/")
    if len(parts) == 2 and parts[1] == "pipeline.c":
        return "pipeline"
    if len(parts) == 3 and parts[1] in ALLOWED:
        return parts[1]
    return None


def symbols(objdir, root):
    """{file: (defined, used)} for every analyzer object, file named by its source path."""
    out = {}
    for o in sorted(glob.glob(os.path.join(objdir, "**", "*.o"), recursive=True)):
        rel = "analyzer/" + os.path.relpath(o, objdir)[:-2] + ".c"
        if not os.path.exists(os.path.join(root, rel)):
            continue  # an object left from a file since moved or deleted
        d, u = nm_symbols(o)
        out[rel] = (d, u)
    return out


def loops(edges, nodes):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, res, n = {}, {}, set(), [], [], 0
    for s in nodes:
        if s in index:
            continue
        work = [(s, iter(sorted(edges[s])))]
        index[s] = low[s] = n
        n += 1
        stack.append(s)
        on.add(s)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    res.append(sorted(comp))
    return res


def long_functions(path):
    """(line, name, length) of each function longer than MAX_FUNC_LINES: a body opens with '{' at
    column 0 under its signature and closes with '}' at column 0 (the project's clang-format)."""
    lines = open(path, errors="replace").read().split("\n")
    res, start, name = [], None, "?"
    for i, l in enumerate(lines):
        if l.startswith("{") and i > 0 and ")" in lines[i - 1]:
            j = i - 1
            while j > 0 and "(" not in lines[j]:
                j -= 1
            m = re.search(r"(\w+)\s*\(", lines[j])
            start, name = i, m.group(1) if m else "?"
        elif l.startswith("}") and start is not None:
            if i - start - 1 > MAX_FUNC_LINES:
                res.append((start + 1, name, i - start - 1))
            start = None
    return res


def prints(path):
    """Lines of library code that print to stderr or exit the program."""
    res = []
    pat = re.compile(r"\bstderr\b|\bexit\s*\(|\babort\s*\(|\bperror\s*\(")
    for i, l in enumerate(open(path, errors="replace"), 1):
        code = re.sub(r'"(\\.|[^"\\])*"', '""', l).split("//")[0]  # string literals blanked
        if pat.search(code) and not code.lstrip().startswith(("*", "/*")):
            res.append((i, l.strip()))
    return res


def main():
    objdir = sys.argv[1]
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    syms = symbols(objdir, root)
    bad = []
    srcs = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "analyzer", "**", "*.[ch]"), recursive=True))
    for rel in srcs:
        lay = layer_of(rel if rel.endswith(".c") else rel[:-2] + ".c")
        if lay is None:
            bad.append("%s: in no layer (analyzer/{%s}/ or analyzer/pipeline.c)" % (rel, ",".join(ALLOWED)))
        n = sum(1 for _ in open(os.path.join(root, rel), errors="replace"))
        if n > MAX_FILE_LINES:
            bad.append("%s: %d lines (at most %d)" % (rel, n, MAX_FILE_LINES))
        if rel.endswith(".c"):
            for line, name, ln in long_functions(os.path.join(root, rel)):
                bad.append("%s:%d: function %s is %d lines (at most %d)" % (rel, line, name, ln, MAX_FUNC_LINES))
            if lay != "cli":
                for line, text in prints(os.path.join(root, rel)):
                    bad.append("%s:%d: prints or exits outside cli/: %s" % (rel, line, text[:80]))
    edges, why = call_edges(syms)
    ncalls = sum(len(v) for v in edges.values())
    for f in sorted(edges):
        for g in sorted(edges[f]):
            lf, lg = layer_of(f), layer_of(g)
            if lf and lg and lf != lg and lg not in ALLOWED[lf]:
                bad.append("%s -> %s (%s): %s/ may not call %s/" % (f, g, why[(f, g)], lf, lg))
    for comp in loops(edges, sorted(syms)):
        bad.append("loop between files: " + " ".join(comp))
    if "--graph" in sys.argv:
        for f in sorted(edges):
            print("%s -> %s" % (f, " ".join(sorted(edges[f]))))
    for b in bad:
        print(b)
    print("layers: %d files, %d calls between files, %d violations" % (len(syms), ncalls, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

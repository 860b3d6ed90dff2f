#!/usr/bin/env python3
"""shim_globals.py: how many truly mutable variables with static storage each shim object holds.

  python3 tests/runtime/shim_globals.py BUILD/lib [--names] [--max N]

Reads the shim's objects (BUILD/lib/{preload,cupti,trace}/*.o) with readelf: a variable is an
OBJECT symbol (static or not, file or function scope: a function's static is named NAME.N) in a
writable section (.data, .bss, .data.rel, .data.rel.local ...), not one in .rodata or .data.rel.ro
(writable in the object only until the loader applies its relocations; nm's 'd' covers it too).
A function's statics are counted apart (already scoped to what uses them), and so are
thread-locals (TLS symbols in .tdata/.tbss: they cannot go into a shared struct). A state struct
counts as one. Prints one line per object with any ("FILE: N mutable (N in functions), N
thread-local", and with --names the names), then "shim globals: N mutable in N files, N more in
functions, N thread-local"; with --max N exits 1 when the file-scope mutable total is above N.
"""
import glob
import os
import re
import subprocess
import sys

DIRS = ("preload", "cupti", "trace")


def sections(obj):
    """{section index: (name, flags)} of obj, from readelf -SW."""
    out = {}
    text = subprocess.run(["readelf", "-SW", obj], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+([A-Za-z]*)\s", line)
        if m:
            out[int(m.group(1))] = (m.group(2), m.group(3))
    return out


def variables(obj):
    """(mutable, thread_local): the names of obj's variables in writable sections and its TLS ones."""
    secs = sections(obj)
    mutable, tls = [], []
    text = subprocess.run(["readelf", "-sW", obj], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        p = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(p) < 8 or not p[0].endswith(":") or p[3] not in ("OBJECT", "TLS"):
            continue
        if not p[6].isdigit():
            continue  # UND, ABS, COM
        name, flags = secs.get(int(p[6]), ("", ""))
        if p[3] == "TLS" or "T" in flags:
            tls.append(p[7])
        elif "W" in flags and not name.startswith(".data.rel.ro"):
            mutable.append(p[7])
    return sorted(mutable), sorted(tls)


def in_function(name):
    """Whether a variable's symbol names a function's static (the compiler names it NAME.N)."""
    return re.search(r"\.\d+$", name) is not None


def sources():
    """The shim's source files (run from the repository's root), each compiled to one object."""
    found = []
    for d in DIRS:
        found += sorted(glob.glob(os.path.join(d, "*.c")) + glob.glob(os.path.join(d, "*.cc")))
    return found


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    libdir, names = argv[1], "--names" in argv
    ceiling = int(argv[argv.index("--max") + 1]) if "--max" in argv else None
    total = total_fn = total_tls = files = 0
    for src in sources():
        obj = os.path.join(libdir, os.path.splitext(src)[0] + ".o")
        mutable, tls = variables(obj) if os.path.exists(obj) else ([], [])
        if not mutable and not tls:
            continue
        fn = [v for v in mutable if in_function(v)]
        files += 1 if mutable else 0
        total += len(mutable) - len(fn)
        total_fn += len(fn)
        total_tls += len(tls)
        line = "%s: %d mutable (%d in functions), %d thread-local" % (
            src, len(mutable) - len(fn), len(fn), len(tls))
        if names:
            line += ": " + " ".join(mutable + ["__thread " + t for t in tls])
        print(line)
    print("shim globals: %d mutable in %d files, %d more in functions, %d thread-local" %
          (total, files, total_fn, total_tls))
    if ceiling is not None and total > ceiling:
        print("shim globals: %d mutable, more than the ceiling %d" % (total, ceiling))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

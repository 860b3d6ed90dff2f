"""nm_symbols.py: what one object file defines and uses, read with nm (for the layer checkers
tests/analyzer/layers.py and tests/runtime/shim_layers.py)."""
import collections
import subprocess


def symbols(obj):
    """(defined, used): the global symbols obj defines (weak ones too) and those it needs."""
    defined, used = set(), set()
    nm = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBRGSVW":
            defined.add(p[2])
        elif len(p) == 2 and p[0] in "Uw":
            used.add(p[1])
    return defined, used


def call_edges(syms):
    """({file: {files it calls}}, {(file, file): one symbol of that call}) from {file: (defined,
    used)}: a file calls another when it uses a symbol the other defines (the first definer owns
    a symbol defined twice, as weak ones can be)."""
    owner = {}
    for f, (d, _) in syms.items():
        for s in d:
            owner.setdefault(s, f)
    edges, why = collections.defaultdict(set), {}
    for f, (_, u) in syms.items():
        for s in sorted(u):
            g = owner.get(s)
            if g and g != f:
                edges[f].add(g)
                why.setdefault((f, g), s)
    return edges, why

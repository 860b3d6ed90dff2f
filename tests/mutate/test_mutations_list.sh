#!/usr/bin/env bash
# test_mutations_list.sh: every mutation of tests/mutate/mutations.txt still names a file that
# exists, a text found there exactly once, a different replacement, and suites that exist (a
# script, or a unit binary whose tests/unit source exists): a file moved or reformatted would
# otherwise leave `make mutate` applying nothing there. Cheap: no rebuild; `make mutate`
# (tests/mutate/run.sh) is the costly part.
cd "$(dirname "$0")/../.."
python3 - <<'PY'
import os
bad, n = [], 0
for no, line in enumerate(open("tests/mutate/mutations.txt"), 1):
    if line.startswith("#") or not line.strip():
        continue
    f = line.rstrip("\n").split(" @@ ")
    if len(f) != 5:
        bad.append("line %d: %d fields, not 5" % (no, len(f)))
        continue
    n += 1
    mid, path, frm, to, suites = f
    if not os.path.isfile(path):
        bad.append("%s: no file %s" % (mid, path))
        continue
    a, b = (s.encode().decode("unicode_escape") for s in (frm, to))
    c = open(path, errors="replace").read().count(a)
    if c != 1:
        bad.append("%s: its text occurs %d times in %s" % (mid, c, path))
    if a == b:
        bad.append("%s: the replacement equals the text" % mid)
    for s in suites.split():
        if s.endswith(".sh"):
            if not os.path.isfile(s):
                bad.append("%s: no suite %s" % (mid, s))
        elif not s.startswith("build/tests/"):
            bad.append("%s: suite %s is neither a script nor a build/tests/ binary" % (mid, s))
        elif not os.path.isfile("tests/unit/%s.c" % os.path.basename(s)):
            bad.append("%s: no source tests/unit/%s.c for suite %s" % (mid, os.path.basename(s), s))
for b in bad:
    print("FAIL: mutations: " + b)
if bad or not n:
    print("FAIL: mutations: %d listed, %d problem(s)" % (n, len(bad)))
else:
    print("PASS: mutations: %d listed, each applies to the tree" % n)
PY

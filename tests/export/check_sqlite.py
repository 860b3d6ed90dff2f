#!/usr/bin/env python3
"""check_sqlite.py: checks of a database written by analyzer/sqlite_file.c, through python's
sqlite3 module (libsqlite3) and by reading its pages: every index agrees with its table in order
and in point queries that use it; the sqf_cases content row by row; B-tree depths; pandas reads.
Prints PASS:/FAIL: lines (tests/lib.sh's format).

usage: check_sqlite.py indexes DB            every index of DB
       check_sqlite.py cases DB PAGE_SIZE ROWS  the tables of tests/progs/sqf_cases.c
"""
import sqlite3
import struct
import sys

failed = 0


def check(name, ok, detail=""):
    global failed
    print(("PASS: " if ok else "FAIL: ") + name + ("" if ok or not detail else ": " + detail))
    if not ok:
        failed += 1


def q(db, sql, args=()):
    return db.execute(sql, args).fetchall()


def index_checks(db, label):
    """each index: its ordered scan = the table sorted (ties by rowid); point queries on its
    first column answered through it (EXPLAIN QUERY PLAN names it) = a table scan's answer.
    One check over all the indexes (three per index), each index that fails named."""
    idx = q(db, "SELECT name, tbl_name FROM sqlite_schema WHERE type='index' ORDER BY name")
    bad, rows = [], 0
    for name, tbl in idx:
        cols = [r[2] for r in q(db, "PRAGMA index_info(%s)" % name)]
        cl = ", ".join(cols)
        via = q(db, "SELECT %s, rowid FROM %s INDEXED BY %s ORDER BY %s" % (cl, tbl, name, cl))
        scan = q(db, "SELECT %s, rowid FROM %s NOT INDEXED ORDER BY %s, rowid" % (cl, tbl, cl))
        rows += len(scan)
        if via != scan:
            bad.append("%s: scan in order differs from the table sorted (%d rows)" % (name, len(scan)))
        # probes: the smallest, a middle and the largest key, and NULL
        keys = sorted({r[0] for r in scan if r[0] is not None})
        probes = ([keys[0], keys[len(keys) // 2], keys[-1]] if keys else [0]) + [None]
        ok, used = True, True
        for v in probes:
            cond = "%s IS ?" % cols[0]
            plan = " ".join(str(r) for r in q(db, "EXPLAIN QUERY PLAN SELECT rowid FROM %s WHERE %s" % (tbl, cond), (v,)))
            used = used and name in plan
            a = q(db, "SELECT rowid FROM %s INDEXED BY %s WHERE %s ORDER BY rowid" % (tbl, name, cond), (v,))
            b = q(db, "SELECT rowid FROM %s NOT INDEXED WHERE %s ORDER BY rowid" % (tbl, cond), (v,))
            ok = ok and a == b
        if not ok:
            bad.append("%s: point queries (min, middle, max, NULL) differ from a table scan" % name)
        if not used:
            bad.append("%s: not used by the planner for %s = ?" % (name, cols[0]))
    check("%s: %d indexes (%d rows): each scan in order = table sorted, point queries (min, middle, max, "
          "NULL) = table scan, each used by the planner" % (label, len(idx), rows), len(idx) > 0 and not bad,
          "no index" if not idx else "; ".join(bad))


def lcg(x):
    return (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)


SPECIAL = [-(1 << 63), (1 << 63) - 1, -1, 0, 1, 127, 128, -128, -129, 32767, 32768, 8388607,
           8388608, 2147483647, 2147483648, 140737488355327, 140737488355328, -140737488355329]


def big_rows(n):
    x = 42
    for i in range(n):
        x = lcg(x)
        if i % 997 == 0:
            a = None
        elif i % 997 < 1 + len(SPECIAL):
            a = SPECIAL[i % 997 - 1]
        else:
            s = x - (1 << 64) if x >= 1 << 63 else x
            a = s >> (i % 64)
        yield (a, i % 7, "r%d" % i)


def text(n, rid):
    return "".join(chr(ord("a") + (rid * 7 + k) % 26) for k in range(n))


def depth(data, U, root):
    """levels from root down its leftmost children"""
    d, pg = 1, root
    while True:
        off = (pg - 1) * U
        h = off + (100 if pg == 1 else 0)
        t = data[h]
        if t in (0x0D, 0x0A):
            return d, t
        cell = struct.unpack(">H", data[h + 12:h + 14])[0]
        pg = struct.unpack(">I", data[off + cell:off + cell + 4])[0]
        d += 1


def cases(db, path, U, rows):
    n = 0
    ok = True
    for rid, body, ln in q(db, "SELECT id, body, n FROM texts ORDER BY id"):
        ok = ok and body == text(ln, rid) and len(body) == ln
        n += 1
    check("U=%d texts: %d rows, each body as written (0, 1, X-1..X+2 bytes of payload, "
          "overflow boundaries, 3 and 5 pages, 1 MB)" % (U, n), ok and n == 13)
    got = q(db, "SELECT a, b, c FROM big ORDER BY rowid")
    want = list(big_rows(rows))
    check("U=%d big: %d rows equal to the generator's (NULL, +-2^63 limits, every integer size)" % (U, rows), got == want)
    check("U=%d empty: no rows" % U, q(db, "SELECT count(*) FROM empty") == [(0,)])
    check("U=%d pairs: 2000 rows" % U, q(db, "SELECT count(*) FROM pairs") == [(2000,)])
    check("U=%d pad1 row" % U, q(db, "SELECT * FROM pad1") == [tuple(100 + c for c in range(8))])
    # the planner uses the indexes for these; answers equal a table scan's
    for cond, name in (("a IS NULL", "big_a"), ("a = -9223372036854775808", "big_a"),
                       ("a = 9223372036854775807", "big_a"), ("b = 3 AND a > 0", "big_ba"),
                       ("x = -1000", "sqlite_autoindex_pairs_1")):
        tbl = "pairs" if name.startswith("sqlite") else "big"
        plan = " ".join(str(r) for r in q(db, "EXPLAIN QUERY PLAN SELECT rowid FROM %s WHERE %s" % (tbl, cond)))
        a = q(db, "SELECT rowid FROM %s WHERE %s ORDER BY rowid" % (tbl, cond))
        b = q(db, "SELECT rowid FROM %s NOT INDEXED WHERE %s ORDER BY rowid" % (tbl, cond))
        check("U=%d %s: through %s (%d rows) = table scan" % (U, cond, name, len(a)), name in plan and a == b and len(a) > 0)
    data = open(path, "rb").read()
    check("U=%d file: a whole number of pages, the header's page count" % U,
          len(data) % U == 0 and struct.unpack(">I", data[28:32])[0] == len(data) // U)
    roots = dict(q(db, "SELECT name, rootpage FROM sqlite_schema"))
    d_big, _ = depth(data, U, roots["big"])
    d_idx, _ = depth(data, U, roots["big_a"])
    d_sch, t_sch = depth(data, U, 1)
    if U <= 4096:
        check("U=%d big: table B-tree of %d levels (>= 3)" % (U, d_big), d_big >= 3)
        check("U=%d big_a: index B-tree of %d levels (>= 3)" % (U, d_idx), d_idx >= 3)
        check("U=%d schema larger than page 1: page 1 an interior page (%d levels)" % (U, d_sch), d_sch >= 2)
    else:
        check("U=%d schema on page 1 alone" % U, d_sch == 1 and t_sch == 0x0D)
    check("U=%d empty: its root an empty leaf" % U, depth(data, U, roots["empty"]) == (1, 0x0D) and depth(data, U, roots["empty_x"]) == (1, 0x0A))


def pandas_reads(db, label):
    try:
        import pandas
    except ImportError:
        print("SKIP: %s pandas.read_sql: pandas not installed" % label)
        return
    tables = [r[0] for r in q(db, "SELECT name FROM sqlite_schema WHERE type='table'")]
    ok = True
    for t in tables:
        df = pandas.read_sql("SELECT * FROM %s" % t, db)
        ok = ok and len(df) == q(db, "SELECT count(*) FROM %s" % t)[0][0]
    check("%s: pandas.read_sql of every table" % label, ok)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    check("%s: python sqlite3 opens it, integrity_check ok" % path.split("/")[-1],
          q(db, "PRAGMA integrity_check") == [("ok",)])
    if mode == "cases":
        cases(db, path, int(sys.argv[3]), int(sys.argv[4]))
    index_checks(db, path.split("/")[-1])
    pandas_reads(db, path.split("/")[-1])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

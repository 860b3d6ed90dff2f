#!/usr/bin/env python3
"""check_sqlite.py: checks of a database nvlprof exported, through python's sqlite3 module:
every index agrees with its table in order and in point queries that use it; pandas reads
every table. Prints PASS:/FAIL: lines (tests/lib.sh's format).

usage: check_sqlite.py indexes DB            every index of DB
"""
import sqlite3
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
    path = sys.argv[2]
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    check("%s: python sqlite3 opens it, integrity_check ok" % path.split("/")[-1],
          q(db, "PRAGMA integrity_check") == [("ok",)])
    index_checks(db, path.split("/")[-1])
    pandas_reads(db, path.split("/")[-1])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

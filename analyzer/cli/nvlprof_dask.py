#!/usr/bin/env python3
"""nvlprof_dask.py: `nvlprof dask`: the job's report made on a Dask cluster, one partial per node
where the traces are (`nvlprof report --partial`), merged here (`nvlprof merge`). Installed as
build/nvlprof-dask beside build/nvlprof; docs/DISTRIBUTED.md."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

DEBIAN_PYTHON = "/usr/bin/python3"  # Debian's python3-distributed is importable from it


def import_distributed():
    """distributed, from this interpreter or Debian's (a pyenv or venv python3 on PATH does not see
    /usr/lib/python3/dist-packages): None with the reason printed when neither has it."""
    try:
        import distributed  # noqa: F401
        return distributed
    except ImportError:
        pass
    if (os.path.exists(DEBIAN_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON)
            and not os.environ.get("NVLPROF_DASK_REEXEC")):
        os.environ["NVLPROF_DASK_REEXEC"] = "1"
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.realpath(__file__)] + sys.argv[1:])
    print("nvlprof: dask: the Python module 'distributed' is not installed "
          "(Debian: apt-get install python3-distributed)", file=sys.stderr)
    return None


def make_partial(nvlprof, paths, threads):
    """On a worker: the partial of the traces at paths, as bytes, or None and nvlprof's error."""
    import subprocess as sp
    import tempfile as tf
    with tf.TemporaryDirectory(prefix="nvlprof-part.") as d:
        out = os.path.join(d, "node.part")
        cmd = [nvlprof, "report", "--partial", out, "-j", str(threads)] + paths
        try:
            p = sp.run(cmd, stdout=sp.PIPE, stderr=sp.PIPE, text=True)
        except OSError as e:
            return None, f"cannot run {nvlprof} on this worker: {e.strerror}"
        if p.returncode != 0:
            return None, p.stderr.strip().replace("\n", "; ") or f"exit status {p.returncode}"
        with open(out, "rb") as f:
            return f.read(), p.stdout.strip()


def parse_args(argv):
    here = os.path.dirname(os.path.realpath(__file__))
    ap = argparse.ArgumentParser(
        prog="nvlprof dask",
        description="One task per trace directory (or comma-separated file group) makes that "
        "node's partial where the traces are; the partials are merged here into the report "
        "`nvlprof report` would print over all the traces. HOST:DIR runs DIR's task on the "
        "worker of HOST only.")
    ap.add_argument("--scheduler", required=True,
                    help="a Dask scheduler file (dask-scheduler --scheduler-file FILE), or local:N "
                    "for a local cluster of N worker processes")
    ap.add_argument("--nvlprof", default=os.path.join(here, "nvlprof"),
                    help="the nvlprof binary, at this path on every worker (default: beside this "
                    "script)")
    ap.add_argument("--keep", metavar="DIR", help="keep the partials in DIR")
    ap.add_argument("-j", type=int, default=0, help="reader threads per task (0: default)")
    ap.add_argument("--json", action="store_true", help="as merge --json")
    ap.add_argument("-o", metavar="FILE", help="as merge -o")
    ap.add_argument("--threshold", "-t", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--symbols", metavar="DIR")
    ap.add_argument("sources", nargs="+", metavar="DIR|HOST:DIR|FILE,FILE...")
    return ap.parse_args(argv)


def task_of(src):
    """(worker host or None, paths) of one source argument"""
    m = re.match(r"^([A-Za-z0-9_.\[\]-]+):(/.*)$", src)
    host, rest = (m.group(1), m.group(2)) if m else (None, src)
    return host, [p for p in rest.split(",") if p]


def die(msg):
    print(f"nvlprof: dask: {msg}", file=sys.stderr)
    sys.exit(2)


def connect(spec, distributed):
    if spec.startswith("local:"):
        try:
            n = int(spec[6:])
        except ValueError:
            n = 0
        if n < 1:
            die(f"--scheduler local:N needs a worker count of 1 or more, not '{spec}'")
        import logging
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=logging.ERROR)
        return distributed.Client(cluster), cluster
    if not os.path.isfile(spec):
        die(f"scheduler file not found: {spec} (give a dask-scheduler --scheduler-file, or local:N)")
    return distributed.Client(scheduler_file=spec, timeout="30s"), None


def run_tasks(client, args):
    futures = []
    for i, src in enumerate(args.sources):
        host, paths = task_of(src)
        kw = {"workers": [host], "allow_other_workers": False} if host else {}
        futures.append(client.submit(make_partial, args.nvlprof, paths, args.j, key=f"nvlprof-partial-{i}",
                                     pure=False, **kw))
    return client.gather(futures)


def merge(args, results):
    keep = args.keep
    if keep:
        os.makedirs(keep, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nvlprof-dask.") as tmp:
        d, parts, bad = keep or tmp, [], 0
        for i, (src, (data, msg)) in enumerate(zip(args.sources, results)):
            if data is None:
                print(f"nvlprof: dask: {src}: {msg}", file=sys.stderr)
                bad += 1
                continue
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(src.rstrip("/")) or "root")
            path = os.path.join(d, f"{i:04d}-{name}.part")
            with open(path, "wb") as f:
                f.write(data)
            parts.append(path)
        if bad:
            return 2
        cmd = [args.nvlprof, "merge"] + (["--json"] if args.json else []) + (["-o", args.o] if args.o else [])
        for t in args.threshold:
            cmd += ["--threshold", t]
        if args.symbols:
            cmd += ["--symbols", args.symbols]
        return subprocess.run(cmd + parts).returncode


def main(argv):
    args = parse_args(argv)
    distributed = import_distributed()
    if distributed is None:
        return 2
    client, cluster = connect(args.scheduler, distributed)
    try:
        results = run_tasks(client, args)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return merge(args, results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

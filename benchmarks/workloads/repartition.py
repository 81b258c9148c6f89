"""Repartition: a query's 5M-key state moved from 4 to 8 state partitions, against a fresh query's
restore of the same state.

The growth benchmark's deduplication (`benchmarks.workloads.growth_child`, ttlstate with TTL 1h and
`snapshotInterval` 2) grows its state to `--keys` keys in `--batches` batches with `--from`
partitions, in its own JVM. Then, each in a fresh JVM with empty local state:

1. restore: the query restarts on the checkpoint and processes one small file; its batch first
   loads the whole state (the restore time, as in the growth benchmark);
2. repartition: `ttlstate repartition CHECKPOINT --partitions TO` (`ttlstate.spark.repartition`,
   `local[2]`); the call alone is timed, not the JVM's start;
3. restore again: the query restarts with `--to` partitions on the repartitioned checkpoint and
   processes one more small file: it runs on, and its batch loads the moved state.

Reported: each step's time, and the repartition's time as a ratio of the restore's (same run).
`--checkpoint-fs hdfs` keeps the checkpoint on a MiniDFSCluster (benchmarks/harness/checkpoint_fs.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from benchmarks.harness import checkpoint_fs
from benchmarks.harness.checkpoint_fs import checkpoint_root, join
from benchmarks.harness.machine import describe, uptime
from benchmarks.harness.output import report
from benchmarks.harness.subproc import run_child
from benchmarks.harness.variants import ratio
from benchmarks.workloads.growth import (
    LOAD_METRIC,
    VARIANTS,
    _child_params,
    _place,
    new_keys,
    write_inputs,
    write_keys,
)


def _restore(args: argparse.Namespace, partitions: int, input_dir: str, ck: str, log: str) -> dict:
    """The growth benchmark's restore step with `partitions` (the checkpoint's own count)."""
    v = VARIANTS["ttlstate"]
    with_count = argparse.Namespace(**{**vars(args), "partitions": partitions})
    params = _child_params(v, with_count, "restore", input_dir, ck)
    out, rss = run_child("benchmarks.workloads.growth_child", params, v.env(), log, args.timeout)
    b = out["batch"]
    return {"batch_ms": b["batch_ms"], "load_ms": b["custom"].get(LOAD_METRIC["ttlstate"]),
            "state_rows": b["state_rows"], "partitions": partitions, **rss.as_dict()}


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=5_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--from", dest="old", type=int, default=4)
    ap.add_argument("--to", type=int, default=8)
    ap.add_argument("--maintenance-interval", default="5s")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds the grown query runs on (snapshots)")
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", help="write the results here")
    checkpoint_fs.add_option(ap)
    args = ap.parse_args(argv)
    args.fixed_heap, args.partitions = False, args.old
    load_before = uptime()
    work = tempfile.mkdtemp(prefix="ttlstate-bench-repartition-")
    logs = os.path.join(work, "logs")
    os.makedirs(logs)
    try:
        with checkpoint_root(args.checkpoint_fs, work) as root:
            ck = join(root, "ck")
            per_batch = args.keys // args.batches
            files, restore_file = write_inputs(os.path.join(work, "files"), args.batches, per_batch, 1000)
            after = os.path.join(work, "files", "after.parquet")
            write_keys(after, new_keys(args.batches * per_batch + 1000, 1000), time.time())
            input_dir = os.path.join(work, "input")
            os.makedirs(input_dir)
            for f in files:
                _place(f, input_dir)
            v = VARIANTS["ttlstate"]
            print(f"repartition: growing {args.keys} keys with {args.old} partitions", flush=True)
            grow = _child_params(v, args, "grow", input_dir, ck)
            run_child("benchmarks.workloads.growth_child", grow, v.env(), os.path.join(logs, "grow.log"),
                      args.timeout)
            _place(restore_file, input_dir)
            restore = _restore(args, args.old, input_dir, ck, os.path.join(logs, "restore.log"))
            print(f"repartition: restore with {args.old} partitions: {restore['batch_ms']} ms", flush=True)
            params = {"provider_class": v.provider_class, "confs": dict(v.confs), "checkpoint": ck,
                      "partitions": args.to, "spark_confs": {"spark.driver.memory": args.driver_memory}}
            started = time.monotonic()
            moved, rss = run_child("benchmarks.workloads.repartition_child", params, v.env(),
                                   os.path.join(logs, "repartition.log"), args.timeout)
            command_s = time.monotonic() - started
            print(f"repartition: {args.old} -> {args.to}: {moved['repartition_s']} s ({moved['rows']} rows, "
                  f"{command_s:.1f} s with the JVM's start)", flush=True)
            _place(after, input_dir)
            rescaled = _restore(args, args.to, input_dir, ck, os.path.join(logs, "restore-after.log"))
            print(f"repartition: restore with {args.to} partitions: {rescaled['batch_ms']} ms", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    given = sys.argv[1:] if argv is None else argv
    result = {"benchmark": "repartition", "machine": describe(), "uptime_before": load_before,
              "command": " ".join(["python -m benchmarks repartition", *given]),
              "keys": args.keys, "from": args.old,
              "to": args.to, "checkpoint_fs": args.checkpoint_fs, "restore": restore,
              "repartition": {**moved, "command_s": round(command_s, 3), **rss.as_dict()},
              "restore_after": rescaled,
              "repartition_to_restore": ratio(moved["repartition_s"] * 1000, restore["batch_ms"])}
    return report(result, ("keys", "from", "to", "checkpoint_fs", "repartition_to_restore"), args.json)


if __name__ == "__main__":
    main()

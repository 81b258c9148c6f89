"""Checkpoint lock: what taking and freeing a checkpoint's lock (`_ttlstate_lock`) adds to a
query's start, on a local disk or HDFS.

In one driver JVM (local[2], ttlstate configured), `--repeats` times each, timed from Python
through py4j:

1. `lock`: the lock taken as a query's start takes it (`CheckpointLock.queryStarting`) and freed
   as at the query's end (`settleAll`, which also checks every run and start of this JVM);
2. `call`: a py4j call into the same class that only resolves the lock file's path
   (`unlockableReason`): the round trips and the path's resolution, which step 1 contains twice.

Reported: medians and the 90th percentiles in microseconds, and `lock` less `call` (what the lock
itself costs beyond the py4j round trips). `--checkpoint-fs hdfs` puts the checkpoint on a
MiniDFSCluster (benchmarks/harness/checkpoint_fs.py): there the lock is one NameNode call to
create the file, one to set its holder attribute, and one to close it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from benchmarks.harness import checkpoint_fs
from benchmarks.harness.checkpoint_fs import checkpoint_root, join
from benchmarks.harness.machine import describe
from benchmarks.harness.output import report
from benchmarks.harness.sparkjob import session
from benchmarks.harness.variants import TTLSTATE


def _timed(repeats: int, call: Any) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1e6)
    return out


def _summary(us: list[float]) -> dict[str, float]:
    ordered = sorted(us)
    return {"median_us": round(statistics.median(ordered), 1),
            "p90_us": round(ordered[int(len(ordered) * 0.9)], 1)}


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=500)
    ap.add_argument("--json", help="write the results here")
    checkpoint_fs.add_option(ap)
    args = ap.parse_args(argv)
    spark = session("ttlstate-checkpoint-lock", TTLSTATE, {}, True, {})
    try:
        jvm = spark.sparkContext._jvm
        lock = jvm.ttlstate.spark.CheckpointLock
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        with tempfile.TemporaryDirectory(prefix="ttlstate-bench-lock-") as work, \
                checkpoint_root(args.checkpoint_fs, work) as root:
            ck = join(root, "ck")

            def take_and_free() -> None:
                lock.queryStarting(ck, "a streaming query of the benchmark", conf)
                lock.settleAll()

            _timed(20, take_and_free)  # warm: classes loaded, the file and its folder exist
            lock_us = _timed(args.repeats, take_and_free)
            call_us = _timed(args.repeats, lambda: lock.unlockableReason(ck, conf))
    finally:
        spark.stop()
    result = {"benchmark": "checkpoint_lock", "machine": describe(), "checkpoint_fs": args.checkpoint_fs,
              "repeats": args.repeats, "lock": _summary(lock_us), "call": _summary(call_us),
              "lock_less_call_median_us": round(statistics.median(lock_us) - statistics.median(call_us), 1)}
    return report(result, ("checkpoint_fs", "lock", "call", "lock_less_call_median_us"), args.json)


if __name__ == "__main__":
    main()

"""Snapshot cadence: how many snapshots a store writes, and their bytes per batch, when Spark's
coordinator asks lagging stores for a snapshot (`forceSnapshotOnCommit`, Spark 4.2+, on by
default through `forceSnapshotUploadOnLag`).

Spark sets that flag for a store whose reported snapshot uploads trail the query by more than
`multiplierForMinVersionDiffToLog` x `minDeltasForSnapshot` versions (5 x 10 by default). ttlstate
reports each snapshot it publishes (since 2026-11-29; before, it could not, so every store
looked lagging and was asked at every commit). Here the coordinator's threshold is low
(`minDeltasForSnapshot=1`, maintenance every second: 5 versions); ttlstate runs with
`snapshotInterval=10`, so the coordinator's asks set the cadence. A `dropDuplicates` is fed
`--batches` files of `--keys-per-batch` new keys, one per trigger, on `local[2]` with 2
partitions; then the checkpoint's snapshot files are counted. With `--baseline REF` the same
query runs on that older checkout in the same invocation (each variant in its own child
process), so the two are compared in one run.

`python -m benchmarks snapshot_cadence --baseline 144b278 --json benchmarks/results/X.json`
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks.harness.baseline import REPO, prepare

CONFS = {
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.ttlstate.snapshotInterval": "10",
}


def child(batches: int, keys_per_batch: int) -> dict[str, object]:
    """One variant, in this process: the query, then what its checkpoint holds."""
    from pyspark.sql import SparkSession

    import ttlstate

    root = tempfile.mkdtemp(prefix="ttlstate-cadence-")
    source, checkpoint = os.path.join(root, "in"), os.path.join(root, "ck")
    os.makedirs(source)
    builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    for k, v in CONFS.items():
        builder = builder.config(k, v)
    spark = ttlstate.configure(builder, ttl="1h").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    query = (spark.readStream.schema("k STRING").option("maxFilesPerTrigger", 1).json(source)
             .dropDuplicates(["k"]).writeStream.format("noop")
             .option("checkpointLocation", checkpoint).start())
    started = time.monotonic()
    for b in range(batches):
        path = os.path.join(source, f"{b:04d}.json")
        with open(path + ".tmp", "w") as f:
            f.writelines(f'{{"k": "b{b}-{i}"}}\n' for i in range(keys_per_batch))
        os.replace(path + ".tmp", path)
        query.processAllAvailable()
    elapsed = time.monotonic() - started
    time.sleep(3)  # let maintenance finish what it started
    query.stop()
    spark.stop()
    snapshots: list[int] = []
    snapshot_bytes = changelog_bytes = 0
    state = os.path.join(checkpoint, "state", "0")
    for part in sorted(p for p in os.listdir(state) if p.isdigit()):
        for name in os.listdir(os.path.join(state, part)):
            size = os.path.getsize(os.path.join(state, part, name))
            if name.endswith(".snapshot"):
                snapshots.append(int(name.split(".")[0].split("_")[0]))
                snapshot_bytes += size
            elif name.endswith(".changelog"):
                changelog_bytes += size
    return {"batches": batches, "snapshots": len(snapshots),
            "snapshot_versions": sorted(set(snapshots)), "snapshot_bytes": snapshot_bytes,
            "snapshot_bytes_per_batch": snapshot_bytes // batches,
            "changelog_bytes_per_batch": changelog_bytes // batches, "seconds": round(elapsed, 1)}


def run_variant(env: dict[str, str] | None, args: argparse.Namespace) -> dict[str, object]:
    cmd = [sys.executable, "-m", "benchmarks.workloads.snapshot_cadence", "--child",
           "--batches", str(args.batches), "--keys-per-batch", str(args.keys_per_batch)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800,
                         cwd=REPO)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--keys-per-batch", type=int, default=20_000)
    ap.add_argument("--baseline", metavar="REF", help="also run ttlstate as of this older commit")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.batches, args.keys_per_batch)))
        return 0
    results = {"ttlstate": run_variant(None, args)}
    if args.baseline:
        base = prepare(args.baseline)
        results[f"ttlstate@{base.short}"] = run_variant(base.env, args)
    report = {"confs": CONFS, "results": results}
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

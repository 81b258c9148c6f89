"""Spark's HDFS and RocksDB providers vs ttlstate (TTL off, TTL on), same data, one run.

`ttlstate-ttl-on-no-keyfilter` is ttlstate with TTL on and the shim's key filter off
(`keyFilter.maxKeys=0`): the before/after of that optimisation, measured in the same run.

Workloads: `groupBy(key).count()` in update mode and `dropDuplicates(key)`, on a file source
of `batches` JSON files (default 1M rows over 200k keys in 5 batches), 4 shuffle partitions,
`local[2]`. Reports rows/s per provider and workload, the ratio to Spark's RocksDB provider,
and for ttlstate the bridge round trips per state operation (from its custom metrics).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time

from benchmarks.output import save
from ttlstate.config import keys as K

PROVIDERS: dict[str, tuple[str, dict[str, str]]] = {
    "hdfs": ("org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider", {}),
    "rocksdb": ("org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider", {}),
    "ttlstate-ttl-off": (K.PROVIDER_CLASS, {K.TTL.key: "off"}),
    "ttlstate-ttl-on": (K.PROVIDER_CLASS, {K.TTL.key: "1h"}),
    "ttlstate-ttl-on-no-keyfilter": (K.PROVIDER_CLASS, {K.TTL.key: "1h", K.KEY_FILTER_MAX_KEYS.key: "0"}),
}
WORKLOADS = ("aggregation", "dropDuplicates")


def write_input(directory: str, rows: int, keys: int, batches: int, seed: int = 7) -> None:
    rnd = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    per = rows // batches
    for b in range(batches):
        with open(os.path.join(directory, f"part-{b:03d}.json"), "w") as f:
            f.writelines(f'{{"key":"k{rnd.randrange(keys)}","v":{i}}}\n' for i in range(per))


def run_one(spark, provider: str, workload: str, input_dir: str, work: str) -> dict[str, object]:  # noqa: ANN001
    cls, confs = PROVIDERS[provider]
    spark.conf.set(K.PROVIDER_CLASS_KEY, cls)
    for key in (K.TTL.key, K.KEY_FILTER_MAX_KEYS.key):
        spark.conf.unset(key)
    for key, value in confs.items():
        spark.conf.set(key, value)
    src = spark.readStream.schema("key STRING, v LONG").option("maxFilesPerTrigger", 1).json(input_dir)
    if workload == "aggregation":
        df, mode = src.groupBy("key").count(), "update"
    else:
        df, mode = src.dropDuplicates(["key"]), "append"
    ck = os.path.join(work, f"ck-{provider}-{workload}")
    started = time.perf_counter()
    q = (df.writeStream.format("noop").outputMode(mode).option("checkpointLocation", ck)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    elapsed = time.perf_counter() - started
    progresses = q.recentProgress
    rows = sum(p["numInputRows"] for p in progresses)
    state_ops = 0
    round_trips = 0
    skipped = 0
    for p in progresses:
        for op in p.get("stateOperators", []):
            state_ops += int(op.get("numRowsUpdated", 0)) + int(op.get("numRowsRemoved", 0))
            round_trips += int(op.get("customMetrics", {}).get("bridgeRoundTrips", 0))
            skipped += int(op.get("customMetrics", {}).get("keyFilterSkippedReads", 0))
    out: dict[str, object] = {"provider": provider, "workload": workload, "rows": rows,
                              "seconds": round(elapsed, 3),
                              "rows_per_s": round(rows / elapsed, 1) if elapsed else None}
    if provider.startswith("ttlstate"):
        out["bridge_round_trips"] = round_trips
        out["round_trips_per_input_row"] = round(round_trips / rows, 4) if rows else None
        out["state_rows_updated"] = state_ops
        out["reads_answered_by_key_filter"] = skipped
    return out


def add_ratios(results: list[dict[str, object]]) -> None:
    """rows/s of each run divided by Spark's RocksDB provider's on the same workload."""
    base = {r["workload"]: r["rows_per_s"] for r in results if r["provider"] == "rocksdb"}
    for r in results:
        b = base.get(r["workload"])
        if b:
            r["ratio_to_rocksdb"] = round(float(r["rows_per_s"]) / float(b), 3)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="50k rows, 10k keys")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.keys = 50_000, 10_000
    from pyspark.sql import SparkSession

    import ttlstate

    work = tempfile.mkdtemp(prefix="ttlstate-sbs-")
    input_dir = os.path.join(work, "input")
    write_input(input_dir, args.rows, args.keys, args.batches)
    builder = (SparkSession.builder.master("local[2]").appName("ttlstate-side-by-side")
               .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false"))
    spark = ttlstate.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    try:
        warm = os.path.join(work, "warmup")
        write_input(warm, 5_000, 1_000, 1)
        for workload in WORKLOADS:  # JIT, Python workers and the state server, unmeasured
            for provider in args.providers.split(","):
                run_one(spark, provider, workload, warm, os.path.join(work, "warm"))
        for workload in WORKLOADS:
            for provider in args.providers.split(","):
                r = run_one(spark, provider, workload, input_dir, work)
                print(r, flush=True)
                results.append(r)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    add_ratios(results)
    return save(results, args.json)


if __name__ == "__main__":
    main()

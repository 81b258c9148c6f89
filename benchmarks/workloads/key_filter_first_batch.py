"""One large first batch of new keys into an empty store: round trips with the key filter.

The shim's key filter starts sized for the keys a store holds at load (an empty store: the
minimum). A first batch of 2M new keys must keep answering the reads of its new keys without
a round trip, also long after the initial size is passed. This runs `dropDuplicates(key)` on
one file of `--rows` distinct keys as one batch (`local[2]`, 4 shuffle partitions, ttlstate
with its defaults) and reports the bridge round trips and the reads the filter answered.

`python -m benchmarks key_filter_first_batch [--rows 2000000] [--json out.json]`
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from benchmarks.harness.output import save
from ttlstate.config import keys as K


def write_input(directory: str, rows: int) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "part-000.json"), "w") as f:
        f.writelines(f'{{"key":"k{i}","v":{i}}}\n' for i in range(rows))


def _metric(ops: list[dict], name: str) -> int:
    return sum(int(op["customMetrics"].get(name, 0)) for op in ops)


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--no-filter-too", action="store_true",
                    help="also run with keyFilter.maxKeys=0 (every read is a round trip)")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    import ttlstate

    work = tempfile.mkdtemp(prefix="ttlstate-kf-")
    input_dir = os.path.join(work, "input")
    write_input(input_dir, args.rows)
    builder = (SparkSession.builder.master("local[2]").appName("ttlstate-key-filter-first-batch")
               .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false"))
    spark = ttlstate.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    variants = [("key filter", "1000000")] + ([("no key filter", "0")] if args.no_filter_too else [])
    results: list[dict[str, object]] = []
    try:
        for name, max_keys in variants:
            spark.conf.set(K.KEY_FILTER_MAX_KEYS.key, max_keys)
            src = spark.readStream.schema("key STRING, v LONG").json(input_dir)
            started = time.perf_counter()
            q = (src.dropDuplicates(["key"]).writeStream.format("noop").outputMode("append")
                 .option("checkpointLocation", os.path.join(work, f"ck-{max_keys}"))
                 .trigger(availableNow=True).start())
            q.awaitTermination()
            elapsed = time.perf_counter() - started
            ops = [op for p in q.recentProgress for op in p.get("stateOperators", [])]
            r: dict[str, object] = {
                "variant": name, "rows": sum(p["numInputRows"] for p in q.recentProgress),
                "batches": len(q.recentProgress), "seconds": round(elapsed, 1),
                "bridge_round_trips": _metric(ops, "storeCallCount"),
                "key_filter_skipped_reads": _metric(ops, "bloomFilterSkippedReadCount"),
                "state_rows": sum(int(op["numRowsTotal"]) for op in ops)}
            print(r, flush=True)
            results.append(r)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return save(results, args.json)


if __name__ == "__main__":
    main()

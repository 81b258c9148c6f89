"""One provider variant of the side-by-side benchmark, in its own JVM (started by
`benchmarks.workloads.spark_side_by_side`): an unmeasured warm-up pass of every workload on a small
input (JIT, Python workers, the state server), then every workload on the real input. Each
checkpoint goes under `ck_root` (a local folder or an hdfs:// URL).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from benchmarks.harness.checkpoint_fs import CheckpointFiles, bytes_per_batch, join, progress_start_ms
from benchmarks.harness.sparkjob import child_main, imported_ttlstate, progresses, session, state_metrics


def _bridge_counts(batches: list[dict[str, Any]]) -> dict[str, int]:
    """ttlstate's round trips (and the task time spent in them), key-filter answers, keys read
    ahead, and the state rows written, summed."""
    out = {"state_ops": 0, "round_trips": 0, "round_trip_ms": 0, "skipped": 0, "read_ahead": 0}
    for p in batches:
        for op in p.get("stateOperators", []):
            custom = op.get("customMetrics", {})
            out["state_ops"] += int(op.get("numRowsUpdated", 0)) + int(op.get("numRowsRemoved", 0))
            out["round_trips"] += int(custom.get("storeCallCount", 0))
            out["round_trip_ms"] += int(custom.get("storeCallTimeMs", 0))
            out["skipped"] += int(custom.get("bloomFilterSkippedReadCount", 0))
            out["read_ahead"] += int(custom.get("readAheadKeyCount", 0))
    return out


def _checkpoint_costs(spark: Any, ck: str, batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Per batch: the state operator's commit time and the bytes the batch wrote to the
    checkpoint's state folder (one listing after the query ended: nothing is cleaned up within
    a few batches)."""
    files = CheckpointFiles(spark, join(ck, "state"))
    files.scan()
    starts = [progress_start_ms(p) for p in batches]
    return {"commit_ms_per_batch": [state_metrics(p)["commit_ms"] for p in batches],
            "checkpoint_bytes_per_batch": bytes_per_batch(files.seen, starts)}


def run_one(spark: Any, workload: str, input_dir: str, ck: str, ttlstate: bool,
            fmt: str = "json", key_type: str = "string") -> dict[str, Any]:
    """One query over every file of input_dir (one file per batch, availableNow), timed."""
    reader = spark.readStream.schema(f"key {key_type.upper()}, v LONG").option("maxFilesPerTrigger", 1)
    src = reader.parquet(input_dir) if fmt == "parquet" else reader.json(input_dir)
    if workload == "aggregation":
        df, mode = src.groupBy("key").count(), "update"
    else:
        df, mode = src.dropDuplicates(["key"]), "append"
    started = time.perf_counter()
    q = (df.writeStream.format("noop").outputMode(mode).option("checkpointLocation", ck)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    elapsed = time.perf_counter() - started
    batches = progresses(q)
    rows = sum(p["numInputRows"] for p in batches)
    out: dict[str, Any] = {"workload": workload, "rows": rows, "seconds": round(elapsed, 3),
                           "rows_per_s": round(rows / elapsed, 1) if elapsed else None,
                           **_checkpoint_costs(spark, ck, batches)}
    if ttlstate:
        c = _bridge_counts(batches)
        out["bridge_round_trips"] = c["round_trips"]
        out["round_trips_per_input_row"] = round(c["round_trips"] / rows, 4) if rows else None
        out["bridge_time_ms"] = c["round_trip_ms"]
        out["state_rows_updated"] = c["state_ops"]
        out["reads_answered_by_key_filter"] = c["skipped"]
        out["keys_read_ahead"] = c["read_ahead"]
    return out


def run(params: dict[str, Any]) -> dict[str, Any]:
    spark = session("ttlstate-side-by-side", params["provider_class"], params["confs"],
                    bool(params["ttlstate"]), params["spark_confs"])
    ck_root, ttl, fmt = params["ck_root"], bool(params["ttlstate"]), params.get("input_format", "json")
    key_type = params.get("key_type", "string")
    jars = spark.conf.get("spark.jars", "")
    try:
        for w in params["workloads"]:  # unmeasured
            run_one(spark, w, params["warm_dir"], join(ck_root, f"warm-{w}"), ttl, fmt, key_type)
        rows = [run_one(spark, w, params["input_dir"], join(ck_root, f"ck-{w}"), ttl, fmt, key_type)
                for w in params["workloads"]]
    finally:
        spark.stop()
    return {"rows": rows, "ttlstate_file": imported_ttlstate() if ttl else None, "spark_jars": jars}


if __name__ == "__main__":
    sys.exit(child_main(run))

"""One step of the growth benchmark in a fresh JVM (started by `benchmarks.workloads.growth`).

`grow`: a `dropDuplicates(key)` on a Parquet file source (`maxFilesPerTrigger=1`) runs until
it has processed `batches` files, keeps running `settle_s` more seconds so that state
maintenance (snapshots) can run as it would in a live query, then stops. It lists the
checkpoint's state folder after every batch it sees complete (`benchmarks.harness.checkpoint_fs`) and
reports the bytes each batch wrote there.
`restore`: the same query on the same checkpoint, in a new JVM whose local state directories
are empty, processes ONE small file (added by the parent) with `availableNow`: that batch
loads the whole state from the checkpoint before it can commit. With `rewind_batch` it first
takes that batch of an earlier restore back out of the checkpoint (`checkpoint_fs.rewind`), so
the same restore is measured again. With `events_dir` (Spark's event log goes there) the
restore batch is also split at its stateful stage (`benchmarks.harness.event_log`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from benchmarks.harness.checkpoint_fs import (
    CheckpointFiles,
    bytes_per_batch_by_kind,
    join,
    progress_start_ms,
    rewind,
)
from benchmarks.harness.event_log import batch_stages, read_events
from benchmarks.harness.sparkjob import child_main, imported_ttlstate, progresses, session, state_metrics


def batch_row(progress: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one batch the benchmark reports (durations are wall time of the
    driver; state metrics are summed over partitions, so they can exceed the wall time)."""
    d = progress.get("durationMs", {})
    return {"batch_id": progress["batchId"], "input_rows": progress["numInputRows"],
            "batch_ms": d.get("triggerExecution"), "add_batch_ms": d.get("addBatch"),
            "wal_commit_ms": d.get("walCommit"), "commit_offsets_ms": d.get("commitOffsets"),
            **state_metrics(progress)}


def _start(spark: Any, params: dict[str, Any], available_now: bool) -> Any:
    src = (spark.readStream.schema("key STRING").option("maxFilesPerTrigger", 1)
           .parquet(params["input_dir"]))
    writer = (src.dropDuplicates(["key"]).writeStream.format("noop").outputMode("append")
              .option("checkpointLocation", params["checkpoint"]).queryName("growth"))
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def _save_partial(path: str | None, query: Any) -> None:
    """The batches done so far, for the parent to report if this process dies (a provider
    that runs out of memory can take the JVM with it)."""
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump([batch_row(p) for p in progresses(query)], f)
        os.replace(path + ".tmp", path)


def _batches_done(query: Any) -> int:
    """Batches done, from the last progress (one cheap call, where parsing every progress
    grows with the run: every batch here has data, and batch ids start at 0)."""
    last = query.lastProgress  # a dict on pyspark 3.5, a StreamingQueryProgress later
    if last is None:
        return 0
    return int(last["batchId"] if isinstance(last, dict) else last.batchId) + 1


def _wait_for_batches(query: Any, count: int, timeout_s: float, files: CheckpointFiles,
                      partial: str | None = None) -> None:
    """Until `count` data batches have completed (or the query failed, or time ran out),
    listing the checkpoint (and saving the rows so far) whenever another batch has completed."""
    deadline = time.monotonic() + timeout_s
    listed = 0
    while (done := _batches_done(query)) < count:
        if done > listed:
            files.scan()
            _save_partial(partial, query)
            listed = done
        if query.exception() is not None:
            raise RuntimeError(f"growth query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(progresses(query))} of {count} batches in {timeout_s:.0f}s")
        time.sleep(0.2)


def grow(spark: Any, params: dict[str, Any]) -> dict[str, Any]:
    files = CheckpointFiles(spark, join(params["checkpoint"], "state"))
    started = time.monotonic()
    query = _start(spark, params, available_now=False)
    _wait_for_batches(query, int(params["batches"]), float(params["timeout_s"]), files,
                      params.get("partial_path"))
    grown = time.monotonic() - started
    files.scan()
    time.sleep(float(params["settle_s"]))
    query.stop()
    state_bytes = files.scan()
    done = progresses(query)
    written = bytes_per_batch_by_kind(files.seen, [progress_start_ms(p) for p in done])
    rows = [{**batch_row(p), "checkpoint_bytes_written": sum(kinds.values()),
             "checkpoint_bytes_written_by_kind": kinds} for p, kinds in zip(done, written, strict=True)]
    return {"batches": rows,
            "grow_wall_s": round(grown, 3), "checkpoint_state_bytes": state_bytes}


def restore(spark: Any, params: dict[str, Any]) -> dict[str, Any]:
    if params.get("rewind_batch") is not None:  # a repeat: the last restore's batch runs again
        rewind(spark, params["checkpoint"], int(params["rewind_batch"]))
    started = time.monotonic()
    query = _start(spark, params, available_now=True)
    query.awaitTermination(float(params["timeout_s"]))
    wall = time.monotonic() - started
    if query.exception() is not None:
        raise RuntimeError(f"restore query failed: {query.exception()}")
    done = progresses(query)
    query.stop()
    if len(done) != 1:
        raise RuntimeError(f"restore ran {len(done)} data batches, expected 1")
    return {"batch": batch_row(done[0]), "started_ms": progress_start_ms(done[0]),
            "query_wall_s": round(wall, 3)}


def run(params: dict[str, Any]) -> dict[str, Any]:
    spark = session("ttlstate-growth-" + params["mode"], params["provider_class"], params["confs"],
                    bool(params["ttlstate"]), params["spark_confs"])
    try:
        step = grow if params["mode"] == "grow" else restore
        result = {"ttlstate_file": imported_ttlstate() if params["ttlstate"] else None,
                  "spark_jars": spark.conf.get("spark.jars", ""), **step(spark, params)}
    finally:
        spark.stop()
    if params.get("events_dir"):  # the event log is whole once the session has stopped
        b = result["batch"]
        b["stages"] = batch_stages(read_events(params["events_dir"]), b["batch_id"], result.pop("started_ms"),
                                   b["batch_ms"])
    return result


if __name__ == "__main__":
    sys.exit(child_main(run))

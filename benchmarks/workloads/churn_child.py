"""One variant of the churn benchmark in its own JVM (started by `benchmarks.workloads.churn`).

Every variant counts rows per key over the same Parquet files, one file per trigger
(`availableNow`), with a state that forgets a key `ttl_ms` of processing time after its last
update, each with its own mechanism (`query`):
- `count`: `groupBy(key).count()` in update mode; with ttlstate its TTL expires the counts,
  with Spark's RocksDB provider nothing does (the unbounded reference);
- `tws-scala`: `transformWithState` in Scala, a `ValueState` with `TTLConfig` and a
  processing-time timer per key, moved at each update, that fires when the value expires
  (`benchmarks/workloads/scala/ChurnTtlCount.scala`), on whichever provider the session has;
- `tws-scala-list`: the same, each key's rows appended to a `ListState` with `TTLConfig`
  (`appendList`, never read back), its timer moved as above;
- `tws-pandas`: `transformWithStateInPandas`, a `ValueState` with `ttlDurationMs`;
- `apply-in-pandas`: `applyInPandasWithState` with a processing-time timeout.
The query gets `deadline_s` seconds; a slower one is stopped and reported unfinished with the
batches it did. One that never ends by itself (processing-time `transformWithState`) is stopped
once it has read every input row and completed a batch without data that started the TTL after
its last batch with data, in which its last keys' timers fired.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

from benchmarks.harness.sparkjob import child_main, imported_ttlstate, progresses, session

OUTPUT = "key STRING, count LONG"
# The Scala queries (benchmarks/workloads/scala/ChurnTtlCount.scala): query -> ChurnTws's method.
SCALA_QUERIES = {"tws-scala": "start", "tws-scala-list": "startList"}


def _tws_pandas(src: Any, ttl_ms: int) -> Any:
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class TtlCount(StatefulProcessor):  # type: ignore[misc]
        def init(self, handle: Any) -> None:
            self.count = handle.getValueState("count", "count LONG", ttlDurationMs=ttl_ms)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            n = (self.count.get()[0] if self.count.exists() else 0) + sum(len(pdf) for pdf in rows)
            self.count.update((n,))
            yield pd.DataFrame({"key": [key[0]], "count": [n]})

        def close(self) -> None:
            pass

    return src.groupBy("key").transformWithStateInPandas(TtlCount(), OUTPUT, "update", "ProcessingTime")


def _apply_in_pandas(src: Any, ttl_ms: int) -> Any:
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key: Any, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        if state.hasTimedOut:
            state.remove()
            return
        n = (state.get[0] if state.exists else 0) + sum(len(pdf) for pdf in pdfs)
        state.update((n,))
        state.setTimeoutDuration(ttl_ms)
        yield pd.DataFrame({"key": [key[0]], "count": [n]})

    return src.groupBy("key").applyInPandasWithState(count, OUTPUT, "count LONG", "update",
                                                     GroupStateTimeout.ProcessingTimeTimeout)


def start(spark: Any, params: dict[str, Any]) -> Any:
    """The variant's query, started."""
    query, ttl_ms = params["query"], int(params["ttl_ms"])
    if query in SCALA_QUERIES:
        from pyspark.sql.streaming.query import StreamingQuery

        start_scala = getattr(spark._jvm.ttlstate.bench.ChurnTws, SCALA_QUERIES[query])
        return StreamingQuery(start_scala(spark._jsparkSession, params["input_dir"], params["checkpoint"],
                                          ttl_ms))
    src = spark.readStream.schema("key STRING").option("maxFilesPerTrigger", 1).parquet(params["input_dir"])
    if query == "count":
        df = src.groupBy("key").count()
    elif query == "tws-pandas":
        df = _tws_pandas(src, ttl_ms)
    elif query == "apply-in-pandas":
        df = _apply_in_pandas(src, ttl_ms)
    else:
        raise ValueError(f"unknown churn query {query!r}: count, {', '.join(SCALA_QUERIES)}, tws-pandas, "
                         "apply-in-pandas")
    return (df.writeStream.format("noop").outputMode("update")
            .option("checkpointLocation", params["checkpoint"]).trigger(availableNow=True).start())


# Custom metrics kept per batch when an operator reports them: transformWithState's timers and
# TTL, and ttlstate's round trips to its state server (where a served store's time goes).
KEPT_METRICS = ("numRegisteredTimers", "numDeletedTimers", "numExpiredTimers", "timerProcessingTimeMs",
                "numValuesRemovedDueToTTLExpiry", "storeCallCount", "storeCallTimeMs", "storeCommitTimeMs")


def batch_row(progress: dict[str, Any]) -> dict[str, Any]:
    """A batch's input rows, duration, state rows and kept metrics (summed over its stateful
    operators)."""
    ops = progress.get("stateOperators") or []
    kept = {name: sum(int(op.get("customMetrics", {}).get(name, 0)) for op in ops) for name in KEPT_METRICS
            if any(name in op.get("customMetrics", {}) for op in ops)}
    return {"batch_id": progress["batchId"], "input_rows": progress["numInputRows"],
            "batch_ms": progress.get("durationMs", {}).get("triggerExecution"),
            "state_rows": sum(int(op.get("numRowsTotal", 0)) for op in ops),
            "rows_removed": sum(int(op.get("numRowsRemoved", 0)) for op in ops),
            "all_updates_ms": sum(int(op.get("allUpdatesTimeMs", 0)) for op in ops),
            "commit_ms": sum(int(op.get("commitTimeMs", 0)) for op in ops), "custom": kept}


def wait(q: Any, started: float, params: dict[str, Any]) -> tuple[bool, bool]:
    """Waits until the query ends by itself (True, False), or has read its `total_rows` and then
    completed a batch without data that started the TTL after its last batch with data (False,
    True: a processing-time transformWithState query never ends by itself, and its last keys'
    timers fire in that batch), or until `deadline_s`."""
    total, deadline = params.get("total_rows"), float(params["deadline_s"])
    while time.perf_counter() - started < deadline:
        if q.awaitTermination(1.0):
            return True, False
        if total is not None and last_timers_fired(q.recentProgress, int(total), int(params["ttl_ms"])):
            return False, True
    return False, False


def last_timers_fired(progress: list[Any], total: int, ttl_ms: int) -> bool:
    """Whether the batches (`StreamingQueryProgress`) read `total` rows and a batch without data
    that started at least `ttl_ms` after the last batch with data has completed."""
    data = {p.batchId: p for p in progress if p.numInputRows}
    if not data or sum(p.numInputRows for p in data.values()) < total:
        return False
    due = _ms(data[max(data)].timestamp) + ttl_ms
    return any(not p.numInputRows and _ms(p.timestamp) >= due for p in progress)


def _ms(timestamp: str) -> float:
    """A progress's `timestamp` (ISO 8601, UTC) in epoch milliseconds."""
    return dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000


def run(params: dict[str, Any]) -> dict[str, Any]:
    spark = session("ttlstate-churn", params["provider_class"], params["confs"], bool(params["ttlstate"]),
                    params["spark_confs"])
    try:
        started = time.perf_counter()
        q = start(spark, params)
        finished, timers_stop = wait(q, started, params)
        elapsed = time.perf_counter() - started
        if not finished:
            q.stop()
        rows = [batch_row(p) for p in progresses(q)]
        jars = spark.conf.get("spark.jars", "")
        idle = [batch_row(json.loads(p.json)) for p in q.recentProgress if not p.numInputRows]
    finally:
        spark.stop()
    return {"finished": finished, "stopped_after_timers": timers_stop, "seconds": round(elapsed, 3),
            "batches": rows,
            "batches_without_data": len(idle),
            "timers_fired_without_data": sum(b["custom"].get("numExpiredTimers", 0) for b in idle),
            "ttlstate_file": imported_ttlstate() if params["ttlstate"] else None, "spark_jars": jars}


if __name__ == "__main__":
    sys.exit(child_main(run))

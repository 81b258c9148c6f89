"""Driving Spark 4.3's Real-time Mode from PySpark without Kafka (tests and benchmarks only).

Spark 4.3's only Real-time source besides Kafka is `LowLatencyMemoryStream` (spark-sql's test
source; `rate` and Python data sources are refused with INPUT_STREAM_NOT_SUPPORTED), and its
Real-time sinks are Kafka, foreach, console and `ContinuousMemorySink` (`format("memory")` is
the micro-batch `MemorySink`, refused by the allowlist). PySpark reaches neither, so both are
built through py4j, and a query is started with `StreamingQueryManager.startQuery`, which
takes a sink object. The memory sink receives each row as the operator emits it.

Spark refuses a Real-time query whose session sets any state store provider but RocksDB's
(`STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED`), and defaults a new Real-time
query to RocksDB. A query whose checkpoint pins a provider in its offset log keeps it: so a
query runs on ttlstate in Real-time Mode after a first micro-batch run on ttlstate, restarted
with the provider conf unset in the session (`start(..., provider=None)`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from ttlstate.config import keys as K

CHECKPOINT_ROOT_KEY = "spark.sql.streaming.checkpointLocation"
FORMAT_VERSION_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
ALLOW_V1_KEY = "spark.sql.streaming.realTimeMode.dangerouslyAllowCheckpointV1.enabled"
MIN_BATCH_KEY = "spark.sql.streaming.realTimeMode.minBatchDuration"


def _scala_seq(spark: SparkSession, items: list[str]):  # noqa: ANN202 (a py4j object)
    jvm = spark._jvm
    lst = jvm.java.util.ArrayList()
    for item in items:
        lst.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(lst)


class LowLatencyInput:
    """A `LowLatencyMemoryStream[String]`: one `value` column, rows added from Python."""

    def __init__(self, spark: SparkSession, partitions: int = 1) -> None:
        self.spark = spark
        jvm = spark._jvm
        companion = getattr(getattr(jvm.org.apache.spark.sql.execution.streaming.sources,
                                    "LowLatencyMemoryStream$"), "MODULE$")
        self.stream = companion.apply(spark._jsparkSession, partitions,
                                      jvm.org.apache.spark.sql.Encoders.STRING())
        self.added = 0

    def df(self) -> DataFrame:
        return DataFrame(self.stream.toDF(), self.spark)

    def add(self, rows: list[str], partition: int | None = None) -> None:
        seq = _scala_seq(self.spark, rows)
        if partition is None:
            self.stream.addData(seq)
        else:
            self.stream.addData(partition, seq)
        self.added += len(rows)


class MemorySink:
    """Spark's `ContinuousMemorySink`: every row the query emitted, as it arrived."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.sink = spark._jvm.org.apache.spark.sql.execution.streaming.sources.ContinuousMemorySink()

    def rows(self) -> list[tuple]:
        conv = self.spark._jvm.scala.jdk.javaapi.CollectionConverters
        out = []
        for r in conv.asJava(self.sink.allData()):
            out.append(tuple(r.get(i) for i in range(r.length())))
        return out


@contextmanager
def session_confs(spark: SparkSession, confs: dict[str, str | None]) -> Iterator[None]:
    """Session confs set (None: unset) for the block, then the previous values again."""
    previous = {k: spark.conf.get(k, None) for k in confs}
    try:
        for k, v in confs.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
        yield
    finally:
        for k, v in previous.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def start(spark: SparkSession, df: DataFrame, sink: MemorySink, checkpoint_root: str, name: str,
          *, real_time: str | None, provider: str | None,
          confs: dict[str, str | None] | None = None) -> StreamingQuery:
    """Starts `df` in update mode into `sink`, checkpointed at `<checkpoint_root>/<name>`.

    `real_time`: the Real-time trigger's batch duration; None: micro-batches, as fast as
    possible. `provider`: the provider class the session sets while the query starts (None:
    unset, which a Real-time query needs; it then keeps the provider its checkpoint pins)."""
    jvm = spark._jvm
    trigger = (jvm.org.apache.spark.sql.streaming.Trigger.RealTime(real_time) if real_time
               else jvm.org.apache.spark.sql.streaming.Trigger.ProcessingTime(0))
    none = getattr(getattr(jvm.scala, "None$"), "MODULE$")
    options = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
    all_confs: dict[str, str | None] = {K.PROVIDER_CLASS_KEY: provider, CHECKPOINT_ROOT_KEY: checkpoint_root}
    all_confs.update(confs or {})
    with session_confs(spark, all_confs):
        jq = spark._jsparkSession.streams().startQuery(
            jvm.scala.Option.apply(name), none, none, df._jdf, options, sink.sink,
            jvm.org.apache.spark.sql.streaming.OutputMode.Update(), False, True, trigger,
            jvm.org.apache.spark.util.SystemClock(), none, none)
    return StreamingQuery(jq)


def committed_offset(query: StreamingQuery) -> int:
    """Rows of the (single-source) input the query has committed so far."""
    best = -1
    for p in query.recentProgress:
        end = p["sources"][0]["endOffset"]
        if isinstance(end, str):
            end = json.loads(end)
        if end:
            best = max(best, sum(int(v) for v in end.values()))
    return best


def wait_until(done: Callable[[], bool], timeout_s: float, query: StreamingQuery | None = None,
               state: Callable[[], object] = lambda: "") -> None:
    """Polls `done()`; raises (with `state()`) if it is still false after `timeout_s` or the
    query died."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not done after {timeout_s}s: {state()}")
        time.sleep(0.1)


def wait_committed(query: StreamingQuery, rows: int, timeout_s: float = 60.0) -> None:
    """Until a batch that read all `rows` of the input has committed (state and offsets)."""
    wait_until(lambda: committed_offset(query) >= rows, timeout_s, query)

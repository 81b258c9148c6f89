"""A production-shaped streaming query for the integration tests: Kafka in, Kafka out,
checkpoint on HDFS (or S3), stepped like tests/spark/harness.py's `Run`.

Input: one JSON record per event into a one-partition topic. A step is written by one Spark
task whose producer lingers until it flushes, so the whole step lands in Kafka as one record
batch, and the running query sees all of it or none: one step is one micro-batch, on every
provider, and batch ids line up between runs.

Output: `foreachBatch` writes each batch to the output topic through Spark's Kafka connector,
each record tagged with the batch id and an attempt id (the driver's clock when that call
started). Kafka's sink is at least once: a batch that fails after writing (say, its commit to
HDFS fails) is written again when the query recovers. Reading the topic back
(`outputs()`) therefore asserts what exactly once means downstream: per batch id, every attempt
wrote a subset of the last attempt's rows (a retry never produced a different result), and the
last attempt's rows are the batch's output, compared record for record with the other provider.
Rows that a task retried within one write wrote twice count once: the queries here never emit
the same row twice in one batch. `sink="kafka"` writes with Spark's streaming Kafka sink
instead (no batch ids in the records; `records()` reads them back).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ttlstate.config import keys as K
from ttlstate.demo.kafka import create_topics, produce_json, write_json_stream
from ttlstate.store import metric_names as M

EVENT_SCHEMA = "id INT, k STRING, v INT"


@dataclass
class KafkaRun:
    """One query on one provider: `name` names its topics and its checkpoint under `root` (an
    hdfs:// or s3a:// URL)."""

    spark: SparkSession
    provider: str
    build: Callable[[DataFrame], DataFrame]
    bootstrap: str
    root: str
    name: str
    output_mode: str = "update"
    confs: dict[str, str] = field(default_factory=dict)
    sink: str = "foreachBatch"  # or "kafka": Spark's streaming Kafka sink, key = the first column
    attempts: list[tuple[int, int]] = field(default_factory=list)  # (batch id, attempt id) started

    def __post_init__(self) -> None:
        self.in_topic = f"{self.name}-in"
        self.out_topic = f"{self.name}-out"
        self.checkpoint = f"{self.root}/{self.name}/checkpoint"
        self.query = None
        create_topics(self.spark, self.bootstrap, {self.in_topic: 1, self.out_topic: 2})

    def start(self) -> None:
        self.spark.conf.set(K.PROVIDER_CLASS_KEY, self.provider)
        previous = {k: self.spark.conf.get(k, None) for k in self.confs}
        for k, v in self.confs.items():
            self.spark.conf.set(k, v)
        events = (self.spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", self.bootstrap)
                  .option("subscribe", self.in_topic)
                  .option("startingOffsets", "earliest")
                  .option("failOnDataLoss", "true")
                  .load()
                  .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
                  .select("e.*"))
        try:
            out = self.build(events)
            if self.sink == "kafka":
                writer = write_json_stream(out, self.bootstrap, self.out_topic, out.columns[0])
            else:
                writer = out.writeStream.foreachBatch(self._sink)
            self.query = (writer.outputMode(self.output_mode)
                          .option("checkpointLocation", self.checkpoint)
                          .queryName(self.name).start())
            # Whatever the first trigger does with no new input (the Kafka source's first run
            # commits an empty batch 0) happens now, before a step is fed, on every provider.
            self.settle()
        finally:
            for k, v in previous.items():
                if v is None:
                    self.spark.conf.unset(k)
                else:
                    self.spark.conf.set(k, v)

    def _sink(self, df: DataFrame, batch_id: int) -> None:
        attempt = time.time_ns()
        self.attempts.append((batch_id, attempt))
        tagged = df.select(F.to_json(F.struct(F.lit(batch_id).alias("batch"), F.lit(attempt).alias("attempt"),
                                              F.struct(*df.columns).alias("row"))).alias("value"))
        (tagged.write.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
         .option("topic", self.out_topic).save())

    def feed(self, rows: list[dict]) -> None:
        """One step's events into the input topic, as one Kafka record batch (see the module)."""
        produce_json(self.spark, self.bootstrap, self.in_topic, rows, EVENT_SCHEMA)

    def step(self, rows: list[dict]) -> None:
        self.feed(rows)
        self.settle()

    def settle(self, timeout_s: float = 300.0) -> None:
        """processAllAvailable(), bounded: a query that stops making progress (say, executors
        that keep dying) fails the test naming its status instead of hanging it."""
        assert self.query is not None
        query, failure = self.query, []

        def wait() -> None:
            try:
                query.processAllAvailable()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                failure.append(e)
        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        waiter.join(timeout_s)
        if waiter.is_alive():
            raise AssertionError(f"{self.name}: not settled after {timeout_s:.0f} s; status {query.status}, "
                                 f"last progress {query.lastProgress}")
        if failure:
            raise failure[0]

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()
            self.query = None

    def records(self) -> list[tuple[int, int, str]]:
        """(partition, offset, value) of every record in the output topic, in offset order."""
        rows = (self.spark.read.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
                .option("subscribe", self.out_topic).option("startingOffsets", "earliest")
                .option("endingOffsets", "latest").load()
                .select("partition", "offset", F.col("value").cast("string").alias("value")).collect())
        return sorted((r.partition, r.offset, r.value) for r in rows)

    def outputs(self) -> dict[int, list[tuple]]:
        """Per batch id, the sorted rows of its last attempt, read back from the output topic;
        asserts that no attempt wrote a row its batch's last attempt did not."""
        assert self.sink == "foreachBatch", "batch ids are in the records of the foreachBatch sink only"
        return last_attempts([value for _, _, value in self.records()], self.name)

    def retried_batches(self) -> list[int]:
        """Batch ids the sink was called for more than once (by this driver)."""
        seen: dict[int, int] = {}
        for batch, _ in self.attempts:
            seen[batch] = seen.get(batch, 0) + 1
        return sorted(b for b, n in seen.items() if n > 1)


def run_steps(run: KafkaRun, steps: list[list[dict]], restart_after: int | None = None) -> KafkaRun:
    """All steps, one micro-batch each, with a stop and restart of the query before step
    `restart_after`."""
    run.start()
    try:
        for i, rows in enumerate(steps):
            if i == restart_after:
                run.stop()
                run.start()
            run.step(rows)
    finally:
        run.stop()
    return run


def snapshotted(spark: SparkSession, run: KafkaRun, version: int, partition: int) -> bool:
    """Whether the query's store of that partition (operator 0) has its snapshot of `version`."""
    return f"{version}.snapshot" in {n for n, _ in hdfs_files(spark, f"{run.checkpoint}/state/0/{partition}")}


def in_place_files(run: KafkaRun) -> int:
    """SST files the running query's recent batches opened in place (`snapshot.readInPlace`)."""
    assert run.query is not None
    return sum(int(op["customMetrics"].get(M.SST_FILES_READ_IN_PLACE.name, 0))
               for p in run.query.recentProgress for op in p["stateOperators"])


def hdfs_files(spark: SparkSession, path: str) -> list[tuple[str, int]]:
    """(name, replication) of the files in an HDFS directory, through the driver's Hadoop client."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[union-attr]
    return sorted((s.getPath().getName(), s.getReplication()) for s in fs.listStatus(hpath) if s.isFile())


def batch_times(spark: SparkSession, checkpoint: str) -> dict[int, int]:
    """batchTimestampMs per batch id, from the query's offset log on HDFS (ttlstate's "now")."""
    rows = (spark.read.text(f"{checkpoint}/offsets/[0-9]*", wholetext=True)
            .select(F.input_file_name().alias("path"), "value").collect())
    return {int(r.path.rsplit("/", 1)[1]): json.loads(r.value.splitlines()[1])["batchTimestampMs"]
            for r in rows}


def last_attempts(values: list[str], name: str) -> dict[int, list[tuple]]:
    """Per batch id, the sorted rows of its last attempt, from a foreachBatch sink's records
    (JSON with batch, attempt and row); asserts that no attempt wrote a row its batch's last
    attempt did not."""
    by_attempt: dict[tuple[int, int], list[tuple]] = {}
    for value in values:
        rec = json.loads(value)
        by_attempt.setdefault((rec["batch"], rec["attempt"]), []).append(tuple(rec["row"].values()))
    last: dict[int, int] = {}
    for batch, attempt in by_attempt:
        last[batch] = max(attempt, last.get(batch, attempt))
    # A task retried inside one attempt's write may have written some rows twice: the rows
    # of an attempt are a set (the queries here never emit the same row twice in a batch).
    out = {b: sorted(set(by_attempt[(b, a)]), key=repr) for b, a in last.items()}
    for (batch, attempt), rows in by_attempt.items():
        extra = set(rows) - set(out[batch])
        assert not extra, f"{name}: batch {batch} attempt {attempt} wrote rows its last attempt " \
                          f"did not: {sorted(extra, key=repr)}"
    return out

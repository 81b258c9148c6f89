"""One transformWithState query in each of Spark's APIs (tests only), and what a run of it in a
session configured for ttlstate must show.

Per key of `events` (k STRING, v INT), each batch (Update mode): the key, how many rows it has had
(a ValueState) and the values it has had, sorted (a ListState). In Scala
(`ttlstate.tools.TransformWithStateQueries` of the tools jar), with PySpark's
`transformWithStateInPandas` (4.0 and later) and with its row-based `transformWithState` (4.1 and
later). `STEPS` restarts after the first batch, so the second reads what the first run wrote."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pandas as pd
import pyspark
from pyspark.sql import DataFrame, Row, SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, Run, run_steps
from ttlstate.config import keys as K
from ttlstate.spark.lines import minor_of
from ttlstate.spark.tools_jar import tools_class
from ttlstate.store import metric_names as M

LINE = tuple(map(int, minor_of(pyspark.__version__).split(".")))
SCHEMAS = {"events": "k STRING, v INT"}
STEPS = [[{"k": "a", "v": 1}, {"k": "b", "v": 2}],
         [{"k": "a", "v": 3}, {"k": "c", "v": 4}, {"k": "a", "v": 5}, {"k": "b", "v": 6}]]
RESTART_AFTER = 1
EXPECTED = {0: [("a", 1, "1"), ("b", 1, "2")], 1: [("a", 3, "1,3,5"), ("b", 2, "2,6"), ("c", 1, "4")]}
Build = Callable[[dict[str, DataFrame]], DataFrame]


def _processor(rows_of: Callable, row_out: Callable) -> object:
    """PySpark's StatefulProcessor of the query; `rows_of` turns a group's input into its values
    of v, `row_out(key, n, values)` makes the output (a pandas frame or a Row)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class CountValues(StatefulProcessor):
        def init(self, handle) -> None:  # noqa: ANN001
            self.count = handle.getValueState("count", "n LONG")
            self.values = handle.getListState("values", "v INT")

        def handleInputRows(self, key, rows, timerValues):  # noqa: ANN001, ANN201, N802, N803
            seen = rows_of(rows)
            n = (self.count.get()[0] if self.count.exists() else 0) + len(seen)
            self.count.update((n,))
            self.values.appendList([(v,) for v in seen])
            yield row_out(key[0], n, ",".join(str(v) for v in sorted(r[0] for r in self.values.get())))

        def close(self) -> None:
            pass

    return CountValues()


def pandas_counts(s: dict[str, DataFrame]) -> DataFrame:
    """`transformWithStateInPandas` (4.0 and later)."""
    processor = _processor(lambda frames: [int(v) for pdf in frames for v in pdf["v"]],
                           lambda k, n, vs: pd.DataFrame({"k": [k], "n": [n], "values": [vs]}))
    return s["events"].groupBy("k").transformWithStateInPandas(processor, "k STRING, n LONG, values STRING",
                                                               "update", "None")


def row_counts(s: dict[str, DataFrame]) -> DataFrame:
    """PySpark's row-based `transformWithState` (4.1 and later)."""
    processor = _processor(lambda rows: [row.v for row in rows], lambda k, n, vs: Row(k=k, n=n, values=vs))
    return s["events"].groupBy("k").transformWithState(processor, "k STRING, n LONG, values STRING",
                                                       "update", "None")


def tools_method(spark: SparkSession, name: str) -> Callable[..., DataFrame]:
    """`ttlstate.tools.TransformWithStateQueries.<name>` of the tools jar: a Scala query of
    DataFrames, called with PySpark's."""
    queries = tools_class(spark, "ttlstate.tools.TransformWithStateQueries")
    method = next(m for m in queries.getMethods() if m.getName() == name)

    def call(*frames: DataFrame) -> DataFrame:
        args = spark.sparkContext._gateway.new_array(spark.sparkContext._jvm.java.lang.Object, len(frames))
        for i, frame in enumerate(frames):
            args[i] = frame._jdf
        return DataFrame(method.invoke(None, args), spark)
    return call


def scala_counts(spark: SparkSession) -> Build:
    """Spark's Scala API: `ttlstate.tools.TransformWithStateQueries.counts` of the tools jar."""
    counts = tools_method(spark, "counts")
    return lambda s: counts(s["events"])


def apis(spark: SparkSession) -> dict[str, Build]:
    """Every transformWithState API this Spark line has (none before 4.0)."""
    found: dict[str, Build] = {}
    if LINE >= (4, 0):
        found.update({"scala": scala_counts(spark), "transformWithStateInPandas": pandas_counts})
    if LINE >= (4, 1):
        found["transformWithState (rows)"] = row_counts
    return found


FINAL_COUNTS = {"a": 3, "b": 2, "c": 1}  # the "count" variable after STEPS


def read_counts(spark: SparkSession, checkpoint: str) -> dict[str, int]:
    """The "count" state variable of each key, read with Spark's state data source."""
    rows = spark.read.format("statestore").option("stateVarName", "count").load(checkpoint).collect()
    return {r["key"][0]: r["value"][0] for r in rows}


def notes(spark: SparkSession) -> list[str]:
    return list(spark.sparkContext._jvm.ttlstate.spark.StartChecks.recentNotes())


def warnings(spark: SparkSession) -> list[str]:
    return list(spark.sparkContext._jvm.ttlstate.spark.StartChecks.recentWarnings())


def pinned_providers(run: Run) -> list[str]:
    """The provider class each offset log entry of the run's checkpoint names."""
    offsets = os.path.join(run.checkpoint, "offsets")
    out = []
    for name in sorted((n for n in os.listdir(offsets) if n.isdigit()), key=int):
        with open(os.path.join(offsets, name)) as f:
            f.readline()
            out.append(json.loads(f.readline())["conf"][K.PROVIDER_CLASS_KEY])
    return out


def routed_run(spark: SparkSession, build: Build, steps: list = STEPS) -> Run:
    """The query in the ttlstate session, restarted after the first batch: routed (its offset log
    names RocksDB's provider from the first batch) and said so at each start, in one INFO line."""
    ours = run_steps(spark, TTLSTATE, build, SCHEMAS, steps, restart_after=RESTART_AFTER,
                     output_mode="update")
    assert pinned_providers(ours) == [ROCKSDB] * len(steps)
    said = [n for n in notes(spark) if ours.checkpoint in n]
    assert len(said) == 2 and "transformWithState" in said[0] and ROCKSDB in said[0], said  # start, restart
    return ours


# Spark's RocksDB provider has a change feed with changelog checkpointing only.
CHANGELOG_ON = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}


def on_rocksdb(spark: SparkSession, build: Build, steps: list = STEPS, confs: dict[str, str] | None = None
               ) -> Run:
    """The same query with Spark's RocksDB provider set by hand, restarted after the first batch."""
    return run_steps(spark, ROCKSDB, build, SCHEMAS, steps, restart_after=RESTART_AFTER, output_mode="update",
                     confs=confs)


def change_feed(spark: SparkSession, checkpoint: str, var: str) -> list[str]:
    """The state data source's change feed of the state variable `var` from batch 0, each row
    as its fields (batch id, change type, key, value; a MapState's: grouping key, user key,
    value; a ListState's: key, list element), sorted (a batch's partitions run in any order)."""
    reader = (spark.read.format("statestore").option("readChangeFeed", "true")
              .option("changeStartBatchId", "0").option("stateVarName", var))
    return sorted(repr(row.asDict(recursive=True)) for row in reader.load(checkpoint).collect())


FAMILY_METRICS = (M.INTERNAL_FAMILY_KEYS, M.EXTERNAL_FAMILIES, M.INTERNAL_FAMILIES)


def family_metrics(run: Run, batches: int | None = None) -> dict[int, list[tuple[int, ...]]]:
    """Per batch (the first `batches`, or all), each stateful operator's numRowsTotal (its user
    families' keys) and the three metrics of its column families, as Spark's RocksDB provider
    reports them: its internal families' keys (timers, TTL indexes, list metadata), how many
    user and internal families (on 4.0 and 4.1 under each other's name)."""
    return {batch: [(op["numRowsTotal"], *(int(op["customMetrics"][m.name]) for m in FAMILY_METRICS))
                    for op in progress["stateOperators"]]
            for batch, progress in run.progress_by_batch.items() if batches is None or batch < batches}


# `TransformWithStateQueries.features`' input: each step a batch (`batch_per_step`).
FEATURE_STEPS = [[{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 1}], [{"k": "a", "v": 3}],
                 [{"k": "b", "v": 2}, {"k": "c", "v": 4}], [{"k": "a", "v": 5}]]


def batch_per_step(spark: SparkSession, provider: str, build: Build, steps: list,
                   confs: dict[str, str] | None = None) -> Run:
    """The query started for each step, one batch each (`Trigger.Once`): a processing-time
    transformWithState runs batches without data for as long as it runs, so it never settles, and
    each batch here holds its step's rows and the timers due by then; every step is a restart."""
    run = Run(spark, provider, build, SCHEMAS, "update", dict(confs or {}))
    for rows in steps:
        run.feed(rows)
        run.start(once=True)
        assert run.query is not None
        run.query.awaitTermination()
        for p in run.query.recentProgress:
            run.progress_by_batch[p["batchId"]] = p
        run.query = None
    return run

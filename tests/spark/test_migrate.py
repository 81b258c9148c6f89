"""`ttlstate migrate`: a query runs N batches on Spark's provider, its checkpoint is migrated into
a new one on ttlstate (TTL on), and the query continues there: the outputs must be those of the
same query that never migrated. Also ttlstate -> RocksDB -> ttlstate, the source left untouched,
an existing target refused, and the command line."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tests.spark.harness import (
    EVENT_STEPS,
    EVENTS_SCHEMA,
    HDFS,
    ROCKSDB,
    TTLSTATE,
    Run,
    ev,
    run_steps,
    session,
)
from ttlstate.spark.migrate import TARGETS, MigrationError, migrate

pytestmark = pytest.mark.spark

SCHEMA = {"events": EVENTS_SCHEMA}
STEPS = [*EVENT_STEPS[:-1], [*EVENT_STEPS[-1], ev("c", 13, 61)]]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(ttl="1h")  # TTL on in the migrated query (nothing expires within the test)
    yield s
    s.stop()


def _files(root: str) -> dict[str, tuple[int, int]]:
    out = {}
    for d, _dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            st = os.stat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


def _migrate_and_continue(spark: SparkSession, build: Callable, provider: str, mode: str,
                          chain: tuple[str, ...] = ("ttlstate",), n: int = 3) -> tuple[Run, Run, list]:
    reference = run_steps(spark, provider, build, SCHEMA, STEPS, output_mode=mode)
    first = Run(spark, provider, build, SCHEMA, mode)
    first.start()
    for rows in STEPS[:n]:
        first.step(rows)
    first.stop()
    before = _files(first.checkpoint)
    checkpoint, reports = first.checkpoint, []
    for i, to in enumerate(chain):
        target = os.path.join(first.root, f"migrated-{i}-{to}")
        reports.append(migrate(spark, checkpoint, target, to))
        checkpoint = target
    assert _files(first.checkpoint) == before, "migrate modified its source"
    cont = Run(spark, TARGETS[chain[-1]], build, SCHEMA, mode, root=first.root)
    cont.checkpoint = checkpoint
    cont.step_no = n
    cont.outputs = dict(first.outputs)
    cont.start()
    for rows in STEPS[n:]:
        cont.step(rows)
    cont.stop()
    assert cont.outputs == reference.outputs
    assert cont.progress and all(p["stateOperators"] for p in cont.progress)
    return first, cont, reports


def agg(s: dict[str, DataFrame]) -> DataFrame:
    return s["events"].groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))


def test_aggregation_from_rocksdb(spark: SparkSession) -> None:
    first, cont, [report] = _migrate_and_continue(spark, agg, ROCKSDB, "update")
    assert report["sourceProvider"] == ROCKSDB and report["targetProvider"] == TTLSTATE
    assert report["batch"] == 2 and report["version"] == 3
    assert {(s["operator"], s["partition"], s["store"]) for s in report["stores"]} == {
        (0, 0, "default"), (0, 1, "default")}
    assert sum(s["rows"] for s in report["stores"]) == 4  # a, b, c, d
    # The migrated checkpoint pins ttlstate, and its state (read at the migrated batch) is the source's.
    target = os.path.join(first.root, "migrated-0-ttlstate")
    with open(os.path.join(target, "offsets", "2")) as f:
        assert TTLSTATE in f.read()
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", TTLSTATE)

    def state(ck: str) -> list:
        rows = spark.read.format("statestore").option("batchId", 2).load(ck).collect()
        return sorted(tuple(r) for r in rows)
    assert state(target) == state(first.checkpoint)


def test_drop_duplicates_from_hdfs(spark: SparkSession) -> None:
    _migrate_and_continue(spark, lambda s: s["events"].dropDuplicates(["k"]), HDFS, "append")


def test_session_window(spark: SparkSession) -> None:
    _migrate_and_continue(spark, lambda s: s["events"].withWatermark("ts", "10 seconds")
                          .groupBy(F.session_window("ts", "5 seconds"), "k").agg(F.count("*").alias("n")),
                          ROCKSDB, "append")


def _running_count(key: tuple, pdfs, state):  # noqa: ANN001, ANN202
    count = (state.get[0] if state.exists else 0) + sum(len(pdf) for pdf in pdfs)
    state.update((count,))
    yield pd.DataFrame({"k": [key[0]], "n": [count]})


def test_apply_in_pandas_with_state(spark: SparkSession) -> None:
    from pyspark.sql.streaming.state import GroupStateTimeout

    _migrate_and_continue(spark, lambda s: s["events"].groupBy("k").applyInPandasWithState(
        _running_count, "k STRING, n LONG", "n LONG", "update", GroupStateTimeout.NoTimeout),
        ROCKSDB, "update")


def test_round_trip_ttlstate_rocksdb_ttlstate(spark: SparkSession) -> None:
    _, _, reports = _migrate_and_continue(spark, agg, TTLSTATE, "update", chain=("rocksdb", "ttlstate"))
    assert [(r["sourceProvider"], r["targetProvider"]) for r in reports] == [
        (TTLSTATE, ROCKSDB), (ROCKSDB, TTLSTATE)]
    assert [sum(s["rows"] for s in r["stores"]) for r in reports] == [4, 4]


def test_refuses_existing_target_and_non_checkpoints(spark: SparkSession, tmp_path) -> None:  # noqa: ANN001
    run = run_steps(spark, ROCKSDB, agg, SCHEMA, STEPS[:1], output_mode="update")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "something").write_text("x")
    with pytest.raises(MigrationError, match="exists and is not empty"):
        migrate(spark, run.checkpoint, str(taken))
    assert os.listdir(taken) == ["something"]
    with pytest.raises(MigrationError, match="not a streaming query checkpoint"):
        migrate(spark, str(tmp_path), str(tmp_path / "new"))


def test_command_line(spark: SparkSession, capsys) -> None:  # noqa: ANN001
    from ttlstate.cli.main import main

    run = run_steps(spark, ROCKSDB, agg, SCHEMA, STEPS[:2], output_mode="update")
    target = os.path.join(run.root, "cli-target")
    assert main(["migrate", run.checkpoint, target]) == 0
    out = capsys.readouterr().out
    assert "copied 2 stores" in out and "verified" in out and f"checkpointLocation={target}" in out
    assert main(["migrate", run.checkpoint, target]) == 1  # never overwrites
    assert "never overwrites" in capsys.readouterr().err

"""Spark's snapshot-lag contract (4.1+): each store reports the snapshots it publishes to Spark's
state store coordinator, as Spark's own providers do, and a store the coordinator finds lagging
(`forceSnapshotUploadOnLag`, 4.2+) is snapshotted at its next maintenance whatever
`snapshotInterval` says (Spark's forceSnapshotOnCommit). Run on 4.1 and 4.2 by the Spark-version
tier (scripts/spark_versions.sh), on 4.3 by make test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import TTLSTATE, Run, poll_until, session
from ttlstate.config import keys as K

SCHEMA = {"events": "k STRING"}
STATE = "org.apache.spark.sql.execution.streaming.state"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # The coordinator reads its confs once, from the session that starts the first query: a store
    # lags once its snapshot trails the query by a batch and a maintenance interval.
    s = session(confs={"spark.sql.streaming.stateStore.forceSnapshotUploadOnLag": "true",
                       "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1",
                       "spark.sql.streaming.stateStore.multiplierForMinVersionDiffToLog": "1",
                       "spark.sql.streaming.stateStore.multiplierForMinTimeDiffToLog": "1",
                       "spark.sql.streaming.stateStore.snapshotLagReportInterval": "0"})
    yield s
    s.stop()


def _dedupe(sources: dict[str, DataFrame]) -> DataFrame:
    return sources["events"].dropDuplicates(["k"])


def _latest_reported(spark: SparkSession, run: Run, partition: int) -> int | None:
    """What the coordinator holds as the store's latest uploaded snapshot (its test hook)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    state = jvm.org.apache.spark.sql.execution.streaming.state
    store = state.StateStoreId(os.path.join("file:" + run.checkpoint, "state"), 0, partition, "default")
    provider = state.StateStoreProviderId(store, jvm.java.util.UUID.fromString(run.query.runId))
    coordinator = spark._jsparkSession.streams().stateStoreCoordinator()
    latest = coordinator.getLatestSnapshotVersionForTesting(provider)
    return int(latest.get()) if latest.isDefined() else None


def _snapshots(run: Run, partition: int) -> list[int]:
    d = os.path.join(run.checkpoint, "state", "0", str(partition))
    return sorted(int(n.split(".")[0]) for n in os.listdir(d) if n.endswith(".snapshot"))


def _forces() -> bool:
    """Whether this Spark asks lagging stores to snapshot (forceSnapshotOnCommit: 4.2 and later)."""
    import pyspark

    major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    return (major, minor) >= (4, 2)


def test_every_snapshot_is_reported_and_a_lagging_store_is_snapshotted(spark: SparkSession) -> None:
    """On 4.2 and later, snapshotInterval=1000 never snapshots on its own in these few batches:
    only the coordinator's force does, which it stops once the store reports the snapshot it
    published. On 4.1 (reports, no force) the interval is 2, and its snapshots are reported."""
    interval = "1000" if _forces() else "2"
    run = Run(spark, TTLSTATE, _dedupe, SCHEMA, confs={K.SNAPSHOT_INTERVAL.key: interval})
    run.start()
    try:
        for i in range(6):
            run.step([{"k": f"k{i}-{j}"} for j in range(10)])
            if _snapshots(run, 0) and _snapshots(run, 1):
                break
            poll_until(lambda: False, 1.5)  # a maintenance interval: the lag grows in time too
        assert poll_until(lambda: bool(_snapshots(run, 0) and _snapshots(run, 1)), 30), os.listdir(
            os.path.join(run.checkpoint, "state", "0", "0"))
        for p in (0, 1):
            def reported(p: int = p) -> bool:
                return _latest_reported(spark, run, p) == max(_snapshots(run, p))
            assert poll_until(reported, 30), (p, _latest_reported(spark, run, p), _snapshots(run, p))
    finally:
        run.stop()


def test_snapshots_written_as_commits_return_are_reported(spark: SparkSession) -> None:
    """`snapshot.afterCommit` with `snapshotInterval=1`: the state server snapshots each version
    as its commit returns (background_snapshots.py), and maintenance reports the newest one it
    published to the coordinator, whoever wrote it."""
    run = Run(spark, TTLSTATE, _dedupe, SCHEMA,
              confs={K.SNAPSHOT_INTERVAL.key: "1", K.SNAPSHOT_AFTER_COMMIT.key: "true"})
    run.start()
    try:
        for i in range(3):
            run.step([{"k": f"k{i}-{j}"} for j in range(10)])
        for p in (0, 1):
            assert poll_until(lambda p=p: 3 in _snapshots(run, p), 30), (p, _snapshots(run, p))

            def reported(p: int = p) -> bool:
                return _latest_reported(spark, run, p) == max(_snapshots(run, p))
            assert poll_until(reported, 30), (p, _latest_reported(spark, run, p), _snapshots(run, p))
    finally:
        run.stop()

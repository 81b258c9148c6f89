"""SupportsFineGrainedReplay: the state data source's `readChangeFeed` and `snapshotStartBatchId`
on ttlstate checkpoints, compared with Spark's RocksDB provider (changelog checkpointing on) on
the same query and inputs."""

from __future__ import annotations

import os
import re

import pytest
from pyspark.sql import functions as F

from tests.spark.harness import ROCKSDB, TTLSTATE, poll_until, run_steps, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, t TIMESTAMP"}
CHANGELOG_ON = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}


def windowed_counts(s):  # noqa: ANN001, ANN201
    """Append mode with a watermark: windows are put while open and deleted when evicted."""
    return (s["events"].withWatermark("t", "5 seconds")
            .groupBy(F.window("t", "10 seconds"), "k").count())


def _steps() -> list[list[dict]]:
    def at(sec: int, k: str) -> dict:
        return {"k": k, "t": f"2026-01-01 00:00:{sec:02d}"}
    return [[at(1, "a"), at(2, "b")], [at(3, "a"), at(12, "c")], [at(14, "b"), at(21, "a")],
            [at(33, "c"), at(35, "d")], [at(41, "a")], [at(55, "b"), at(56, "b")]]


FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"


@pytest.fixture(scope="module", params=["1", "2"], ids=["checkpoint-v1", "checkpoint-v2"])
def spark(request):  # noqa: ANN001, ANN201
    """Both checkpoint formats: on format 2 the reader passes the ids of Spark's commit log."""
    s = session()
    s.conf.set(FORMAT_KEY, request.param)
    yield s
    s.conf.unset(FORMAT_KEY)
    s.stop()


@pytest.fixture(scope="module")
def runs(spark):  # noqa: ANN001, ANN201
    ours = run_steps(spark, TTLSTATE, windowed_counts, SCHEMA, _steps(),
                     confs={K.SNAPSHOT_INTERVAL.key: "2"})
    theirs = run_steps(spark, ROCKSDB, windowed_counts, SCHEMA, _steps(), confs=CHANGELOG_ON)
    return ours, theirs


def _rows(df) -> list[tuple]:  # noqa: ANN001
    return sorted((tuple(r) for r in df.collect()), key=repr)


def test_change_feed_matches_rocksdb(spark, runs) -> None:  # noqa: ANN001
    ours, theirs = runs
    assert ours.outputs == theirs.outputs

    def feed(run, provider: str, **options: object) -> list[tuple]:  # noqa: ANN001
        spark.conf.set(K.PROVIDER_CLASS_KEY, provider)
        reader = spark.read.format("statestore").option("readChangeFeed", "true")
        for k, v in options.items():
            reader = reader.option(k, v)
        return _rows(reader.load(run.checkpoint))

    ttl_feed = feed(ours, TTLSTATE, changeStartBatchId=0)
    rocks_feed = feed(theirs, ROCKSDB, changeStartBatchId=0)
    assert ttl_feed == rocks_feed
    kinds = {r[1] for r in ttl_feed}
    assert kinds == {"update", "delete"}, kinds  # windows are put, then evicted
    assert max(r[0] for r in ttl_feed) <= max(ours.outputs)  # no-data batches evict too
    # A range of batches
    assert (feed(ours, TTLSTATE, changeStartBatchId=2, changeEndBatchId=3)
            == feed(theirs, ROCKSDB, changeStartBatchId=2, changeEndBatchId=3)
            == [r for r in ttl_feed if 2 <= r[0] <= 3])


def test_snapshot_start_batch_id(spark, runs) -> None:  # noqa: ANN001
    ours, _ = runs
    store_dir = os.path.join(ours.checkpoint, "state", "0", "0")

    def snapshots() -> list[int]:
        return sorted(int(re.split(r"[._]", f)[0]) for f in os.listdir(store_dir)
                      if f.endswith(".snapshot"))
    # Maintenance writes snapshots in the background (every second, snapshotInterval 2).
    assert poll_until(lambda: bool(snapshots()), 30), os.listdir(store_dir)
    spark.conf.set(K.PROVIDER_CLASS_KEY, TTLSTATE)
    last = max(int(n) for n in os.listdir(os.path.join(ours.checkpoint, "commits")) if n.isdigit())
    plain = _rows(spark.read.format("statestore").option("batchId", last).load(ours.checkpoint)
                  .where("partition_id = 0"))
    assert snapshots()[-1] <= last + 1
    for version in snapshots():
        replayed = _rows(spark.read.format("statestore").option("snapshotStartBatchId", version - 1)
                         .option("snapshotPartitionId", 0).option("batchId", last).load(ours.checkpoint))
        assert replayed == plain, version
    # A batch without a snapshot file is refused, naming the file.
    missing = next(v for v in range(1, last + 2) if v not in snapshots())
    with pytest.raises(Exception, match=rf"{missing}(_[0-9a-f-]+)?\.snapshot"):
        spark.read.format("statestore").option("snapshotStartBatchId", missing - 1) \
            .option("snapshotPartitionId", 0).option("batchId", last).load(ours.checkpoint).collect()

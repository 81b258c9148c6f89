"""Kafka in, Kafka out, checkpoint on S3: Hadoop's S3A file system (hadoop-aws 3.5.0, the
Hadoop of pyspark's jars) against S3Proxy, an S3 endpoint that keeps the objects in memory.
Object stores have no rename: S3A's rename is a copy and a delete, and Spark's checkpoint file
manager and ttlstate's files go through it. Outputs equal Spark's RocksDB provider's, also on
S3, record for record, through a restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from integration.components import KafkaBroker, S3Proxy, spark_jars
from pyspark.sql import DataFrame, SparkSession

from tests.integration.pipeline import KafkaRun, hdfs_files, in_place_files, run_steps, snapshotted
from tests.integration.test_kafka_hdfs import RESTART_AFTER, STEPS
from tests.spark.harness import ROCKSDB, TTLSTATE, our_server_processes, poll_until, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Proxy]:
    proxy = S3Proxy()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def spark(s3: S3Proxy) -> Iterator[SparkSession]:
    s = session("local[2]", confs={"spark.jars": spark_jars(), **s3.hadoop_confs})
    yield s
    s.stop()


def dedupe_count(events: DataFrame) -> DataFrame:
    return events.dropDuplicates(["id"]).groupBy("k").count()


@pytest.fixture(scope="module")
def expected(spark: SparkSession, kafka: KafkaBroker, s3: S3Proxy) -> dict[int, list[tuple]]:
    theirs = run_steps(KafkaRun(spark, ROCKSDB, dedupe_count, kafka.bootstrap, f"{s3.url}/it", "s3-rocksdb"),
                       STEPS, RESTART_AFTER)
    out = theirs.outputs()
    assert len(out) == len(STEPS), out
    return out


Outputs = dict[int, list[tuple]]


def test_same_outputs_as_rocksdb_with_the_checkpoint_on_s3(spark: SparkSession, kafka: KafkaBroker,
                                                           s3: S3Proxy, expected: Outputs) -> None:
    root = f"{s3.url}/it"
    ours = run_steps(KafkaRun(spark, TTLSTATE, dedupe_count, kafka.bootstrap, root, "s3-ttl",
                              confs={K.TTL.key: "1h"}), STEPS, RESTART_AFTER)
    assert ours.outputs() == expected
    names = {name for name, _ in hdfs_files(spark, f"{ours.checkpoint}/state/0/0")}
    assert {f"{v}.changelog" for v in range(1, len(STEPS) + 1)} <= names, names


def test_a_restart_reads_the_snapshots_sst_files_in_place_on_s3(spark: SparkSession, kafka: KafkaBroker,
                                                                s3: S3Proxy, expected: Outputs) -> None:
    """`snapshot.readInPlace`: the restarted query's stores open their snapshot's SST files where
    they lie on S3, RocksDB reading the byte ranges it needs through S3A (the shim's range
    service); a fresh state server, so none of them is in its block cache."""
    confs = {K.TTL.key: "1h", K.SNAPSHOT_INTERVAL.key: "1", K.SNAPSHOT_READ_IN_PLACE.key: "true"}
    ours = KafkaRun(spark, TTLSTATE, dedupe_count, kafka.bootstrap, f"{s3.url}/it", "s3-in-place",
                    confs=confs)
    ours.start()
    try:
        for rows in STEPS[:RESTART_AFTER]:
            ours.step(rows)
        assert poll_until(lambda: all(snapshotted(spark, ours, RESTART_AFTER, op) for op in range(2)), 60)
        ours.stop()
        for p, _ in our_server_processes():
            p.kill()
        ours.start()
        for rows in STEPS[RESTART_AFTER:]:
            ours.step(rows)
        assert in_place_files(ours) > 0
    finally:
        ours.stop()
    assert ours.outputs() == expected

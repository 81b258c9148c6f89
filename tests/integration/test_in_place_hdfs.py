"""Restores that read SST files in place on HDFS (`snapshot.readInPlace`: the shim's range
service reads the byte ranges RocksDB asks for), and HDFS going away in the middle of them.

A dropDuplicates over Kafka, its checkpoint on a MiniDFSCluster (two DataNodes, replication 2),
snapshotted at every version as its commit returns, no uploaded SST file kept locally
(`snapshot.afterCommit`, `snapshot.localMaxBytes`). After two steps the query stops and the
state server is killed (a fresh executor: nothing of the files in its block cache); the
restarted query restores in place, and the restore's first store stalls right after RocksDB
opened its files (a crash point of the state server) while both DataNodes are stopped: its next
read in place (the replay of the newest changelog, or a task's read) fails the task naming the
file, each retry fails naming the file it could not read, and the query stops. With the
DataNodes back, the restarted query re-runs the batch, restores in place again and runs on: the
outputs equal Spark's RocksDB provider's clean run on HDFS, record for record. local[2,3]: a
failed task is retried, as on a cluster."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterator

import pytest
from integration.components import KafkaBroker, MiniHdfs, spark_jars
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from tests.integration.pipeline import KafkaRun, in_place_files, run_steps, snapshotted
from tests.integration.test_faults import HdfsStopper
from tests.integration.test_kafka_hdfs import HDFS_CLIENT, STEPS, dedupe
from tests.spark.harness import ROCKSDB, TTLSTATE, our_server_processes, poll_until, session
from ttlstate import faults
from ttlstate.config import keys as K

pytestmark = pytest.mark.integration

# Snapshots as the commits return, and no uploaded file kept on the local disk: once snapshotted,
# every SST file is read from HDFS.
IN_PLACE = {K.TTL.key: "1h", K.SNAPSHOT_INTERVAL.key: "1", K.SNAPSHOT_READ_IN_PLACE.key: "true",
            K.SNAPSHOT_AFTER_COMMIT.key: "true", K.SNAPSHOT_LOCAL_MAX_BYTES.key: "1"}
STALL_MS = 8000  # the stalled store waits this long; both DataNodes stop meanwhile
# A read of a block whose DataNodes are gone fails after the HDFS client's few tries, quickly.
FAST_FAILING_READS = {"spark.hadoop.dfs.client.retry.window.base": "100",
                      "spark.hadoop.dfs.client.max.block.acquire.failures": "1"}


@pytest.fixture(scope="module")
def marker() -> str:
    return os.path.join(tempfile.mkdtemp(prefix="ttlstate-in-place-"), "opened")


@pytest.fixture(scope="module")
def spark(marker: str) -> Iterator[SparkSession]:
    wrapper = os.path.join(os.path.dirname(marker), "python")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\n{faults.ENV}='in-place-opened+idle={STALL_MS}:{marker}'\nexport {faults.ENV}\n"
                f"exec '{sys.executable}' \"$@\"\n")
    os.chmod(wrapper, stat.S_IRWXU)
    s = session("local[2,3]", confs={"spark.jars": spark_jars(), **HDFS_CLIENT, **FAST_FAILING_READS},
                python=wrapper)
    yield s
    s.stop()


def start_datanodes(hdfs: MiniHdfs) -> None:
    hdfs.command("start-datanode")
    hdfs.command("start-datanode")


def test_hdfs_down_during_an_in_place_read_fails_naming_the_file_and_a_restart_restores_exactly(
        spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs, marker: str) -> None:
    root = f"{hdfs.url}/in-place"
    theirs = run_steps(KafkaRun(spark, ROCKSDB, dedupe, kafka.bootstrap, root, "in-place-rocksdb", "append"),
                       STEPS, 2)
    expected = theirs.outputs()
    assert len(expected) == len(STEPS), expected

    ours = KafkaRun(spark, TTLSTATE, dedupe, kafka.bootstrap, root, "in-place-ttl", "append", dict(IN_PLACE))
    stopper = None
    ours.start()
    try:
        ours.step(STEPS[0])
        ours.step(STEPS[1])
        assert poll_until(lambda: all(snapshotted(spark, ours, 2, op) for op in range(2)), 60)
        ours.stop()
        for p, _ in our_server_processes():  # a fresh executor: no block of the files in its cache
            p.kill()
        # stop-datanode 0 twice: the other one is the first once one stopped
        stopper = HdfsStopper(hdfs, ("stop-datanode 0", "stop-datanode 0"), request=marker)
        ours.start()
        ours.feed(STEPS[2])
        with pytest.raises(StreamingQueryException) as failed:
            ours.settle()
        assert stopper.stopped.is_set()  # after the restore opened its files in place
        message = str(failed.value)
        # The last attempt's failure: a read in place, the check of the files, or (when the
        # failed read was the load's own replay, which drops the DB) the snapshot's manifest.
        assert f"{ours.checkpoint}/state/0/" in message and "BlockMissingException" in message, message[:3000]
        ours.stop()
        stopper.close()
        start_datanodes(hdfs)
        stopper = None
        ours.start()  # re-runs the failed batch (STEPS[2]), restoring in place again
        for rows in STEPS[3:]:
            ours.step(rows)
        assert in_place_files(ours) > 0
    finally:
        ours.stop()
        if stopper is not None:
            stopper.close()
            if stopper.stopped.is_set():
                start_datanodes(hdfs)
    assert ours.outputs() == expected

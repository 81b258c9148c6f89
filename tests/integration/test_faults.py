"""Faults on the Kafka -> ttlstate -> Kafka pipeline with its checkpoint on HDFS.

The query is applyInPandasWithState (rows and sum per key) on ttlstate with a TTL of an hour
(its TTL bookkeeping runs, nothing expires in the test), read from and written to Kafka, its
checkpoint on a MiniDFSCluster (two DataNodes, replication 2). Each test injects one fault in
the middle of the five steps; the per-batch output read back from Kafka must equal Spark's
RocksDB provider's clean run (also on HDFS) record for record, each retried batch's earlier
attempts a subset of its last (tests/integration/pipeline.py): nothing lost, nothing
duplicated downstream. local[2,3]: a failed task is retried, as on a cluster.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

import pytest
from integration.components import KafkaBroker, MiniHdfs
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tests.integration.pipeline import KafkaRun, run_steps
from tests.integration.test_kafka_hdfs import HDFS_CLIENT, STEPS, spark_jars
from tests.spark.harness import ROCKSDB, TTLSTATE, our_server_processes, poll_until, session
from tests.spark.test_process_faults import TRIGGER, counting, kill_server_once
from ttlstate.config import keys as K

pytestmark = pytest.mark.integration

TTL = {K.TTL.key: "1h"}
_names = iter(range(1_000_000))


def pandas_query(hook: Callable[[], None] | None = None) -> Callable[[DataFrame], DataFrame]:
    """Rows and sum per key; `hook` runs in the Python UDF worker when a batch has v == TRIGGER
    (step 1), after the store was loaded and before it commits."""
    def build(events: DataFrame) -> DataFrame:
        return events.groupBy("k").applyInPandasWithState(
            counting(hook), "k STRING, n LONG, total LONG", "n LONG, total LONG", "update", "NoTimeout")
    return build


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session("local[2,3]", confs={"spark.jars": spark_jars(), **HDFS_CLIENT})
    yield s
    s.stop()


def new_run(spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs, provider: str,
            build: Callable[[DataFrame], DataFrame], fault: str) -> KafkaRun:
    return KafkaRun(spark, provider, build, kafka.bootstrap, f"{hdfs.url}/faults", f"{fault}-{next(_names)}",
                    "update", dict(TTL) if provider == TTLSTATE else {})


@pytest.fixture(scope="module")
def expected(spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs) -> dict[int, list[tuple]]:
    theirs = run_steps(new_run(spark, kafka, hdfs, ROCKSDB, pandas_query(), "reference"), STEPS)
    out = theirs.outputs()
    assert len(out) == len(STEPS), out
    return out


def test_kill_9_of_the_state_server_during_a_batch(spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs,
                                                   expected: dict[int, list[tuple]]) -> None:
    marker = os.path.join(tempfile.mkdtemp(), "killed")
    kill = functools.partial(kill_server_once, os.getpid(), marker, False)
    ours = new_run(spark, kafka, hdfs, TTLSTATE, pandas_query(kill), "kill9")
    ours.start()
    try:
        ours.step(STEPS[0])
        before = {p.pid for p, _ in our_server_processes()}
        for rows in STEPS[1:]:
            ours.step(rows)
    finally:
        ours.stop()
    with open(marker) as f:
        killed = json.load(f)["killed"]
    assert killed and set(killed) <= before, (killed, before)
    after = {p.pid for p, _ in our_server_processes()}
    assert after and not after & before, f"server not replaced: before {before}, after {after}"
    assert ours.outputs() == expected


def test_namenode_restart_between_batches(spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs,
                                          expected: dict[int, list[tuple]]) -> None:
    ours = new_run(spark, kafka, hdfs, TTLSTATE, pandas_query(), "nn-restart")
    ours.start()
    try:
        for i, rows in enumerate(STEPS):
            if i in (2, 4):
                hdfs.command("restart-namenode")
            ours.step(rows)
    finally:
        ours.stop()
    assert ours.outputs() == expected


def test_a_datanode_stopped_and_a_restart_reads_the_checkpoint_from_the_other(
        spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs, expected: dict[int, list[tuple]]) -> None:
    """Replication 2: every checkpoint block has a copy on the DataNode that stays up. After
    the stop, batches write with one DataNode, and the restarted query's stores load from HDFS
    (the state server is restarted too, so nothing is served from its local copies)."""
    ours = new_run(spark, kafka, hdfs, TTLSTATE, pandas_query(), "dn-stop")
    ours.start()
    stopped = False
    try:
        ours.step(STEPS[0])
        ours.step(STEPS[1])
        hdfs.command("stop-datanode 0")
        stopped = True
        ours.step(STEPS[2])
        ours.stop()
        for p, _ in our_server_processes():  # stores reload from the checkpoint, not local files
            p.kill()
        ours.start()
        ours.step(STEPS[3])
        ours.step(STEPS[4])
    finally:
        ours.stop()
        if stopped:
            hdfs.command("start-datanode")
    assert ours.outputs() == expected


class HdfsStopper:
    """Runs `commands` of the MiniHdfs (stopping parts of it) once `request` appears (a task or
    the state server creates it), then creates `done`."""

    def __init__(self, hdfs: MiniHdfs, commands: tuple[str, ...] = ("stop-namenode",),
                 request: str | None = None) -> None:
        self.hdfs, self.commands = hdfs, commands
        d = tempfile.mkdtemp(prefix="ttlstate-nn-")
        self.request, self.done = request or os.path.join(d, "request"), os.path.join(d, "done")
        self.stopped = threading.Event()
        self._quit = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._quit.is_set():
            if os.path.exists(self.request):
                for command in self.commands:
                    self.hdfs.command(command)
                self.stopped.set()
                open(self.done, "w").close()
                return
            time.sleep(0.05)

    def close(self) -> None:
        self._quit.set()
        self._thread.join(30)


def stop_namenode_once(request: str, done: str, port: int) -> None:
    """Runs in the Python UDF worker, before the store commits: asks for the NameNode to be
    stopped, once, and waits (bounded) until it is and its port refuses connections."""
    try:
        os.close(os.open(request, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return

    def down() -> bool:
        if not os.path.exists(done):
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return False
        except OSError:
            return True
    if not poll_until(down, 60, every_s=0.1):
        raise AssertionError("the NameNode was not stopped within 60 s")


def test_hdfs_unreachable_during_a_commit_fails_the_batch_and_the_query_recovers_exactly(
        spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs, expected: dict[int, list[tuple]]) -> None:
    stopper = HdfsStopper(hdfs)
    hook = functools.partial(stop_namenode_once, stopper.request, stopper.done, urlparse(hdfs.url).port)
    ours = new_run(spark, kafka, hdfs, TTLSTATE, pandas_query(hook), "hdfs-down")
    ours.start()
    try:
        ours.step(STEPS[0])
        assert TRIGGER in {r["v"] for r in STEPS[1]}
        ours.feed(STEPS[1])  # has v == TRIGGER: the NameNode goes away before the commit
        with pytest.raises(StreamingQueryException) as failed:
            ours.settle()
        assert stopper.stopped.is_set()
        message = str(failed.value)
        assert f"{ours.checkpoint}/state/0/" in message, message[:3000]  # the store file it could not reach
        ours.stop()
        hdfs.command("start-namenode")
        ours.start()  # re-runs the failed batch
        for rows in STEPS[2:]:
            ours.step(rows)
    finally:
        stopper.close()
        ours.stop()
        if stopper.stopped.is_set() and not poll_until(lambda: _port_open(hdfs), 1):
            hdfs.command("start-namenode")
    assert 2 in ours.retried_batches(), ours.attempts  # batch 2 (step 1) ran twice
    assert ours.outputs() == expected


def _port_open(hdfs: MiniHdfs) -> bool:
    try:
        socket.create_connection(("127.0.0.1", urlparse(hdfs.url).port), timeout=1).close()
        return True
    except OSError:
        return False

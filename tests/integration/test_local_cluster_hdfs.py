"""On `local-cluster[2,1,1024]` (two executor JVMs): Kafka in, Kafka out, checkpoint on HDFS,
and an executor JVM killed (-9) in the middle, so its stores move to another executor JVM and
are loaded there from HDFS. The outputs equal Spark's RocksDB provider's clean run on the same
cluster, also on HDFS. The cluster helpers are those of tests/spark/test_local_cluster.py.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator

import psutil
import pytest
from integration.components import KafkaBroker, MiniHdfs, spark_jars
from pyspark.sql import DataFrame, SparkSession

from tests.integration.pipeline import KafkaRun, run_steps
from tests.integration.test_kafka_hdfs import HDFS_CLIENT, STEPS
from tests.spark.harness import ROCKSDB, TTLSTATE, running, session
from tests.spark.test_local_cluster import (
    MASTER,
    driver_executor_ids,
    executor_jvms,
    executor_logs,
    stores_by_jvm,
    supervisors,
    wait_for,
    workers_of,
)
from ttlstate.config import keys as K

# `make test-long`: the cluster tier's standalone cluster moves stores between executors over
# HDFS through a killed executor (tests/cluster/test_standalone.py).
pytestmark = [pytest.mark.integration, pytest.mark.long]

KILL_AFTER = 3  # steps before the executor JVM is killed


def dedupe_count(events: DataFrame) -> DataFrame:
    """Two stateful operators (deduplication, then aggregation), two partitions each."""
    return events.dropDuplicates(["id"]).groupBy("k").count()


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[SparkSession, str]]:
    s = session(MASTER, confs={"spark.jars": spark_jars(), **HDFS_CLIENT})
    app_dir = None
    try:
        wait_for("two registered executors", lambda: len(driver_executor_ids(s)) == 2, timeout_s=120)
        jvms = executor_jvms()
        app_dirs = {os.path.dirname(psutil.Process(pid).cwd()) for pid in jvms}
        assert len(jvms) == 2 and len(app_dirs) == 1, (jvms, app_dirs)
        app_dir = app_dirs.pop()
        yield s, app_dir
    finally:
        s.stop()
        if app_dir is not None:
            shutil.rmtree(app_dir, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(app_dir))
            except OSError:
                pass


def test_stores_move_between_executors_over_hdfs(cluster: tuple[SparkSession, str], kafka: KafkaBroker,
                                                 hdfs: MiniHdfs) -> None:
    spark, app_dir = cluster
    root = f"{hdfs.url}/cluster"
    theirs = run_steps(KafkaRun(spark, ROCKSDB, dedupe_count, kafka.bootstrap, root, "cluster-rocksdb"),
                       STEPS)
    expected = theirs.outputs()
    assert len(expected) == len(STEPS), expected

    ours = KafkaRun(spark, TTLSTATE, dedupe_count, kafka.bootstrap, root, "cluster-ttl",
                    confs={K.TTL.key: "1h"})
    ours.start()
    try:
        for rows in STEPS[:KILL_AFTER]:
            ours.step(rows)
        assert ours.query is not None
        run_id = str(ours.query.runId)
        before = stores_by_jvm(run_id)
        jvms = executor_jvms()

        def only_in(pid: int) -> set[str]:
            return before.get(pid, set()).difference(*(v for k, v in before.items() if k != pid))

        victim = max(jvms, key=lambda pid: len(only_in(pid)))
        moved = only_in(victim)
        assert moved, f"no executor JVM held a store of the run that the other did not: {before}"
        server_procs = [p for sup in supervisors() if sup.ppid() == victim for p in (sup, *workers_of(sup))]
        os.kill(victim, signal.SIGKILL)
        wait_for(f"the state server of the killed executor JVM {victim} to exit",
                 lambda: not running(server_procs))
        lost = jvms[victim]
        wait_for(f"the driver to drop executor {lost}", lambda: lost not in driver_executor_ids(spark), 60)

        ours.step(STEPS[KILL_AFTER])
        after = stores_by_jvm(run_id)
        placed = {store: [jvm for jvm, stores in after.items() if store in stores] for store in moved}
        assert victim not in after and all(placed.values()), f"stores of the killed executor now: {placed}"
        for rows in STEPS[KILL_AFTER + 1:]:
            ours.step(rows)
    finally:
        ours.stop()
    assert ours.outputs() == expected, executor_logs(app_dir)

"""YARN, as a user runs a stateful stream on it: `spark-submit --master yarn` in cluster and in
client deploy mode, the executors' Python a venv packed with venv-pack and shipped with
`--archives venv.tar.gz#environment` (`spark.pyspark.python=./environment/bin/python`), Kafka in
and out, the checkpoint on HDFS, two NodeManagers with the physical-memory check on. Each run's
output equals Spark's RocksDB provider's on the same input, record for record, through:

- cluster mode: the application master (the driver) SIGKILLed while a batch is in flight; YARN
  starts the second attempt (`spark.yarn.maxAppAttempts=2`), which resumes from the checkpoint;
- client mode: the NodeManager of an executor stopped while a batch is in flight (its
  containers get SIGTERM, then SIGKILL); the batch's tasks and stores move to the other one.

Both times, the state servers of the killed containers leave no socket directory behind, no
container is killed for its memory, and each executor's container stays within its size, which
`configure()` made room for (`spark.executor.memoryOverhead`).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from integration.components import KafkaBroker
from integration.yarn import YarnHadoop

from tests.cluster import workload
from tests.cluster.checks import checked_reference, memory_kills, reference, socket_dirs
from tests.cluster.container_memory import ContainerSampler
from tests.cluster.outputs import outputs
from tests.cluster.submit import job_args, spark_submit, wait_for_file, yarn_args
from tests.cluster.workload import Input
from ttlstate.spark import executor_memory

pytestmark = pytest.mark.cluster


def _pause_dir(tmp_path: Path) -> Path:
    pause = tmp_path / "pause"
    pause.mkdir()
    return pause


def _application_master(hadoop: YarnHadoop) -> psutil.Process:
    """The JVM of the application's first attempt's master (container ..._01_000001)."""
    for p in psutil.Process(hadoop.proc.pid).children(recursive=True):
        try:
            if p.name() == "java" and p.environ().get("CONTAINER_ID", "").endswith("_01_000001"):
                return p
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    raise AssertionError("no application master JVM under the NodeManagers")


def _assert_no_leftovers(hadoop: YarnHadoop, tmp_path: Path) -> None:
    hadoop.save_logs(str(tmp_path / "containers"))
    logs = hadoop.container_logs()
    dirs = socket_dirs(logs)
    assert dirs, "no executor logged its socket directory: the check below would be empty"
    assert not [d for d in dirs if os.path.exists(d)], f"socket dirs left behind: {dirs}"
    assert not memory_kills([hadoop.log, *logs])


def test_cluster_mode_through_a_killed_application_master(hadoop: YarnHadoop, kafka: KafkaBroker, venv: str,
                                                          events: Input, tmp_path: Path) -> None:
    pause = _pause_dir(tmp_path)
    runs = ["ref=rocksdb", "am=ttlstate:am"]
    job = job_args(kafka.bootstrap, events.topic, f"{hadoop.fs_url}/cluster-mode", runs,
                   workload.ROWS_PER_BATCH, str(pause))
    sub = spark_submit([*yarn_args("cluster", venv), *job], str(tmp_path), "cluster", hadoop.env())
    wait_for_file(str(pause / "paused-am"), sub, 600)
    master = _application_master(hadoop)
    os.kill(master.pid, signal.SIGKILL)
    (pause / "go-am").touch()
    assert sub.wait(900) == 0, sub.tail()
    events.reference = checked_reference(kafka.bootstrap, "ref", events)
    assert outputs(kafka.bootstrap, "am") == events.reference
    attempts = list(hadoop.attempts().values())[-1]  # this application: the newest
    assert len(attempts) >= 2 and attempts[0].state == "FAILED", \
        f"YARN did not start a second attempt of the application master: {attempts}"
    print("application attempts:", attempts)
    _assert_no_leftovers(hadoop, tmp_path)


def test_client_mode_through_a_stopped_nodemanager(hadoop: YarnHadoop, kafka: KafkaBroker, venv: str,
                                                   events: Input, tmp_path: Path) -> None:
    expected = reference(events, kafka, hadoop, str(tmp_path))
    pause = _pause_dir(tmp_path)
    job = job_args(kafka.bootstrap, events.topic, f"{hadoop.fs_url}/client-mode", ["nm=ttlstate:nm"],
                   workload.ROWS_PER_BATCH, str(pause))
    with ContainerSampler(hadoop.proc.pid) as memory:
        sub = spark_submit([*yarn_args("client", venv), *job], str(tmp_path), "client", hadoop.env())
        wait_for_file(str(pause / "paused-nm"), sub, 600)
        sizes = {c: mb for nm in hadoop.containers().values() for c, mb in nm.items()}
        nodes = hadoop.containers()
        masters = [nm for nm, cs in nodes.items() if any(c.endswith("_000001") for c in cs)]
        victim = next(nm for nm in nodes if nm not in masters)
        assert nodes[victim], f"the NodeManager without the application master runs no executor: {nodes}"
        memory.sample()
        hadoop.stop_nodemanager(victim)
        time.sleep(1)
        (pause / "go-nm").touch()
        assert sub.wait(900) == 0, sub.tail()
    driver_log = open(sub.err, errors="replace").read()
    assert "Lost executor" in driver_log or "Executor lost" in driver_log
    # the start checks ran with the driver's interpreter, not the containers' ./environment/bin/python
    assert "could not validate the ttlstate confs" not in driver_log
    assert outputs(kafka.bootstrap, "nm") == expected
    _assert_no_leftovers(hadoop, tmp_path)

    reserved = executor_memory.server_mib(1, 256 << 20)  # one core per executor, memory.maxBytes default
    assert "CONF spark.executor.memoryOverhead=" + f"{384 + reserved}m" in sub.stdout()
    executors = {c: peak for c, peak in memory.peaks.items() if not c.endswith("_000001")}
    assert executors, memory.peaks
    # An executor YARN started after the NodeManager stopped was not listed before it; every
    # executor container has the same size (one request), the largest listed.
    executor_mb = max(mb for c, mb in sizes.items() if not c.endswith("_000001"))
    for container, (total, _server) in executors.items():
        assert total < sizes.get(container, executor_mb) << 20, (container, total >> 20, sizes.get(container))
        server = memory.server_peaks[container]
        assert server < reserved << 20, (container, server >> 20, reserved)
    print("container peaks (MiB: total, server at that time; size):",
          {c: (t >> 20, s >> 20, sizes.get(c)) for c, (t, s) in executors.items()})

"""A standalone cluster (pyspark's own master and two one-core workers), as a user runs a
stateful stream on it: `spark-submit --master spark://...` with dynamic allocation on (shuffle
tracking, no external shuffle service), the packed venv shipped with `--archives`, Kafka in and
out, the checkpoint on HDFS. While batches are in flight:

- an executor JVM is SIGKILLed: its state server removes its directory and exits, the master
  starts a new executor, and the batch's stores load there from HDFS;
- a worker is decommissioned gracefully (SIGPWR, `spark.decommission.enabled`): its executor
  finishes its task and leaves, and its stores move to the other worker's executor.

The output equals Spark's RocksDB provider's on the same input, record for record.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from integration.components import KafkaBroker
from integration.standalone import StandaloneCluster
from integration.yarn import YarnHadoop

from tests.cluster import workload
from tests.cluster.checks import reference
from tests.cluster.outputs import outputs
from tests.cluster.submit import TEST_ONLY, jars, job_args, spark_submit, wait_for_file
from tests.cluster.workload import Input
from ttlstate.spark.configure import EXTENSIONS_CLASS

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def standalone() -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(workers=2, cores=1, memory="2g")
    yield cluster
    cluster.stop()


def standalone_args(master: str, venv: str) -> list[str]:
    return ["--master", master, "--deploy-mode", "client",
            "--archives", f"{venv}#environment", "--conf", "spark.pyspark.python=./environment/bin/python",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            "--jars", jars(), "--conf", f"spark.sql.extensions={EXTENSIONS_CLASS}",
            "--executor-cores", "1", "--executor-memory", "1g",
            "--conf", "spark.dynamicAllocation.enabled=true",
            "--conf", "spark.dynamicAllocation.shuffleTracking.enabled=true",
            "--conf", "spark.dynamicAllocation.initialExecutors=2",
            "--conf", "spark.dynamicAllocation.minExecutors=1",
            "--conf", "spark.dynamicAllocation.maxExecutors=2",
            "--conf", "spark.decommission.enabled=true", "--conf", "spark.storage.decommission.enabled=true",
            "--conf", "spark.storage.decommission.shuffleBlocks.enabled=true", *TEST_ONLY]


def _executor_of(marker: str) -> psutil.Process:
    """The executor JVM of a paused task: the marker names its Python worker and that worker's
    parent (PySpark's daemon, a child of the executor JVM)."""
    _container, _worker, daemon = marker.split()
    jvm = psutil.Process(int(daemon)).parent()
    assert jvm is not None and jvm.name() == "java", jvm
    return jvm


def _server_roots(jvm: psutil.Process) -> list[str]:
    """The --root of each state server the executor runs."""
    roots = []
    for p in jvm.children(recursive=True):
        cmd = p.cmdline()
        if "--root" in cmd and any("ttlstate" in part for part in cmd):
            roots.append(cmd[cmd.index("--root") + 1])
    return sorted(set(roots))


def _wait(what: str, done: object, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} after {timeout_s:.0f} s"
        time.sleep(0.2)


def test_dynamic_allocation_through_a_killed_executor_and_a_decommissioned_worker(
        standalone: StandaloneCluster, hadoop: YarnHadoop, kafka: KafkaBroker, venv: str, events: Input,
        tmp_path: Path) -> None:
    expected = reference(events, kafka, hadoop, str(tmp_path))
    pause = tmp_path / "pause"
    pause.mkdir()
    job = job_args(kafka.bootstrap, events.topic, f"{hadoop.fs_url}/standalone", ["sa=ttlstate:exec+decom"],
                   workload.ROWS_PER_BATCH, str(pause))
    sub = spark_submit([*standalone_args(standalone.url, venv), *job], str(tmp_path), "standalone")

    victim = _executor_of(wait_for_file(str(pause / "paused-exec"), sub, 600))
    roots = _server_roots(victim)
    assert roots, "the executor running a stateful task has no state server"
    children = victim.children(recursive=True)
    os.kill(victim.pid, signal.SIGKILL)
    _wait("the killed executor's state server still runs",
          lambda: not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE])
    _wait(f"its directories {roots} are still there", lambda: not [r for r in roots if os.path.exists(r)])
    (pause / "go-exec").touch()

    paused = _executor_of(wait_for_file(str(pause / "paused-decom"), sub, 600))
    decommissioned = standalone.worker_of(paused.pid)
    standalone.decommission(decommissioned)
    _wait("the worker is not DECOMMISSIONED",
          lambda: [w["state"] for w in standalone.state()["workers"]].count("DECOMMISSIONED") == 1)
    (pause / "go-decom").touch()
    _wait("the decommissioned worker still runs an executor",
          lambda: not standalone.executors(decommissioned), 120)
    assert sub.wait(900) == 0, sub.tail()

    log = open(sub.err, errors="replace").read()
    assert "Lost executor" in log or "Executor lost" in log, "the driver never lost the killed executor"
    assert "decommission" in log.lower()
    assert outputs(kafka.bootstrap, "sa") == expected

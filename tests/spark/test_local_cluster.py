"""On `local-cluster[2,1,1024]`: two executor JVMs of one core each, as on a real cluster.

Each executor JVM runs its own state server (one supervisor with one worker: one core), the
per-batch outputs equal Spark's RocksDB provider's through a restart and through the loss of
an executor (`kill -9`), whose server exits by itself and whose stores are restored from the
checkpoint in another executor JVM; nothing of ours outlives `spark.stop()`.

The standalone worker writes each executor's stdout/stderr (the state server's log goes to
the executor's stderr) under `$SPARK_HOME/work/<app id>/<executor id>/`; pyspark's launcher
sets SPARK_HOME to the pyspark package, so that is inside the venv. The module deletes its
own application's directory at the end (and `work/` if it is left empty).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psutil
import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import (
    ROCKSDB,
    TTLSTATE,
    Run,
    is_worker,
    our_server_processes,
    poll_until,
    run_steps,
    running,
    session,
)

# `make test-long`: the cluster tier (make test-cluster) runs executors in their own JVMs on a
# standalone cluster through a killed executor, which these cases check on local-cluster.
pytestmark = [pytest.mark.spark, pytest.mark.long]

MASTER = "local-cluster[2,1,1024]"
EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
SCHEMA = {"events": "id INT, k STRING"}


def ev(*pairs: tuple[int, str]) -> list[dict]:
    return [{"id": i, "k": k} for i, k in pairs]


# Ids repeat across batches (also after the restart and after the executor loss), so the
# deduplication state must survive both; counts per key carry over every batch.
STEPS = [
    ev((1, "a"), (2, "b"), (3, "a")),
    ev((4, "c"), (1, "a"), (5, "b")),
    ev((6, "a"), (2, "b"), (7, "d")),
    ev((3, "a"), (8, "c"), (4, "c"), (9, "e")),
    ev((10, "a"), (6, "a"), (11, "b"), (12, "f")),
]
RESTART_AFTER = 2
KILL_AFTER = 3  # batches before the executor is killed


def dedup_count(s: dict[str, DataFrame]) -> DataFrame:
    """Two stateful operators (ids 0: deduplication, 1: aggregation), two partitions each."""
    return s["events"].dropDuplicates(["id"]).groupBy("k").count()


def wait_for(what: str, done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Bounded polling: fails naming `what` if `done()` is still false after `timeout_s`."""
    if not poll_until(done, timeout_s):
        raise AssertionError(f"still waiting after {timeout_s:.0f} s for: {what}")


def executor_jvms() -> dict[int, str]:
    """Executor JVMs under this test process: pid -> executor id."""
    found = {}
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if EXECUTOR_MAIN in cmd and "--executor-id" in cmd:
            found[p.pid] = cmd[cmd.index("--executor-id") + 1]
    return found


def supervisors() -> dict[psutil.Process, list[str]]:
    """Our state server supervisors (`-m ttlstate.server`; `is_worker` tells their workers apart)."""
    return {p: cmd for p, cmd in our_server_processes() if not is_worker(p)}


def workers_of(supervisor: psutil.Process) -> list[psutil.Process]:
    try:
        return [c for c in supervisor.children() if is_worker(c)]
    except psutil.Error:
        return []


def stores_by_jvm(run_id: str) -> dict[int, set[str]]:
    """The stores of query run `run_id` open in each executor JVM's state server, by JVM pid.

    A worker keeps an opened store in `<server root>/w<i>/<handle>-<store key, sanitized>`
    (python/ttlstate/server/worker.py), and the key ends with the run id. If that layout
    changes this finds nothing, and the test fails on "held no store", not silently."""
    suffix = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    out: dict[int, set[str]] = {}
    for sup, cmd in supervisors().items():
        try:
            jvm = sup.ppid()
            root = cmd[cmd.index("--root") + 1]
            stores = {name.split("-", 1)[1] for w in os.listdir(root) if w.startswith("w")
                      and os.path.isdir(os.path.join(root, w)) for name in os.listdir(os.path.join(root, w))
                      if "-" in name and name.endswith(suffix)}
        except (psutil.Error, OSError):  # the server exited meanwhile
            continue
        out.setdefault(jvm, set()).update(stores)
    return out


def driver_executor_ids(spark: SparkSession) -> set[str]:
    """The executors the driver currently knows (registered and not lost)."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds().mkString(",")  # type: ignore[union-attr]
    return {i for i in ids.split(",") if i}


def executor_logs(app_dir: str, lines: int = 40) -> str:
    """The last lines of each executor's stderr (Spark's log and the state server's)."""
    out = []
    for root, _dirs, files in os.walk(app_dir):
        if "stderr" in files:
            with open(os.path.join(root, "stderr"), errors="replace") as f:
                tail = f.readlines()[-lines:]
            out.append(f"--- {root}/stderr\n" + "".join(tail))
    return "\n".join(out)


@dataclass(frozen=True)
class Cluster:
    spark: SparkSession
    app_dir: str  # the standalone workers' directory of this application (executor logs)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    s = session(MASTER)
    app_dir = None
    try:
        # The context does not wait for executors; tasks all on the first one would start no
        # server on the second (stores prefer the executor that has them loaded).
        wait_for("two registered executors", lambda: len(driver_executor_ids(s)) == 2, timeout_s=120)
        jvms = executor_jvms()
        app_dirs = {os.path.dirname(psutil.Process(pid).cwd()) for pid in jvms}
        assert len(jvms) == 2 and len(app_dirs) == 1, (jvms, app_dirs)
        app_dir = app_dirs.pop()
        yield Cluster(s, app_dir)
    finally:
        s.stop()  # a no-op if the last test stopped it
        if app_dir is not None:
            shutil.rmtree(app_dir, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(app_dir))  # `work/`, unless another application uses it
            except OSError:
                pass


@pytest.fixture(scope="module")
def spark(cluster: Cluster) -> SparkSession:
    return cluster.spark


@pytest.fixture(scope="module")
def reference(spark: SparkSession) -> Run:
    """Spark's RocksDB provider on the same input, restarted after batch RESTART_AFTER - 1."""
    return run_steps(spark, ROCKSDB, dedup_count, SCHEMA, STEPS, restart_after=RESTART_AFTER,
                     output_mode="update")


def test_same_outputs_and_one_single_worker_server_per_executor_jvm(spark: SparkSession,
                                                                    reference: Run) -> None:
    ours = run_steps(spark, TTLSTATE, dedup_count, SCHEMA, STEPS, restart_after=RESTART_AFTER,
                     output_mode="update")
    assert len(ours.outputs) == len(STEPS)
    assert ours.outputs == reference.outputs

    jvms = executor_jvms()
    sups = supervisors()
    parents = sorted(p.ppid() for p in sups)
    assert len(jvms) == 2
    assert parents == sorted(jvms), f"supervisors' parents {parents}, executor JVMs {jvms}"
    for sup in sups:  # one core per executor: one worker (default workers=0)
        workers = workers_of(sup)
        assert len(workers) == 1, f"server {sup.pid}: workers {workers}"
        cmd = workers[0].cmdline()  # the server's command line (the supervisor's was replaced)
        assert cmd[cmd.index("--workers") + 1] == "1", cmd


def test_store_moves_when_its_executor_jvm_is_killed(cluster: Cluster, reference: Run) -> None:
    """What this guarantees about movement: the killed JVM's server had at least one store of
    this query open (its local store directories, just before the kill), and after the next
    batch each of those stores is open in a server of another, live executor JVM: it was
    loaded there from the checkpoint (the killed server's local files are gone with it), and
    the outputs of that batch and the next equal RocksDB's. What it does not control: which
    JVM takes them (the replacement executor the standalone worker launches, or the
    survivor), and whether the survivor's own stores stay put; Spark decides both."""
    spark = cluster.spark
    ours = Run(spark, TTLSTATE, dedup_count, SCHEMA, "update")
    ours.start()
    try:
        for rows in STEPS[:KILL_AFTER]:
            ours.step(rows)
        assert ours.query is not None
        run_id = str(ours.query.runId)
        before = stores_by_jvm(run_id)
        jvms = executor_jvms()

        def only_in(pid: int) -> set[str]:  # a store can linger in a server it has left
            return before.get(pid, set()).difference(*(v for k, v in before.items() if k != pid))

        victim = max(jvms, key=lambda pid: len(only_in(pid)))
        moved = only_in(victim)
        assert moved, f"no executor JVM held a store of the run that the other did not: {before}"
        victim_servers = [(sup, cmd) for sup, cmd in supervisors().items() if sup.ppid() == victim]
        assert len(victim_servers) == 1, victim_servers
        server, cmd = victim_servers[0]
        server_procs = [server, *workers_of(server)]
        root = cmd[cmd.index("--root") + 1]

        os.kill(victim, signal.SIGKILL)
        wait_for(f"the state server of the killed executor JVM {victim} to exit",
                 lambda: not running(server_procs))
        assert not os.path.exists(root), f"the exited server left its root {root}"
        lost = jvms[victim]
        wait_for(f"the driver to drop executor {lost}", lambda: lost not in driver_executor_ids(spark),
                 timeout_s=60)

        ours.step(STEPS[KILL_AFTER])
        after = stores_by_jvm(run_id)
        assert victim not in after
        placed = {store: [jvm for jvm, stores in after.items() if store in stores] for store in moved}
        assert all(placed.values()), \
            f"stores of the killed executor, by JVM now: {placed}; all: {after}"
        for rows in STEPS[KILL_AFTER + 1:]:
            ours.step(rows)
    finally:
        ours.stop()
    assert ours.outputs == reference.outputs, executor_logs(cluster.app_dir)


def test_nothing_of_ours_outlives_spark_stop(spark: SparkSession) -> None:
    if not supervisors():  # run alone: start the servers first
        run_steps(spark, TTLSTATE, dedup_count, SCHEMA, STEPS[:1], output_mode="update")
    ours = [p for p, _cmd in our_server_processes()] + [psutil.Process(pid) for pid in executor_jvms()]
    assert supervisors() and executor_jvms()
    spark.stop()
    wait_for("executor JVMs and state servers to exit after spark.stop()",
             lambda: not running(ours) and not our_server_processes() and not executor_jvms())

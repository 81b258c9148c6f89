"""Process faults in the middle of a batch and in the middle of a commit (local[2,3]: tasks retried).

Mid-batch: the query's own Python function (applyInPandasWithState, which runs after the store
was loaded and before it commits) kills -9 the state server's supervisor, or one worker, when
it sees a trigger value, once. Mid-commit: `ttlstate.faults` makes a worker SIGKILL
itself inside the commit, before or after the changelog reached the checkpoint. In every case
Spark retries the failed tasks, the shim starts a new server that reloads the stores from the
checkpoint, and the per-batch output equals Spark's RocksDB provider's on the same input.

The crash points are configured through `TTLSTATE_FAULTS` in the environment of the state
server. The JVM of a pytest process is shared by every SparkSession of that process (its
environment is fixed when the first session starts it), so the variable reaches the server
through a wrapper interpreter (`ttlstate.python`) instead of os.environ.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator

import pandas as pd
import psutil
import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import (
    ROCKSDB,
    TTLSTATE,
    Run,
    is_server_command,
    is_worker,
    our_server_processes,
    run_steps,
    session,
    state_rows_per_batch,
)
from ttlstate import faults

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}
STEPS = [[{"k": "a", "v": 1}, {"k": "b", "v": 2}], [{"k": "a", "v": 3}, {"k": "c", "v": 4}],
         [{"k": "a", "v": 5}, {"k": "b", "v": 6}], [{"k": "c", "v": 7}, {"k": "d", "v": 8}]]
TRIGGER = 5  # the mid-batch kill happens while batch 2 is being processed


@pytest.fixture(scope="module")
def fault_dir() -> str:
    """Markers of the crash points, created up front: a point is armed by deleting its marker."""
    d = tempfile.mkdtemp(prefix="ttlstate-faults-")
    for point in faults.POINTS:
        open(os.path.join(d, point), "w").close()
    return d


@pytest.fixture(scope="module")
def spark(fault_dir: str) -> Iterator[SparkSession]:
    spec = ",".join(f"{p}:{os.path.join(fault_dir, p)}" for p in faults.POINTS)
    wrapper = os.path.join(fault_dir, "python")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\n{faults.ENV}='{spec}'\nexport {faults.ENV}\nexec '{sys.executable}' \"$@\"\n")
    os.chmod(wrapper, stat.S_IRWXU)
    s = session("local[2,3]", python=wrapper)
    yield s
    s.stop()


def kill_server_once(test_pid: int, marker: str, one_worker: bool) -> None:
    """Runs in the Python UDF worker: SIGKILL our state server's supervisor (or one worker) the
    first time; the marker records the killed pids. Waits (bounded) until the whole server is gone,
    so the task's next call to it, at the latest its commit, fails."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    procs = our_server_processes(test_pid)
    workers = [p for p, _cmd in procs if is_worker(p)]
    supervisors = [p for p, _cmd in procs if not is_worker(p)]
    victims = workers[:1] if one_worker else supervisors
    for p in victims:
        p.kill()
    with os.fdopen(fd, "w") as f:
        json.dump({"killed": [p.pid for p in victims], "server": [p.pid for p, _ in procs]}, f)
    psutil.wait_procs([p for p, _ in procs], timeout=30)


def counting(kill: Callable[[], None] | None):  # noqa: ANN201
    """applyInPandasWithState function: per key, rows and sum so far; calls `kill` on TRIGGER."""
    def count(key: tuple, pdfs: Iterator[pd.DataFrame], state):  # noqa: ANN001, ANN202
        n, total = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            if kill is not None and TRIGGER in set(pdf["v"]):
                kill()
            n += len(pdf)
            total += int(pdf["v"].sum())
        state.update((n, total))
        yield pd.DataFrame({"k": [key[0]], "n": [n], "total": [total]})
    return count


def build(kill: Callable[[], None] | None = None) -> Callable[[dict[str, DataFrame]], DataFrame]:
    def query(s: dict[str, DataFrame]) -> DataFrame:
        return s["events"].groupBy("k").applyInPandasWithState(
            counting(kill), "k STRING, n LONG, total LONG", "n LONG, total LONG", "update", "NoTimeout")
    return query


@pytest.fixture(scope="module")
def expected(spark: SparkSession) -> Run:
    theirs = run_steps(spark, ROCKSDB, build(), SCHEMA, STEPS, output_mode="update")
    assert len(theirs.outputs) == len(STEPS)
    return theirs


def _assert_same(ours: Run, theirs: Run) -> None:
    """Exactly-once output, and no lost or duplicated state rows (numRowsTotal per batch)."""
    assert ours.outputs == theirs.outputs
    assert state_rows_per_batch(ours) == state_rows_per_batch(theirs)


def _run_with_fault(spark: SparkSession, query: Callable, arm: Callable[[], None]
                    ) -> tuple[Run, dict[int, list[str]]]:
    """Batch 0 runs clean; `arm` prepares the fault; the other batches run into it. Returns the
    run and the server processes (pid: command line) that served batch 0."""
    run = Run(spark, TTLSTATE, query, SCHEMA, "update")
    run.start()
    try:
        run.step(STEPS[0])
        before = {p.pid: cmd for p, cmd in our_server_processes()}
        assert before, "no state server is running"
        arm()
        for rows in STEPS[1:]:
            run.step(rows)
    finally:
        run.stop()
    return run, before


def _assert_replaced(before: dict[int, list[str]]) -> None:
    """New server processes serve the query, and the old server's local root (sockets, stores)
    is gone, also when it was killed with -9 and could not remove it itself."""
    after = {p.pid for p, _ in our_server_processes()}
    assert after and not after & set(before), f"server not replaced: before {set(before)}, after {after}"
    roots = {cmd[cmd.index("--root") + 1] for cmd in before.values() if is_server_command(cmd)}
    assert roots and not [r for r in roots if os.path.exists(r)], roots


@pytest.mark.parametrize("victim", ["supervisor", "one-worker"])
def test_kill_during_a_batch_gives_exactly_once_output(spark: SparkSession, expected: Run,
                                                       victim: str) -> None:
    marker = os.path.join(tempfile.mkdtemp(), "killed")
    kill = functools.partial(kill_server_once, os.getpid(), marker, victim == "one-worker")
    ours, before = _run_with_fault(spark, build(kill), lambda: None)
    with open(marker) as f:
        killed = json.load(f)
    assert killed["killed"] and set(killed["killed"]) <= set(before), killed
    _assert_replaced(before)
    _assert_same(ours, expected)


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p.startswith("commit-")])
def test_worker_crash_during_commit_gives_exactly_once_output(spark: SparkSession, fault_dir: str,
                                                              expected: Run, point: str) -> None:
    marker = os.path.join(fault_dir, point)
    ours, before = _run_with_fault(spark, build(), lambda: os.unlink(marker))
    assert os.path.exists(marker), f"the crash point {point} was never reached"
    _assert_replaced(before)
    _assert_same(ours, expected)

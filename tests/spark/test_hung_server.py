"""A state server that stops answering without exiting (issue 11.2): no request waits forever.

`requestTimeout` is 2s here and the server has one worker. The query's own Python function
(applyInPandasWithState, which runs after the store was loaded and before it commits) SIGSTOPs
the worker when it sees a trigger value; the task's next request to it then waits. The shim's
watchdog must see that the worker is stopped, kill the server and fail the waiting tasks with a
message naming the server and worker pids, the deadline and the conf key; with retries
(`local[2,3]`) the retry starts a new server and the output equals Spark's RocksDB provider's.
A worker that sleeps inside a commit (alive, but neither working nor answering) counts as hung
too; one that burns CPU for three deadlines inside a commit (a slow but working server) does
not, and keeps serving. The stalls come from `ttlstate.faults`, reaching the server through a
wrapper interpreter as in test_process_faults.
"""

from __future__ import annotations

import functools
import os
import signal
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator

import psutil
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import (
    ROCKSDB,
    TTLSTATE,
    Run,
    is_worker,
    our_server_processes,
    poll_until,
    run_steps,
    session,
)
from tests.spark.test_process_faults import SCHEMA, STEPS, _assert_replaced, _assert_same, counting
from ttlstate import faults
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

DEADLINE = "2s"
STALL_MS = 6000  # three deadlines: the busy stall, which must be waited for
# The idle stall ends only if the watchdog misses it (then the test fails). It is long so that
# the watchdog finds its quiet deadline after whatever else the worker still does at first (the
# other partition's task, an upload): on a loaded machine that took most of 6 s once.
IDLE_STALL_MS = 20000
BUSY = "commit-before-upload"  # burns CPU there: slow, not hung
IDLE = "commit-after-upload"   # sleeps there: hung


@pytest.fixture(scope="module")
def fault_dir() -> str:
    """The stall markers exist up front (disarmed); a test arms one by deleting it."""
    d = tempfile.mkdtemp(prefix="ttlstate-hang-")
    for point in (BUSY, IDLE):
        open(os.path.join(d, point), "w").close()
    return d


@pytest.fixture(scope="module")
def spark(fault_dir: str) -> Iterator[SparkSession]:
    spec = (f"{BUSY}+busy={STALL_MS}:{os.path.join(fault_dir, BUSY)},"
            f"{IDLE}+idle={IDLE_STALL_MS}:{os.path.join(fault_dir, IDLE)}")
    wrapper = os.path.join(fault_dir, "python")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\n{faults.ENV}='{spec}'\nexport {faults.ENV}\nexec '{sys.executable}' \"$@\"\n")
    os.chmod(wrapper, stat.S_IRWXU)
    s = session("local[2,3]", python=wrapper, workers=1, request_timeout=DEADLINE)
    yield s
    s.stop()


def stop_worker(test_pid: int, record_dir: str, every_attempt: bool) -> None:
    """Runs in the Python UDF worker: SIGSTOP our state server's worker, once (or on every task
    attempt), recording `<supervisor pid> <worker pid>` per stop."""
    name = os.path.join(record_dir, "stop" if not every_attempt else f"stop-{len(os.listdir(record_dir))}")
    try:
        fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    procs = our_server_processes(test_pid)
    supervisor = [p.pid for p, _cmd in procs if not is_worker(p)]
    worker = [p for p, _cmd in procs if is_worker(p)]
    assert len(supervisor) == 1 and len(worker) == 1, procs
    worker[0].send_signal(signal.SIGSTOP)
    with os.fdopen(fd, "w") as f:
        f.write(f"{supervisor[0]} {worker[0].pid}")


def build(stall: Callable[[], None] | None = None) -> Callable[[dict[str, DataFrame]], DataFrame]:
    def query(s: dict[str, DataFrame]) -> DataFrame:
        return s["events"].groupBy("k").applyInPandasWithState(
            counting(stall), "k STRING, n LONG, total LONG", "n LONG, total LONG", "update", "NoTimeout")
    return query


@pytest.fixture(scope="module")
def expected(spark: SparkSession) -> Run:
    theirs = run_steps(spark, ROCKSDB, build(), SCHEMA, STEPS, output_mode="update")
    assert len(theirs.outputs) == len(STEPS)
    return theirs


def _stopped_pids(record_dir: str) -> list[tuple[int, int]]:
    out = []
    for name in sorted(os.listdir(record_dir)):
        with open(os.path.join(record_dir, name)) as f:
            supervisor, worker = f.read().split()
        out.append((int(supervisor), int(worker)))
    return out


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _assert_nothing_stopped() -> None:
    stopped = [p.pid for p, _ in our_server_processes() if p.status() == psutil.STATUS_STOPPED]
    assert not stopped, f"stopped server processes left behind: {stopped}"


def _run(spark: SparkSession, query: Callable, arm: Callable[[], None]) -> tuple[Run, dict[int, list[str]]]:
    """Batch 0 runs clean, `arm` prepares the fault, the other batches run into it."""
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


def test_a_stopped_worker_fails_the_task_naming_server_worker_and_deadline(spark: SparkSession) -> None:
    """Stopped on every attempt: the query fails after its 3 attempts with the watchdog's message."""
    record = tempfile.mkdtemp()
    stall = functools.partial(stop_worker, os.getpid(), record, True)
    run = Run(spark, TTLSTATE, build(stall), SCHEMA, "update")
    run.start()
    try:
        run.step(STEPS[0])
        run.step(STEPS[1])
        with pytest.raises(StreamingQueryException) as e:
            run.step(STEPS[2])  # holds the trigger value
    finally:
        run.stop()
    msg = str(e.value)
    stops = _stopped_pids(record)
    assert len(stops) == 3, stops  # one per attempt, each on a new server
    assert f"did not answer a request within the deadline of {DEADLINE}" in msg, msg
    assert K.REQUEST_TIMEOUT.key in msg and "is stopped" in msg, msg
    assert any(f"state server (pid {s}), worker 0 (pid {w}), did not answer" in msg for s, w in stops), msg
    assert poll_until(lambda: all(_gone(pid) for pair in stops for pid in pair), 30), stops
    _assert_nothing_stopped()


def test_a_stopped_worker_is_replaced_and_the_retry_gives_exact_output(spark: SparkSession,
                                                                       expected: Run) -> None:
    record = tempfile.mkdtemp()
    ours, before = _run(spark, build(functools.partial(stop_worker, os.getpid(), record, False)),
                        lambda: None)
    [(supervisor, worker)] = _stopped_pids(record)
    assert {supervisor, worker} <= set(before)
    _assert_replaced(before)
    _assert_same(ours, expected)
    _assert_nothing_stopped()


def test_a_worker_idle_inside_a_request_is_killed_and_replaced(spark: SparkSession, fault_dir: str,
                                                               expected: Run) -> None:
    marker = os.path.join(fault_dir, IDLE)
    ours, before = _run(spark, build(), lambda: os.unlink(marker))
    assert os.path.exists(marker), "the idle stall was never reached"
    _assert_replaced(before)
    _assert_same(ours, expected)


def test_a_slow_but_working_worker_is_waited_for(spark: SparkSession, fault_dir: str, expected: Run) -> None:
    """It burns CPU inside a commit for three deadlines: the same server serves every batch."""
    marker = os.path.join(fault_dir, BUSY)
    ours, before = _run(spark, build(), lambda: os.unlink(marker))
    assert os.path.exists(marker), "the busy stall was never reached"
    assert {p.pid for p, _ in our_server_processes()} == set(before)
    _assert_same(ours, expected)


def test_a_server_that_hangs_while_starting_fails_the_task(spark: SparkSession, fault_dir: str) -> None:
    """An interpreter that stops itself before it runs the server: no READY line and no sign of
    work; the shim kills it and the task fails (3 attempts) saying the server did not start. It
    stops only as the server: the driver's check of the confs at query start runs the same
    interpreter, and would wait its own 20 s bound for nothing."""
    stopper = os.path.join(fault_dir, "stopped-python")
    with open(stopper, "w") as f:
        f.write(f"#!/bin/sh\ncase \"$*\" in *'-m ttlstate.server '*) kill -STOP $$;; esac\n"
                f"exec '{sys.executable}' \"$@\"\n")
    os.chmod(stopper, stat.S_IRWXU)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.ttlstate.server.StateServer.shutdown()  # the next query starts a server with its own python
    run = Run(spark, TTLSTATE, build(), SCHEMA, "update", {K.PYTHON.key: stopper})
    run.start()
    try:
        with pytest.raises(StreamingQueryException) as e:
            run.step(STEPS[0])
    finally:
        run.stop()
        jvm.ttlstate.server.StateServer.shutdown()
    msg = str(e.value)
    assert f"did not start within the deadline of {DEADLINE}" in msg and "is stopped" in msg, msg
    assert poll_until(lambda: not our_server_processes(), 30), our_server_processes()

"""Cancelling one query's tasks never takes the executor's state server down.

Spark interrupts a task's thread when its job is cancelled: `query.stop()` and the UI's kill
cancel the query's job group (its run id), and a losing speculative attempt is killed the
same way. An interrupt closes the NIO channel the task was using; the shim must treat that as
"this task's connection is gone", never as a dead server. Here two aggregations share
`local[2]` and one state server: query B's job group is cancelled 8 times (more, until half
of the cancels found them, if fewer did) while its stateful tasks run (they pause in the stage,
so that the cancels find them running; then B is stopped, and restarted from its checkpoint for
the next cancel), while query A processes its steps in
another thread. The server's processes never change, A never fails and its every batch is
exact, and B, finally run to the end, is exact in every batch
(both computed here in Python). Then running task attempts of a third query are killed with an
interrupt (`killTaskAttempt`, as Spark kills a speculative loser): Spark reruns each on the same
server, and every batch is exact.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import pandas as pd
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from tests.spark.harness import TTLSTATE, Run, our_server_processes, poll_until, session

pytestmark = pytest.mark.spark

SEED = 20_2026
CANCELS = 8
MAX_CANCELS = 3 * CANCELS
SCHEMA = {"events": "k STRING, v INT"}
A_STEPS = 12
A_KEYS = 40
B_ROWS = 12_000          # rows per B batch: enough store calls that a cancel lands mid-call
B_KEYS = 30_000
B_AHEAD = 3              # unprocessed files B always has, so it has a batch to be cancelled in


def aggregation(s: dict[str, DataFrame]) -> DataFrame:
    return s["events"].groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))


STAGE_PAUSE_S = 0.5  # per partition and batch, so the stateful stage runs long enough to be caught


def _pause(n: pd.Series) -> pd.Series:
    time.sleep(STAGE_PAUSE_S)
    return n


def slowed_aggregation(s: dict[str, DataFrame]) -> DataFrame:
    """`aggregation`, its output passed through a pause in the same stage as the state store: a
    stateful task then runs long enough for the status store to list it as running (on a quiet
    machine a batch's stateful tasks end before it does), so a kill lands while its store is open."""
    return aggregation(s).withColumn("n", F.pandas_udf(_pause, "long")(F.col("n")))


def a_rows(step: int) -> list[dict]:
    return [{"k": f"a{(step * 7 + j) % A_KEYS}", "v": step * 100 + j} for j in range(30)]


def b_rows(file: int) -> list[dict]:
    return [{"k": f"b{(file * 7919 + j) % B_KEYS}", "v": (file + j) % 17} for j in range(B_ROWS)]


def expected_outputs(steps: list[list[dict]]) -> dict[int, list[tuple]]:
    """An update-mode count and sum per key: each batch emits its keys with the running totals."""
    n: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    out = {}
    for batch, rows in enumerate(steps):
        for r in rows:
            n[r["k"]] += 1
            total[r["k"]] += r["v"]
        out[batch] = sorted(((k, n[k], total[k]) for k in {r["k"] for r in rows}), key=repr)
    return out


def server_pids() -> set[int]:
    """Our state server's processes (supervisor and workers) under this test process."""
    return {p.pid for p, _ in our_server_processes(os.getpid())}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session("local[2]", confs={"spark.sql.streaming.noDataMicroBatches.enabled": "false"})
    yield s
    s.stop()


class Feeder:
    """B's input, fed ahead of what B processed, one file per batch, in a fixed order (the file
    source takes files by modification time)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.fed = 0
        self.base = time.time() - 1000

    def ahead(self) -> None:
        done = max(self.run.outputs, default=-1) + 1
        while self.fed < done + B_AHEAD:
            self.run.feed(b_rows(self.fed))
            path = os.path.join(self.run.root, "events", f"step-{self.fed:04d}.json")
            os.utime(path, (self.base + self.fed, self.base + self.fed))
            self.fed += 1


def stateful_tasks_running(spark: SparkSession, group: str) -> bool:
    """True while a task of the last (stateful) stage of a job of `group` runs."""
    tracker = spark.sparkContext.statusTracker()
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        if info is None or not info.stageIds:
            continue
        stage = tracker.getStageInfo(max(info.stageIds))
        if stage is not None and stage.numActiveTasks > 0:
            return True
    return False


def later_job_succeeded(spark: SparkSession, group: str, listed: int) -> bool:
    """True once a job of `group` newer than `listed` (the newest listed just after the group was
    cancelled) succeeded: it was not cancelled, and B runs its jobs one at a time, so the cancel
    found no job of B's (a job it found fails the query before B starts another)."""
    tracker = spark.sparkContext.statusTracker()
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job) if job > listed else None
        if info is not None and info.status == "SUCCEEDED":
            return True
    return False


def run_a(run: Run, first: int, errors: list[BaseException], done: threading.Event) -> None:
    """A's steps from `first` on, each processed before the next (one batch per step)."""
    try:
        for step in range(first, A_STEPS):
            run.step(a_rows(step))
    except BaseException as e:  # reported by the test thread
        errors.append(e)
    finally:
        done.set()


def cancel_while_running(spark: SparkSession, b: Run, feeder: Feeder, rnd: random.Random,
                         attempt: int) -> bool:
    """Starts B, cancels its job group at a random point of its stateful stage, then stops it.
    True if the cancel found B's stateful tasks still running."""
    b.start()
    assert b.query is not None
    query, group = b.query, str(b.query.runId)
    running: Callable[[], bool] = lambda: stateful_tasks_running(spark, group)  # noqa: E731

    def found() -> bool:
        # Fed while waiting: on a loaded machine the status store can report B's few ahead
        # batches only after they ran, and B, caught up, would then wait for input forever.
        feeder.ahead()
        return not query.isActive or running()
    seen = poll_until(found, 60, every_s=0.01)
    assert query.isActive, f"cancel {attempt}: query B failed: {query.exception()}"
    assert seen, f"cancel {attempt}: query B never ran a stateful task: {query.lastProgress}"
    time.sleep(rnd.uniform(0.0, 0.15))
    hit = running()
    spark.sparkContext.cancelJobGroup(group)
    listed = max(spark.sparkContext.statusTracker().getJobIdsForGroup(group), default=-1)
    # Until the query fails (the cancel found a job), or a later job of B succeeds (it found none,
    # between two jobs: a fixed 5 s wait for a failure that would not come cost 5 s each time).
    poll_until(lambda: not query.isActive or later_job_succeeded(spark, group, listed), 5, every_s=0.02)
    try:
        query.awaitTermination(0.01)
    except StreamingQueryException as e:  # the cancelled job fails the query, for no other reason
        assert "cancelled part of cancelled job group" in str(e), f"cancel {attempt}: {e}"
    b.stop()  # `query.stop()` cancels the job group too, if a later batch runs
    return hit


def test_cancelled_tasks_leave_the_server_and_other_queries_alone(spark: SparkSession) -> None:
    rnd = random.Random(SEED)
    a = Run(spark, TTLSTATE, aggregation, SCHEMA, output_mode="update")
    b = Run(spark, TTLSTATE, slowed_aggregation, SCHEMA, output_mode="update")
    feeder = Feeder(b)
    a.start()
    a.step(a_rows(0))  # the server is up
    pids = server_pids()
    assert pids, "no ttlstate state server found"
    a_errors: list[BaseException] = []
    a_done = threading.Event()
    # A goes on from its second step, in parallel with the cancels.
    a_thread = threading.Thread(target=run_a, args=(a, 1, a_errors, a_done), daemon=True)
    hits = 0
    try:
        a_thread.start()
        attempt = 0
        # At least CANCELS cancels, until half of them found B's stateful tasks running: on a cold
        # JVM (the suite's first Spark module on a fresh machine) the status tracker can report a
        # task late, so a cancel meant for its middle lands after it.
        while attempt < CANCELS or (hits < CANCELS // 2 and attempt < MAX_CANCELS):
            feeder.ahead()
            hits += cancel_while_running(spark, b, feeder, rnd, attempt)
            assert server_pids() == pids, f"cancel {attempt}: the state server was replaced"
            assert not a_errors, f"query A failed during B's cancel {attempt}: {a_errors[0]}"
            attempt += 1
        a_thread.join(timeout=300)
        assert a_done.is_set(), "query A did not finish"
        assert not a_errors, f"query A failed: {a_errors[0]}"
        b.start()  # restarted from its checkpoint: runs to the end
        b.settle()
    finally:
        b.stop()
        a_thread.join(timeout=60)
        a.stop()
    print(f"\n{attempt} cancels of query B, {hits} while its stateful tasks ran; B processed "
          f"{feeder.fed} batches, A {len(a.outputs)}")
    assert server_pids() == pids
    # B's stateful tasks pause (slowed_aggregation), so most cancels land while they run; the
    # others came just after (its sink, or the next plan).
    assert hits >= CANCELS // 2, f"only {hits} of {attempt} cancels found B's stateful tasks running"
    assert a.outputs == expected_outputs([a_rows(s) for s in range(A_STEPS)])
    assert sorted(b.outputs) == list(range(feeder.fed))
    assert b.outputs == expected_outputs([b_rows(i) for i in range(feeder.fed)])


KILLS = 8


def running_attempts(spark: SparkSession, group: str) -> list[int]:
    """The task ids of the running attempts of the last (stateful) stage of `group`'s jobs."""
    sc = spark.sparkContext
    tracker, store = sc.statusTracker(), sc._jsc.sc().statusStore()  # type: ignore[union-attr]
    ids = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        stage = tracker.getStageInfo(max(info.stageIds)) if info is not None and info.stageIds else None
        if stage is None or stage.numActiveTasks == 0:
            continue
        tasks = store.taskList(stage.stageId, stage.currentAttemptId, 100)
        ids += [tasks.apply(i).taskId() for i in range(tasks.size()) if tasks.apply(i).status() == "RUNNING"]
    return ids


def kill_an_attempt(spark: SparkSession, query: StreamingQuery, group: str, feeder: Feeder,
                    rnd: random.Random) -> bool:
    """Kills a running attempt of `group`'s stateful stage, with an interrupt, as Spark kills a
    speculative loser; where in the task it lands is up to timing (the status store, which
    lists running tasks, lags a little). False if none could be (bounded wait)."""
    sc = spark.sparkContext._jsc.sc()  # type: ignore[union-attr]
    deadline = time.monotonic() + 60
    while query.isActive and time.monotonic() < deadline:
        feeder.ahead()
        tasks = running_attempts(spark, group)
        if tasks and sc.killTaskAttempt(rnd.choice(tasks), True, "ttlstate test: like a speculative loser"):
            return True
        time.sleep(rnd.uniform(0.0, 0.02))
    return False


@pytest.mark.long  # the cancels above interrupt tasks the same way; this adds the rerun
def test_killed_task_attempts_rerun_exactly_on_the_same_server(spark: SparkSession) -> None:
    """A killed attempt (what Spark does to the loser of a speculative pair, or from the UI) is
    interrupted and rerun: the rerun loads the store's version again on the same server, whose
    copy of the killed attempt's batch was aborted, and the query ends exact."""
    rnd = random.Random(SEED + 1)
    c = Run(spark, TTLSTATE, slowed_aggregation, SCHEMA, output_mode="update")
    feeder = Feeder(c)
    killed = 0
    try:
        feeder.ahead()
        c.start()
        assert c.query is not None
        query, group = c.query, str(c.query.runId)
        poll_until(lambda: bool(c.outputs), 60)
        pids = server_pids()
        assert pids, "no ttlstate state server found"
        for attempt in range(KILLS):
            feeder.ahead()
            done = len(c.outputs)
            killed += kill_an_attempt(spark, query, group, feeder, rnd)
            assert query.isActive, f"kill {attempt}: the query failed: {query.exception()}"
            # The next kill in the next batch.
            poll_until(lambda: not query.isActive or len(c.outputs) > done, 60)  # noqa: B023
            assert server_pids() == pids, f"kill {attempt}: the state server was replaced"
        c.settle()
        assert query.isActive, f"the query failed: {query.exception()}"
    finally:
        c.stop()
    print(f"\n{killed} of {KILLS} task attempts killed; {feeder.fed} batches")
    assert server_pids() == pids
    assert killed >= KILLS // 2
    assert sorted(c.outputs) == list(range(feeder.fed))
    assert c.outputs == expected_outputs([b_rows(i) for i in range(feeder.fed)])

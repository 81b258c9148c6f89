"""Chaos soak (issue 11.3; `make test-long`): process faults at random points of 32 batches.

Two queries run side by side on `local[2,4]` (tasks retried up to 3 times): a churning windowed
aggregation (windows close and leave the state as the watermark passes them) and a churning
deduplication with a watermark. A fault thread, driven by a seeded RNG, injects a bounded plan
of faults at random moments shortly after a batch's input appears: kill -9 of a random worker,
kill -9 of the supervisor, SIGSTOP of a random worker for less than the deadline (it must be
waited for), SIGSTOP of a worker until the shim's watchdog kills it (bounded), SIGSTOP of the
supervisor for a while, and two combinations: a stopped worker whose supervisor is killed (it
never reads its EOF: the shim must kill it) and a stopped supervisor whose worker is killed (it
never notices: the shim must kill it). Besides, at random points of other batches, it cancels
the job group of one of the two queries (what `query.stop()` and the UI's kill do: Spark
interrupts the running tasks); a query failed by a cancel is restarted from its checkpoint,
and the cancel must never take the state server down. And a second driver process, started on
a copy of the deduplication's logs as of an earlier batch that shares its state files, re-runs
that batch while the query goes on (a concurrent writer: it must delete nothing the query
committed). Every batch's output and state row
count must equal Spark's RocksDB provider's run of the same input, every planned fault must
have been injected, and at the end no process of ours (also none reparented away from this
test) and no directory of ours is left. `pytest -s` prints the counts.
"""

from __future__ import annotations

import os
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psutil
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tests.spark.harness import (
    ROCKSDB,
    TTLSTATE,
    Run,
    is_server_command,
    is_worker,
    poll_until,
    running,
    session,
    state_rows_per_batch,
)
from tests.spark.second_driver import run_second_driver, second_driver_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.long]

SEED = 11_2026
BATCHES = 32
DEADLINE_S = 3
KINDS = ("kill-worker", "kill-supervisor", "stop-worker-short", "stop-worker-until-killed", "stop-supervisor",
         "stop-worker-kill-supervisor", "stop-supervisor-kill-worker")
PER_KIND = 4            # 28 faults over batches 1..31
CANCELS = 6             # job group cancels of one query, at random points of 6 batches
SECOND_WRITER = (8, 14)  # a second driver re-runs the deduplication's batch 8 during batch 14
LONG_STOP_CAP_S = 60    # a stopped worker nobody asks is resumed after this
SCHEMAS = {"agg": "k STRING, v INT, ts TIMESTAMP", "dedup": "k STRING, ts TIMESTAMP"}
CONFS = {"spark.sql.streaming.noDataMicroBatches.enabled": "false",  # one batch per input file
         "spark.sql.shuffle.partitions": "4"}
T0 = 1_767_225_600  # 2026-01-01


def aggregation(s: dict[str, DataFrame]) -> DataFrame:
    return (s["agg"].withWatermark("ts", "10 seconds").groupBy(F.window("ts", "10 seconds"), "k")
            .agg(F.count("*").alias("n"), F.sum("v").alias("total")))


def deduplication(s: dict[str, DataFrame]) -> DataFrame:
    return s["dedup"].withWatermark("ts", "0 seconds").dropDuplicates(["k", "ts"])


def inputs(rnd: random.Random) -> list[dict[str, list[dict]]]:
    """Per batch: events 10 s later than the batch before (so old windows and keys leave the
    state), over a few hot keys and many new ones, with duplicates."""
    steps = []
    for b in range(BATCHES):
        def ts(offset: int) -> str:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(T0 + 10 * b + offset))  # noqa: B023
        agg = [{"k": f"k{rnd.randrange(30)}", "v": rnd.randrange(100), "ts": ts(rnd.randrange(10))}
               for _ in range(80)]
        dedup = [{"k": f"d{b}-{rnd.randrange(50)}", "ts": ts(0)} for _ in range(80)]
        steps.append({"agg": agg, "dedup": dedup})
    return steps


@dataclass
class Fault:
    batch: int
    kind: str
    delay_s: float
    stop_s: float


def plan(rnd: random.Random) -> list[Fault]:
    kinds = [k for k in KINDS for _ in range(PER_KIND)]
    rnd.shuffle(kinds)
    batches = sorted(rnd.sample(range(1, BATCHES), len(kinds)))
    stop = {"stop-worker-short": (0.3, DEADLINE_S / 2), "stop-supervisor": (0.5, 2 * DEADLINE_S)}
    return [Fault(b, k, rnd.uniform(0.0, 0.6), rnd.uniform(*stop.get(k, (0.0, 0.0))))
            for b, k in zip(batches, kinds, strict=True)]


@dataclass
class Cancel:
    batch: int
    query: int  # 0: the aggregation, 1: the deduplication
    delay_s: float


def cancel_plan(rnd: random.Random) -> list[Cancel]:
    return [Cancel(b, rnd.randrange(2), rnd.uniform(0.0, 0.6))
            for b in sorted(rnd.sample(range(1, BATCHES), CANCELS))]


@dataclass
class Chaos:
    """Injects one fault at a time, on its own thread; records what it did."""

    local_dir: str
    rnd: random.Random
    injected: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    seen: dict[int, psutil.Process] = field(default_factory=dict)
    supervisors: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None
    cancels: Counter = field(default_factory=Counter)
    cancel_thread: threading.Thread | None = None

    def servers(self) -> tuple[list[psutil.Process], list[psutil.Process]]:
        """Our supervisors and workers (recognised by a root under our spark.local.dir, so a
        worker whose supervisor was killed is found too, wherever it was reparented)."""
        sups, workers = [], []
        for p in psutil.process_iter():
            try:
                cmd = p.cmdline()
            except psutil.Error:
                continue
            if not any(a.startswith(self.local_dir) for a in cmd):
                continue
            if is_worker(p):
                workers.append(p)
            elif is_server_command(cmd):
                sups.append(p)
        for p in sups + workers:
            self.seen.setdefault(p.pid, p)
        self.supervisors.update(p.pid for p in sups)
        return sorted(sups, key=lambda p: p.pid), sorted(workers, key=lambda p: p.pid)

    def start(self, fault: Fault) -> None:
        self.join()
        self.thread = threading.Thread(target=self._run, args=(fault,), name=f"chaos-{fault.batch}")
        self.thread.start()

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join(LONG_STOP_CAP_S + 60)
            assert not self.thread.is_alive(), "the fault thread did not finish"
        if self.cancel_thread is not None:
            self.cancel_thread.join(60)
            assert not self.cancel_thread.is_alive(), "the cancel thread did not finish"

    def start_cancel(self, spark: SparkSession, runs: tuple[Run, Run], cancel: Cancel) -> None:
        if self.cancel_thread is not None:
            self.cancel_thread.join(60)
        self.cancel_thread = threading.Thread(target=self._cancel, args=(spark, runs, cancel),
                                              name=f"cancel-{cancel.batch}")
        self.cancel_thread.start()

    def _cancel(self, spark: SparkSession, runs: tuple[Run, Run], cancel: Cancel) -> None:
        """Cancels the job group (the run id) of one query at a random point of its batch."""
        try:
            time.sleep(cancel.delay_s)
            query = runs[cancel.query].query
            if query is None:
                self.cancels["query being restarted: none cancelled"] += 1
                return
            spark.sparkContext.cancelJobGroup(str(query.runId))
            self.cancels["issued"] += 1
        except Exception as e:  # noqa: BLE001 (reported by the test)
            self.errors.append(f"batch {cancel.batch}: cancel: {e!r}")

    def _server(self) -> tuple[psutil.Process, list[psutil.Process]] | None:
        """The running server's supervisor and workers (bounded wait: after a fault, the next
        task starts a new server)."""
        found: list[tuple[psutil.Process, list[psutil.Process]]] = []

        def pick() -> bool:
            sups, _ = self.servers()
            found.clear()
            try:
                if len(sups) == 1:
                    found.append((sups[0], sorted(sups[0].children(), key=lambda p: p.pid)))
            except psutil.Error:
                found.clear()
            return bool(found and found[0][1])
        return found[0] if poll_until(pick, 60, every_s=0.05) else None

    def _until_gone(self, victim: psutil.Process, outcome: str) -> None:
        """Leaves `victim` stopped until the shim kills it (bounded), then records the outcome."""
        if poll_until(lambda: not running([victim]), LONG_STOP_CAP_S, every_s=0.1):
            self.outcomes[outcome] += 1
        else:
            self.outcomes[f"not killed within {LONG_STOP_CAP_S}s: {outcome}"] += 1

    def _run(self, fault: Fault) -> None:
        try:
            time.sleep(fault.delay_s)  # a random point of the batch (the fault plan's, seeded)
            server = self._server()
            if server is None:
                self.errors.append(f"batch {fault.batch}: no server to inject {fault.kind} into")
                return
            supervisor, workers = server
            serving = [w for w in workers if _serves_connections(w)] or workers
            worker = serving[self.rnd.randrange(len(serving))]
            self.injected[fault.kind] += 1
            kind = fault.kind
            if kind == "kill-worker":
                worker.send_signal(signal.SIGKILL)
            elif kind == "kill-supervisor":
                supervisor.send_signal(signal.SIGKILL)
            elif kind in ("stop-worker-short", "stop-supervisor"):
                victim = worker if kind == "stop-worker-short" else supervisor
                victim.send_signal(signal.SIGSTOP)
                time.sleep(fault.stop_s)
                alive = bool(running([victim]))
                if alive:
                    victim.send_signal(signal.SIGCONT)
                self.outcomes[f"{kind}: resumed alive" if alive else f"{kind}: gone before resumed"] += 1
            elif kind == "stop-worker-until-killed":
                worker.send_signal(signal.SIGSTOP)
                self._until_gone(worker, "stopped worker killed by the watchdog")
            elif kind == "stop-worker-kill-supervisor":
                worker.send_signal(signal.SIGSTOP)
                supervisor.send_signal(signal.SIGKILL)
                self._until_gone(worker, "stopped worker of a killed supervisor killed by the shim")
            elif kind == "stop-supervisor-kill-worker":
                supervisor.send_signal(signal.SIGSTOP)
                worker.send_signal(signal.SIGKILL)
                self._until_gone(supervisor, "stopped supervisor of a dead worker killed by the shim")
            else:
                raise AssertionError(kind)
        except psutil.NoSuchProcess:
            self.outcomes[f"{fault.kind}: victim exited before the signal"] += 1
        except Exception as e:  # noqa: BLE001 (reported by the test)
            self.errors.append(f"batch {fault.batch}: {fault.kind}: {e!r}")
        finally:
            self.resume_all()  # whatever is still stopped (a capped wait) goes on

    def resume_all(self) -> None:
        for p in self.seen.values():
            try:
                if p.is_running() and p.status() == psutil.STATUS_STOPPED:
                    p.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass


def _serves_connections(worker: psutil.Process) -> bool:
    """Whether the JVM holds a connection to this worker (besides its listening socket), i.e.
    it serves stores, which every batch loads: a fault there is met by the next batch."""
    try:
        return len(worker.net_connections(kind="unix")) > 1
    except psutil.Error:
        return False


@pytest.fixture(scope="module")
def local_dir() -> str:
    return tempfile.mkdtemp(prefix="ttlstate-soak-local-")


@pytest.fixture(scope="module")
def spark(local_dir: str) -> Iterator[SparkSession]:
    s = session("local[2,4]", confs={"spark.local.dir": local_dir}, request_timeout=f"{DEADLINE_S}s")
    yield s
    s.stop()


def _settle(run: Run, restarts: Counter) -> None:
    """`run.settle()`; a query a job group cancel failed is restarted from its checkpoint."""
    while True:
        try:
            run.settle()
            return
        except StreamingQueryException as e:
            if "cancelled part of cancelled job group" not in str(e) or restarts["restarts"] >= 3 * CANCELS:
                raise
            restarts["restarts"] += 1
            run.stop()
            run.start()


def _run_pair(spark: SparkSession, provider: str, steps: list[dict[str, list[dict]]],
              on_feed: Callable[[int, tuple[Run, Run]], None] = lambda b, runs: None,
              restarts: Counter | None = None) -> tuple[Run, Run]:
    """Both queries, batch by batch: both inputs appear, then both queries finish their batch."""
    agg = Run(spark, provider, aggregation, {"agg": SCHEMAS["agg"]}, "append", dict(CONFS))
    dedup = Run(spark, provider, deduplication, {"dedup": SCHEMAS["dedup"]}, "append", dict(CONFS))
    restarts = Counter() if restarts is None else restarts
    agg.start()
    dedup.start()
    try:
        for b, rows in enumerate(steps):
            agg.feed(rows["agg"])
            dedup.feed(rows["dedup"])
            on_feed(b, (agg, dedup))
            _settle(agg, restarts)
            _settle(dedup, restarts)
    finally:
        agg.stop()
        dedup.stop()
    return agg, dedup


def test_chaos_soak_matches_rocksdb_and_leaves_nothing_behind(spark: SparkSession, local_dir: str) -> None:
    rnd = random.Random(SEED)
    steps = inputs(rnd)
    faults = {f.batch: f for f in plan(rnd)}
    cancels = {c.batch: c for c in cancel_plan(rnd)}
    theirs = _run_pair(spark, ROCKSDB, steps)
    chaos = Chaos(local_dir, random.Random(SEED + 1))
    restarts: Counter = Counter()
    second: dict[str, object] = {}
    started = time.monotonic()
    try:
        def on_feed(b: int, runs: tuple[Run, Run]) -> None:
            chaos.servers()  # remember every server process, to check none outlives the run
            if b in faults:
                chaos.start(faults[b])
            if b in cancels:
                chaos.start_cancel(spark, runs, cancels[b])
            rerun, during = SECOND_WRITER
            if b == rerun + 1:  # batch `rerun` is committed: its logs are what a driver would see
                second["checkpoint"] = second_driver_checkpoint(runs[1], rerun)
            if b == during:
                second.update(run_second_driver(runs[1], str(second["checkpoint"]), rerun,
                                                "tests.spark.test_chaos_soak:deduplication", {},
                                                "append"))
        ours = _run_pair(spark, TTLSTATE, steps, on_feed, restarts)
        chaos.join()
    finally:
        chaos.resume_all()
    elapsed = time.monotonic() - started
    print(f"\nchaos soak: {BATCHES} batches x 2 queries in {elapsed:.0f}s with ttlstate; injected "
          f"{dict(chaos.injected)}; outcomes {dict(chaos.outcomes)}; cancels {dict(chaos.cancels)}, "
          f"queries restarted after one {restarts['restarts']}; state servers seen {len(chaos.supervisors)}; "
          f"second driver {second}")
    assert second.get("done") and "error" not in second, second
    assert not chaos.errors, chaos.errors
    assert chaos.injected == Counter({k: PER_KIND for k in KINDS}), chaos.injected
    assert sum(chaos.cancels.values()) == CANCELS, chaos.cancels
    outcomes = chaos.outcomes
    assert outcomes["stop-worker-short: resumed alive"] == PER_KIND, outcomes  # waited for, not killed
    assert outcomes["stopped worker killed by the watchdog"] == PER_KIND, outcomes
    assert outcomes["stopped worker of a killed supervisor killed by the shim"] == PER_KIND, outcomes
    assert outcomes["stopped supervisor of a dead worker killed by the shim"] == PER_KIND, outcomes
    for mine, rocks in zip(ours, theirs, strict=True):
        assert sorted(mine.outputs) == list(range(BATCHES))
        assert mine.outputs == rocks.outputs
        assert state_rows_per_batch(mine) == state_rows_per_batch(rocks)
    assert sum(len(rows) for rows in ours[0].outputs.values()) > 0  # windows did close and leave

    spark.stop()
    assert poll_until(lambda: chaos.servers() == ([], []), 30), chaos.servers()
    assert not running(list(chaos.seen.values())), running(list(chaos.seen.values()))
    assert poll_until(lambda: not [n for n in os.listdir(local_dir) if n.startswith(("ttlstate-", "ttls-"))],
                      30), os.listdir(local_dir)

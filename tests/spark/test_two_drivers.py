"""Two drivers on one checkpoint: the running query's committed state is never deleted.

A second driver started on a running query's checkpoint (or a zombie task) re-runs an old batch
and commits its state versions while the running query has gone on. Here the second driver is a
real second driver process re-running batch 4 into the running query's state files after the
running query reached batch 8; the running query then goes on, is restarted on a fresh state
server (so every version is rebuilt from the checkpoint files), and must produce exactly what
Spark's RocksDB provider produces for the same input without the race.
"""

from __future__ import annotations

import os

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import (
    ROCKSDB,
    TTLSTATE,
    Run,
    our_server_processes,
    outputs_per_step,
    poll_until,
    run_steps,
    running,
    session,
)
from tests.spark.second_driver import run_second_driver, second_driver_checkpoint
from ttlstate.config import keys as K

SCHEMA = "k STRING, v INT"
RERUN_BATCH = 4
STEPS = [[{"k": f"k{(step * 3 + i) % 7}", "v": step} for i in range(4)] for step in range(12)]


def build(events: DataFrame) -> DataFrame:
    return events.groupBy("k").count()


def _build(sources: dict[str, DataFrame]) -> DataFrame:
    return build(sources["events"])


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    s = session(ttl="1h")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def expected(spark: SparkSession) -> dict[int, list[tuple]]:
    return outputs_per_step(run_steps(spark, ROCKSDB, _build, {"events": SCHEMA}, STEPS,
                                      output_mode="update"))


def _written_files(state: str) -> list[str]:
    """The store directory's files, without uploads in flight: a snapshot the running query's
    maintenance is writing (`.9.snapshot.<uuid>.tmp` and its `.crc`) is renamed when done, and
    its temporary name vanishing is not a deletion."""
    return [n for n in os.listdir(state) if not n.removesuffix(".crc").endswith(".tmp")]


def _kill_state_servers() -> None:
    procs = [p for p, _cmd in our_server_processes()]
    for p in procs:
        p.kill()
    assert poll_until(lambda: not running(procs), 30)


@pytest.mark.spark
# Without snapshots (1000) only changelogs are at stake, which the snapshot case covers too: in
# `make test-long` only.
@pytest.mark.parametrize("snapshot_interval", [pytest.param("1000", marks=pytest.mark.long), "3"])
def test_second_driver_rerunning_an_old_batch_loses_nothing(spark: SparkSession, expected,  # noqa: ANN001
                                                           snapshot_interval: str) -> None:
    confs = {K.SNAPSHOT_INTERVAL.key: snapshot_interval}
    ours = Run(spark, TTLSTATE, _build, {"events": SCHEMA}, "update", confs)
    ours.start()
    try:
        for rows in STEPS[:RERUN_BATCH + 1]:
            ours.step(rows)
        second = second_driver_checkpoint(ours, RERUN_BATCH)
        for rows in STEPS[RERUN_BATCH + 1:9]:
            ours.step(rows)
        state = os.path.join(ours.checkpoint, "state", "0", "0")
        before = {n: os.path.getmtime(os.path.join(state, n)) for n in _written_files(state)}
        report = run_second_driver(ours, second, RERUN_BATCH, "tests.spark.test_two_drivers:_build",
                                   {"ttl": "1h"})
        assert report["done"] and "error" not in report, report
        assert report["committed"][:1] == [RERUN_BATCH], report
        rewritten = f"{RERUN_BATCH + 1}.changelog"
        assert os.path.getmtime(os.path.join(state, rewritten)) > before[rewritten]  # the race ran
        assert set(before) <= set(os.listdir(state))  # nothing of the running query was deleted
        for rows in STEPS[9:10]:
            ours.step(rows)
        ours.stop()
        _kill_state_servers()  # the restart rebuilds every store from the checkpoint files alone
        ours.start()
        for rows in STEPS[10:]:
            ours.step(rows)
    finally:
        ours.stop()
    assert outputs_per_step(ours) == expected

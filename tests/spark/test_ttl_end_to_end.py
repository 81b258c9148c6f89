"""TTL in real streaming queries. "Now" is each micro-batch's timestamp, so the tests sleep
between batches to move it; TTLs are a couple of seconds to keep the module short."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.spark.harness import (
    EVENTS_SCHEMA,
    ROCKSDB,
    TTLSTATE,
    Run,
    batch_times,
    ev,
    outputs_per_step,
    session,
)
from ttlstate.config import keys as K
from ttlstate.store.metric_names import ALL_METRICS

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}
TTL_MS = 4000


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.stop()


def _run(spark: SparkSession, provider: str, build, mode: str, confs: dict[str, str]) -> Run:  # noqa: ANN001
    run = Run(spark, provider, build, SCHEMA, mode, confs)
    run.start()
    return run


def _rows(ks: str) -> list[dict]:
    return [{"k": k, "v": 1} for k in ks]


def _custom(run: Run, index: int = -1) -> dict[str, int]:
    return run.progress[index]["stateOperators"][0]["customMetrics"]


def test_dedup_forgets_a_key_after_the_ttl_and_emits_it_again(spark: SparkSession) -> None:
    confs = {K.TTL.key: f"{TTL_MS}ms"}
    build = lambda s: s["events"].dropDuplicates(["k"])  # noqa: E731
    ours = _run(spark, TTLSTATE, build, "append", confs)
    try:
        ours.step(_rows("ab"))
        time.sleep(0.5)
        ours.step(_rows("b"))  # b is still remembered; a is not touched
        time.sleep(TTL_MS / 1000 + 0.5)
        ours.step(_rows("ab"))  # both expired (dedup hits do not refresh: OnCreateAndWrite)
    finally:
        ours.stop()
    theirs = _run(spark, ROCKSDB, build, "append", {})
    try:
        for rows in ("ab", "b", "ab"):
            theirs.step(_rows(rows))
    finally:
        theirs.stop()
    t = batch_times(ours)
    assert TTL_MS <= t[2] - t[1], f"batch times {t}: the last two are less than the TTL apart"
    # On a loaded machine the second batch can start a TTL after the first: b has expired there
    # and is emitted again (then it is written at t[1], and expires again by the last batch).
    b_again = t[1] - t[0] >= TTL_MS
    assert [len(ours.outputs[b]) for b in sorted(ours.outputs)] == [2, int(b_again), 2], t
    assert [len(theirs.outputs[b]) for b in sorted(theirs.outputs)] == [2, 0, 0]
    metrics = _custom(ours)
    assert set(metrics) >= {m.name for m in ALL_METRICS}
    assert metrics["ttlExpiredOnRead"] == 2
    assert metrics["storeCallCount"] > 0


def _count_by_key(run: Run) -> list[dict[str, int]]:
    return [{row[0]: row[1] for row in run.outputs[b]} for b in sorted(run.outputs)]


def test_on_read_and_write_keeps_a_key_alive_and_never_return_expired_restarts_from_zero(
        spark: SparkSession) -> None:
    """In event time (`timeSource=watermark`, the watermark 1 s behind the newest event), so what
    is alive does not depend on how fast batches run: a is read every 4 s of event time, within
    its 10 s TTL, for 20 s; b is not, and expires. (Before the first watermark the batch
    timestamp stands in, so the first step only sets one.)"""
    confs = {K.TTL.key: "10s", K.UPDATE_TYPE.key: "OnReadAndWrite", K.TIME_SOURCE.key: "watermark"}
    build = lambda s: (s["events"].withWatermark("ts", "1 second")  # noqa: E731
                       .groupBy("k").agg(F.count("*").alias("n")))
    steps = [[ev("z", 1, 1)], [ev("a", 1, 2), ev("b", 1, 2)], *([ev("a", 1, s)] for s in (6, 10, 14, 18)),
             [ev("a", 1, 22), ev("b", 1, 22)]]
    run = Run(spark, TTLSTATE, build, {"events": EVENTS_SCHEMA}, "update", confs)
    run.start()
    try:
        for rows in steps:
            run.step(rows)
    finally:
        run.stop()
    counts = [dict((r[0], r[1]) for r in rows) for _, rows in sorted(outputs_per_step(run).items())]
    assert [c.get("a") for c in counts[1:]] == [1, 2, 3, 4, 5, 6]  # kept alive by its reads
    assert counts[-1]["b"] == 1  # expired: the aggregate restarted from zero


def test_join_and_limit_stores_ignore_ttl(spark: SparkSession) -> None:
    """TTL would corrupt join counts and the limit's row count: those stores run without it."""
    confs = {K.TTL.key: "1ms"}
    build = lambda s: s["events"].limit(3)  # noqa: E731
    ours = _run(spark, TTLSTATE, build, "append", confs)
    try:
        ours.step(_rows("ab"))
        time.sleep(0.2)
        ours.step(_rows("cde"))
    finally:
        ours.stop()
    assert sum(len(rows) for rows in ours.outputs.values()) == 3


def test_compaction_filter_removes_expired_rows_physically(spark: SparkSession) -> None:
    """Aggregation without watermark never reads idle keys again: only the filter removes them."""
    confs = {K.TTL.key: "1s", K.INCREMENTAL_SIZE.key: "0", K.FILTER_COMPACT_EVERY.key: "1"}
    build = lambda s: s["events"].groupBy("k").agg(F.count("*").alias("n"))  # noqa: E731
    run = _run(spark, TTLSTATE, build, "update", confs)
    try:
        run.step(_rows("abcdefghij"))
        time.sleep(1.5)
        run.step(_rows("z"))
    finally:
        run.stop()
    t = batch_times(run)
    assert t[1] - t[0] >= 1000
    op = run.progress[-1]["stateOperators"][0]
    assert op["customMetrics"]["ttlRemovedByCompactionFilter"] == 10
    assert op["customMetrics"]["ttlExpiredOnRead"] == 0
    assert op["numRowsTotal"] == 1

"""TTL in real streaming queries. "Now" is each micro-batch's timestamp, so the tests sleep
between batches to move it; TTLs are a couple of seconds to keep the module short."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.spark.harness import ROCKSDB, TTLSTATE, Run, batch_times, session
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
    assert t[1] - t[0] < TTL_MS <= t[2] - t[0], f"batch times {t} do not bracket the TTL"
    assert [len(ours.outputs[b]) for b in sorted(ours.outputs)] == [2, 0, 2]
    assert [len(theirs.outputs[b]) for b in sorted(theirs.outputs)] == [2, 0, 0]
    metrics = _custom(ours)
    assert set(metrics) >= {m.name for m in ALL_METRICS}
    assert metrics["ttlExpiredOnRead"] == 2
    assert metrics["storeCallCount"] > 0


def _count_by_key(run: Run) -> list[dict[str, int]]:
    return [{row[0]: row[1] for row in run.outputs[b]} for b in sorted(run.outputs)]


def test_on_read_and_write_keeps_a_key_alive_and_never_return_expired_restarts_from_zero(
        spark: SparkSession) -> None:
    confs = {K.TTL.key: f"{TTL_MS}ms", K.UPDATE_TYPE.key: "OnReadAndWrite"}
    build = lambda s: s["events"].groupBy("k").agg(F.count("*").alias("n"))  # noqa: E731
    run = _run(spark, TTLSTATE, build, "update", confs)
    try:
        run.step(_rows("ab"))
        for _ in range(5):  # a arrives about every second, for longer than the TTL; b does not
            time.sleep(1.0)
            run.step(_rows("a"))
        run.step(_rows("ab"))
    finally:
        run.stop()
    t = batch_times(run)
    gaps = [t[b + 1] - t[b] for b in range(len(t) - 1)]
    assert max(gaps) < TTL_MS < t[len(t) - 1] - t[0], f"batch times {t} do not exercise the TTL"
    counts = _count_by_key(run)
    assert [c["a"] for c in counts] == [1, 2, 3, 4, 5, 6, 7]  # kept alive by its reads
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

"""The state data source on ttlstate shows a batch as the query saw it: with the TTL recorded in
the checkpoint (not the reading session's) and at that batch's own time; `reader.includeExpired`
adds the entries expired then but not yet removed. Compared with Spark's RocksDB provider's
reader on the same query (no TTL there: it holds every row)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, Run, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING"}


def _dedupe(sources: dict[str, DataFrame]) -> DataFrame:
    return sources["events"].dropDuplicates(["k"])


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.stop()


def _run(spark: SparkSession, provider: str, confs: dict[str, str], pause_s: float = 0) -> Run:
    run = Run(spark, provider, _dedupe, SCHEMA, "append", confs)
    run.start()
    try:
        run.step([{"k": k} for k in "abcd"])
        time.sleep(pause_s)
        run.step([{"k": "e"}, {"k": "a"}])
    finally:
        run.stop()
    return run


def _keys(spark: SparkSession, run: Run, provider: str, batch: int, **confs: str) -> list[str]:
    spark.conf.set(K.PROVIDER_CLASS_KEY, provider)
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        df = spark.read.format("statestore").option("batchId", batch).load(run.checkpoint)
        return sorted(r["key"]["k"] for r in df.collect())
    finally:
        for k in confs:
            spark.conf.unset(k)


def test_reader_uses_the_recorded_ttl_and_the_batchs_own_time(spark: SparkSession) -> None:
    ours = _run(spark, TTLSTATE, {K.TTL.key: "1h"})
    theirs = _run(spark, ROCKSDB, {})
    for batch, expected in ((0, list("abcd")), (1, list("abcde"))):
        assert _keys(spark, theirs, ROCKSDB, batch) == expected
        # A reading session with a 1 ms TTL must not hide what the query (TTL 1h) holds.
        assert _keys(spark, ours, TTLSTATE, batch, **{K.TTL.key: "1ms"}) == expected


def test_expired_entries_are_hidden_unless_asked_for(spark: SparkSession) -> None:
    """TTL 2s and no incremental cleanup: at batch 1 (3 s later) a..d are expired but still
    stored; the reader hides them as the query did, and shows them with reader.includeExpired."""
    ours = _run(spark, TTLSTATE, {K.TTL.key: "2s", K.INCREMENTAL_SIZE.key: "0"}, pause_s=3)
    assert _keys(spark, ours, TTLSTATE, 0) == list("abcd")  # batch 0's own time: all live
    assert _keys(spark, ours, TTLSTATE, 1) == ["a", "e"]  # a was written again at batch 1
    assert _keys(spark, ours, TTLSTATE, 1, **{K.READER_INCLUDE_EXPIRED.key: "true"}) == list("abcde")

"""A query restarted on its checkpoint with the other checkpoint format set: Spark keeps the
checkpoint's own format (its commit log says which), and ttlstate goes on exactly as Spark's
RocksDB provider does, both ways."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, Run, session

pytestmark = pytest.mark.spark

FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
SCHEMA = {"events": "k STRING, v INT"}
STEPS = [[{"k": f"k{(s * 2 + i) % 5}", "v": s} for i in range(3)] for s in range(6)]


def _build(sources: dict[str, DataFrame]) -> DataFrame:
    return sources["events"].groupBy("k").count()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.conf.unset(FORMAT_KEY)
    s.stop()


def _run(spark: SparkSession, provider: str, first: str, then: str) -> Run:
    run = Run(spark, provider, _build, SCHEMA, "update")
    spark.conf.set(FORMAT_KEY, first)
    run.start()
    try:
        for rows in STEPS[:3]:
            run.step(rows)
        run.stop()
        spark.conf.set(FORMAT_KEY, then)
        run.start()
        for rows in STEPS[3:]:
            run.step(rows)
    finally:
        run.stop()
    return run


@pytest.mark.parametrize(("first", "then"), [("1", "2"), ("2", "1")])
def test_a_restart_in_the_other_format_goes_on_exactly(spark: SparkSession, first: str,
                                                       then: str) -> None:
    ours = _run(spark, TTLSTATE, first, then)
    assert ours.outputs == _run(spark, ROCKSDB, first, then).outputs
    assert len(ours.outputs) == len(STEPS)
    files = [f for f in os.listdir(os.path.join(ours.checkpoint, "state", "0", "0")) if f[0].isdigit()]
    with_ids = [f for f in files if "_" in f]
    assert len(files) == len(STEPS) and len(with_ids) == (len(files) if first == "2" else 0), files

"""transformWithState in a session configured for ttlstate (Spark 4.0 and later): never refused.

The extension routes such a query to Spark's RocksDB provider (`TransformWithStateRouting` in
the shim): each API (Scala's, PySpark's `transformWithStateInPandas` and row-based
`transformWithState`) runs in a ttlstate session, across a restart, exactly as the same query on
Spark's RocksDB provider; its checkpoint's offset log names RocksDB's provider from the first
batch; each start logs one INFO line saying where it runs, and a WARN naming the session's
ttlstate confs, which do not apply to it; the state data source reads its state. The
Spark-version tier runs the same query on 4.0 to 4.2 (tests/spark_versions/test_line.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, session
from tests.spark.tws_queries import (
    EXPECTED,
    FINAL_COUNTS,
    STEPS,
    apis,
    notes,
    on_rocksdb,
    pandas_counts,
    read_counts,
    routed_run,
    scala_counts,
    warnings,
)
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(ttl="5s")
    yield s
    s.stop()


def test_each_api_runs_in_a_ttlstate_session_as_on_rocksdb(spark: SparkSession) -> None:
    for name, build in apis(spark).items():
        ours = routed_run(spark, build)
        assert ours.outputs == on_rocksdb(spark, build).outputs == EXPECTED, name
        warned = [w for w in warnings(spark) if ours.checkpoint in w]
        assert any(K.TTL.key in w and "do not apply" in w for w in warned), name
        assert read_counts(spark, ours.checkpoint) == FINAL_COUNTS, name  # the reader finds RocksDB's
    assert len(apis(spark)) == 3  # Scala, and both Python APIs


def test_a_query_mixing_operators_runs_on_rocksdb_whole(spark: SparkSession) -> None:
    """A deduplication before the transformWithState: both operators' state is RocksDB's (Spark's
    provider is one per query), both exact across the restart."""
    steps = [STEPS[0], [{"k": "a", "v": 1}, *STEPS[1]]]  # batch 0's a=1 again: dropped
    counts = scala_counts(spark)

    def build(s):  # noqa: ANN001, ANN202
        return counts({"events": s["events"].dropDuplicates(["k", "v"])})
    ours = routed_run(spark, build, steps)
    assert ours.outputs == on_rocksdb(spark, build, steps).outputs == EXPECTED
    assert sorted(os.listdir(os.path.join(ours.checkpoint, "state"))) == ["0", "1"]


def test_a_checkpoint_whose_offset_log_names_ttlstate_still_runs(spark: SparkSession) -> None:
    """A checkpoint pinned to ttlstate by a run from before the routing (its first batch failed at
    Spark's gate) restarts: Spark applies the offset log's confs to the query's session after the
    start, and the batches are routed again before they are planned. Made here from a RocksDB run
    whose offset log is rewritten to name ttlstate."""
    run = on_rocksdb(spark, pandas_counts, STEPS[:1])
    offsets = os.path.join(run.checkpoint, "offsets")
    for name in os.listdir(offsets):
        path = os.path.join(offsets, name)
        if name.endswith(".crc"):  # the checksum of the text replaced below
            os.remove(path)
        elif name.isdigit():
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text.replace(ROCKSDB, TTLSTATE))
    run.provider = TTLSTATE
    run.start()
    try:
        run.step(STEPS[1])
    finally:
        run.stop()
    assert run.outputs == EXPECTED
    assert any(run.checkpoint in n and "from a run before ttlstate" in n for n in notes(spark))

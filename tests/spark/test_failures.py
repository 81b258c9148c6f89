"""Task failures before and after a store commit (local[2,3]: tasks retried): the output is
exactly what Spark's RocksDB provider produces without failures."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType

from tests.spark.harness import ROCKSDB, TTLSTATE, run_steps, session

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}
STEPS = [[{"k": "a", "v": 1}, {"k": "b", "v": 2}], [{"k": "a", "v": 3}, {"k": "c", "v": 4}],
         [{"k": "a", "v": 5}], [{"k": "b", "v": 6}]]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session("local[2,3]")
    yield s
    s.stop()


def fail_once(marker: str, trigger: int):  # noqa: ANN201
    """A UDF that raises the first time it sees `trigger` (tracked by a marker file), then passes."""
    def f(v: int) -> int:
        if v == trigger and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("injected task failure")
        return v
    return F.udf(f, IntegerType(), useArrow=False)


@pytest.mark.parametrize("where", ["before-commit", "after-commit"])
def test_failed_task_retry_gives_exactly_once_output(spark: SparkSession, where: str) -> None:
    marker = os.path.join(tempfile.mkdtemp(), "failed-once")
    udf = fail_once(marker, trigger=3 if where == "before-commit" else 4)  # an input v / an output total

    def build(s: dict[str, DataFrame]) -> DataFrame:
        events = s["events"]
        if where == "before-commit":  # fails while the state store is being written: abort
            events = events.withColumn("v", udf("v"))
        out = events.groupBy("k").agg(F.sum("v").alias("total"))
        if where == "after-commit":  # fails after the store committed: the retry re-commits
            out = out.withColumn("total", udf(F.col("total").cast("int")))
        return out

    ours = run_steps(spark, TTLSTATE, build, SCHEMA, STEPS, output_mode="update")
    assert os.path.exists(marker), "the failure was not injected"
    theirs = run_steps(spark, ROCKSDB, lambda s: s["events"].groupBy("k").agg(F.sum("v").alias("total")),
                       SCHEMA, STEPS, output_mode="update")
    assert ours.outputs == theirs.outputs


def test_killed_state_server_is_restarted_and_state_reloaded(spark: SparkSession) -> None:
    """kill -9 of the server between batches: the next task fails, its retry starts a new server
    that reloads the store from the checkpoint; no committed state is lost."""
    import psutil

    from tests.spark.harness import Run, is_worker, our_server_processes

    build = lambda s: s["events"].groupBy("k").agg(F.sum("v").alias("total"))  # noqa: E731
    ours = Run(spark, TTLSTATE, build, SCHEMA, "update")
    ours.start()
    try:
        ours.step(STEPS[0])
        ours.step(STEPS[1])
        killed = [p for p, _cmd in our_server_processes() if not is_worker(p)]  # supervisors
        assert killed, "no state server is running"
        for p in killed:
            p.kill()
        psutil.wait_procs(killed, timeout=10)
        ours.step(STEPS[2])
        ours.step(STEPS[3])
    finally:
        ours.stop()
    theirs = run_steps(spark, ROCKSDB, build, SCHEMA, STEPS, output_mode="update")
    assert ours.outputs == theirs.outputs

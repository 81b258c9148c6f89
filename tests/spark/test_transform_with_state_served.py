"""transformWithState served by ttlstate's own store (`transformWithState=ttlstate`, opt-in).

Its stores' column families are key prefixes in ttlstate's store; from Spark 4.2 the extension
admits ttlstate's provider to the operators that check it. Each query here runs on ttlstate
(the offset log names ttlstate's provider, the state folders hold ttlstate's changelogs) and on
Spark's RocksDB provider, both restarted in the middle, and must give the same rows: every API
of Spark 4.3 (Scala, `transformWithStateInPandas`, row-based `transformWithState`), and in Scala
ValueState, ListState and MapState with and without `TTLConfig` (a 1 ms TTL expires at any later
batch), processing-time timers, event-time timers and an initial state; the state data source
reads a served store."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import EVENTS_SCHEMA, ROCKSDB, TTLSTATE, Run, ev, run_steps, session
from tests.spark.tws_queries import (
    EXPECTED,
    FINAL_COUNTS,
    SCHEMAS,
    STEPS,
    apis,
    batch_per_step,
    pinned_providers,
    read_counts,
    tools_method,
    warnings,
)
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SERVED = {K.TRANSFORM_WITH_STATE.key: "ttlstate"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(ttl="5s")
    yield s
    s.stop()


def _both(spark: SparkSession, build, schemas: dict[str, str], steps: list, restart_after: int = 1,  # noqa: ANN001
          ) -> tuple[Run, Run]:
    ours = run_steps(spark, TTLSTATE, build, schemas, steps, restart_after=restart_after, output_mode="update",
                     confs=SERVED)
    theirs = run_steps(spark, ROCKSDB, build, schemas, steps, restart_after=restart_after, output_mode="update")
    assert pinned_providers(ours) and set(pinned_providers(ours)) == {TTLSTATE}
    assert any(name.endswith(".changelog") for name in os.listdir(os.path.join(ours.checkpoint, "state", "0", "0")))
    return ours, theirs


def _rows(run: Run) -> list[tuple]:
    """Every row the run emitted: timers fire in whichever batch runs after their time."""
    return sorted((row for rows in run.outputs.values() for row in rows), key=repr)


def test_each_api_served_by_ttlstate_as_on_rocksdb(spark: SparkSession) -> None:
    for name, build in apis(spark).items():
        ours, theirs = _both(spark, build, SCHEMAS, STEPS)
        assert ours.outputs == theirs.outputs == EXPECTED, name
        assert any(ours.checkpoint in w and "do not apply to the transformWithState operators" in w
                   for w in warnings(spark)), name
    assert read_counts(spark, ours.checkpoint) == FINAL_COUNTS  # the state data source, on ttlstate's store


def test_state_kinds_ttl_and_processing_time_timers(spark: SparkSession) -> None:
    features = tools_method(spark, "features")

    def build(s: dict[str, DataFrame]) -> DataFrame:
        return features(s["events"])
    steps = [[{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 1}], [{"k": "a", "v": 3}],
             [{"k": "b", "v": 2}, {"k": "c", "v": 4}], [{"k": "a", "v": 5}]]
    ours = batch_per_step(spark, TTLSTATE, build, steps, SERVED)
    theirs = batch_per_step(spark, ROCKSDB, build, steps)
    assert set(pinned_providers(ours)) == {TTLSTATE}
    assert ours.outputs == theirs.outputs
    assert ours.outputs[1] == [("a", "in", 3, "recent=-1 map=1:2,3:1 list=1,1,3"),  # the 1 ms TTL'd value gone
                               ("a", "timer", 0, ""), ("b", "timer", 0, "")]  # batch 0's timers


def test_event_time_timers_and_initial_state(spark: SparkSession) -> None:
    event_timers = tools_method(spark, "eventTimers")

    def build(s: dict[str, DataFrame]) -> DataFrame:
        initial = spark.createDataFrame([("a", 10), ("z", 100)], "k STRING, n LONG")
        return event_timers(s["events"].withWatermark("ts", "5 seconds"), initial)
    steps = [[ev("a", 1, 1), ev("b", 2, 2)], [ev("a", 3, 4)], [ev("c", 4, 20)], [ev("a", 5, 40)]]
    ours, theirs = _both(spark, build, {"events": EVENTS_SCHEMA}, steps, restart_after=2)
    assert _rows(ours) == _rows(theirs)
    fired = sorted(r[0] for r in _rows(ours) if r[1].startswith("timer"))
    assert fired == ["a", "a", "b", "c"] and ("a", "in", 11, "1:1") in _rows(ours)  # initial count 10

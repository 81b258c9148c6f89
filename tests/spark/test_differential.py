"""Every stateful operator, on Spark's RocksDB provider and on ttlstate (TTL off), with a
stop and restart in the middle: the per-batch outputs must be identical."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from tests.spark.harness import (
    EVENT_STEPS,
    EVENTS_SCHEMA,
    ROCKSDB,
    TTLSTATE,
    outputs_per_step,
    run_steps,
    session,
    state_rows_per_batch,
    state_rows_per_step,
)

pytestmark = pytest.mark.spark

EVENTS = EVENTS_SCHEMA
STEPS = EVENT_STEPS


FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"

# Format 2 changes how each version is found, not what an operator stores: its cases of the
# single-store operators below that others already cover run in `make test-long` only, as do its
# inner join (its left outer join runs) and its applyInPandasWithState without timeout.
format_2_in_long = pytest.mark.parametrize(
    "spark", [pytest.param("1", id="checkpoint-v1"),
              pytest.param("2", id="checkpoint-v2", marks=pytest.mark.long)], indirect=True)


@pytest.fixture(scope="module", params=["1", "2"], ids=["checkpoint-v1", "checkpoint-v2"])
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """Every operator on both checkpoint formats: format 2 loads each version by the id Spark's
    commit log recorded, and a restart in the middle reads those ids back."""
    s = session()
    s.conf.set(FORMAT_KEY, request.param)
    yield s
    s.conf.unset(FORMAT_KEY)
    s.stop()


def _both(spark: SparkSession, build, schemas: dict[str, str], steps: list,  # noqa: ANN001, ANN202
          mode: str = "append"):
    ours = run_steps(spark, TTLSTATE, build, schemas, steps, restart_after=2, output_mode=mode)
    theirs = run_steps(spark, ROCKSDB, build, schemas, steps, restart_after=2, output_mode=mode)
    return ours, theirs


def _assert_same(spark: SparkSession, build, steps: list = STEPS, mode: str = "append",  # noqa: ANN001
                 schemas: dict[str, str] | None = None, compare_state_rows: bool = True) -> None:
    schemas = schemas or {"events": EVENTS}
    ours, theirs = _both(spark, build, schemas, steps, mode)
    assert ours.outputs, "the query produced no batch"
    if len(schemas) == 1:
        assert ours.outputs == theirs.outputs
        if compare_state_rows:
            assert state_rows_per_batch(ours) == state_rows_per_batch(theirs)
        return
    # Several sources: Spark may split a step into batches differently each run (see harness).
    assert outputs_per_step(ours) == outputs_per_step(theirs)
    if compare_state_rows:
        assert state_rows_per_step(ours) == state_rows_per_step(theirs)


def agg(s: dict[str, DataFrame]) -> DataFrame:
    return s["events"].groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))


def test_aggregation_update(spark: SparkSession) -> None:
    _assert_same(spark, agg, mode="update")


@format_2_in_long
def test_aggregation_complete(spark: SparkSession) -> None:
    _assert_same(spark, agg, mode="complete")


@format_2_in_long
def test_aggregation_append_with_watermark(spark: SparkSession) -> None:
    _assert_same(spark, lambda s: s["events"].withWatermark("ts", "10 seconds")
                 .groupBy(F.window("ts", "10 seconds"), "k").agg(F.sum("v").alias("total")))


def test_drop_duplicates(spark: SparkSession) -> None:
    _assert_same(spark, lambda s: s["events"].dropDuplicates(["k"]))


@format_2_in_long
def test_drop_duplicates_with_watermark(spark: SparkSession) -> None:
    _assert_same(spark, lambda s: s["events"].withWatermark("ts", "10 seconds")
                 .dropDuplicates(["k", "ts"]))


@format_2_in_long
def test_drop_duplicates_within_watermark(spark: SparkSession) -> None:
    _assert_same(spark, lambda s: s["events"].withWatermark("ts", "10 seconds")
                 .dropDuplicatesWithinWatermark(["k"]))


@format_2_in_long
def test_session_window(spark: SparkSession) -> None:
    _assert_same(spark, lambda s: s["events"].withWatermark("ts", "10 seconds")
                 .groupBy(F.session_window("ts", "5 seconds"), "k").agg(F.count("*").alias("n")))


@format_2_in_long
def test_streaming_limit(spark: SparkSession) -> None:
    _assert_same(spark, lambda s: s["events"].limit(5))


JOIN_SCHEMAS = {"left": "lk STRING, lv INT, lts TIMESTAMP", "right": "rk STRING, rv INT, rts TIMESTAMP"}
JOIN_STEPS = [
    {"left": [{"lk": "a", "lv": 1, "lts": "2026-01-01 00:00:01"},
              {"lk": "b", "lv": 2, "lts": "2026-01-01 00:00:02"}],
     "right": [{"rk": "a", "rv": 10, "rts": "2026-01-01 00:00:03"}]},
    {"left": [{"lk": "c", "lv": 3, "lts": "2026-01-01 00:00:20"}],
     "right": [{"rk": "b", "rv": 20, "rts": "2026-01-01 00:00:04"},
               {"rk": "c", "rv": 30, "rts": "2026-01-01 00:00:21"}]},
    {"left": [{"lk": "d", "lv": 4, "lts": "2026-01-01 00:00:40"}],
     "right": [{"rk": "x", "rv": 0, "rts": "2026-01-01 00:00:41"}]},
    {"left": [{"lk": "e", "lv": 5, "lts": "2026-01-01 00:01:10"}],
     "right": [{"rk": "e", "rv": 50, "rts": "2026-01-01 00:01:11"}]},
]


def join(how: str):  # noqa: ANN201
    def build(s: dict[str, DataFrame]) -> DataFrame:
        left = s["left"].withWatermark("lts", "10 seconds")
        right = s["right"].withWatermark("rts", "10 seconds")
        cond = F.expr("lk = rk AND rts BETWEEN lts - INTERVAL 5 SECONDS AND lts + INTERVAL 5 SECONDS")
        return left.join(right, cond, how)
    return build


@pytest.mark.parametrize(("spark", "how"), [
    ("1", "inner"), ("1", "left_outer"), ("2", "left_outer"),
    pytest.param("2", "inner", marks=pytest.mark.long)], indirect=["spark"],
    ids=["checkpoint-v1-inner", "checkpoint-v1-left_outer", "checkpoint-v2-left_outer",
         "checkpoint-v2-inner"])
def test_stream_stream_join(spark: SparkSession, how: str) -> None:
    _assert_same(spark, join(how), steps=JOIN_STEPS, schemas=JOIN_SCHEMAS)


def _count(key: tuple, pdfs, state, timeout: bool):  # noqa: ANN001, ANN202
    """Running count per key; with a timeout, a key idle for 10 s of event time is emitted and dropped."""
    if state.hasTimedOut:
        (count,) = state.get
        state.remove()
        yield pd.DataFrame({"k": [key[0]], "n": [count], "timed_out": [True]})
        return
    count = (state.get[0] if state.exists else 0) + sum(len(pdf) for pdf in pdfs)
    state.update((count,))
    if timeout:
        state.setTimeoutTimestamp(state.getCurrentWatermarkMs() + 10_000)
    yield pd.DataFrame({"k": [key[0]], "n": [count], "timed_out": [False]})


def count_no_timeout(key: tuple, pdfs, state):  # noqa: ANN001, ANN201
    yield from _count(key, pdfs, state, timeout=False)


def count_event_time_timeout(key: tuple, pdfs, state):  # noqa: ANN001, ANN201
    yield from _count(key, pdfs, state, timeout=True)


@pytest.mark.parametrize(("spark", "timeout"), [
    ("1", False), ("1", True), ("2", True), pytest.param("2", False, marks=pytest.mark.long)],
    indirect=["spark"],
    ids=["checkpoint-v1-no-timeout", "checkpoint-v1-event-time-timeout", "checkpoint-v2-event-time-timeout",
         "checkpoint-v2-no-timeout"])
def test_apply_in_pandas_with_state(spark: SparkSession, timeout: bool) -> None:
    def build(s: dict[str, DataFrame]) -> DataFrame:
        events = s["events"].withWatermark("ts", "10 seconds") if timeout else s["events"]
        return events.groupBy("k").applyInPandasWithState(
            count_event_time_timeout if timeout else count_no_timeout,
            "k STRING, n LONG, timed_out BOOLEAN", "n LONG", "append",
            GroupStateTimeout.EventTimeTimeout if timeout else GroupStateTimeout.NoTimeout)

    _assert_same(spark, build, mode="append")

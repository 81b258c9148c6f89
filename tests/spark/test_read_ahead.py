"""The read-ahead of state (`readAhead.chunkRows`): a chunk of input rows costs one round trip
for the state of its keys instead of one per cold key, and never changes an answer.

Small chunks make chunk boundaries fall everywhere: between a key's write and its next read in
the same batch, inside runs of duplicates, across a restart. The executor's cache is off, so
the keys of earlier batches are cold and each read of one would need its own round trip."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.harness import EVENT_STEPS, EVENTS_SCHEMA, ROCKSDB, TTLSTATE, Run, run_steps, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}
COLD = {K.CACHE_MAX_BYTES.key: "0"}
AHEAD = {**COLD, K.READ_AHEAD_CHUNK_ROWS.key: "7"}
ONE_BY_ONE = {**COLD, K.READ_AHEAD_CHUNK_ROWS.key: "0"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(ttl="1h")
    yield s
    s.stop()


def _steps() -> list[list[dict]]:
    """New keys, keys of earlier batches, and keys repeated within the batch, shuffled."""
    rnd = random.Random(3)
    steps, seen = [], []
    for b in range(5):
        rows = [{"k": f"n{b}-{i}", "v": i} for i in range(30)]
        rows += [{"k": rnd.choice(seen), "v": -1} for _ in range(30)] if seen else []
        rows += rnd.sample(rows, 10)  # duplicates inside the batch, some in the same chunk
        rnd.shuffle(rows)
        seen += [r["k"] for r in rows]
        steps.append(rows)
    return steps


def _custom_sum(run: Run, name: str) -> int:
    return sum(op["customMetrics"].get(name, 0) for p in run.progress for op in p["stateOperators"])


@pytest.mark.parametrize("workload", ["dropDuplicates", "aggregation"])
def test_read_ahead_answers_as_reads_one_by_one_with_fewer_round_trips(spark: SparkSession,
                                                                       workload: str) -> None:
    if workload == "dropDuplicates":
        build, mode = (lambda s: s["events"].dropDuplicates(["k"])), "append"
    else:
        build, mode = (lambda s: s["events"].groupBy("k").count()), "update"
    steps = _steps()
    ahead = run_steps(spark, TTLSTATE, build, SCHEMA, steps, restart_after=3, output_mode=mode, confs=AHEAD)
    one_by_one = run_steps(spark, TTLSTATE, build, SCHEMA, steps, restart_after=3, output_mode=mode,
                           confs=ONE_BY_ONE)
    theirs = run_steps(spark, ROCKSDB, build, SCHEMA, steps, restart_after=3, output_mode=mode)
    assert ahead.outputs == one_by_one.outputs == theirs.outputs
    assert _custom_sum(one_by_one, "readAheadKeyCount") == 0
    assert _custom_sum(ahead, "readAheadKeyCount") > 0
    trips_ahead, trips_one = _custom_sum(ahead, "storeCallCount"), _custom_sum(one_by_one, "storeCallCount")
    assert trips_ahead < trips_one, (trips_ahead, trips_one)
    rows_ahead = [op["numRowsTotal"] for p in ahead.progress for op in p["stateOperators"]]
    assert rows_ahead == [op["numRowsTotal"] for p in one_by_one.progress for op in p["stateOperators"]]


def test_a_deduplication_with_a_watermark_reads_nothing_ahead_for_late_rows(spark: SparkSession) -> None:
    """Spark drops a row later than the watermark before it reads state: the read-ahead skips
    it too (with reads that refresh TTL, reading it would keep its key alive longer)."""
    def build(s):  # noqa: ANN001, ANN202
        return s["events"].withWatermark("ts", "5 seconds").dropDuplicates(["k"])

    schema = {"events": EVENTS_SCHEMA}
    steps = [*EVENT_STEPS, [EVENT_STEPS[0][0], EVENT_STEPS[1][0]]]  # late repeats, then a live one
    confs = {**AHEAD, K.UPDATE_TYPE.key: "OnReadAndWrite"}
    ahead = run_steps(spark, TTLSTATE, build, schema, steps, restart_after=3, confs=confs)
    theirs = run_steps(spark, ROCKSDB, build, schema, steps, restart_after=3)
    assert ahead.outputs == theirs.outputs
    # The last step's two rows are late, and their key "a" is in the state (the watermark is not
    # part of the key, so it removes nothing): only the skip keeps it unread.
    last = [ahead.progress_by_batch[b]["stateOperators"][0] for b, step in ahead.step_of_batch.items()
            if step == len(steps) - 1]
    assert sum(op["numRowsDroppedByWatermark"] for op in last) == 2
    assert sum(op["customMetrics"]["readAheadKeyCount"] for op in last) == 0
    assert _custom_sum(ahead, "readAheadKeyCount") > 0

"""The clocks TTL counts, in real queries: a 2-hour outage and a backfill, simulated in the
offset log of a stopped query. Spark re-runs a batch it planned but never committed with the
offset log's `batchTimestampMs`, so moving that timestamp of the last batch 2 hours on, after
deleting its commit, makes the re-run exactly the first batch after a 2-hour outage (or a
backfill batch that took 2 hours): what it emits shows which duplicates the clock kept."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.harness import TTLSTATE, Run, ev, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT, ts TIMESTAMP"}
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.stop()


def dedup(s):  # noqa: ANN001, ANN201
    """Deduplication by key; the watermark gives the query event time (its state is not evicted
    by it: the event time is not part of the key, so only TTL bounds it)."""
    return s["events"].withWatermark("ts", "0 seconds").dropDuplicates(["k"])


def at(k: str, minute: int) -> dict:
    """An event of key `k` at `minute` minutes past 2026-01-01 00:00 (event time)."""
    row = ev(k, 0, 0)
    row["ts"] = f"2026-01-01 {minute // 60:02d}:{minute % 60:02d}:00"
    return row


def _rewrite_last_batch_later(checkpoint: str, by_ms: int) -> int:
    """The last batch, uncommitted again, with its batch timestamp `by_ms` after the batch
    before's; returns its id. The local file system's .crc files go with the files changed."""
    offsets = os.path.join(checkpoint, "offsets")
    last = max(int(n) for n in os.listdir(offsets) if n.isdigit())
    commits = os.path.join(checkpoint, "commits")
    for path in (os.path.join(commits, str(last)), os.path.join(commits, f".{last}.crc"),
                 os.path.join(offsets, f".{last}.crc")):
        if os.path.exists(path):
            os.unlink(path)

    def lines(batch: int) -> list[str]:
        with open(os.path.join(offsets, str(batch))) as f:
            return f.read().split("\n")

    previous = json.loads(lines(last - 1)[1])["batchTimestampMs"]
    text = lines(last)
    meta = json.loads(text[1])
    meta["batchTimestampMs"] = previous + by_ms
    text[1] = json.dumps(meta, separators=(",", ":"))
    with open(os.path.join(offsets, str(last)), "w") as f:
        f.write("\n".join(text))
    return last


def _keys_emitted(spark: SparkSession, time_source: str, steps: list[list[dict]], gap_before_last_ms: int
                  ) -> tuple[list[list[str]], dict]:
    """Keys each batch emitted, the last batch re-run `gap_before_last_ms` after the one before
    it; and the re-run's progress of the deduplication."""
    confs = {K.TTL.key: "1h", K.TIME_SOURCE.key: time_source,
             "spark.sql.streaming.noDataMicroBatches.enabled": "false"}  # one batch per step
    run = Run(spark, TTLSTATE, dedup, SCHEMA, "append", confs)
    run.start()
    try:
        for rows in steps:
            run.step(rows)
    finally:
        run.stop()
    last = _rewrite_last_batch_later(run.checkpoint, gap_before_last_ms)
    assert last == len(steps) - 1
    run.outputs.pop(last)
    run.progress_by_batch.pop(last)
    run.start()
    try:
        run.settle()
    finally:
        run.stop()
    emitted = [sorted(row[0] for row in run.outputs[b]) for b in sorted(run.outputs)]
    return emitted, run.progress_by_batch[last]["stateOperators"][0]


OUTAGE = [[at("a", 0), at("b", 0)], [at("c", 1)], [at("a", 2), at("b", 2), at("c", 3), at("d", 3)]]


@pytest.mark.parametrize("time_source", ["activeTime", "watermark"])
def test_dedup_is_exact_across_a_two_hour_outage(spark: SparkSession, time_source: str) -> None:
    emitted, progress = _keys_emitted(spark, time_source, OUTAGE, 2 * HOUR_MS)
    assert emitted == [["a", "b"], ["c"], ["d"]]  # a, b, c were seen minutes before: dropped
    assert progress["customMetrics"]["ttlExpiredTotal"] == 0 and progress["numRowsRemoved"] == 0


def test_batch_timestamp_expires_everything_in_a_two_hour_outage(spark: SparkSession) -> None:
    emitted, progress = _keys_emitted(spark, "batchTimestamp", OUTAGE, 2 * HOUR_MS)
    assert emitted == [["a", "b"], ["c"], ["a", "b", "c", "d"]]  # duplicates emitted again
    # the TTL removals are in Spark's own numRowsRemoved (dedup itself removes nothing)
    assert progress["customMetrics"]["ttlExpiredTotal"] == 3 and progress["numRowsRemoved"] == 3
    assert progress["numRowsTotal"] == 4


# A backfill: a day of events replayed from the start, batch after batch in seconds, the last
# batch 2 hours after the one before (a slow batch). In event time, a's second event comes
# 3 hours after its first (new again), b's 2 minutes after its first (a duplicate). An entry's
# age counts from the watermark of the batch that wrote it (the event times of the batches
# before it), so y moves the watermark close to b's event time before b is written.
BACKFILL = [[at("z", 0)], [at("a", 1)], [at("a", 31)], [at("y", 179)], [at("b", 180)],
            [at("a", 181), at("b", 182), at("z", 182)]]


def test_backfill_expires_at_data_speed_on_the_watermark(spark: SparkSession) -> None:
    emitted, _ = _keys_emitted(spark, "watermark", BACKFILL, 2 * HOUR_MS)
    # a's duplicate 30 min later is dropped, a is new again 3 h later, b's duplicate is dropped;
    # z, written before the query had a watermark, is kept with that batch's timestamp
    assert emitted == [["z"], ["a"], [], ["y"], ["b"], ["a"]]


def test_backfill_expires_at_processing_speed_on_the_batch_timestamp(spark: SparkSession) -> None:
    emitted, _ = _keys_emitted(spark, "batchTimestamp", BACKFILL, 2 * HOUR_MS)
    assert emitted == [["z"], ["a"], [], ["y"], ["b"], ["a", "b", "z"]]  # b's duplicate emitted again

"""Where "now" comes from.

A store's time for a micro-batch is derived from what the query's offset log says about the
batch (`BatchClock`, read by the shim) and from the time the checkpoint recorded for the
previous version, so a retried or replayed batch sees exactly the time it saw the first time,
and every partition of a batch sees the same time. `store_time` applies the chosen time source
(docs/clocks.md); `WallClock` is the non-deterministic alternative, `ManualClock` is for tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from ttlstate.config.keys import TimeSource


class Clock(Protocol):
    def now_ms(self) -> int: ...


class WallClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock the caller sets: the batch timestamp in production, any value in tests."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = now_ms

    def advance(self, delta_ms: int) -> None:
        self._now += delta_ms


@dataclass(frozen=True)
class BatchClock:
    """What the offset log says about the batch that loads version N: its `batchTimestampMs`,
    its `batchWatermarkMs` (0 until the query has one), and the previous batch's
    `batchTimestampMs` (None when there is no previous batch, or its entry is gone)."""

    timestamp_ms: int
    watermark_ms: int = 0
    previous_timestamp_ms: int | None = None


def store_time(source: TimeSource, batch: BatchClock, previous_time_ms: int | None,
               max_gap_ms: int, wall: Clock) -> int:
    """The store's "now" for the batch.

    `previous_time_ms` is the time the checkpoint recorded for the version being loaded, i.e.
    the store time of the batch before (None for version 0 or an empty store).

    - batchTimestamp: the batch timestamp.
    - watermark: the event-time watermark; before the query's first watermark (Spark reports
      0), the batch timestamp, so entries of the first batch are not expired by the first
      watermark (they may live longer, never shorter).
    - activeTime: the previous version's time plus the gap between the two batch timestamps,
      clamped to [0, max_gap_ms]; the batch timestamp when there is no previous time. With the
      previous batch's entry gone from the offset log no time is added.
    - wallClock: the executor's clock (not deterministic).
    """
    if source is TimeSource.BATCH_TIMESTAMP:
        return batch.timestamp_ms
    if source is TimeSource.WATERMARK:
        return batch.watermark_ms if batch.watermark_ms > 0 else batch.timestamp_ms
    if source is TimeSource.ACTIVE_TIME:
        if previous_time_ms is None:
            return batch.timestamp_ms
        if batch.previous_timestamp_ms is None:
            return previous_time_ms
        gap = batch.timestamp_ms - batch.previous_timestamp_ms
        return previous_time_ms + min(max(gap, 0), max_gap_ms)
    return wall.now_ms()

"""The time of each version of one store: what TTL counts as now for the batch that loads a
version, and the batch time each version was written at (recorded in its checkpoint files).

Which clock now is taken from (`timeSource`) and why is in ttl/clock.py; this part keeps the
per-version record those clocks need (`activeTime` counts from the previous batch's time), and
serves a state reader the time of the batch that wrote a version.
"""

from __future__ import annotations

import logging

from ttlstate.config.keys import TimeSource
from ttlstate.config.store_config import TtlConfig
from ttlstate.ttl.clock import BatchClock, Clock, store_time

log = logging.getLogger(__name__)


class BatchTimes:
    def __init__(self, store_id: str, clock: Clock) -> None:
        self._store_id = store_id
        self.clock = clock
        self._times: dict[int, int | None] = {}
        self._warned_no_watermark = False

    def recorded(self, version: int) -> int | None:
        """The store time of the batch that wrote `version`, once it was loaded or committed
        here; None if unknown."""
        return self._times.get(version)

    def record(self, version: int, time_ms: int | None) -> None:
        self._times[version] = time_ms

    def forget(self, version: int) -> None:
        self._times.pop(version, None)

    def now(self, ttl: TtlConfig, version: int, now_ms: int | None, watermark_ms: int,
            previous_batch_ms: int | None) -> int:
        """The store's time for the batch that loads `version` (ttl/clock.py), from the offset
        log's values for it and the time recorded for `version` (the batch before's); without
        `now_ms`, the store's own clock."""
        if now_ms is None:
            return self.clock.now_ms()
        if (ttl.time_source is TimeSource.WATERMARK and watermark_ms <= 0 and version >= 2
                and not self._warned_no_watermark):
            self._warned_no_watermark = True
            log.warning("ttlstate store %s: timeSource=watermark, but batch %d has no event-time "
                        "watermark yet: TTL counts its batch timestamp until there is one. A query "
                        "without withWatermark never gets one (ttlstate's SQL extension, which "
                        "configure installs, refuses such a query at start)", self._store_id, version)
        return store_time(ttl.time_source, BatchClock(now_ms, watermark_ms, previous_batch_ms),
                          self._times.get(version), ttl.clock_max_gap_ms, self.clock)

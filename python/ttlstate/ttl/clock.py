"""Where "now" comes from.

By default the store's time is the batch timestamp of the micro-batch it serves, given by
the caller, so a retried or replayed batch sees exactly the state it saw the first time.
`WallClock` is the alternative; `ManualClock` is for tests.
"""

from __future__ import annotations

import time
from typing import Protocol


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

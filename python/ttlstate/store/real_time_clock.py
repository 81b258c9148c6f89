"""TTL's "now" inside one long Real-time Mode batch.

A micro-batch's store version is loaded at its batch timestamp and keeps it until commit, so
a replayed batch makes the same expiry decisions. A Real-time Mode batch lasts the whole
checkpoint interval (minutes); with `realTime.clockInterval` set, the shim moves the loaded
version's now forward to its wall clock (OP_SET_TIME) as the batch runs. Time never moves
back: a request below the current now changes nothing.
"""

from __future__ import annotations

from ttlstate.engine.base import Engine
from ttlstate.store.planes.base import StoreVersion


def advance(engine: Engine, store: StoreVersion, now_ms: int) -> int:
    """Moves `store`'s now to `now_ms` if that is later; returns the now TTL uses from here on.

    Entries written before keep their timestamps; reads, refreshes, incremental cleanup and the
    commit's changelog header use the new now, and so does the compaction filter's clock."""
    now = store.advance_now(now_ms)
    engine.set_time(now)
    return now

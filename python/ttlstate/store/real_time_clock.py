"""TTL's "now" inside one long Real-time Mode batch.

A micro-batch's store version is loaded at its batch timestamp and keeps it until commit, so
a replayed batch makes the same expiry decisions. A Real-time Mode batch lasts the whole
checkpoint interval (minutes); with `realTime.clockInterval` set, the shim moves the loaded
version's now forward to its wall clock (OP_SET_TIME) as the batch runs. Time never moves
back: a request below the current now changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ttlstate.store.planes.base import StoreVersion
    from ttlstate.store.provider import StoreProvider


def advance(provider: StoreProvider, store: StoreVersion, now_ms: int) -> int:
    """Moves `store`'s now to `now_ms` if that is later; returns the now TTL uses from here on.

    Entries written before keep their timestamps; reads, refreshes, incremental cleanup and the
    commit's changelog header use the new now, and so does the compaction filter's clock."""
    now = store.advance_now(now_ms)
    provider.engine.set_time(now)
    return now

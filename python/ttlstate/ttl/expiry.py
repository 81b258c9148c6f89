"""Flink's expiry arithmetic (TtlUtils), bit for bit.

`expired iff ts + clamp(ttl) <= now`, where the clamp keeps `ts + ttl` inside int64 for
positive timestamps exactly as `TtlUtils.getExpirationTimestamp` does. The native
compaction filter implements the same two functions in C++; a property test checks that
both agree.
"""

from __future__ import annotations

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


def expiration_timestamp(ts: int, ttl: int) -> int:
    """The first instant at which a value written at `ts` is expired (Flink's clamp)."""
    ttl_without_overflow = min(INT64_MAX - ts, ttl) if ts > 0 else ttl
    return ts + ttl_without_overflow


def is_expired(ts: int, ttl: int, now: int) -> bool:
    """Inclusive boundary: a value is expired at its expiration timestamp."""
    return expiration_timestamp(ts, ttl) <= now

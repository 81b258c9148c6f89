"""The TtlValue layout: 8-byte big-endian signed last-access timestamp (ms), then user bytes.

This is Flink's `TtlSerializer` layout (no header, no length prefix), so the native
compaction filter reads the timestamp at offset 0 exactly as FlinkCompactionFilter does.
"""

from __future__ import annotations

import struct

TIMESTAMP_SIZE = 8
_TS = struct.Struct(">q")


def encode(ts_ms: int, user_value: bytes) -> bytes:
    return _TS.pack(ts_ms) + user_value


def decode(stored: bytes) -> tuple[int, bytes]:
    """Split a stored value into (timestamp, user bytes); refuses values shorter than 8 bytes."""
    if len(stored) < TIMESTAMP_SIZE:
        raise ValueError(f"TtlValue too short: {len(stored)} bytes, need at least {TIMESTAMP_SIZE}")
    return _TS.unpack_from(stored)[0], stored[TIMESTAMP_SIZE:]


def timestamp(stored: bytes) -> int:
    return _TS.unpack_from(stored)[0]


def with_timestamp(stored: bytes, ts_ms: int) -> bytes:
    """Same user bytes, new last-access time (OnReadAndWrite refresh)."""
    return _TS.pack(ts_ms) + stored[TIMESTAMP_SIZE:]

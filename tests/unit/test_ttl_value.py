"""The TtlValue layout: 8-byte big-endian signed timestamp, then the user bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttlstate.ttl import ttl_value


def test_layout_is_big_endian_signed_then_user_bytes() -> None:
    assert ttl_value.encode(1, b"ab") == b"\x00" * 7 + b"\x01ab"
    assert ttl_value.encode(-1, b"") == b"\xff" * 8
    assert ttl_value.encode(0x0102030405060708, b"x")[:8] == bytes(range(1, 9))


def test_too_short_is_refused() -> None:
    with pytest.raises(ValueError, match="too short"):
        ttl_value.decode(b"\x00" * 7)


@given(ts=st.integers(-(2**63), 2**63 - 1), user=st.binary(), new_ts=st.integers(-(2**63), 2**63 - 1))
def test_round_trip_and_refresh(ts: int, user: bytes, new_ts: int) -> None:
    stored = ttl_value.encode(ts, user)
    assert ttl_value.decode(stored) == (ts, user)
    assert ttl_value.timestamp(stored) == ts
    assert ttl_value.decode(ttl_value.with_timestamp(stored, new_ts)) == (new_ts, user)

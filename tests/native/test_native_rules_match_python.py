"""The TTL rules and the TtlValue layout exist once per language: C++ (the compaction filter and
the native read path) against Python (the reference data plane), on generated cases including
the inclusive boundary, Flink's overflow clamp and negative timestamps."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ttlstate import _native
from ttlstate.ttl import ttl_value
from ttlstate.ttl.expiry import is_expired

I64 = st.integers(-(2**63), 2**63 - 1)
TTL = st.integers(1, 2**63 - 1)
MAX = 2**63 - 1


@settings(max_examples=500, deadline=None)
@given(ts=I64, ttl=TTL, now=I64)
@example(ts=1000, ttl=100, now=1100)      # the boundary is inclusive: expired
@example(ts=1000, ttl=100, now=1099)
@example(ts=MAX - 5, ttl=100, now=MAX)    # overflow: clamped to MAX, expired at MAX
@example(ts=MAX - 5, ttl=100, now=MAX - 1)
@example(ts=-5, ttl=MAX, now=MAX)         # negative timestamps are not clamped
def test_expiry_rule_is_the_same(ts: int, ttl: int, now: int) -> None:
    assert _native.is_expired(ts, ttl, now) == is_expired(ts, ttl, now)


@settings(max_examples=200, deadline=None)
@given(ts=I64, user=st.binary(max_size=64))
def test_ttl_value_layout_is_the_same(ts: int, user: bytes) -> None:
    assert _native.encode_ttl_value(ts, user) == ttl_value.encode(ts, user)

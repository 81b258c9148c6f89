"""Flink's expiry arithmetic at the boundaries, and against exact big-integer math."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ttlstate.ttl.expiry import INT64_MAX, INT64_MIN, expiration_timestamp, is_expired

INT64 = st.integers(INT64_MIN, INT64_MAX)


def test_boundary_is_inclusive() -> None:
    assert is_expired(1000, 100, 1100)
    assert not is_expired(1000, 100, 1099)


def test_no_overflow_near_int64_max() -> None:
    assert expiration_timestamp(INT64_MAX - 10, 100) == INT64_MAX
    assert not is_expired(INT64_MAX - 10, 100, INT64_MAX - 1)
    assert is_expired(INT64_MAX - 10, 100, INT64_MAX)
    assert expiration_timestamp(INT64_MAX, INT64_MAX) == INT64_MAX


def test_ttl_max_never_expires_before_int64_max() -> None:
    assert expiration_timestamp(10, INT64_MAX) == INT64_MAX
    assert not is_expired(10, INT64_MAX, INT64_MAX - 1)


def test_negative_and_zero_timestamps_use_the_ttl_unclamped() -> None:
    assert expiration_timestamp(-5, 100) == 95
    assert expiration_timestamp(0, 100) == 100
    assert expiration_timestamp(INT64_MIN, 100) == INT64_MIN + 100
    assert is_expired(INT64_MIN, 100, 0)


@given(ts=INT64, ttl=st.integers(1, INT64_MAX), now=INT64)
def test_matches_flink_clamp_with_exact_integers(ts: int, ttl: int, now: int) -> None:
    clamped = min(INT64_MAX - ts, ttl) if ts > 0 else ttl
    exact = ts + clamped
    assert INT64_MIN <= exact <= INT64_MAX  # the clamp keeps it inside int64
    assert expiration_timestamp(ts, ttl) == exact
    assert is_expired(ts, ttl, now) == (exact <= now)

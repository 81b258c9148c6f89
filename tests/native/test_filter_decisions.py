"""The compaction filter's decisions, one filter instance at a time (no real compaction).

Rows follow the reference's decision table (FlinkCompactionFilter, §2.4-2.7).
"""

from __future__ import annotations

import struct

import pytest

from ttlstate import _native as N

TTL = 100
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def ts(t: int) -> bytes:
    return struct.pack(">q", t)


def value_filter(now: int, n: int = 1, ttl: int = TTL, offset: int = 0) -> N.FilterHarness:
    h = N.FilterHarness()
    assert h.configure(N.STATE_VALUE, offset, ttl, n)
    h.set_time(now)
    return h


def fixed(*stamps: int, elem: bytes = b"abcd") -> bytes:
    """Flink list layout: [ts][elem] joined by ','."""
    return b",".join(ts(t) + elem for t in stamps)


def var(*items: tuple[int, bytes]) -> bytes:
    """ttlstate list layout: [u32 n][ts][payload] per element, n = 8 + len(payload)."""
    return b"".join(struct.pack(">I", 8 + len(p)) + ts(t) + p for t, p in items)


def fixed_list_filter(now: int) -> N.FilterHarness:
    h = N.FilterHarness()
    assert h.configure(N.STATE_LIST, 0, TTL, 1, fixed_element_length=len(ts(0) + b"abcd") + 1)
    h.set_time(now)
    return h


def var_list_filter(now: int) -> N.FilterHarness:
    h = N.FilterHarness()
    assert h.configure(N.STATE_LIST, 4, TTL, 1, variable_length_list=True)
    h.set_time(now)
    return h


# -- value state ------------------------------------------------------------------------------
def test_expiry_boundary_is_inclusive() -> None:
    h = value_filter(now=1100)
    assert h.decide(N.VALUE, ts(1000) + b"v") == (N.REMOVE, None)  # 1000 + 100 == now
    assert h.decide(N.VALUE, ts(1001) + b"v") == (N.KEEP, None)
    h.set_time(1099)
    h.new_run()
    assert h.decide(N.VALUE, ts(1000) + b"v") == (N.KEEP, None)


def test_too_short_values_are_kept() -> None:
    h = value_filter(now=INT64_MAX)
    for short in (b"", b"\x00" * 7):
        assert h.decide(N.VALUE, short) == (N.KEEP, None)
    assert h.decide(N.VALUE, ts(0)) == (N.REMOVE, None)  # exactly 8 bytes is parsed


def test_merge_operands_and_blob_indexes_are_kept_for_value_state() -> None:
    h = value_filter(now=10_000)
    assert h.decide(N.MERGE_OPERAND, ts(0) + b"v") == (N.KEEP, None)
    assert h.decide(N.BLOB_INDEX, ts(0) + b"v") == (N.KEEP, None)
    assert h.decide(N.VALUE, ts(0) + b"v") == (N.REMOVE, None)


def test_unconfigured_filter_keeps_everything() -> None:
    h = N.FilterHarness()
    h.set_time(INT64_MAX)
    assert h.decide(N.VALUE, ts(INT64_MIN) + b"v") == (N.KEEP, None)


def test_map_layout_reads_the_timestamp_at_offset_one() -> None:
    h = value_filter(now=1100, offset=1)
    assert h.decide(N.VALUE, b"\x00" + ts(1000) + b"v") == (N.REMOVE, None)
    assert h.decide(N.VALUE, b"\x00" + ts(1050) + b"v") == (N.KEEP, None)
    assert h.decide(N.VALUE, b"\x00" + ts(1000)[:7]) == (N.KEEP, None)  # 8 < offset + 8


@pytest.mark.parametrize(("stamp", "ttl", "now", "expired"), [
    (INT64_MAX - 10, 100, INT64_MAX - 1, False),   # clamp: expires at INT64_MAX only
    (INT64_MAX - 10, 100, INT64_MAX, True),
    (10, INT64_MAX, INT64_MAX - 1, False),          # ttl = max: never before INT64_MAX
    (10, INT64_MAX, INT64_MAX, True),
    (-5, 100, 94, False),                           # negative ts: ttl unclamped, expires at 95
    (-5, 100, 95, True),
    (INT64_MIN, 100, INT64_MIN + 100, True),
    (INT64_MIN, 100, INT64_MIN + 99, False),
    (0, 100, 100, True),
])
def test_overflow_clamp_and_negative_timestamps(stamp: int, ttl: int, now: int, expired: bool) -> None:
    h = value_filter(now=now, ttl=ttl)
    assert h.decide(N.VALUE, ts(stamp)) == ((N.REMOVE if expired else N.KEEP), None)


# -- time cache ------------------------------------------------------------------------------
def test_time_is_queried_at_calls_1_11_21_with_n_10() -> None:
    h = value_filter(now=1000, n=10)
    queried_at, decisions = [], []
    for call in range(1, 26):
        before = h.time_queries
        h.set_time(1000 + call)  # a new time before every call; the filter sees it only on a query
        decision, _ = h.decide(N.VALUE, ts(1000 + call - TTL))  # expired iff filter time >= 1000 + call
        decisions.append(decision)
        if h.time_queries > before:
            queried_at.append(call)
    assert queried_at == [1, 11, 21]
    # A query sees the new time (the entry expiring exactly then is removed); between queries
    # the cached time is stale, so the same kind of entry is kept.
    assert [decisions[c - 1] for c in (1, 11, 21)] == [N.REMOVE] * 3
    assert decisions[1] == decisions[9] == decisions[11] == N.KEEP


def test_every_call_counts_even_skipped_entries() -> None:
    h = value_filter(now=0, n=3)
    h.decide(N.VALUE, b"")               # too short: counts
    h.decide(N.MERGE_OPERAND, ts(0))     # not filtered: counts
    h.decide(N.BLOB_INDEX, ts(0))        # counts
    assert h.time_queries == 1
    h.decide(N.VALUE, ts(0))
    assert h.time_queries == 2


def test_each_run_queries_time_on_its_first_entry() -> None:
    h = value_filter(now=0, n=1000)
    h.decide(N.VALUE, ts(0))
    h.new_run()
    h.decide(N.VALUE, ts(0))
    assert h.time_queries == 2


def test_n_zero_and_one_query_every_entry() -> None:
    for n in (0, 1):
        h = value_filter(now=0, n=n)
        for _ in range(5):
            h.decide(N.VALUE, ts(0))
        assert h.time_queries == 5


# -- one-shot configuration ------------------------------------------------------------------
def test_configuration_is_one_shot() -> None:
    h = N.FilterHarness()
    assert h.configure(N.STATE_VALUE, 0, TTL, 1)
    assert not h.configure(N.STATE_VALUE, 0, 10**9, 1)  # refused: the first config stays
    h.set_time(1100)
    assert h.decide(N.VALUE, ts(1000)) == (N.REMOVE, None)


def test_filter_created_before_configuration_picks_it_up_lazily() -> None:
    h = N.FilterHarness()  # the run's filter exists already
    h.set_time(1100)
    assert h.decide(N.VALUE, ts(1000)) == (N.KEEP, None)  # disabled
    assert h.configure(N.STATE_VALUE, 0, TTL, 1)
    assert h.decide(N.VALUE, ts(1000)) == (N.REMOVE, None)


def test_cached_disabled_phase_time_carries_into_configured_phase() -> None:
    """Upstream's CachedTimeUpdate: the counter keeps running across configuration."""
    h = N.FilterHarness()
    h.set_time(1100)
    h.decide(N.VALUE, ts(0))  # disabled; first call queries time (1100)
    assert h.configure(N.STATE_VALUE, 0, TTL, 3)
    h.set_time(2000)
    assert h.decide(N.VALUE, ts(1000)) == (N.REMOVE, None)  # counter 1 -> 2: cached 1100
    assert h.decide(N.VALUE, ts(1050)) == (N.KEEP, None)    # counter 2 -> 3: still 1100
    assert h.time_queries == 1
    assert h.decide(N.VALUE, ts(1050)) == (N.REMOVE, None)  # counter 3 >= 3: query -> 2000
    assert h.time_queries == 2


# -- lists -----------------------------------------------------------------------------------
LIST_CASES = [
    # (first-element stamps..., expected decision, expected surviving stamps)
    ((2000, 2000), N.KEEP, None),               # none expired
    ((0, 0, 0), N.REMOVE, None),                # all expired
    ((0, 0, 2000, 2000), N.CHANGE_VALUE, (2000, 2000)),  # expired prefix
    ((2000, 0, 2000), N.KEEP, None),            # prefix-only: later expired elements stay
    ((0,), N.REMOVE, None),
]


@pytest.mark.parametrize("value_type", [N.VALUE, N.MERGE_OPERAND])
@pytest.mark.parametrize(("stamps", "decision", "survivors"), LIST_CASES)
def test_fixed_length_lists(value_type: int, stamps: tuple, decision: int, survivors: tuple | None) -> None:
    h = fixed_list_filter(now=1000)
    got, new = h.decide(value_type, fixed(*stamps))
    assert got == decision
    assert new == (fixed(*survivors) if survivors else None)


@pytest.mark.parametrize("value_type", [N.VALUE, N.MERGE_OPERAND])
@pytest.mark.parametrize(("stamps", "decision", "survivors"), LIST_CASES)
def test_variable_length_lists(value_type: int, stamps: tuple, decision: int,
                               survivors: tuple | None) -> None:
    payloads = [b"x" * (3 * i + 1) for i in range(len(stamps))]  # different lengths
    h = var_list_filter(now=1000)
    got, new = h.decide(value_type, var(*zip(stamps, payloads, strict=True)))
    assert got == decision
    if survivors:
        k = len(stamps) - len(survivors)
        assert new == var(*zip(stamps[k:], payloads[k:], strict=True))
    else:
        assert new is None


def test_fixed_list_partial_trailing_element_is_kept_not_overread() -> None:
    h = fixed_list_filter(now=1000)
    # two expired whole elements, then a trailing fragment shorter than a timestamp
    value = fixed(0, 0) + b"," + ts(0)[:5]
    assert h.decide(N.VALUE, value) == (N.KEEP, None)


def test_variable_list_truncated_element_is_kept() -> None:
    h = var_list_filter(now=1000)
    value = var((0, b"abc")) + struct.pack(">I", 100) + ts(0)  # claims 100 bytes, has 8
    assert h.decide(N.VALUE, value) == (N.KEEP, None)
    assert h.decide(N.VALUE, var((0, b"abc")) + b"\x00\x00") == (N.KEEP, None)


def test_list_without_element_filter_falls_back_to_first_element() -> None:
    h = N.FilterHarness()
    assert h.configure(N.STATE_LIST, 0, TTL, 1)  # neither fixed nor variable
    h.set_time(1000)
    assert h.decide(N.VALUE, fixed(0, 2000)) == (N.REMOVE, None)
    assert h.decide(N.VALUE, fixed(2000, 0)) == (N.KEEP, None)


def test_empty_list_value_is_kept() -> None:
    assert fixed_list_filter(now=1000).decide(N.VALUE, b"") == (N.KEEP, None)

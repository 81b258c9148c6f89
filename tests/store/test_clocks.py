"""The time sources a store's TTL counts (docs/clocks.md), on a provider: the same batch
always gets the same time (retry, restart from the checkpoint), and an outage or a fast replay
expires what the chosen clock says, not what the wall clock says."""

from __future__ import annotations

import pytest

from ttlstate.config.keys import TimeSource
from ttlstate.config.store_config import IncrementalCleanup, TtlConfig
from ttlstate.ttl.clock import BatchClock, ManualClock, store_time

HOUR = 3_600_000
MINUTE = 60_000
T0 = 1_790_000_000_000  # a batch timestamp in 2026


def test_store_time_of_each_source() -> None:
    wall = ManualClock(42)
    b = BatchClock(T0 + 2 * HOUR, watermark_ms=T0 - HOUR, previous_timestamp_ms=T0)
    assert store_time(TimeSource.BATCH_TIMESTAMP, b, T0, 10 * MINUTE, wall) == T0 + 2 * HOUR
    assert store_time(TimeSource.WATERMARK, b, T0, 10 * MINUTE, wall) == T0 - HOUR
    assert store_time(TimeSource.ACTIVE_TIME, b, T0 - 5, 10 * MINUTE, wall) == T0 - 5 + 10 * MINUTE
    assert store_time(TimeSource.WALL_CLOCK, b, T0, 10 * MINUTE, wall) == 42


def test_active_time_counts_short_gaps_in_full_and_never_goes_back() -> None:
    wall = ManualClock(0)
    short = BatchClock(T0 + 30_000, previous_timestamp_ms=T0)
    assert store_time(TimeSource.ACTIVE_TIME, short, 5_000, 10 * MINUTE, wall) == 35_000
    backwards = BatchClock(T0 - 30_000, previous_timestamp_ms=T0)  # a clock set back between batches
    assert store_time(TimeSource.ACTIVE_TIME, backwards, 5_000, 10 * MINUTE, wall) == 5_000
    first = BatchClock(T0)  # version 0 (or an empty store): the chain starts at the batch timestamp
    assert store_time(TimeSource.ACTIVE_TIME, first, None, 10 * MINUTE, wall) == T0
    purged = BatchClock(T0 + HOUR, previous_timestamp_ms=None)  # the previous offset entry is gone
    assert store_time(TimeSource.ACTIVE_TIME, purged, 7, 10 * MINUTE, wall) == 7


def test_watermark_before_the_first_one_is_the_batch_timestamp() -> None:
    """Spark's watermark is 0 until the first batch with event times ends: entries of that batch
    are stamped with its timestamp, so the first watermark does not expire them at once."""
    assert store_time(TimeSource.WATERMARK, BatchClock(T0, 0), None, MINUTE, ManualClock(1)) == T0


def _dedup_batch(p, version: int, keys: str, **clock) -> list[str]:  # noqa: ANN001, ANN003
    """One dedup batch: the keys the store did not have (emitted), each then put."""
    s = p.get_store(version, **clock)
    new = [k for k in keys if s.get(k.encode()) is None]
    for k in new:
        s.put(k.encode(), b"1")
    s.commit()
    return new


@pytest.mark.parametrize("source", [TimeSource.ACTIVE_TIME, TimeSource.BATCH_TIMESTAMP])
def test_a_two_hour_outage_expires_nothing_on_active_time_and_everything_on_batch_timestamp(
        make_provider, source: TimeSource) -> None:  # noqa: ANN001
    ttl = TtlConfig(ttl_ms=HOUR, time_source=source, clock_max_gap_ms=10 * MINUTE,
                    incremental=IncrementalCleanup(size=100))
    p = make_provider(ttl)
    t = [T0, T0 + MINUTE, T0 + MINUTE + 2 * HOUR]  # batch 2 runs after a 2-hour outage
    assert _dedup_batch(p, 0, "ab", now_ms=t[0]) == ["a", "b"]
    assert _dedup_batch(p, 1, "c", now_ms=t[1], previous_batch_ms=t[0]) == ["c"]
    # the query restarts: a new provider rebuilds the versions from the checkpoint
    restarted = make_provider(ttl)
    emitted = _dedup_batch(restarted, 2, "abc", now_ms=t[2], previous_batch_ms=t[1])
    if source is TimeSource.ACTIVE_TIME:
        assert emitted == []  # 1 min + at most 10 min of outage: all still within the TTL
        assert restarted.get_store(3, now_ms=t[2] + 1).now_ms == T0 + MINUTE + 10 * MINUTE
    else:
        assert emitted == ["a", "b", "c"]  # the outage expired everything: duplicates again


def test_active_time_is_the_same_for_a_retried_batch_and_for_every_partition(make_provider) -> None:  # noqa: ANN001
    ttl = TtlConfig(ttl_ms=HOUR, time_source=TimeSource.ACTIVE_TIME, clock_max_gap_ms=10 * MINUTE)
    t = [T0, T0 + 3 * HOUR, T0 + 3 * HOUR + 20_000]
    partitions = [make_provider(ttl, local=f"p{i}") for i in range(2)]
    times = []
    for p in partitions:
        for v in range(2):
            p.get_store(v, now_ms=t[v], previous_batch_ms=t[v - 1] if v else None).commit()
        first = p.get_store(2, now_ms=t[2], previous_batch_ms=t[1])
        first.abort()  # the task failed: Spark retries the batch
        retried = p.get_store(2, now_ms=t[2], previous_batch_ms=t[1])
        times.append((first.now_ms, retried.now_ms))
        retried.abort()
    rebuilt = make_provider(ttl, local="rebuilt").get_store(2, now_ms=t[2], previous_batch_ms=t[1])
    expected = T0 + 10 * MINUTE + 20_000
    assert times == [(expected, expected)] * 2 and rebuilt.now_ms == expected


@pytest.mark.parametrize("source", [TimeSource.WATERMARK, TimeSource.BATCH_TIMESTAMP])
def test_a_fast_replay_expires_at_data_speed_on_the_watermark(make_provider, source: TimeSource) -> None:  # noqa: ANN001
    """A backfill replays a day of events in seconds: with the watermark, a key expires after an
    hour of event time, as it did live; with the batch timestamp it never does."""
    ttl = TtlConfig(ttl_ms=HOUR, time_source=source, incremental=IncrementalCleanup(size=100))
    p = make_provider(ttl)
    day = T0 - 86_400_000  # the events' day; the backfill runs now, a second per batch
    batches = [("z", 0), ("a", day), ("a", day + 30 * MINUTE), ("a", day + 3 * HOUR), ("z", day + 4 * HOUR)]
    emitted = [_dedup_batch(p, v, k, now_ms=T0 + v * 1000, watermark_ms=wm, previous_batch_ms=None)
               for v, (k, wm) in enumerate(batches)]
    if source is TimeSource.WATERMARK:
        # a's duplicate within the hour is dropped and a is new again 3 h of event time later;
        # z of the first batch (no watermark yet) keeps its batch timestamp: kept, never early
        assert emitted == [["z"], ["a"], [], ["a"], []]
    else:
        assert emitted == [["z"], ["a"], [], [], []]


def test_watermark_source_without_a_watermark_warns_once(make_provider, caplog) -> None:  # noqa: ANN001
    """Without the start checks (no SQL extension), a query without withWatermark reaches the
    store: it says so in the executor's log instead of silently counting processing time."""
    p = make_provider(TtlConfig(ttl_ms=HOUR, time_source=TimeSource.WATERMARK))
    with caplog.at_level("WARNING", logger="ttlstate.store.batch_times"):
        for v in range(4):
            s = p.get_store(v, now_ms=T0 + v, watermark_ms=0)
            assert s.now_ms == T0 + v
            s.commit()
    warnings = [r for r in caplog.records if "no event-time watermark" in r.getMessage()]
    assert len(warnings) == 1 and "batch 2" in warnings[0].getMessage()

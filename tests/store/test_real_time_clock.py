"""TTL's now inside one long Real-time batch (`real_time_clock.advance`, OP_SET_TIME): it moves
the loaded version's now forward only, on both data planes."""

from __future__ import annotations

from ttlstate.config.keys import UpdateType
from ttlstate.config.store_config import TtlConfig
from ttlstate.store import real_time_clock


def test_now_advances_inside_a_version_and_never_back(make_provider) -> None:  # noqa: ANN001
    p = make_provider(TtlConfig(ttl_ms=100))
    s = p.get_store(0, now_ms=1000)
    s.put(b"a", b"1")                                  # stamped 1000
    assert real_time_clock.advance(p.engine, s, 1099) == 1099
    assert s.get(b"a") == b"1"                         # expires at 1100 (inclusive)
    s.put(b"b", b"2")                                  # stamped 1099
    assert real_time_clock.advance(p.engine, s, 1100) == 1100
    assert s.get(b"a") is None                         # a pending put expires too
    assert real_time_clock.advance(p.engine, s, 1050) == 1100  # never back
    assert s.get(b"b") == b"2"
    s.commit()
    s = p.get_store(1, now_ms=1150)
    assert s.get(b"b") == b"2" and s.get(b"a") is None
    assert real_time_clock.advance(p.engine, s, 1199) == 1199
    assert s.get(b"b") is None


def test_on_read_and_write_refreshes_at_the_advanced_now(make_provider) -> None:  # noqa: ANN001
    p = make_provider(TtlConfig(ttl_ms=100, update_type=UpdateType.ON_READ_AND_WRITE))
    s = p.get_store(0, now_ms=1000)
    s.put(b"a", b"1")
    s.commit()
    s = p.get_store(1, now_ms=1000)
    real_time_clock.advance(p.engine, s, 1090)
    assert s.get_entry(b"a") == (b"1", 1090)           # the read refreshed it to the new now
    real_time_clock.advance(p.engine, s, 1180)
    assert s.get(b"a") == b"1"                         # 1090 + 100 > 1180

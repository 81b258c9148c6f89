"""A restart with other TTL settings than the checkpoint's: one WARN saying what follows."""

from __future__ import annotations

import logging

import pytest

from ttlstate.checkpoint.errors import VersionNotFound
from ttlstate.config.keys import StateVisibility, UpdateType
from ttlstate.config.store_config import TtlConfig
from ttlstate.store import recorded_settings
from ttlstate.store.recorded_settings import describe_changes, settings_of

HOUR = 3_600_000


def test_describe_changes_names_old_new_and_the_consequence() -> None:
    old = settings_of(TtlConfig(ttl_ms=HOUR))
    assert describe_changes(old, settings_of(TtlConfig(ttl_ms=HOUR))) == []
    assert describe_changes(old, settings_of(TtlConfig(ttl_ms=2000))) == [
        "TTL 1h -> 2s: entries not accessed for 2s expire at the next batch"]
    off = describe_changes(old, settings_of(TtlConfig()))
    assert off and off[0].startswith("TTL 1h -> off") and "do not come back" in off[0]
    longer = describe_changes(old, settings_of(TtlConfig(ttl_ms=2 * HOUR)))
    assert longer[0].startswith("TTL 1h -> 2h") and "already removed do not come back" in longer[0]
    other = describe_changes(old, settings_of(TtlConfig(
        ttl_ms=HOUR, update_type=UpdateType.ON_READ_AND_WRITE,
        visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP)))
    assert [c.split(":")[0] for c in other] == [
        "updateType OnCreateAndWrite -> OnReadAndWrite",
        "stateVisibility NeverReturnExpired -> ReturnExpiredIfNotCleanedUp"]
    assert describe_changes({}, settings_of(TtlConfig(ttl_ms=5))) == []  # nothing recorded


def test_restart_with_a_shorter_ttl_warns_once_per_operator(make_provider, caplog) -> None:  # noqa: ANN001
    recorded_settings._warned.clear()
    p = make_provider(TtlConfig(ttl_ms=HOUR))
    s = p.get_store(0, now_ms=1000)
    s.put(b"k", b"v")
    s.commit()
    with caplog.at_level(logging.WARNING):
        make_provider(TtlConfig(ttl_ms=HOUR)).get_store(1, now_ms=1000).release()
        assert "differ" not in caplog.text
        for _ in range(2):  # two partitions' stores of one operator: one line
            make_provider(TtlConfig(ttl_ms=2000)).get_store(1, now_ms=1000).release()
    warnings = [r.getMessage() for r in caplog.records if "differ from those" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "TTL 1h -> 2s: entries not accessed for 2s expire at the next batch" in warnings[0]


def test_checkpoint_errors_name_the_full_path(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    s = p.get_store(0)
    s.put(b"k", b"v")
    s.commit()
    with pytest.raises(VersionNotFound) as e:
        make_provider().get_store(2)
    assert p.checkpoint.describe("2.changelog") in str(e.value)

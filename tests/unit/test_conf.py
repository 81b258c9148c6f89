"""Conf parsing: every key refuses bad values with a message naming key, value and allowed."""

from __future__ import annotations

import pytest

from ttlstate.config import keys as K
from ttlstate.config.keys import EngineKind, StateVisibility, TimeSource, UpdateType
from ttlstate.config.parse import ConfError, format_duration_ms, parse_duration_ms
from ttlstate.config.store_config import store_config_from_confs

BAD = {
    K.TTL: "soon", K.UPDATE_TYPE: "OnRead", K.STATE_VISIBILITY: "Sometimes", K.TIME_SOURCE: "sundial",
    K.FULL_SNAPSHOT: "maybe", K.INCREMENTAL_SIZE: "-1", K.INCREMENTAL_PER_RECORD: "2",
    K.READER_INCLUDE_EXPIRED: "maybe", K.CHECKPOINT_LOCAL_FILES: "yes please",
    K.SNAPSHOT_READ_IN_PLACE: "sometimes",
    K.SNAPSHOT_AFTER_COMMIT: "later", K.SNAPSHOT_LOCAL_MAX_BYTES: "-1g", K.SNAPSHOT_LOCAL_FILL: "gradually",
    K.FILTER_ENABLED: "yesno", K.FILTER_QUERY_TIME_AFTER: "many", K.FILTER_PERIODIC_COMPACTION: "1x",
    K.FILTER_COMPACT_EVERY: "-3",
    K.ENGINE: "leveldb", K.SNAPSHOT_INTERVAL: "0", K.SNAPSHOT_LAYOUT: "zip", K.WORKERS: "-2",
    K.WRITE_BATCH_SIZE: "10",
    K.KEY_FILTER_MAX_KEYS: "lots", K.KEY_FILTER_MAX_BYTES: "-1", K.MEMORY_MAX_BYTES: "1m",
    K.READ_AHEAD_CHUNK_ROWS: "-1",
    K.MEMORY_WRITE_BUFFER_RATIO: "1.5", K.CACHE_MAX_BYTES: "lots", K.REQUEST_TIMEOUT: "500ms",
    K.CLOCK_MAX_GAP: "500ms",
    K.REAL_TIME_CLOCK_INTERVAL: "5ms", K.REPAIR_MAX_REPLAY: "-1", K.TRANSFORM_WITH_STATE: "flink",
}


@pytest.mark.parametrize("key", list(BAD), ids=lambda k: k.suffix)
def test_bad_values_name_key_value_and_allowed(key: K.ConfKey) -> None:
    with pytest.raises(ConfError) as e:
        store_config_from_confs({key.key: BAD[key]})
    msg = str(e.value)
    assert key.key in msg and repr(BAD[key]) in msg and "allowed" in msg


def test_every_validated_key_has_a_bad_value_case() -> None:
    not_validated = {K.PYTHON, K.LOCAL_MODE_PYTHON,  # free-form paths; pattern keys tested below
                     K.OPERATOR_TTL, K.OPERATOR_NAME_TTL}
    assert set(K.ALL_KEYS) - not_validated == set(BAD)


@pytest.mark.parametrize(("text", "n"), [("64m", 64 << 20), ("2g", 2 << 30), ("20000000", 20_000_000),
                                        (" 512 MB ", 512 << 20)])
def test_sizes(text: str, n: int) -> None:
    assert store_config_from_confs({K.MEMORY_MAX_BYTES.key: text}).memory.max_bytes == n


@pytest.mark.parametrize(("text", "ms"), [
    ("500ms", 500), ("10s", 10_000), ("30m", 1_800_000), ("30min", 1_800_000), ("1h", 3_600_000),
    ("2d", 172_800_000), (" 5 S ", 5000),
    # Spark's interval syntax, as withWatermark and triggers take it, and fractions
    ("5 seconds", 5000), ("1 second", 1000), ("10 minutes", 600_000), ("10 minute", 600_000),
    ("1 hour", 3_600_000), ("2 hours", 7_200_000), ("1.5h", 5_400_000), ("1.5 hours", 5_400_000),
    ("interval 5 minutes", 300_000), ("INTERVAL 1 hour 30 minutes", 5_400_000), ("1h30m", 5_400_000),
    ("2 days", 172_800_000), ("1 week", 604_800_000), ("500 milliseconds", 500),
    ("1500 microseconds", 1), ("1.0005 seconds", 1000), ("+5 seconds", 5000), (".5h", 1_800_000),
])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms("k", text) == ms


@pytest.mark.parametrize(("text", "says"), [
    ("5 parsecs", "unit 'parsecs' is not one"), ("10 minutess", "did you mean 'minutes'?"),
    ("1 month", "a month has no fixed length"), ("-5 seconds", "not negative"),
    ("1 hour, 30 minutes", "interval 1 hour 30 minutes"), ("0s", "at least 1ms"),
])
def test_a_duration_that_is_not_one_says_why_and_never_that_it_is_a_bare_number(text: str, says: str) -> None:
    with pytest.raises(ConfError) as e:
        parse_duration_ms("k", text)
    assert says in str(e.value) and "bare number" not in str(e.value)


@pytest.mark.parametrize("text", ["5", "5.5", " 30 "])
def test_only_a_bare_number_is_called_one(text: str) -> None:
    with pytest.raises(ConfError, match="a bare number has no unit: write '"):
        parse_duration_ms("k", text)


DURATION_KEYS = [K.TTL, K.CLOCK_MAX_GAP, K.FILTER_PERIODIC_COMPACTION, K.REQUEST_TIMEOUT]


@pytest.mark.parametrize("key", DURATION_KEYS, ids=lambda k: k.suffix)
def test_a_bare_number_for_a_duration_key_is_refused_naming_key_value_and_the_fix(key: K.ConfKey) -> None:
    """`spark.conf.set(ttl, "5")` must not silently mean 5 ms: no duration key takes a number
    without its unit (the state server and the start checks both run this validation)."""
    with pytest.raises(ConfError) as e:
        store_config_from_confs({key.key: "5"})
    msg = str(e.value)
    assert key.key in msg and "'5'" in msg and "'5s', '5m' or '5ms'" in msg and "unit" in msg
    with pytest.raises(ConfError, match=key.suffix.replace(".", "\\.")):
        store_config_from_confs({K.operator_ttl_key(1) if key is K.TTL else key.key: "3600000"})


def test_zero_stays_a_bare_number_where_it_means_off() -> None:
    cfg = store_config_from_confs({K.TTL.key: "1h", K.FILTER_PERIODIC_COMPACTION.key: "0"})
    assert cfg.ttl.compaction_filter is not None and cfg.ttl.compaction_filter.periodic_compaction_ms == 0


def test_clock_max_gap_and_time_sources() -> None:
    cfg = store_config_from_confs({K.TIME_SOURCE.key: "ActiveTime", K.CLOCK_MAX_GAP.key: "2m"})
    assert cfg.ttl.time_source is TimeSource.ACTIVE_TIME and cfg.ttl.clock_max_gap_ms == 120_000
    assert store_config_from_confs({}).ttl.clock_max_gap_ms == 600_000
    assert store_config_from_confs({K.TIME_SOURCE.key: "watermark"}).ttl.time_source is TimeSource.WATERMARK


def test_zero_ttl_is_refused_and_off_disables() -> None:
    with pytest.raises(ConfError):
        store_config_from_confs({K.TTL.key: "0"})
    assert store_config_from_confs({K.TTL.key: "off"}).ttl.ttl_ms is None
    assert store_config_from_confs({}).ttl.ttl_ms is None


def test_enums_are_case_insensitive_and_defaults_hold() -> None:
    cfg = store_config_from_confs({
        K.TTL.key: "1h", K.UPDATE_TYPE.key: "onreadandwrite",
        K.STATE_VISIBILITY.key: "RETURNEXPIREDIFNOTCLEANEDUP", K.TIME_SOURCE.key: "WallClock",
        K.ENGINE.key: "AUTO"})
    assert cfg.ttl.update_type is UpdateType.ON_READ_AND_WRITE
    assert cfg.ttl.visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP
    assert cfg.ttl.time_source is TimeSource.WALL_CLOCK and cfg.engine is EngineKind.AUTO
    default = store_config_from_confs({K.TTL.key: "1h"})
    assert default.ttl.update_type is UpdateType.ON_CREATE_AND_WRITE
    assert default.ttl.visibility is StateVisibility.NEVER_RETURN_EXPIRED
    assert default.ttl.compaction_filter is not None and default.engine is EngineKind.NATIVE


def test_unknown_key_under_the_prefix_is_refused_others_ignored() -> None:
    with pytest.raises(ConfError, match="ttlstate.tll"):
        store_config_from_confs({K.PREFIX + "tll": "1h"})
    store_config_from_confs({"spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "true"})


def test_per_operator_ttl_override() -> None:
    confs = {K.TTL.key: "1h", K.operator_ttl_key(3): "10s", K.operator_ttl_key(4): "off"}
    assert store_config_from_confs(confs, operator_id=3).ttl.ttl_ms == 10_000
    assert store_config_from_confs(confs, operator_id=4).ttl.ttl_ms is None
    assert store_config_from_confs(confs, operator_id=5).ttl.ttl_ms == 3_600_000
    with pytest.raises(ConfError, match=r"operator\.7\.ttl"):
        store_config_from_confs({K.operator_ttl_key(7): "later"}, operator_id=1)


QUERY = {0: "stateStoreSave", 1: "dedupe", 2: "symmetricHashJoin"}  # a query's operators by id


def test_operator_ttl_by_name_as_progress_shows_it() -> None:
    """`operator.<name>.ttl` applies to the operators of that name (names from the checkpoint's
    state metadata); an id key beats it, and it beats the global ttl. The config says which key
    its TTL comes from (the server logs it)."""
    confs = {K.TTL.key: "1h", K.operator_ttl_key("dedupe"): "1m", K.operator_ttl_key("stateStoreSave"): "off"}
    dedupe = store_config_from_confs(confs, operator_id=1, operator_names=QUERY)
    assert dedupe.ttl.ttl_ms == 60_000 and dedupe.ttl_key == K.operator_ttl_key("dedupe")
    agg = store_config_from_confs(confs, operator_id=0, operator_names=QUERY)
    assert agg.ttl.ttl_ms is None and agg.ttl_key == K.operator_ttl_key("stateStoreSave")
    join = store_config_from_confs(confs, operator_id=2, operator_names=QUERY)
    assert join.ttl.ttl_ms == 3_600_000 and join.ttl_key == K.TTL.key
    by_id = store_config_from_confs({**confs, K.operator_ttl_key(1): "5s"}, operator_id=1,
                                    operator_names=QUERY)
    assert by_id.ttl.ttl_ms == 5_000 and by_id.ttl_key == K.operator_ttl_key(1)
    assert store_config_from_confs(confs).ttl.ttl_ms == 3_600_000  # configure(): validation only


def test_a_name_several_operators_have_fails_naming_them() -> None:
    names = {0: "dedupe", 1: "stateStoreSave", 3: "dedupe"}
    confs = {K.operator_ttl_key("dedupe"): "1m"}
    with pytest.raises(ConfError) as e:
        store_config_from_confs(confs, operator_id=3, operator_names=names)
    msg = str(e.value)
    assert K.operator_ttl_key("dedupe") in msg and "operators 0, 3" in msg
    assert K.operator_ttl_key(0) in msg and K.operator_ttl_key(3) in msg
    # Other operators are unaffected, and ids for both make the name irrelevant.
    assert store_config_from_confs(confs, operator_id=1, operator_names=names).ttl.ttl_ms is None
    both = {**confs, K.operator_ttl_key(0): "2m", K.operator_ttl_key(3): "3m"}
    assert store_config_from_confs(both, operator_id=3, operator_names=names).ttl.ttl_ms == 180_000


def test_unknown_operator_names_and_bad_values_are_refused() -> None:
    with pytest.raises(ConfError, match=r"operator\.dedup\.ttl.*dedupe, dedupeWithinWatermark"):
        store_config_from_confs({K.operator_ttl_key("dedup"): "1m"})
    with pytest.raises(ConfError, match=r"operator\.dedupe\.ttl"):
        store_config_from_confs({K.operator_ttl_key("dedupe"): "soon"})
    with pytest.raises(ConfError, match="Unknown ttlstate conf .*operator.my-op.ttl"):
        store_config_from_confs({K.PREFIX + "operator.my-op.ttl": "1m"})


def test_a_name_key_with_unknown_operator_names_fails_instead_of_being_ignored() -> None:
    """If the store's operator name could not be read, a name key might be meant for it: the
    query fails naming the metadata file and the id key to use, rather than ignore the key."""
    confs = {K.operator_ttl_key("dedupe"): "1m"}
    for names in (None, {0: "stateStoreSave"}):
        with pytest.raises(ConfError) as e:
            store_config_from_confs(confs, operator_id=1, operator_names=names)
        assert "state/1/_metadata/metadata" in str(e.value) and K.operator_ttl_key(1) in str(e.value)
    # Without name keys, unknown names do not matter.
    assert store_config_from_confs({K.TTL.key: "1h"}, operator_id=1).ttl.ttl_ms == 3_600_000


@pytest.mark.parametrize(("ms", "text"), [(None, "off"), (1_800_000, "30m"), (1500, "1500ms"),
                                          (90_000, "90s"), (172_800_000, "2d"), (3_600_000, "1h")])
def test_durations_are_written_back_in_the_largest_exact_unit(ms: int | None, text: str) -> None:
    assert format_duration_ms(ms) == text
    if ms is not None:
        assert parse_duration_ms("k", text) == ms


@pytest.mark.parametrize("value,ms", [("off", None), ("OFF", None), ("none", None), ("", None), ("10ms", 10),
                                      ("1s", 1000)])
def test_real_time_clock_interval_is_off_or_a_duration_of_at_least_10ms(value: str, ms: int | None) -> None:
    store_config_from_confs({K.REAL_TIME_CLOCK_INTERVAL.key: value})
    assert K.REAL_TIME_CLOCK_INTERVAL.parse(value) == ms
    with pytest.raises(ConfError, match="at least 10ms"):
        K.REAL_TIME_CLOCK_INTERVAL.parse("9ms")

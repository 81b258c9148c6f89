"""Typed configuration of one store, built from the string confs Spark hands the provider."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ttlstate.config import keys as K
from ttlstate.config.keys import EngineKind, StateVisibility, TimeSource, UpdateType
from ttlstate.config.parse import (
    ConfError,
    UnknownConfKey,
    parse_bool,
    parse_bytes,
    parse_duration_ms,
    parse_enum,
    parse_fraction,
    parse_int,
)

# Below a second, a healthy server on a loaded machine could be taken for a hung one.
MIN_REQUEST_TIMEOUT_MS = 1000
# activeTime's bound on one gap between batches; below a second it would stop the clock between
# ordinary batches.
MIN_CLOCK_MAX_GAP_MS = 1000
MIN_REAL_TIME_CLOCK_INTERVAL_MS = 10


@dataclass(frozen=True)
class IncrementalCleanup:
    size: int
    per_record: bool = False


@dataclass(frozen=True)
class CompactionFilterCleanup:
    query_time_after_num_entries: int = 1000
    periodic_compaction_ms: int = 30 * 86_400_000
    compact_every_commits: int = 0


@dataclass(frozen=True)
class TtlConfig:
    """Flink's StateTtlConfig, in ttlstate's vocabulary. `ttl_ms=None` means TTL is off."""

    ttl_ms: int | None = None
    update_type: UpdateType = UpdateType.ON_CREATE_AND_WRITE
    visibility: StateVisibility = StateVisibility.NEVER_RETURN_EXPIRED
    time_source: TimeSource = TimeSource.BATCH_TIMESTAMP
    clock_max_gap_ms: int = 600_000  # activeTime: the most one gap between batches counts
    full_snapshot: bool = True
    incremental: IncrementalCleanup | None = None
    compaction_filter: CompactionFilterCleanup | None = field(
        default_factory=CompactionFilterCleanup)

    @property
    def enabled(self) -> bool:
        return self.ttl_ms is not None

    @property
    def update_on_read(self) -> bool:
        return self.update_type is UpdateType.ON_READ_AND_WRITE

    @property
    def return_expired(self) -> bool:
        return self.visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP

    def disabled(self) -> TtlConfig:
        return replace(self, ttl_ms=None)


@dataclass(frozen=True)
class MemoryConfig:
    """RocksDB memory of one worker process (all its stores), native engine."""

    max_bytes: int = 256 << 20
    write_buffer_ratio: float = 0.5


@dataclass(frozen=True)
class StoreConfig:
    ttl: TtlConfig = field(default_factory=TtlConfig)
    engine: EngineKind = EngineKind.NATIVE
    snapshot_interval: int = 10
    snapshot_layout: K.SnapshotLayout = K.SnapshotLayout.SST
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    ttl_key: str = K.TTL.key  # the conf key the TTL comes from (the global one, or an operator's)
    reader_include_expired: bool = False  # the state data source returns expired entries too


def _parse_ttl(key: str, value: str) -> int | None:
    if str(value).strip().lower() in ("off", "none", ""):
        return None
    return parse_duration_ms(key, value)


def real_time_clock_interval_ms(value: str) -> int | None:
    """`realTime.clockInterval` in ms, None when off (read by the shim; validated here)."""
    if str(value).strip().lower() == "off":
        return None
    ms = parse_duration_ms(K.REAL_TIME_CLOCK_INTERVAL.key, value)
    if ms < MIN_REAL_TIME_CLOCK_INTERVAL_MS:
        raise ConfError(K.REAL_TIME_CLOCK_INTERVAL.key, value, K.REAL_TIME_CLOCK_INTERVAL.allowed)
    return ms


def store_config_from_confs(confs: Mapping[str, str], operator_id: int | None = None,
                            operator_names: Mapping[int, str] | None = None) -> StoreConfig:
    """Validate every ttlstate key present in `confs` (others are ignored) and build the config
    of a store of operator `operator_id` (None: just validate, as `configure` does).

    `operator_names` are the names of the query's stateful operators by id, from the
    checkpoint's state metadata (the shim reads them); `operator.<name>.ttl` keys need them.
    Unknown keys under our prefix are refused too: a typo must not silently mean "default".
    """
    known = {k.key for k in K.ALL_KEYS if "<" not in k.suffix}
    for key in confs:
        if key.startswith(K.PREFIX) and key not in known and _operator_of_key(key) is None:
            raise UnknownConfKey(key, confs[key], sorted(known | {K.operator_ttl_key(0)}))

    def get(ck: K.ConfKey) -> str:
        return str(confs.get(ck.key, ck.default))

    ttl_ms, ttl_key = _ttl_of_operator(confs, _parse_ttl(K.TTL.key, get(K.TTL)), operator_id,
                                       operator_names)

    inc_size = parse_int(K.INCREMENTAL_SIZE.key, get(K.INCREMENTAL_SIZE), minimum=0)
    inc_per_record = parse_bool(K.INCREMENTAL_PER_RECORD.key, get(K.INCREMENTAL_PER_RECORD))
    filter_on = parse_bool(K.FILTER_ENABLED.key, get(K.FILTER_ENABLED))
    query_after = parse_int(K.FILTER_QUERY_TIME_AFTER.key, get(K.FILTER_QUERY_TIME_AFTER), minimum=0)
    periodic = parse_duration_ms(K.FILTER_PERIODIC_COMPACTION.key,
                                 get(K.FILTER_PERIODIC_COMPACTION), allow_zero=True)
    compact_every = parse_int(K.FILTER_COMPACT_EVERY.key, get(K.FILTER_COMPACT_EVERY), minimum=0)
    ttl = TtlConfig(
        ttl_ms=ttl_ms,
        update_type=parse_enum(K.UPDATE_TYPE.key, get(K.UPDATE_TYPE), UpdateType),
        visibility=parse_enum(K.STATE_VISIBILITY.key, get(K.STATE_VISIBILITY), StateVisibility),
        time_source=parse_enum(K.TIME_SOURCE.key, get(K.TIME_SOURCE), TimeSource),
        clock_max_gap_ms=_at_least_ms(K.CLOCK_MAX_GAP, get(K.CLOCK_MAX_GAP), MIN_CLOCK_MAX_GAP_MS),
        full_snapshot=parse_bool(K.FULL_SNAPSHOT.key, get(K.FULL_SNAPSHOT)),
        incremental=IncrementalCleanup(inc_size, inc_per_record) if inc_size > 0 else None,
        compaction_filter=(CompactionFilterCleanup(query_after, periodic, compact_every)
                           if filter_on else None),
    )
    # Keys read only by the shim are still validated here, so every bad value fails alike.
    parse_int(K.WORKERS.key, get(K.WORKERS), minimum=0, maximum=1024)
    parse_int(K.WRITE_BATCH_SIZE.key, get(K.WRITE_BATCH_SIZE), minimum=1024, maximum=1 << 30)
    parse_int(K.KEY_FILTER_MAX_KEYS.key, get(K.KEY_FILTER_MAX_KEYS), minimum=0, maximum=1 << 26)
    parse_bytes(K.KEY_FILTER_MAX_BYTES.key, get(K.KEY_FILTER_MAX_BYTES), minimum=0)
    parse_int(K.READ_AHEAD_CHUNK_ROWS.key, get(K.READ_AHEAD_CHUNK_ROWS), minimum=0, maximum=1 << 20)
    parse_bytes(K.CACHE_MAX_BYTES.key, get(K.CACHE_MAX_BYTES), minimum=0)
    _request_timeout_ms(get(K.REQUEST_TIMEOUT))
    real_time_clock_interval_ms(get(K.REAL_TIME_CLOCK_INTERVAL))
    return StoreConfig(
        ttl=ttl,
        engine=parse_enum(K.ENGINE.key, get(K.ENGINE), EngineKind),
        snapshot_interval=parse_int(K.SNAPSHOT_INTERVAL.key, get(K.SNAPSHOT_INTERVAL), minimum=1),
        snapshot_layout=parse_enum(K.SNAPSHOT_LAYOUT.key, get(K.SNAPSHOT_LAYOUT), K.SnapshotLayout),
        memory=MemoryConfig(
            parse_bytes(K.MEMORY_MAX_BYTES.key, get(K.MEMORY_MAX_BYTES), minimum=16 << 20),
            parse_fraction(K.MEMORY_WRITE_BUFFER_RATIO.key, get(K.MEMORY_WRITE_BUFFER_RATIO))),
        ttl_key=ttl_key,
        reader_include_expired=parse_bool(K.READER_INCLUDE_EXPIRED.key, get(K.READER_INCLUDE_EXPIRED)),
    )


_OPERATOR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _operator_of_key(key: str) -> int | str | None:
    """The operator of an `operator.<id>.ttl` (an int) or `operator.<name>.ttl` key (a str)."""
    head = K.PREFIX + "operator."
    if not key.startswith(head) or not key.endswith(".ttl"):
        return None
    middle = key[len(head):-len(".ttl")]
    if middle.isdigit():
        return int(middle)
    return middle if _OPERATOR_NAME.fullmatch(middle) else None


def _ttl_of_operator(confs: Mapping[str, str], global_ttl: int | None, operator_id: int | None,
                     operator_names: Mapping[int, str] | None) -> tuple[int | None, str]:
    """The TTL of `operator_id` and the key it comes from: its `operator.<id>.ttl`, else its
    name's `operator.<name>.ttl`, else the global `ttl`. Every operator key is validated."""
    by_id: dict[int, int | None] = {}
    by_name: dict[str, tuple[str, int | None]] = {}
    for key, value in confs.items():
        op = _operator_of_key(key)
        if op is None:
            continue
        if isinstance(op, str) and op not in K.OPERATOR_NAMES:
            import difflib

            close = difflib.get_close_matches(op, K.OPERATOR_NAMES, n=1, cutoff=0.6)
            hint = f" (did you mean '{K.operator_ttl_key(close[0])}'?)" if close else ""
            raise ConfError(key, value, "a key operator.<id>.ttl, or operator.<name>.ttl with a name Spark "
                                        f"reports in progress: {', '.join(K.OPERATOR_NAMES)}{hint}")
        ttl = _parse_ttl(key, value)  # validate every override, not just ours
        if isinstance(op, int):
            by_id[op] = ttl
        else:
            by_name[op] = (str(value), ttl)
    if operator_id is None:
        return global_ttl, K.TTL.key
    if operator_id in by_id:
        return by_id[operator_id], K.operator_ttl_key(operator_id)
    if not by_name:
        return global_ttl, K.TTL.key
    name = (operator_names or {}).get(operator_id)
    if name is None:
        some = sorted(by_name)[0]
        raise ConfError(K.operator_ttl_key(some), by_name[some][0],
                        f"operator names only where they are known, but the name of operator {operator_id} "
                        "is not: ttlstate reads it from the checkpoint's state metadata "
                        f"(<checkpoint>/state/{operator_id}/_metadata/metadata), which it could not read. "
                        f"Set {K.operator_ttl_key(operator_id)} instead")
    if name not in by_name:
        return global_ttl, K.TTL.key
    key = K.operator_ttl_key(name)
    same = sorted(i for i, n in (operator_names or {}).items() if n == name)
    if len(same) > 1:
        raise ConfError(key, by_name[name][0],
                        f"a name that only one operator of the query has, but operators "
                        f"{', '.join(map(str, same))} are all named {name}: set "
                        f"{' and '.join(K.operator_ttl_key(i) for i in same)} instead")
    return by_name[name][1], key


def _request_timeout_ms(value: str) -> int:
    return _at_least_ms(K.REQUEST_TIMEOUT, value, MIN_REQUEST_TIMEOUT_MS)


def _at_least_ms(ck: K.ConfKey, value: str, minimum_ms: int) -> int:
    """A duration key with a floor; the message gives the key's allowed values."""
    ms = parse_duration_ms(ck.key, value, allowed=ck.allowed)
    if ms < minimum_ms:
        raise ConfError(ck.key, value, ck.allowed)
    return ms


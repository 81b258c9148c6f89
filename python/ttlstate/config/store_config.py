"""Typed configuration of one store, built from the string confs Spark hands the provider."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ttlstate.config import keys as K
from ttlstate.config.keys import EngineKind, StateVisibility, TimeSource, UpdateType
from ttlstate.config.parse import ConfError, UnknownConfKey


@dataclass(frozen=True)
class IncrementalCleanup:
    size: int
    per_record: bool = False


@dataclass(frozen=True)
class CompactionFilterCleanup:
    query_time_after_num_entries: int = K.FILTER_QUERY_TIME_AFTER.default_value
    periodic_compaction_ms: int = K.FILTER_PERIODIC_COMPACTION.default_value
    compact_every_commits: int = K.FILTER_COMPACT_EVERY.default_value


@dataclass(frozen=True)
class TtlConfig:
    """Flink's StateTtlConfig, in ttlstate's vocabulary. `ttl_ms=None` means TTL is off. The
    defaults are the keys' but for TTL and incremental cleanup, both off here."""

    ttl_ms: int | None = None
    update_type: UpdateType = K.UPDATE_TYPE.default_value
    visibility: StateVisibility = K.STATE_VISIBILITY.default_value
    time_source: TimeSource = K.TIME_SOURCE.default_value
    clock_max_gap_ms: int = K.CLOCK_MAX_GAP.default_value  # activeTime: the most one gap counts
    full_snapshot: bool = K.FULL_SNAPSHOT.default_value
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

    max_bytes: int = K.MEMORY_MAX_BYTES.default_value
    write_buffer_ratio: float = K.MEMORY_WRITE_BUFFER_RATIO.default_value


@dataclass(frozen=True)
class StoreConfig:
    ttl: TtlConfig = field(default_factory=TtlConfig)
    engine: EngineKind = K.ENGINE.default_value
    snapshot_interval: int = K.SNAPSHOT_INTERVAL.default_value
    snapshot_layout: K.SnapshotLayout = K.SNAPSHOT_LAYOUT.default_value
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    ttl_key: str = K.TTL.key  # the conf key the TTL comes from (the global one, or an operator's)
    reader_include_expired: bool = K.READER_INCLUDE_EXPIRED.default_value  # expired entries too
    checkpoint_local_files: bool = K.CHECKPOINT_LOCAL_FILES.default_value
    # SST snapshots restored by reading their files in the checkpoint (store/in_place.py)
    snapshot_read_in_place: bool = K.SNAPSHOT_READ_IN_PLACE.default_value
    # the most bytes of local SST files a store reading in place keeps (0: unbounded)
    snapshot_local_max_bytes: int = K.SNAPSHOT_LOCAL_MAX_BYTES.default_value
    # a restore's placeholders are copied to the local disk in the background (local_fill.py)
    snapshot_local_fill: bool = K.SNAPSHOT_LOCAL_FILL.default_value
    # a due snapshot starts when the commit returns, not at the next maintenance
    snapshot_after_commit: bool = K.SNAPSHOT_AFTER_COMMIT.default_value
    # the most changelogs a repair of a damaged snapshot replays (0: no repair)
    repair_max_replay: int = K.REPAIR_MAX_REPLAY.default_value
    # the shim keeps no key filter of a larger store: a restore keeps no key hashes for one
    key_filter_max_keys: int = K.KEY_FILTER_MAX_KEYS.default_value


def store_config_from_confs(confs: Mapping[str, str], operator_id: int | None = None,
                            operator_names: Mapping[int, str] | None = None) -> StoreConfig:
    """Validate every ttlstate key present in `confs` (others are ignored) and build the config
    of a store of operator `operator_id` (None: just validate, as `configure` does).

    `operator_names` are the names of the query's stateful operators by id, from the
    checkpoint's state metadata (the shim reads them); `operator.<name>.ttl` keys need them.
    Unknown keys under our prefix are refused too: a typo must not silently mean "default".
    Each key parses as its kind and bounds say (conf_key.py).
    """
    known = {k.key for k in K.ALL_KEYS if "<" not in k.suffix}
    for key in confs:
        if key.startswith(K.PREFIX) and key not in known and operator_of_key(key) is None:
            raise UnknownConfKey(key, confs[key], sorted(known | {K.operator_ttl_key(0)}))
    # Every named key, also those only the shim reads, so every bad value fails alike.
    v = {k: k.parse(confs.get(k.key, k.default)) for k in K.ALL_KEYS if "<" not in k.suffix}

    ttl_ms, ttl_key = _ttl_of_operator(confs, v[K.TTL], operator_id, operator_names)
    inc_size = v[K.INCREMENTAL_SIZE]
    ttl = TtlConfig(
        ttl_ms=ttl_ms,
        update_type=v[K.UPDATE_TYPE],
        visibility=v[K.STATE_VISIBILITY],
        time_source=v[K.TIME_SOURCE],
        clock_max_gap_ms=v[K.CLOCK_MAX_GAP],
        full_snapshot=v[K.FULL_SNAPSHOT],
        incremental=IncrementalCleanup(inc_size, v[K.INCREMENTAL_PER_RECORD]) if inc_size > 0 else None,
        compaction_filter=(CompactionFilterCleanup(v[K.FILTER_QUERY_TIME_AFTER],
                                                   v[K.FILTER_PERIODIC_COMPACTION], v[K.FILTER_COMPACT_EVERY])
                           if v[K.FILTER_ENABLED] else None),
    )
    if v[K.SNAPSHOT_LOCAL_MAX_BYTES] and not v[K.SNAPSHOT_READ_IN_PLACE]:
        raise ConfError(K.SNAPSHOT_LOCAL_MAX_BYTES.key, confs[K.SNAPSHOT_LOCAL_MAX_BYTES.key],
                        f"0 while {K.SNAPSHOT_READ_IN_PLACE.key} is off (the local disk is bounded "
                        "only by reading evicted files in place): set it to true, or unset this key")
    return StoreConfig(
        ttl=ttl,
        engine=v[K.ENGINE],
        snapshot_interval=v[K.SNAPSHOT_INTERVAL],
        snapshot_layout=v[K.SNAPSHOT_LAYOUT],
        memory=MemoryConfig(v[K.MEMORY_MAX_BYTES], v[K.MEMORY_WRITE_BUFFER_RATIO]),
        ttl_key=ttl_key,
        reader_include_expired=v[K.READER_INCLUDE_EXPIRED],
        checkpoint_local_files=v[K.CHECKPOINT_LOCAL_FILES],
        snapshot_read_in_place=v[K.SNAPSHOT_READ_IN_PLACE],
        snapshot_local_max_bytes=v[K.SNAPSHOT_LOCAL_MAX_BYTES],
        snapshot_local_fill=v[K.SNAPSHOT_LOCAL_FILL],
        snapshot_after_commit=v[K.SNAPSHOT_AFTER_COMMIT],
        repair_max_replay=v[K.REPAIR_MAX_REPLAY],
        key_filter_max_keys=v[K.KEY_FILTER_MAX_KEYS],
    )


_OPERATOR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def operator_of_key(key: str) -> int | str | None:
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
        op = operator_of_key(key)
        if op is None:
            continue
        if isinstance(op, str) and op not in K.OPERATOR_NAMES:
            import difflib

            close = difflib.get_close_matches(op, K.OPERATOR_NAMES, n=1, cutoff=0.6)
            hint = f" (did you mean '{K.operator_ttl_key(close[0])}'?)" if close else ""
            raise ConfError(key, value, "a key operator.<id>.ttl, or operator.<name>.ttl with a name Spark "
                                        f"reports in progress: {', '.join(K.OPERATOR_NAMES)}{hint}")
        spec = K.OPERATOR_TTL if isinstance(op, int) else K.OPERATOR_NAME_TTL
        ttl = spec.parse(value, key=key)  # validate every override, not just ours
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

"""The default engine: our RocksDB binding with the TTL compaction filter (native/).

The filter is attached when TTL is on and reads "now" from a native atomic that the store
sets to the batch time at every `get_store`, so compaction never calls into Python and never
uses a time later than the batch the store serves.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from ttlstate import _native
from ttlstate.config.store_config import TtlConfig
from ttlstate.engine.base import Engine, FilterSettings

_CHUNK_BYTES = 1 << 16


class NativeEngine(Engine):
    kind = "native"
    native_data_plane = True
    can_checkpoint = True

    def __init__(self, path: str, filter_settings: FilterSettings | None, mapped_reads: bool = False) -> None:
        os.makedirs(path, exist_ok=True)
        if filter_settings is None:
            self._db = _native.DB(path, mapped_reads=mapped_reads)
        else:
            self._db = _native.DB(
                path, ttl=filter_settings.ttl_ms, state_type=_native.STATE_VALUE,
                timestamp_offset=filter_settings.timestamp_offset,
                query_time_after_num_entries=filter_settings.query_time_after_num_entries,
                periodic_compaction_seconds=filter_settings.periodic_compaction_seconds,
                mapped_reads=mapped_reads)
        self.has_compaction_filter = self._db.has_filter

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        return self._db.multi_get(keys) if keys else []

    def write(self, batch: Iterable[tuple[bytes, bytes | None]]) -> None:
        self._db.write(batch)

    def iterate(self, lower: bytes | None = None,
                upper: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        it = self._db.iterator(lower, upper)  # created now: the view is fixed at this call
        return _entries(it)

    # -- the native data plane: per-entry work never runs in Python ---------------------------
    def begin(self, label: str, version: int, now_ms: int, writable: bool, ttl: TtlConfig,
              cursor: _native.CleanupCursor, log_operations: bool = False) -> _native.Txn:
        """A transaction over the loaded version: pending writes, TTL reads, scans, commit.
        `log_operations`: its changelog logs every put, delete and append in order."""
        inc = ttl.incremental
        return self._db.begin(label, version, now_ms, writable, ttl.enabled, ttl.ttl_ms or 0,
                              ttl.update_on_read, ttl.return_expired, inc.size if inc else 0,
                              bool(inc and inc.per_record), cursor, log_operations)

    def snapshot(self) -> _native.Snapshot:
        """A pinned consistent view; writing it needs no lock on the store."""
        return self._db.snapshot()

    def checkpoint(self, directory: str) -> None:
        self._db.checkpoint(directory)

    def add_key_hashes(self, hashes: _native.KeyHashes) -> int:  # type: ignore[override]
        """Adds every stored key to `hashes`; returns the number of keys."""
        return self._db.add_key_hashes(hashes)

    def restore_builder(self) -> _native.RestoreBuilder:
        """Builds this (empty) DB's state from a snapshot and the changelogs after it."""
        return self._db.restore_builder()

    def apply_changelog_file(self, path: str, hashes: _native.KeyHashes | None = None,
                             ingest_min_keys: int | None = None, count_keys: bool = True
                             ) -> tuple[int, int, int]:
        """Replays a changelog in key-ordered chunks; a chunk of `ingest_min_keys` keys or more
        (default: the native plane's) is bulk-loaded as an SST file beside `path`. Returns the
        records, the change in the number of keys and of it the internal column families' keys';
        without `count_keys`, no lookups: both changes are returned as 0."""
        if ingest_min_keys is None:
            count, (delta, internal) = self._db.apply_changelog_file(path, hashes, count_keys=count_keys)
        else:
            count, (delta, internal) = self._db.apply_changelog_file(path, hashes, ingest_min_keys,
                                                                     count_keys)
        return int(count), int(delta), int(internal)

    def compact(self) -> None:
        self._db.compact()

    def warm_metadata(self, threads: int) -> None:
        self._db.warm_metadata(threads)

    def set_time(self, now_ms: int) -> None:
        self._db.set_time(now_ms)

    def memtable_bytes(self) -> int:
        return int(self._db.int_property("rocksdb.size-all-mem-tables"))

    def table_reader_bytes(self) -> int:
        return int(self._db.int_property("rocksdb.estimate-table-readers-mem"))

    def disk_bytes(self) -> int:
        return int(self._db.int_property("rocksdb.live-sst-files-size"))

    def count_keys(self) -> int:
        return int(self._db.count_keys())

    def count_key_kinds(self) -> tuple[int, int]:
        return self._db.count_key_kinds()

    def metrics(self) -> dict[str, int]:
        return dict(self._db.filter_metrics())

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None  # type: ignore[assignment]


def _entries(it: _native.Iterator) -> Iterator[tuple[bytes, bytes]]:
    while True:
        chunk = it.next_chunk(_CHUNK_BYTES)
        if not chunk:
            return
        yield from chunk

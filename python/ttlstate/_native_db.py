"""A native RocksDB with the TTL compaction filter (native/src/db.cpp), and what it hands out
besides transactions: iterators, pinned snapshots, restore builders, key filter hashes."""

from __future__ import annotations

from collections.abc import Iterable
from ctypes import byref, c_int64, c_uint64, c_void_p

from ttlstate._native_handles import Handle, bound
from ttlstate._native_lib import (
    MODULE_CONSTANTS,
    Out,
    decode_list,
    decode_pairs,
    encode_list,
    lib,
    read_value,
    scratch,
    text,
)
from ttlstate._native_txn import CleanupCursor, Txn

_STATE_VALUE = MODULE_CONSTANTS["STATE_VALUE"]
_INGEST_MIN_KEYS = MODULE_CONSTANTS["INGEST_MIN_KEYS"]


class KeyHashes(Handle):
    """The key filter hashes of the keys a restore loads, for the shim's filter."""

    __slots__ = ()
    _free = lib.ttl_key_hashes_free

    def __init__(self) -> None:
        super().__init__(lib.ttl_key_hashes_new())

    def add(self, key: bytes) -> None:
        lib.ttl_key_hashes_add(self._h, key, len(key))

    def __len__(self) -> int:
        return int(lib.ttl_key_hashes_len(self._h))

    def settle(self, bits_log2: int, probes: int) -> None:
        """Keeps the bits of that layer from now on instead of 8 bytes a key; `bloom_words` then
        answers for it and every smaller layer with the same probes (key_hash.h)."""
        lib.ttl_key_hashes_settle(self._h, bits_log2, probes)

    def bloom_words(self, bits_log2: int, probes: int) -> bytes:
        """The bits of a key filter layer holding every key added (little-endian u64 words)."""
        out = Out()
        lib.ttl_key_hashes_bloom_words(self._h, bits_log2, probes, *out.refs())
        return out.bytes()


class Snapshot(Handle):
    __slots__ = ()
    _free = lib.ttl_snapshot_free

    def write_record_file(self, path: str, header_json: str | bytes, drop_expired: bool, ttl: int,
                          now: int) -> tuple[int, int]:
        """Write the pinned view as a snapshot record file; (records written, expired ones dropped)."""
        written, dropped = c_uint64(), c_uint64()
        lib.ttl_snapshot_write_record_file(self._h, text(path), text(header_json), int(drop_expired), ttl,
                                           now, byref(written), byref(dropped))
        return written.value, dropped.value


class RestoreBuilder(Handle):
    """Builds a version from nothing: changelogs gathered in memory, merged with the snapshot into one SST."""

    __slots__ = ()
    _free = lib.ttl_restore_free

    def add_changelog(self, path: str) -> int:
        """Gather a changelog file's records (files in version order); returns their count."""
        out = c_uint64()
        lib.ttl_restore_add_changelog(self._h, text(path), byref(out))
        return out.value

    @property
    def gathered_bytes(self) -> int:
        return int(lib.ttl_restore_gathered_bytes(self._h))

    def finish(self, snapshot_path: str, sst_path: str, hashes: KeyHashes | None = None
               ) -> tuple[int, int, int]:
        """Load the snapshot ('' for none) with the gathered changelogs over it; (snapshot
        records, keys, internal column families' keys among them)."""
        records, keys, internal = c_uint64(), c_uint64(), c_uint64()
        lib.ttl_restore_finish(self._h, text(snapshot_path), text(sst_path),
                               hashes._h if hashes is not None else None, byref(records), byref(keys),
                               byref(internal))
        return records.value, keys.value, internal.value


class Iterator(Handle):
    __slots__ = ()
    _free = lib.ttl_iterator_free

    def next_chunk(self, max_bytes: int = 1 << 16) -> list[tuple[bytes, bytes]]:
        out = Out()
        lib.ttl_iterator_next_chunk(self._h, max_bytes, *out.refs())
        return decode_pairs(out.bytes())


class DB(Handle):
    __slots__ = ()
    _free = lib.ttl_db_free

    def __init__(self, path: str, ttl: int = 0, state_type: int = _STATE_VALUE, timestamp_offset: int = 0,
                 query_time_after_num_entries: int = 1000, periodic_compaction_seconds: int = 30 * 24 * 3600,
                 fixed_element_length: int = -1, variable_length_list: bool = False,
                 wall_clock: bool = False, mapped_reads: bool = False) -> None:
        handle = c_void_p()
        lib.ttl_db_open(text(path), ttl, state_type, timestamp_offset, query_time_after_num_entries,
                        periodic_compaction_seconds, fixed_element_length, int(variable_length_list),
                        int(wall_clock), int(mapped_reads), byref(handle))
        super().__init__(handle.value)

    def get(self, key: str | bytes) -> bytes | None:
        k = text(key)
        s = scratch
        n = lib.ttl_db_get_into(self._h, k, len(k), s.buf, s.cap)
        return s.buf[:n] if 0 <= n <= s.cap else read_value(n, s)

    def multi_get(self, keys: Iterable[str | bytes]) -> list[bytes | None]:
        out = Out()
        encoded = encode_list([text(k) for k in keys])
        lib.ttl_db_multi_get(self._h, encoded, len(encoded), *out.refs())
        return decode_list(out.bytes())

    def write(self, batch: Iterable[tuple[str | bytes, str | bytes | None]]) -> None:
        """Apply (key, value) puts and (key, None) deletes atomically, in order."""
        flat: list[bytes | None] = []
        for key, value in batch:
            flat.append(text(key))
            flat.append(None if value is None else text(value))
        encoded = encode_list(flat)
        lib.ttl_db_write(self._h, encoded, len(encoded))

    def merge(self, key: str | bytes, value: str | bytes) -> None:
        k, v = text(key), text(value)
        lib.ttl_db_merge(self._h, k, len(k), v, len(v))

    def iterator(self, lower: bytes | None = None, upper: bytes | None = None) -> Iterator:
        handle = c_void_p()
        lib.ttl_db_iterator(self._h, *bound(lower), *bound(upper), byref(handle))
        return Iterator.own(handle)

    def compact(self) -> None:
        lib.ttl_db_compact(self._h)

    def flush(self) -> None:
        lib.ttl_db_flush(self._h)

    def warm_metadata(self, threads: int) -> None:
        lib.ttl_db_warm_metadata(self._h, threads)

    def checkpoint(self, directory: str) -> None:
        lib.ttl_db_checkpoint(self._h, text(directory))

    def add_key_hashes(self, hashes: KeyHashes) -> int:
        keys = c_uint64()
        lib.ttl_db_add_key_hashes(self._h, hashes._h, byref(keys))
        return keys.value

    def int_property(self, name: str) -> int:
        out = c_uint64()
        lib.ttl_db_int_property(self._h, text(name), byref(out))
        return out.value

    def count_keys(self) -> int:
        return self.count_key_kinds()[0]

    def count_key_kinds(self) -> tuple[int, int]:
        """By a scan: (keys, internal column families' keys among them)."""
        out, internal = c_uint64(), c_uint64()
        lib.ttl_db_count_keys(self._h, byref(out), byref(internal))
        return out.value, internal.value

    def set_time(self, now: int) -> None:
        lib.ttl_db_set_time(self._h, now)

    def begin(self, label: str, version: int, now: int, writable: bool, ttl_enabled: bool, ttl: int,
              update_on_read: bool, return_expired: bool, incremental_size: int, incremental_per_record: bool,
              cursor: CleanupCursor | None, log_operations: bool = False) -> Txn:
        """A transaction over one loaded version: the native data plane of one StateStore.
        `log_operations`: its changelog logs every put, delete and append in order."""
        handle = c_void_p()
        cursor_handle = cursor._h if cursor is not None else None
        lib.ttl_db_begin(self._h, text(label), version, now, int(writable), int(ttl_enabled), ttl,
                         int(update_on_read), int(return_expired), incremental_size,
                         int(incremental_per_record), cursor_handle, int(log_operations), byref(handle))
        return Txn.own(handle)

    def snapshot(self) -> Snapshot:
        """A pinned consistent view, to write a snapshot file from without holding the store."""
        handle = c_void_p()
        lib.ttl_db_snapshot(self._h, byref(handle))
        return Snapshot.own(handle)

    def restore_builder(self) -> RestoreBuilder:
        """A builder of this (empty) DB's state from a snapshot and the changelogs after it."""
        handle = c_void_p()
        lib.ttl_db_restore_builder(self._h, byref(handle))
        return RestoreBuilder.own(handle)

    def apply_changelog_file(self, path: str, hashes: KeyHashes | None = None,
                             ingest_min_keys: int = _INGEST_MIN_KEYS,
                             count_keys: bool = True) -> tuple[int, tuple[int, int]]:
        """(records, (change in keys, of it the internal column families' keys'))."""
        records, change, internal = c_uint64(), c_int64(), c_int64()
        lib.ttl_db_apply_changelog_file(self._h, text(path), hashes._h if hashes is not None else None,
                                        int(count_keys), ingest_min_keys, byref(records), byref(change),
                                        byref(internal))
        return records.value, (change.value, internal.value)

    @property
    def has_filter(self) -> bool:
        return bool(lib.ttl_db_has_filter(self._h))

    def filter_metrics(self) -> dict[str, int]:
        seen, removed, rewritten, queries = c_int64(), c_int64(), c_int64(), c_int64()
        lib.ttl_db_filter_metrics(self._h, byref(seen), byref(removed), byref(rewritten), byref(queries))
        return {"filter_entries_seen": seen.value, "filter_removed": removed.value,
                "filter_rewritten": rewritten.value, "filter_time_queries": queries.value}

    def close(self) -> None:
        lib.ttl_db_close(self._h)

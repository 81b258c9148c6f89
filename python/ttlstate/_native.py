"""ttlstate native engine: RocksDB with the TTL compaction filter (the C ABI of native/, via ctypes).

The classes and functions the rest of ttlstate uses, with the names, arguments, results and
exceptions the engine always had; each call goes to the shared library `_native_lib` loads.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from ctypes import byref, c_double, c_int, c_int64, c_uint8, c_uint32, c_uint64, c_void_p
from typing import Any

from ttlstate._native_lib import (
    FORWARD,
    LIBRARY_PATH,
    NativeFailure,
    Out,
    PeerGone,
    StateError,
    decode_list,
    decode_pairs,
    encode_list,
    lib,
    raise_last,
    read_value,
    scratch,
    text,
)

__all__ = ["DB", "CleanupCursor", "Connection", "FilterHarness", "Iterator", "KeyHashes", "LIBRARY_PATH",
           "PeerGone", "RestoreBuilder", "Scan", "Snapshot", "StateError", "Txn"]


def _constants() -> tuple[dict[str, int], dict[str, int]]:
    out = Out()
    lib.ttl_constants(*out.refs())
    module: dict[str, int] = {}
    protocol: dict[str, int] = {}
    for line in out.bytes().decode().splitlines():
        name, value = line.split("=")
        if name.startswith("protocol."):
            protocol[name.removeprefix("protocol.")] = int(value)
        else:
            module[name] = int(value)
    return module, protocol


_MODULE_CONSTANTS, _PROTOCOL = _constants()
STATE_DISABLED = _MODULE_CONSTANTS["STATE_DISABLED"]
STATE_VALUE = _MODULE_CONSTANTS["STATE_VALUE"]
STATE_LIST = _MODULE_CONSTANTS["STATE_LIST"]
VALUE = _MODULE_CONSTANTS["VALUE"]
MERGE_OPERAND = _MODULE_CONSTANTS["MERGE_OPERAND"]
BLOB_INDEX = _MODULE_CONSTANTS["BLOB_INDEX"]
KEEP = _MODULE_CONSTANTS["KEEP"]
REMOVE = _MODULE_CONSTANTS["REMOVE"]
CHANGE_VALUE = _MODULE_CONSTANTS["CHANGE_VALUE"]
INVALID_OFFSET = _MODULE_CONSTANTS["INVALID_OFFSET"]
RECORD_FORMAT_VERSION = _MODULE_CONSTANTS["RECORD_FORMAT_VERSION"]
_INGEST_MIN_KEYS = _MODULE_CONSTANTS["INGEST_MIN_KEYS"]


def protocol_constants() -> dict[str, int]:
    """The wire constants the native data plane uses."""
    return dict(_PROTOCOL)


def encode_ttl_value(ts: int, user: bytes) -> bytes:
    """The native TtlValue codec, for the cross-language test."""
    out = Out()
    lib.ttl_encode_ttl_value(ts, user, len(user), *out.refs())
    return out.bytes()


def is_expired(ts: int, ttl: int, now: int) -> bool:
    """The native expiry rule (the one the filter and the read path use), for the cross-check."""
    return bool(lib.ttl_is_expired(ts, ttl, now))


def key_hashes(key: bytes) -> tuple[int, int]:
    """The key filter's two hashes of a key, for the cross-language test."""
    h1, h2 = c_uint32(), c_uint32()
    lib.ttl_key_hashes_of(key, len(key), byref(h1), byref(h2))
    return h1.value, h2.value


def configure_memory(total_bytes: int, write_buffer_ratio: float) -> None:
    """The process-wide block cache and write-buffer budget of every DB opened afterwards."""
    lib.ttl_configure_memory(total_bytes, write_buffer_ratio)


def memory_usage() -> dict[str, Any]:
    budget, cache, buffers = c_uint64(), c_uint64(), c_uint64()
    ratio = c_double()
    lib.ttl_memory_usage(byref(budget), byref(ratio), byref(cache), byref(buffers))
    return {"budget_bytes": budget.value, "write_buffer_ratio": ratio.value,
            "block_cache_bytes": cache.value, "write_buffer_bytes": buffers.value}


def release_free_memory() -> bool:
    """Hands what the allocator holds free back to the OS (glibc's malloc_trim): a batch's
    writes are freed on whichever thread ends them, and glibc keeps such memory in per-thread
    arenas, so the server's RSS would otherwise stay at its largest batch. Whether any went."""
    return bool(lib.ttl_release_free_memory())


class _Handle:
    """Owns one handle of the library; frees it when collected."""

    __slots__ = ("_h",)
    _free: Any = None

    def __init__(self, handle: int | None) -> None:
        if not handle:
            raise MemoryError("the native engine returned no object")
        self._h = handle

    @classmethod
    def _own(cls, handle: c_void_p) -> Any:
        obj = cls.__new__(cls)
        _Handle.__init__(obj, handle.value)
        return obj

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h:
            self._h = None
            type(self)._free(h)


def _optional(out: Out, present: int) -> bytes | None:
    return out.bytes() if present else None


def _bound(value: str | bytes | None) -> tuple[bytes | None, int]:
    if value is None:
        return None, 0
    b = text(value)
    return b, len(b)


class KeyHashes(_Handle):
    """The key filter hashes of the keys a restore loads, for the shim's filter."""

    __slots__ = ()
    _free = lib.ttl_key_hashes_free

    def __init__(self) -> None:
        super().__init__(lib.ttl_key_hashes_new())

    def add(self, key: bytes) -> None:
        lib.ttl_key_hashes_add(self._h, key, len(key))

    def __len__(self) -> int:
        return int(lib.ttl_key_hashes_len(self._h))

    def bloom_words(self, bits_log2: int, probes: int) -> bytes:
        """The bits of a key filter layer holding every key added (little-endian u64 words)."""
        out = Out()
        lib.ttl_key_hashes_bloom_words(self._h, bits_log2, probes, *out.refs())
        return out.bytes()


class CleanupCursor(_Handle):
    __slots__ = ()
    _free = lib.ttl_cursor_free

    def __init__(self) -> None:
        super().__init__(lib.ttl_cursor_new())

    @property
    def next(self) -> bytes | None:
        out = Out()
        return _optional(out, lib.ttl_cursor_next(self._h, *out.refs()))


class Scan(_Handle):
    __slots__ = ()
    _free = lib.ttl_scan_free

    def next_chunk(self, max_bytes: int = 1 << 16) -> tuple[bool, list[tuple[bytes, bytes | None]]]:
        """(done, [(key, value or None)...]) of about max_bytes"""
        out, done = Out(), c_int()
        lib.ttl_scan_next_chunk(self._h, max_bytes, byref(done), *out.refs())
        return bool(done.value), decode_pairs(out.bytes())


# The per-entry calls, looked up once.
_txn_get = lib.ttl_txn_get_into
_txn_get_entry = lib.ttl_txn_get_entry_into
_txn_put = lib.ttl_txn_put
_txn_remove = lib.ttl_txn_remove

# Txn fields (ttl_txn_field in c_api.h).
_VERSION, _NOW, _WRITABLE, _PENDING_WRITES, _EXPIRED_ON_READ, _REMOVED_INCREMENTAL, _PENDING_BYTES = range(7)


class Txn(_Handle):
    __slots__ = ()
    _free = lib.ttl_txn_free

    def get(self, key: bytes) -> bytes | None:
        s = scratch
        n = _txn_get(self._h, key, len(key), s.buf, s.cap)
        return s.buf[:n] if 0 <= n <= s.cap else read_value(n, s)

    def get_entry(self, key: bytes) -> tuple[bytes | None, int]:
        """(value or None, its last-access time after the read, 0 if absent)"""
        s = scratch
        n = _txn_get_entry(self._h, key, len(key), s.ts_ref, s.buf, s.cap)
        return (s.buf[:n] if 0 <= n <= s.cap else read_value(n, s)), s.ts.value

    def remove_if_expired(self, key: bytes) -> None:
        lib.ttl_txn_remove_if_expired(self._h, key, len(key))

    def multi_get(self, keys: Iterable[bytes]) -> list[bytes | None]:
        out = Out()
        encoded = encode_list([text(k) for k in keys])
        lib.ttl_txn_multi_get(self._h, encoded, len(encoded), *out.refs())
        return decode_list(out.bytes())

    def put(self, key: bytes, value: bytes, committed: bool | None = None) -> None:
        # committed: what the caller proved about the key in the committed DB (None: nothing)
        if _txn_put(self._h, key, len(key), value, len(value), -1 if committed is None else int(committed)):
            raise_last()

    def remove(self, key: bytes) -> None:
        if _txn_remove(self._h, key, len(key)):
            raise_last()

    def scan(self, lower: bytes | None = None, upper: bytes | None = None) -> Scan:
        handle = c_void_p()
        lib.ttl_txn_scan(self._h, *_bound(lower), *_bound(upper), byref(handle))
        return Scan._own(handle)

    def key_scan(self) -> Scan:
        handle = c_void_p()
        lib.ttl_txn_key_scan(self._h, byref(handle))
        return Scan._own(handle)

    def advance_now(self, now: int) -> int:
        out = c_int64()
        lib.ttl_txn_advance_now(self._h, now, byref(out))
        return out.value

    def make_writable(self) -> None:
        lib.ttl_txn_make_writable(self._h)

    def check_writable(self) -> None:
        lib.ttl_txn_check_writable(self._h)

    def incremental_step(self) -> None:
        lib.ttl_txn_incremental_step(self._h)

    def write_changelog(self, path: str, header_json: str) -> int:
        out = c_uint64()
        lib.ttl_txn_write_changelog(self._h, text(path), text(header_json), byref(out))
        return out.value

    def apply(self, sst_path: str = "", end: bool = True) -> int:
        """Apply the pending writes atomically (a large batch bulk-loaded through an SST file at
        `sst_path`, when given); the change in the number of keys. `end=False` leaves the
        transaction open, so `write_changelog` may run meanwhile on another thread; the caller
        then ends it with `end("committed")`."""
        out = c_int64()
        lib.ttl_txn_apply(self._h, text(sst_path), int(end), byref(out))
        return out.value

    def known_delta(self) -> int | None:
        """The change in keys `apply` will return, when no written key needs a lookup to know
        it; None otherwise. Safe while `apply` runs on another thread."""
        known, out = c_int(), c_int64()
        lib.ttl_txn_known_delta(self._h, byref(known), byref(out))
        return out.value if known.value else None

    def end(self, state: str) -> None:
        lib.ttl_txn_end(self._h, text(state))

    @property
    def state(self) -> str:
        out = Out()
        lib.ttl_txn_state(self._h, *out.refs())
        return out.bytes().decode()

    @property
    def version(self) -> int:
        return int(lib.ttl_txn_field_of(self._h, _VERSION))

    @property
    def now(self) -> int:
        return int(lib.ttl_txn_field_of(self._h, _NOW))

    @property
    def writable(self) -> bool:
        return bool(lib.ttl_txn_field_of(self._h, _WRITABLE))

    @property
    def pending_writes(self) -> int:
        return int(lib.ttl_txn_field_of(self._h, _PENDING_WRITES))

    @property
    def expired_on_read(self) -> int:
        return int(lib.ttl_txn_field_of(self._h, _EXPIRED_ON_READ))

    @property
    def removed_incremental(self) -> int:
        return int(lib.ttl_txn_field_of(self._h, _REMOVED_INCREMENTAL))

    @property
    def pending_bytes(self) -> int:
        return int(lib.ttl_txn_field_of(self._h, _PENDING_BYTES))


class Snapshot(_Handle):
    __slots__ = ()
    _free = lib.ttl_snapshot_free

    def write_record_file(self, path: str, header_json: str, drop_expired: bool, ttl: int,
                          now: int) -> tuple[int, int]:
        """Write the pinned view as a snapshot record file; (records written, expired ones dropped)."""
        written, dropped = c_uint64(), c_uint64()
        lib.ttl_snapshot_write_record_file(self._h, text(path), text(header_json), int(drop_expired), ttl,
                                           now, byref(written), byref(dropped))
        return written.value, dropped.value


class RestoreBuilder(_Handle):
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

    def finish(self, snapshot_path: str, sst_path: str, hashes: KeyHashes | None = None) -> tuple[int, int]:
        """Load the snapshot ('' for none) with the gathered changelogs over it; (snapshot records, keys)."""
        records, keys = c_uint64(), c_uint64()
        lib.ttl_restore_finish(self._h, text(snapshot_path), text(sst_path),
                               hashes._h if hashes is not None else None, byref(records), byref(keys))
        return records.value, keys.value


class Connection(_Handle):
    __slots__ = ()
    _free = lib.ttl_connection_free

    def __init__(self, fd: int) -> None:
        super().__init__(lib.ttl_connection_new(fd))

    def serve(self, handler: Callable[[int, bytes], tuple[int, bytes] | None]) -> None:
        """Serve frames until the peer closes; `handler(code, payload)` answers the control plane."""
        raised: list[BaseException] = []

        def forward(_ctx: Any, code: int, data: int, size: int, reply: int) -> int:
            try:
                answer = handler(code, ctypes.string_at(data, size) if size else b"")
                if answer is None:
                    return 0
                reply_code, payload = answer
                payload = text(payload)
                lib.ttl_reply_set(reply, reply_code, payload, len(payload))
                return 1
            except BaseException as e:  # noqa: BLE001 - re-raised by serve() when the loop ends with it
                raised[:] = [e]
                lib.ttl_reply_fail(reply, f"{type(e).__name__}: {e}".encode("utf-8", "replace"))
                return -1

        callback = FORWARD(forward)
        try:
            lib.ttl_connection_serve(self._h, callback, None)
        except NativeFailure:
            if raised:
                raise raised[0] from None
            raise

    def read_frame(self) -> tuple[int, bytes] | None:
        out, got, code = Out(), c_int(), c_uint8()
        lib.ttl_connection_read_frame(self._h, byref(got), byref(code), *out.refs())
        return (code.value, out.bytes()) if got.value else None

    def send(self, code: int, payload: bytes) -> None:
        lib.ttl_connection_send(self._h, code, payload, len(payload))

    def bind(self, handle: int, txn: Txn | None) -> None:
        lib.ttl_connection_bind(self._h, handle, txn._h if txn is not None else None)

    def unbind(self, handle: int) -> None:
        lib.ttl_connection_unbind(self._h, handle)

    @property
    def native_requests(self) -> int:
        return int(lib.ttl_connection_native_requests(self._h))


class FilterHarness(_Handle):
    """One filter instance (one compaction run) with its own holder, clock and counters."""

    __slots__ = ()
    _free = lib.ttl_harness_free

    def __init__(self) -> None:
        super().__init__(lib.ttl_harness_new())

    def configure(self, state_type: int, timestamp_offset: int, ttl: int, query_time_after_num_entries: int,
                  fixed_element_length: int = -1, variable_length_list: bool = False) -> bool:
        """One-shot: False if already configured (the new config is then discarded)."""
        configured = c_int()
        lib.ttl_harness_configure(self._h, state_type, timestamp_offset, ttl, query_time_after_num_entries,
                                  fixed_element_length, int(variable_length_list), byref(configured))
        return bool(configured.value)

    def new_run(self) -> None:
        """A new filter instance (a new compaction run), same config holder."""
        lib.ttl_harness_new_run(self._h)

    def set_time(self, now: int) -> None:
        lib.ttl_harness_set_time(self._h, now)

    def decide(self, value_type: int, value: bytes) -> tuple[int, bytes | None]:
        """(decision, new value or None) for one entry"""
        out, decision, changed = Out(), c_int(), c_int()
        lib.ttl_harness_decide(self._h, value_type, value, len(value), byref(decision), byref(changed),
                               *out.refs())
        return decision.value, _optional(out, changed.value)

    @property
    def time_queries(self) -> int:
        return int(lib.ttl_harness_time_queries(self._h))


class Iterator(_Handle):
    __slots__ = ()
    _free = lib.ttl_iterator_free

    def next_chunk(self, max_bytes: int = 1 << 16) -> list[tuple[bytes, bytes]]:
        out = Out()
        lib.ttl_iterator_next_chunk(self._h, max_bytes, *out.refs())
        return decode_pairs(out.bytes())


class DB(_Handle):
    __slots__ = ()
    _free = lib.ttl_db_free

    def __init__(self, path: str, ttl: int = 0, state_type: int = STATE_VALUE, timestamp_offset: int = 0,
                 query_time_after_num_entries: int = 1000, periodic_compaction_seconds: int = 30 * 24 * 3600,
                 fixed_element_length: int = -1, variable_length_list: bool = False,
                 wall_clock: bool = False) -> None:
        handle = c_void_p()
        lib.ttl_db_open(text(path), ttl, state_type, timestamp_offset, query_time_after_num_entries,
                        periodic_compaction_seconds, fixed_element_length, int(variable_length_list),
                        int(wall_clock), byref(handle))
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
        lib.ttl_db_iterator(self._h, *_bound(lower), *_bound(upper), byref(handle))
        return Iterator._own(handle)

    def compact(self) -> None:
        lib.ttl_db_compact(self._h)

    def flush(self) -> None:
        lib.ttl_db_flush(self._h)

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
        out = c_uint64()
        lib.ttl_db_count_keys(self._h, byref(out))
        return out.value

    def set_time(self, now: int) -> None:
        lib.ttl_db_set_time(self._h, now)

    def begin(self, label: str, version: int, now: int, writable: bool, ttl_enabled: bool, ttl: int,
              update_on_read: bool, return_expired: bool, incremental_size: int, incremental_per_record: bool,
              cursor: CleanupCursor | None) -> Txn:
        """A transaction over one loaded version: the native data plane of one StateStore."""
        handle = c_void_p()
        cursor_handle = cursor._h if cursor is not None else None
        lib.ttl_db_begin(self._h, text(label), version, now, int(writable), int(ttl_enabled), ttl,
                         int(update_on_read), int(return_expired), incremental_size,
                         int(incremental_per_record), cursor_handle, byref(handle))
        return Txn._own(handle)

    def snapshot(self) -> Snapshot:
        """A pinned consistent view, to write a snapshot file from without holding the store."""
        handle = c_void_p()
        lib.ttl_db_snapshot(self._h, byref(handle))
        return Snapshot._own(handle)

    def restore_builder(self) -> RestoreBuilder:
        """A builder of this (empty) DB's state from a snapshot and the changelogs after it."""
        handle = c_void_p()
        lib.ttl_db_restore_builder(self._h, byref(handle))
        return RestoreBuilder._own(handle)

    def apply_changelog_file(self, path: str, hashes: KeyHashes | None = None,
                             ingest_min_keys: int = _INGEST_MIN_KEYS,
                             count_keys: bool = True) -> tuple[int, int]:
        records, change = c_uint64(), c_int64()
        lib.ttl_db_apply_changelog_file(self._h, text(path), hashes._h if hashes is not None else None,
                                        int(count_keys), ingest_min_keys, byref(records), byref(change))
        return records.value, change.value

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

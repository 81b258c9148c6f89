"""A native transaction: one store version's reads, pending writes, scans, changelog and apply
(native/src/txn.cpp), and the scans and incremental-cleanup cursor it hands out and takes."""

from __future__ import annotations

from collections.abc import Iterable
from ctypes import byref, c_int, c_int64, c_uint64, c_void_p

from ttlstate import _native_abi as abi
from ttlstate._native_handles import Handle, bound, optional
from ttlstate._native_lib import (
    Out,
    decode_list,
    decode_pairs,
    encode_list,
    lib,
    raise_last,
    read_value,
    scratch,
    text,
)


class CleanupCursor(Handle):
    __slots__ = ()
    _free = lib.ttl_cursor_free

    def __init__(self) -> None:
        super().__init__(lib.ttl_cursor_new())

    @property
    def next(self) -> bytes | None:
        out = Out()
        return optional(out, lib.ttl_cursor_next(self._h, *out.refs()))


class Scan(Handle):
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

# Txn fields (ttl_txn_field of the table).
_FIELD = {name: i for i, name in enumerate(abi.TXN_FIELDS)}
_VERSION, _NOW, _WRITABLE = _FIELD["VERSION"], _FIELD["NOW"], _FIELD["WRITABLE"]
_PENDING_WRITES, _PENDING_BYTES = _FIELD["PENDING_WRITES"], _FIELD["PENDING_BYTES"]
_EXPIRED_ON_READ, _REMOVED_INCREMENTAL = _FIELD["EXPIRED_ON_READ"], _FIELD["REMOVED_INCREMENTAL"]


class Txn(Handle):
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

    def append(self, key: bytes, more: bytes) -> None:
        """The key's value (none: empty) followed by `more` (Txn::Append)."""
        lib.ttl_txn_append(self._h, key, len(key), more, len(more))

    def put_entry(self, key: bytes, ttl_value: bytes) -> None:
        """A whole TtlValue of a key the committed DB lacks, its timestamp kept (Txn::PutEntry)."""
        lib.ttl_txn_put_entry(self._h, key, len(key), ttl_value, len(ttl_value))

    def remove(self, key: bytes) -> None:
        if _txn_remove(self._h, key, len(key)):
            raise_last()

    def scan(self, lower: bytes | None = None, upper: bytes | None = None) -> Scan:
        handle = c_void_p()
        lib.ttl_txn_scan(self._h, *bound(lower), *bound(upper), byref(handle))
        return Scan.own(handle)

    def key_scan(self) -> Scan:
        handle = c_void_p()
        lib.ttl_txn_key_scan(self._h, byref(handle))
        return Scan.own(handle)

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

    def write_changelog(self, path: str, header_json: str | bytes) -> int:
        out = c_uint64()
        lib.ttl_txn_write_changelog(self._h, text(path), text(header_json), byref(out))
        return out.value

    def apply(self, sst_path: str = "", end: bool = True) -> tuple[int, int]:
        """Apply the pending writes atomically (a large batch bulk-loaded through an SST file at
        `sst_path`, when given); the change in the number of keys, and of it the internal
        column families' keys'. `end=False` leaves the
        transaction open, so `write_changelog` may run meanwhile on another thread; the caller
        then ends it with `end("committed")`."""
        out, internal = c_int64(), c_int64()
        lib.ttl_txn_apply(self._h, text(sst_path), int(end), byref(out), byref(internal))
        return out.value, internal.value

    def known_delta(self) -> tuple[int, int] | None:
        """The change in keys `apply` will return, when no written key needs a lookup to know
        it; None otherwise. Safe while `apply` runs on another thread."""
        known, out, internal = c_int(), c_int64(), c_int64()
        lib.ttl_txn_known_delta(self._h, byref(known), byref(out), byref(internal))
        return (out.value, internal.value) if known.value else None

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

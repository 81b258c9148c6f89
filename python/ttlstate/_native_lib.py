"""Loads the native engine's shared library and declares its C ABI (native/include/ttlstate/c_api.h).

The library is plain C ABI, loaded with ctypes, so one binary serves every CPython version.
`ctypes.CDLL` releases the GIL for each call (blocking engine work runs without it) and a
`CFUNCTYPE` callback takes it back. This module holds what `ttlstate._native` needs to call the
library: the loaded library, its status codes as exceptions, and the list encoding of the ABI.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterable
from ctypes import (
    POINTER,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

LIBRARY_NAME = "libttlstate_native.so"
LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)


class StateError(RuntimeError):
    """A call the store's lifecycle does not allow (write after commit, superseded handle, ...)."""


class PeerGone(ConnectionError):
    """The shim closed the connection (or it broke)."""


# ttl_status -> the exception raised (TTL_ERR_CALLBACK is handled by Connection.serve).
_ERRORS: dict[int, type[Exception]] = {
    1: RuntimeError, 2: StateError, 3: PeerGone, 4: ValueError, 5: MemoryError, 6: IndexError,
    7: OverflowError,
}
CALLBACK_FAILED = 8


def _load() -> ctypes.CDLL:
    if not os.path.exists(LIBRARY_PATH):
        raise ImportError(f"the native engine library {LIBRARY_PATH} is not built")
    try:
        return ctypes.CDLL(LIBRARY_PATH)
    except OSError as e:
        raise ImportError(f"the native engine library {LIBRARY_PATH} does not load: {e}") from e


lib = _load()


class NativeFailure(Exception):
    """Raised by `check` for TTL_ERR_CALLBACK: the caller re-raises the callback's exception."""


def check(status: int, func: Any = None, args: Any = None) -> int:
    """ctypes errcheck: raises the exception a non-zero ttl_status stands for."""
    if status:
        message = lib.ttl_last_error().decode("utf-8", "replace")
        if status == CALLBACK_FAILED:
            raise NativeFailure(message)
        raise _ERRORS.get(status, RuntimeError)(message)
    return status


P = c_void_p  # an opaque handle
BUF = POINTER(c_void_p)  # const char** data
SIZE = POINTER(c_size_t)
INT = POINTER(c_int)
FORWARD = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint8, c_void_p, c_size_t, c_void_p)

# name: (restype, argtypes); a restype of None with "status" means ttl_status, checked.
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "ttl_last_error": (c_char_p, []),
    "ttl_constants": ("status", [BUF, SIZE]),
    "ttl_encode_ttl_value": ("status", [c_int64, c_char_p, c_size_t, BUF, SIZE]),
    "ttl_is_expired": (c_int, [c_int64, c_int64, c_int64]),
    "ttl_key_hashes_of": (None, [c_char_p, c_size_t, POINTER(c_uint32), POINTER(c_uint32)]),
    "ttl_configure_memory": ("status", [c_size_t, c_double]),
    "ttl_memory_usage": (None, [POINTER(c_uint64), POINTER(c_double), POINTER(c_uint64), POINTER(c_uint64)]),
    "ttl_key_hashes_new": (P, []),
    "ttl_key_hashes_free": (None, [P]),
    "ttl_key_hashes_add": ("status", [P, c_char_p, c_size_t]),
    "ttl_key_hashes_len": (c_uint64, [P]),
    "ttl_key_hashes_bloom_words": ("status", [P, c_int, c_int, BUF, SIZE]),
    "ttl_cursor_new": (P, []),
    "ttl_cursor_free": (None, [P]),
    "ttl_cursor_next": (c_int, [P, BUF, SIZE]),
    "ttl_scan_free": (None, [P]),
    "ttl_scan_next_chunk": ("status", [P, c_size_t, INT, BUF, SIZE]),
    "ttl_txn_free": (None, [P]),
    "ttl_txn_get": ("status", [P, c_char_p, c_size_t, INT, BUF, SIZE]),
    "ttl_txn_get_entry": ("status", [P, c_char_p, c_size_t, INT, POINTER(c_int64), BUF, SIZE]),
    "ttl_txn_remove_if_expired": ("status", [P, c_char_p, c_size_t]),
    "ttl_txn_multi_get": ("status", [P, c_char_p, c_size_t, BUF, SIZE]),
    "ttl_txn_put": ("status", [P, c_char_p, c_size_t, c_char_p, c_size_t, c_int]),
    "ttl_txn_remove": ("status", [P, c_char_p, c_size_t]),
    "ttl_txn_scan": ("status", [P, c_char_p, c_size_t, c_char_p, c_size_t, POINTER(P)]),
    "ttl_txn_key_scan": ("status", [P, POINTER(P)]),
    "ttl_txn_advance_now": ("status", [P, c_int64, POINTER(c_int64)]),
    "ttl_txn_make_writable": ("status", [P]),
    "ttl_txn_check_writable": ("status", [P]),
    "ttl_txn_incremental_step": ("status", [P]),
    "ttl_txn_write_changelog": ("status", [P, c_char_p, c_char_p, POINTER(c_uint64)]),
    "ttl_txn_apply": ("status", [P, c_char_p, POINTER(c_int64)]),
    "ttl_txn_end": ("status", [P, c_char_p]),
    "ttl_txn_state": ("status", [P, BUF, SIZE]),
    "ttl_txn_field_of": (c_int64, [P, c_int]),
    "ttl_snapshot_free": (None, [P]),
    "ttl_snapshot_write_record_file": ("status", [P, c_char_p, c_char_p, c_int, c_int64, c_int64,
                                                  POINTER(c_uint64), POINTER(c_uint64)]),
    "ttl_restore_free": (None, [P]),
    "ttl_restore_add_changelog": ("status", [P, c_char_p, POINTER(c_uint64)]),
    "ttl_restore_gathered_bytes": (c_uint64, [P]),
    "ttl_restore_finish": ("status", [P, c_char_p, c_char_p, P, POINTER(c_uint64), POINTER(c_uint64)]),
    "ttl_connection_new": (P, [c_int]),
    "ttl_connection_free": (None, [P]),
    "ttl_connection_serve": ("status", [P, FORWARD, c_void_p]),
    "ttl_reply_set": (None, [c_void_p, c_uint8, c_char_p, c_size_t]),
    "ttl_reply_fail": (None, [c_void_p, c_char_p]),
    "ttl_connection_read_frame": ("status", [P, INT, POINTER(c_uint8), BUF, SIZE]),
    "ttl_connection_send": ("status", [P, c_uint8, c_char_p, c_size_t]),
    "ttl_connection_bind": ("status", [P, c_uint32, P]),
    "ttl_connection_unbind": (None, [P, c_uint32]),
    "ttl_connection_native_requests": (c_uint64, [P]),
    "ttl_harness_new": (P, []),
    "ttl_harness_free": (None, [P]),
    "ttl_harness_configure": ("status", [P, c_int, c_size_t, c_int64, c_int64, c_int64, c_int, INT]),
    "ttl_harness_new_run": ("status", [P]),
    "ttl_harness_set_time": (None, [P, c_int64]),
    "ttl_harness_decide": ("status", [P, c_int, c_char_p, c_size_t, INT, INT, BUF, SIZE]),
    "ttl_harness_time_queries": (c_int64, [P]),
    "ttl_iterator_free": (None, [P]),
    "ttl_iterator_next_chunk": ("status", [P, c_size_t, BUF, SIZE]),
    "ttl_db_open": ("status", [c_char_p, c_int64, c_int, c_size_t, c_int64, c_uint64, c_int64, c_int, c_int,
                               POINTER(P)]),
    "ttl_db_free": (None, [P]),
    "ttl_db_get": ("status", [P, c_char_p, c_size_t, INT, BUF, SIZE]),
    "ttl_db_multi_get": ("status", [P, c_char_p, c_size_t, BUF, SIZE]),
    "ttl_db_write": ("status", [P, c_char_p, c_size_t]),
    "ttl_db_merge": ("status", [P, c_char_p, c_size_t, c_char_p, c_size_t]),
    "ttl_db_iterator": ("status", [P, c_char_p, c_size_t, c_char_p, c_size_t, POINTER(P)]),
    "ttl_db_compact": ("status", [P]),
    "ttl_db_flush": ("status", [P]),
    "ttl_db_int_property": ("status", [P, c_char_p, POINTER(c_uint64)]),
    "ttl_db_count_keys": ("status", [P, POINTER(c_uint64)]),
    "ttl_db_set_time": (None, [P, c_int64]),
    "ttl_db_begin": ("status", [P, c_char_p, c_int64, c_int64, c_int, c_int, c_int64, c_int, c_int, c_int64,
                                c_int, P, POINTER(P)]),
    "ttl_db_snapshot": ("status", [P, POINTER(P)]),
    "ttl_db_restore_builder": ("status", [P, POINTER(P)]),
    "ttl_db_apply_changelog_file": ("status", [P, c_char_p, P, c_size_t, POINTER(c_uint64),
                                               POINTER(c_int64)]),
    "ttl_db_has_filter": (c_int, [P]),
    "ttl_db_filter_metrics": (None, [P, POINTER(c_int64), POINTER(c_int64), POINTER(c_int64),
                                     POINTER(c_int64)]),
    "ttl_db_close": ("status", [P]),
}


def _declare() -> None:
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        if restype == "status":
            fn.restype = c_int
            fn.errcheck = check
        else:
            fn.restype = restype


_declare()


def text(value: str | bytes) -> bytes:
    """A std::string argument: str as UTF-8, bytes-like as is (what pybind11 accepted)."""
    return value.encode() if isinstance(value, str) else bytes(value)


class Out:
    """The out-parameters of one call: a data pointer and size into the library's result buffer."""

    __slots__ = ("data", "size")

    def __init__(self) -> None:
        self.data = c_void_p()
        self.size = c_size_t()

    def refs(self) -> tuple[Any, Any]:
        return ctypes.byref(self.data), ctypes.byref(self.size)

    def bytes(self) -> bytes:
        return ctypes.string_at(self.data.value, self.size.value) if self.size.value else b""


_HEADER = struct.Struct("<BI")


def encode_list(entries: Iterable[bytes | None]) -> bytes:
    """The ABI's list encoding: [u8 present][u32 little-endian size][bytes] per entry."""
    pack = _HEADER.pack
    parts: list[bytes] = []
    for e in entries:
        if e is None:
            parts.append(pack(0, 0))
        else:
            parts.append(pack(1, len(e)))
            parts.append(e)
    return b"".join(parts)


def decode_list(buf: bytes) -> list[bytes | None]:
    out: list[bytes | None] = []
    unpack = _HEADER.unpack_from
    pos, end = 0, len(buf)
    while pos < end:
        present, n = unpack(buf, pos)
        pos += 5
        out.append(buf[pos:pos + n] if present else None)
        pos += n
    return out


def decode_pairs(buf: bytes) -> list[tuple[Any, Any]]:
    flat = decode_list(buf)
    return list(zip(flat[0::2], flat[1::2], strict=True))

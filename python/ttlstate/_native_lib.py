"""Loads the native engine's shared library and declares its C ABI (native/include/ttlstate/c_api.h).

The library is plain C ABI, loaded with ctypes, so one binary serves every CPython version.
`ctypes.CDLL` releases the GIL for each call (blocking engine work runs without it) and a
`CFUNCTYPE` callback takes it back. This module holds what `ttlstate._native` needs to call the
library: the loaded library, its status codes as exceptions, and the list encoding of the ABI.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import struct
import threading
from collections.abc import Sequence
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


def raise_last() -> None:
    """Raises the exception of the thread's last failed call."""
    raise _ERRORS.get(lib.ttl_last_status(), RuntimeError)(lib.ttl_last_error().decode("utf-8", "replace"))


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
    "ttl_last_status": (c_int, []),
    "ttl_take": (None, [c_void_p, c_size_t]),
    "ttl_constants": ("status", [BUF, SIZE]),
    "ttl_encode_ttl_value": ("status", [c_int64, c_char_p, c_size_t, BUF, SIZE]),
    "ttl_is_expired": (c_int, [c_int64, c_int64, c_int64]),
    "ttl_key_hashes_of": (None, [c_char_p, c_size_t, POINTER(c_uint32), POINTER(c_uint32)]),
    "ttl_configure_memory": ("status", [c_size_t, c_double]),
    "ttl_memory_usage": (None, [POINTER(c_uint64), POINTER(c_double), POINTER(c_uint64), POINTER(c_uint64)]),
    "ttl_release_free_memory": (c_int, []),
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
    "ttl_txn_get_into": (c_int64, [P, c_char_p, c_size_t, c_void_p, c_size_t]),
    "ttl_txn_get_entry_into": (c_int64, [P, c_char_p, c_size_t, c_void_p, c_void_p, c_size_t]),
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
    "ttl_txn_apply": ("status", [P, c_char_p, c_int, POINTER(c_int64)]),
    "ttl_txn_known_delta": ("status", [P, POINTER(c_int), POINTER(c_int64)]),
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
    "ttl_db_get_into": (c_int64, [P, c_char_p, c_size_t, c_void_p, c_size_t]),
    "ttl_db_multi_get": ("status", [P, c_char_p, c_size_t, BUF, SIZE]),
    "ttl_db_write": ("status", [P, c_char_p, c_size_t]),
    "ttl_db_merge": ("status", [P, c_char_p, c_size_t, c_char_p, c_size_t]),
    "ttl_db_iterator": ("status", [P, c_char_p, c_size_t, c_char_p, c_size_t, POINTER(P)]),
    "ttl_db_compact": ("status", [P]),
    "ttl_db_flush": ("status", [P]),
    "ttl_db_checkpoint": ("status", [P, c_char_p]),
    "ttl_db_add_key_hashes": ("status", [P, P, POINTER(c_uint64)]),
    "ttl_db_int_property": ("status", [P, c_char_p, POINTER(c_uint64)]),
    "ttl_db_count_keys": ("status", [P, POINTER(c_uint64)]),
    "ttl_db_set_time": (None, [P, c_int64]),
    "ttl_db_begin": ("status", [P, c_char_p, c_int64, c_int64, c_int, c_int, c_int64, c_int, c_int, c_int64,
                                c_int, P, POINTER(P)]),
    "ttl_db_snapshot": ("status", [P, POINTER(P)]),
    "ttl_db_restore_builder": ("status", [P, POINTER(P)]),
    "ttl_db_apply_changelog_file": ("status", [P, c_char_p, P, c_int, c_size_t, POINTER(c_uint64),
                                               POINTER(c_int64)]),
    "ttl_db_has_filter": (c_int, [P]),
    "ttl_db_filter_metrics": (None, [P, POINTER(c_int64), POINTER(c_int64), POINTER(c_int64),
                                     POINTER(c_int64)]),
    "ttl_db_close": ("status", [P]),
}


# Per-entry calls that return a ttl_status the caller checks itself (`if status: raise_last()`):
# an errcheck costs a Python call per call.
UNCHECKED = frozenset({"ttl_txn_put", "ttl_txn_remove"})


# Calls that never block (in-memory work): they keep the GIL, as they did under pybind11, which
# saves releasing and taking it back. Every other call releases it (ctypes.CDLL).
KEEP_GIL = frozenset({
    "ttl_last_error", "ttl_last_status", "ttl_take", "ttl_constants", "ttl_encode_ttl_value",
    "ttl_is_expired", "ttl_key_hashes_of", "ttl_memory_usage", "ttl_key_hashes_new", "ttl_key_hashes_add",
    "ttl_key_hashes_len",
    "ttl_cursor_new", "ttl_cursor_next", "ttl_txn_put", "ttl_txn_remove", "ttl_txn_advance_now",
    "ttl_txn_make_writable", "ttl_txn_check_writable", "ttl_txn_end", "ttl_txn_state", "ttl_txn_field_of",
    "ttl_restore_gathered_bytes", "ttl_reply_set", "ttl_reply_fail", "ttl_connection_bind",
    "ttl_connection_unbind", "ttl_connection_native_requests", "ttl_harness_configure", "ttl_harness_new_run",
    "ttl_harness_set_time", "ttl_harness_decide", "ttl_harness_time_queries", "ttl_db_set_time",
    "ttl_db_has_filter", "ttl_db_filter_metrics",
})


def _declare() -> None:
    keep_gil = ctypes.PyDLL(LIBRARY_PATH)  # the same loaded library, called without releasing the GIL
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(keep_gil if name in KEEP_GIL else lib, name)
        setattr(lib, name, fn)  # `lib.<name>` is the one declared here
        fn.argtypes = argtypes
        if restype == "status" and name not in UNCHECKED:
            fn.restype = c_int
            fn.errcheck = check
        else:
            fn.restype = c_int if restype == "status" else restype


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


class Scratch(threading.local):
    """Per thread (calls run without the GIL): the buffer single values are read into, and an
    int64 out-parameter, allocated once."""

    def __init__(self) -> None:
        self.grow(4096)
        self.ts = c_int64()
        self.ts_ref = ctypes.addressof(self.ts)

    def grow(self, size: int) -> None:
        self.cap = size
        self.buf = ctypes.create_string_buffer(size)


scratch = Scratch()


def read_value(n: int, s: Scratch) -> bytes | None:
    """The result of a ttl_*_get_into call that returned n into s.buf."""
    if n < 0:
        if n == -1:
            return None
        raise_last()
    if n > s.cap:
        s.grow(max(n, 2 * s.cap))
        lib.ttl_take(s.buf, s.cap)
    return s.buf[:n]


def encode_list(entries: Sequence[bytes | None]) -> bytes:
    """The ABI's list (c_api.h): count, offsets, present flags, then the entries' bytes."""
    count = len(entries)
    header = 4 + 4 * (count + 1) + count
    ends = itertools.accumulate((len(e) if e is not None else 0 for e in entries), initial=header)
    present = bytes(e is not None for e in entries)
    return b"".join([struct.pack(f"<{count + 2}I", count, *ends), present, *(e or b"" for e in entries)])


def decode_list(raw: bytes) -> list[bytes | None]:
    count = int.from_bytes(raw[:4], "little")
    start = 4 + 4 * (count + 1)
    offsets = struct.unpack_from(f"<{count + 1}I", raw, 4)
    values: list[bytes | None] = [raw[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]
    present = raw[start:start + count]
    if present.count(0):
        values = [v if p else None for v, p in zip(values, present, strict=True)]
    return values


def decode_pairs(raw: bytes) -> list[tuple[Any, Any]]:
    flat = iter(decode_list(raw))
    return list(zip(flat, flat, strict=True))
